"""The catalogue engine: how a row of a command catalogue is read and matched against a parsed
command line, for the interactive-call catalogue (:mod:`unstuck.commands.interactive`), the
credential-change catalogue (:mod:`unstuck.commands.credentials`) and the screen's program table
(:mod:`unstuck.commands.programs`).
Internal: not a supported import path (docs/reference/index.md lists those that are).

A row of either catalogue names a program, the first positional words (its subcommand) and the
options that must or must not be present. This module reads a :class:`~unstuck.commands.parse.SimpleCommand`
of :func:`~unstuck.commands.parse.parse_command_line` the way both catalogues see it:

* :func:`calls`: the programs a simple command runs, each as a :class:`Call`: every wrapper
  around the program (``sudo``, ``env``, ``timeout`` …), the program, and the program it runs
  from its own arguments (a package manager's program: ``yarn wrangler login``, ``pnpm exec
  x``, ``bun x x``; the command of find's ``-exec``/``-execdir``/``-ok``/``-okdir``).
* :func:`read_words`: a call's words as options (with their values) and positional words,
  read as getopt(3) and getopt_long(3) read them: ``--name=value``, ``--name VALUE`` and ``-n
  VALUE`` for the options a row says take a value, ``-nVALUE``, clusters of short flags
  (``-sSk``; a value option ends the cluster: ``-aG group``), ``--`` ending the options.
* :func:`starts_with`, :func:`has_option` and :func:`asks_for_help`: the tests a row makes on
  those words (the subcommand, an option with an optional test of its value, a request for
  help or a version, which no program answers by waiting or by changing anything).

Also the field readers every catalogue's loader shares (:func:`yaml_document`, :func:`row_fields`,
:func:`string_list`, :func:`subcommand_words`, :func:`option_names`, :func:`re2_pattern`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from unstuck.commands.parse import SimpleCommand, program_name, resolve_wrappers, word_set
from unstuck.core.regex import LazyRegex

__all__ = [
    "HELP_WORDS",
    "RE2_QUIET",
    "Call",
    "Option",
    "Words",
    "asks_for_help",
    "calls",
    "has_option",
    "option_name",
    "option_names",
    "positional_indexes",
    "re2_pattern",
    "read_words",
    "row_fields",
    "starts_with",
    "string_list",
    "subcommand_words",
    "yaml_document",
]


@dataclass(frozen=True, slots=True)
class Call:
    """A program as a catalogue row sees it: its base name, the words after it, the simple
    command it belongs to (whose redirections, streams and environment are the call's), and
    whether it is a wrapper around another program (``sudo`` in ``sudo gh auth login``)."""

    program: str
    args: tuple[str, ...]
    command: SimpleCommand
    wraps: bool = False


#: Commands of the package managers that run a package's program when the first word is not
#: one of their own: ``yarn <bin>`` ("[script] can also be any locally installed executable
#: that is inside node_modules/.bin/", classic.yarnpkg.com/en/docs/cli/run; yarnpkg.com/cli/run),
#: ``pnpm <bin>`` ("the exec part is actually optional when the command is not in conflict with
#: a builtin pnpm command", pnpm.io/cli/exec), ``bun <bin>`` (bun.sh/docs/cli/run). The sets are
#: each CLI's own commands (its reference's command list), which are never a package's program.
_PACKAGE_MANAGER_COMMANDS: Mapping[str, frozenset[str]] = {
    "yarn": word_set(
        "add audit autoclean bin cache check config constraints create dedupe dlx explain generate-lock-entry global "
        "help import info init install licenses link list login logout node npm outdated owner pack patch "
        "patch-commit plugin policies publish rebuild remove search set stage tag team test unlink unplug up upgrade "
        "upgrade-interactive version versions why workspace workspaces"),
    "pnpm": word_set(
        "access add adduser approve-builds audit bin c cat-file cat-index catalog config create dedupe deploy "
        "deprecate dist-tag dlx docs doctor env fetch find-hash help i ignored-builds import info init install "
        "install-test it licenses link list ln login logout ls outdated owner pack patch patch-commit patch-remove "
        "ping prune publish rb rebuild recursive remove rm root run-script runtime sbom search self-update server "
        "setup start store t test token un undeprecate uninstall unlink unpublish up update upgrade version view "
        "whoami why"),
    "bun": word_set(
        "a add audit build c completions create discord feedback help i info init install link outdated patch "
        "patch-commit pm publish remove repl rm test unlink update upgrade why"),
}
#: Their global options that take a value (``yarn --cwd DIR wrangler login``).
_PACKAGE_MANAGER_VALUES = frozenset({"--cwd", "--cache-folder", "--global-folder", "--modules-folder", "--mutex",
                                     "--network-timeout", "--preferred-cache-folder", "--registry", "--link-folder",
                                     "-C", "--dir", "--filter", "-F", "--reporter", "--loglevel", "-c", "--config",
                                     "--env-file", "-r", "--preload"})
#: Words after which a package manager runs the next word as a program or script.
_PACKAGE_MANAGER_RUN = frozenset({"run", "exec", "x"})
#: find(1) actions that run a command up to ``;`` or ``+``: -exec, -execdir, -ok, -okdir.
_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _calls_of_words(words: Sequence[str], command: SimpleCommand) -> Iterator[Call]:
    resolved = resolve_wrappers(words)
    for wrapper in resolved.wrappers:
        name = program_name(wrapper[0])
        if name is not None:
            yield Call(name, wrapper[1:], command, True)
    if resolved.index is not None:
        name = program_name(words[resolved.index], resolved.package)
        if name is not None:
            args = tuple(words[resolved.index + 1:])
            yield Call(name, args, command)
            yield from _embedded_calls(name, args, command)


def _embedded_calls(program: str, args: Sequence[str], command: SimpleCommand) -> Iterator[Call]:
    """Commands a program runs from its own arguments: a package manager's program
    (``yarn wrangler login``, ``pnpm exec x``, ``bun run x``) and find's ``-exec CMD … ;``."""
    builtins = _PACKAGE_MANAGER_COMMANDS.get(program)
    if builtins is not None:
        positions = positional_indexes(args, _PACKAGE_MANAGER_VALUES)
        if positions:
            first = positions[0]
            word = args[first]
            if word in _PACKAGE_MANAGER_RUN and first + 1 < len(args):
                first, word = first + 1, args[first + 1]
            elif word in builtins:
                return
            if not word.startswith("-"):
                yield from _calls_of_words(args[first:], command)
        return
    if program == "find":
        index = 0
        while index < len(args):
            if args[index] in _FIND_ACTIONS:
                end = index + 1
                while end < len(args) and args[end] not in (";", "+"):
                    end += 1
                if end > index + 1:
                    yield from _calls_of_words(args[index + 1:end], command)
                index = end
            index += 1


def calls(command: SimpleCommand) -> Iterator[Call]:
    """The calls of one simple command, in the order rows are tried on them: each wrapper
    (outermost first), then the program, then what the program runs from its own arguments
    (with its wrappers: ``find . -exec sudo chmod …``). A wrapper or program whose name is an
    expansion (``"$GH"``) is not a call."""
    for wrapper in command.wrappers:
        name = program_name(wrapper[0])
        if name is not None:
            yield Call(name, wrapper[1:], command, True)
    if command.program is not None:
        yield Call(command.program, command.args, command)
        yield from _embedded_calls(command.program, command.args, command)


def positional_indexes(args: Sequence[str], value_options: frozenset[str]) -> list[int]:
    """Where the positional words of ``args`` are: each word that is not an option (``-x``,
    ``--x``) nor the value of one of ``value_options``; all words after ``--``."""
    out: list[int] = []
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            out.extend(range(index + 1, len(args)))
            break
        if word.startswith("-") and len(word) > 1:
            index += 2 if word in value_options else 1
            continue
        out.append(index)
        index += 1
    return out


#: Words that ask a program for its help or version, which it prints without waiting or
#: changing anything: GNU coding standards 4.8 (``--help``, ``--version``), Go's flag package
#: (``-h``, ``-help``), cobra and click (``-h``/``--help``). ``-h`` counts only where a row
#: gives it no other meaning (``gh auth login -h HOST``, ``mysql -h HOST``, ``chown -h``).
HELP_WORDS = frozenset({"--help", "--version", "-help"})


@dataclass(frozen=True, slots=True)
class Option:
    """One option of a call: its name (``-k``, ``--scopes``, ``-method``), its value (attached:
    ``--x=v``, ``-ov``; else the next word for a value option; ``None`` written bare), the index
    of its word in the call's arguments, whether the value was attached to it (``--x=v``,
    ``-ov``) and whether it ends its word (``-p`` alone or last in ``-vp``; not the ``-p`` of
    ``-psecret``), and whether it is its word alone (``-h``, ``--x=v``; not the ``-h`` of ``-vh``).
    An option written bare is one that ends its word with no attached value."""

    name: str
    value: str | None
    index: int
    attached: bool = False
    ends_word: bool = True
    alone: bool = True

    @property
    def bare(self) -> bool:
        return self.ends_word and not self.attached


@dataclass(frozen=True, slots=True)
class Words:
    """A call's options and its positional words (with their indexes in the arguments), read
    with one set of value-taking options."""

    options: tuple[Option, ...]
    positionals: tuple[str, ...]
    positions: tuple[int, ...]


def read_words(args: Sequence[str], value_options: Collection[str], known: Collection[str] = frozenset(),
               dash_operands: Any = None) -> Words:
    """Read ``args`` into options and positional words (getopt(3)/getopt_long(3) conventions).

    Args:
        args: the words after the program.
        value_options: options that take the next word as their value (also the rest of a
            cluster: ``-ovalue``, ``-aG group``).
        known: single-dash options read whole (``-method``, ``-tls-skip-verify``), not as a
            cluster of letters.
        dash_operands: a compiled pattern of words that start with ``-`` yet are operands
            (``chmod -w FILE``), or ``None``.

    Returns:
        The :class:`Words`; never raises.
    """
    options: list[Option] = []
    positionals: list[str] = []
    positions: list[int] = []
    index = 0
    count = len(args)
    while index < count:
        at = index
        word = args[index]
        index += 1
        if word == "--":
            positionals.extend(args[index:])
            positions.extend(range(index, count))
            break
        if len(word) < 2 or word[0] != "-" or (dash_operands is not None and dash_operands.search(word)):
            positionals.append(word)
            positions.append(at)
            continue
        head, equals, attached = word.partition("=")
        if word.startswith("--") or head in known or head in value_options or word in HELP_WORDS:
            if equals:
                options.append(Option(head, attached, at, True))
            elif word in value_options:
                options.append(Option(word, args[index] if index < count else "", at))
                index += 1
            else:
                options.append(Option(word, None, at))
            continue
        # a cluster of short options: -sSk, -ovalue, -aG group
        for position in range(1, len(word)):
            letter = "-" + word[position]
            if letter in value_options:
                rest = word[position + 1:]
                if rest:
                    options.append(Option(letter, rest, at, True, False, False))
                else:
                    options.append(Option(letter, args[index] if index < count else "", at, False, True,
                                          position == 1))
                    index += 1
                break
            if not word[position].isalnum():
                break
            options.append(Option(letter, None, at, False, position == len(word) - 1, len(word) == 2))
    return Words(tuple(options), tuple(positionals), tuple(positions))


def starts_with(words: Words, subcommand: Sequence[Collection[str]]) -> bool:
    """Whether the first positional words are ``subcommand`` (each a set of alternatives)."""
    positionals = words.positionals
    return len(positionals) >= len(subcommand) and all(
        positionals[i] in alternatives for i, alternatives in enumerate(subcommand))


def has_option(words: Words, name: str, value: Callable[[str | None], bool] | None = None, *,
               before: int | None = None) -> bool:
    """Whether option ``name`` is among ``words`` (whose value passes ``value``, when given),
    only among the words before index ``before`` when given."""
    for option in words.options:
        if option.name != name or (before is not None and option.index >= before):
            continue
        if value is None or value(option.value):
            return True
    return False


def asks_for_help(words: Words, h_means_help: bool) -> bool:
    """Whether the call asks for help or a version (:data:`HELP_WORDS`, and ``-h`` written as a
    word of its own when ``h_means_help``)."""
    return any(o.name in HELP_WORDS or (h_means_help and o.name == "-h" and o.alone) for o in words.options)


def yaml_document(text: str, name: str) -> Any:
    """One YAML document (PyYAML's safe loader, libyaml's when present).

    Raises:
        ValueError: ``"<name>: not valid YAML: …"``.
    """
    import yaml  # loaded when a YAML text is first read (the bundled tables are read from their cached JSON)

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ValueError(f"{name}: not valid YAML: {exc}") from None


def string_list(raw: object, where: str, key: str, error: type[ValueError] = ValueError) -> tuple[str, ...]:
    """A row's field that is one string or a list of non-empty strings, stripped; ``None`` is ``()``.

    Raises:
        ValueError: (``error``, a subclass the catalogue names) ``"<where>: '<key>' must be a
            list of non-empty strings, got …"``.
    """
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(item, str) and item.strip() for item in raw):
        raise error(f"{where}: '{key}' must be a list of non-empty strings, got {raw!r}")
    return tuple(item.strip() for item in raw)


