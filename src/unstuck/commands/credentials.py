"""Credential-changing workarounds: the parts of a call that change credentials, scopes,
identities or permissions, print or export secrets, or turn verification off.
Internal: not a supported import path (docs/reference/index.md lists those that are).

While a blocker of kind ``auth`` or ``permission`` is open, such a call is a workaround the
person has not agreed to (a new token, ``gh auth refresh -s``, ``sudo``, ``chmod`` of what was
refused, ``curl -k``, ``cat ~/.aws/credentials``). This module only *recognises* them; the
policy decides (it refuses them and names them in the question, except for the rows a user's
configuration allows by name).

* :func:`credential_changes` reads a shell command line with :func:`unstuck.commands.parse.parse_command_line`
  (pipelines, ``&&``/``;``, subshells, ``$(…)``, ``bash -c '…'`` strings, wrappers such as
  ``sudo``, ``env``, ``timeout``, ``xargs``, the program a package manager runs and the command
  of ``find -exec``) and matches every simple command, every wrapper around it and every
  environment assignment against the rows of ``unstuck/data/credential_changes.yaml`` (that
  file documents each field), with the matcher the interactive-call catalogue uses
  (:mod:`unstuck.commands.catalogue`). Matching is structural: a program's base name, its
  subcommand words, its options (``-k`` inside
  ``-sSk``, ``--scopes=x``, ``-o StrictHostKeyChecking=no``), its operands, the variables set
  for it (``GH_TOKEN=… gh``, ``export``, ``env X=…``, ``unset``) and where it writes
  (``> ~/.aws/credentials``, and the files programs write: ``tee F``, ``dd of=F``, the
  destination of ``cp``/``mv``/``install``, ``sed -i … F``, ``curl -o F``, from the catalogue's
  ``writers`` table). The inline code of interpreters (``python -c``, ``node -e``, ``perl -e``,
  ``ruby -e``, ``php -r``, ``deno eval``, ``pwsh -c``; the rows of ``unstuck/data/interpreters.yaml``
  that name a language, the table the command screen reads too: :mod:`unstuck.commands.interpreters`)
  is searched for each language's documented environment writes (``os.environ['X'] = …``,
  ``process.env.X = …``, ``$ENV{X} = …``, ``ENV['X'] = …``, ``putenv``) of variables the
  environment rows name, and for file writes of the credential files the ``redirect_to`` rows
  name (a path built from literals, ``Path.home() / '.aws' / 'credentials'``, counts as
  one). The command a code runs (``os.system('…')``, ``subprocess.run([...])``, ``system
  "…"``, ``os.execute``, awk's ``system()``) is read as a command line itself, three levels
  deep at most; an ``env=`` mapping or ``exec*e``/``spawn*e`` environment literal counts as an
  environment write. Code read from standard input (``python3 - <<< CODE``, a here-document,
  ``echo CODE | node``) and awk's program operand are read the same way; the words after
  ``python -c CODE`` are its ``sys.argv``, never code. Editors count as writers of the files
  they open, ``tar -x -C DIR``/``unzip -d DIR`` as writers into ``DIR`` (a credential
  directory such as ``~/.ssh`` is a change). ``read``, ``mapfile`` and ``printf -v`` assign
  the variables they name. A word that only *mentions* a program (``echo "do not use sudo"``,
  ``grep sudo file``) changes nothing, and a call asking for ``--help``/``--version`` changes
  nothing.
* :func:`credential_changes_in_arguments` reads the arguments of a tool that is not a shell:
  a key named for a credential (``token``, ``api_key``, ``password``, ``client_secret``;
  not ``max_tokens``, ``page_token``, ``token_type``) with a non-empty string value, an
  ``Authorization`` header with a literal credential (RFC 9110 section 11.6.2; RFC 6750
  section 2.1 for ``Bearer``), and a URL carrying a password (RFC 3986 section 3.2.1).

Every row names its source (the program's manual or the vendor's reference). A user adds rows
in files of the same format (:func:`load_credential_catalogue`); row names are unique, since a
policy allows exceptions by name.

The ``command`` a change quotes is cleaned of terminal escapes, put on one line, bounded to
:data:`COMMAND_MAX_CHARS` characters, and has the credentials it carries masked (``***``): the
value of a token variable or option, an ``Authorization`` header's credential, a URL's
password, and credentials of the shapes their issuers document.

All regular expressions compile under google-re2 (linear time on any text).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unstuck.commands.catalogue import (
    RE2_QUIET,
    Call,
    Words,
    asks_for_help,
    calls,
    has_option,
    option_name,
    option_names,
    re2_pattern,
    read_words,
    row_fields,
    starts_with,
    string_list,
    subcommand_words,
)
from unstuck.commands.interpreters import (
    CodeEffects,
    code_effects,
    find_interpreter,
    program_texts,
)
from unstuck.commands.parse import SimpleCommand, base_name, parse_command_line
from unstuck.core.cache import bundled_document
from unstuck.core.errors import UnstuckError
from unstuck.core.regex import LazyRegex
from unstuck.core.text import clean_terminal_text

__all__ = [
    "ARGUMENT_CHANGE_NAMES",
    "ARGUMENT_MAX_CHARS",
    "ARGUMENT_MAX_DEPTH",
    "ARGUMENT_MAX_VALUES",
    "COMMAND_MAX_CHARS",
    "ChangeKind",
    "CredentialCatalogue",
    "CredentialCatalogueError",
    "CredentialChange",
    "CredentialRow",
    "OptionRule",
    "credential_changes",
    "credential_changes_in_arguments",
    "load_credential_catalogue",
    "parse_credential_catalogue",
    "prints_credential",
]

#: A change quotes at most this many characters of its command (an ellipsis marks a cut).
COMMAND_MAX_CHARS = 200
#: :func:`credential_changes_in_arguments` reads at most this many values, this deep, and
#: this many characters of each string.
ARGUMENT_MAX_VALUES = 2000
ARGUMENT_MAX_DEPTH = 16
ARGUMENT_MAX_CHARS = 65536


class ChangeKind(enum.StrEnum):
    """What a credential-changing call changes.

    ``TOKEN``: mints, swaps, injects or stores a credential (``gh auth login --with-token``,
    ``GH_TOKEN=…``, ``aws configure set aws_access_key_id``, ``curl -H "Authorization: …"``,
    ``docker login --password-stdin``). ``SCOPE``: widens or changes a token's scopes
    (``gh auth refresh -s``). ``IDENTITY``: acts as another user, account, profile or key
    (``gh auth switch``, ``sudo -u``, ``su bob``, ``aws --profile``, ``kubectl config
    use-context``, ``ssh -i``). ``PRIVILEGE``: raises privileges or grants permissions
    (``sudo``, ``gh pr merge --admin``, ``chmod``/``chown``/``setfacl`` of paths, ``usermod
    -aG``, IAM grants). ``VERIFICATION``: turns a check off (``curl -k``, ``git -c
    http.sslVerify=false``, ``NODE_TLS_REJECT_UNAUTHORIZED=0``, ``StrictHostKeyChecking=no``,
    ``git commit --no-verify``). ``SECRET_EXPORT``: prints or exports secrets (``env``,
    ``gh auth token``, ``cat ~/.aws/credentials``, ``echo $GITHUB_TOKEN``).
    """

    TOKEN = "token"
    SCOPE = "scope"
    IDENTITY = "identity"
    PRIVILEGE = "privilege"
    VERIFICATION = "verification"
    SECRET_EXPORT = "secret_export"


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """One credential-changing part of a call.

    Attributes:
        name: the catalogue row's name (``gh-auth-refresh-scopes``); a policy allows
            exceptions by this name.
        kind: what it changes.
        command: the simple command (or ``NAME=value`` assignment, or argument path) that
            matched, as written, on one line, credentials masked, at most
            :data:`COMMAND_MAX_CHARS` characters.
        why: one line for the question ("widens or changes the scopes of gh's token").
        targets: the paths it changes or writes (the operands of ``chmod``/``chown``/
            ``setfacl``, a file a redirection writes); empty otherwise.
        source: where the rule comes from (the row's source).
    """

    name: str
    kind: ChangeKind
    command: str
    why: str
    targets: tuple[str, ...]
    source: str


class CredentialCatalogueError(UnstuckError, ValueError):
    """A catalogue file that cannot be read or has a malformed row; the message names the
    file and the row (``creds.yaml: row 3 (my-row): 'kind' must be one of …``)."""


@dataclass(frozen=True, slots=True)
class OptionRule:
    """An option a row looks for: its name (``-k``, ``--scopes``, ``-tls-skip-verify``) and,
    optionally, a re2 pattern its value must contain (searched; anchor it with ``^…$``). The
    value is the attached one (``--x=v``, ``-ov``), else the next word when the option takes
    a value (it is in the row's ``value_options``), else the empty string (written bare)."""

    name: str
    value: str | None = None
    compiled: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True, eq=False)
class CredentialRow:
    """One catalogue row, validated (``unstuck/data/credential_changes.yaml`` documents each
    field). A row matches a program call (``programs``; ``*`` for any program), an
    environment variable (``env_names``/``env_pattern``), or a written file (``redirect_to``).
    ``prints``: the call prints a credential (:func:`prints_credential`). ``origin`` names the
    file and row it came from."""

    name: str
    kind: ChangeKind
    why: str
    source: str
    origin: str
    programs: frozenset[str] = frozenset()
    subcommand: tuple[frozenset[str], ...] = ()
    with_options: tuple[OptionRule, ...] = ()
    unless: tuple[OptionRule, ...] = ()
    value_options: frozenset[str] = frozenset()
    operands: Any = None
    any_operand: Any = None
    last_operand: Any = None
    dash_operands: Any = None
    alone: bool = False
    no_arguments: bool = False
    h_option: bool = False
    targets: int | None = None
    targets_all_with: frozenset[str] = frozenset()
    redirect_to: Any = None
    env_names: frozenset[str] = frozenset()
    env_pattern: Any = None
    env_value: Any = None
    env_program: frozenset[str] = frozenset()
    option_names: frozenset[str] = frozenset()
    prints: bool = False

    @property
    def is_env(self) -> bool:
        return bool(self.env_names) or self.env_pattern is not None


@dataclass(frozen=True, slots=True, eq=False)
class CredentialCatalogue:
    """Rows in the order they are tried (a user's rows before the bundled ones), indexed.

    ``names`` are the row names (a policy checks an allowed exception against them);
    ``files`` the files the rows came from."""

    rows: tuple[CredentialRow, ...]
    files: tuple[str, ...] = ()
    by_program: Mapping[str, tuple[CredentialRow, ...]] = field(default_factory=dict, repr=False)
    any_program: tuple[CredentialRow, ...] = field(default=(), repr=False)
    env_by_name: Mapping[str, tuple[CredentialRow, ...]] = field(default_factory=dict, repr=False)
    env_patterns: tuple[CredentialRow, ...] = field(default=(), repr=False)
    writes: tuple[CredentialRow, ...] = field(default=(), repr=False)
    order: Mapping[str, int] = field(default_factory=dict, repr=False)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.order)


