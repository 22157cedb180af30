"""The calls that wait for a person: :func:`interactive_call` finds the first simple command of
a command line that would wait for one, using the catalogue in
``unstuck/data/interactive_calls.yaml`` (plus a user's own files), matched by the catalogue
engine (:mod:`unstuck.commands.catalogue`), and the streams the tool gives it.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A call that signs in through a browser waits whatever the streams (``always``); an editor, a
password prompt, a confirmation or a pager waits only when the tool gives it a terminal
(``with_terminal``). A call that asks for ``--help``/``--version`` never waits. Rows are also
tried on the wrappers around a program, on the program a package manager runs (``yarn wrangler
login``, ``pnpm exec x``, ``bun x x``) and on the command of find's ``-exec``. A program named by
an expansion (``"$GH" auth login``) is not guessed (:mod:`unstuck.commands.parse`).

How pagers are judged (the rule, with its sources):

* A pager only pages a terminal: ``git`` (``pager.c``: no pager unless ``isatty(1)``), ``less``
  and ``more`` (they copy their input when standard output is not a terminal), ``man`` (man-db
  pages only a terminal), ``systemctl``/``journalctl`` and the AWS CLI (``awscli/utils.py``,
  ``is_a_tty()``). So ``git log | cat``, ``git log > f``, ``x=$(git log)`` and ``git log``
  without a terminal do not wait.
* ``git --no-pager``/``-P``/``-c core.pager=cat``, ``GIT_PAGER=cat``/``GIT_PAGER=`` (git(1):
  "If it is set to an empty string or to the value "cat", Git will not launch a pager") and
  ``PAGER=cat`` (used when neither ``GIT_PAGER`` nor ``core.pager`` is set; unstuck cannot see
  the user's configuration and takes the line's word for it) do not wait. A variable counts
  when it is set for the command itself (``PAGER=cat git log``, ``env PAGER=cat git log``), by
  an earlier ``export`` in the same line, or in the environment the caller passes.

Regular expressions here compile under google-re2 (linear time on hostile text).
"""


from __future__ import annotations

import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import re2

from unstuck.commands.catalogue import (
    Call,
    Words,
    asks_for_help,
    calls,
    has_option,
    read_words,
    row_fields,
    starts_with,
    string_list,
    subcommand_words,
    yaml_document,
)
from unstuck.commands.parse import Stream, parse_command_line
from unstuck.core.cache import bundled_document

__all__ = [
    "InteractiveCall",
    "InteractiveCatalogue",
    "InteractiveRow",
    "OptionSpec",
    "TerminalStream",
    "Waits",
    "interactive_call",
    "load_interactive_catalogue",
    "parse_interactive_calls",
]

# ---------------------------------------------------------------------------------------------
# the interactive-call catalogue
# ---------------------------------------------------------------------------------------------


class Waits(enum.StrEnum):
    """How a call waits for a person: ``always`` (a browser or device approval it polls for,
    even without a terminal) or ``with_terminal`` (a prompt, editor or pager that needs one;
    without a terminal it fails fast, which the classifier then reads)."""

    ALWAYS = "always"
    WITH_TERMINAL = "with_terminal"


class TerminalStream(enum.StrEnum):
    """A standard stream a row needs to be the terminal (not a pipe, file or capture)."""

    STDIN = "stdin"
    STDOUT = "stdout"


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """An option as a catalogue row names it: ``--with-token``, ``-N``, or with a required value
    ``-o BatchMode=yes`` (written ``-o BatchMode=yes``, ``-oBatchMode=yes`` or
    ``-o "BatchMode yes"`` on the command line; values compare case-insensitively, with ``=``
    and spaces alike)."""

    name: str
    value: str | None = None


@dataclass(frozen=True, slots=True)
class _Reading:
    """How a row reads a call's words: the options taking a value (its ``value_options`` and
    every option it names with a value), every option it names (read whole, not as a cluster),
    its subcommand as sets of alternatives, and whether ``-h`` asks for help."""

    values: frozenset[str]
    known: frozenset[str]
    subcommand: tuple[frozenset[str], ...]
    h_means_help: bool


