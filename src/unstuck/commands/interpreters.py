"""The interpreter table: programs that run a program text they are given, where that text is
among a call's words, and what the code does to the environment, files and commands.
Internal: not a supported import path (docs/reference/index.md lists those that are).

The rows are ``unstuck/data/interpreters.yaml`` (each with its source: the interpreter's manual,
and those of the APIs its code patterns name), read once through the catalogue engine's field
readers (:mod:`unstuck.commands.catalogue`). Two readers ask it: the command screen
(:mod:`unstuck.commands.screen`, through :func:`interpreter_options`: where an interpreter's
text follows and which options take a value, to tell when it runs what a pipe feeds it) and the
credential reader (:mod:`unstuck.commands.credentials`: :func:`program_texts` finds the code of
a call of an interpreter with a language, :func:`code_effects` the variables it sets or
removes, the files it writes and the commands it runs).

All regular expressions compile under google-re2 (linear time on any text).
"""

from __future__ import annotations

import functools
import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unstuck.commands.catalogue import RE2_QUIET, option_names, re2_pattern, row_fields, string_list, yaml_document
from unstuck.core.cache import bundled_document
from unstuck.core.regex import LazyRegex

__all__ = [
    "CodeEffects",
    "EnvPattern",
    "Interpreter",
    "InterpreterOptions",
    "code_effects",
    "find_interpreter",
    "interpreter_options",
    "interpreter_table",
    "parse_interpreter_table",
    "program_texts",
]