# ---------------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------------

_BUNDLED = "credential_changes.yaml"
_TOP_KEYS = frozenset({"changes", "value_options"})
#: Top-level tables only the bundled file holds (where programs write).
_BUNDLED_TOP_KEYS = frozenset({"writers"})
_ROW_KEYS = frozenset({
    "name", "kind", "why", "source", "program", "subcommand", "with_options", "unless", "value_options",
    "operands", "any_operand", "last_operand", "dash_operands", "alone", "no_arguments", "h_option", "targets",
    "targets_all_with", "redirect_to", "env", "env_pattern", "value", "prints",
})
_ENV_KEYS = frozenset({"name", "kind", "why", "source", "env", "env_pattern", "value", "program"})
_NAME = LazyRegex(r"^[a-z0-9][a-z0-9-]*$")
_ENV_NAME = LazyRegex(r"^[A-Za-z_][A-Za-z0-9_]*$")


_QUIET = RE2_QUIET


def _regex(where: str, key: str, pattern: object) -> Any:
    return re2_pattern(pattern, where, key, CredentialCatalogueError)


def _strings(where: str, key: str, raw: object) -> tuple[str, ...]:
    return string_list(raw, where, key, CredentialCatalogueError)


def _option_name(where: str, key: str, text: str) -> str:
    return option_name(text, where, key, CredentialCatalogueError)


