"""What the programs the command screen knows do: the rows of ``unstuck/data/command_screen.yaml``.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Each row names programs (and optionally their first positional words, a subcommand), what a call
of them does (:class:`Does`: fetches from the network, sends data off the machine, resolves a
name, dumps the environment, copies files, runs its input or the working tree's code), and its
source (the program's manual or documentation); a program's rows may also give the options
before its subcommand that take a value, the options whose value is a credential it uses, and
the options naming the file it writes. The rows are read with the catalogue engine's field
readers (:mod:`unstuck.commands.catalogue`), once, when the screen first needs them
(:func:`program_table`; the bundled file's JSON is cached by
:func:`unstuck.core.cache.bundled_document`), and matched by :func:`does` and :func:`row_doing`.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from unstuck.commands.catalogue import (
    option_names,
    positional_indexes,
    row_fields,
    string_list,
    subcommand_words,
    yaml_document,
)
from unstuck.commands.parse import SimpleCommand
from unstuck.core.cache import bundled_document

__all__ = [
    "Does",
    "OutputOptions",
    "ProgramRow",
    "ProgramTable",
    "does",
    "parse_program_table",
    "program_table",
    "program_word",
    "row_doing",
]


class Does(enum.Enum):
    """What a call does, as a row of the program table says (the file's header defines each)."""

    FETCHES = "fetches"
    FETCHES_REMOTE_SOURCE = "fetches_remote_source"
    FETCHES_GIVEN_OPERAND = "fetches_given_operand"
    SENDS = "sends"
    RESOLVES = "resolves"
    CONNECTS = "connects"
    STARTS_CONTAINER = "starts_container"
    DUMPS_ENVIRONMENT = "dumps_environment"
    COPIES = "copies"
    RUNS_ITS_INPUT = "runs_its_input"
    RUNS_WORKING_TREE = "runs_working_tree"


@dataclass(frozen=True, slots=True)
class ProgramRow:
    """One row: its programs, its subcommand (each word a set of alternatives; ``()``: every
    call), what a call it matches does, the letters one of its options must hold
    (``only_with_letters``, empty: none needed), its source and where it is (file and row)."""

    programs: frozenset[str]
    subcommand: tuple[frozenset[str], ...]
    does: frozenset[Does]
    only_with_letters: frozenset[str]
    source: str
    origin: str


@dataclass(frozen=True, slots=True)
class OutputOptions:
    """The options naming the file a program writes: ``short`` (``-o``, or ``None``), ``long``
    (``--output``…), ``remote_name`` (options that name it after the URL: curl ``-O``),
    ``url_named`` (with no output option the file is named after the URL: wget), and
    ``ignore_case`` (its options are read in any case, so are given here in lower case)."""

    short: str | None
    long: tuple[str, ...]
    remote_name: frozenset[str] = frozenset()
    url_named: bool = False
    ignore_case: bool = False


@dataclass(frozen=True, slots=True)
class ProgramTable:
    """The rows by program name, and what the rows give once per program (by name):
    ``global_values`` (options before its subcommand that take a value), ``credential_options``
    (options whose value is a credential it uses), ``outputs``; ``data_modules``, the Python
    modules that run no file of the working tree; ``fetch_names``, the names (in lower case) of
    programs whose rows fetch or connect, which the screen looks for in prose."""

    rows: Mapping[str, tuple[ProgramRow, ...]]
    global_values: Mapping[str, frozenset[str]]
    credential_options: Mapping[str, frozenset[str]]
    outputs: Mapping[str, OutputOptions]
    data_modules: frozenset[str]
    fetch_names: tuple[str, ...]


_BUNDLED = "command_screen.yaml"
_ROW_KEYS = frozenset({"program", "subcommand", "does", "only_with_letters", "global_values",
                       "credential_options", "output", "ignore_case", "source"})
_PER_PROGRAM = ("global_values", "credential_options", "output")
_OUTPUT_KEYS = frozenset({"short", "long", "remote_name", "url_named"})
_FETCHING = frozenset({Does.FETCHES, Does.FETCHES_REMOTE_SOURCE, Does.FETCHES_GIVEN_OPERAND, Does.CONNECTS})


def _options(raw: Mapping[str, Any], where: str, key: str, lower: bool = False) -> frozenset[str]:
    found = option_names(raw.get(key), where, key)
    return frozenset(o.lower() for o in found) if lower else found


def _output(raw: object, where: str, lower: bool) -> OutputOptions:
    entry = row_fields(raw, f"{where} output", _OUTPUT_KEYS)
    short = entry.get("short")
    if short is not None and (not isinstance(short, str) or len(short) != 2 or short[0] != "-"):
        raise ValueError(f"{where}: 'output' 'short' must be one short option (-x), got {short!r}")
    url_named = entry.get("url_named", False)
    if not isinstance(url_named, bool):
        raise ValueError(f"{where}: 'output' 'url_named' must be true or false, got {url_named!r}")
    longs = _options(entry, f"{where} output", "long", lower)
    if short is None and not longs:
        raise ValueError(f"{where}: 'output' needs 'short' or 'long'")
    return OutputOptions(short, tuple(sorted(longs)), _options(entry, f"{where} output", "remote_name", lower),
                         url_named, lower)


def _row(raw: object, where: str) -> tuple[ProgramRow, Mapping[str, Any]]:
    entry = row_fields(raw, where, _ROW_KEYS)
    programs = string_list(entry.get("program"), where, "program")
    if not programs or any(any(ch.isspace() for ch in p) for p in programs):
        raise ValueError(f"{where}: 'program' is required: names without spaces")
    where = f"{where} ({programs[0]})"
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{where}: 'source' is required and must be a non-empty string")
    raw_does = entry.get("does")
    if not isinstance(raw_does, list):
        raise ValueError(f"{where}: 'does' is required: a list of {', '.join(d.value for d in Does)}")
    try:
        roles = frozenset(Does(str(item)) for item in raw_does)
    except ValueError:
        raise ValueError(f"{where}: 'does' entries must be among {', '.join(d.value for d in Does)}, "
                         f"got {raw_does!r}") from None
    subcommand = subcommand_words(entry.get("subcommand"), where)
    given = [key for key in _PER_PROGRAM if entry.get(key) is not None]
    if subcommand and given:
        raise ValueError(f"{where}: {', '.join(given)} belong to a row without a subcommand")
    if not roles and not given:
        raise ValueError(f"{where}: a row needs 'does' or one of {', '.join(_PER_PROGRAM)}")
    letters = frozenset(string_list(entry.get("only_with_letters"), where, "only_with_letters"))
    if letters and (roles != {Does.DUMPS_ENVIRONMENT} or any(len(letter) != 1 for letter in letters)):
        raise ValueError(f"{where}: 'only_with_letters' are single letters, on a dumps_environment row")
    ignore_case = entry.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        raise ValueError(f"{where}: 'ignore_case' must be true or false, got {ignore_case!r}")
    fields: dict[str, Any] = {}
    if entry.get("global_values") is not None:
        fields["global_values"] = _options(entry, where, "global_values")
    if entry.get("credential_options") is not None:
        fields["credential_options"] = _options(entry, where, "credential_options")
    if entry.get("output") is not None:
        fields["output"] = _output(entry["output"], where, ignore_case)
    row = ProgramRow(frozenset(programs), subcommand, roles, letters, " ".join(source.split()), where)
    return row, fields


def _table_of_document(document: object, name: str) -> ProgramTable:
    if not isinstance(document, Mapping) or not isinstance(document.get("programs"), list):
        raise ValueError(f"{name}: must be a mapping with a 'programs' list of rows")
    unknown = sorted(str(k) for k in document if k not in ("programs", "data_modules"))
    if unknown:
        raise ValueError(f"{name}: unknown top-level key(s) {', '.join(unknown)}")
    rows: dict[str, list[ProgramRow]] = {}
    per_program: dict[str, dict[str, Any]] = {key: {} for key in _PER_PROGRAM}
    fetch_names: set[str] = set()
    for index, raw in enumerate(document["programs"]):
        row, fields = _row(raw, f"{name}: row {index + 1}")
        for program in sorted(row.programs):
            rows.setdefault(program, []).append(row)
            for key, value in fields.items():
                if program in per_program[key]:
                    raise ValueError(f"{row.origin}: '{key}' of {program!r} is given twice")
                per_program[key][program] = value
        if row.does & _FETCHING:
            # a name written in capitals (lwp-request's GET) is a word of prose, not the program
            fetch_names.update(p for p in row.programs if p == p.lower())
    modules: tuple[str, ...] = ()
    if document.get("data_modules") is not None:
        where = f"{name}: data_modules"
        entry = row_fields(document["data_modules"], where, ("modules", "source"))
        modules = string_list(entry.get("modules"), where, "modules")
        if not isinstance(entry.get("source"), str) or not entry["source"].strip():
            raise ValueError(f"{where}: 'source' is required and must be a non-empty string")
    return ProgramTable({program: tuple(found) for program, found in rows.items()},
                        per_program["global_values"], per_program["credential_options"], per_program["output"],
                        frozenset(modules), tuple(sorted(fetch_names, key=lambda n: (-len(n), n))))


def parse_program_table(text: str, name: str) -> ProgramTable:
    """The table in one file's text (the format of ``unstuck/data/command_screen.yaml``);
    ``name`` is named in every error.

    Raises:
        ValueError: naming the file and the row, for text that is not YAML, a missing
            ``programs`` list, an unknown key, a ``does`` outside :class:`Does`, a row without
            a source, or a per-program field given twice for one program.
    """
    return _table_of_document(yaml_document(text, name), name)


def _bundled_yaml(text: str) -> object:
    """The bundled file's YAML document (its JSON is cached by :func:`bundled_document`)."""
    return yaml_document(text, f"unstuck/data/{_BUNDLED}")


@functools.cache
def program_table() -> ProgramTable:
    """The bundled table, read once (``unstuck/data/command_screen.yaml``).

    Raises:
        ValueError: the bundled file is malformed (naming the row).
    """
    return _table_of_document(bundled_document(_BUNDLED, _bundled_yaml), f"unstuck/data/{_BUNDLED}")


def program_word(command: SimpleCommand) -> str:
    """The word that names the program, as written (after wrappers and assignments)."""
    return command.words[len(command.words) - len(command.args) - 1] if command.words else ""


def _matches(row: ProgramRow, command: SimpleCommand, table: ProgramTable) -> bool:
    if not row.subcommand:
        return True
    program = command.program or ""
    values = table.global_values.get(program, frozenset())
    words = [command.args[i] for i in positional_indexes(command.args, values)]
    return len(words) >= len(row.subcommand) and all(
        word in alternatives for word, alternatives in zip(words, row.subcommand, strict=False))


def row_doing(command: SimpleCommand, role: Does, table: ProgramTable | None = None) -> ProgramRow | None:
    """The first row that says ``command`` does ``role``: a row naming its program (its base
    name, in lower case too, or the word naming it as written) whose subcommand, if any, is
    its first positional words (options before them skipped, with the values of the
    program's ``global_values``); ``None`` when none does."""
    program = command.program
    if program is None:
        return None
    table = table or program_table()
    seen: set[str] = set()
    for name in (program, program.lower(), program_word(command)):
        if name in seen:
            continue
        seen.add(name)
        for row in table.rows.get(name, ()):
            if role in row.does and _matches(row, command, table):
                return row
    return None


def does(command: SimpleCommand, role: Does, table: ProgramTable | None = None) -> bool:
    """Whether a row says ``command`` does ``role`` (:func:`row_doing`)."""
    return row_doing(command, role, table) is not None
