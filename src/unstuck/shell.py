"""Command lines as a shell sees them, the calls that wait for a person, and a screen for commands.

Three things about the command line an agent hands a generic shell tool (``run_command``):

* :func:`parse_command_line` reads it with a real shell parser (tree-sitter and its bash
  grammar), never by splitting words: pipelines, ``&&``/``||``/``;``, subshells and groups,
  ``$(…)``, backticks, ``<(…)``/``>(…)``, redirections, here-documents, assignments, the string
  of ``bash -c "…"`` (``sh -lc``, ``su -c``, ``eval``, a here-document fed to a shell) and
  wrappers (``sudo -u bob``, ``env X=1``, ``timeout 30``, ``nice -n 5``, ``xargs``, ``npx`` …)
  all come out as :class:`SimpleCommand` records. It never raises: a line tree-sitter cannot
  fully parse still yields what it can, with ``complete=False``.
* :func:`interactive_call` finds the first simple command that would wait for a person, using
  the catalogue in ``unstuck/data/interactive_calls.yaml`` (plus a user's own files) and the
  streams the tool gives it: a call that signs in through a browser waits whatever the streams
  (``always``); an editor, a password prompt or a pager waits only when the tool gives it a
  terminal (``with_terminal``).
* :func:`screen_command` is the structural screen a suggested command ("please run: …") passes
  before unstuck quotes it; :func:`clean_terminal_text` strips terminal control sequences.

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
import posixpath
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import re2
import tree_sitter_bash
import yaml
from tree_sitter import Language, Node, Parser

__all__ = [
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
    "Waits",
    "clean_terminal_text",
    "command_subject",
    "interactive_call",
    "load_interactive_catalogue",
    "parse_command_line",
    "screen_command",
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
            ``pwsh -Command``, a here-document or here-string fed to a shell), else ``None``;
            its commands follow it in :attr:`CommandLine.commands` with ``depth + 1``.
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


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A parsed command line.

    ``commands`` are in order of appearance (a command before the substitutions in its words;
    the commands of its ``-c`` string right after it). ``pipelines`` groups them: a command
    belongs to its innermost pipeline of two or more stages (all commands of a group stage such
    as ``(a; b) | c`` share the stage), otherwise to a pipeline of its own. ``complete`` is
    ``False`` when tree-sitter reported a syntax error or missing token, or nesting ran past
    :data:`MAX_NESTING`.
    """

    source: str
    commands: tuple[SimpleCommand, ...]
    pipelines: tuple[tuple[SimpleCommand, ...], ...]
    complete: bool


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


def _w(values: str = "", positionals: int = 0, *, assignments: bool = False, runs_nothing: str = "",
       package: bool = False, lone_dash: bool = False) -> _Wrapper:
    return _Wrapper(frozenset(values.split()), positionals, assignments, frozenset(runs_nothing.split()),
                    package, lone_dash)


#: Wrappers by base name: sudo(8), doas(1), env(1), timeout(1), nice(1), ionice(1), stdbuf(1),
#: nohup(1), bash(1) ``exec``/``command``/``builtin``/``time``, xargs(1), time(1), setsid(1),
#: chrt(1), taskset(1), chroot(8), unbuffer(1), caffeinate(8), pkexec(1), run0(1),
#: busybox(1)/toybox(1) (multi-call: the next word is the applet), npx(1), bunx, pnpx, uvx.
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


class _Builder:
    """Collects commands while one line (and its nested strings) is read; discarded after."""

    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.pipelines: list[list[int]] = []
        self.complete = True

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


def _valid_text(text: str) -> str:
    """``text`` with lone surrogates (not encodable as UTF-8) replaced by U+FFFD, so that no
    encoder, regular expression or parser downstream can fail on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in text)
    return text


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


def _program_name(word: str, package: bool = False) -> str | None:
    """The base name of a command word; ``None`` when the name itself is an expansion
    (``"$GH"``, ``$(which gh)``); ``$HOME/bin/gh`` is ``gh``."""
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
        if cursor >= len(words):
            break
        wrappers.append(tuple(words[index:cursor]))
        package = spec.package
        index = cursor
    return _Resolved(index if index < len(words) else None, tuple(wrappers), tuple(environment), package)


def _shell_script(args: Sequence[str]) -> str | None:
    """The operand of ``-c`` in a shell's arguments (``-lc 'x'``, ``-e -c 'x'``, ``-o pipefail -c``)."""
    has_c = False
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
            has_c = has_c or (word[0] == "-" and "c" in word[1:])
            index += 1
            continue
        break
    if has_c and index < len(args):
        return args[index]
    return None


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