@dataclass(frozen=True, slots=True)
class InteractiveRow:
    """One catalogue row (``unstuck/data/interactive_calls.yaml`` documents each field).

    A row *matches* a simple command when the program is one of ``programs``, the first
    positional words are ``subcommand`` (a word may list alternatives, ``install|remove``), the
    next one is not in ``except_subcommands``, and one of ``with_options`` is present or one
    of ``with_bare_options`` is written with no value attached (when any are listed). The
    first matching row decides whether the command waits: not when it asks for help or a
    version (``--help``, ``--version``, ``-help``, and ``-h`` unless the row gives ``-h``
    another meaning), not when any ``unless`` group is present in full (or an
    ``unless_before`` group before the subcommand), not when ``unless_operand`` is set and a
    positional word follows the subcommand, not when an ``unless_with_stdin`` option reads a
    secret from a redirected stdin, not when ``unless_env`` holds, not when a
    ``terminal_streams`` stream is not the terminal, not when it needs a terminal and has none.
    ``origin`` names the file and row it came from.
    """

    programs: tuple[str, ...]
    subcommand: tuple[str, ...]
    except_subcommands: frozenset[str]
    with_options: tuple[OptionSpec, ...]
    unless: tuple[tuple[OptionSpec, ...], ...]
    unless_before: tuple[tuple[OptionSpec, ...], ...]
    unless_with_stdin: tuple[OptionSpec, ...]
    unless_env: tuple[tuple[str, str], ...]
    value_options: frozenset[str]
    terminal_streams: frozenset[TerminalStream]
    waits: Waits
    why: str
    source: str
    origin: str
    with_bare_options: tuple[OptionSpec, ...] = ()
    unless_operand: bool = False
    #: how the row reads a call's words, derived from the fields above when the row is read
    reading: _Reading | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class InteractiveCatalogue:
    """Catalogue rows in the order they are tried (a user's rows before the bundled ones)."""

    rows: tuple[InteractiveRow, ...]


@dataclass(frozen=True, slots=True)
class InteractiveCall:
    """A simple command that would wait for a person: its program, the command as written,
    why it waits (shown to the user), the row's source, how it waits, and the catalogue row
    that decided (``origin``: file and row number, for ``--explain``)."""

    program: str
    command: str
    why: str
    source: str
    waits: Waits
    origin: str = ""


_ROW_KEYS = frozenset({"program", "subcommand", "except_subcommands", "with_options", "with_bare_options", "unless",
                       "unless_before", "unless_operand", "unless_with_stdin", "unless_env", "value_options",
                       "terminal_streams", "waits", "why", "source"})
_ENV_NAME = re2.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BUNDLED = "unstuck/data/interactive_calls.yaml"


def _option(text: str, where: str, key: str) -> OptionSpec:
    text = text.strip()
    if not text.startswith("-") or text in ("-", "--"):
        raise ValueError(f"{where}: '{key}' entry {text!r} is not an option (it must start with '-')")
    name, _, value = text.partition(" ")
    if not value and "=" in name and (name.startswith("--") or len(name.partition("=")[0]) > 2):
        name, _, value = name.partition("=")
    if any(ch.isspace() for ch in name) or not name.strip("-"):
        raise ValueError(f"{where}: '{key}' entry {text!r} is not an option")
    return OptionSpec(name, value.strip() or None)


