"""Command lines as a shell sees them: :func:`parse_command_line` reads the line an agent hands a
generic shell tool (``run_command``) with a real shell parser (tree-sitter and its bash grammar),
never by splitting words, into :class:`CommandLine` and :class:`SimpleCommand` records.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Pipelines, ``&&``/``||``/``;``, subshells and groups, ``$(…)``, backticks, ``<(…)``/``>(…)``,
redirections, here-documents, assignments, the string of ``bash -c "…"`` (``sh -lc``, ``su -c``,
``eval``, ``script -c``, ``flock FILE -c``, ``watch``, a here-document fed to a shell) and
wrappers (``sudo -u bob``, ``env X=1``, ``timeout 30``, ``nice -n 5``, ``xargs``, ``flock
FILE``, ``npx`` …) all come out as :class:`SimpleCommand` records. It never raises: a line
tree-sitter cannot fully parse still yields what it can, with ``complete=False``. Also read from
the parse: the operators a line uses (:func:`command_operators`), the programs it runs
(:func:`command_programs`) and the program it is about (:func:`command_subject`).

A command name that is an expansion (decided): the line is taken at its word where it says
what the name is, and nowhere else. ``$(which gh)``, ``$(command -v gh)`` and ``$(type -P
gh)`` are ``gh``; ``$x`` after ``x=gh`` earlier in the same line is ``gh``; ``$SHELL`` is a
POSIX ``sh`` and ``$BASH`` is ``bash``; ``${x:-gh}`` is ``gh`` when the line does not set
``x``. Any other expansion (``"$GH" pr list``, ``$(echo gh) auth login``, ``sh -c "$(echo gh
auth login)"``) names no program (``program`` is ``None``): its value exists only once it has run.

Regular expressions here compile under google-re2 (linear time on hostile text).
"""


from __future__ import annotations

import enum
import functools
import posixpath
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import re2
import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from unstuck.core.text import valid_utf8

__all__ = [
    "CommandLine",
    "LeadingOptions",
    "Redirect",
    "Resolved",
    "SimpleCommand",
    "Stream",
    "base_name",
    "command_operators",
    "command_programs",
    "command_subject",
    "encode_source",
    "is_setup",
    "leading_options",
    "option_value",
    "parse_command_line",
    "program_name",
    "reads_stdin_as_script",
    "resolve_wrappers",
    "shell_script",
    "word_set",
]

#: Compound commands nested deeper than this are not read (the line is then ``complete=False``).
MAX_NESTING = 48
#: ``bash -c "bash -c '…'"`` strings are read this many levels deep.
MAX_SCRIPT_DEPTH = 6


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
def bash_language() -> Language:
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
SUB_WRAPPERS: Mapping[tuple[str, str], _Wrapper] = {
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
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "rbash"})
#: Shell options that take the next word as their value (bash(1) OPTIONS, set -o).
SHELL_VALUES = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


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
        if value and PLAIN_WORD.match(value):
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


def encode_source(text: str) -> bytes:
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