def _reads_stdin_as_script(program: str, args: Sequence[str]) -> bool:
    """A shell with no ``-c`` and no script operand (or ``-s``, or ``-``) reads its program
    from standard input (bash(1), INVOCATION)."""
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
            if word[0] == "-" and "c" in word[1:]:
                return False
            if word[0] == "-" and "s" in word[1:]:
                return True
            index += 1
            continue
        break
    return index >= len(args) or args[index] in ("-", "/dev/stdin")


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
            self.substitutions_in(src, node, ctx, exports)
        elif kind in _ASSIGNMENT_NODES:
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
        self.substitutions_in(src, node, ctx, exports)

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
            program = _program_name(words[resolved.index], resolved.package)
            args = words[resolved.index + 1:]
        environment = (*ctx.environment, *exports, *prefix, *resolved.environment)
        redirects = cmd_ctx.redirects
        script = _script_of(program, args, redirects)
        if script is not None and ctx.depth >= MAX_SCRIPT_DEPTH:
            self.b.complete = False
            script = None
        if words:
            emitted = self.emit(SimpleCommand(words, program, args, src.text(node), environment=environment,
                                              wrappers=resolved.wrappers, script=script), cmd_ctx)
            if script is not None:
                script_has_outer = any(_has_substitution(w) for w in word_nodes) or any(
                    _has_substitution(r) for r in own)
                nested = _Context(in_substitution=ctx.in_substitution, stdin=emitted.stdin, stdout=emitted.stdout,
                                  depth=ctx.depth + 1, nest=ctx.nest + 1, environment=environment,
                                  skip_substitutions=script_has_outer)
                self.parse(script, nested)
        for child in node.children:
            if child in odd:
                self.container(src, child, replace(ctx, in_substitution=True, stdout=Stream.CAPTURED,
                                                   pipeline=None, nest=ctx.nest + 1), exports)
            else:
                self.substitutions_in(src, child, ctx, exports)

    def emit(self, command: SimpleCommand, ctx: _Context) -> SimpleCommand:
        pipeline, stage = ctx.pipeline if ctx.pipeline is not None else (-1, 0)
        command = replace(command, in_substitution=ctx.in_substitution, pipeline=pipeline, stage=stage,
                          depth=ctx.depth, redirects=ctx.redirects, stdin=ctx.stdin, stdout=ctx.stdout)
        return self.b.add(command)

    def substitutions_in(self, src: _Source, node: Node, ctx: _Context, exports: list[tuple[str, str]]) -> None:
        if ctx.skip_substitutions:
            return
        for sub in _substitutions(node):
            opener = sub.children[0].type if sub.child_count else ""
            sub_ctx = replace(ctx, in_substitution=True, pipeline=None, nest=ctx.nest + 1, redirects=())
            if opener == "<(":
                sub_ctx = replace(sub_ctx, stdout=Stream.PIPE)
            elif opener == ">(":
                sub_ctx = replace(sub_ctx, stdin=Stream.PIPE, stdout=ctx.stdout)
            else:
                sub_ctx = replace(sub_ctx, stdout=Stream.CAPTURED)
            self.container(src, sub, sub_ctx, exports)


def parse_command_line(command: str) -> CommandLine:
    """Read a shell command line as bash would (tree-sitter's bash grammar).

    Args:
        command: the command line, any text (several lines, unbalanced quotes, NUL bytes).

    Returns:
        The :class:`CommandLine`; never raises. Cost is linear in the length of the line plus
        that of the ``-c`` strings it nests (at most :data:`MAX_SCRIPT_DEPTH` levels).
    """
    builder = _Builder()
    _Reader(builder).parse(_valid_text(command), _Context())
    commands = tuple(builder.commands)
    pipelines = tuple(tuple(commands[i] for i in members) for members in builder.pipelines if members)
    # pipeline ids were assigned before empty pipelines were dropped: renumber
    if any(not members for members in builder.pipelines):
        renumber = {old: new for new, old in enumerate(i for i, m in enumerate(builder.pipelines) if m)}
        commands = tuple(replace(c, pipeline=renumber[c.pipeline]) for c in commands)
        pipelines = tuple(tuple(commands[i] for i in members) for members in builder.pipelines if members)
    return CommandLine(command, commands, pipelines, builder.complete)


