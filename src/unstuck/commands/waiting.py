"""What to do about a program that waited for input until its deadline: a pager waiting for a
key, a prompt waiting for an answer (:attr:`unstuck.processes.leases.LeaseOutcome.waiting_for_input`).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Such a call did not fail because something was slow, and repeating it waits again: it is an
interactive ``invalid_args`` situation (the signal table's pager row says the same of a pager's
text), and the fix is to run the same command so that it does not wait. The fix comes from:

1. the interactive-call catalogue (``data/interactive_calls.yaml``, a user's ``calls:`` rows
   first), read with a terminal (:func:`unstuck.commands.interactive.interactive_call`): the row that says the
   command waits says what makes it not wait. A pager that waited is replaced by a setting
   (``unless_env``: ``GIT_PAGER=cat``, ``MANPAGER=cat``; then options before the subcommand:
   ``--no-pager``; then options: ``--no-cli-pager``); a prompt of the program itself is answered
   by its option (``--yes``, ``--non-interactive``, ``-o BatchMode=yes``; then settings). Help
   and version options are never a fix;
2. else :data:`FIXES`, keyed by the program that waited (a pager run directly, debconf's
   dialog, a package manager run from a script), each row with its documented source;
3. else the last resort: no terminal to read (``< /dev/null``): the read ends at once.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from unstuck.commands.interactive import (
    InteractiveCatalogue,
    InteractiveRow,
    OptionSpec,
    interactive_call,
    load_interactive_catalogue,
)
from unstuck.commands.parse import CommandLine, SimpleCommand, parse_command_line

__all__ = ["FIXES", "PAGERS", "FixShape", "NonInteractiveFix", "WaitingRow", "non_interactive_fix"]

#: Programs that show text a screen at a time and wait for a key (less(1), more(1), most(1),
#: pg(1)): the rows of the catalogue's pager section name the same programs.
PAGERS = frozenset({"less", "more", "most", "pg"})
#: Options that ask for help or a version: a catalogue row lists them under ``unless`` (they do
#: not wait), but they do not do what was asked.
_HELP_OR_VERSION = frozenset({"--help", "-h", "-help", "--version", "-V", "-version", "-v"})
#: The longest command shown inside a fix (characters); a longer one is cut with "…".
_COMMAND_CHARS = 120
_SOURCE_CHARS = 90


class FixShape(enum.StrEnum):
    """How a fix changes the command: a setting before it, an option added to the program (or
    put right after the program's name, before its subcommand: ``git --no-pager log``), its
    output piped into ``cat`` (a pager pages only a terminal), or its input from ``/dev/null``."""

    SETTING = "setting"
    OPTION = "option"
    OPTION_FIRST = "option_first"
    PIPE_TO_CAT = "pipe_to_cat"
    NO_STDIN = "no_stdin"


@dataclass(frozen=True, slots=True)
class WaitingRow:
    """One row of :data:`FIXES`: the programs that waited, the fix, what they waited for, and
    where the fix is documented. ``direct``: the row holds when the program that waited is one
    the command line runs itself (``True``), only when something else started it (``False``),
    or either (``None``)."""

    programs: frozenset[str]
    shape: FixShape
    change: str
    why: str
    source: str
    direct: bool | None = None


#: The non-interactive form of programs that wait for input, by the program that waited.
FIXES: tuple[WaitingRow, ...] = (
    WaitingRow(PAGERS, FixShape.PIPE_TO_CAT, "| cat", "a pager waits for a key", direct=True,
               source="less main.c and more(1): with standard output not a terminal they copy their input"),
    WaitingRow(PAGERS, FixShape.SETTING, "PAGER=cat", "a pager waits for a key", direct=False,
               source="environ(7) PAGER: the program that shows text a screen at a time"),
    WaitingRow(frozenset({"whiptail", "dialog", "frontend"}), FixShape.SETTING, "DEBIAN_FRONTEND=noninteractive",
               "debconf asks a configuration question",
               source="debconf(7): the noninteractive frontend never interacts with you"),
    WaitingRow(frozenset({"apt-get", "apt", "aptitude"}), FixShape.OPTION, "-y",
               "apt asks whether to continue", source="apt-get(8) -y, --yes, --assume-yes"),
    WaitingRow(frozenset({"dnf", "yum", "dnf5"}), FixShape.OPTION, "-y", "dnf asks whether to continue",
               source="dnf(8) -y, --assumeyes"),
    WaitingRow(frozenset({"npx", "npm"}), FixShape.OPTION, "--yes", "npx asks before it installs a package",
               source="npm-exec(1) --yes: no prompt before installing packages"),
    WaitingRow(frozenset({"pnpm"}), FixShape.OPTION, "--config.confirmModulesPurge=false",
               "pnpm asks before it removes and reinstalls the modules directories",
               source="pnpm pkg-manager/core/src/install/validateModules.ts: no confirm prompt when "
                      "confirmModulesPurge is false"),
    WaitingRow(frozenset({"sudo"}), FixShape.OPTION, "-n", "sudo asks for a password",
               source="sudo(8) -n, --non-interactive: never prompt"),
    WaitingRow(frozenset({"ssh", "scp", "sftp"}), FixShape.OPTION, "-o BatchMode=yes",
               "ssh asks for a password or a passphrase",
               source="ssh_config(5) BatchMode: no passphrase or password querying"),
)


@dataclass(frozen=True, slots=True)
class NonInteractiveFix:
    """How to run a command that waited for input so that it does not wait.

    Attributes:
        program: the program that waited (``"less"``).
        command: the command line to run instead, or what to change when no single command
            line says it (``"apt-get install gh, with --yes"``).
        why: what the program was waiting for (the catalogue row's ``why``, else the table's).
        source: where the fix is documented (a man page, the program's source).
    """

    program: str
    command: str
    why: str
    source: str

    def describe(self) -> str:
        """One line for a situation's detail: ``less waited for input at the deadline (a pager
        waits for a key); run it so it does not wait: GIT_PAGER=cat git log (git(1) ...)``."""
        return (f"{self.program} waited for input at the deadline ({self.why}); "
                f"run it so it does not wait: {self.command} ({self.source})")


def non_interactive_fix(
    program: str, command: str | None, *, catalogue: InteractiveCatalogue | None = None
) -> NonInteractiveFix:
    """The way to run ``command`` so that ``program`` (which waited for input at the deadline)
    does not wait (see the module doc for the order of sources).

    Args:
        program: the program that waited (``LeaseOutcome.waiting_for_input``).
        command: the shell command line the call ran, when known.
        catalogue: the interactive-call catalogue; the bundled one by default.

    Never raises on any text: an unparsable command line gets the table's or the last resort's fix.
    """
    program = program.strip() or "the program"
    line = parse_command_line(command) if command else None
    direct = line is not None and any(_runs(c, program) for c in line.commands)
    if command and line is not None:
        rows = _rows_for(program, direct, (catalogue or load_interactive_catalogue()).rows)
        found = interactive_call(command, terminal=True, catalogue=InteractiveCatalogue(rows)) if rows else None
        row = next((r for r in rows if found is not None and r.origin == found.origin), None)
        change = _row_change(row, program) if row is not None else None
        if found is not None and row is not None and change is not None:
            simple = next((c for c in line.commands if c.text == found.command), None)
            shape, text = change
            return NonInteractiveFix(program, _render(shape, text, command, line, simple, program),
                                     row.why, _short(row.source))
    for entry in FIXES:
        if program in entry.programs and (entry.direct is None or entry.direct == direct):
            simple = next((c for c in line.commands if _runs(c, program)), None) if line else None
            shown = _render(entry.shape, entry.change, command or "", line, simple, program)
            return NonInteractiveFix(program, shown, entry.why, entry.source)
    return NonInteractiveFix(
        program, _render(FixShape.NO_STDIN, "< /dev/null", command or "", line, None, program),
        "a program reading a terminal waits for a person to type",
        "termios(3): a read of a terminal in canonical mode waits for a line; give it none, or its own "
        "non-interactive option")


def _rows_for(program: str, direct: bool, rows: Sequence[InteractiveRow]) -> tuple[InteractiveRow, ...]:
    """The catalogue rows that can explain what waited: a program the line runs itself is
    explained by its own rows (``sudo apt-get install`` where apt-get waited: apt-get's row, not
    sudo's); one the line does not run was started by a program that reads its name from the
    environment (``GIT_PAGER``, ``MANPAGER``, ``EDITOR``): only rows with such settings
    (``unless_env``) can explain it."""
    if direct:
        return tuple(row for row in rows if program in row.programs)
    return tuple(row for row in rows if row.unless_env and program not in row.programs)


def _row_change(row: InteractiveRow, program: str) -> tuple[FixShape, str] | None:
    """What a catalogue row says makes it not wait, in the order that suits what waited: a
    pager's setting first (it replaces the pager), a prompt's own option first."""
    settings = [f"{name}={value}" for name, value in row.unless_env]
    settings.sort(key=lambda s: s.endswith("="))  # a setting with a value reads better than an empty one
    before = _options(row.unless_before, row)
    anywhere = _options(row.unless, row)
    ordered: list[tuple[FixShape, str]]
    if program in PAGERS:
        ordered = [*((FixShape.SETTING, s) for s in settings), *((FixShape.OPTION_FIRST, o)
                   for o in before), *((FixShape.OPTION, o) for o in anywhere)]
    else:
        ordered = [*((FixShape.OPTION, o) for o in anywhere), *((FixShape.OPTION_FIRST, o)
                   for o in before), *((FixShape.SETTING, s) for s in settings)]
    return ordered[0] if ordered else None


def _options(groups: Sequence[Sequence[OptionSpec]], row: InteractiveRow) -> list[str]:
    """The groups as written, those of long options first (``--yes`` reads better than ``-y``)."""
    written = [(text, all(o.name.startswith("--") for o in group)) for group in groups
               if (text := _option_text(group, row)) is not None]
    return [text for text, _ in sorted(written, key=lambda item: not item[1])]


def _option_text(group: Sequence[OptionSpec], row: InteractiveRow) -> str | None:
    """A group of options as written (``--yes``, ``-o BatchMode=yes``, ``--message <message>``
    for an option that takes a value); ``None`` for help or version options."""
    if any(option.name in _HELP_OR_VERSION for option in group):
        return None
    words = []
    for option in group:
        if option.value is not None:
            words.append(f"{option.name} {option.value}")
        elif option.name in row.value_options:
            words.append(f"{option.name} <{option.name.lstrip('-')}>")
        else:
            words.append(option.name)
    return " ".join(words)


def _runs(command: SimpleCommand, program: str) -> bool:
    return command.program == program or any(w and w[0].rsplit("/", 1)[-1] == program for w in command.wrappers)


def _single(line: CommandLine | None) -> bool:
    return line is not None and len(line.commands) == 1 and line.complete


def _one_pipeline(line: CommandLine | None) -> bool:
    return line is not None and line.complete and len(line.pipelines) == 1 and all(
        c.depth == 0 and not c.in_substitution for c in line.commands)


def _render(shape: FixShape, change: str, command: str, line: CommandLine | None,
            simple: SimpleCommand | None, program: str) -> str:
    """The fixed command line, exact where the shell's grammar allows, else what to change."""
    shown = command if len(command) <= _COMMAND_CHARS else command[:_COMMAND_CHARS - 1] + "…"
    if not command:
        return {FixShape.SETTING: f"set {change} for the command", FixShape.OPTION: f"add {change}",
                FixShape.OPTION_FIRST: f"add {change} before the subcommand",
                FixShape.PIPE_TO_CAT: "pipe its output into cat", FixShape.NO_STDIN: "give it no terminal to read "
                "(< /dev/null) or its own non-interactive option"}[shape]
    if shape is FixShape.SETTING:
        return f"{change} {shown}" if _single(line) else f"export {change}; {shown}"
    if shape is FixShape.PIPE_TO_CAT:
        return f"{shown} {change}" if _one_pipeline(line) else f"{{ {shown}; }} {change}"
    if shape is FixShape.NO_STDIN:
        return f"{shown} {change}" if _single(line) else f"{{ {shown}; }} {change}"
    if simple is None:  # a program the line does not run itself (a script's)
        return f"give {program} {change} where {shown} runs it"
    if shape is FixShape.OPTION_FIRST:
        name = simple.words[0] if simple.words else ""
        if (not simple.wrappers and name.rsplit("/", 1)[-1] == program and simple.text.startswith(name)
                and len(command) <= _COMMAND_CHARS and simple.text in command):
            # the option where the program's manual puts it: after its name, before the subcommand
            fixed = f"{name} {change}{simple.text[len(name):]}"
            return command.replace(simple.text, fixed, 1)
        change = f"{change} (before the subcommand)"
    target = simple.text if len(simple.text) <= _COMMAND_CHARS else simple.text[:_COMMAND_CHARS - 1] + "…"
    return f"{target}, with {change}"


def _short(source: str) -> str:
    """A catalogue row's source up to its first explanation (``git(1) -P/--no-pager and
    GIT_PAGER``)."""
    cut = min((i for i in (source.find(" ("), source.find(": "), source.find("; ")) if i > 0), default=len(source))
    short = source[:cut].strip()
    return short if len(short) <= _SOURCE_CHARS else short[:_SOURCE_CHARS - 1] + "…"