def _unescape(text: str, escapable: str | None = None) -> str:
    """Quote removal of backslashes: ``\\x`` → ``x`` and backslash-newline removed, for every
    ``x`` in an unquoted word (``escapable`` ``None``), or only for those in ``escapable``
    inside double quotes (bash(1), QUOTING: ``$ ` " \\`` and newline)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and (escapable is None or text[index + 1] in escapable):
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


#: What a backslash escapes inside double quotes (bash(1), QUOTING).
_DOUBLE_QUOTED_ESCAPES = '$`"\\\n'


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
        return _unescape(text)
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
        out.append(_unescape(src.span(cursor, child.start_byte), _DOUBLE_QUOTED_ESCAPES))
        out.append(src.text(child))
        cursor = child.end_byte
    if cursor < end:
        out.append(_unescape(src.span(cursor, end), _DOUBLE_QUOTED_ESCAPES))
    return "".join(out)


def _joined(src: _Source, node: Node) -> str:
    out: list[str] = []
    cursor = node.start_byte
    for child in node.children:
        if child.start_byte > cursor:
            out.append(_unescape(src.span(cursor, child.start_byte)))
        out.append(_value(src, child))
        cursor = max(cursor, child.end_byte)
    if cursor < node.end_byte:
        out.append(_unescape(src.span(cursor, node.end_byte)))
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


def base_name(word: str) -> str:
    return posixpath.basename(word.rstrip("/")) or word


def word_set(words: str) -> frozenset[str]:
    """The words of a space-separated list, as a set (for the tables below)."""
    return frozenset(words.split())


#: A word with no expansion, quoting, space or glob: what ``x=gh`` may give ``$x``.
PLAIN_WORD = re2.compile(r"^[A-Za-z0-9_./+@:%,=-]+$")
#: ``$(which gh)``, ```command -v gh```, ``$(type -P gh)``: the path lookup of a named program
#: (bash(1) ``command -v`` and ``type -P`` print the path that would run; which(1)).
_PATH_LOOKUP = re2.compile(
    r"^(?:\$\(|`)\s*(?:which|command\s+-[vV]|type\s+-[pP]|whence\s+-p)\s+([A-Za-z0-9_.+-]+)\s*(?:\)|`)$")
#: ``$x``, ``${x}``, ``${x:-default}``, ``${x-default}``.
_VARIABLE_WORD = re2.compile(r"^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-=]([^}]*))?\})$")
#: Variables that name a shell (bash(1), Shell Variables: ``SHELL`` is the path of the user's
#: shell, ``BASH`` the path of the running bash). ``$SHELL`` is taken as a POSIX ``sh``.
_SHELL_VARIABLES = {"SHELL": "sh", "BASH": "bash"}


def program_name(word: str, package: bool = False, words: Mapping[str, str] | None = None) -> str | None:
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
        if value is None and default and PLAIN_WORD.match(default):
            value = default
        return base_name(value) if value else None
    if "$(" in word or "`" in word or "<(" in word or ">(" in word:
        return None
    name = base_name(word)
    if package and "@" in name[1:]:
        name = name[: name.index("@", 1)]
    if not name or "$" in name:
        return None
    return name


@dataclass(frozen=True, slots=True)
class Resolved:
    index: int | None
    wrappers: tuple[tuple[str, ...], ...]
    environment: tuple[tuple[str, str], ...]
    package: bool


def resolve_wrappers(words: Sequence[str]) -> Resolved:
    """Skip wrappers with their options, assignments and positionals to the program run."""
    wrappers: list[tuple[str, ...]] = []
    environment: list[tuple[str, str]] = []
    index = 0
    package = False
    while index < len(words):
        name = base_name(words[index])
        spec = _WRAPPERS.get(name)
        consumed = 1
        if spec is None and index + 1 < len(words):
            spec = SUB_WRAPPERS.get((name, words[index + 1]))
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
    return Resolved(index if index < len(words) else None, tuple(wrappers), tuple(environment), package)


@dataclass(frozen=True, slots=True)
class LeadingOptions:
    """The options before a command's first operand, as a POSIX utility reads them (XBD 12.2,
    Utility Syntax Guidelines 5 to 10): ``options``, each option word with the value it took
    (the next word, for an option that takes one; ``None`` for one that takes none, or whose
    value is missing), and ``operand``, the index of the first operand (``len(args)`` when there
    is none; the word after ``--``, which ends the options)."""

    options: tuple[tuple[str, str | None], ...]
    operand: int


def leading_options(args: Sequence[str], value_options: Collection[str] = frozenset(), *, signs: str = "-",
                    fold_case: bool = False) -> LeadingOptions:
    """Read the options at the start of ``args`` up to the first operand: a word of two or more
    characters starting with one of ``signs`` (``"-+"`` for the shells' ``+o``) is an option,
    and takes the next word as its value when it is in ``value_options`` (compared in lower
    case with ``fold_case``); ``-`` alone is an operand, ``--`` ends the options. Never raises."""
    found: list[tuple[str, str | None]] = []
    index = 0
    count = len(args)
    while index < count:
        word = args[index]
        if word == "--":
            return LeadingOptions(tuple(found), index + 1)
        if len(word) < 2 or word[0] not in signs:
            break
        if (word.lower() if fold_case else word) in value_options:
            found.append((word, args[index + 1] if index + 1 < count else None))
            index += 2
        else:
            found.append((word, None))
            index += 1
    return LeadingOptions(tuple(found), min(index, count))


def _shell_options(args: Sequence[str]) -> tuple[frozenset[str], int]:
    """A shell's short option letters (``-lc`` gives ``l`` and ``c``; ``-o pipefail`` and long
    options are skipped) and the index of its first operand (bash(1), OPTIONS)."""
    read = leading_options(args, SHELL_VALUES, signs="-+")
    letters = {letter for word, _ in read.options if word[0] == "-" and not word.startswith("--")
               and word not in SHELL_VALUES for letter in word[1:]}
    return frozenset(letters), read.operand


def shell_script(args: Sequence[str]) -> str | None:
    """The operand of ``-c`` in a shell's arguments (``-lc 'x'``, ``-e -c 'x'``, ``-o pipefail -c``)."""
    letters, index = _shell_options(args)
    return args[index] if "c" in letters and index < len(args) else None


def option_value(args: Sequence[str], short: str | None, longs: Sequence[str]) -> str | None:
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


def reads_stdin_as_script(program: str, args: Sequence[str]) -> bool:
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
    if program in SHELLS:
        script = shell_script(args)
        if script is not None:
            return script
        if reads_stdin_as_script(program, args):
            for redirect in reversed(redirects):
                if redirect.operator in ("<<", "<<-", "<<<") and redirect.descriptor in (None, 0):
                    return redirect.target
                if redirect.descriptor in (None, 0) and redirect.operator in ("<", "<&", "<>"):
                    return None
        return None
    if program in ("su", "runuser"):
        return option_value(args, "-c", ("--command",))
    if program == "script":
        return _short_value(args, "c", ("--command",), "cEIOBTmo")
    if program == "flock":
        return option_value(args, "-c", ("--command",))
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
        data = encode_source(safe)
        tree = Parser(bash_language()).parse(data)
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
        resolved = resolve_wrappers(words)
        program = None
        args: tuple[str, ...] = ()
        if resolved.index is not None:
            program = program_name(words[resolved.index], resolved.package, self.b.words)
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
    root = Parser(bash_language()).parse(encode_source(valid_utf8(command))).root_node
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
                found.setdefault(base_name(wrapper[0]), None)
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