#: Builtins that only set up for the next command: ``cd repo && gh …`` is about gh.
_SETUP = frozenset({"cd", "pushd", "popd", "export", "set", "unset", "source", ".", "true", ":", "umask",
                    "alias", "shopt", "trap", "ulimit", "local", "declare", "typeset", "readonly", "hash",
                    "[", "[[", "test"})


def _is_setup(command: SimpleCommand) -> bool:
    return command.program in _SETUP or (command.program == "exec" and not command.args)


def _subject_of(commands: Sequence[SimpleCommand], start: int, end: int, depth: int) -> str | None:
    index = start
    while index < end:
        command = commands[index]
        if command.depth != depth or command.in_substitution or command.program is None or _is_setup(command):
            index += 1
            continue
        if command.script is not None:
            inner_end = index + 1
            while inner_end < end and commands[inner_end].depth > depth:
                inner_end += 1
            return _subject_of(commands, index + 1, inner_end, depth + 1) or command.program
        return command.program
    return None


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
    positional words are ``subcommand``, the next one is not in ``except_subcommands``, and one
    of ``with_options`` is present (when any are listed). The first matching row decides
    whether the command waits: not when any ``unless`` group is present in full (or an
    ``unless_before`` group before the subcommand), not when an ``unless_with_stdin`` option
    reads a secret from a redirected stdin, not when ``unless_env`` holds, not when a
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


_ROW_KEYS = frozenset({"program", "subcommand", "except_subcommands", "with_options", "unless", "unless_before",
                       "unless_with_stdin", "unless_env", "value_options", "terminal_streams", "waits", "why",
                       "source"})
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
    return InteractiveRow(
        programs=programs,
        subcommand=_strings(raw.get("subcommand"), where, "subcommand"),
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
    )


def _rows_from_text(text: str, name: str) -> tuple[InteractiveRow, ...]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{name}: not valid YAML: {exc}") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("calls"), list):
        raise ValueError(f"{name}: must be a mapping with a 'calls' list of rows")
    unknown = sorted(str(k) for k in document if k != "calls")
    if unknown:
        raise ValueError(f"{name}: unknown top-level key(s) {', '.join(unknown)}")
    return tuple(_row(raw, f"{name}: row {index + 1}") for index, raw in enumerate(document["calls"]))


@functools.cache
def _bundled_rows() -> tuple[InteractiveRow, ...]:
    text = resources.files("unstuck").joinpath("data/interactive_calls.yaml").read_text(encoding="utf-8")
    return _rows_from_text(text, _BUNDLED)


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


def _calls(command: SimpleCommand) -> Iterator[_Call]:
    for wrapper in command.wrappers:
        name = _program_name(wrapper[0])
        if name is not None:
            yield _Call(name, wrapper[1:], command)
    if command.program is not None:
        yield _Call(command.program, command.args, command)


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
    if len(positions) < len(sub) or any(call.args[positions[i]] != word for i, word in enumerate(sub)):
        return False, 0
    if row.except_subcommands and len(positions) > len(sub) and \
            call.args[positions[len(sub)]] in row.except_subcommands:
        return False, 0
    if row.with_options and not any(_present(call.args, o, row.value_options) for o in row.with_options):
        return False, 0
    return True, (positions[0] if sub else len(call.args))


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
        wait for sudo's password), or ``None``.
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

#: ECMA-48 control sequences: CSI (ESC [ or U+009B) with parameter and intermediate bytes and
#: a final byte; OSC (ESC ] / U+009D), DCS (ESC P / U+0090), SOS (ESC X / U+0098), PM (ESC ^ /
#: U+009E) and APC (ESC _ / U+009F) strings up to BEL or ST (ESC \\ / U+009C), or to the end of
#: the text when unterminated (as a terminal would swallow them); other escape sequences
#: (ESC, intermediates, a final byte). Sources: ECMA-48 sections 5.3-5.6 and 8.3; xterm's
#: ctlseqs (OSC 8 hyperlinks, OSC 52 clipboard).
_ESCAPES = re2.compile(
    "(?:\x1b\\[|\u009b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    "|(?:\x1b[\\]PX^_]|[\u0090\u0098\u009d\u009e\u009f])[^\x07\x1b\u009c]*(?:\x07|\x1b\\\\|\u009c)?"
    "|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