def _option_rules(where: str, key: str, raw: object) -> tuple[OptionRule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise CredentialCatalogueError(f"{where}: '{key}' must be a list of options, got {raw!r}")
    rules: list[OptionRule] = []
    for entry in raw:
        if isinstance(entry, str):
            rules.append(OptionRule(_option_name(where, key, entry.strip())))
        elif isinstance(entry, Mapping):
            unknown = sorted(str(k) for k in entry if k not in ("option", "value"))
            if unknown or not isinstance(entry.get("option"), str):
                raise CredentialCatalogueError(
                    f"{where}: '{key}' entry {dict(entry)!r} must be an option name or a mapping with 'option' "
                    f"and 'value' (a re2 pattern)")
            name = _option_name(where, key, str(entry["option"]).strip())
            pattern = entry.get("value")
            compiled = _regex(where, f"{key} {name} value", pattern)
            rules.append(OptionRule(name, str(pattern), compiled))
        else:
            raise CredentialCatalogueError(f"{where}: '{key}' entry {entry!r} must be an option name or a mapping")
    return tuple(rules)


def _flag(where: str, key: str, raw: Mapping[str, Any]) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise CredentialCatalogueError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _optional_regex(where: str, key: str, raw: Mapping[str, Any]) -> Any:
    return _regex(where, key, raw[key]) if raw.get(key) is not None else None


def _row(raw: object, where: str, shared_values: Mapping[str, frozenset[str]]) -> CredentialRow:
    if not isinstance(raw, Mapping):
        raise CredentialCatalogueError(f"{where}: a row must be a mapping, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise CredentialCatalogueError(f"{where}: 'name' is required: lower-case letters, digits and '-', got {name!r}")
    where = f"{where} ({name})"
    row_fields(raw, where, _ROW_KEYS | {"program"}, CredentialCatalogueError)
    try:
        kind = ChangeKind(str(raw.get("kind")))
    except ValueError:
        raise CredentialCatalogueError(f"{where}: 'kind' must be one of {', '.join(k.value for k in ChangeKind)}, "
                                       f"got {raw.get('kind')!r}") from None
    texts: dict[str, str] = {}
    for key in ("why", "source"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise CredentialCatalogueError(f"{where}: '{key}' is required and must be a non-empty string")
        texts[key] = " ".join(value.split())
    programs = _strings(where, "program", raw.get("program"))
    for program in programs:
        if "/" in program or any(ch.isspace() for ch in program):
            raise CredentialCatalogueError(f"{where}: 'program' {program!r} must be a base name (or '*')")
    is_env = raw.get("env") is not None or raw.get("env_pattern") is not None
    if is_env:
        extra = sorted(str(k) for k in raw if k not in _ENV_KEYS)
        if extra:
            raise CredentialCatalogueError(f"{where}: an 'env' row takes only {', '.join(sorted(_ENV_KEYS))}; "
                                           f"remove {', '.join(extra)}")
        names = _strings(where, "env", raw.get("env"))
        for env_name in names:
            if not _ENV_NAME.match(env_name):
                raise CredentialCatalogueError(f"{where}: 'env' entry {env_name!r} is not a variable name")
        if "*" in programs:
            raise CredentialCatalogueError(f"{where}: an 'env' row's 'program' names programs, not '*'")
        return CredentialRow(
            name=name, kind=kind, why=texts["why"], source=texts["source"], origin=where,
            env_names=frozenset(names), env_pattern=_optional_regex(where, "env_pattern", raw),
            env_value=_optional_regex(where, "value", raw), env_program=frozenset(programs))
    if raw.get("value") is not None:
        raise CredentialCatalogueError(f"{where}: 'value' belongs to an 'env' row")
    redirect_to = _optional_regex(where, "redirect_to", raw)
    if not programs and redirect_to is None:
        raise CredentialCatalogueError(f"{where}: a row needs 'program', 'env', 'env_pattern' or 'redirect_to'")
    subcommand = subcommand_words(raw.get("subcommand"), where, CredentialCatalogueError)
    values = {_option_name(where, "value_options", o)
              for o in _strings(where, "value_options", raw.get("value_options"))}
    for program in programs:
        values |= shared_values.get(program, frozenset())
    with_options = _option_rules(where, "with_options", raw.get("with_options"))
    unless = _option_rules(where, "unless", raw.get("unless"))
    targets_all_with = frozenset(_option_name(where, "targets_all_with", o)
                                 for o in _strings(where, "targets_all_with", raw.get("targets_all_with")))
    targets = raw.get("targets")
    if targets is not None and (not isinstance(targets, int) or isinstance(targets, bool) or targets < 0):
        raise CredentialCatalogueError(f"{where}: 'targets' must be the index (0, 1, …) of the first operand that is "
                                       f"a path, got {targets!r}")
    return CredentialRow(
        name=name, kind=kind, why=texts["why"], source=texts["source"], origin=where,
        programs=frozenset(programs), subcommand=subcommand,
        with_options=with_options,
        unless=unless,
        value_options=frozenset(values),
        operands=_optional_regex(where, "operands", raw),
        any_operand=_optional_regex(where, "any_operand", raw),
        last_operand=_optional_regex(where, "last_operand", raw),
        dash_operands=_optional_regex(where, "dash_operands", raw),
        alone=_flag(where, "alone", raw),
        no_arguments=_flag(where, "no_arguments", raw),
        h_option=_flag(where, "h_option", raw),
        prints=_flag(where, "prints", raw),
        targets=targets,
        targets_all_with=targets_all_with,
        redirect_to=redirect_to,
        option_names=frozenset(rule.name for rule in (*with_options, *unless)) | targets_all_with,
    )


def parse_credential_catalogue(text: str, name: str) -> tuple[CredentialRow, ...]:
    """The rows of one catalogue file's text, validated; ``name`` is named in every error.

    The text is a YAML mapping with a ``changes`` list of rows and an optional
    ``value_options`` mapping (program → options that take a value, shared by its rows).

    Raises:
        CredentialCatalogueError: naming the file and the row, for text that is not YAML, a
            missing ``changes`` list, an unknown key or field, a kind outside
            :class:`ChangeKind`, a row without ``why`` or ``source``, a pattern re2 refuses,
            or two rows with one name.
    """
    from unstuck.core.readers import parse_yaml  # loaded when a YAML text is first read

    return _rows_of_document(parse_yaml(text, where=name, error=CredentialCatalogueError), name)


def _rows_of_document(document: object, name: str) -> tuple[CredentialRow, ...]:
    if not isinstance(document, Mapping) or not isinstance(document.get("changes"), list):
        raise CredentialCatalogueError(f"{name}: must be a mapping with a 'changes' list of rows")
    known = _TOP_KEYS | _BUNDLED_TOP_KEYS if name == _BUNDLED else _TOP_KEYS
    unknown = sorted(str(k) for k in document if k not in known)
    if unknown:
        raise CredentialCatalogueError(f"{name}: unknown top-level key(s) {', '.join(unknown)} "
                                       f"(known: {', '.join(sorted(_TOP_KEYS))})")
    shared_raw = document.get("value_options") or {}
    if not isinstance(shared_raw, Mapping):
        raise CredentialCatalogueError(f"{name}: 'value_options' must map program names to lists of options")
    shared = {str(program): frozenset(_option_name(f"{name}: value_options", str(program), o)
                                      for o in _strings(f"{name}: value_options", str(program), options))
              for program, options in shared_raw.items()}
    rows = tuple(_row(raw, f"{name}: row {index + 1}", shared) for index, raw in enumerate(document["changes"]))
    seen: dict[str, str] = {}
    for row in rows:
        if row.name in seen:
            raise CredentialCatalogueError(f"{row.origin}: the name is already used by {seen[row.name]}")
        seen[row.name] = row.origin
    return rows


def _catalogue(rows: Sequence[CredentialRow], files: Sequence[str]) -> CredentialCatalogue:
    order: dict[str, int] = {}
    for index, row in enumerate(rows):
        if row.name in order:  # a user's row (first) against a bundled one
            raise CredentialCatalogueError(f"{rows[order[row.name]].origin}: the name is already used by {row.origin}")
        order[row.name] = index
    by_program: dict[str, list[CredentialRow]] = {}
    any_program: list[CredentialRow] = []
    env_by_name: dict[str, list[CredentialRow]] = {}
    env_patterns: list[CredentialRow] = []
    writes: list[CredentialRow] = []
    for row in rows:
        if row.is_env:
            for env_name in row.env_names:
                env_by_name.setdefault(env_name, []).append(row)
            if row.env_pattern is not None:
                env_patterns.append(row)
        elif not row.programs:
            writes.append(row)
        else:
            for program in row.programs:
                if program == "*":
                    any_program.append(row)
                else:
                    by_program.setdefault(program, []).append(row)
    return CredentialCatalogue(
        rows=tuple(rows), files=tuple(files),
        by_program={k: tuple(v) for k, v in by_program.items()}, any_program=tuple(any_program),
        env_by_name={k: tuple(v) for k, v in env_by_name.items()}, env_patterns=tuple(env_patterns),
        writes=tuple(writes), order=order)


@functools.cache
def _bundled_rows() -> tuple[CredentialRow, ...]:
    return _rows_of_document(bundled_document(_BUNDLED, _bundled_yaml), _BUNDLED)


@functools.lru_cache(maxsize=32)
def _load(stamps: tuple[tuple[str, int], ...]) -> CredentialCatalogue:
    rows: list[CredentialRow] = []
    for path, _ in stamps:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise CredentialCatalogueError(f"{path}: cannot read the credential catalogue: {exc.strerror or exc}") \
                from None
        except UnicodeDecodeError as exc:
            raise CredentialCatalogueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        rows.extend(parse_credential_catalogue(text, path))
    rows.extend(_bundled_rows())
    return _catalogue(rows, (*(path for path, _ in stamps), _BUNDLED))


def load_credential_catalogue(extra: Iterable[Path] = ()) -> CredentialCatalogue:
    """The bundled catalogue plus a user's own YAML files (same format, validated alike).

    Args:
        extra: paths of the user's files; their rows are tried before the bundled ones.

    Returns:
        The catalogue; cached per list of files and their modification times (the common
        case, no files, costs one dictionary look-up).

    Raises:
        CredentialCatalogueError: a file that cannot be read, is not UTF-8 YAML, has a
            malformed row, or reuses a row name (its own or a bundled one); the message names
            the file and the row.
    """
    stamps: list[tuple[str, int]] = []
    for path in extra:
        try:
            stamps.append((str(path), Path(path).stat().st_mtime_ns))
        except OSError as exc:
            raise CredentialCatalogueError(f"{path}: cannot read the credential catalogue: {exc.strerror or exc}") \
                from None
    return _load(tuple(stamps))


# ---------------------------------------------------------------------------------------------
# reading a call's words
# ---------------------------------------------------------------------------------------------

def _has(words: Words, rule: OptionRule) -> bool:
    if rule.compiled is None:
        return has_option(words, rule.name)
    compiled = rule.compiled
    return has_option(words, rule.name, lambda value: compiled.search(value or "") is not None)


_OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_INPUT_REDIRECTS = frozenset({"<", "<>"})


def _written(command: SimpleCommand) -> list[str]:
    return [r.target for r in command.redirects if r.operator in _OUTPUT_REDIRECTS and r.target]


def _read_from(command: SimpleCommand) -> list[str]:
    return [r.target for r in command.redirects
            if r.operator in _INPUT_REDIRECTS and r.descriptor in (None, 0) and r.target]


@dataclass(frozen=True, slots=True)
class _Found:
    row: CredentialRow
    command: SimpleCommand | None
    text: str
    targets: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    why: str | None = None


def _h_is_help(row: CredentialRow) -> bool:
    return not row.h_option and "-h" not in row.value_options and not any(
        rule.name == "-h" for rule in (*row.with_options, *row.unless))


_WordsCache = dict[tuple[frozenset[str], frozenset[str], Any], Words]


def _match(row: CredentialRow, call: Call, cache: _WordsCache) -> _Found | None:
    if row.alone and call.wraps:
        return None
    if row.no_arguments and call.args:
        return None
    key = (row.value_options, row.option_names, row.dash_operands)
    words = cache.get(key)
    if words is None:
        words = read_words(call.args, row.value_options, row.option_names, row.dash_operands)
        cache[key] = words
    if asks_for_help(words, _h_is_help(row)):
        return None
    if not starts_with(words, row.subcommand):
        return None
    if row.with_options and not any(_has(words, rule) for rule in row.with_options):
        return None
    if any(_has(words, rule) for rule in row.unless):
        return None
    operands = words.positionals[len(row.subcommand):]
    if row.operands is not None and not row.operands.search(" ".join(operands)):
        return None
    if row.any_operand is not None and not any(
            row.any_operand.search(word) for word in (*operands, *_read_from(call.command))):
        return None
    if row.last_operand is not None and not (operands and row.last_operand.search(operands[-1])):
        return None
    written: tuple[str, ...] = ()
    if row.redirect_to is not None:
        written = tuple(target for target in _written(call.command) if row.redirect_to.search(target))
        if not written:
            return None
    targets: tuple[str, ...] = written
    if row.targets is not None:
        if any(o.name in row.targets_all_with for o in words.options):
            targets = (*targets, *operands)
        else:
            targets = (*targets, *operands[row.targets:])
    secrets: tuple[str, ...] = ()
    if row.kind is ChangeKind.TOKEN:
        secrets = tuple(o.value for o in words.options if o.value
                        and any(rule.name == o.name for rule in row.with_options))
    return _Found(row, call.command, _shown(call.command), targets, secrets)


def _write_match(row: CredentialRow, command: SimpleCommand, targets: Sequence[str]) -> _Found | None:
    written = tuple(dict.fromkeys(target for target in targets if row.redirect_to.search(target)))
    return _Found(row, command, _shown(command), written) if written else None


# ---------------------------------------------------------------------------------------------
# where programs write, and what interpreters' inline code writes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Writer:
    """Where one program writes files (a ``writers`` entry of the bundled catalogue)."""

    programs: frozenset[str]
    operands: str | None  # "all", "last" or None
    operand_prefix: str | None
    options: frozenset[str]
    with_options: frozenset[str]
    value_options: frozenset[str]
    source: str


_WRITER_KEYS = frozenset({"program", "operands", "operand_prefix", "options", "with_options", "value_options",
                          "source"})


def _entry(raw: object, where: str, known: frozenset[str]) -> Mapping[str, Any]:
    row_fields(raw, where, known, CredentialCatalogueError)
    assert isinstance(raw, Mapping)
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise CredentialCatalogueError(f"{where}: 'source' is required and must be a non-empty string")
    if not _strings(where, "program", raw.get("program")):
        raise CredentialCatalogueError(f"{where}: 'program' is required")
    return raw


def _options(where: str, key: str, raw: Mapping[str, Any]) -> frozenset[str]:
    return option_names(raw.get(key), where, key, CredentialCatalogueError)


def _parse_writer(raw: object, where: str) -> _Writer:
    entry = _entry(raw, where, _WRITER_KEYS)
    operands = entry.get("operands")
    if operands not in (None, "all", "last"):
        raise CredentialCatalogueError(f"{where}: 'operands' must be 'all' or 'last', got {operands!r}")
    prefix = entry.get("operand_prefix")
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise CredentialCatalogueError(f"{where}: 'operand_prefix' must be a non-empty string, got {prefix!r}")
    writer = _Writer(frozenset(_strings(where, "program", entry.get("program"))), operands, prefix,
                     _options(where, "options", entry), _options(where, "with_options", entry),
                     _options(where, "value_options", entry), " ".join(str(entry["source"]).split()))
    if writer.operands is None and writer.operand_prefix is None and not writer.options:
        raise CredentialCatalogueError(f"{where}: a writer needs 'operands', 'operand_prefix' or 'options'")
    return writer


def _writers_of_document(document: object, name: str) -> Mapping[str, tuple[_Writer, ...]]:
    if not isinstance(document, Mapping) or not isinstance(document.get("writers") or [], list):
        raise CredentialCatalogueError(f"{name}: must be a mapping with a 'writers' list")
    writers: dict[str, list[_Writer]] = {}
    for index, raw in enumerate(document.get("writers") or []):
        writer = _parse_writer(raw, f"{name}: writers entry {index + 1}")
        for program in writer.programs:
            writers.setdefault(program, []).append(writer)
    return {k: tuple(v) for k, v in writers.items()}


def _parse_writers(text: str, name: str) -> Mapping[str, tuple[_Writer, ...]]:
    """The ``writers`` table of a catalogue file's text (only the bundled file has one).

    Raises:
        CredentialCatalogueError: naming the file and the entry, for a malformed entry.
    """
    from unstuck.core.readers import parse_yaml  # loaded when a YAML text is first read

    return _writers_of_document(parse_yaml(text, where=name, error=CredentialCatalogueError), name)


def _bundled_yaml(text: str) -> object:
    """A bundled data file's YAML document (its JSON is cached by :func:`bundled_document`)."""
    from unstuck.core.readers import parse_yaml  # loaded when a YAML text is first read

    return parse_yaml(text, where="unstuck/data", error=CredentialCatalogueError)


@functools.cache
def _writers() -> Mapping[str, tuple[_Writer, ...]]:
    return _writers_of_document(bundled_document(_BUNDLED, _bundled_yaml), _BUNDLED)


def _writer_targets(writers: Mapping[str, tuple[_Writer, ...]], call: Call) -> list[str]:
    """The files ``call`` writes by its ``writers`` entries (``tee F``, ``dd of=F``, ``cp A F``,
    ``sed -i … F``, ``curl -o F``)."""
    targets: list[str] = []
    for writer in writers.get(call.program, ()):
        words = read_words(call.args, writer.value_options | writer.options, writer.options | writer.with_options,
                            None)
        names = {o.name for o in words.options}
        if writer.with_options and not names & writer.with_options:
            continue
        targets.extend(o.value for o in words.options if o.name in writer.options and o.value)
        operands = words.positionals
        if writer.operand_prefix is not None:
            targets.extend(word[len(writer.operand_prefix):] for word in operands
                           if word.startswith(writer.operand_prefix))
        if writer.operands == "all":
            targets.extend(operands)
        elif writer.operands == "last" and len(operands) >= 2:
            targets.append(operands[-1])
    return targets


def _interpreted(call: Call, stdin: str | None = None) -> Iterator[tuple[str, CodeEffects]]:
    """The option of each code string of a call of an interpreter whose code is read for
    credential changes (one with a language), with what the code does."""
    interpreter = find_interpreter(call.program)
    if interpreter is None or interpreter.language is None:
        return
    for option, code in program_texts(interpreter, call.args, stdin):
        yield option, code_effects(interpreter, code[:ARGUMENT_MAX_CHARS])


# ---------------------------------------------------------------------------------------------
# environment assignments
# ---------------------------------------------------------------------------------------------

#: Builtins whose ``NAME=value`` arguments assign variables (bash(1), SHELL BUILTIN COMMANDS).
_DECLARATIONS = frozenset({"export", "declare", "typeset", "local", "readonly"})
_ASSIGNMENT = LazyRegex(r"(?s)^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", _QUIET)


@functools.lru_cache(maxsize=4096)
def _env_row(catalogue: CredentialCatalogue, name: str, value: str | None,
             program: str | None) -> CredentialRow | None:
    """The first row about variable ``name`` set to ``value`` (``None``: unset) for
    ``program`` (``None``: not set for one program)."""
    if value is not None and value in (f"${name}", f"${{{name}}}"):
        return None  # NAME=$NAME changes nothing
    candidates = [*catalogue.env_by_name.get(name, ()),
                  *(row for row in catalogue.env_patterns if row.env_pattern.search(name))]
    candidates.sort(key=lambda row: catalogue.order[row.name])
    for row in candidates:
        if row.env_program and program not in row.env_program:
            continue
        if value is None:
            if row.env_value is None:
                return row
            continue
        if row.env_value is None or row.env_value.search(value):
            return row
    return None


#: Builtins that assign the variables they name from input or a format (bash(1), SHELL BUILTIN
#: COMMANDS): ``read [-ers] [-a aname] [-d delim] [-i text] [-n nchars] [-N nchars] [-p prompt]
#: [-t timeout] [-u fd] [name ...]`` ("the first word is assigned to the first name");
#: ``mapfile``/``readarray [-d delim] [-n count] [-O origin] [-s count] [-t] [-u fd] [-C callback]
#: [-c quantum] [array]``; ``printf -v var`` ("assign the output to the variable var").
#: Value: the options naming a variable, and the options taking a value.
_READS_INTO: Mapping[str, tuple[frozenset[str], frozenset[str], bool]] = {
    "read": (frozenset({"-a"}), frozenset({"-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u"}), True),
    "mapfile": (frozenset(), frozenset({"-d", "-n", "-O", "-s", "-u", "-C", "-c"}), True),
    "readarray": (frozenset(), frozenset({"-d", "-n", "-O", "-s", "-u", "-C", "-c"}), True),
    "printf": (frozenset({"-v"}), frozenset({"-v"}), False),
}


def _assigned_by_builtin(command: SimpleCommand) -> list[tuple[str, str]]:
    """Variables ``read``/``mapfile``/``printf -v`` assign, as ``(name, value)``: the value is
    what the line shows of it (``printf``'s format and arguments), else ``""`` (read from input)."""
    spec = _READS_INTO.get(command.program or "")
    if spec is None:
        return []
    naming, values, operands_name = spec
    words = read_words(command.args, values, values, None)
    out = [(o.value, "") for o in words.options if o.name in naming and o.value and _ENV_NAME.match(o.value)]
    if command.program == "printf" and out:
        out = [(name, " ".join(words.positionals)) for name, _ in out]
    if operands_name:
        out.extend((word, "") for word in words.positionals if _ENV_NAME.match(word))
    return out


def _unset_names(command: SimpleCommand) -> list[str]:
    """Variables a command removes: ``unset NAME`` (not ``unset -f``), ``env -u NAME``."""
    names: list[str] = []
    if command.program == "unset" and "-f" not in command.args:
        names.extend(word for word in command.args if not word.startswith("-"))
    for wrapper in (*command.wrappers, *((command.words,) if command.program == "env" else ())):
        if not wrapper or base_name(wrapper[0]) != "env":
            continue
        words = wrapper[1:]
        for index, word in enumerate(words):
            if word in ("-u", "--unset") and index + 1 < len(words):
                names.append(words[index + 1])
            elif word.startswith("--unset="):
                names.append(word.partition("=")[2])
            elif word.startswith("-u") and len(word) > 2 and not word.startswith("--"):
                names.append(word[2:])
    return names


# ---------------------------------------------------------------------------------------------
# masking what a change quotes
# ---------------------------------------------------------------------------------------------


def _is_expansion(value: str) -> bool:
    return value.startswith("$") or value.startswith("`")


def _masked(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret :func:`unstuck.core.redact.redact` finds masked (known token
    formats, headers keeping their scheme, URL passwords), then the values a row saw as
    credentials."""
    from unstuck.core.redact import MASK, redact  # loaded when a change is first quoted

    text = redact(text)
    for secret in secrets:
        if len(secret) >= 4 and not _is_expansion(secret) and secret in text:
            text = text.replace(secret, MASK)
    return text


def _quoted(text: str, secrets: Iterable[str] = ()) -> str:
    """One line, masked, bounded to :data:`COMMAND_MAX_CHARS`."""
    line = " ".join(clean_terminal_text(text[: COMMAND_MAX_CHARS * 8]).split())
    line = _masked(line, secrets)
    if len(line) > COMMAND_MAX_CHARS:
        line = line[: COMMAND_MAX_CHARS - 1] + "…"
    return line


def _change(found: _Found, secrets: Iterable[str]) -> CredentialChange:
    row = found.row
    return CredentialChange(row.name, row.kind, _quoted(found.text, sorted(secrets, key=len, reverse=True)),
                            found.why or row.why, found.targets, row.source)


def _shown(command: SimpleCommand) -> str:
    """A command's text with the file redirections it leaves out (``cat < f``, ``echo x > f``)."""
    text = command.text
    for redirect in command.redirects:
        if redirect.operator in _OUTPUT_REDIRECTS or redirect.operator in _INPUT_REDIRECTS:
            shown = f"{'' if redirect.descriptor is None else redirect.descriptor}{redirect.operator} {redirect.target}"
            if redirect.target not in text:
                text = f"{text} {shown}"
    return text


# ---------------------------------------------------------------------------------------------
# command lines
# ---------------------------------------------------------------------------------------------


def credential_changes(command_line: str, catalogue: CredentialCatalogue | None = None) -> tuple[CredentialChange, ...]:
    """Every credential-changing part of a shell command line, in order.

    Args:
        command_line: a shell command line, any text (several lines, unbalanced quotes).
        catalogue: the rows to use; the bundled catalogue by default.

    Returns:
        For each simple command in order (those of pipelines, lists, subshells, ``$(…)`` and
        ``bash -c`` strings included): the variables set for it that a row names (``GH_TOKEN=…
        gh``, ``env X=…``, ``sudo X=…``, an ``export``/``declare`` of one, a ``read``,
        ``mapfile`` or ``printf -v`` into one, a write in an interpreter's inline code, ``unset``/``env -u``
        of a variable whose row has no ``value``), then every row matching a wrapper around it
        (``sudo``, ``env``, ``timeout`` …), the program itself, the program a package manager
        runs (``yarn heroku auth:token``) or the command of its ``find -exec`` (the calls of
        :func:`unstuck.commands.catalogue.calls`), then every row matching a file it writes (by
        a redirection, as a program of
        the ``writers`` table, or from an interpreter's inline code); last, bare ``NAME=value``
        statements of the line; after all of these, the changes of the commands interpreters'
        code runs (``os.system('gh auth token')``), read as command lines up to three levels
        deep, each ``why`` ending in ``(runs CMD in the LANGUAGE code of PROGRAM OPTION)``.
        A variable counts once per line (an export is not counted
        again in each later command). Rows for any program (``*``) are tried on a call only
        when no row naming its program matched. Empty when nothing changes credentials.
        Never raises; results are remembered for the last 1,024 lines per catalogue.
    """
    return _changes(command_line, catalogue or load_credential_catalogue())


def prints_credential(command: SimpleCommand, catalogue: CredentialCatalogue | None = None) -> str | None:
    """The name of the first row marked ``prints`` (a call whose output is a credential: ``gh
    auth token``, ``aws sts assume-role``, ``vault kv get`` …) that matches the program of
    ``command`` or one it runs (:func:`unstuck.commands.catalogue.calls`, wrappers aside), or
    ``None``. The command screen refuses sending such output off the machine. Never raises on
    any command (a malformed bundled catalogue raises :class:`CredentialCatalogueError`)."""
    rows = catalogue or load_credential_catalogue()
    cache: _WordsCache = {}
    for call in calls(command):
        if call.wraps:
            continue
        cache.clear()
        for candidate in rows.by_program.get(call.program, ()):
            if candidate.prints and _match(candidate, call, cache) is not None:
                return candidate.name
    return None


#: How deep command lines run by interpreters' code are read (``python -c "os.system('perl -e
#: …')"``).
_RUN_DEPTH = 3
_STDIN_TEXT = frozenset({"<<", "<<-", "<<<"})
#: Programs whose output is their arguments (what a pipe feeds the next stage).
_PRINTERS = frozenset({"echo", "printf"})


def _stdin_text(line: Any, command: SimpleCommand) -> str | None:
    """The text a command reads as standard input when the line shows it: a here-document or
    here-string, or the arguments of an ``echo``/``printf`` piped into it."""
    for redirect in command.redirects:
        if redirect.operator in _STDIN_TEXT:
            return redirect.target
    if command.stage > 0 and command.pipeline < len(line.pipelines):
        for before in line.pipelines[command.pipeline]:
            if before.stage == command.stage - 1 and before.program in _PRINTERS:
                return " ".join(word for word in before.args if not (word.startswith("-") and len(word) == 2))
    return None


@functools.lru_cache(maxsize=1024)
def _changes(command_line: str, catalogue: CredentialCatalogue, depth: int = 0) -> tuple[CredentialChange, ...]:
    line = parse_command_line(command_line)
    ran: list[CredentialChange] = []
    found: list[_Found] = []
    reported: set[tuple[str, str, str | None]] = set()
    written: set[tuple[str, tuple[str, ...]]] = set()

    def variable(name: str, value: str | None, command: SimpleCommand | None, program: str | None,
                 text: str, why: str | None = None) -> None:
        row = _env_row(catalogue, name, value, program)
        if row is None:
            return
        key = (row.name, name, value)
        if key in reported:
            return
        reported.add(key)
        secrets = (value,) if value and row.kind in (ChangeKind.TOKEN, ChangeKind.SCOPE) else ()
        found.append(_Found(row, command, text, (), secrets, why and f"{row.why} ({why})"))

    writers = _writers()
    for command in line.commands:
        if command.program in _DECLARATIONS:
            for word in command.args:
                assignment = _ASSIGNMENT.match(word)
                if assignment is not None:
                    variable(assignment.group(1), assignment.group(2), command, None, _shown(command))
        for name, value in command.environment:
            variable(name, value, command, command.program, _shown(command))
        for name in _unset_names(command):
            row = _env_row(catalogue, name, None, None)
            if row is not None and (row.name, name, None) not in reported:
                reported.add((row.name, name, None))
                found.append(_Found(row, command, _shown(command), why=f"unsets {name}, changing which credentials "
                                                                      f"are used"))
        for name, value in _assigned_by_builtin(command):
            variable(name, value, command, None, _shown(command))
        targets = _written(command)
        for call in calls(command):
            targets.extend(_writer_targets(writers, call))
            for option, effects in _interpreted(call, _stdin_text(line, command) if not call.wraps else None):
                if depth < _RUN_DEPTH:
                    for run in effects.runs:
                        how = f"runs {_quoted(run)} {effects.how(call.program, option)}"
                        ran.extend(dataclasses.replace(change, why=f"{change.why} ({how})")
                                   for change in _changes(run, catalogue, depth + 1))
                for name, value in effects.sets:
                    variable(name, value, command, None, _shown(command), effects.how(call.program, option))
                for name in effects.unsets:
                    row = _env_row(catalogue, name, None, None)
                    if row is not None and (row.name, name, None) not in reported:
                        reported.add((row.name, name, None))
                        found.append(_Found(row, command, _shown(command),
                                            why=f"unsets {name}, changing which credentials are used "
                                                f"({effects.how(call.program, option)})"))
                targets.extend(effects.writes)
            cache: _WordsCache = {}
            matched = False
            for row in catalogue.by_program.get(call.program, ()):
                hit = _match(row, call, cache)
                if hit is not None:
                    found.append(hit)
                    matched = True
            if not matched:
                for row in catalogue.any_program:
                    hit = _match(row, call, cache)
                    if hit is not None:
                        found.append(hit)
        for row in catalogue.writes:
            hit = _write_match(row, command, targets)
            if hit is not None and (row.name, hit.targets) not in written:  # a group's redirection: once
                written.add((row.name, hit.targets))
                found.append(hit)
    for name, value in line.assignments:
        variable(name, value, None, None, f"{name}={value}")
    # a credential one row saw in a command is masked in every change quoting that command
    secrets: dict[int, set[str]] = {}
    for hit in found:
        if hit.command is not None and hit.secrets:
            secrets.setdefault(id(hit.command), set()).update(hit.secrets)
    return (*(_change(hit, secrets.get(id(hit.command), ()) if hit.command is not None else hit.secrets)
              for hit in found), *ran)


# ---------------------------------------------------------------------------------------------
# arguments of tools that are not shells
# ---------------------------------------------------------------------------------------------

#: Last words of a key that names a credential (``api_key``, ``accessToken``, ``client-secret``,
#: ``password``): the names vendors' APIs and SDKs give them (RFC 6749 section 2.3.1
#: ``client_secret``, section 5.1 ``access_token``/``refresh_token``; RFC 6750 ``Bearer``).
_CREDENTIAL_WORDS = frozenset({"token", "password", "passwd", "passphrase", "secret", "apikey", "pat", "credential",
                               "credentials", "authorization", "bearer", "cookie", "auth"})
#: Key endings of two words: ``api_key``, ``private_key``, ``access_key``, ``secret_key``.
_CREDENTIAL_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"),
                               ("signing", "key"), ("client", "key")})
#: Words that make a token-named key something else: a page or sync cursor (``page_token``,
#: ``nextPageToken``: Google API design guide, "List pagination"; ``continuation_token``,
#: ``sync_token``), a count or limit (``max_token``), a CSRF nonce (``csrf_token``). Keys
#: ending in another word (``max_tokens``, ``token_type`` of RFC 6749 section 7.1,
#: ``secret_name``, ``password_file``) are no credential to begin with.
_NOT_CREDENTIAL = frozenset({"page", "next", "continuation", "sync", "pagination", "cursor", "resume", "max", "min",
                             "num", "count", "limit", "total", "csrf", "xsrf"})
#: Values of a credential-named key that name no credential (a scheme, a switch, a redaction).
_NOT_A_VALUE = frozenset({"none", "null", "nil", "false", "true", "yes", "no", "off", "on", "basic", "bearer",
                          "digest", "oauth", "oauth2", "token", "required", "optional", "redacted", "hidden"})
#: An Authorization (or Proxy-Authorization) header with a literal credential: a scheme (an
#: RFC 9110 token) and a token68 (RFC 9110 section 11.2; RFC 6750 section 2.1 b64token) of at
#: least 8 characters. A ``$VAR``, ``<token>`` or ``{token}`` placeholder is no token68.
_AUTH_HEADER = LazyRegex(
    r"(?i)(?:^|[\s\"'{,(\[])(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?([a-z][a-z0-9!#$%&'*+.^_`|~-]*)[ \t]+"
    r"([a-z0-9._~+/-]{8,}=*)(?:$|[\s\"',;})\]])", _QUIET)
#: A URL with a password in its userinfo (RFC 3986 section 3.2.1).
_URL_WITH_PASSWORD = LazyRegex(r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@\"'<>{}$]+:([^/\s@\"'<>{}$]+)@", _QUIET)
#: Placeholder credentials of documentation: CAPITALS_AND_UNDERSCORES (``YOUR_TOKEN``,
#: ``GITHUB_TOKEN``), and (checked apart) one character repeated (``xxxxxxxx``, ``****``).
_PLACEHOLDER = LazyRegex(r"^[A-Z][A-Z0-9_]*$", _QUIET)
_SPLIT_KEY = LazyRegex(r"[^A-Za-z0-9]+", _QUIET)

_ARGUMENT_SOURCES = {
    "argument-credential": "RFC 6749 sections 2.3.1 (client_secret) and 5.1 (access_token, refresh_token); "
                           "RFC 6750 (Bearer tokens)",
    "argument-authorization-header": "RFC 9110 section 11.6.2 (Authorization), 11.7.2 (Proxy-Authorization), "
                                     "11.2 (token68); RFC 6750 section 2.1 (Bearer)",
    "argument-url-password": "RFC 3986 section 3.2.1 (\"user:password\" in userinfo is deprecated)",
}
#: The names :func:`credential_changes_in_arguments` gives its changes (a policy may allow
#: them by name, as it allows catalogue rows).
ARGUMENT_CHANGE_NAMES = frozenset(_ARGUMENT_SOURCES)
_ARGUMENT_WHYS = {
    "argument-credential": "passes a credential as a tool argument",
    "argument-authorization-header": "sends its own Authorization header with a literal credential",
    "argument-url-password": "passes a URL with a password in it",
}


def _key_words(key: str) -> list[str]:
    spaced: list[str] = []
    previous = ""
    for char in key:
        if char.isupper() and (previous.islower() or previous.isdigit()):
            spaced.append(" ")
        spaced.append(char)
        previous = char
    return [part for part in _SPLIT_KEY.split("".join(spaced).lower()) if part]


def _credential_key(key: str) -> bool:
    words = _key_words(key)
    if not words or any(word in _NOT_CREDENTIAL for word in words):
        return False
    return words[-1] in _CREDENTIAL_WORDS or (len(words) >= 2 and (words[-2], words[-1]) in _CREDENTIAL_PAIRS) or (
        words[-1] == "apikey")


def _placeholder(value: str) -> bool:
    return len(set(value)) <= 1 or bool(_PLACEHOLDER.match(value)) or value.lower() in _NOT_A_VALUE


#: An authentication scheme written before a credential (RFC 9110 section 11.1: auth-scheme).
_SCHEME = LazyRegex(r"(?i)^(?:bearer|token|basic|digest|apikey|api-key)\s+", _QUIET)


def _literal_credential(value: str) -> bool:
    """Whether a credential-named argument's value is a credential written out, not empty, a
    placeholder (``YOUR_TOKEN``, ``xxxx``, ``<token>``, ``{token}``) or a variable (``$TOKEN``,
    ``Bearer ${TOKEN}``), which a tool that is not a shell does not expand."""
    credential = _SCHEME.sub("", value.strip()).strip()
    return bool(credential) and not _placeholder(credential) and credential[0] not in "$<{%" \
        and "${" not in credential and "{{" not in credential


def _argument_found(name: str, path: str) -> CredentialChange:
    return CredentialChange(name, ChangeKind.TOKEN, _quoted(path), _ARGUMENT_WHYS[name], (),
                            _ARGUMENT_SOURCES[name])


def credential_changes_in_arguments(arguments: Mapping[str, Any]) -> tuple[CredentialChange, ...]:
    """Credentials a call of a tool that is not a shell injects through its arguments.

    Args:
        arguments: the call's arguments (nested mappings, lists and tuples are read).

    Returns:
        One change per argument, in the order the arguments are read (depth first): a key
        named for a credential (last word ``token``, ``password``, ``secret``, ``api_key``,
        ``authorization``…, none of ``page``, ``next``, ``max``, ``type``, ``name``, ``id``…)
        with a non-empty string value (``argument-credential``); a string holding an
        ``Authorization: <scheme> <token68>`` header with a literal credential
        (``argument-authorization-header``); a string holding a URL with a password
        (``argument-url-password``). Placeholders (``$TOKEN``, ``<token>``, ``YOUR_TOKEN``,
        ``xxxxxxxx``) are not credentials. The change's ``command`` is the argument's path
        (``headers.Authorization``, ``items[2].token``), never its value. At most
        :data:`ARGUMENT_MAX_VALUES` values, :data:`ARGUMENT_MAX_DEPTH` levels and
        :data:`ARGUMENT_MAX_CHARS` characters of each string are read. Never raises.
    """
    out: list[CredentialChange] = []
    budget = [ARGUMENT_MAX_VALUES]

    def walk(value: Any, path: str, key: str | None, depth: int) -> None:
        if budget[0] <= 0 or depth > ARGUMENT_MAX_DEPTH:
            return
        budget[0] -= 1
        if isinstance(value, Mapping):
            for child_key, child in value.items():
                name = str(child_key)
                walk(child, f"{path}.{name}" if path else name, name, depth + 1)
            return
        if isinstance(value, (list, tuple)):
            for index, child in enumerate(value):
                walk(child, f"{path}[{index}]", None, depth + 1)
            return
        if not isinstance(value, str):
            return
        text = value[:ARGUMENT_MAX_CHARS]
        stripped = text.strip()
        if key is not None and stripped and _credential_key(key) and _literal_credential(stripped):
            out.append(_argument_found("argument-credential", path))
            return
        header = _AUTH_HEADER.search(text)
        if header is not None and not _placeholder(header.group(2)):
            out.append(_argument_found("argument-authorization-header", path))
            return
        url = _URL_WITH_PASSWORD.search(text)
        if url is not None and not _placeholder(url.group(1)):
            out.append(_argument_found("argument-url-password", path))

    walk(arguments, "", None, 0)  # bounded in depth and count: a structure holding itself ends too
    return tuple(out)
