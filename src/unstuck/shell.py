"""Command lines as a shell sees them, the calls that wait for a person, and a screen for commands.

Three things about the command line an agent hands a generic shell tool (``run_command``):

* :func:`parse_command_line` reads it with a real shell parser (tree-sitter and its bash
  grammar), never by splitting words: pipelines, ``&&``/``||``/``;``, subshells and groups,
  ``$(…)``, backticks, ``<(…)``/``>(…)``, redirections, here-documents, assignments, the string
  of ``bash -c "…"`` (``sh -lc``, ``su -c``, ``eval``, ``script -c``, ``flock FILE -c``,
  ``watch``, a here-document fed to a shell) and wrappers (``sudo -u bob``, ``env X=1``,
  ``timeout 30``, ``nice -n 5``, ``xargs``, ``flock FILE``, ``npx`` …) all come out as
  :class:`SimpleCommand` records. It never raises: a line tree-sitter cannot fully parse still
  yields what it can, with ``complete=False``.
* :func:`interactive_call` finds the first simple command that would wait for a person, using
  the catalogue in ``unstuck/data/interactive_calls.yaml`` (plus a user's own files) and the
  streams the tool gives it: a call that signs in through a browser waits whatever the streams
  (``always``); an editor, a password prompt, a confirmation or a pager waits only when the
  tool gives it a terminal (``with_terminal``). A call that asks for ``--help``/``--version``
  never waits. Rows are also tried on the program a package manager runs (``yarn wrangler
  login``, ``pnpm exec x``, ``bun x x``) and on the command of find's ``-exec``.
* :func:`screen_command` is the structural screen a suggested command ("please run: …") passes
  before unstuck quotes it (its text cleaned first by :func:`unstuck.text.clean_terminal_text`).

A command name that is an expansion (decided): the line is taken at its word where it says
what the name is, and nowhere else. ``$(which gh)``, ``$(command -v gh)`` and ``$(type -P
gh)`` are ``gh``; ``$x`` after ``x=gh`` earlier in the same line is ``gh``; ``$SHELL`` is a
POSIX ``sh`` and ``$BASH`` is ``bash``; ``${x:-gh}`` is ``gh`` when the line does not set
``x``. Any other expansion (``"$GH" pr list``, ``$(echo gh) auth login``, ``sh -c "$(echo gh
auth login)"``) names no program: its value exists only once it has run, so
:func:`interactive_call` does not guess it, and :func:`screen_command` refuses it (a
substitution as a command name, or any program named by a variable fed a pipe).

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
import fnmatch
import functools
import posixpath
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import re2
import tree_sitter_bash
import yaml
from tree_sitter import Language, Node, Parser

from unstuck.cache import bundled_document
from unstuck.text import clean_terminal_text, has_invisible, valid_utf8

__all__ = [
    "TOO_MANY_TO_SCREEN",
    "CommandLine",
    "InteractiveCall",
    "InteractiveCatalogue",
    "InteractiveRow",
    "OptionSpec",
    "Redirect",
    "Screened",
    "SimpleCommand",
    "Stream",
    "TerminalStream",
    "VariableEffect",
    "VariableRule",
    "Waits",
    "command_operators",
    "command_programs",
    "command_subject",
    "find_download_and_run",
    "interactive_call",
    "is_setup",
    "load_interactive_catalogue",
    "parse_command_line",
    "parse_interactive_calls",
    "plain_command_refusal",
    "screen_command",
    "variable_rule",
]

#: Compound commands nested deeper than this are not read (the line is then ``complete=False``).
MAX_NESTING = 48
#: ``bash -c "bash -c '…'"`` strings are read this many levels deep.
MAX_SCRIPT_DEPTH = 6
#: The screen refuses a suggested command longer than this many characters.
SCREEN_MAX_CHARS = 300


# ---------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------


class Stream(enum.StrEnum):
    """Where a simple command's standard input or output goes.

    ``INHERITED`` is the tool's own stream (a terminal when the tool gives one; also a
    redirection to or from ``/dev/tty``); ``PIPE`` a pipe to or from another command (also
    ``<(…)``/``>(…)``); ``FILE`` a file or another descriptor; ``CAPTURED`` the output of a
    ``$(…)``/backtick substitution, read by the shell; ``TEXT`` a here-document or here-string.
    """

    INHERITED = "inherited"
    PIPE = "pipe"
    FILE = "file"
    CAPTURED = "captured"
    TEXT = "text"


@dataclass(frozen=True, slots=True)
class Redirect:
    """One redirection: ``operator`` as written (``>``, ``>>``, ``<``, ``2>&1``'s ``>&``,
    ``<<``, ``<<-``, ``<<<``, ``&>``, ``&>>``, ``>|``, ``<>``), the explicit descriptor
    number if any (``2`` in ``2>/dev/null``), and the target with quotes removed (the body
    of a here-document, the word of a here-string)."""

    operator: str
    descriptor: int | None
    target: str


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command of a command line.

    Attributes:
        words: argv as the shell would pass it, quotes removed; unexpanded ``$VAR``, ``$(…)``
            and globs kept as their source text; prefix assignments and redirections excluded.
        program: base name of the program actually run, after assignments and wrappers
            (``sudo -u bob env X=1 gh pr list`` → ``"gh"``); a wrapper with nothing to run is
            itself the program (``sudo -v`` → ``"sudo"``); ``None`` when the name is an
            expansion (``"$GH" pr list``) or there is no word.
        args: the words after the program.
        text: its source text.
        in_substitution: inside ``$(…)``, backticks or ``<(…)``/``>(…)`` (at any depth).
        environment: ``(name, value)`` pairs set for it, in order (later wins): those of the
            shell running it, earlier ``export NAME=value`` in the same line, its prefix
            assignments and ``env NAME=value``.
        wrappers: the wrappers around the program with their options, outermost first
            (``(("sudo", "-u", "bob"), ("env", "X=1"))``).
        redirects: its redirections, those of enclosing groups first.
        stdin / stdout: where its standard input and output go (see :class:`Stream`).
        pipeline / stage: index into :attr:`CommandLine.pipelines` and its position there.
        depth: 0 in the line itself, 1 inside a ``bash -c "…"`` string of the line, and so on.
        script: the command line it runs from a string (``bash -c``, ``su -c``, ``eval``,
            ``pwsh -Command``, ``script -c``, ``flock FILE -c``, ``watch``, a here-document or
            here-string fed to a shell), else ``None``; its commands follow it in
            :attr:`CommandLine.commands` with ``depth + 1``.
        host: for a command inside ``$(…)``, backticks or ``<(…)``/``>(…)``, the index in
            :attr:`CommandLine.commands` of the simple command whose words or redirections
            hold that substitution (its output becomes that command's words); ``None`` at the
            top level and for a substitution held by a bare assignment (``x=$(…)``).
    """

    words: tuple[str, ...]
    program: str | None
    args: tuple[str, ...]
    text: str
    in_substitution: bool = False
    environment: tuple[tuple[str, str], ...] = ()
    wrappers: tuple[tuple[str, ...], ...] = ()
    redirects: tuple[Redirect, ...] = ()
    stdin: Stream = Stream.INHERITED
    stdout: Stream = Stream.INHERITED
    pipeline: int = 0
    stage: int = 0
    depth: int = 0
    script: str | None = None
    host: int | None = None


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A parsed command line.

    ``commands`` are in order of appearance (a command before the substitutions in its words;
    the commands of its ``-c`` string right after it). ``pipelines`` groups them: a command
    belongs to its innermost pipeline of two or more stages (all commands of a group stage such
    as ``(a; b) | c`` share the stage), otherwise to a pipeline of its own. ``complete`` is
    ``False`` when tree-sitter reported a syntax error or missing token, or nesting ran past
    :data:`MAX_NESTING`. ``assignments`` are the shell variables the line sets for the rest of
    it, in order: bare ``NAME=value`` statements and ``export``/``declare``/``local``/``readonly``
    arguments (values as written, expansions kept as source text; prefix assignments of a
    command are in its :attr:`SimpleCommand.environment` instead).
    """

    source: str
    commands: tuple[SimpleCommand, ...]
    pipelines: tuple[tuple[SimpleCommand, ...], ...]
    complete: bool
    assignments: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------------


@functools.cache
def _language() -> Language:
    return Language(tree_sitter_bash.language())


_ASSIGNMENT = re2.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PIPE_OPS = frozenset({"|", "|&"})
_LIST_OPS = frozenset({"&&", "||", ";", "&", ";;", ";&", ";;&", "\n"})
_REDIRECT_NODES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
#: Nodes whose children are read as if they were the enclosing list (their shape in
#: tree-sitter's tree does not match bash's binding of redirections and pipes).
_TRANSPARENT = frozenset({"pipeline", "list", "redirected_statement", "negated_command", "do_group",
                          "elif_clause", "else_clause", "case_item", "ERROR"})
_LEAF_STATEMENTS = frozenset({"command", "declaration_command", "unset_command", "test_command"})
_COMPOUND = frozenset({"subshell", "compound_statement", "if_statement", "while_statement", "for_statement",
                       "c_style_for_statement", "case_statement", "function_definition"})
_ASSIGNMENT_NODES = frozenset({"variable_assignment", "variable_assignments"})
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_HEREDOC_PARTS = frozenset({"heredoc_start", "heredoc_body", "heredoc_end", "heredoc_content"})


@dataclass(frozen=True, slots=True)
class _Wrapper:
    """A command that runs another command (its own options, then assignments or positionals,
    then the command). Sources: each program's manual, OPTIONS section."""

    values: frozenset[str] = frozenset()  # options that take the next word as their value
    positionals: int = 0  # words before the wrapped command (timeout's DURATION)
    assignments: bool = False  # NAME=value words before the command (env, sudo)
    runs_nothing: frozenset[str] = frozenset()  # options with which it runs no command
    package: bool = False  # the first word is a package spec (``wrangler@3``, ``@scope/pkg``)
    lone_dash: bool = False  # ``-`` is one of its options (env -)
    runs_string: frozenset[str] = frozenset()  # after the positionals: it runs a string (flock -c)


def _w(values: str = "", positionals: int = 0, *, assignments: bool = False, runs_nothing: str = "",
       package: bool = False, lone_dash: bool = False, runs_string: str = "") -> _Wrapper:
    return _Wrapper(frozenset(values.split()), positionals, assignments, frozenset(runs_nothing.split()),
                    package, lone_dash, frozenset(runs_string.split()))


#: Wrappers by base name: sudo(8), doas(1), env(1), timeout(1), nice(1), ionice(1), stdbuf(1),
#: nohup(1), bash(1) ``exec``/``command``/``builtin``/``time``, xargs(1), time(1), setsid(1),
#: chrt(1), taskset(1), chroot(8), unbuffer(1), caffeinate(8), pkexec(1), run0(1),
#: busybox(1)/toybox(1) (multi-call: the next word is the applet), npx(1), bunx, pnpx, uvx,
#: flock(1) (``flock [options] FILE COMMAND``; ``flock FILE -c STRING`` runs a string),
#: GNU parallel(1) (``parallel [options] [command]``; with no command it runs its input lines).
_WRAPPERS: Mapping[str, _Wrapper] = {
    "sudo": _w("-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -R --chroot -r --role "
               "-t --type -T --command-timeout -U --other-user", assignments=True,
               runs_nothing="-l --list -v --validate -K --remove-timestamp -V --version --help"),
    "doas": _w("-u -C", runs_nothing="-L"),
    "env": _w("-u --unset -C --chdir -S --split-string -a --argv0", assignments=True, lone_dash=True),
    "timeout": _w("-s --signal -k --kill-after", 1),
    "nice": _w("-n --adjustment"),
    "ionice": _w("-c --class -n --classdata -p --pid -P --pgid -u --uid"),
    "stdbuf": _w("-i -o -e --input --output --error"),
    "nohup": _w(),
    "exec": _w("-a"),
    "command": _w(runs_nothing="-v -V"),
    "builtin": _w(),
    "xargs": _w("-a --arg-file -d --delimiter -E --eof -I -L --max-lines -n --max-args -P --max-procs "
                "-s --max-chars --process-slot-var"),
    "time": _w("-f --format -o --output"),
    "setsid": _w(),
    "chrt": _w("-T --sched-runtime -P --sched-period -D --sched-deadline", 1),
    "taskset": _w("", 1),
    "chroot": _w("--userspec --groups", 1),
    "unbuffer": _w(),
    "caffeinate": _w("-t -w"),
    "pkexec": _w("--user"),
    "run0": _w("-u --user -g --group -D --chdir --setenv --unit --property --description --slice --nice"),
    "busybox": _w(),
    "toybox": _w(),
    "npx": _w("-p --package -c --call -w --workspace", package=True),
    "pnpx": _w("-p --package", package=True),
    "bunx": _w("-p --package", package=True),
    "uvx": _w("--from --with --with-requirements -p --python --index --default-index", package=True),
    "flock": _w("-w --wait --timeout -E --conflict-exit-code", 1, runs_string="-c --command"),
    "parallel": _w("-j --jobs -P --max-procs -S --sshlogin -a --arg-file -d --delimiter -I --colsep -C -N "
                   "-n --max-args -L --max-lines --timeout --joblog --results --tmpdir --workdir --env "
                   "--delay --retries --halt --memfree --load --tagstring --basefile --return --transfer-file"),
}
#: Wrappers that are a program and a subcommand: npm-exec(1), pnpm dlx/exec, yarn dlx,
#: pipx run, uv run, poetry run, pipenv run, bundle exec, conda/mamba run.
_SUB_WRAPPERS: Mapping[tuple[str, str], _Wrapper] = {
    ("npm", "exec"): _w("-p --package -c --call -w --workspace", package=True),
    ("pnpm", "dlx"): _w("--package", package=True),
    ("pnpm", "exec"): _w(),
    ("yarn", "dlx"): _w("-p --package", package=True),
    ("pipx", "run"): _w("--spec --python --pip-args --index-url", package=True),
    ("uv", "run"): _w("--with --with-editable --with-requirements --extra --group --only-group -p --python "
                      "--project --directory --package --env-file --index --default-index"),
    ("poetry", "run"): _w("-C --directory -P --project"),
    ("pipenv", "run"): _w(),
    ("bundle", "exec"): _w("--gemfile"),
    ("conda", "run"): _w("-n --name -p --prefix --cwd"),
    ("mamba", "run"): _w("-n --name -p --prefix --cwd"),
}
#: Shells whose ``-c`` operand is a command line (bash(1), dash(1), zsh(1), ksh(1), fish(1)).
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "rbash"})
#: Shell options that take the next word as their value (bash(1) OPTIONS, set -o).
_SHELL_VALUES = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


@dataclass(frozen=True, slots=True)
class _Context:
    in_substitution: bool = False
    stdin: Stream = Stream.INHERITED
    stdout: Stream = Stream.INHERITED
    redirects: tuple[Redirect, ...] = ()
    pipeline: tuple[int, int] | None = None
    depth: int = 0
    nest: int = 0
    environment: tuple[tuple[str, str], ...] = ()
    skip_substitutions: bool = False
    host: int | None = None


class _Builder:
    """Collects commands while one line (and its nested strings) is read; discarded after."""

    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.pipelines: list[list[int]] = []
        self.complete = True
        self.assignments: list[tuple[str, str]] = []
        #: variables set to one plain word earlier in the line (``x=gh; $x auth login``)
        self.words: dict[str, str] = {}

    def assign(self, name: str, value: str) -> None:
        self.assignments.append((name, value))
        if value and _PLAIN_WORD.match(value):
            self.words[name] = value
        else:
            self.words.pop(name, None)

    def add(self, command: SimpleCommand) -> SimpleCommand:
        if command.pipeline < 0:
            command = replace(command, pipeline=len(self.pipelines), stage=0)
            self.pipelines.append([])
        self.pipelines[command.pipeline].append(len(self.commands))
        self.commands.append(command)
        return command

    def new_pipeline(self) -> int:
        self.pipelines.append([])
        return len(self.pipelines) - 1


class _Source:
    """The bytes tree-sitter parsed, and the text of any node or span of them (with the
    characters :func:`_bmp_only` stood in for put back)."""

    def __init__(self, data: bytes, restore: Mapping[int, str] | None = None) -> None:
        self.data = data
        self.restore = restore or {}

    def span(self, start: int, end: int) -> str:
        chunk = self.data[start:end]
        try:
            text = chunk.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            text = chunk.decode("utf-8", "replace")
        return text.translate(self.restore) if self.restore else text

    def text(self, node: Node) -> str:
        return self.span(node.start_byte, node.end_byte)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _bmp_only(text: str) -> tuple[str, dict[int, str]]:
    """``text`` with each character beyond the Basic Multilingual Plane replaced by a private-use
    character that does not occur in it, and the table that puts them back.

    tree-sitter-bash 0.25.1 reads past its buffer (a segmentation fault on Linux) on a ``{``
    followed by a 4-byte UTF-8 character (tree-sitter/tree-sitter-bash issue 337, open); a
    private-use character is a word character to bash as the original was, so the line's
    structure is unchanged."""
    if not text or max(text) < "\U00010000":
        return text, {}
    astral = sorted({char for char in text if ord(char) >= 0x10000})
    present = set(text)
    free = (chr(code) for code in range(0xE000, 0xF900) if chr(code) not in present)
    swap: dict[str, str] = {}
    for char in astral:
        swap[char] = next(free, "\ufffd")
    restore = {ord(stand_in): char for char, stand_in in swap.items() if stand_in != "\ufffd"}
    return "".join(swap.get(char, char) for char in text), restore


def _unescape_word(text: str) -> str:
    """Quote removal in an unquoted word: ``\\x`` → ``x``, backslash-newline removed."""
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _unescape_double(text: str) -> str:
    """Inside double quotes a backslash escapes only ``$ ` " \\`` and newline (bash(1), QUOTING)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '$`"\\\n':
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                  "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(text: str) -> str:
    """Decode a ``$'…'`` string's escapes (bash(1), QUOTING: ANSI-C quoting)."""
    out: list[str] = []
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char != "\\" or index + 1 >= length:
            out.append(char)
            index += 1
            continue
        code = text[index + 1]
        index += 2
        if code in _ANSI_C_SIMPLE:
            out.append(_ANSI_C_SIMPLE[code])
        elif code in "xuU01234567":
            limit = {"x": 2, "u": 4, "U": 8}.get(code, 3)
            digits_from = index if code in "xuU" else index - 1
            alphabet = "0123456789abcdefABCDEF" if code in "xuU" else "01234567"
            end = digits_from
            while end < length and end - digits_from < limit and text[end] in alphabet:
                end += 1
            digits = text[digits_from:end]
            if not digits:
                out.append("\\" + code)
                continue
            value = int(digits, 16 if code in "xuU" else 8)
            out.append(chr(value) if value <= 0x10FFFF else "\ufffd")
            index = end
        elif code == "c" and index < length:
            out.append(chr(ord(text[index]) & 0x1F))
            index += 1
        else:
            out.append("\\" + code)
    return "".join(out)


def _value(src: _Source, node: Node) -> str:
    """The word a node stands for after quote removal; expansions kept as source text."""
    kind = node.type
    text = src.text(node)
    if kind == "word":
        return _unescape_word(text)
    if kind == "raw_string":
        return text[1:-1] if len(text) >= 2 and text.endswith("'") else text[1:]
    if kind == "ansi_c_string":
        return _ansi_c(text[2:-1] if text.endswith("'") else text[2:])
    if kind in ("string", "translated_string"):
        return _double_quoted(src, node)
    if kind in ("concatenation", "command_name"):
        return _joined(src, node)
    return text


def _double_quoted(src: _Source, node: Node) -> str:
    start = node.start_byte + (2 if node.type == "translated_string" else 1)
    end = node.end_byte - 1 if node.end_byte - start >= 1 and src.data[node.end_byte - 1:node.end_byte] == b'"' \
        else node.end_byte
    out: list[str] = []
    cursor = start
    for child in node.named_children:
        if child.start_byte < cursor or child.end_byte > end:
            continue
        if child.type == "string_content":
            continue
        out.append(_unescape_double(src.span(cursor, child.start_byte)))
        out.append(src.text(child))
        cursor = child.end_byte
    if cursor < end:
        out.append(_unescape_double(src.span(cursor, end)))
    return "".join(out)