#: C0 controls but tab and newline, DEL, and C1 controls (U+0080-U+009F).
_CONTROLS = {code: None for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if code not in (0x09, 0x0A)}


def clean_terminal_text(text: str) -> str:
    """``text`` with terminal control and escape sequences stripped (linear time).

    Removes CSI sequences, OSC strings (OSC 8 links, OSC 52 clipboard writes), DCS/SOS/PM/APC
    strings, other ESC sequences, C1 controls and C0 controls other than newline and tab. A
    carriage return becomes a line break (``\\r\\n`` one line break), so text a ``\\r`` would
    overwrite on a terminal stays visible; backspaces are dropped for the same reason.
    """
    text = _valid_text(text)
    stripped = _ESCAPES.sub("", text) if ("\x1b" in text or any(0x80 <= ord(c) < 0xA0 for c in text)) else text
    stripped = stripped.replace("\r\n", "\n").replace("\r", "\n")
    return stripped.translate(_CONTROLS)


@dataclass(frozen=True, slots=True)
class Screened:
    """The screen's verdict: ``command`` (cleaned) when it passed, else ``refused`` (one phrase)."""

    command: str | None
    refused: str | None


#: Programs that run a program text they are given (the interpreter's own manual: bash(1),
#: python(1), perl(1) ``-e``, ruby(1) ``-e``, node(1) ``-e``/``-p``, php(1) ``-r``, pwsh
#: ``-Command``): the inline-code options, and the options that take a value.
@dataclass(frozen=True, slots=True)
class _Interpreter:
    inline: frozenset[str]
    values: frozenset[str]


_INTERPRETERS: Mapping[str, _Interpreter] = {
    **{name: _Interpreter(frozenset({"-c"}), _SHELL_VALUES) for name in _SHELLS | {"csh", "tcsh"}},
    "python": _Interpreter(frozenset({"-c", "-m"}), frozenset({"-W", "-X", "--check-hash-based-pycs"})),
    "pypy": _Interpreter(frozenset({"-c", "-m"}), frozenset({"-W", "-X"})),
    "perl": _Interpreter(frozenset({"-e", "-E"}), frozenset({"-I", "-M", "-m"})),
    "ruby": _Interpreter(frozenset({"-e"}), frozenset({"-I", "-r", "-C"})),
    "node": _Interpreter(frozenset({"-e", "--eval", "-p", "--print"}), frozenset({"-r", "--require", "--import"})),
    "deno": _Interpreter(frozenset({"eval"}), frozenset()),
    "bun": _Interpreter(frozenset({"-e", "--eval", "-p", "--print"}), frozenset()),
    "php": _Interpreter(frozenset({"-r"}), frozenset({"-c", "-d", "-z"})),
    "pwsh": _Interpreter(frozenset({"-c", "-command", "-encodedcommand", "-e", "-ec", "-enc"}),
                         frozenset({"-file", "-f"})),
    "lua": _Interpreter(frozenset({"-e"}), frozenset({"-l"})),
    "tclsh": _Interpreter(frozenset(), frozenset()),
    "osascript": _Interpreter(frozenset({"-e"}), frozenset()),
}
_INTERPRETER_ALIASES = {"nodejs": "node", "powershell": "pwsh", "pwsh.exe": "pwsh", "powershell.exe": "pwsh",
                        "pypy3": "pypy"}
_PYTHON = re2.compile(r"^python[0-9.]*$")
_EVALUATORS = frozenset({"eval", "iex", "invoke-expression"})
_SOURCING = frozenset({"source", "."})
#: Programs that fetch from the network and can write what they fetch (curl(1), wget(1),
#: fetch(1), aria2c(1), HTTPie, xh, lwp-request(1), PowerShell's Invoke-WebRequest/RestMethod).
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "xhs", "lwp-request", "GET",
                          "iwr", "irm", "invoke-webrequest", "invoke-restmethod", "curlie"})
#: Programs that send data over the network (the downloaders, netcat(1), socat(1), ssh(1) and
#: its file copiers, rsync(1), telnet(1), ftp(1), openssl-s_client(1)).
_NETWORK = _DOWNLOADERS | frozenset({"nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "rsync",
                                     "ftp", "openssl", "sshpass", "mail", "sendmail"})