def _groups(raw: object, where: str, key: str) -> tuple[tuple[OptionSpec, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{where}: '{key}' must be a list of options or of lists of options, got {raw!r}")
    groups: list[tuple[OptionSpec, ...]] = []
    for entry in raw:
        items = string_list(entry, where, key)
        if not items:
            raise ValueError(f"{where}: '{key}' has an empty group")
        groups.append(tuple(_option(item, where, key) for item in items))
    return tuple(groups)


def _row(raw: object, where: str) -> InteractiveRow:
    raw = row_fields(raw, where, _ROW_KEYS)
    programs = string_list(raw.get("program"), where, "program")
    if not programs:
        raise ValueError(f"{where}: 'program' is required")
    where = f"{where} ({programs[0]})"
    for program in programs:
        if "/" in program or any(ch.isspace() for ch in program):
            raise ValueError(f"{where}: 'program' {program!r} must be a base name")
    for key in ("why", "source"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}: '{key}' is required and must be a non-empty string")
    try:
        waits = Waits(str(raw.get("waits")))
    except ValueError:
        raise ValueError(f"{where}: 'waits' must be one of {', '.join(w.value for w in Waits)}, "
                         f"got {raw.get('waits')!r}") from None
    env: list[tuple[str, str]] = []
    for item in string_list(raw.get("unless_env"), where, "unless_env"):
        name, eq, value = item.partition("=")
        if not eq or not _ENV_NAME.match(name):
            raise ValueError(f"{where}: 'unless_env' entry {item!r} must read NAME=value")
        env.append((name, value))
    streams: list[TerminalStream] = []
    for item in string_list(raw.get("terminal_streams"), where, "terminal_streams"):
        try:
            streams.append(TerminalStream(item))
        except ValueError:
            raise ValueError(f"{where}: 'terminal_streams' entry {item!r} must be stdin or stdout") from None
    value_options = string_list(raw.get("value_options"), where, "value_options")
    for item in value_options:
        _option(item, where, "value_options")
    bare = tuple(_option(o, where, "with_bare_options")
                 for o in string_list(raw.get("with_bare_options"), where, "with_bare_options"))
    if any(o.value is not None for o in bare):
        raise ValueError(f"{where}: 'with_bare_options' entries are option names without a value")
    unless_operand = raw.get("unless_operand", False)
    if not isinstance(unless_operand, bool):
        raise ValueError(f"{where}: 'unless_operand' must be true or false, got {unless_operand!r}")
    subcommand_words(raw.get("subcommand"), where)  # checked here; the row keeps the words as written
    subcommand = string_list(raw.get("subcommand"), where, "subcommand")
    row = InteractiveRow(
        programs=programs,
        subcommand=subcommand,
        except_subcommands=frozenset(string_list(raw.get("except_subcommands"), where, "except_subcommands")),
        with_options=tuple(_option(o, where, "with_options") for o in string_list(raw.get("with_options"), where,
                                                                                 "with_options")),
        unless=_groups(raw.get("unless"), where, "unless"),
        unless_before=_groups(raw.get("unless_before"), where, "unless_before"),
        unless_with_stdin=tuple(_option(o, where, "unless_with_stdin")
                                for o in string_list(raw.get("unless_with_stdin"), where, "unless_with_stdin")),
        unless_env=tuple(env),
        value_options=frozenset(value_options),
        terminal_streams=frozenset(streams),
        waits=waits,
        why=str(raw["why"]).strip(),
        source=str(raw["source"]).strip(),
        origin=where,
        with_bare_options=bare,
        unless_operand=unless_operand,
    )
    return replace(row, reading=_reading(row))


def parse_interactive_calls(text: str, name: str) -> tuple[InteractiveRow, ...]:
    """The rows of one catalogue file's text (a mapping with a ``calls`` list), validated;
    ``name`` is named in every error.

    Raises:
        ValueError: naming the file and the row, for text that is not YAML, a missing
            ``calls`` list, an unknown top-level key, or a malformed row.
    """
    return _rows_from_text(text, name)


def _rows_from_text(text: str, name: str) -> tuple[InteractiveRow, ...]:
    return _rows_from_document(yaml_document(text, name), name)


def _rows_from_document(document: Any, name: str) -> tuple[InteractiveRow, ...]:
    if not isinstance(document, Mapping) or not isinstance(document.get("calls"), list):
        raise ValueError(f"{name}: must be a mapping with a 'calls' list of rows")
    unknown = sorted(str(k) for k in document if k != "calls")
    if unknown:
        raise ValueError(f"{name}: unknown top-level key(s) {', '.join(unknown)}")
    return tuple(_row(raw, f"{name}: row {index + 1}") for index, raw in enumerate(document["calls"]))


def _bundled_document(text: str) -> Any:
    return yaml_document(text, _BUNDLED)


@functools.cache
def _bundled_rows() -> tuple[InteractiveRow, ...]:
    return _rows_from_document(bundled_document("interactive_calls.yaml", _bundled_document), _BUNDLED)


def load_interactive_catalogue(extra: Sequence[Path] = ()) -> InteractiveCatalogue:
    """The bundled catalogue plus a user's own YAML files (same format, validated alike).

    Args:
        extra: paths of the user's files; their rows are tried first, file by file.

    Raises:
        ValueError: a file that cannot be read, is not YAML or has a malformed row; the message
            names the file and the row (``calls.yaml: row 3 (gh): 'waits' must be …``).
    """
    rows: list[InteractiveRow] = []
    for path in extra:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: cannot read the interactive-call catalogue: {exc}") from None
        rows.extend(_rows_from_text(text, str(path)))
    rows.extend(_bundled_rows())
    return InteractiveCatalogue(tuple(rows))


def _norm_value(value: str) -> str:
    return "=".join(value.lower().replace("=", " ").split())


def _reading(row: InteractiveRow) -> _Reading:
    specs = (*row.with_options, *row.with_bare_options, *row.unless_with_stdin,
             *(o for group in row.unless for o in group), *(o for group in row.unless_before for o in group))
    values = row.value_options | {o.name for o in specs if o.value is not None}
    return _Reading(values, frozenset(o.name for o in specs) | values,
                    tuple(frozenset(word.split("|")) for word in row.subcommand),
                    "-h" not in row.value_options and not any(o.name == "-h" for o in specs))


def _reading_of(row: InteractiveRow) -> _Reading:
    return row.reading if row.reading is not None else _reading(row)


def _present(words: Words, spec: OptionSpec, before: int | None = None) -> bool:
    """Whether ``spec`` is among the call's options (with its value, when the spec names one)."""
    if spec.value is None:
        return has_option(words, spec.name, before=before)
    wanted = _norm_value(spec.value)
    return has_option(words, spec.name, lambda value: value is not None and _norm_value(value) == wanted,
                      before=before)


def _bare(words: Words, name: str) -> bool:
    """Whether option ``name`` is written with no value attached: ``-p`` alone or last in a
    cluster of flags (``-vp``), ``--password`` alone (not ``-psecret``, ``--password=x``)."""
    return any(o.name == name and o.bare for o in words.options)


def _matches(row: InteractiveRow, reading: _Reading, call: Call, words: Words) -> tuple[bool, int]:
    """Whether the row matches, and where its subcommand starts in the arguments (the end
    when the row names none): the words before it are the program's global options."""
    if not starts_with(words, reading.subcommand):
        return False, 0
    sub = row.subcommand
    if row.except_subcommands and len(words.positionals) > len(sub) and \
            words.positionals[len(sub)] in row.except_subcommands:
        return False, 0
    if (row.with_options or row.with_bare_options) and not (
            any(_present(words, o) for o in row.with_options)
            or any(_bare(words, o.name) for o in row.with_bare_options)):
        return False, 0
    return True, (words.positions[0] if sub else len(call.args))


def _waits(row: InteractiveRow, reading: _Reading, call: Call, words: Words, terminal: bool,
           environ: Mapping[str, str], sub_start: int) -> bool:
    command = call.command
    if row.waits is Waits.WITH_TERMINAL and not terminal:
        return False
    for stream in row.terminal_streams:
        actual = command.stdin if stream is TerminalStream.STDIN else command.stdout
        if actual is not Stream.INHERITED:
            return False
    if any(all(_present(words, o) for o in group) for group in row.unless):
        return False
    if asks_for_help(words, reading.h_means_help):
        return False
    if row.unless_operand and len(words.positionals) > len(row.subcommand):
        return False
    if any(all(_present(words, o, sub_start) for o in group) for group in row.unless_before):
        return False
    if row.unless_with_stdin and any(_present(words, o) for o in row.unless_with_stdin) \
            and (command.stdin is not Stream.INHERITED or not terminal):
        return False
    env = dict(environ)
    env.update(command.environment)
    return not any(name in env and env[name] == value for name, value in row.unless_env)


def interactive_call(command: str, *, terminal: bool, catalogue: InteractiveCatalogue | None = None,
                     environ: Mapping[str, str] | None = None) -> InteractiveCall | None:
    """The first simple command anywhere in ``command`` that would wait for a person.

    Args:
        command: a shell command line (pipelines, ``&&``, ``$(…)``, ``bash -c "…"`` are read).
        terminal: whether the tool runs it with a terminal (stdin and stdout a tty).
        catalogue: the rows to use; the bundled catalogue by default.
        environ: the environment the tool gives the command (``GIT_PAGER``, ``PAGER`` …).

    Returns:
        The waiting call (wrappers are checked before the program they run: ``sudo gh …`` may
        wait for sudo's password; then the program, then the program it runs from its own
        arguments: ``yarn wrangler login``, ``find . -exec gh auth login \\;``), or ``None``.
        A call that asks for help or a version (``--help``, ``--version``, ``-help``, ``-h``
        where the row gives ``-h`` no other meaning) does not wait.
    """
    rows = (catalogue or load_interactive_catalogue()).rows
    env = environ or {}
    for simple in parse_command_line(command).commands:
        for call in calls(simple):
            for row in rows:
                if call.program not in row.programs:
                    continue
                reading = _reading_of(row)
                words = read_words(call.args, reading.values, reading.known)
                matched, sub_start = _matches(row, reading, call, words)
                if not matched:
                    continue
                if _waits(row, reading, call, words, terminal, env, sub_start):
                    return InteractiveCall(call.program, simple.text, row.why, row.source, row.waits, row.origin)
                break
    return None