_QUIET = RE2_QUIET
_ENV_NAME = LazyRegex(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FILE = "interpreters.yaml"

@dataclass(frozen=True, slots=True)
class EnvPattern:
    """An environment write in code: ``pattern`` (group 1 the variable, group 2 a literal
    value), or a ``pattern`` whose group 1 is a block searched with ``keys``."""

    pattern: Any
    keys: Any = None


@dataclass(frozen=True, slots=True)
class Interpreter:
    """An interpreter's inline-code options and its language's environment and file APIs (an
    entry of ``unstuck/data/interpreters.yaml``; ``language`` is ``None`` for the interpreters
    whose code is not read for credential changes, only screened)."""

    language: str | None
    programs: frozenset[str]
    inline: frozenset[str]
    inline_subcommand: frozenset[str]
    value_options: frozenset[str]
    attached_options: frozenset[str]
    digit_options: frozenset[str]
    ends: frozenset[str]
    env_write: tuple[EnvPattern, ...]
    env_unset: tuple[Any, ...]
    file_write: tuple[Any, ...]
    source: str
    command_run: tuple[Any, ...] = ()
    inline_last: bool = False
    program_operand: bool = False
    program_file: frozenset[str] = frozenset()
    stdin_code: bool = False
    ignore_case: bool = False


_INTERPRETER_KEYS = frozenset({"language", "program", "inline", "inline_subcommand", "value_options",
                               "attached_options", "digit_options", "ends", "env_write", "env_unset",
                               "file_write", "source", "command_run", "inline_last", "program_operand",
                               "program_file", "stdin_code", "ignore_case"})

def _options(where: str, key: str, raw: Mapping[str, Any]) -> frozenset[str]:
    return option_names(raw.get(key), where, key)


def _patterns(where: str, key: str, raw: Mapping[str, Any], lazy: bool) -> tuple[Any, ...]:
    return tuple(re2_pattern(pattern, where, key, lazy=lazy) for pattern in string_list(raw.get(key), where, key))


def _entry(raw: object, where: str) -> Mapping[str, Any]:
    entry = row_fields(raw, where, _INTERPRETER_KEYS)
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{where}: 'source' is required and must be a non-empty string")
    if not string_list(entry.get("program"), where, "program"):
        raise ValueError(f"{where}: 'program' is required")
    return entry


def _parse_interpreter(raw: object, where: str, lazy: bool) -> Interpreter:
    entry = _entry(raw, where)
    language = entry.get("language")
    if language is not None and (not isinstance(language, str) or not language.strip()):
        raise ValueError(f"{where}: 'language' must be a non-empty string")
    env_write: list[EnvPattern] = []
    raw_writes = entry.get("env_write") or []
    if not isinstance(raw_writes, list):
        raise ValueError(f"{where}: 'env_write' must be a list")
    for item in raw_writes:
        if isinstance(item, Mapping) and set(item) == {"block", "keys"}:
            env_write.append(EnvPattern(re2_pattern(item["block"], where, "env_write block", lazy=lazy),
                                         re2_pattern(item["keys"], where, "env_write keys", lazy=lazy)))
        elif isinstance(item, str):
            env_write.append(EnvPattern(re2_pattern(item, where, "env_write", lazy=lazy)))
        else:
            raise ValueError(f"{where}: 'env_write' entry {item!r} must be a pattern or a mapping "
                             f"with 'block' and 'keys'")
    inline = _options(where, "inline", entry)
    subcommands = frozenset(string_list(entry.get("inline_subcommand"), where, "inline_subcommand"))
    flags = {}
    for key in ("inline_last", "program_operand", "stdin_code", "ignore_case"):
        value = entry.get(key, False)
        if not isinstance(value, bool):
            raise ValueError(f"{where}: '{key}' must be true or false, got {value!r}")
        flags[key] = value
    if language is not None and not inline and not subcommands and not flags["program_operand"]:
        raise ValueError(f"{where}: an interpreter needs 'inline', 'inline_subcommand' or 'program_operand'")
    return Interpreter(
        language.strip() if language is not None else None,
        frozenset(string_list(entry.get("program"), where, "program")), inline, subcommands,
        _options(where, "value_options", entry), _options(where, "attached_options", entry),
        _options(where, "digit_options", entry), _options(where, "ends", entry), tuple(env_write),
        _patterns(where, "env_unset", entry, lazy),
        _patterns(where, "file_write", entry, lazy), " ".join(str(entry["source"]).split()),
        _patterns(where, "command_run", entry, lazy), flags["inline_last"], flags["program_operand"],
        _options(where, "program_file", entry), flags["stdin_code"], flags["ignore_case"])


def _table_of_document(document: object, name: str, *, lazy: bool = False) -> Mapping[str, Interpreter]:
    """The table of a parsed file; ``lazy``: the bundled file's, whose patterns compile on first
    use (the screen reads only the options of a table it loads; the test suite compiles every one)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("interpreters") or [], list):
        raise ValueError(f"{name}: must be a mapping with an 'interpreters' list")
    interpreters: dict[str, Interpreter] = {}
    for index, raw in enumerate(document.get("interpreters") or []):
        where = f"{name}: interpreters entry {index + 1}"
        interpreter = _parse_interpreter(raw, where, lazy)
        for program in interpreter.programs:
            if program in interpreters:
                raise ValueError(f"{where}: program {program!r} is already an interpreter")
            interpreters[program] = interpreter
    return interpreters


def parse_interpreter_table(text: str, name: str) -> Mapping[str, Interpreter]:
    """The table in one file's text (the format of ``unstuck/data/interpreters.yaml``), by
    program name; ``name`` is named in every error.

    Raises:
        ValueError: naming the file and the entry, for text that is not YAML or a malformed
            entry (an unknown field, no source, a pattern re2 does not compile, a program
            named twice).
    """
    return _table_of_document(yaml_document(text, name), name)


def _bundled_yaml(text: str) -> object:
    """The bundled file's YAML document (its JSON is cached by :func:`bundled_document`)."""
    return yaml_document(text, f"unstuck/data/{_FILE}")


@functools.cache
def interpreter_table() -> Mapping[str, Interpreter]:
    """The bundled table by program name, read once.

    Raises:
        ValueError: the bundled file is malformed (naming the entry).
    """
    return _table_of_document(bundled_document(_FILE, _bundled_yaml), _FILE, lazy=True)


#: A version suffix of an interpreter's name (``python3.12``, ``perl5.36``, ``pypy3``), as
#: distributions install them beside the plain name.
_VERSION_SUFFIX = LazyRegex(r"^(.*?[A-Za-z])[0-9][0-9.]*$", _QUIET)


def find_interpreter(program: str) -> Interpreter | None:
    """The row for ``program`` (a base name; a version suffix of digits and dots is ignored:
    ``python3.12``, ``perl5.36``), or ``None`` when it is no interpreter."""
    interpreters = interpreter_table()
    found = interpreters.get(program)
    if found is None:
        unversioned = _VERSION_SUFFIX.match(program)
        if unversioned is not None:
            found = interpreters.get(unversioned.group(1))
    return found


@dataclass(frozen=True, slots=True)
class InterpreterOptions:
    """An interpreter as ``unstuck/data/interpreters.yaml`` gives it (every row names its
    source): ``inline``, the options and first words its program text follows (``-c``, ``-e``,
    ``deno eval``, python's ``-m``), and ``values``, its options that take the next word as
    their value; as written, or in lower case for a program that reads its options in any case
    (``ignore_case``: PowerShell). ``program_operand``: its first operand is
    its program (awk), which the screen reads by a rule of its own."""

    inline: frozenset[str]
    values: frozenset[str]
    program_operand: bool = False


@functools.cache
def interpreter_options(program: str) -> InterpreterOptions | None:
    """The interpreter table's row for ``program`` (a base name; a version suffix of digits and
    dots is ignored: ``python3.12``, ``perl5.36``), or ``None`` when it is no interpreter.

    Raises:
        ValueError: the bundled table is malformed (naming the file and the entry).
    """
    found = find_interpreter(program)
    if found is None:
        return None
    inline, values = found.inline | found.inline_subcommand | found.ends, found.value_options
    if found.ignore_case:
        inline, values = frozenset(o.lower() for o in inline), frozenset(o.lower() for o in values)
    return InterpreterOptions(inline, values, found.program_operand)


def program_texts(interpreter: Interpreter, args: Sequence[str],
                 stdin: str | None = None) -> list[tuple[str, str]]:
    """The code strings of an interpreter call, as ``(option, code)``: its inline code
    (reading stops at the first operand, a script whose arguments follow, at an option of
    ``ends``, and after the code of an ``inline_last`` interpreter, whose later words are the
    program's arguments: ``python -c CODE -c x``), else its first operand when the program is
    an operand (``awk 'PROGRAM' file``, unless ``-f progfile``), else ``stdin`` (a
    here-document, here-string or piped text) when the interpreter reads its program from
    standard input (no script operand, or ``-``), reported as option ``"-"``."""
    code: list[tuple[str, str]] = []
    if args and args[0] in interpreter.inline_subcommand:
        return [(args[0], args[1])] if len(args) > 1 else []
    index = 0
    operand: int | None = None
    ended = False
    from_file = False
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--":
            operand = index if index < len(args) else None
            break
        if len(word) < 2 or word[0] != "-":
            operand = index - 1
            break
        if word in interpreter.ends:
            ended = True
            break
        head, equals, attached = word.partition("=")
        if head in interpreter.program_file:
            from_file = True
        if head in interpreter.inline and (equals or word == head):
            if equals:
                code.append((head, attached))
            elif index < len(args):
                code.append((word, args[index]))
                index += 1
            if interpreter.inline_last:
                return code
            continue
        if word.startswith("--") or word in interpreter.value_options:
            if word in interpreter.value_options:
                index += 1
            continue
        position = 1
        while position < len(word):  # a cluster: python -Ic CODE, perl -lne CODE, perl -0777ne CODE
            letter = "-" + word[position]
            position += 1
            rest = word[position:]
            if letter in interpreter.program_file:
                from_file = True
            if letter in interpreter.attached_options:
                break
            if letter in interpreter.digit_options:
                while position < len(word) and (word[position].isdigit() or word[position] in "xX"):
                    position += 1
                continue
            if letter in interpreter.value_options:
                index += 0 if rest else 1
                break
            if letter in interpreter.inline:
                if rest:
                    code.append((letter, rest))
                elif index < len(args):
                    code.append((letter, args[index]))
                    index += 1
                if interpreter.inline_last:
                    return code
                break
            if letter in interpreter.ends:
                return code
    if code or ended or from_file:
        return code
    if interpreter.program_operand:
        return [("program", args[operand])] if operand is not None else []
    if interpreter.stdin_code and stdin is not None and (operand is None or args[operand] == "-"):
        return [("-", stdin)]
    return code


@dataclass(frozen=True, slots=True)
class CodeEffects:
    """What inline code does: variables it sets (name, literal value or ``""``), variables it
    removes, and the string literals it may write to (when it calls a file-writing API)."""

    language: str
    sets: tuple[tuple[str, str], ...]
    unsets: tuple[str, ...]
    writes: tuple[str, ...]
    runs: tuple[str, ...] = ()

    def how(self, program: str, option: str) -> str:
        if option == "-":
            return f"in the {self.language} code {program} reads from standard input"
        if option == "program":
            return f"in the {self.language} program of {program}"
        return f"in the {self.language} code of {program} {option}"


#: A string literal of any of the languages (quotes ', " or `; no escapes read).
_STRING_LITERAL = LazyRegex(r"'([^'\n]*)'|\"([^\"\n]*)\"|`([^`\n]*)`", _QUIET)


#: What may stand between the string literals of one path built from parts: pathlib's ``/``
#: operator or a chained ``.joinpath(`` (joined as path parts), an argument separator inside a
#: join call (``os.path.join('a', 'b')``, ``joinpath``, node's ``path.join``, ruby's
#: ``File.join``), or a concatenation: ``+`` (Python, JavaScript, Ruby), ``.`` (Perl, PHP),
#: ``..`` (Lua), joined as written.
_PATH_GLUE = LazyRegex(r"^\s*(?:(/|\)\s*\.\s*joinpath\s*\()|(,)|(\+|\.\.?))\s*$", _QUIET)
#: A join call's opening, right before its first argument.
_JOIN_CALL = LazyRegex(r"(?i)\bjoin(?:path)?\s*\(\s*$", _QUIET)


def _joined_paths(code: str) -> list[str]:
    """The string literals of ``code`` and, for each run of literals glued as one path (see
    :data:`_PATH_GLUE`), the path they build (``Path.home().joinpath('.aws', 'credentials')``
    → ``.aws/credentials``; ``'~/.aws' + '/credentials'`` → ``~/.aws/credentials``)."""
    out: list[str] = []
    run: list[str] = []
    built = ""
    in_join = False
    last_end = 0
    for match in _STRING_LITERAL.finditer(code):
        value = next((g for g in match.groups() if g is not None), "")
        glue = _PATH_GLUE.match(code[last_end:match.start()]) if run else None
        if glue is not None and (glue.group(1) is not None or glue.group(3) is not None
                                 or (glue.group(2) is not None and in_join)):
            built = built + value if glue.group(3) is not None else posixpath.join(built, value)
            run.append(value)
        else:
            out.extend(run if len(run) == 1 else [built] if run else [])  # a built path, not its parts
            built, run = value, [value]
            in_join = bool(_JOIN_CALL.search(code[max(0, match.start() - 40):match.start()]))
        last_end = match.end()
    out.extend(run if len(run) == 1 else [built] if run else [])
    return list(dict.fromkeys(value for value in out if value))


#: What stands between the words of a command given as a list (``['gh', 'auth']``, ``"gh",
#: "auth"``, node's ``'gh', ['auth']``).
_LIST_GLUE = LazyRegex(r"^[\s,\[\]]*$", _QUIET)


def _run_command(argument: str) -> str | None:
    """The command line a code's run call names: one string literal's text (a command line),
    or several string literals separated only by commas and brackets, joined as shell words
    (``['gh', 'auth', 'login']``, ``system("npm", "login")``); ``None`` when the argument does
    not start with a literal or a list."""
    matches = list(_STRING_LITERAL.finditer(argument))
    head = argument.lstrip()[:1]
    if not matches or head not in "'\"`[(":
        return None
    words = [next((g for g in m.groups() if g is not None), "") for m in matches]
    listed = [words[0]]
    for before, after, word in zip(matches, matches[1:], words[1:], strict=False):
        if not _LIST_GLUE.match(argument[before.end():after.start()]):
            break
        listed.append(word)
    if head in "[(" or len(listed) > 1:
        return shlex.join(listed)
    return words[0]


def code_effects(interpreter: Interpreter, code: str) -> CodeEffects:
    """What ``code`` (a program text of ``interpreter``'s language) does, by the row's patterns:
    the variables it sets (``env_write``: name and literal value, or ``""``) and removes
    (``env_unset``), the files it may write (every string literal, and each path built from
    literals, when a ``file_write`` call is in it) and the command lines it runs
    (``command_run``)."""
    sets: list[tuple[str, str]] = []
    for entry in interpreter.env_write:
        for match in entry.pattern.finditer(code):
            if entry.keys is None:
                sets.append((match.group(1), match.group(2) or ""))
                continue
            for key in entry.keys.finditer(match.group(1) or ""):
                groups = key.groups()
                names = [g for g in groups[:-1] if g and _ENV_NAME.match(g)]
                if names:
                    sets.append((names[0], groups[-1] or ""))
    unsets = tuple(match.group(1) for pattern in interpreter.env_unset for match in pattern.finditer(code))
    writes: tuple[str, ...] = ()
    if any(pattern.search(code) for pattern in interpreter.file_write):
        writes = tuple(_joined_paths(code))
    runs = tuple(dict.fromkeys(
        command for pattern in interpreter.command_run for match in pattern.finditer(code)
        if (command := _run_command(match.group(1) or "")) is not None))
    return CodeEffects(interpreter.language or "", tuple(sets), unsets, writes, runs)