def option_name(text: str, where: str, key: str, error: type[ValueError] = ValueError) -> str:
    """An option as a row names it: ``-x``, ``--long``, ``-long``, or a shell's ``+o`` (bash(1):
    "Using '+' rather than '-' causes these options to be turned off").

    Raises:
        ValueError: (``error``) ``"<where>: '<key>' entry '…' is not an option name …"``.
    """
    if not text.startswith(("-", "+")) or text in ("-", "--", "+") or any(ch.isspace() for ch in text) or "=" in text:
        raise error(f"{where}: '{key}' entry {text!r} is not an option name (it starts with "
                    f"'-' or '+' and has no space or '=')")
    return text


def option_names(raw: object, where: str, key: str, error: type[ValueError] = ValueError) -> frozenset[str]:
    """A row's field that lists option names (:func:`option_name`); ``None`` is empty.

    Raises:
        ValueError: (``error``) for a field that is not a list of strings, or an entry that is
            not an option name.
    """
    return frozenset(option_name(o, where, key, error) for o in string_list(raw, where, key, error))


def _quiet() -> Any:
    options = re2.Options()
    options.log_errors = False
    return options


#: re2 options that keep a pattern's compile errors off standard error (they are raised).
RE2_QUIET = _quiet()


def re2_pattern(pattern: object, where: str, key: str, error: type[ValueError] = ValueError, *,
                lazy: bool = False) -> Any:
    """A row's field that is a re2 pattern (linear time on any text), compiled; ``lazy``: a
    bundled table's, compiled on first use (:class:`unstuck.core.regex.LazyRegex`; the test
    suite compiles every one), so loading a table does not compile patterns a process never reads.

    Raises:
        ValueError: (``error``) ``"<where>: '<key>' must be a non-empty re2 pattern …"``, or
            ``"… does not compile under re2 (no backreferences, no lookaround): …"`` (not
            for a ``lazy`` one, which raises ``re2.error`` on first use).
    """
    if not isinstance(pattern, str) or not pattern:
        raise error(f"{where}: '{key}' must be a non-empty re2 pattern, got {pattern!r}")
    if lazy:
        return LazyRegex(pattern, RE2_QUIET)
    try:
        return re2.compile(pattern, RE2_QUIET)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise error(f"{where}: '{key}' {pattern!r} does not compile under re2 (no backreferences, no lookaround): "
                    f"{reason}") from None