#: Options whose value is a credential the program uses, not data it sends: ssh(1), scp(1),
#: sftp(1) ``-i``, ``-F``, ``-o``; curl(1) ``--netrc-file``, ``--cert``/``-E``, ``--key``,
#: ``--cacert``, ``--capath``; wget(1) ``--certificate``, ``--private-key``, ``--ca-certificate``.
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

_SECRET_VARIABLE = re2.compile(
    r"\$\{?[A-Za-z0-9_]*(?i:token|secret|passw(?:or)?d|credential|api_?key|private_?key|access_?key|_key|key_|"
    r"cookie|session)[A-Za-z0-9_]*")
_SECRET_HEADER = re2.compile(r"(?i)(?:^|\s)(?:proxy-)?(?:authorization|cookie|x-api-key|private-token|"
                             r"x-auth-token|api-key)\s*:")
#: Credential stores named by their programs' manuals: ssh(1) FILES (~/.ssh), the AWS CLI
#: shared credentials file, netrc(5), shadow(5), git-credential-store(1), gh's hosts.yml,
#: docker login's config.json, kubectl's kubeconfig, npmrc(5), .pypirc, gpg(1) ~/.gnupg.
_SECRET_PATH = re2.compile(
    r"(?:^|[\s=@:'\"/])(?:~|\$HOME|\$\{HOME\})?/?\.ssh/|\.aws/credentials|\.netrc\b|/etc/(?:g?shadow|sudoers)\b|"
    r"\.git-credentials|\.config/gh/hosts\.yml|\.docker/config\.json|\.kube/config|\.npmrc|\.pypirc|"
    r"\.gnupg/|\bid_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?\b")
#: PowerShell is not bash: ``iex``/``Invoke-Expression`` anywhere in a suggested command is
#: refused outright, whatever the bash grammar made of the line around it.
_POWERSHELL_EVAL = re2.compile(r"(?i)(?:^|[^a-z0-9_-])(?:iex|invoke-expression)(?:[^a-z0-9_-]|$)")
_CODE_EVAL = re2.compile(r"(?:^|[^A-Za-z0-9_.])(?:exec|eval)\s*\(")


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


def _url_name(word: str) -> str | None:
    if "://" not in word:
        return None
    path = word.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0]
    name = path.rsplit("/", 1)[-1] if "/" in path else ""
    return name or None


def _downloaded(command: SimpleCommand) -> set[str]:
    """Base names of the files a downloader writes (curl -o/-O, wget -O or the URL's name,
    fetch -o, aria2c -o, iwr -OutFile, a stdout redirection)."""
    names: set[str] = set()
    program = (command.program or "").lower()
    args = command.args
    urls = [name for name in (_url_name(w) for w in args) if name]
    if program in ("curl", "curlie"):
        out = _option_value(args, "-o", ("--output",))
        if out:
            names.add(_base(out))
        if any(w in ("-O", "--remote-name", "--remote-name-all") or (w.startswith("-") and not w.startswith("--")
                                                                     and "O" in w) for w in args):
            names.update(urls)
    elif program in ("wget", "fetch", "aria2c"):
        out = _option_value(args, "-O" if program == "wget" else "-o",
                            ("--output-document",) if program == "wget" else ("--out", "--output"))
        if out and out != "-":
            names.add(_base(out))
        elif out is None:
            names.update(urls)
    elif program in ("iwr", "invoke-webrequest", "irm", "invoke-restmethod"):
        for index, word in enumerate(args):
            if word.lower() in ("-outfile", "-o") and index + 1 < len(args):
                names.add(_base(args[index + 1]))
    for redirect in command.redirects:
        if redirect.operator in (">", ">>", ">|", "&>", "&>>") and redirect.descriptor in (None, 1) \
                and redirect.target:
            names.add(_base(redirect.target))
    return names


def _runs_file(command: SimpleCommand, names: set[str]) -> bool:
    if not names:
        return False
    program_word = command.words[len(command.words) - len(command.args) - 1] if command.words else ""
    if "/" in program_word and _base(program_word) in names:
        return True
    spec = _interpreter(command.program)
    if spec is not None or command.program in _SOURCING:
        operand = _operand(spec or _Interpreter(frozenset(), frozenset()), command.args)
        if operand is not None and _base(operand) in names:
            return True
    return False


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
        if redirect.operator in ("<", "<<<", "<&") and redirect.descriptor in (None, 0):
            yield redirect.target