def _joined(src: _Source, node: Node) -> str:
    out: list[str] = []
    cursor = node.start_byte
    for child in node.children:
        if child.start_byte > cursor:
            out.append(_unescape_word(src.span(cursor, child.start_byte)))
        out.append(_value(src, child))
        cursor = max(cursor, child.end_byte)
    if cursor < node.end_byte:
        out.append(_unescape_word(src.span(cursor, node.end_byte)))
    return "".join(out)


def _joined_words(src: _Source, nodes: Sequence[Node]) -> tuple[str, ...]:
    """Word values, joining words tree-sitter split at a line continuation: bash removes a
    backslash-newline before it splits words (bash(1), QUOTING), so ``one\\<newline>two`` is
    one word ``onetwo``."""
    words: list[str] = []
    previous_end = -1
    for node in nodes:
        value = _value(src, node)
        gap = src.span(previous_end, node.start_byte) if previous_end >= 0 else ""
        if words and gap and gap.replace("\\\n", "") == "":
            words[-1] += value
        else:
            words.append(value)
        previous_end = node.end_byte
    return tuple(words)


def _substitutions(node: Node) -> Iterator[Node]:
    """``$(…)``, backtick and ``<(…)`` nodes under ``node`` (not inside one another), in order."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in _SUBSTITUTIONS:
            yield current
            continue
        stack.extend(reversed(current.children))


def _has_substitution(node: Node) -> bool:
    return next(_substitutions(node), None) is not None


def _items(node: Node) -> Iterator[tuple[str, Node]]:
    """The children of a list-like node as bash sees them, flattened: ``("op", token)``,
    ``("stmt", statement)``, ``("redir", redirection)``, ``("word", other)``. Iterative:
    ``a && b && …`` nests lists as deep as it is long."""
    stack: list[Iterator[Node]] = [iter(node.children)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        kind = child.type
        if not child.is_named:
            if kind in _PIPE_OPS or kind in _LIST_OPS:
                yield "op", child
            continue
        if kind == "comment" or kind in _HEREDOC_PARTS:
            continue
        if kind in _TRANSPARENT:
            stack.append(iter(child.children))
        elif kind == "heredoc_redirect":
            yield "redir", child
            stack.append(iter(child.children))
        elif kind in _REDIRECT_NODES:
            yield "redir", child
        elif kind in _LEAF_STATEMENTS or kind in _COMPOUND or kind in _ASSIGNMENT_NODES:
            yield "stmt", child
        else:
            yield "word", child


def _redirect(src: _Source, node: Node) -> tuple[Redirect, list[Node]]:
    """The redirection a node stands for, and any words tree-sitter wrongly gave it as further
    destinations (in ``gh > out repo view`` the words ``repo view`` are gh's arguments)."""
    descriptor: int | None = None
    operator = ""
    target = ""
    extra: list[Node] = []
    seen_target = False
    for index, child in enumerate(node.children):
        field_name = node.field_name_for_child(index)
        if child.type == "file_descriptor":
            text = src.text(child)
            descriptor = int(text) if text.isdigit() and len(text) < 6 else None
        elif not child.is_named and not operator:
            operator = src.text(child)
        elif node.type == "heredoc_redirect":
            if child.type == "heredoc_body":
                target = src.text(child)
        elif child.is_named and (field_name == "destination" or node.type == "herestring_redirect"):
            if not seen_target:
                target = _value(src, child)
                seen_target = True
            elif node.type == "file_redirect":
                extra.append(child)
    return Redirect(operator, descriptor, target), extra


def _apply(ctx: _Context, redirect: Redirect) -> _Context:
    """The streams after one redirection (bash(1), REDIRECTION)."""
    op, fd, target = redirect.operator, redirect.descriptor, redirect.target
    stdin, stdout = ctx.stdin, ctx.stdout
    to_tty = target == "/dev/tty"
    if op in ("<<", "<<-", "<<<") and fd in (None, 0):
        stdin = Stream.TEXT
    elif op in ("<", "<>", "<&") and fd in (None, 0):
        stdin = Stream.INHERITED if to_tty else Stream.FILE
    elif op in ("&>", "&>>", ">&") and fd is None and not target.isdigit() and target != "-":
        stdout = Stream.INHERITED if to_tty else Stream.FILE
    elif op in (">", ">>", ">|", ">&") and fd in (None, 1):
        if op == ">&" and target == "2":
            stdout = Stream.INHERITED
        elif op == ">&" and target == "1":
            pass
        else:
            stdout = Stream.INHERITED if to_tty else Stream.FILE
    return replace(ctx, stdin=stdin, stdout=stdout, redirects=(*ctx.redirects, redirect))


def _base(word: str) -> str:
    return posixpath.basename(word.rstrip("/")) or word


def _set(words: str) -> frozenset[str]:
    """The words of a space-separated list, as a set (for the tables below)."""
    return frozenset(words.split())


#: A word with no expansion, quoting, space or glob: what ``x=gh`` may give ``$x``.
_PLAIN_WORD = re2.compile(r"^[A-Za-z0-9_./+@:%,=-]+$")
#: ``$(which gh)``, ```command -v gh```, ``$(type -P gh)``: the path lookup of a named program
#: (bash(1) ``command -v`` and ``type -P`` print the path that would run; which(1)).
_PATH_LOOKUP = re2.compile(
    r"^(?:\$\(|`)\s*(?:which|command\s+-[vV]|type\s+-[pP]|whence\s+-p)\s+([A-Za-z0-9_.+-]+)\s*(?:\)|`)$")
#: ``$x``, ``${x}``, ``${x:-default}``, ``${x-default}``.
_VARIABLE_WORD = re2.compile(r"^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-=]([^}]*))?\})$")
#: Variables that name a shell (bash(1), Shell Variables: ``SHELL`` is the path of the user's
#: shell, ``BASH`` the path of the running bash). ``$SHELL`` is taken as a POSIX ``sh``.
_SHELL_VARIABLES = {"SHELL": "sh", "BASH": "bash"}


def _program_name(word: str, package: bool = False, words: Mapping[str, str] | None = None) -> str | None:
    """The base name of a command word; ``$HOME/bin/gh`` is ``gh``.

    A name that is an expansion is resolved where the line itself says what it is: a path
    lookup (``$(which gh)``, ``$(command -v gh)``) is ``gh``; ``$x`` after ``x=gh`` earlier in
    the line (``words``) is ``gh``; ``$SHELL``/``$BASH`` are ``sh``/``bash``; a
    ``${x:-gh}`` default is used when ``x`` is not set in the line. Any other expansion
    (``"$GH"``, ``$(echo gh)``, ``$(cat name)``) is ``None``: its value is not known before it
    runs."""
    if word[:1] not in ("$", "`"):
        lookup = variable = None
    else:
        lookup = _PATH_LOOKUP.match(word)
        variable = _VARIABLE_WORD.match(word)
    if lookup is not None:
        return str(lookup.group(1))
    if variable is not None:
        name = variable.group(1) or variable.group(2)
        value = (words or {}).get(name) or _SHELL_VARIABLES.get(name)
        default = variable.group(3)
        if value is None and default and _PLAIN_WORD.match(default):
            value = default
        return _base(value) if value else None
    if "$(" in word or "`" in word or "<(" in word or ">(" in word:
        return None
    name = _base(word)
    if package and "@" in name[1:]:
        name = name[: name.index("@", 1)]
    if not name or "$" in name:
        return None
    return name


@dataclass(frozen=True, slots=True)
class _Resolved:
    index: int | None
    wrappers: tuple[tuple[str, ...], ...]
    environment: tuple[tuple[str, str], ...]
    package: bool


def _resolve(words: Sequence[str]) -> _Resolved:
    """Skip wrappers with their options, assignments and positionals to the program run."""
    wrappers: list[tuple[str, ...]] = []
    environment: list[tuple[str, str]] = []
    index = 0
    package = False
    while index < len(words):
        name = _base(words[index])
        spec = _WRAPPERS.get(name)
        consumed = 1
        if spec is None and index + 1 < len(words):
            spec = _SUB_WRAPPERS.get((name, words[index + 1]))
            consumed = 2
        if spec is None:
            break
        cursor = index + consumed
        stopped = False
        while cursor < len(words):
            word = words[cursor]
            if word == "--":
                cursor += 1
                break
            if word == "-" and spec.lone_dash:
                cursor += 1
                continue
            if not word.startswith("-") or word == "-":
                break
            if word in spec.runs_nothing:
                stopped = True
                break
            cursor += 2 if word in spec.values else 1
        if stopped:
            break
        if spec.assignments:
            while cursor < len(words) and _ASSIGNMENT.match(words[cursor]):
                name_, _, value = words[cursor].partition("=")
                environment.append((name_, value))
                cursor += 1
        cursor += spec.positionals
        if cursor >= len(words) or words[cursor] in spec.runs_string:
            break
        wrappers.append(tuple(words[index:cursor]))
        package = spec.package
        index = cursor
    return _Resolved(index if index < len(words) else None, tuple(wrappers), tuple(environment), package)


def _shell_options(args: Sequence[str]) -> tuple[frozenset[str], int]:
    """A shell's short option letters (``-lc`` gives ``l`` and ``c``; ``-o pipefail`` and long
    options are skipped) and the index of its first operand (bash(1), OPTIONS)."""
    letters: set[str] = set()
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            index += 1
            break
        if word in _SHELL_VALUES:
            index += 2
            continue
        if word.startswith("--"):
            index += 1
            continue
        if len(word) > 1 and word[0] in "-+":
            if word[0] == "-":
                letters.update(word[1:])
            index += 1
            continue
        break
    return frozenset(letters), index


def _shell_script(args: Sequence[str]) -> str | None:
    """The operand of ``-c`` in a shell's arguments (``-lc 'x'``, ``-e -c 'x'``, ``-o pipefail -c``)."""
    letters, index = _shell_options(args)
    return args[index] if "c" in letters and index < len(args) else None


def _option_value(args: Sequence[str], short: str | None, longs: Sequence[str]) -> str | None:
    """The value of ``-x VALUE``/``-xVALUE``/``--long VALUE``/``--long=VALUE`` (first found)."""
    for index, word in enumerate(args):
        if word == "--":
            return None
        for name in longs:
            if word == name and index + 1 < len(args):
                return args[index + 1]
            if word.startswith(name + "="):
                return word[len(name) + 1:]
        if short is not None:
            if word == short and index + 1 < len(args):
                return args[index + 1]
            if word.startswith(short) and not word.startswith("--") and len(word) > len(short):
                return word[len(short):]
    return None


def _short_value(args: Sequence[str], letter: str, longs: Sequence[str], value_letters: str) -> str | None:
    """The value of an option written ``-c VALUE``, ``-cVALUE``, at the end of a cluster of flags
    (``-qc VALUE``) or ``--long VALUE``/``--long=VALUE``; ``value_letters`` are the short
    options that take a value (a cluster ends at the first of them)."""
    for index, word in enumerate(args):
        if word == "--":
            return None
        for name in longs:
            if word == name:
                return args[index + 1] if index + 1 < len(args) else None
            if word.startswith(name + "="):
                return word[len(name) + 1:]
        if len(word) < 2 or word[0] != "-" or word[1] == "-":
            continue
        for position in range(1, len(word)):
            if word[position] not in value_letters:
                continue
            if word[position] != letter:
                break
            rest = word[position + 1:]
            if rest:
                return rest
            return args[index + 1] if index + 1 < len(args) else None
    return None


#: watch(1) (procps): options that take a value; it stops reading options at its command.
_WATCH_VALUES = frozenset({"-n", "--interval", "-q", "--equexit", "-s", "--shotsdir"})


def _watch_script(args: Sequence[str]) -> str | None:
    """The command watch(1) runs: its words joined by spaces and given to ``sh -c`` (with
    ``-x``/``--exec`` they are run directly, which reads the same)."""
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        index += 2 if word in _WATCH_VALUES else 1
    rest = args[index:]
    return " ".join(rest) if rest else None


def _reads_stdin_as_script(program: str, args: Sequence[str]) -> bool:
    """A shell with no ``-c`` and no script operand (or ``-s``, or ``-``) reads its program
    from standard input (bash(1), INVOCATION)."""
    letters, index = _shell_options(args)
    if "c" in letters:
        return False
    return "s" in letters or index >= len(args) or args[index] in ("-", "/dev/stdin")


def _script_of(program: str | None, args: Sequence[str], redirects: Sequence[Redirect]) -> str | None:
    """The command line a command runs from a string, if any."""
    if program is None:
        return None
    if program in _SHELLS:
        script = _shell_script(args)
        if script is not None:
            return script
        if _reads_stdin_as_script(program, args):
            for redirect in reversed(redirects):
                if redirect.operator in ("<<", "<<-", "<<<") and redirect.descriptor in (None, 0):
                    return redirect.target
                if redirect.descriptor in (None, 0) and redirect.operator in ("<", "<&", "<>"):
                    return None
        return None
    if program in ("su", "runuser"):
        return _option_value(args, "-c", ("--command",))
    if program == "script":
        return _short_value(args, "c", ("--command",), "cEIOBTmo")
    if program == "flock":
        return _option_value(args, "-c", ("--command",))
    if program == "watch":
        return _watch_script(args)
    if program == "eval":
        return " ".join(args) if args else None
    if program.lower() in ("pwsh", "powershell", "pwsh.exe", "powershell.exe"):
        for index, word in enumerate(args):
            if word.lower() in ("-c", "-command", "/c", "-com", "-comm", "-comma", "-comman") and index + 1 < len(args):
                return " ".join(args[index + 1:])
    return None


class _Reader:
    """Reads one line (and its nested strings) into a builder. Never raises on any text."""

    def __init__(self, builder: _Builder) -> None:
        self.b = builder

    def parse(self, source: str, ctx: _Context) -> None:
        safe, restore = _bmp_only(source)
        data = _encode(safe)
        tree = Parser(_language()).parse(data)
        root = tree.root_node
        if root.has_error:
            self.b.complete = False
        exports: list[tuple[str, str]] = []
        self.container(_Source(data, restore), root, ctx, exports)

    # -- lists and pipelines --------------------------------------------------------------------

    def container(self, src: _Source, node: Node, ctx: _Context, exports: list[tuple[str, str]]) -> None:
        if ctx.nest > MAX_NESTING:
            self.b.complete = False
            return
        stages: list[tuple[Node, list[Node]]] = []
        pending: list[Node] = []
        after_pipe = False
        for kind, item in _items(node):
            if kind == "op":
                if item.type in _PIPE_OPS:
                    after_pipe = True
                else:
                    self.pipeline(src, stages, ctx, exports)
                    stages = []
                    after_pipe = False
            elif kind == "stmt":
                if stages and not after_pipe:
                    self.pipeline(src, stages, ctx, exports)
                    stages = []
                stages.append((item, pending))
                pending = []
                after_pipe = False
            elif kind == "redir":
                if stages:
                    stages[-1][1].append(item)
                else:
                    pending.append(item)
            else:
                if stages:
                    self.pipeline(src, stages, ctx, exports)
                    stages = []
                self.substitutions_in(src, item, ctx, exports)
        self.pipeline(src, stages, ctx, exports)
        for redirect in pending:
            self.substitutions_in(src, redirect, ctx, exports)

    def pipeline(self, src: _Source, stages: list[tuple[Node, list[Node]]], ctx: _Context,
                 exports: list[tuple[str, str]]) -> None:
        if not stages:
            return
        count = len(stages)
        pipeline_id = self.b.new_pipeline() if count > 1 else None
        for position, (statement, redirect_nodes) in enumerate(stages):
            stage_ctx = replace(
                ctx,
                stdin=Stream.PIPE if position > 0 else ctx.stdin,
                stdout=Stream.PIPE if position < count - 1 else ctx.stdout,
                pipeline=(pipeline_id, position) if pipeline_id is not None else ctx.pipeline,
            )
            extra_words: list[Node] = []
            for redirect_node in redirect_nodes:
                record, extra = _redirect(src, redirect_node)
                stage_ctx = _apply(stage_ctx, record)
                extra_words.extend(extra)
            self.statement(src, statement, stage_ctx, exports, extra_words)
            for redirect_node in redirect_nodes:
                self.substitutions_in(src, redirect_node, ctx, exports)

    # -- statements ------------------------------------------------------------------------------

    def statement(self, src: _Source, node: Node, ctx: _Context, exports: list[tuple[str, str]],
                  extra_words: Sequence[Node] = ()) -> None:
        kind = node.type
        if kind == "command":
            self.command(src, node, ctx, exports, extra_words)
        elif kind in ("declaration_command", "unset_command"):
            self.declaration(src, node, ctx, exports)
        elif kind == "test_command":
            words = tuple(self.test_words(src, node))
            self.emit(SimpleCommand(words, words[0] if words else None, words[1:], src.text(node)), ctx)
            self.substitutions_in(src, node, ctx, exports, len(self.b.commands) - 1)
        elif kind in _ASSIGNMENT_NODES:
            for child in (node.named_children if kind == "variable_assignments" else (node,)):
                if child.type == "variable_assignment":
                    name_node = child.child_by_field_name("name")
                    value_node = child.child_by_field_name("value")
                    if name_node is not None:
                        self.b.assign(src.text(name_node), _value(src, value_node) if value_node is not None else "")
            self.substitutions_in(src, node, ctx, exports)
        else:
            self.container(src, node, replace(ctx, nest=ctx.nest + 1), exports)

    def test_words(self, src: _Source, node: Node) -> Iterator[str]:
        stack = [node]
        while stack:
            current = stack.pop()
            if current.child_count == 0 or current.type in ("word", "string", "raw_string", "concatenation",
                                                            "simple_expansion", "expansion", "number",
                                                            "command_substitution", "ansi_c_string", "regex"):
                yield _value(src, current)
                continue
            stack.extend(reversed(current.children))

    def declaration(self, src: _Source, node: Node, ctx: _Context, exports: list[tuple[str, str]]) -> None:
        words: list[str] = []
        assigned: list[tuple[str, str]] = []
        for child in node.children:
            if child.type == "variable_assignment":
                name_node = child.child_by_field_name("name")
                value_node = child.child_by_field_name("value")
                name = src.text(name_node) if name_node is not None else ""
                value = _value(src, value_node) if value_node is not None else ""
                assigned.append((name, value))
                words.append(f"{name}={value}")
                self.b.assign(name, value)
            elif child.type in _REDIRECT_NODES or child.type == "comment":
                continue
            else:
                words.append(_value(src, child))
        if not words:
            return
        command = SimpleCommand(tuple(words), words[0], tuple(words[1:]), src.text(node),
                                environment=(*ctx.environment, *exports))
        self.emit(command, ctx)
        if words[0] in ("export", "declare", "typeset", "local", "readonly") and (
                words[0] == "export" or any(w.startswith("-") and "x" in w for w in words[1:])):
            exports.extend(assigned)
        self.substitutions_in(src, node, ctx, exports, len(self.b.commands) - 1)

    def command(self, src: _Source, node: Node, ctx: _Context, exports: list[tuple[str, str]],
                extra_words: Sequence[Node]) -> None:
        prefix: list[tuple[str, str]] = []
        word_nodes: list[Node] = []
        own: list[Node] = []
        odd: list[Node] = []
        for index, child in enumerate(node.children):
            field_name = node.field_name_for_child(index)
            kind = child.type
            if kind == "variable_assignment" and not word_nodes:
                name_node = child.child_by_field_name("name")
                value_node = child.child_by_field_name("value")
                prefix.append((src.text(name_node) if name_node is not None else "",
                               _value(src, value_node) if value_node is not None else ""))
            elif kind in _REDIRECT_NODES:
                own.append(child)
            elif kind == "command_name" or field_name == "argument":
                word_nodes.append(child)
            elif child.is_named and kind != "comment":
                # tree-sitter's recovery (PowerShell's ``iex (iwr …)``): keep the source as a word
                word_nodes.append(child)
                odd.append(child)
        cmd_ctx = ctx
        for redirect_node in own:
            record, extra = _redirect(src, redirect_node)
            cmd_ctx = _apply(cmd_ctx, record)
            word_nodes.extend(extra)
        word_nodes.extend(extra_words)
        word_nodes.sort(key=lambda w: w.start_byte)
        words = _joined_words(src, word_nodes)
        resolved = _resolve(words)
        program = None
        args: tuple[str, ...] = ()
        if resolved.index is not None:
            program = _program_name(words[resolved.index], resolved.package, self.b.words)
            args = words[resolved.index + 1:]
        environment = (*ctx.environment, *exports, *prefix, *resolved.environment)
        redirects = cmd_ctx.redirects
        script = _script_of(program, args, redirects)
        if script is not None and ctx.depth >= MAX_SCRIPT_DEPTH:
            self.b.complete = False
            script = None
        host = ctx.host
        if words:
            emitted = self.emit(SimpleCommand(words, program, args, src.text(node), environment=environment,
                                              wrappers=resolved.wrappers, script=script), cmd_ctx)
            host = len(self.b.commands) - 1
            if script is not None:
                script_has_outer = any(_has_substitution(w) for w in word_nodes) or any(
                    _has_substitution(r) for r in own)
                nested = _Context(in_substitution=ctx.in_substitution, stdin=emitted.stdin, stdout=emitted.stdout,
                                  depth=ctx.depth + 1, nest=ctx.nest + 1, environment=environment,
                                  skip_substitutions=script_has_outer, host=ctx.host)
                self.parse(script, nested)
        for child in node.children:
            if child in odd:
                self.container(src, child, replace(ctx, in_substitution=True, stdout=Stream.CAPTURED,
                                                   pipeline=None, nest=ctx.nest + 1, host=host), exports)
            else:
                self.substitutions_in(src, child, ctx, exports, host)

    def emit(self, command: SimpleCommand, ctx: _Context) -> SimpleCommand:
        pipeline, stage = ctx.pipeline if ctx.pipeline is not None else (-1, 0)
        command = replace(command, in_substitution=ctx.in_substitution, pipeline=pipeline, stage=stage,
                          depth=ctx.depth, redirects=ctx.redirects, stdin=ctx.stdin, stdout=ctx.stdout,
                          host=ctx.host if ctx.in_substitution else None)
        return self.b.add(command)

    def substitutions_in(self, src: _Source, node: Node, ctx: _Context, exports: list[tuple[str, str]],
                         host: int | None = None) -> None:
        """Read the substitutions under ``node``; ``host`` is the command whose words hold them
        (default: the context's)."""
        if ctx.skip_substitutions:
            return
        for sub in _substitutions(node):
            opener = sub.children[0].type if sub.child_count else ""
            sub_ctx = replace(ctx, in_substitution=True, pipeline=None, nest=ctx.nest + 1, redirects=(),
                              host=ctx.host if host is None else host)
            if opener == "<(":
                sub_ctx = replace(sub_ctx, stdout=Stream.PIPE)
            elif opener == ">(":
                sub_ctx = replace(sub_ctx, stdin=Stream.PIPE, stdout=ctx.stdout)
            else:
                sub_ctx = replace(sub_ctx, stdout=Stream.CAPTURED)
            self.container(src, sub, sub_ctx, exports)


@functools.lru_cache(maxsize=1024)
def parse_command_line(command: str) -> CommandLine:
    """Read a shell command line as bash would (tree-sitter's bash grammar). Remembered for
    the last 1,024 lines: one call is read for its subject, its interactive parts and whether
    it prints a document.

    Args:
        command: the command line, any text (several lines, unbalanced quotes, NUL bytes).

    Returns:
        The :class:`CommandLine`; never raises. Cost is linear in the length of the line plus
        that of the ``-c`` strings it nests (at most :data:`MAX_SCRIPT_DEPTH` levels).
    """
    builder = _Builder()
    _Reader(builder).parse(valid_utf8(command), _Context())
    commands = tuple(builder.commands)
    pipelines = tuple(tuple(commands[i] for i in members) for members in builder.pipelines if members)
    # pipeline ids were assigned before empty pipelines were dropped: renumber
    if any(not members for members in builder.pipelines):
        renumber = {old: new for new, old in enumerate(i for i, m in enumerate(builder.pipelines) if m)}
        commands = tuple(replace(c, pipeline=renumber[c.pipeline]) for c in commands)
        pipelines = tuple(tuple(commands[i] for i in members) for members in builder.pipelines if members)
    return CommandLine(command, commands, pipelines, builder.complete, tuple(builder.assignments))


#: Subtrees whose tokens are not the shell's operators: ``>`` and ``&&`` inside ``[[ … ]]``
#: and ``$(( … ))`` compare and combine values (bash(1) "CONDITIONAL EXPRESSIONS", "ARITHMETIC
#: EVALUATION"); quoted text, here-document bodies and comments are words.
_NOT_OPERATORS = frozenset({"test_command", "arithmetic_expansion", "c_style_for_statement", "string",
                            "raw_string", "ansi_c_string", "heredoc_body", "comment", "binary_expression"})


@functools.lru_cache(maxsize=1024)
def command_operators(command: str) -> frozenset[str]:
    """The control operators (``&&``, ``||``, ``;``, ``&``, ``|``, ``|&``, ``;;``) and
    redirection operators (``>``, ``>>``, ``<``, ``<<``, ``<<<``, ``&>``, ``>&`` …) a command
    line uses, as bash(1) "DEFINITIONS" and "REDIRECTION" name them, read by tree-sitter's
    bash grammar: in the line itself and in its ``$(…)``/``(…)``/``{ …; }`` parts, not inside
    quoted strings, ``[[ … ]]``, ``$(( … ))`` or the ``-c`` string of a nested shell (a string
    to the line's own shell). A line break between commands is not reported. Never raises."""
    root = Parser(_language()).parse(_encode(valid_utf8(command))).root_node
    found: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in _NOT_OPERATORS:
            continue
        if not node.is_named and node.parent is not None:
            token = node.type
            operator = token in _LIST_OPS or token in _PIPE_OPS or node.parent.type in _REDIRECT_NODES
            if operator and token.strip():  # a line break also ends a command; not reported
                found.add(token)
        stack.extend(node.children)
    return frozenset(found)


#: Builtins that only set up for the next command: ``cd repo && gh …`` is about gh.
_SETUP = frozenset({"cd", "pushd", "popd", "export", "set", "unset", "source", ".", "true", ":", "umask",
                    "alias", "shopt", "trap", "ulimit", "local", "declare", "typeset", "readonly", "hash",
                    "[", "[[", "test"})


def is_setup(command: SimpleCommand) -> bool:
    """A builtin that only sets up for the next command (``cd``, ``export``, a bare ``exec``):
    ``cd repo && gh …`` is about gh."""
    return command.program in _SETUP or (command.program == "exec" and not command.args)


def _subject_of(commands: Sequence[SimpleCommand], start: int, end: int, depth: int) -> str | None:
    index = start
    while index < end:
        command = commands[index]
        if command.depth != depth or command.in_substitution or command.program is None or is_setup(command):
            index += 1
            continue
        if command.script is not None:
            inner_end = index + 1
            while inner_end < end and commands[inner_end].depth > depth:
                inner_end += 1
            return _subject_of(commands, index + 1, inner_end, depth + 1) or command.program
        return command.program
    return None


def command_programs(command: str) -> tuple[str, ...]:
    """Every program a command line runs, as base names in order of appearance, each once:
    each simple command's wrappers (``sudo``, ``env``, ``timeout`` ...) and program, in
    pipelines, lists, substitutions and nested ``-c`` strings (``echo a | sudo -S tee f`` →
    ``("echo", "sudo", "tee")``; ``x=$(curl u)`` → ``("curl",)``). An expansion as the
    program name (``"$GH" pr list``) names none. Never raises."""
    found: dict[str, None] = {}
    for simple in parse_command_line(command).commands:
        for wrapper in simple.wrappers:
            if wrapper:
                found.setdefault(_base(wrapper[0]), None)
        if simple.program is not None:
            found.setdefault(simple.program, None)
    return tuple(found)


def command_subject(command: str) -> str | None:
    """The program a command line is about, as a base name, or ``None``.

    The first simple command that is not a set-up builtin (``cd``, ``export``, ``source``,
    ``[``, a bare ``exec`` …) and not inside a substitution names it, after assignments,
    redirections and wrappers; a shell's ``-c`` string is read inside (the shell itself when the
    string names nothing). ``GH_TOKEN=$(cat t) gh repo view`` → ``gh``; ``cd repo && gh pr
    create`` → ``gh``; ``bash -lc "gh auth status"`` → ``gh``.
    """
    commands = parse_command_line(command).commands
    return _subject_of(commands, 0, len(commands), 0)


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


def _strings(raw: object, where: str, key: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(item, str) and item.strip() for item in raw):
        raise ValueError(f"{where}: '{key}' must be a list of non-empty strings, got {raw!r}")
    return tuple(item.strip() for item in raw)


def _option(text: str, where: str, key: str) -> OptionSpec:
    text = text.strip()
    if not text.startswith("-") or text in ("-", "--"):
        raise ValueError(f"{where}: '{key}' entry {text!r} is not an option (it must start with '-')")
    name, _, value = text.partition(" ")
    if not value and name.startswith("--") and "=" in name:
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
        items = _strings(entry, where, key)
        if not items:
            raise ValueError(f"{where}: '{key}' has an empty group")
        groups.append(tuple(_option(item, where, key) for item in items))
    return tuple(groups)


def _row(raw: object, where: str) -> InteractiveRow:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: a row must be a mapping, got {raw!r}")
    unknown = sorted(str(k) for k in raw if k not in _ROW_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_ROW_KEYS))})")
    programs = _strings(raw.get("program"), where, "program")
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
    for item in _strings(raw.get("unless_env"), where, "unless_env"):
        name, eq, value = item.partition("=")
        if not eq or not _ENV_NAME.match(name):
            raise ValueError(f"{where}: 'unless_env' entry {item!r} must read NAME=value")
        env.append((name, value))
    streams: list[TerminalStream] = []
    for item in _strings(raw.get("terminal_streams"), where, "terminal_streams"):
        try:
            streams.append(TerminalStream(item))
        except ValueError:
            raise ValueError(f"{where}: 'terminal_streams' entry {item!r} must be stdin or stdout") from None
    value_options = _strings(raw.get("value_options"), where, "value_options")
    for item in value_options:
        _option(item, where, "value_options")
    bare = tuple(_option(o, where, "with_bare_options")
                 for o in _strings(raw.get("with_bare_options"), where, "with_bare_options"))
    if any(o.value is not None for o in bare):
        raise ValueError(f"{where}: 'with_bare_options' entries are option names without a value")
    unless_operand = raw.get("unless_operand", False)
    if not isinstance(unless_operand, bool):
        raise ValueError(f"{where}: 'unless_operand' must be true or false, got {unless_operand!r}")
    subcommand = _strings(raw.get("subcommand"), where, "subcommand")
    for word in subcommand:
        if any(not part or part.startswith("-") or any(ch.isspace() for ch in part) for part in word.split("|")):
            raise ValueError(f"{where}: 'subcommand' word {word!r} must be words separated by '|'")
    return InteractiveRow(
        programs=programs,
        subcommand=subcommand,
        except_subcommands=frozenset(_strings(raw.get("except_subcommands"), where, "except_subcommands")),
        with_options=tuple(_option(o, where, "with_options") for o in _strings(raw.get("with_options"), where,
                                                                                 "with_options")),
        unless=_groups(raw.get("unless"), where, "unless"),
        unless_before=_groups(raw.get("unless_before"), where, "unless_before"),
        unless_with_stdin=tuple(_option(o, where, "unless_with_stdin")
                                for o in _strings(raw.get("unless_with_stdin"), where, "unless_with_stdin")),
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


def parse_interactive_calls(text: str, name: str) -> tuple[InteractiveRow, ...]:
    """The rows of one catalogue file's text (a mapping with a ``calls`` list), validated;
    ``name`` is named in every error.

    Raises:
        ValueError: naming the file and the row, for text that is not YAML, a missing
            ``calls`` list, an unknown top-level key, or a malformed row.
    """
    return _rows_from_text(text, name)


def _rows_from_text(text: str, name: str) -> tuple[InteractiveRow, ...]:
    return _rows_from_document(_yaml_document(text, name), name)


def _yaml_document(text: str, name: str = _BUNDLED) -> Any:
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when present
    except yaml.YAMLError as exc:
        raise ValueError(f"{name}: not valid YAML: {exc}") from None


def _rows_from_document(document: Any, name: str) -> tuple[InteractiveRow, ...]:
    if not isinstance(document, Mapping) or not isinstance(document.get("calls"), list):
        raise ValueError(f"{name}: must be a mapping with a 'calls' list of rows")
    unknown = sorted(str(k) for k in document if k != "calls")
    if unknown:
        raise ValueError(f"{name}: unknown top-level key(s) {', '.join(unknown)}")
    return tuple(_row(raw, f"{name}: row {index + 1}") for index, raw in enumerate(document["calls"]))


@functools.cache
def _bundled_rows() -> tuple[InteractiveRow, ...]:
    return _rows_from_document(bundled_document("interactive_calls.yaml", _yaml_document), _BUNDLED)


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


def _present(words: Sequence[str], spec: OptionSpec, value_options: frozenset[str]) -> bool:
    """Whether ``spec`` is among ``words`` (options end at ``--``)."""
    name = spec.name
    short = len(name) == 2 and name[0] == "-" and name[1] != "-"
    for index, word in enumerate(words):
        if word == "--":
            return False
        value: str | None = None
        if word == name:
            value = words[index + 1] if index + 1 < len(words) else None
        elif not short and word.startswith(name + "="):
            value = word[len(name) + 1:]
        elif short and word.startswith("-") and not word.startswith("--") and len(word) > 2:
            if spec.value is not None:
                if not word.startswith(name):
                    continue
                value = word[2:]
            else:
                found = False
                for letter in word[1:]:
                    if letter == name[1]:
                        found = True
                        break
                    if "-" + letter in value_options or not letter.isalnum():
                        break
                if not found:
                    continue
        else:
            continue
        if spec.value is None:
            return True
        if value is not None and _norm_value(value) == _norm_value(spec.value):
            return True
    return False


@dataclass(frozen=True, slots=True)
class _Call:
    """A command, or one of its wrappers, as a row sees it."""

    program: str
    args: tuple[str, ...]
    source: SimpleCommand


#: Commands of the package managers that run a package's program when the first word is not
#: one of their own: ``yarn <bin>`` ("[script] can also be any locally installed executable
#: that is inside node_modules/.bin/", classic.yarnpkg.com/en/docs/cli/run; yarnpkg.com/cli/run),
#: ``pnpm <bin>`` ("the exec part is actually optional when the command is not in conflict with
#: a builtin pnpm command", pnpm.io/cli/exec), ``bun <bin>`` (bun.sh/docs/cli/run). The sets are
#: each CLI's own commands (its reference's command list), which are never a package's program.
_PACKAGE_MANAGER_COMMANDS: Mapping[str, frozenset[str]] = {
    "yarn": _set(
        "add audit autoclean bin cache check config constraints create dedupe dlx explain generate-lock-entry global "
        "help import info init install licenses link list login logout node npm outdated owner pack patch "
        "patch-commit plugin policies publish rebuild remove search set stage tag team test unlink unplug up upgrade "
        "upgrade-interactive version versions why workspace workspaces"),
    "pnpm": _set(
        "access add adduser approve-builds audit bin c cat-file cat-index catalog config create dedupe deploy "
        "deprecate dist-tag dlx docs doctor env fetch find-hash help i ignored-builds import info init install "
        "install-test it licenses link list ln login logout ls outdated owner pack patch patch-commit patch-remove "
        "ping prune publish rb rebuild recursive remove rm root run-script runtime sbom search self-update server "
        "setup start store t test token un undeprecate uninstall unlink unpublish up update upgrade version view "
        "whoami why"),
    "bun": _set(
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


def _calls_of_words(words: Sequence[str], source: SimpleCommand) -> Iterator[_Call]:
    resolved = _resolve(words)
    for wrapper in resolved.wrappers:
        name = _program_name(wrapper[0])
        if name is not None:
            yield _Call(name, wrapper[1:], source)
    if resolved.index is not None:
        name = _program_name(words[resolved.index], resolved.package)
        if name is not None:
            yield _Call(name, tuple(words[resolved.index + 1:]), source)


def _embedded_calls(command: SimpleCommand) -> Iterator[_Call]:
    """Commands a program runs from its own arguments: a package manager's program
    (``yarn wrangler login``, ``pnpm exec x``, ``bun run x``) and find's ``-exec CMD … ;``."""
    program, args = command.program, command.args
    builtins = _PACKAGE_MANAGER_COMMANDS.get(program or "")
    if builtins is not None:
        positions = _positionals(args, _PACKAGE_MANAGER_VALUES)
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


def _calls(command: SimpleCommand) -> Iterator[_Call]:
    for wrapper in command.wrappers:
        name = _program_name(wrapper[0])
        if name is not None:
            yield _Call(name, wrapper[1:], command)
    if command.program is not None:
        yield _Call(command.program, command.args, command)
        yield from _embedded_calls(command)


def _positionals(args: Sequence[str], value_options: frozenset[str]) -> list[int]:
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


def _matches(row: InteractiveRow, call: _Call) -> tuple[bool, int]:
    """Whether the row matches, and where its subcommand starts in the arguments (the end
    when the row names none): the words before it are the program's global options."""
    if call.program not in row.programs:
        return False, 0
    positions = _positionals(call.args, row.value_options)
    sub = row.subcommand
    if len(positions) < len(sub) or any(
            call.args[positions[i]] != word and call.args[positions[i]] not in word.split("|")
            for i, word in enumerate(sub)):
        return False, 0
    if row.except_subcommands and len(positions) > len(sub) and \
            call.args[positions[len(sub)]] in row.except_subcommands:
        return False, 0
    if (row.with_options or row.with_bare_options) and not (
            any(_present(call.args, o, row.value_options) for o in row.with_options)
            or any(_bare(call.args, o.name, row.value_options) for o in row.with_bare_options)):
        return False, 0
    return True, (positions[0] if sub else len(call.args))


def _bare(words: Sequence[str], name: str, value_options: frozenset[str]) -> bool:
    """Whether option ``name`` is written with no value attached: ``-p`` alone or last in a
    cluster of flags (``-vp``), ``--password`` alone (not ``-psecret``, ``--password=x``)."""
    short = len(name) == 2 and name[0] == "-" and name[1] != "-"
    for word in words:
        if word == "--":
            return False
        if word == name:
            return True
        if short and len(word) > 2 and word[0] == "-" and word[1] != "-" and word[-1] == name[1] and not any(
                "-" + letter in value_options or not letter.isalnum() for letter in word[1:-1]):
            return True
    return False


#: Words that ask a program for its help or version, which it prints without waiting: GNU
#: coding standards 4.8 (``--help``, ``--version``), Go's flag package (``-h``, ``-help``),
#: cobra and click (``-h``/``--help``). ``-h`` counts only when the row does not give it
#: another meaning (``gh auth login -h HOST``, ``mysql -h HOST``, ``sudo -h HOST``).
_HELP_WORDS = frozenset({"--help", "--version", "-help"})


def _asks_for_help(row: InteractiveRow, call: _Call) -> bool:
    h_means_help = "-h" not in row.value_options and not any(
        o.name == "-h" for group in (row.with_options, row.with_bare_options, row.unless_with_stdin,
                                     *row.unless, *row.unless_before) for o in group)
    for word in call.args:
        if word == "--":
            return False
        if word in _HELP_WORDS or (h_means_help and word == "-h"):
            return True
    return False


def _waits(row: InteractiveRow, call: _Call, terminal: bool, environ: Mapping[str, str], sub_start: int) -> bool:
    command = call.source
    if row.waits is Waits.WITH_TERMINAL and not terminal:
        return False
    for stream in row.terminal_streams:
        actual = command.stdin if stream is TerminalStream.STDIN else command.stdout
        if actual is not Stream.INHERITED:
            return False
    if any(all(_present(call.args, o, row.value_options) for o in group) for group in row.unless):
        return False
    if _asks_for_help(row, call):
        return False
    if row.unless_operand and len(_positionals(call.args, row.value_options)) > len(row.subcommand):
        return False
    before = call.args[:sub_start]
    if any(all(_present(before, o, row.value_options) for o in group) for group in row.unless_before):
        return False
    if row.unless_with_stdin and any(_present(call.args, o, row.value_options) for o in row.unless_with_stdin) \
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
        for call in _calls(simple):
            for row in rows:
                matched, sub_start = _matches(row, call)
                if not matched:
                    continue
                if _waits(row, call, terminal, env, sub_start):
                    return InteractiveCall(call.program, simple.text, row.why, row.source, row.waits, row.origin)
                break
    return None


# ---------------------------------------------------------------------------------------------
# terminal text and the screen for suggested commands
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Screened:
    """The screen's verdict: ``command`` (cleaned) when it passed, else ``refused`` (one phrase)."""

    command: str | None
    refused: str | None


#: Programs that run a program text they are given (the interpreter's own manual: bash(1),
#: python(1), perl(1) ``-e``, ruby(1) ``-e``, node(1) ``-e``/``-p``, php(1) ``-r``, pwsh
#: ``-Command``, Rscript(1) ``-e``, julia(1) ``-e``, groovy ``-e``, scala ``-e``, jshell (reads
#: snippets from standard input), elixir ``-e``, guile ``-c``, racket ``-e``, sbcl ``--eval``,
#: expect(1) ``-c``, babashka ``-e``, QuickJS ``-e``, nushell ``-c``): the inline-code options,
#: and the options that take a value. Without inline code or a script operand (or with ``-``)
#: they read their program from standard input.
@dataclass(frozen=True, slots=True)
class _Interpreter:
    inline: frozenset[str]
    values: frozenset[str]


def _i(inline: str = "", values: str = "") -> _Interpreter:
    return _Interpreter(frozenset(inline.split()), frozenset(values.split()))


_INTERPRETERS: Mapping[str, _Interpreter] = {
    **{name: _Interpreter(frozenset({"-c"}), _SHELL_VALUES) for name in _SHELLS | {"csh", "tcsh"}},
    "python": _i("-c -m", "-W -X --check-hash-based-pycs"),
    "pypy": _i("-c -m", "-W -X"),
    "perl": _i("-e -E", "-I -M -m"),
    "ruby": _i("-e", "-I -r -C"),
    "node": _i("-e --eval -p --print", "-r --require --import"),
    "deno": _i("eval"),
    "bun": _i("-e --eval -p --print"),
    "php": _i("-r", "-c -d -z"),
    "pwsh": _i("-c -command -encodedcommand -e -ec -enc", "-file -f"),
    "lua": _i("-e", "-l"),
    "luajit": _i("-e", "-l"),
    "tclsh": _i(),
    "wish": _i(),
    "osascript": _i("-e"),
    "rscript": _i("-e", "--default-packages"),
    "r": _i("-e", "-f --file"),
    "julia": _i("-e -E --eval --print", "-L --load -J --sysimage -p --procs -t --threads --project"),
    "groovy": _i("-e", "-cp --classpath"),
    "scala": _i("-e", "-cp -classpath"),
    "jshell": _i("", "--class-path --module-path --add-modules -R -J --startup --feedback"),
    "elixir": _i("-e", "-r -pr -pa -pz --erl"),
    "guile": _i("-c", "-L -l -x -e"),
    "racket": _i("-e --eval", "-l --lib -t --require -r --load"),
    "sbcl": _i("--eval", "--core --dynamic-space-size --load"),
    "expect": _i("-c"),
    "bb": _i("-e --eval", "-cp --classpath"),
    "qjs": _i("-e --eval", "-I --include"),
    "nu": _i("-c --commands", "--config --env-config"),
    "xonsh": _i("-c"),
    "elvish": _i("-c"),
}
_INTERPRETER_ALIASES = {"nodejs": "node", "powershell": "pwsh", "pwsh.exe": "pwsh", "powershell.exe": "pwsh",
                        "pypy3": "pypy"}
_PYTHON = re2.compile(r"^python[0-9.]*$")
_EVALUATORS = frozenset({"eval", "iex", "invoke-expression"})
_SOURCING = frozenset({"source", "."})
#: awk(1) (POSIX; gawk, mawk): its program is the first operand or the file of ``-f``; it runs
#: commands with ``system()``, ``print | "cmd"``, ``"cmd" | getline`` and ``|&`` (gawk coprocess).
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk", "original-awk"})
_AWK_VALUES = frozenset({"-f", "--file", "-v", "--assign", "-F", "--field-separator", "-e", "--source", "-i",
                         "--include", "-l", "--load", "-E", "--exec"})
_AWK_RUNS = re2.compile(r"system\s*\(|\|\s*&|\|\s*getline|(?:print|printf)\b[^;}]*\|")
#: sed(1) (GNU): the ``e`` command runs the pattern space (or its argument) as a command, and the
#: ``e`` flag of ``s///`` runs the result of the substitution.
_SEDS = frozenset({"sed", "gsed"})
_SED_EXEC = re2.compile(
    r"(?:^|[;{}\n\s0-9$/])e(?:[\s;}]|$)|"
    + "|".join(r"s{d}(?:[^{d}\\]|\\.)*{d}(?:[^{d}\\]|\\.)*{d}[gpiImM0-9w]*e".format(d=re2.escape(d))
               for d in "/|#:,@!%"))
#: Database shells that run what they read, including shell escapes (psql(1) ``\!``, mysql(1)
#: ``system``/``\!``, sqlite3 ``.shell``/``.system``, duckdb ``.shell``, mongosh JavaScript).
_RUNS_ITS_INPUT = frozenset({"psql", "mysql", "mariadb", "sqlite3", "duckdb", "mongosh", "mongo"})
#: Programs that fetch from the network and can write what they fetch (curl(1), wget(1),
#: fetch(1), aria2c(1), axel(1), lftp(1), HTTPie, xh, lwp-request(1), PowerShell's
#: Invoke-WebRequest/RestMethod).
_DOWNLOADERS = frozenset({"curl", "wget", "wget2", "fetch", "aria2c", "axel", "lftp", "http", "https", "xh", "xhs",
                          "lwp-request", "GET", "iwr", "irm", "invoke-webrequest", "invoke-restmethod", "curlie"})
#: Programs that send data over the network (the downloaders, netcat(1), socat(1), ssh(1) and
#: its file copiers, rsync(1), telnet(1), ftp(1), openssl-s_client(1), mail(1)).
_NETWORK = _DOWNLOADERS | frozenset({"nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "rsync",
                                     "ftp", "openssl", "sshpass", "mail", "mailx", "sendmail", "swaks"})
#: Programs that resolve a name they are given, which sends it to the DNS servers (RFC 1035
#: section 4.1.2: the query carries the name): dig(1), nslookup(1), host(1), drill(1),
#: delv(1), kdig(1), ping(8), traceroute(8), tracepath(8), mtr(8), whois(1), getent(1).
_RESOLVERS = frozenset({"dig", "nslookup", "host", "drill", "delv", "kdig", "ping", "ping6", "traceroute",
                        "traceroute6", "tracepath", "mtr", "whois", "getent", "resolvectl"})
#: Options whose value is a credential the program uses, not data it sends: ssh(1), scp(1),
#: sftp(1) ``-i``, ``-F``, ``-o``; curl(1) ``--netrc-file``, ``--cert``/``-E``, ``--key``,
#: ``--cacert``, ``--capath``; wget(1) ``--certificate``, ``--private-key``, ``--ca-certificate``.
#: A netrc file names its host (netrc(5)), so curl sends its credentials only there.
_SSH_CREDENTIALS = frozenset({"-i", "-F", "-o"})
_USES_CREDENTIAL: Mapping[str, frozenset[str]] = {
    "ssh": _SSH_CREDENTIALS, "scp": _SSH_CREDENTIALS, "sftp": _SSH_CREDENTIALS, "sshpass": _SSH_CREDENTIALS,
    "curl": frozenset({"--netrc-file", "--cert", "-E", "--key", "--cacert", "--capath"}),
    "curlie": frozenset({"--netrc-file", "--cert", "-E", "--key", "--cacert", "--capath"}),
    "wget": frozenset({"--certificate", "--private-key", "--ca-certificate"}),
}
#: Environment dumps (env(1), printenv(1), bash(1) ``set``/``export -p``/``declare -x``).
_ENV_DUMPS = frozenset({"env", "printenv", "set", "export", "declare", "typeset", "compgen"})
_ROOT_WRAPPERS = frozenset({"sudo", "doas", "pkexec", "run0", "su"})
_ROOT_WRITERS = frozenset({"tee", "dd"})
#: Programs that copy, pack or encode the files they are given into other files (cp(1), mv(1),
#: install(1), ln(1), tar(1), zip(1), 7z, gzip(1), bzip2(1), xz(1), zstd(1), base64(1),
#: openssl-enc(1), gpg(1), dd(1) ``of=``, rsync(1), tee(1)): a secret in goes to their outputs.
_COPIERS = frozenset({"cp", "mv", "install", "ln", "tar", "bsdtar", "zip", "7z", "7za", "gzip", "bzip2", "xz",
                      "zstd", "base64", "openssl", "gpg", "dd", "rsync", "tee"})

#: Variable names that hold secrets: the components and substrings credentials are named with
#: (``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``GITHUB_PAT``,
#: ``SLACK_WEBHOOK_URL``, ``DATABASE_URL`` with its password, ``NPM_AUTH``…); ``PATH``,
#: ``PWD``, ``USER``, ``HOME`` are not.
_SECRET_NAME = re2.compile(
    r"(?i)token|secret|passw(?:or)?d|credential|webhook|api_?key|private_?key|access_?key|cookie|"
    r"connection_?string|(?:^|_)(?:keys?|pat|auth|pass|pw|creds|dsn|sas)(?:_|$)|keys?$|(?:^|_)(?:database|db)_ur[li]$")
_VARIABLE_REFERENCE = re2.compile(r"\$\{?#?([A-Za-z_][A-Za-z0-9_]*)")
_SECRET_HEADER = re2.compile(r"(?i)(?:^|\s)(?:proxy-)?(?:authorization|cookie|x-api-key|private-token|"
                             r"x-auth-token|api-key)\s*:")
#: Credential stores named by their programs' manuals: ssh(1) FILES (~/.ssh), the AWS CLI
#: credentials file and SSO cache, netrc(5), shadow(5), git-credential-store(1), gh's
#: hosts.yml and hub's config, docker login's config.json, kubectl's kubeconfig, npmrc(5),
#: .pypirc, .yarnrc.yml (npmAuthToken), gpg(1) ~/.gnupg, dotenv files (.env, .env.*, direnv's
#: .envrc), proc(5) /proc/PID/environ, gcloud's ~/.config/gcloud, the Azure CLI's ~/.azure,
#: curl(1)'s ~/.curlrc (headers and -u in a config file), Vault's ~/.vault-token, libpq's
#: ~/.pgpass, MySQL's ~/.my.cnf, Terraform's credentials.tfrc.json, Cargo's credentials(.toml),
#: RubyGems' ~/.gem/credentials, rclone.conf, pass(1)'s ~/.password-store.
_SECRET_PATH = re2.compile(
    r"(?:^|[\s=@:'\"/])\.ssh(?:/|[\s'\"]|$)|\.aws/(?:credentials|sso/cache|cli/cache)|(?:^|[\s=@:'\"/])[._]netrc\b|"
    r"/etc/(?:g?shadow|sudoers|master\.passwd)\b|\.git-credentials|\.config/gh/hosts\.yml|\.config/hub\b|"
    r"\.docker/config\.json|\.kube/config\b|\.npmrc|\.pypirc|\.yarnrc\.yml|\.gnupg(?:/|\b)|"
    r"\bid_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?(?:[^.A-Za-z0-9_]|$)|"
    r"(?:^|[\s=@:'\"/<])\.env(?:rc|\.[A-Za-z0-9_.-]+)?(?:[\s'\"]|$)|/proc/[^/\s]+/environ|"
    r"\.config/gcloud(?:/|\b)|(?:^|/)\.azure(?:/|\b)|\.curlrc|\.vault-token|\.pgpass|\.my\.cnf|"
    r"\.terraform\.d/credentials|\.cargo/credentials|\.gem/credentials|rclone\.conf|\.password-store")
#: PowerShell is not bash: ``iex``/``Invoke-Expression`` anywhere in a suggested command is
#: refused outright, whatever the bash grammar made of the line around it.
_POWERSHELL_EVAL = re2.compile(r"(?i)(?:^|[^a-z0-9_-])(?:iex|invoke-expression)(?:[^a-z0-9_-]|$)")
#: Inline code that evaluates text as code (Python ``exec``/``eval``, JavaScript ``eval``,
#: ``Function``, ``vm.runIn…Context``, Ruby ``instance_eval``…, Lua ``loadstring``), also when
#: passed as a function (``.then(eval)``).
_CODE_EVAL = re2.compile(
    r"(?:^|[^A-Za-z0-9_.$])(?:eval|exec|execScript|Function|instance_eval|class_eval|module_eval|loadstring|"
    r"dostring|runInThisContext|runInNewContext|runInContext)\s*[(),;]|new\s+Function\b")
#: Inline code that talks to the network (a URL, or a standard library's HTTP or socket API).
_CODE_NETWORK = re2.compile(
    r"(?i)https?://|urlopen|urllib|requests\.|http\.client|httpx|aiohttp|socket|fetch\s*\(|xmlhttprequest|"
    r"https?\.(?:get|request)|net::http|open-uri|uri\.open|lwp|io::socket|curl_|file_get_contents\s*\(\s*['\"]https?|"
    r"invoke-webrequest|invoke-restmethod|webclient|fsockopen|net\.connect|dns\.")
#: Inline code that runs commands.
_CODE_RUNS = re2.compile(r"system\s*\(|popen|subprocess|child_process|spawn|execsync|execfile|os\.exec|"
                         r"runtime\.getruntime|process\.start|shell_exec|passthru|proc_open|`")
#: Inline code that reads the environment.
_CODE_ENVIRONMENT = re2.compile(r"os\.environ|getenv|process\.env|\bENV\[|\$ENV\{|%ENV|Deno\.env|Bun\.env|"
                                r"\$env:|/proc/self/environ")
#: Python modules a fetched line may run: they read data, they do not run the working tree.
_DATA_MODULES = frozenset({"json.tool", "venv", "ensurepip", "base64", "zipfile", "tarfile", "gzip", "site",
                           "platform", "sysconfig", "http.server", "pydoc", "calendar", "uuid"})
#: Directories only the system's package manager writes: a program there was not just fetched.
_SYSTEM_DIRS = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/")
#: A package, requirement or module given by address instead of by registry name: a URL (also
#: PEP 508 ``name @ URL`` and pip's ``git+https://``), an scp-style ``git@host:``, npm's
#: ``github:``/``gitlab:``/``bitbucket:``/``gist:`` and ``git:`` shortcuts.
_URL_SPEC = re2.compile(r"^(?:git\+|hg\+|svn\+|bzr\+)?[A-Za-z][A-Za-z0-9+.-]*://|^git@|"
                        r"^(?:github|gitlab|bitbucket|gist|git):|@\s*(?:git\+)?[A-Za-z][A-Za-z0-9+.-]*://")
#: npm-install(1): ``<githubname>/<githubrepo>[#<commit-ish>]`` installs from GitHub.
_GITHUB_SHORTHAND = re2.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(?:#\S*)?$")
#: A remote operand of scp(1)/rsync(1): ``[user@]host:path`` (rsync also ``rsync://``).
_REMOTE_OPERAND = re2.compile(r"^(?:[^@/\s:]+@)?[A-Za-z0-9][A-Za-z0-9_.-]*:|^rsync://")
#: pip(1) options whose value is an index or a local setting, not a requirement.
_PIP_VALUES = frozenset({"-i", "--index-url", "--extra-index-url", "--proxy", "--cert", "--client-cert",
                         "--trusted-host", "-c", "--constraint", "--target", "-t", "--prefix", "--root",
                         "--python", "--platform", "--python-version", "--implementation", "--abi", "--log",
                         "--cache-dir", "--src", "--upgrade-strategy", "--progress-bar", "--root-user-action"})

#: Global options that take a value, before a program's subcommand (each program's --help).
_GLOBAL_VALUES: Mapping[str, frozenset[str]] = {
    "git": _set("-C -c --git-dir --work-tree --namespace --exec-path --config-env --super-prefix"),
    "aws": _set("--profile --region --output --query --endpoint-url --color --ca-bundle --cli-read-timeout "
                     "--cli-connect-timeout --cli-binary-format"),
    "gcloud": _set("--project --account --configuration --format --verbosity --impersonate-service-account "
                        "--billing-project"),
    "gsutil": _set("-o -h -u"),
    "gh": _set("-R --repo"),
    "az": _set("-o --output --query --subscription"),
    "kubectl": _set("-n --namespace --context --cluster --user --kubeconfig -s --server --token -o "
                         "--output"),
    "docker": _set("-H --host --context -c --config -l --log-level"),
    "podman": _set("--url --connection -c --root --runroot --log-level"),
    "rclone": _set("--config"),
    "go": _set("-C"),
    "npm": _set("--prefix -w --workspace"),
}


@dataclass(frozen=True, slots=True)
class _Pattern:
    """A program and its first positional words (each a set of alternatives; none: any call)."""

    programs: frozenset[str]
    words: tuple[frozenset[str], ...]


def _p(programs: str, *words: str) -> _Pattern:
    return _Pattern(frozenset(programs.split()), tuple(frozenset(w.split("|")) for w in words))


#: Commands that print a credential (each vendor's CLI reference): ``gh auth token``, the AWS
#: CLI's export-credentials, STS and ECR/CodeArtifact tokens and Secrets Manager values,
#: ``gcloud auth print-access-token``, ``az account get-access-token``, ``kubectl create
#: token``/``get secret``, ``vault print token``/``kv get``, ``heroku auth:token``, 1Password
#: ``op read``, Bitwarden ``bw get``, pass(1), secret-tool(1), git-credential(1) ``fill``,
#: security(1) ``find-*-password``.
_PRINTERS: tuple[_Pattern, ...] = (
    _p("gh", "auth", "token"),
    _p("aws", "configure", "export-credentials"),
    _p("aws", "sts", "get-session-token|assume-role|assume-role-with-web-identity|assume-role-with-saml|"
       "get-federation-token"),
    _p("aws", "ecr|ecr-public", "get-login-password|get-authorization-token"),
    _p("aws", "codeartifact", "get-authorization-token"),
    _p("aws", "secretsmanager", "get-secret-value"),
    _p("aws", "sso", "get-role-credentials"),
    _p("gcloud", "auth", "print-access-token|print-identity-token"),
    _p("gcloud", "auth", "application-default", "print-access-token"),
    _p("gcloud", "config", "config-helper"),
    _p("gcloud", "secrets", "versions", "access"),
    _p("az", "account", "get-access-token"),
    _p("az", "keyvault", "secret", "show|download"),
    _p("az", "ad", "sp", "create-for-rbac|credential"),
    _p("kubectl", "create", "token"),
    _p("kubectl", "get", "secret|secrets"),
    _p("vault bao", "print", "token"),
    _p("vault bao", "token", "create"),
    _p("vault bao", "kv", "get"),
    _p("vault bao", "read"),
    _p("heroku", "auth:token"),
    _p("op", "read"),
    _p("op", "item", "get"),
    _p("bw", "get"),
    _p("pass", "show"),
    _p("secret-tool", "lookup"),
    _p("git", "credential", "fill"),
    _p("security", "find-generic-password|find-internet-password"),
)
#: Calls that print a credential with one of these options: ``gh``/``glab auth status -t``,
#: ``kubectl config view --raw``, gpg(1) ``--export-secret-keys``, ``az acr login --expose-token``.
_PRINTER_OPTIONS: tuple[tuple[_Pattern, frozenset[str]], ...] = (
    (_p("gh glab", "auth", "status"), frozenset({"-t", "--show-token"})),
    (_p("kubectl", "config", "view"), frozenset({"--raw"})),
    (_p("gpg gpg2"), frozenset({"--export-secret-keys", "--export-secret-subkeys"})),
    (_p("az", "acr", "login"), frozenset({"--expose-token", "-t"})),
)
#: Calls that send their arguments or files off the machine besides the network programs: git
#: to a remote (git-push(1), git-clone(1), git-fetch(1)…, also ``-c http.extraHeader``), cloud
#: storage copies (``aws s3 cp``, ``gsutil cp``, ``gcloud storage cp``, ``az storage … upload``,
#: azcopy, rclone, s3cmd, MinIO ``mc``), GitHub through gh (gists, the API, releases, issues,
#: pull requests), a container started from a registry image (``docker run -e``).
_SENDERS: tuple[_Pattern, ...] = (
    _p("git", "push|clone|fetch|pull|ls-remote|remote|submodule|send-email|request-pull|archive"),
    _p("aws", "s3", "cp|mv|sync"),
    _p("aws", "s3api", "put-object|upload-part"),
    _p("gsutil", "cp|mv|rsync"),
    _p("gcloud", "storage", "cp|mv|rsync"),
    _p("az", "storage", "blob|file|fs", "upload|upload-batch"),
    _p("azcopy", "copy|cp|sync"),
    _p("rclone", "copy|copyto|move|moveto|sync|bisync|rcat"),
    _p("s3cmd", "put|sync"),
    _p("mc", "cp|mirror|put"),
    _p("gh", "gist|api|release|issue|pr"),
    _p("docker podman nerdctl", "run|create"),
)
#: Calls that bring files from the network (the downloaders, and these): git-clone(1), ``gh
#: repo clone``, hg clone, svn checkout/export, cloud storage copies; scp(1)/rsync(1) from a
#: remote operand are checked apart.
_FETCHERS: tuple[_Pattern, ...] = (
    _p("git", "clone"),
    _p("gh", "repo", "clone"),
    _p("hg", "clone"),
    _p("svn", "checkout|co|export"),
    _p("fossil", "clone"),
    _p("aws", "s3", "cp|sync|mv"),
    _p("gsutil", "cp|rsync|mv"),
    _p("gcloud", "storage", "cp|rsync"),
    _p("azcopy", "copy|cp|sync"),
    _p("rclone", "copy|copyto|sync|move|moveto"),
)
#: Calls that run code from the working tree: make(1) runs the Makefile's recipes, npm-install(1)
#: runs lifecycle scripts and ``npm run`` the package's scripts, yarn/pnpm/bun likewise, cargo
#: build runs build.rs, ``go generate``/``go run``/``go test`` run the module's code, bundle(1)
#: and composer run install hooks, docker build runs the Dockerfile's RUN steps, cmake runs
#: CMakeLists.txt, Gradle/Maven/sbt/Bazel/ant/rake/just/ninja/meson/scons their build files,
#: uv/poetry/pipenv/tox/nox/hatch the project's code.
_BUILD_RUNNERS: tuple[_Pattern, ...] = (
    _p("make gmake ninja just rake scons meson bazel bazelisk ant mvn gradle sbt cmake tox nox hatch "
       "./gradlew ./mvnw gradlew mvnw"),
    _p("npm", "install|i|ci|run|run-script|start|test|t|exec|rebuild|restart|pack"),
    _p("yarn pnpm bun"),
    _p("cargo", "build|run|install|test|bench|check"),
    _p("go", "run|build|generate|test|install|vet"),
    _p("bundle", "install|exec"),
    _p("composer", "install|update|run-script|run"),
    _p("docker podman", "build|compose|buildx"),
    _p("docker-compose", "up|build|run"),
    _p("uv", "run|sync|build"),
    _p("poetry", "install|run|build"),
    _p("pipenv", "install|run|sync"),
)


def _interpreter(program: str | None) -> _Interpreter | None:
    if program is None:
        return None
    name = program.lower()
    if _PYTHON.match(name):
        return _INTERPRETERS["python"]
    name = _INTERPRETER_ALIASES.get(name, name)
    return _INTERPRETERS.get(name)


def _inline_code(spec: _Interpreter, args: Sequence[str]) -> str | None:
    for index, word in enumerate(args):
        if word == "--":
            return None
        lowered = word.lower()
        if lowered in spec.inline:
            return args[index + 1] if index + 1 < len(args) else ""
        if len(word) > 2 and word[0] == "-" and word[1] != "-" and "-" + word[1] in spec.inline and \
                lowered not in spec.values:
            return word[2:]
    return None


def _operand(spec: _Interpreter, args: Sequence[str]) -> str | None:
    """The script operand (first non-option word), if any."""
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            return args[index + 1] if index + 1 < len(args) else None
        if len(word) > 1 and word[0] in "-+":
            index += 2 if word.lower() in spec.values else 1
            continue
        return word
    return None


def _reads_program_from_stdin(command: SimpleCommand, spec: _Interpreter) -> bool:
    if command.program is not None and command.program.lower() in ("iex", "invoke-expression"):
        return True
    if command.program in _SHELLS or command.program in ("csh", "tcsh"):
        return _reads_stdin_as_script(command.program, command.args)
    if _inline_code(spec, command.args) is not None:
        return False
    operand = _operand(spec, command.args)
    return operand is None or operand in ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def _program_word(command: SimpleCommand) -> str:
    """The word that names the program, as written (after wrappers and assignments)."""
    return command.words[len(command.words) - len(command.args) - 1] if command.words else ""


def _positional_words(args: Sequence[str], values: frozenset[str]) -> list[str]:
    return [args[i] for i in _positionals(args, values)]


def _is(command: SimpleCommand, pattern: _Pattern) -> bool:
    program = command.program
    if program is None or (program not in pattern.programs and _program_word(command) not in pattern.programs):
        return False
    if not pattern.words:
        return True
    words = _positional_words(command.args, _GLOBAL_VALUES.get(program, frozenset()))
    return len(words) >= len(pattern.words) and all(w in alternatives for w, alternatives in
                                                    zip(words, pattern.words, strict=False))


def _option_in(args: Sequence[str], options: frozenset[str]) -> bool:
    for word in args:
        if word == "--":
            return False
        if word in options or word.split("=", 1)[0] in options:
            return True
    return False


# --- fetched code reaching an interpreter -----------------------------------------------------


def _awk_runs_input(command: SimpleCommand) -> bool:
    """awk reading its program from a pipe (``-f -``), or whose program runs commands."""
    args = command.args
    program_text: str | None = None
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            index += 1
            break
        if word in ("-f", "--file", "-E", "--exec") and index + 1 < len(args):
            if args[index + 1] in ("-", "/dev/stdin"):
                return True
            program_text = ""
        if word in ("-e", "--source") and index + 1 < len(args):
            program_text = (program_text or "") + args[index + 1]
        if len(word) > 1 and word[0] == "-":
            index += 2 if word in _AWK_VALUES else 1
            continue
        break
    if program_text is None and index < len(args):
        program_text = args[index]
    return bool(program_text and _AWK_RUNS.search(program_text))


def _sed_runs_input(command: SimpleCommand) -> bool:
    args = command.args
    scripts: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            index += 1
            break
        if word in ("-e", "--expression") and index + 1 < len(args):
            scripts.append(args[index + 1])
            index += 2
            continue
        if word.startswith("--expression="):
            scripts.append(word.split("=", 1)[1])
        elif word in ("-f", "--file") and index + 1 < len(args):
            if args[index + 1] in ("-", "/dev/stdin"):
                return True
            scripts.append("")
            index += 2
            continue
        elif not word.startswith("-") or word == "-":
            break
        index += 1
    if not scripts and index < len(args):
        scripts.append(args[index])
    return any(_SED_EXEC.search(script) for script in scripts)


def _replace_string(wrapper: tuple[str, ...]) -> str | None:
    """The replace-string of ``xargs -I R``/``-i``/``--replace`` (``{}`` by default) or GNU
    parallel (``{}`` unless ``-I R``)."""
    name = _base(wrapper[0])
    for index, word in enumerate(wrapper[1:], start=1):
        if word == "-I" and index + 1 < len(wrapper):
            return wrapper[index + 1]
        if word.startswith("-I") and len(word) > 2:
            return word[2:]
        if word in ("-i", "--replace") or word.startswith("--replace="):
            return word.split("=", 1)[1] if "=" in word else "{}"
    return "{}" if name == "parallel" else None


def _runs_its_input_as_code(command: SimpleCommand) -> str | None:
    """xargs/parallel feeding piped text to an interpreter as its code, or as the command."""
    if command.stdin is not Stream.PIPE:
        return None
    feeders = [w for w in command.wrappers if _base(w[0]) in ("xargs", "parallel")]
    if not feeders:
        if command.program == "parallel" and all(a.startswith("-") for a in command.args):
            return "runs another command's output as commands"
        return None
    replace_with = _replace_string(feeders[-1])
    if replace_with and _program_word(command) == replace_with:
        return "runs another command's output as commands"
    spec = _interpreter(command.program)
    if spec is None:
        return None
    code = _inline_code(spec, command.args)
    if code is None or not code.strip() or (replace_with is not None and replace_with in code):
        return "runs another command's output as code"
    return None


def _fetches(command: SimpleCommand) -> bool:
    """Whether the command brings files or code from the network."""
    program = command.program or ""
    if program in _DOWNLOADERS or program.lower() in _DOWNLOADERS:
        return True
    if program in ("scp", "rsync", "sftp"):
        operands = [a for a in command.args if not a.startswith("-")]
        return any(_REMOTE_OPERAND.match(a) for a in operands[:-1]) or (program == "sftp" and bool(operands))
    return any(_is(command, pattern) for pattern in _FETCHERS)


def _python_module(args: Sequence[str]) -> str | None:
    for index, word in enumerate(args):
        if word == "-m":
            return args[index + 1] if index + 1 < len(args) else ""
        if word.startswith("-m") and len(word) > 2:
            return word[2:]
        if word == "-c" or not word.startswith("-"):
            return None
    return None


def _runs_local_code(command: SimpleCommand) -> bool:
    """Whether the command runs a file or the working tree (which a download may have written)."""
    word = _program_word(command)
    if "/" in word and not word.startswith(_SYSTEM_DIRS):
        return True
    program = command.program
    spec = _interpreter(program)
    if program in _SOURCING:
        return _operand(_Interpreter(frozenset(), frozenset()), command.args) is not None
    if spec is not None:
        if _PYTHON.match((program or "").lower()) or (program or "").lower().startswith("pypy"):
            module = _python_module(command.args)
            if module is not None:  # ``-m`` with no module runs nothing
                return bool(module) and module not in _DATA_MODULES
        if _inline_code(spec, command.args) is None:
            operand = _operand(spec, command.args)
            if operand is not None and operand not in ("-", "/dev/stdin"):
                return True
    if program in ("pip", "pip3") and _positional_words(command.args, _PIP_VALUES)[:1] == ["install"]:
        return any(a in (".", "..", "-e", "--editable", "-r", "--requirement") or a.startswith(("./", "../", "/"))
                   for a in command.args)
    return any(_is(command, pattern) for pattern in _BUILD_RUNNERS)


def _package_by_url(command: SimpleCommand) -> bool:
    """A package runner or installer given a package by URL or repository address."""
    node_runners = {"npx", "pnpx", "bunx"}
    program = command.program or ""
    for wrapper in command.wrappers:
        name = _base(wrapper[0])
        runner = name in node_runners or name in ("uvx", "pipx") or (
            len(wrapper) > 1 and (name, wrapper[1]) in _SUB_WRAPPERS and _SUB_WRAPPERS[(name, wrapper[1])].package)
        if not runner:
            continue
        node = name in node_runners or name in ("npm", "pnpm", "yarn", "bun")
        candidates = [*wrapper[1:], _program_word(command)]
        if any(_URL_SPEC.search(w.split("=", 1)[1] if w.startswith("--") and "=" in w else w) for w in candidates):
            return True
        if node and any(_GITHUB_SHORTHAND.match(w) for w in candidates if not w.startswith("-")):
            return True
    args = command.args
    if _PYTHON.match(program.lower()) and _python_module(args) == "pip":
        program, args = "pip", tuple(args[args.index("pip") + 1:]) if "pip" in args else ()
    words = _positional_words(args, _PIP_VALUES if program in ("pip", "pip3", "uv", "pipx") else frozenset())
    if not words:
        return False
    first = words[0]
    rest = words[1:]
    installs = (program in ("pip", "pip3") and first == "install") or (
        program == "pipx" and first in ("install", "run", "inject")) or (
        program == "uv" and (words[:2] in (["pip", "install"], ["tool", "install"], ["tool", "run"])
                             or first in ("add", "run")))
    if installs:
        return any(_URL_SPEC.search(w) for w in rest) or any(
            _URL_SPEC.search(w.split("=", 1)[-1]) for w in args if w.startswith(("--from", "--with")))
    if program in ("npm", "yarn", "pnpm", "bun") and first in ("install", "i", "add", "dlx", "x", "exec", "create",
                                                               "init"):
        return any(_URL_SPEC.search(w) or _GITHUB_SHORTHAND.match(w) for w in rest)
    if program == "deno" and first in ("run", "install", "compile", "x"):
        return any("://" in w for w in rest) or any("://" in w for w in args if not w.startswith("-"))
    if program == "cargo" and first == "install":
        return _option_in(args, frozenset({"--git"})) or any("://" in w for w in rest)
    if program == "go" and first == "run":
        return any("@" in w and "/" in w and "." in w.split("/", 1)[0] for w in rest)
    return False


def _gives_container_the_host(command: SimpleCommand) -> bool:
    """``docker run`` with the host's root or the container engine's socket mounted, privileged, or
    in the host's process namespace (docker-run(1) --privileged, --pid=host, -v, --mount)."""
    if not any(_is(command, _p(engine, "run|create")) for engine in ("docker", "podman", "nerdctl")):
        return False
    sockets = ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock")
    args = command.args
    for index, word in enumerate(args):
        if word == "--privileged" or word in ("--pid=host", "--userns=host") or (
                word == "--pid" and index + 1 < len(args) and args[index + 1] == "host"):
            return True
        value: str | None = None
        if word in ("-v", "--volume", "--mount") and index + 1 < len(args):
            value = args[index + 1]
        elif word.startswith(("--volume=", "--mount=")):
            value = word.split("=", 1)[1]
        elif word.startswith("-v") and len(word) > 2 and not word.startswith("--"):
            value = word[2:]
        if value is None:
            continue
        source = value.split(":", 1)[0]
        for part in value.split(","):
            key, _, found = part.partition("=")
            if key in ("source", "src"):
                source = found
        if (source.startswith("/") and source.rstrip("/") == "") or source in sockets:
            return True
    return False


# --- programs that run their standard input, and files that run or grant access later ------------

#: sudo(8) options after which sudo, given no command, runs a shell that reads its commands from
#: standard input: ``-i``/``--login`` (the target user's login shell) and ``-s``/``--shell``
#: (``$SHELL``); the short options that take a value end a cluster (``-iu root`` is ``-i -u root``).
_SUDO_SHELL_LETTERS = frozenset("is")
_SUDO_SHELL_LONGS = frozenset({"--login", "--shell"})
_SUDO_VALUE_LETTERS = "ugCDhpRrtTU"
#: su(1) and runuser(1) options that take a value; without ``-c``/``--command``/
#: ``--session-command`` they start the user's shell, which reads standard input; runuser's
#: ``-u USER COMMAND…`` runs the command directly.
_SU_VALUES = frozenset({"-c", "--command", "--session-command", "-g", "--group", "-G", "--supp-group", "-s",
                        "--shell", "-w", "--whitelist-environment", "-u", "--user"})
_SU_COMMANDS = frozenset({"-c", "--command", "--session-command"})
#: at(1): ``at TIME`` and batch(1) read the commands to run later from standard input unless
#: ``-f FILE`` names them, and ``-l``/``-r``/``-d``/``-c``/``-q``-only calls (atq, atrm, cat) run none.
_AT_NOT_STDIN = frozenset({"-f", "-l", "-r", "-d", "-c", "-V"})
#: crontab(1): ``crontab -`` (or no file operand) installs standard input as the user's crontab;
#: ``-l``/``-r``/``-e``/``-i`` list, remove or edit instead. Options that take a value: ``-u``.
_CRONTAB_NOT_STDIN = frozenset({"-l", "-r", "-e", "-i", "-V", "-T"})
#: ssh(1): options that take a value (SYNOPSIS); the words after the destination are a command
#: run by the remote user's shell, and with none the remote shell reads standard input.
_SSH_VALUES = frozenset({"-B", "-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o",
                         "-p", "-Q", "-R", "-S", "-W", "-w"})
#: docker-exec(1), podman-exec(1), nerdctl exec: options that take a value; then the container,
#: then the command run in it (its standard input is the caller's with ``-i``).
_EXEC_VALUES = frozenset({"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys",
                          "--preserve-fds", "--preserve-fd"})
_CONTAINER_ENGINES = frozenset({"docker", "podman", "nerdctl"})
#: docker-run(1)/podman-run(1): options that take a value; then the image, then the command
#: run in the container (``-i`` keeps the caller's standard input attached).
_RUN_VALUES = _set("-a --attach --add-host --cap-add --cap-drop --cgroupns --cidfile --cpus -c --cpu-shares "
                   "--cpuset-cpus --device --dns --entrypoint -e --env --env-file --expose --gpus -h --hostname "
                   "--ip --label -l --log-driver --log-opt -m --memory --mount --name --network --net "
                   "--network-alias -p --publish --pid --platform --pull --restart --runtime --security-opt "
                   "--shm-size --stop-signal --stop-timeout --tmpfs -u --user --ulimit --userns -v --volume "
                   "--volumes-from -w --workdir --ipc --uts --health-cmd --isolation --memory-swap")
#: kubectl exec (kubectl reference): options that take a value (with kubectl's global ones);
#: ``kubectl exec POD -- COMMAND…``.
_KUBECTL_EXEC_VALUES = _set("-c --container -f --filename --pod-running-timeout -n --namespace --context --cluster "
                            "--user --kubeconfig -s --server --token")


def _inner_command(words: Sequence[str], command: SimpleCommand) -> SimpleCommand | None:
    """``words`` (a command another program runs for ``command``) as a simple command with
    ``command``'s standard input; ``None`` when they do not parse as one."""
    if not words:
        return None
    parsed = parse_command_line(" ".join(_quote(w) for w in words))
    if not parsed.commands:
        return None
    return replace(parsed.commands[0], stdin=command.stdin, redirects=command.redirects)


def _quote(word: str) -> str:
    return word if _PLAIN_WORD.match(word) else "'" + word.replace("'", "'\\''") + "'"


def _after_options(args: Sequence[str], values: frozenset[str]) -> int:
    """The index of the first operand of ``args`` (options and their values skipped)."""
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            return index + 1
        if not word.startswith("-") or word == "-":
            return index
        index += 2 if word in values else 1
    return index


def _remote_or_delegated(command: SimpleCommand) -> SimpleCommand | bool | None:
    """The command a privilege wrapper, remote shell or container executor runs for ``command``
    (``None`` when it runs none), or ``True`` when it runs a shell on its standard input."""
    program, args = command.program, command.args
    if program == "env":  # env(1) -S/--split-string: the string is split into the command and its words
        split = _option_value(args, "-S", ("--split-string",))
        return None if split is None else _inner_command(split.split(), command)
    if program in ("su", "runuser"):
        if _option_in(args, _SU_COMMANDS):
            return None  # su -c STRING: the string is parsed as the script of the line
        if program == "runuser" and _option_in(args, frozenset({"-u", "--user"})):
            return _inner_command(args[_after_options(args, _SU_VALUES):], command)
        operands = [a for a in args[_after_options(args, _SU_VALUES):] if a != "-"]
        return True if len(operands) <= 1 else _inner_command(["sh", *operands[1:]], command)
    if program == "sudo":  # a shell option and no command (a command would have been resolved)
        for word in args:
            if word in _SUDO_SHELL_LONGS:
                return True
            if len(word) > 1 and word[0] == "-" and word[1] != "-":
                for letter in word[1:]:
                    if letter in _SUDO_SHELL_LETTERS:
                        return True
                    if letter in _SUDO_VALUE_LETTERS:
                        break
        return None
    if program == "ssh":
        index = _after_options(args, _SSH_VALUES)
        if index >= len(args):
            return None
        rest = args[index + 1:]
        return True if not rest else _inner_command(_words_of(" ".join(rest)), command)
    if program in _CONTAINER_ENGINES and args[:1] in (("exec",), ("run",)):
        index = _after_options(args[1:], _EXEC_VALUES if args[0] == "exec" else _RUN_VALUES) + 1
        return _inner_command(args[index + 1:], command) if index < len(args) else None
    if program == "kubectl" and ("exec" in args[:3] or "run" in args[:3]):
        if "--" in args:
            return _inner_command(args[args.index("--") + 1:], command)
        if "run" in args[:3]:
            return None  # kubectl run NAME --image=… without ``--`` runs the image's own command
        start = args.index("exec") + 1
        index = _after_options(args[start:], _KUBECTL_EXEC_VALUES) + start
        return _inner_command(args[index + 1:], command) if index < len(args) else None
    return None


def _words_of(text: str) -> list[str]:
    parsed = parse_command_line(text)
    return list(parsed.commands[0].words) if parsed.commands else []


def _runs_stdin_as_code(command: SimpleCommand, depth: int = 0) -> bool:
    """Whether ``command`` runs what it reads on standard input as code, now or later: an
    interpreter reading its program there (through any wrapper), sudo ``-i``/``-s``, su/runuser
    without a command, ``env -S 'bash'``, ssh/docker exec/podman exec/kubectl exec running such
    a command (or, ssh, none: the remote shell reads it), at(1)/batch(1), ``crontab -``."""
    program = command.program
    if program is None or depth > 3:
        return False
    if program in ("at", "batch"):
        return not _option_in(command.args, _AT_NOT_STDIN) and (program == "batch" or bool(command.args))
    if program == "crontab":
        index = _after_options(command.args, frozenset({"-u"}))
        operand = command.args[index] if index < len(command.args) else "-"
        return not _option_in(command.args, _CRONTAB_NOT_STDIN) and operand == "-"
    spec = _interpreter(program)
    if spec is not None:
        return _reads_program_from_stdin(command, spec)
    if command.wrappers and _base(command.wrappers[-1][0]) == "sudo" and not command.args:
        cluster = command.wrappers[-1][-1]  # ``sudo -iu root``: the word read as the program is -u's value
        if len(cluster) > 2 and cluster[0] == "-" and cluster[1] != "-" and cluster[-1] in _SUDO_VALUE_LETTERS:
            return bool(set(cluster[1:-1]) & _SUDO_SHELL_LETTERS)
    inner = _remote_or_delegated(command)
    if inner is True:
        return True
    return isinstance(inner, SimpleCommand) and _runs_stdin_as_code(inner, depth + 1)


#: Files whose content the system or a login runs, or that grant access, by their programs'
#: manuals: bash(1) INVOCATION (~/.bash_profile, ~/.bash_login, ~/.profile, ~/.bashrc,
#: ~/.bash_logout, /etc/profile, /etc/bash.bashrc), zsh(1) STARTUP/SHUTDOWN FILES (.zshenv,
#: .zprofile, .zshrc, .zlogin, .zlogout, /etc/zsh/), /etc/profile.d/, fish(1) config.fish and
#: conf.d, ksh(1) ~/.kshrc, tcsh(1) ~/.cshrc/~/.tcshrc/~/.login, ~/.xprofile, ~/.xinitrc,
#: environment.d(5), ~/.pam_environment (pam_env(8)), PowerShell's ``$PROFILE`` scripts
#: (about_Profiles: profile.ps1, Microsoft.PowerShell_profile.ps1).
_STARTUP_FILE = re2.compile(
    r"(?:^|/|~)\.(?:bash_profile|bash_login|profile|bashrc|bash_logout|zshenv|zprofile|zshrc|zlogin|zlogout|kshrc|"
    r"mkshrc|cshrc|tcshrc|login|xprofile|xinitrc|xsession|pam_environment)$|^/etc/(?:profile|bash\.bashrc|"
    r"bashrc|zshrc|zsh/|profile\.d/|environment)|fish/(?:config\.fish|conf\.d/)|environment\.d/|"
    r"(?i:^\$profile\b|_?profile\.ps1$)")
#: Files that grant access or run code for others, so any write to them is refused: sshd(8)
#: AUTHORIZED_KEYS FILE FORMAT (~/.ssh/authorized_keys, authorized_keys2) and SSHRC (~/.ssh/rc,
#: /etc/ssh/sshrc), ssh_config(5) (~/.ssh/config: ProxyCommand, LocalCommand), crontab(5)
#: (/etc/crontab, /etc/cron.d/, /etc/cron.hourly…, /var/spool/cron/), sudoers(5)
#: (/etc/sudoers, /etc/sudoers.d/), ld.so(8) /etc/ld.so.preload, passwd(5)/shadow(5),
#: systemd.unit(5) unit directories (/etc/systemd/, ~/.config/systemd/user/), githooks(5)
#: (.git/hooks/), /etc/rc.local, udev(7) rules (/etc/udev/rules.d/).
_TRUST_FILE = re2.compile(
    r"\.ssh/(?:authorized_keys2?|rc|config)$|^/etc/ssh/(?:sshrc|sshd_config)|^/etc/(?:crontab|cron\.[a-z]+/|"
    r"sudoers|ld\.so\.preload|passwd|g?shadow|rc\.local|systemd/|udev/rules\.d/)|^/var/spool/cron/|"
    r"\.config/systemd/user/|(?:^|/)\.git/hooks/|(?:^|/)authorized_keys2?$")
#: Options that name the file a downloader writes (curl(1) ``-o``/``--output``, wget(1)
#: ``-O``/``--output-document``, aria2c(1) ``-o``/``--out``, fetch(1) ``-o``, HTTPie/xh
#: ``-o``/``--output``, PowerShell ``-OutFile``); curl ``-O`` names it after the URL.
_OUTPUT_OPTIONS: Mapping[str, tuple[str | None, tuple[str, ...]]] = {
    "curl": ("-o", ("--output",)), "curlie": ("-o", ("--output",)),
    "wget": ("-O", ("--output-document",)), "wget2": ("-O", ("--output-document",)),
    "aria2c": ("-o", ("--out",)), "fetch": ("-o", ("--output",)), "http": ("-o", ("--output",)),
    "https": ("-o", ("--output",)), "xh": ("-o", ("--output",)), "xhs": ("-o", ("--output",)),
    "iwr": (None, ("-outfile",)), "invoke-webrequest": (None, ("-outfile",)), "irm": (None, ("-outfile",)),
    "invoke-restmethod": (None, ("-outfile",)),
}
_USER_HOME = re2.compile(r"^(?:~[A-Za-z0-9_.-]*|\$HOME|\$\{HOME\})(/|$)")


def _home_path(path: str) -> str:
    """``~/x``, ``$HOME/x``, ``~user/x`` read as ``~/x`` (the patterns above are relative to a home)."""
    return str(_USER_HOME.sub(r"~\1", path))


def _written_files(command: SimpleCommand) -> list[str]:
    """The files a command writes: its output redirections, a downloader's output file (curl
    ``-O``: the URL's last segment), tee(1)'s operands, dd(1) ``of=``, cp(1)/mv(1)/install(1)/
    ln(1)'s last operand."""
    files = [r.target for r in command.redirects
             if r.operator in (">", ">>", ">|", "&>", "&>>") and r.descriptor in (None, 1)]
    program = (command.program or "").lower()
    args = command.args
    if program in _OUTPUT_OPTIONS:
        short, longs = _OUTPUT_OPTIONS[program]
        lowered = [a.lower() for a in args] if short is None else list(args)
        value = _option_value(lowered, short, longs)
        if value is None and short is not None:  # a cluster ending in the option: curl -fsSLo FILE
            value = next((args[i + 1] for i, a in enumerate(args[:-1]) if len(a) > 2 and a[0] == "-"
                          and a[1] != "-" and a.endswith(short[1])), None)
        if value is not None:
            files.append(value)
        if program in ("curl", "curlie") and any(a in ("-O", "--remote-name") or (
                a.startswith("-") and not a.startswith("--") and "O" in a[1:]) for a in args):
            files.extend(posixpath.basename(a.rstrip("/")) for a in args if "://" in a)
        if program in ("wget", "wget2", "aria2c") and value is None:
            files.extend(posixpath.basename(a.rstrip("/")) for a in args if "://" in a)
    elif program == "tee":
        files.extend(a for a in args if not a.startswith("-"))
    elif program == "dd":
        files.extend(a[3:] for a in args if a.startswith("of="))
    elif program in ("cp", "mv", "install", "ln"):
        operands = [a for a in args if not a.startswith("-")]
        files.extend(operands[-1:] if len(operands) > 1 else [])
    return [_home_path(f) for f in files if f]


#: Installers that run a package file's maintainer scripts or install its code (dpkg(1) ``-i``,
#: rpm(8) ``-i``/``-U``/``-F``, apt(8)/apt-get(8)/dnf(8)/yum(8)/zypper(8) ``install`` of a
#: file path, pip ``install`` of an archive or wheel file, npm-install(1) of a tarball, gem(1)
#: ``install`` of a .gem, snap(8) ``install --dangerous``, flatpak(1) ``install`` of a bundle,
#: installer(8) ``-pkg``, pacman(8) ``-U``).
_PACKAGE_FILE = re2.compile(r"\.(?:deb|rpm|whl|tgz|tar\.gz|tar\.bz2|zip|gem|snap|flatpak|flatpakref|pkg|apk|"
                            r"pkg\.tar\.zst|pkg\.tar\.xz|appimage|run|bin|sh)$")


def _installs_package_file(command: SimpleCommand) -> bool:
    """A package installer given a package file (a path, or a name ending as a package file)."""
    program, args = command.program or "", command.args
    operands = [a for a in args if not a.startswith("-")]
    files = [a for a in operands if "/" in a or _PACKAGE_FILE.search(a.lower())]
    if program == "dpkg":
        return _option_in(args, frozenset({"-i", "--install", "--unpack"})) and bool(operands)
    if program == "rpm":
        return any(a.startswith("-") and not a.startswith("--") and set(a[1:]) & set("iUF") for a in args) or \
            _option_in(args, frozenset({"--install", "--upgrade", "--freshen"}))
    if program == "pacman":
        return _option_in(args, frozenset({"-U", "--upgrade"}))
    if program == "installer":
        return _option_in(args, frozenset({"-pkg", "-package"}))
    if program in ("apt", "apt-get", "dnf", "yum", "zypper", "pip", "pip3", "npm", "pnpm", "yarn", "gem", "snap",
                   "flatpak", "pipx", "uv") or _PYTHON.match(program.lower()):
        return any(w in ("install", "add", "localinstall", "in") for w in operands[:2]) and bool(
            [f for f in files if f not in operands[:1]])
    return False


def _is_output_of_command(word: str) -> bool:
    """A word that stands for another command's output: ``<(…)``, ``$(…)``, backticks, or a
    descriptor path (``/dev/fd/N``, ``/proc/self/fd/N``, ``/dev/stdin``)."""
    return word.startswith(("<(", "/dev/fd/", "/proc/self/fd/", "/dev/stdin")) or "$(" in word or "`" in word


def _fetched_variables(line: CommandLine) -> frozenset[str]:
    """Variables the line sets to a download's output (``x=$(curl …)``, ``export x="$(wget -qO- …)"``)."""
    names = set()
    for name, value in line.assignments:
        if "$(" in value or "`" in value:
            inner = parse_command_line(value.strip('"'))
            if any(_fetches(c) for c in inner.commands):
                names.add(name)
    return frozenset(names)


def _runs_variable(command: SimpleCommand, names: frozenset[str]) -> bool:
    """Whether ``command`` runs one of the variables ``names`` as code: as its program's name,
    an interpreter's inline code or script operand, or a sourced file."""
    def uses(word: str | None) -> bool:
        return word is not None and any(n in names for n in _VARIABLE_REFERENCE.findall(word))
    if command.program is None and command.words and uses(command.words[0]):
        return True
    spec = _interpreter(command.program)
    if spec is not None and (uses(_inline_code(spec, command.args)) or uses(_shell_script(command.args))):
        return True
    return (spec is not None or command.program in _SOURCING) and uses(
        _operand(spec or _Interpreter(frozenset(), frozenset()), command.args))


def _echoes_download(command: SimpleCommand) -> bool:
    """echo(1)/printf(1) printing a command line that downloads and runs (``echo 'curl … | sh' |
    at now``): what it prints is the script of the program it is piped into."""
    if command.program not in ("echo", "printf") or not command.args:
        return False
    text = " ".join(a for a in command.args if not a.startswith("-"))
    parsed = parse_command_line(text.replace("\\n", "\n").split("\n")[0])
    return bool(parsed.commands) and _download_refusal(parsed, text) is not None


def _persists_download(line: CommandLine, command: SimpleCommand) -> str | None:
    """A download written (by the fetch itself, or by tee/dd/a redirection downstream of it in
    a pipe) to a shell start-up file or a file that grants access (:data:`_STARTUP_FILE`,
    :data:`_TRUST_FILE`)."""
    fed = _fetches(command) or (command.stdin is Stream.PIPE and any(
        c.stage < command.stage and _fetches(c) for c in line.pipelines[command.pipeline]))
    if not fed:
        return None
    for path in _written_files(command):
        if _TRUST_FILE.search(path):
            return "writes downloaded content to a file that grants access or runs commands"
        if _STARTUP_FILE.search(path):
            return "writes downloaded content to a shell start-up file"
    return None


#: Why a command whose name is a substitution is refused: it runs another command's output.
_RUNS_OUTPUT = "runs the output of another command as a command"


def _code_span_in_prose(line: CommandLine, refusal: str) -> bool:
    """Whether a reading of prose was refused only because a word in backticks or ``$(…)``
    that fetches nothing stands where a command's name goes. In a README the line
    "(`man x` or `git help x` if git is" opens with Markdown code spans (CommonMark 0.31,
    section 6.1), not with a command that runs what ``man x`` prints; a substitution in that
    place that fetches ("`curl -s https://…` and") still counts."""
    return refusal == _RUNS_OUTPUT and all(
        _MAY_FETCH.search(_program_word(command)) is None
        for command in line.commands if command.program is None and command.words)


def _download_refusal(line: CommandLine, text: str) -> str | None:
    """Fetched or generated text reaching an interpreter, and code run after a download."""
    if _POWERSHELL_EVAL.search(text):
        return "runs text as a command (Invoke-Expression)"
    fetched = False
    fetched_files: set[str] = set()
    fetched_variables = _fetched_variables(line)
    for command in line.commands:
        program = command.program
        lowered = (program or "").lower()
        name_word = _program_word(command)
        if lowered in _EVALUATORS:
            return "runs text as a command (eval)"
        if fetched_variables and _runs_variable(command, fetched_variables):
            return "runs fetched text as code"
        if program is None and command.words:
            if "$(" in name_word or "`" in name_word or name_word.startswith("<("):
                return _RUNS_OUTPUT
            if command.stdin is Stream.PIPE:
                return "pipes another command's output into a program named by a variable"
        spec = _interpreter(program)
        if spec is not None:
            code = _inline_code(spec, command.args)
            if lowered in ("pwsh", "powershell", "pwsh.exe", "powershell.exe") and any(
                    w.lower() in ("-encodedcommand", "-enc", "-ec", "-e") for w in command.args):
                return "runs an encoded command"
            if code is not None and program not in _SHELLS and (
                    "$(" in code or "`" in code or _CODE_EVAL.search(code)
                    or (_CODE_NETWORK.search(code) and _CODE_RUNS.search(code))):
                return "runs fetched or generated text as code"
            if _reads_program_from_stdin(command, spec):
                if command.stdin is Stream.PIPE:
                    return "pipes another command's output into an interpreter"
                if any(r.operator == "<" and r.descriptor in (None, 0) and _is_output_of_command(r.target)
                       for r in command.redirects):  # bash < <(curl …): a process substitution as stdin
                    return "feeds another command's output to an interpreter"
                if command.stdin is Stream.TEXT and any(
                        "$(" in r.target or "`" in r.target for r in command.redirects if r.operator == "<<<"):
                    return "feeds another command's output to an interpreter"
        if spec is not None or program in _SOURCING:
            operand = _operand(spec or _Interpreter(frozenset(), frozenset()), command.args)
            if operand is not None and (operand.startswith("<(") or operand.startswith("/dev/fd/")
                                        or operand.startswith("/proc/self/fd/")
                                        or (operand == "/dev/stdin" and command.stdin is Stream.PIPE)):
                return "runs another command's output as a program"
            if operand is not None and ("$(" in operand or "`" in operand):
                return "runs another command's output as a program"
        if command.stdin is Stream.PIPE and (
                (lowered in _AWKS and _awk_runs_input(command)) or (lowered in _SEDS and _sed_runs_input(command))):
            return "pipes another command's output into a program that runs it"
        fed = _runs_its_input_as_code(command)
        if fed is not None:
            return fed
        # (only in a complete line: a cut quotation can hide the remote or delegated command)
        if command.stdin is Stream.PIPE and spec is None and line.complete and _runs_stdin_as_code(command):
            upstream = [c for c in line.pipelines[command.pipeline] if c.stage < command.stage]
            if program in ("sudo", "su", "runuser", "env") or any(_fetches(c) or _echoes_download(c)
                                                                   for c in upstream):
                return "pipes another command's output into a program that runs it"
        persisted = _persists_download(line, command)
        if persisted is not None:
            return persisted
        if lowered in _RUNS_ITS_INPUT and command.stdin is Stream.PIPE and any(
                c.stage < command.stage and _fetches(c) for c in line.pipelines[command.pipeline]):
            return "pipes fetched content into a program that runs it"
        if _package_by_url(command):
            return "runs a package fetched by URL"
        if _gives_container_the_host(command):
            return "gives a container the host"
        if fetched and (_runs_local_code(command) or _installs_package_file(command)
                        or name_word in fetched_files or _base(name_word) in fetched_files):
            return "runs code it downloads"
        if _fetches(command):
            fetched = True
            written = _written_files(command)
            fetched_files.update(written)
            fetched_files.update(_base(f) for f in written)
    for pipeline in line.pipelines:
        for command in pipeline:
            if command.program in _ROOT_WRITERS and any(_base(w[0]) in _ROOT_WRAPPERS for w in command.wrappers) \
                    and any(c.stage < command.stage and _fetches(c) for c in pipeline):
                return "writes downloaded content as root"
    return None


# --- secrets reaching the network -------------------------------------------------------------


def _secret_variable(name: str) -> bool:
    return name not in ("PWD", "OLDPWD") and bool(_SECRET_NAME.search(name))


def _prints_secret(command: SimpleCommand) -> bool:
    """A command whose output is a credential or the environment."""
    program = command.program
    args = command.args
    if program in _ENV_DUMPS and (not args or all(a.startswith("-") for a in args)):
        return program not in ("export", "declare", "typeset") or any("p" in a or "x" in a for a in args)
    if program == "printenv":
        return any(_secret_variable(a) for a in args if not a.startswith("-"))
    if any(_is(command, pattern) for pattern in _PRINTERS):
        return True
    if _is(command, _p("aws", "configure", "get")):
        words = _positional_words(args, _GLOBAL_VALUES["aws"])
        return len(words) > 2 and _secret_variable(words[2])
    return any(_is(command, pattern) and _option_in(args, options) for pattern, options in _PRINTER_OPTIONS)


def _inline_sink(command: SimpleCommand) -> str | None:
    """The inline code of an interpreter that talks to the network."""
    spec = _interpreter(command.program)
    if spec is None or command.program in _SHELLS:
        return None
    code = _inline_code(spec, command.args)
    return code if code is not None and _CODE_NETWORK.search(code) else None


def _is_sink(command: SimpleCommand) -> bool:
    """Whether the command sends data off the machine."""
    program = command.program or ""
    lowered = program.lower()
    return (program in _NETWORK or lowered in _NETWORK or lowered in _RESOLVERS
            or any(_is(command, pattern) for pattern in _SENDERS) or _inline_sink(command) is not None)


def _sent_words(command: SimpleCommand) -> Iterator[str]:
    """The words a network command sends or names (credential-file option values left out)."""
    credential_options = _USES_CREDENTIAL.get(command.program or "", frozenset())
    skip_next = False
    for word in command.args:
        if skip_next:
            skip_next = False
            continue
        if word in credential_options:
            skip_next = True
            continue
        if any(word.startswith(o + "=") if o.startswith("--") else (word.startswith(o) and len(word) > 2)
               for o in credential_options):
            continue
        yield word
    for redirect in command.redirects:
        if redirect.operator in ("<<<", "<<", "<<-") and redirect.descriptor in (None, 0):
            yield redirect.target


def _sends_credential_file(command: SimpleCommand) -> bool:
    """curl(1) reading request headers from a file (``-H @file``) or its options from a config
    file (``-K file``): where curl keeps an Authorization header or ``-u user:password``; a
    container given a host variable by name (``docker run -e GITHUB_TOKEN``, docker-run(1)
    --env: "the value is taken from the environment")."""
    args = command.args
    if command.program in ("curl", "curlie"):
        for index, word in enumerate(args):
            following = args[index + 1] if index + 1 < len(args) else ""
            if word in ("-H", "--header") and following.startswith("@"):
                return True
            if word.startswith(("-H@", "--header=@")):
                return True
            if word in ("-K", "--config") or (word.startswith("-K") and len(word) > 2) or word.startswith("--config="):
                return True
        return False
    if any(_is(command, _p(engine, "run|create")) for engine in ("docker", "podman", "nerdctl")):
        for index, word in enumerate(args):
            value: str | None = None
            if word in ("-e", "--env") and index + 1 < len(args):
                value = args[index + 1]
            elif word.startswith("--env="):
                value = word.split("=", 1)[1]
            elif word.startswith("-e") and len(word) > 2 and not word.startswith("--"):
                value = word[2:]
            if value is not None and "=" not in value and _secret_variable(value):
                return True
    return False


class _Secrets:
    """What carries a secret in one line: variables, files written with one, command outputs."""

    def __init__(self, line: CommandLine) -> None:
        self.line = line
        self.variables: set[str] = set()
        self.files: set[str] = set()
        count = len(line.commands)
        self.output = [False] * count
        self.hosted: list[list[int]] = [[] for _ in range(count)]
        self.members: dict[int, list[int]] = {}
        for index, command in enumerate(line.commands):
            if command.host is not None and 0 <= command.host < count:
                self.hosted[command.host].append(index)
            self.members.setdefault(command.pipeline, []).append(index)
        self._settle()

    def text(self, text: str) -> bool:
        """Whether a word or value names a secret: a secret-looking or tainted variable, a
        credential header, a credential file, a file the line wrote a secret into."""
        if _SECRET_HEADER.search(text) or _SECRET_PATH.search(text):
            return True
        if "$" in text and any(_secret_variable(name) or name in self.variables
                               for name in _VARIABLE_REFERENCE.findall(text)):
            return True
        if self.files and "://" not in text:
            names = {_base(f) for f in self.files}
            for part in (text, text.rsplit("@", 1)[-1], text.rsplit("=", 1)[-1], text.rsplit("<", 1)[-1]):
                if part and (posixpath.normpath(part) in self.files or _base(part) in names):
                    return True
        return False

    def words(self, index: int, words: Sequence[str]) -> bool:
        return any(self.text(w) for w in words) or any(self.output[j] for j in self.hosted[index])

    def stdin(self, index: int) -> bool:
        commands = self.line.commands
        command = commands[index]
        if command.stdin is Stream.PIPE and command.stage > 0 and any(
                commands[j].stage < command.stage and self.output[j] for j in self.members.get(command.pipeline, ())):
            return True
        for redirect in command.redirects:
            if redirect.descriptor in (None, 0) and redirect.operator in ("<", "<&", "<>", "<<<", "<<", "<<-") \
                    and self.text(redirect.target):
                return True
        return False

    def _settle(self) -> None:
        line = self.line
        commands = line.commands
        for _ in range(6):
            changed = False
            bare_secret = any(self.output[i] for i, c in enumerate(commands) if c.in_substitution and c.host is None)
            assignments = [*line.assignments, *(pair for c in commands for pair in c.environment)]
            for name, value in assignments:
                generated = bare_secret and ("$(" in value or "`" in value)
                if name not in self.variables and (generated or self.text(value)):
                    self.variables.add(name)
                    changed = True
            for index, command in enumerate(commands):
                if not self.output[index] and self._outputs_secret(index, command):
                    self.output[index] = True
                    changed = True
                if self.output[index] or (not _is_sink(command) and self.words(index, command.args)):
                    changed |= self._write_files(index, command)
            if not changed:
                return

    def _outputs_secret(self, index: int, command: SimpleCommand) -> bool:
        if _prints_secret(command) or self.stdin(index):
            return True
        if not _is_sink(command) and self.words(index, command.words):
            return True
        if command.script is not None:
            end = index + 1
            while end < len(self.line.commands) and self.line.commands[end].depth > command.depth:
                if self.output[end]:
                    return True
                end += 1
        return False

    def _write_files(self, index: int, command: SimpleCommand) -> bool:
        written: set[str] = set()
        if self.output[index]:
            for redirect in command.redirects:
                if redirect.operator in (">", ">>", ">|", "&>", "&>>") and redirect.descriptor in (None, 1) \
                        and redirect.target:
                    written.add(posixpath.normpath(redirect.target))
        if command.program in _COPIERS and (self.output[index] if command.program == "tee"
                                            else self.words(index, command.args)):
            written.update(posixpath.normpath(a.split("=", 1)[-1]) for a in command.args
                           if a and not a.startswith("-") and not self.text(a))
        new = written - self.files
        self.files |= new
        return bool(new)


def _secret_refusal(line: CommandLine) -> str | None:
    """A secret (a credential variable, file, token-printing command or the environment)
    reaching a command that sends data off the machine, through words, substitutions, pipes,
    variables or files written in the line."""
    sinks = [index for index, command in enumerate(line.commands) if _is_sink(command)]
    if not sinks:
        return None
    secrets = _Secrets(line)
    for index in sinks:
        command = line.commands[index]
        code = _inline_sink(command)
        if code is not None and (_CODE_ENVIRONMENT.search(code) or secrets.text(code)):
            return "sends a secret over the network"
        if secrets.words(index, list(_sent_words(command))) or secrets.stdin(index) or _sends_credential_file(command):
            return "sends a secret over the network"
    return None


#: Credentials written out in plain text, by the shapes their issuers document: GitHub tokens
#: (docs.github.com, "About authentication to GitHub": ghp_, gho_, ghu_, ghs_, ghr_,
#: github_pat_), AWS access key ids (IAM User Guide, "Unique identifiers": AKIA, ASIA), Slack
#: tokens (api.slack.com/authentication/token-types: xoxb-, xoxp-, xapp-), OpenAI and Anthropic
#: API keys (sk-, sk-ant-), Google API keys (AIza), JSON Web Tokens (RFC 7519: three base64url
#: parts, the first of which decodes to '{"'), and PEM private keys (RFC 7468).
_LITERAL_SECRET = re2.compile(
    r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|(AKIA|ASIA)[0-9A-Z]{16}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{10,}|sk-(ant-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.)|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
#: Options whose value is a secret: given as written text (not ``$VAR``), the line carries it.
_SECRET_OPTION = re2.compile(r"(?i)^--?(token|password|passwd|pass|secret|api-?key|access-?key|client-secret|auth)$")
#: Targets whose removal or overwrite destroys a machine or a home: rm(1) -r of /, ~, $HOME,
#: a glob at the root; mkfs(8); dd(1) or a redirection onto a block device.
_DESTROYED = frozenset({"/", "/*", "~", "~/", "~/*", "$HOME", "${HOME}", "$HOME/", "$HOME/*", "*", ".", "..", "/home"})


def _plain_secret(line: CommandLine, text: str) -> str | None:
    """A secret written out in the command itself (a token's shape, or the value of a
    ``--token``/``--password`` option): quoting the command would repeat it."""
    if _LITERAL_SECRET.search(text) is not None:
        return "carries a credential in plain text"
    for simple in line.commands:
        words = simple.args
        for index, word in enumerate(words):
            name, _, attached = word.partition("=")
            if _SECRET_OPTION.match(name):
                value = attached or (words[index + 1] if index + 1 < len(words) else "")
                if value and not value.startswith("$") and not value.startswith("-"):
                    return "carries a credential in plain text"
    return None


def _destroys(line: CommandLine) -> str | None:
    """A command that destroys a machine's or a home's data (rm -r of /, ~; mkfs; dd onto
    a device)."""
    for simple in line.commands:
        program, args = simple.program, simple.args
        recursive = any(a.startswith("-") and ("r" in a.lower() or a == "--recursive") for a in args)
        if program == "rm" and recursive and any(a in _DESTROYED for a in args if not a.startswith("-")):
            return "destroys the machine's or the home's files"
        wipes = program is not None and (program.startswith(("mkfs", "wipefs", "shred")))
        if wipes and any(a.startswith("/dev/") for a in args):
            return "destroys a disk"
        if program == "dd" and any(a.startswith("of=/dev/") for a in args):
            return "destroys a disk"
        if any(r.target.startswith("/dev/sd") or r.target.startswith("/dev/nvme") for r in simple.redirects
               if r.operator in (">", ">>", ">|")):
            return "destroys a disk"
    return None


#: Directories whose files the system runs or trusts (hier(7), the Filesystem Hierarchy Standard
#: 3.0): making them writable by every user lets any user replace what root runs.
_SYSTEM_TREES = frozenset({"/", "/*", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/var", "/boot",
                           "/opt", "/root", "/home", "/srv", "/dev", "/sys", "/proc", "/run", "/usr/local",
                           "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/local/bin", "/var/lib", "/var/spool",
                           "~", "$HOME", "${HOME}"})
#: chmod(1) modes that give "others" write permission: octal with the last digit's 2 bit set
#: (2, 3, 6, 7), or a symbolic clause for ``o`` or ``a`` that adds or sets ``w``.
_WORLD_WRITABLE_OCTAL = re2.compile(r"^[0-7]*[2367]$")
_WORLD_WRITABLE_SYMBOLIC = re2.compile(r"(?:^|,)[ugoa]*[oa][ugoa]*[+=][rwxXst]*w")
#: Directories every user may write to (FHS 3.0: /tmp, /var/tmp; /dev/shm, /run/shm), or the
#: current directory (an empty PATH entry or ``.``: POSIX XBD 8.3, PATH).
_WORLD_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/var/crash")


def _world_writable_system(command: SimpleCommand) -> bool:
    """chmod(1) giving every user write permission on a system directory or a home."""
    if command.program != "chmod":
        return False
    operands = [a for a in command.args if not a.startswith("-")]
    if len(operands) < 2:
        return False
    mode, targets = operands[0], operands[1:]
    if not (_WORLD_WRITABLE_OCTAL.match(mode) or _WORLD_WRITABLE_SYMBOLIC.search(mode)):
        return False
    return any(t.rstrip("/") in _SYSTEM_TREES or t in _SYSTEM_TREES for t in targets)


def _untrusted_path(value: str) -> bool:
    """A ``PATH`` value whose first entry is the current directory (empty or ``.``) or a
    world-writable directory; an entry that is a variable is not judged."""
    first = value.split(":", 1)[0]
    if not first:
        return True
    if first.startswith(("$", "~")):
        return False
    return first in (".", "./") or first.rstrip("/") in _WORLD_WRITABLE_DIRS or first.startswith(
        tuple(d + "/" for d in _WORLD_WRITABLE_DIRS))


def _shell_credential_helper(command: SimpleCommand) -> bool:
    """git-config(1) setting ``credential.helper`` (or ``credential.<url>.helper``, also through
    ``git -c``) to a value starting with ``!``: gitcredentials(7) runs it as shell code."""
    if command.program != "git":
        return False
    args = command.args
    for index, word in enumerate(args):
        key, _, value = word.partition("=")
        if word == "-c" and index + 1 < len(args):
            key, _, value = args[index + 1].partition("=")
            if _CREDENTIAL_HELPER_KEY.match(key) and value.lstrip().startswith("!"):
                return True
        if _CREDENTIAL_HELPER_KEY.match(word) and index + 1 < len(args) and args[index + 1].lstrip().startswith("!"):
            return "config" in args[:index]
        if key and value and _CREDENTIAL_HELPER_KEY.match(key) and value.lstrip().startswith("!"):
            return True
    return False


_CREDENTIAL_HELPER_KEY = re2.compile(r"(?i)^credential\.(?:.+\.)?helper$")


def _weakens(line: CommandLine) -> str | None:
    """A command that opens the machine to others: a system directory made world-writable
    (``chmod -R 777 /``), a write to a file that grants access or runs commands
    (:data:`_TRUST_FILE`: ``>> ~/.ssh/authorized_keys``, ``/etc/sudoers.d/``, cron), a
    world-writable or relative directory put first on ``PATH``, or a git credential helper
    that is shell code."""
    for name, value in line.assignments:
        if name == "PATH" and _untrusted_path(value):
            return "puts a world-writable directory or the current directory first on PATH"
    for command in line.commands:
        if _world_writable_system(command):
            return "makes system files writable by every user"
        if any(_TRUST_FILE.search(path) for path in _written_files(command)):
            return "writes to a file that grants access or runs commands"
        if any(name == "PATH" and _untrusted_path(value) for name, value in command.environment):
            return "puts a world-writable directory or the current directory first on PATH"
        if _shell_credential_helper(command):
            return "sets a git credential helper that is shell code"
    return None


def _refusal(line: CommandLine, text: str) -> str | None:
    return (_plain_secret(line, text) or _destroys(line) or _download_refusal(line, text) or _weakens(line)
            or _secret_refusal(line))


#: A line that may hold a download: a network program's name as a word, a URL, or inline code
#: that fetches (the programs of :data:`_NETWORK` and :data:`_FETCHERS`, and Python's urllib).
_MAY_FETCH = re2.compile(
    r"(?i)(?:^|[^a-z0-9_.-])(curl|curlie|wget2?|fetch|aria2c|axel|lftp|xhs?|https?|lwp-request|iwr|irm|"
    r"invoke-webrequest|invoke-restmethod|nc|ncat|netcat|socat|telnet|scp|sftp|rsync|git|gh|hg|svn|fossil|"
    r"gsutil|gcloud|aws|azcopy|rclone)(?:[^a-z0-9_-]|$)|://|urlopen|urllib")
#: A line where fetched text could reach an interpreter or a file that runs later: a pipe, a
#: sequence (``&&``, ``;``), a substitution, an evaluator (``eval``, ``exec(…)`` in inline code,
#: ``iex``, ``source``), an output redirection or a downloader's output option (``-o``, ``-O``,
#: ``--output``, ``--out``, ``-OutFile``), or a package installer or runner's verb (``install``,
#: ``add``, ``run``, ``dlx``, ``npx``, ``uvx``…: a package given by address).
_MAY_RUN = re2.compile(
    r"[|;`>]|&&|\$\(|<\(|(?:^|[^A-Za-z0-9_-])(?:(?i:eval|exec|iex|invoke-expression|source)|install|i|add|run|dlx|"
    r"x|inject|create|init|npx|pnpx|bunx|uvx|pipx)(?:[^A-Za-z0-9_-]|$)|(?:^|\s)-[A-Za-z]*[oO](?:\s|=|$)|--out|"
    r"(?i:-outfile)")
_WORD = re2.compile(r"[^ ]+")
#: Typographic quotation marks and guillemets prose puts around a command; read as spaces.
_PROSE_QUOTES = {code: " " for code in (0xAB, 0xBB, *range(0x2018, 0x2020), 0x2039, 0x203A)}
#: :func:`find_download_and_run` looks at most this many words before a network word for the
#: start of the command, at most this many characters after it for its end, and at most this
#: many network words in one text.
_PROSE_WORDS_BEFORE = 12
_PROSE_CHARS_AFTER = 400
#: At most this many command lines are parsed for one text (each a few tens of microseconds);
#: a text that needs more is reported as :data:`TOO_MANY_TO_SCREEN`.
_PROSE_PARSES = 2000
#: Pipe and sequence operators written as words of prose; :func:`_prose_ends` tries an end
#: after each of this many words that follow one.
_OPERATOR_WORDS = frozenset({"|", "|&", "||", "&&", ";"})
_PROSE_WORDS_AFTER_OPERATOR = 6
_OPERATOR_INSIDE = re2.compile(r"\|&?|&&|;")
#: A word starting so continues the command before it (an option, a quoted argument, a
#: redirection or an operator): no candidate ends just before it.
_CONTINUES = ("-", "'", '"', ">", "<", "|", "&", "2>", "1>")
#: Characters of a text's head and of its tail that are read (the classifier's window).
_PROSE_SCAN_CHARS = 65_536
#: What :func:`find_download_and_run` returns for a text holding too many network words to read.
TOO_MANY_TO_SCREEN = "(too many network commands to screen)"


def _word_start(line: str, index: int) -> bool:
    """Whether a command may start at ``line[index]``: the line's start, or a word after a
    space, a quotation mark, a backtick, ``:`` or ``;``, that is not itself an expansion or a
    quoted string (``"$(curl …)" and retry`` is prose around a substitution, not a command
    named by one)."""
    if index == 0:
        return line[0] != " "
    return line[index] not in " $<`\"'(" and line[index - 1] in " \"'`:;"


def find_download_and_run(text: str) -> str | None:
    """The command inside ``text`` (a tool's output, a sentence such as "Run bash <(curl -fsSL
    https://…) to sign in.", a lesson's content) that runs what it downloads, or ``None``.

    Judged by structure, not by phrase: in a line with a pipe, a sequence, a substitution, an
    evaluator, an output redirection or option, or a package verb (:data:`_MAY_RUN`; without
    one nothing fetched can reach an interpreter or a file),
    around each word that may fetch (a network program such as curl, wget, fetch, aria2c,
    nc, Invoke-WebRequest; a URL; urllib), the command lines starting at each of up to
    :data:`_PROSE_WORDS_BEFORE` words before it and ending where prose may follow
    (:func:`_prose_ends`) are parsed with :func:`parse_command_line` (typographic quotes read
    as spaces) and judged by
    the screen's download rule: fetched or generated text reaching an interpreter by a pipe
    (also through ``tee``, ``sudo -E``, ``env``, ``doas``), by process substitution (``bash
    <(…)``, ``bash < <(…)``, ``source <(…)``), by ``-c "$(…)"``, by ``eval``/``iex``, by a
    variable set to it (``x=$(curl …); bash -c "$x"``), a pipe into any program that runs its
    standard input (:func:`_runs_stdin_as_code`: ``sudo -i``, ``su``, ``runuser``, ``env -S``,
    ``at``, ``crontab -``, ``ssh host sh``, ``docker exec -i c sh``, ``kubectl exec``), a file
    downloaded and then run in the same line (by path, by name, or installed as a package file:
    ``dpkg -i``, ``rpm -U``, ``apt install ./x.deb``), a package installed by URL, or a download
    written to a shell start-up file or a file that grants access (``>> ~/.bashrc``, ``-O
    ~/.ssh/authorized_keys``). Every candidate, bare command or sentence, goes through the same
    check as :func:`screen_command`'s download rule. Returns the offending command's source text
    (cleaned, at most 300 characters), or :data:`TOO_MANY_TO_SCREEN` when the text needs more
    than :data:`_PROSE_PARSES` parses (it fails closed). Only the first and last
    :data:`_PROSE_SCAN_CHARS` characters of a longer text are read. Never raises.
    """
    if len(text) > 2 * _PROSE_SCAN_CHARS:
        text = text[:_PROSE_SCAN_CHARS] + "\n" + text[-_PROSE_SCAN_CHARS:]
    cleaned = clean_terminal_text(text).translate(_PROSE_QUOTES)
    parses = 0
    for raw_line in cleaned.split("\n"):
        line = raw_line.replace("\t", " ")
        if not _MAY_RUN.search(line):
            continue  # no pipe, substitution, sequence or evaluator: nothing fetched can reach an interpreter
        tried: set[tuple[int, int]] = set()
        for match in _MAY_FETCH.finditer(line):
            starts = [index for index in range(match.start(), -1, -1) if _word_start(line, index)]
            ends = _prose_ends(line, match.end())
            for start in reversed(starts[:_PROSE_WORDS_BEFORE + 1]):  # the widest reading first
                for end in ends:
                    if (start, end) in tried:
                        continue
                    tried.add((start, end))
                    parses += 1
                    if parses > _PROSE_PARSES:  # fail closed: text built to exhaust the screen is not passed
                        return TOO_MANY_TO_SCREEN
                    candidate = line[start:end].strip().rstrip(".,;:!?")
                    parsed = parse_command_line(candidate)
                    refusal = _download_refusal(parsed, candidate) if parsed.commands else None
                    if refusal is not None and not _code_span_in_prose(parsed, refusal):
                        return candidate[:SCREEN_MAX_CHARS]
    return None


def _prose_ends(line: str, after: int) -> list[int]:
    """Where a command after offset ``after`` of ``line`` may end, prose following it: the end
    of the window, the end of each of the :data:`_PROSE_WORDS_AFTER_OPERATOR` words after a
    pipe or a sequence operator that no option follows (the program that receives the download and its options:
    ``| sudo -i``, ``| kubectl exec -i pod -- sh``, ``&& dpkg -i a.deb``), and the end of each
    word that names an interpreter or an evaluator, closes a substitution or a quotation, or
    is the operand of an interpreter (about 8 at most)."""
    limit = min(len(line), after + _PROSE_CHARS_AFTER)
    ends = [limit]
    previous = ""
    words = list(_WORD.finditer(line, after, limit))
    since_operator = _PROSE_WORDS_AFTER_OPERATOR
    quotes = ""
    for index, word_match in enumerate(words):
        raw = word_match.group()
        if raw in _OPERATOR_WORDS:
            since_operator, quotes = 0, ""
            continue
        since_operator += 1
        quotes += "".join(c for c in raw if c in "'\"")
        joined = _OPERATOR_INSIDE.search(raw)  # ``URL|sudo``, ``a.deb;``: an operator inside the word
        if joined is not None:
            tail = raw[raw.rindex(joined.group()) + len(joined.group()):]
            since_operator, quotes = (1 if tail else 0), "".join(c for c in tail if c in "'\"")
        # ``| sudo -i and retry``: the runner and its words, not cut before an option (``| python3 -m
        # json.tool``), a quoted argument (``| ssh host "cat > f"``) or a redirection
        balanced = quotes.count("'") % 2 == 0 and quotes.count('"') % 2 == 0  # not inside a quoted argument
        if since_operator <= _PROSE_WORDS_AFTER_OPERATOR and balanced and not (
                index + 1 < len(words) and words[index + 1].group().startswith(_CONTINUES)):
            ends.append(word_match.end() - (len(raw) - len(raw.rstrip(".,;:!?"))))
        word = word_match.group().rstrip(".,;:!?")
        bare = word.rstrip("\"'`,")  # a JSON string or a quotation closing right after the word
        name = _base(bare).lower()
        # after an interpreter's name only when no option follows (``| python3 -m json.tool`` is one command)
        options_follow = index + 1 < len(words) and words[index + 1].group().startswith("-")
        if ((_interpreter(name) is not None or name in _EVALUATORS) and not options_follow) \
                or word.endswith((")", '"', "'", "`")) \
                or ((_interpreter(_base(previous).lower()) is not None or previous in _SOURCING)
                    and not word.startswith("-")):
            # each way of closing: the whole word, and the word without 1, 2 … of its closing marks
            ends.extend(word_match.start() + cut for cut in range(len(word), len(bare) - 1, -1))
            if len(ends) > 8:
                break
        previous = bare
    return ends


def screen_command(command: str) -> Screened:
    """Screen a command a tool's output suggests before unstuck quotes it.

    Cleans it (:func:`clean_terminal_text`, outer whitespace stripped), then refuses:

    * an empty command, one that spans lines, is longer than :data:`SCREEN_MAX_CHARS`
      characters, carries invisible format characters (bidirectional overrides, zero-width
      marks), or does not parse;
    * fetched or generated text reaching an interpreter: a pipe into a shell, Python, Perl,
      Ruby, Node, PHP, R, Julia, jshell … or ``iex`` (also through ``sudo``/``env``/``timeout``,
      ``script -c``, a shell named by a variable such as ``$SHELL``, or any program named by a
      variable); ``bash <(curl …)``, ``source <(…)``, ``sh -c "$(curl …)"``, ``eval``,
      ``Invoke-Expression``; a command name that is a substitution; awk or sed whose program
      runs commands (``system()``, ``e``) on piped text; xargs/parallel turning piped text into
      code; inline code that evaluates text (``eval``, ``exec``, ``.then(eval)``) or fetches
      and runs a command; a database shell fed a download;
    * code run after a download in the same line: a line that fetches (curl, wget, git clone,
      scp from a host, a cloud storage copy …) and later runs a file by path, a script given to
      an interpreter, a sourced file, or a build in the working tree (make, npm install, pip
      install ., cargo build …), whatever renames or unpacking happened between;
    * a pipe into a program that runs its standard input: sudo ``-i``/``-s``, su, runuser,
      ``env -S``, always; at, batch, ``crontab -``, ssh, ``docker``/``podman exec``, ``kubectl
      exec`` running a shell, when a download feeds the pipe; a download held in a variable
      that is then run (``x=$(curl …); bash -c "$x"``); a downloaded program called by name
      (``curl -o /usr/local/bin/t … && t``) or package file installed (``dpkg -i``, ``rpm -U``,
      ``apt install ./x.deb``, ``pip install x.tgz``); a download written to a shell start-up
      file (``~/.bashrc``, ``/etc/profile.d/``, ``$PROFILE``) or a file that grants access;
    * a package runner or installer given code by address (``npx https://…``, ``pip install
      git+https://…``, ``uvx --from git+…``, ``deno run https://…``, ``go run host/x@v``);
      downloaded content written as root (``| sudo tee``/``dd``); a container given the host
      (``docker run -v /:/host``, ``--privileged``);
    * a secret reaching the network: secret-looking variables (``*TOKEN*``, ``*SECRET*``,
      ``*KEY*``, ``*PASSWORD*``, ``*PAT*``, ``*AUTH*``, ``*WEBHOOK*``, ``DATABASE_URL`` …),
      credential files (``~/.ssh``, ``~/.aws/credentials``, ``.env``, ``/proc/*/environ``,
      ``~/.config/gcloud``, ``~/.kube/config`` …), commands that print tokens (``gh auth
      token``, ``gcloud auth print-access-token`` …) and environment dumps, followed through
      ``$(…)``, pipes, variables and files the line writes, into a command that sends data
      (curl, wget, nc, ssh, scp, rsync, git push, cloud storage copies, ``gh gist create``,
      ``docker run -e``, DNS lookups, inline code that fetches). Credentials a program only
      uses (``ssh -i key``, ``curl --netrc-file``) are not sent;
    * a credential written out in the command (a token of a documented shape, the value of a
      ``--token`` or ``--password`` option): quoting it would repeat the secret;
    * a command that destroys a machine's or a home's data (``rm -rf ~``, ``rm -rf /``,
      ``mkfs``, ``dd of=/dev/…``);
    * a command that opens the machine to others: a system directory or a home made writable
      by every user (``chmod -R 777 /``), any write to a file that grants access or runs
      commands (``>> ~/.ssh/authorized_keys``, ``/etc/sudoers.d/``, cron, systemd units, git
      hooks), a world-writable directory or the current directory first on ``PATH``
      (``export PATH=/tmp/x:$PATH``), a git credential helper that is shell code (``!…``).

    Never raises.
    """
    if has_invisible(command):  # checked before cleaning, which removes them (a hidden override is a refusal)
        return Screened(None, "contains invisible characters")
    text = clean_terminal_text(command).strip()
    if not text:
        return Screened(None, "empty")
    if "\n" in text:
        return Screened(None, "spans lines")
    if len(text) > SCREEN_MAX_CHARS:
        return Screened(None, f"longer than {SCREEN_MAX_CHARS} characters")
    if any(unicodedata.category(char) == "Cf" for char in text):
        return Screened(None, "contains invisible characters")
    if "\ufffd" in text:
        return Screened(None, "is not valid text")
    line = parse_command_line(text)
    if not line.complete or not line.commands:
        return Screened(None, "does not parse as a shell command")
    reason = _refusal(line, text)
    if reason is not None:
        return Screened(None, reason)
    return Screened(text, None)


# ---------------------------------------------------------------------------------------------
# plain command lines: what an unblock may be
# ---------------------------------------------------------------------------------------------


class VariableEffect(enum.StrEnum):
    """What an environment variable of ``unstuck/data/environment_variables.yaml`` does:
    ``runs`` (its value is a command or code, or names a file or folder of code, a program
    runs), ``loads`` (it names where a program loads code or options from) or ``redirects``
    (it sends a program's traffic elsewhere or changes which certificates it trusts)."""

    RUNS = "runs"
    LOADS = "loads"
    REDIRECTS = "redirects"


@dataclass(frozen=True, slots=True)
class VariableRule:
    """One row of the variables table: the names it covers (shell glob patterns, matched case
    sensitively), its :class:`VariableEffect`, what the variable makes a program do, and the
    manual or documentation that says so."""

    names: tuple[str, ...]
    effect: VariableEffect
    what: str
    source: str


@dataclass(frozen=True, slots=True)
class _OptionRule:
    programs: frozenset[str]
    options: tuple[str, ...]
    source: str


_VARIABLES_FILE = "unstuck/data/environment_variables.yaml"


def _variables_document(text: str) -> Any:
    return _yaml_document(text, _VARIABLES_FILE)


@functools.cache
def _variable_tables() -> tuple[tuple[VariableRule, ...], tuple[_OptionRule, ...]]:
    """The bundled variables and options tables, validated (a malformed row is a ``ValueError``
    naming the file and the row)."""
    document = bundled_document("environment_variables.yaml", _variables_document)
    if not isinstance(document, Mapping) or set(document) != {"variables", "options"}:
        raise ValueError(f"{_VARIABLES_FILE}: must be a mapping with 'variables' and 'options' lists")
    rules: list[VariableRule] = []
    for index, raw in enumerate(document["variables"]):
        where = f"{_VARIABLES_FILE}: variables row {index + 1}"
        if not isinstance(raw, Mapping) or set(raw) != {"names", "effect", "what", "source"}:
            raise ValueError(f"{where}: must have exactly names, effect, what and source")
        try:
            effect = VariableEffect(raw["effect"])
        except ValueError:
            raise ValueError(f"{where}: effect must be one of {', '.join(VariableEffect)}") from None
        rules.append(VariableRule(_strings(raw["names"], where, "names"), effect, str(raw["what"]),
                                  str(raw["source"])))
    options: list[_OptionRule] = []
    for index, raw in enumerate(document["options"]):
        where = f"{_VARIABLES_FILE}: options row {index + 1}"
        if not isinstance(raw, Mapping) or set(raw) != {"programs", "options", "source"}:
            raise ValueError(f"{where}: must have exactly programs, options and source")
        options.append(_OptionRule(frozenset(_strings(raw["programs"], where, "programs")),
                                   _strings(raw["options"], where, "options"), str(raw["source"])))
    return tuple(rules), tuple(options)


@functools.lru_cache(maxsize=1024)
def variable_rule(name: str) -> VariableRule | None:
    """The first row of ``unstuck/data/environment_variables.yaml`` whose names match the
    environment variable ``name`` (``BASH_ENV``, ``LD_PRELOAD``, ``HTTPS_PROXY``,
    ``OPENAI_BASE_URL`` …), or ``None`` for a variable that decides neither what code runs nor
    where traffic goes (``AWS_PROFILE``, ``PATH``: a ``PATH`` that puts a world-writable folder
    first is :func:`screen_command`'s to refuse)."""
    return next((rule for rule in _variable_tables()[0] if any(fnmatch.fnmatchcase(name, p) for p in rule.names)),
                None)


def _redirecting_option(command: SimpleCommand) -> tuple[str, _OptionRule] | None:
    """An option of the options table the command gives its installer (``pip install
    --index-url …``; also ``python -m pip``, ``uv pip``), and its row."""
    words = list(command.args)
    programs = {(command.program or "").lower()}
    if words[:1] == ["-m"] and len(words) > 1:
        programs.add(words[1].lower())
    programs.update(w.lower() for w in words[:2] if not w.startswith("-"))  # uv pip install, python3 -m pip
    for rule in _variable_tables()[1]:
        if not programs & rule.programs:
            continue
        for word in words:
            for option in rule.options:
                long = option.startswith("--")
                if word == option or (long and word.startswith(option + "=")) or (
                        not long and word.startswith(option) and len(word) > len(option) and word[1] != "-"):
                    return option, rule
    return None


#: Nodes of tree-sitter's bash grammar a plain command line does not hold, and why: command and
#: process substitution (bash(1) EXPANSION: Command Substitution, Process Substitution),
#: compound commands and functions (SHELL GRAMMAR: Compound Commands, Shell Function
#: Definitions), here-documents and here-strings (REDIRECTION).
_NOT_PLAIN = {
    "command_substitution": "it runs a command substitution ($(…) or backticks)",
    "process_substitution": "it runs a process substitution (<(…) or >(…))",
    "subshell": "it is a compound command (a subshell)",
    "compound_statement": "it is a compound command (a { …; } group)",
    "if_statement": "it is a compound command (if)",
    "while_statement": "it is a compound command (while or until)",
    "for_statement": "it is a compound command (for or select)",
    "c_style_for_statement": "it is a compound command (for)",
    "case_statement": "it is a compound command (case)",
    "function_definition": "it defines a function",
    "heredoc_redirect": "it feeds a here-document to a command",
    "herestring_redirect": "it feeds a here-string to a command",
}
#: How :func:`plain_command_refusal` says what a variable's effect is.
_EFFECT_WORDS = {VariableEffect.RUNS: "makes a program run code", VariableEffect.LOADS: "makes a program load code",
                 VariableEffect.REDIRECTS: "sends traffic elsewhere or changes whom it trusts"}
#: Redirections that only join or close descriptors (``2>&1``, ``>&2``, ``2>&-``): no file or device.
_DUPLICATIONS = frozenset({">&", "<&", ">&-", "<&-"})
#: Builtins that set code to run later, or load it (bash(1) SHELL BUILTIN COMMANDS: alias, trap,
#: complete -C, bind -x, enable -f loads a builtin from a shared object).
_DEFERS_CODE = frozenset({"alias", "trap", "complete", "bind", "enable"})
#: Builtins whose arguments set shell variables (bash(1) SHELL BUILTIN COMMANDS).
_DECLARES = frozenset({"export", "declare", "typeset", "readonly", "local"})
#: In-place editors (sed(1) ``-i``/``--in-place``, perlrun(1) ``-i``): their file operands are written.
_IN_PLACE = {"sed": ("-i", "--in-place"), "gsed": ("-i", "--in-place"), "perl": ("-i", "-pi")}


def _redirect_refusal(node: Node) -> str | None:
    operator = next((child.type for child in node.children if not child.is_named), "")
    destination = [child for child in node.children if child.is_named and child.type != "file_descriptor"]
    if operator in _DUPLICATIONS and all(child.type == "number" for child in destination):
        return None
    return "it redirects to or from a file or device"


def _node_refusal(root: Node) -> str | None:
    stack = [root]
    while stack:
        node = stack.pop()
        why = _NOT_PLAIN.get(node.type)
        if why is not None:
            return why
        if node.type == "file_redirect":
            why = _redirect_refusal(node)
            if why is not None:
                return why
        stack.extend(reversed(node.children))
    return None


def _set_variables(line: CommandLine) -> Iterator[str]:
    """The names of the variables the line sets: bare assignments, ``export``/``declare`` …
    arguments (with or without a value), prefix assignments and ``env NAME=value``."""
    yield from (name for name, _ in line.assignments)
    for command in line.commands:
        yield from (name for name, _ in command.environment)
        if command.program in _DECLARES:
            yield from (arg.split("=", 1)[0] for arg in command.args if not arg.startswith(("-", "+")))


def _writes_startup_file(command: SimpleCommand) -> str | None:
    files = _written_files(command)
    flags = _IN_PLACE.get((command.program or "").lower())
    if flags is not None and any(a.startswith(flags) for a in command.args):
        files += [_home_path(a) for a in command.args if not a.startswith("-")]
    return next((f for f in files if _STARTUP_FILE.search(f) or _TRUST_FILE.search(f)), None)


def plain_command_refusal(command: str) -> str | None:
    """Why ``command`` is not a plain command line of simple commands, or ``None`` when it is:
    what a declared unblock may be before it is shown as "Run: …" or remembered
    (:func:`unstuck.instructions.screen_instruction`), on top of :func:`screen_command`.

    A plain command line is simple commands joined by pipes and ``&&``/``||``/``;`` in which:

    * nothing runs a command's output as words or a file (no ``$(…)``, backticks, ``<(…)``,
      ``>(…)``), nothing is a compound command or a function, and no command runs a command
      line from a string (``bash -c``, ``eval``, ``su -c``);
    * nothing is redirected to or from a file or a device (``> f``, ``< /dev/tcp/…``,
      ``&> f``), no here-document or here-string is fed in; joining or closing descriptors
      (``2>&1``) is plain;
    * no shell start-up file (``~/.bashrc``, ``/etc/profile.d/``) or file that grants access is
      written (by ``tee``, ``cp``, ``sed -i`` …), and no alias, trap, completion or key binding
      is set to run later;
    * no variable of ``unstuck/data/environment_variables.yaml`` is set or exported
      (:func:`variable_rule`: proxies, package indexes, ``*_BASE_URL``, ``LD_*``, ``PYTHON*``,
      ``BASH_ENV``, ``GIT_SSH_COMMAND`` …), and no installer is given an option of its options
      table (``pip install --index-url …``, ``npm install --registry …``).

    The line is read by tree-sitter's bash grammar (:func:`parse_command_line`). Never raises.
    """
    text = valid_utf8(command)
    line = parse_command_line(text)
    if not line.complete or not line.commands:
        return "it does not parse as a shell command"
    why = _node_refusal(Parser(_language()).parse(_encode(text)).root_node)
    if why is not None:
        return why
    for name in _set_variables(line):
        rule = variable_rule(name)
        if rule is not None:
            return f"it sets {name}, a variable that {_EFFECT_WORDS[rule.effect]} ({rule.what})"
    for simple in line.commands:
        if simple.depth > 0 or simple.script is not None:
            return "it runs a command line from a string (bash -c, eval, su -c …)"
        if simple.program in _DEFERS_CODE:
            return f"it sets code to run later ({simple.program})"
        written = _writes_startup_file(simple)
        if written is not None:
            return f"it writes {written}, a file that runs or grants access"
        found = _redirecting_option(simple)
        if found is not None:
            return f"it gives its installer {found[0]}, which points it at another package index, proxy or host"
    return None