def row_fields(raw: object, where: str, known: Collection[str],
               error: type[ValueError] = ValueError) -> Mapping[str, Any]:
    """A catalogue row: a mapping whose keys are all ``known``.

    Raises:
        ValueError: (``error``) ``"<where>: a row must be a mapping, got …"`` or ``"<where>:
            unknown field(s) a, b (known: …)"``.
    """
    if not isinstance(raw, Mapping):
        raise error(f"{where}: a row must be a mapping, got {raw!r}")
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise error(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return raw


def subcommand_words(raw: object, where: str, error: type[ValueError] = ValueError) -> tuple[frozenset[str], ...]:
    """A row's ``subcommand``: its first positional words, each a set of alternatives written
    ``"a|b"`` (``[auth, login]``, ``[s3, cp|mv|sync]``); ``None`` is ``()``.

    Raises:
        ValueError: (``error``) ``"<where>: 'subcommand' word '…' must be words separated by
            '|'"`` for an empty alternative, an option or a word with a space.
    """
    words: list[frozenset[str]] = []
    for word in string_list(raw, where, "subcommand", error):
        parts = word.split("|")
        if any(not part or part.startswith("-") or any(ch.isspace() for ch in part) for part in parts):
            raise error(f"{where}: 'subcommand' word {word!r} must be words separated by '|'")
        words.append(frozenset(parts))
    return tuple(words)