def _mentions_secret(word: str) -> bool:
    return bool(_SECRET_VARIABLE.search(word) or _SECRET_HEADER.search(word) or _SECRET_PATH.search(word))


def _refusal(line: CommandLine, text: str) -> str | None:
    commands = line.commands
    if _POWERSHELL_EVAL.search(text):
        return "runs text as a command (Invoke-Expression)"
    downloaded: set[str] = set()
    for command in commands:
        program = command.program
        lowered = (program or "").lower()
        name_word = command.words[len(command.words) - len(command.args) - 1] if command.words else ""
        if lowered in _EVALUATORS:
            return "runs text as a command (eval)"
        if "$(" in name_word or "`" in name_word or name_word.startswith("<("):
            return "runs the output of another command as a command"
        spec = _interpreter(program)
        if spec is not None:
            code = _inline_code(spec, command.args)
            if lowered in ("pwsh", "powershell", "pwsh.exe", "powershell.exe") and any(
                    w.lower() in ("-encodedcommand", "-enc", "-ec", "-e") for w in command.args):
                return "runs an encoded command"
            if code is not None and program not in _SHELLS and ("$(" in code or "`" in code or _CODE_EVAL.search(code)):
                return "runs fetched or generated text as code"
            if _reads_program_from_stdin(command, spec):
                if command.stdin is Stream.PIPE:
                    return "pipes another command's output into an interpreter"
                if command.stdin is Stream.TEXT and any(
                        "$(" in r.target or "`" in r.target for r in command.redirects if r.operator == "<<<"):
                    return "feeds another command's output to an interpreter"
        if spec is not None or program in _SOURCING:
            operand = _operand(spec or _Interpreter(frozenset(), frozenset()), command.args)
            if operand is not None and (operand.startswith("<(") or operand.startswith("/dev/fd/")
                                        or operand.startswith("/proc/self/fd/")
                                        or (operand == "/dev/stdin" and command.stdin is Stream.PIPE)):
                return "runs another command's output as a program"
            if program in _SOURCING and operand is not None and ("$(" in operand or "`" in operand):
                return "runs another command's output as a program"
        if _runs_file(command, downloaded):
            return "runs a file it downloads"
        if lowered in _DOWNLOADERS:
            downloaded |= _downloaded(command)
        if lowered in _NETWORK and any(_mentions_secret(w) for w in _sent_words(command)):
            return "sends a secret over the network"
    for pipeline in line.pipelines:
        for command in pipeline:
            upstream = [c for c in pipeline if c.stage < command.stage]
            if not upstream:
                continue
            lowered = (command.program or "").lower()
            if lowered in _NETWORK and any(
                    (c.program in _ENV_DUMPS and (not c.args or all(a.startswith("-") for a in c.args)))
                    or any(_mentions_secret(w) for w in c.args) for c in upstream):
                return "sends a secret over the network"
            if command.program in _ROOT_WRITERS and any(_base(w[0]) in _ROOT_WRAPPERS for w in command.wrappers) \
                    and any((c.program or "").lower() in _DOWNLOADERS for c in upstream):
                return "writes downloaded content as root"
    return None


def screen_command(command: str) -> Screened:
    """Screen a command a tool's output suggests before unstuck quotes it.

    Cleans it (:func:`clean_terminal_text`, outer whitespace stripped), then refuses: an empty
    command, one that spans lines, is longer than :data:`SCREEN_MAX_CHARS` characters, carries
    invisible format characters (bidirectional overrides, zero-width marks), or does not parse;
    fetched or generated text reaching an interpreter (a pipe into a shell, Python, Perl, Ruby,
    Node, PHP, PowerShell or ``iex``, also through ``sudo``/``env``; ``bash <(curl …)``,
    ``source <(…)``, ``sh -c "$(curl …)"``, ``python -c "$(wget -O- …)"``, ``eval``,
    ``Invoke-Expression``, a command name that is a substitution, a downloaded file run by an
    interpreter or by path); downloaded content written as root (``| sudo tee``/``dd``); and
    commands that send secrets (a network command carrying a ``$…TOKEN``/``SECRET``/``KEY``/
    ``PASSWORD`` variable, an ``Authorization:`` header, a credential file such as
    ``~/.ssh/…``, ``~/.aws/credentials``, ``~/.netrc``, ``/etc/shadow``, or fed an environment
    dump). Never raises.
    """
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

