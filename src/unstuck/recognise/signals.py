"""The signal table: every generic signal the classifier reads, loaded, checked and compiled.
Internal: not a supported import path (docs/reference/index.md lists those that are).

The signals are data, each row naming its source (DESIGN.md, "How a result is recognised"):

* ``data/signals.yaml``: wording rows (``text``, most specific first; ``weak`` rows for
  generic wording), ``harmless`` wordings, failure ``markers`` (log levels, tracebacks,
  panics, exception names), the tool's own ``suggestions`` ("please run: gh auth login"), and
  the exit-code, program-exit-code and exception tables;
* ``data/messages.yaml`` with ``data/translations.jsonl``: programs' own messages by gettext
  msgid, matched in every language the installed catalogues hold (:mod:`unstuck.recognise.catalogues`);
* ``data/windows_messages.yaml``: cmd's and PowerShell's messages in the languages Microsoft
  ships (:mod:`unstuck.recognise.windows`);
* ``data/codes.yaml``: machine codes and HTTP statuses (:mod:`unstuck.recognise.codes`);
* ``data/interactive_calls.yaml``: commands that wait for a person (:mod:`unstuck.commands.interactive`).

A user extends the table with YAML files of the same format (any of the sections above, plus
``messages:`` rows, code ``tables:`` and interactive ``calls:``), named by :func:`load_signal_table`'s ``extra`` or by
the ``UNSTUCK_SIGNALS`` environment variable (paths separated by ``os.pathsep``). A user's rows
come before the bundled ones. Each file is validated like the shipped ones; a bad row is a
:class:`SignalTableError` naming the file and the row.

Every pattern compiles under google-re2, so the cost of reading a result is linear in its
length whatever the text (a row re2 refuses is a load error, never a slow match). Text is
matched in lower case; each row set is read in one pass with an ``re2.Set``.
"""

from __future__ import annotations

import enum
import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import re2

from unstuck.core.cache import bundled_document, data_bytes, digest_of, load_or_derive_text, store_text
from unstuck.core.errors import UnstuckError
from unstuck.core.records import cheap
from unstuck.core.situations import Kind

if TYPE_CHECKING:  # imported where they are used: a table that never reads a code or a command line loads neither
    from unstuck.commands.interactive import InteractiveCatalogue, InteractiveRow
    from unstuck.recognise.catalogues import MessageRow
    from unstuck.recognise.codes import CodeTables

__all__ = [
    "SIGNALS_ENV",
    "Coded",
    "DocumentCommand",
    "LazyPattern",
    "MarkerStrength",
    "Row",
    "RowMatch",
    "RowSet",
    "SignalTable",
    "SignalTableError",
    "Verdict",
    "load_signal_table",
    "loosened",
    "signal_files_from_env",
]

#: The environment variable naming a user's own signal files (``os.pathsep``-separated).
SIGNALS_ENV = "UNSTUCK_SIGNALS"
#: Memory for one chunk's automaton (bytes); the translated message rows need more than
#: re2's default.
_SET_MAX_MEM = 64 << 20
#: Pattern characters per ``re2.Set``. One set of every row (thousands of translated
#: alternatives) makes a union whose lazily built DFA keeps outgrowing its cache, and re2 then
#: rebuilds it on every text (measured: 40 ms per result over real outputs); sets of at most
#: this much pattern stay cached (about 40 µs for every cause row over a typical result).
_PATTERN_CHARS_PER_SET = 40_000
#: Rows of one file that make a set part of their own (:meth:`RowSet._parts`).
_FILE_PART_ROWS = 20


class SignalTableError(UnstuckError, ValueError):
    """A signal file cannot be read, or a row is malformed; the message names the file and row."""


class MarkerStrength(enum.StrEnum):
    """How much a failure marker says on its own.

    ``crash``: the program crashed (a traceback, a panic): a failure even under exit 0.
    ``status``: a runner stating the step's own non-zero exit status (``Process completed with
    exit code 1.``): a failure even under a success status, but it does not overrule a harmless
    wording and never names a cause.
    ``line``: an error log level or an exception name on a line: a failure when the result
    states no status, or when a cause is also worded.
    """

    CRASH = "crash"
    STATUS = "status"
    LINE = "line"


@cheap
@dataclass(frozen=True, slots=True)
class Verdict:
    """What a signal says: a kind and its flags."""

    kind: Kind
    interactive: bool = False
    retryable: bool = False


@cheap
@dataclass(frozen=True, slots=True)
class Coded:
    """A row of a code table kept in signals.yaml (exit codes, exception names): its verdict
    (``None`` when the code means "nothing failed"), and its source."""

    verdict: Verdict | None
    source: str


class LazyPattern:
    """A re2 pattern compiled on its first use: the bundled message rows hold hundreds of
    translated alternatives, and compiling them all costs about 0.5 s at start-up while a text
    reaches a handful (the row sets find which). The pattern is known to compile: it was
    derived by :func:`unstuck.recognise.catalogues.patterns_for`, which always gives one re2 accepts, and
    its row set compiled it already. Two threads compiling it at once compile equal objects."""

    __slots__ = ("_compiled", "options", "pattern", "where")

    def __init__(self, where: str, pattern: object, options: Any = None) -> None:
        self.where = where
        self.pattern = pattern
        self.options = options
        self._compiled: Any = None

    def compiled(self) -> Any:
        """The compiled re2 pattern (compiled now if it was not yet)."""
        if self._compiled is None:
            self._compiled = _compile(self.where, self.pattern, self.options)
        return self._compiled

    @property
    def groups(self) -> int:
        """Its number of capture groups."""
        return int(self.compiled().groups)

    def search(self, text: str, *bounds: int) -> Any:
        """``re2``'s ``search`` (``bounds``: start and end positions)."""
        return self.compiled().search(text, *bounds)

    def finditer(self, text: str) -> Any:
        """``re2``'s ``finditer``."""
        return self.compiled().finditer(text)


@dataclass(frozen=True, slots=True)
class Row:
    """One signal row.

    Attributes:
        where: the row's place (rows count from 1), e.g. ``signals.yaml text row 7`` or
            ``messages.yaml libc 'Permission denied'``.
        source: where its meaning is documented.
        pattern: its re2 pattern (lower case).
        verdict: what it says (``None`` for harmless rows, markers and suggestions).
        success_too: a degenerate or adversarial row, read on a success too.
        weak: generic wording, ranked below a status and a machine code.
        strength: a marker's strength (markers only).
        name: a marker's name (markers only).
    """

    where: str
    source: str
    pattern: str
    verdict: Verdict | None = None
    success_too: bool = False
    weak: bool = False
    strength: MarkerStrength | None = None
    name: str = ""
    compiled: Any = field(default=None, compare=False, repr=False)
    subject: Any = field(default=None, compare=False, repr=False)
    spanner: Any = field(default=None, compare=False, repr=False)
    ascii_pattern: str | None = field(default=None, compare=False, repr=False)

    def span_in(self, text: str | bytes) -> tuple[int, int] | None:
        """Where the row first matches ``text`` (character offsets), found without capture
        groups, so re2 can answer from its DFA (a capturing search of a row with many
        translated alternatives costs far more)."""
        found = (self.spanner or self.compiled).search(text)
        return None if found is None else found.span()


@cheap
@dataclass(frozen=True, slots=True)
class RowMatch:
    """Where a row matched, in the lower-cased text it was given (offsets in characters)."""

    row: Row
    start: int
    end: int


class RowSet:
    """An ordered set of rows, matched together in one pass (an ``re2.Set``), compiled on its
    first match or by :meth:`build`.

    Raises:
        SignalTableError: from :meth:`build` or the first match, when re2 cannot build the set
            (the table's loader builds the sets of a user's files at once, so their errors
            surface at load).
    """

    def __init__(self, rows: Sequence[Row], *, ascii_only: bool = False, by_file: bool = True) -> None:
        self.rows: tuple[Row, ...] = tuple(rows)
        self._ascii_only = ascii_only
        self._by_file = by_file
        self._bounds: tuple[tuple[int, int], ...] | None = None
        self._chunks: dict[int, Any] = {}
        #: per compiled part, what :meth:`matching_part` needs: the set, its first row, its loosened rows
        self._ready: dict[int, tuple[Any, int, frozenset[int]]] = {}
        #: per part, the rows (offsets in the part) whose set pattern is :func:`loosened`
        self._loose: dict[int, frozenset[int]] = {}
        #: per loosened row (index), its own pattern alone in a set: what confirms a loose match
        self._exact: dict[int, Any] = {}

    def build(self) -> None:
        """Compile the set now (else each part compiles on its first match: a text of ASCII
        only never needs the sets of every language, which cost about 0.2 s to build, and a
        text a bundled row of ``signals.yaml`` names never needs the programs' messages).

        Raises:
            SignalTableError: when re2 cannot build the set.
        """
        for chunk in range(len(self._parts())):
            self._chunk(chunk)

    def _pattern(self, row: Row) -> str:
        return row.ascii_pattern if self._ascii_only and row.ascii_pattern is not None else row.pattern

    def _parts(self) -> tuple[tuple[int, int], ...]:
        """The rows of each ``re2.Set`` (start, end): at most :data:`_PATTERN_CHARS_PER_SET`
        pattern characters each, and a new one where the rows of a file end once the part
        holds :data:`_FILE_PART_ROWS` rows (the rows of ``signals.yaml`` compile apart from
        the thousands of translated messages after them, so a text they name costs their set
        alone; a few rows stay with the next file's, as each part is one more match a text).
        A set made with ``by_file=False`` (several sets' parts joined to be matched in one
        pass) is parted by size alone."""
        if self._bounds is None:
            starts = [0]
            size = 0
            by_file = self._by_file
            for index, row in enumerate(self.rows):
                length = len(self._pattern(row))
                new_file = (by_file and index - starts[-1] >= _FILE_PART_ROWS
                            and _file(row) != _file(self.rows[index - 1]))
                if size and (size + length > _PATTERN_CHARS_PER_SET or new_file):
                    starts.append(index)
                    size = 0
                size += length
            self._bounds = tuple((start, end) for start, end in zip(starts, [*starts[1:], len(self.rows)], strict=True)
                                 if start < end)
        return self._bounds

    def _chunk(self, chunk: int) -> Any:
        matcher = self._chunks.get(chunk)
        if matcher is not None:
            return matcher
        start, end = self._parts()[chunk]
        options = _quiet_options()
        options.max_mem = _SET_MAX_MEM
        matcher = re2.Set.SearchSet(options)
        loose: set[int] = set()
        try:
            for offset, row in enumerate(self.rows[start:end]):
                pattern = self._pattern(row)
                # a row's own pattern (not an ASCII variant) goes in loosened when counted repeats
                # inflate it; a text the loose pattern finds is confirmed by the row's own (:meth:`matching_part`)
                wide = loosened(pattern) if pattern is row.pattern else pattern
                if wide != pattern:
                    loose.add(offset)
                matcher.Add(wide)
            matcher.Compile()
        except re2.error as exc:
            where = self.rows[start].where
            raise SignalTableError(f"signal rows from {where} on do not compile together: {exc}") from exc
        self._loose[chunk] = frozenset(loose)  # before the set: a thread that finds the set finds these
        self._ready[chunk] = (matcher, start, self._loose[chunk])
        self._chunks[chunk] = matcher  # two threads compiling one part at once keep equal sets
        return matcher

    def __len__(self) -> int:
        return len(self.rows)

    def matching(self, lowered: str | bytes) -> tuple[int, ...]:
        """Indices of every row whose pattern occurs in ``lowered`` (text, or text already
        encoded as UTF-8 so several sets share one encoding), in row order."""
        if not lowered:
            return ()
        found: list[int] = []
        for chunk in range(len(self._parts())):
            found.extend(self.matching_part(chunk, lowered))
        return tuple(found)

    @property
    def parts(self) -> int:
        """How many ``re2.Set`` parts the rows are matched in (:meth:`matching_part`)."""
        return len(self._parts())

    def part_rows(self, part: int) -> tuple[Row, ...]:
        """The rows of part ``part`` (:meth:`matching_part`), each with the pattern this set
        matches it with (an ASCII-only set's :attr:`Row.ascii_pattern`, where a row has one)."""
        start, end = self._parts()[part]
        rows = self.rows[start:end]
        if not self._ascii_only:
            return rows
        return tuple(row if row.ascii_pattern is None else replace(row, pattern=row.ascii_pattern) for row in rows)

    def matching_part(self, part: int, lowered: str | bytes) -> tuple[int, ...]:
        """:meth:`matching` for the rows of part ``part`` alone (parts are in row order: every
        index of part ``n`` is below every index of part ``n + 1``), compiling only that part."""
        if not lowered:
            return ()
        ready = self._ready.get(part)
        if ready is None:
            self._chunk(part)
            ready = self._ready[part]
        matcher, start, loose = ready
        found = matcher.Match(lowered)
        if not found:
            return ()
        if loose and not loose.isdisjoint(found):  # a loosened row counts only where its own pattern matches too
            found = [index for index in found if index not in loose or self._confirmed(start + index, lowered)]
        ordered = sorted(found)
        return tuple(ordered) if not start else tuple([start + index for index in ordered])

    def _confirmed(self, index: int, lowered: str | bytes) -> bool:
        """Whether row ``index``'s own pattern occurs in ``lowered`` (text or UTF-8): asked of
        a set holding it alone (compiled on first use), one call into re2 where a search
        through the Python wrapper costs several microseconds."""
        exact = self._exact.get(index)
        if exact is None:
            options = _quiet_options()
            options.max_mem = _SET_MAX_MEM
            exact = re2.Set.SearchSet(options)
            exact.Add(self.rows[index].pattern)
            exact.Compile()
            self._exact[index] = exact
        return bool(exact.Match(lowered))

    def locate(self, index: int, lowered: str | bytes) -> RowMatch | None:
        """The first match of row ``index`` in ``lowered`` (or in its UTF-8 bytes when it is
        ASCII: the offsets are the same)."""
        row = self.rows[index]
        span = row.span_in(lowered)
        if span is None:
            return None
        return RowMatch(row, span[0], span[1])

    def every(self, lowered: str | bytes, encoded: bytes | None = None, limit: int = 64, *,
              indices: Sequence[int] | None = None) -> tuple[RowMatch, ...]:
        """Every occurrence of every row in ``lowered`` (``encoded``: the same, as UTF-8; an
        ASCII text may be given as its bytes: the offsets are the same), in text order (at
        most ``limit``). ``indices``: the rows already known to occur in it, in row order
        (:meth:`matching`'s answer, found by a wider set), so no set is matched."""
        found: list[RowMatch] = []
        if indices is None:
            text = lowered if isinstance(lowered, bytes) else lowered.encode("utf-8")
            indices = self.matching(encoded if encoded is not None else text)
        for index in indices:
            row = self.rows[index]
            for match in row.compiled.finditer(lowered):
                found.append(RowMatch(row, match.start(), match.end()))
                if len(found) >= limit * 4:
                    break
        found.sort(key=lambda m: (m.start, m.end))
        return tuple(found[:limit])


def _hands_off(row: Row) -> bool:
    """A cause row worded as a sign-in hand-off: interactive ``auth``, and not read on a success."""
    return (not row.success_too and row.verdict is not None and row.verdict.kind is Kind.AUTH
            and row.verdict.interactive)


def _file(row: Row) -> str:
    """The file a row comes from: its ``where`` up to the first space (``signals.yaml text row 3``)."""
    return row.where.split(" ", 1)[0]


#: A counted repeat whose maximum is 10 or more (``{0,200}``, ``{1,80}``): a set's copy of a
#: pattern drops that maximum (:func:`loosened`).
_LARGE_COUNT = re.compile(r"\{[0-9]+,(?:[1-9][0-9]+)\}")
_LOOSE_FROM = 10
#: The parts of a re2 pattern a counted repeat may hide in, and the repeat itself: an escape
#: (``\{``, ``\x{41}``, ``\p{Greek}``), a character class (``[^]{}]``, ``[[:alpha:]{0,2}]``:
#: an optional ``^``, an optional ``]`` first, POSIX classes and escapes inside), a repeat.
_PATTERN_TOKEN = re.compile(
    r"(?P<escape>\\(?:[xpP]\{[^}]*\}|.))"
    r"|(?P<cls>\[\^?\]?(?:\[:[A-Za-z]+:\]|\\(?:[xpP]\{[^}]*\}|.)|[^\]\\])*\])"
    r"|\{(?P<low>[0-9]+),(?P<high>[0-9]+)\}",
    re.DOTALL)


def loosened(pattern: str) -> str:
    """``pattern`` with each counted repeat of a large maximum made unbounded (``{0,200}`` →
    ``*``, ``{1,80}`` → ``+``, ``{10,30}`` → ``{10,}``): a pattern that matches wherever
    ``pattern`` does (and perhaps elsewhere), with a far smaller re2 program.

    re2 copies a counted repeat into its program once per count, so ``[^\\n]{0,200}`` costs
    200 copies of a UTF-8 class: the ``signals.yaml`` rows that bound how far apart their words
    may be made the first set of cause rows cost tens of milliseconds to compile, at the start
    of every process that reads a failure. A set holds the loosened copy and a row it reports
    is confirmed with the row's own pattern (:meth:`RowSet.matching_part`), so what a set
    finds is what the rows find. Escapes (``\\{``, ``\\x{41}``, ``\\p{Greek}``) and
    character classes are left as they are; a pattern with ``\\Q`` (a literal span) is
    returned unchanged.
    """
    if "\\Q" in pattern or _LARGE_COUNT.search(pattern) is None:
        return pattern
    return _PATTERN_TOKEN.sub(_loosen, pattern)


def _loosen(found: re.Match[str]) -> str:
    high = found.group("high")
    if high is None or int(high) < _LOOSE_FROM:  # an escape, a class, a small repeat: as written
        return found.group()
    low = int(found.group("low"))
    return found.group() if low > int(high) else "*" if low == 0 else "+" if low == 1 else f"{{{low},}}"


@dataclass(frozen=True, slots=True)
class DocumentCommand:
    """Programs (and, where only some print documents, their subcommands) whose successful
    output is a document, not the program's own report (``cat``, ``git log``)."""

    programs: frozenset[str]
    subcommands: frozenset[str]
    source: str

    def covers(self, program: str, first_argument: str | None) -> bool:
        """Whether ``program`` run with ``first_argument`` (its first non-option word) prints
        a document."""
        if program not in self.programs:
            return False
        return not self.subcommands or (first_argument is not None and first_argument in self.subcommands)


@dataclass(frozen=True)
class SignalTable:
    """The compiled signal table.

    Attributes:
        causes: wording rows that name a cause, most specific first (programs' messages in
            every installed language after the ``text`` rows); made on first use from
            ``full_sets``, with ``weak`` and ``hand_offs`` (what a text that is not ASCII reads).
        ascii_causes: the same rows, each a program's message with only the alternatives an
            ASCII-only text can match (most tool output): a few sets instead of many, and
            smaller patterns to locate a row and its subject (``ascii_weak`` likewise).
        weak: generic wording (ranked below a status and a machine code).
        degenerate: the ``success_too`` rows of ``causes`` (truncation, emptiness, an injected
            instruction) on their own: what a success is read for, in one small pass.
        harmless: wordings that say nothing failed.
        markers: failure evidence without a status.
        not_markers: lines at a warning level, whose markers are not evidence.
        signed_in: wordings of a completed sign-in (a hand-off before one was answered).
        suggestions: where a tool names the command that fixes it (group 1).
        codes: machine codes and HTTP statuses (:attr:`codes`, built on first use from
            ``code_tables``).
        exit_code: exit statuses with a fixed meaning.
        decisive_exit_codes: exit statuses whose meaning beats any wording (126, 127).
        program_exit_codes: per program, exit statuses that mean "nothing matched" or
            "nothing failed" (``grep`` 1).
        exception: Python exception class names.
        search_tool: tool names that are searches (an empty success is ``empty``).
        empty: a success whose whole text matches is empty.
        retry_after_headers: headers that give a wait in seconds.
        retry_after_text: wording that gives a wait in seconds (group 1).
        document_commands: programs whose successful output is a document.
        hand_offs: the cause rows that are a sign-in hand-off (interactive ``auth``, not
            ``success_too``), in the order of ``causes``: a text none of them matches is no
            hand-off, whatever the first cause (read on every success with a status, so one
            small set instead of every cause); ``ascii_hand_offs`` the same for ASCII-only text.
        calls: the interactive-call catalogue (a user's ``calls:`` rows ahead of the bundled
            ``data/interactive_calls.yaml``), read before a command line is dispatched
            (:attr:`calls`, built on first use from ``call_catalogue``).
        files: the files the table was built from, in order.
        code_tables: makes :attr:`codes` (called once, when a code or a status is first read:
            a result that a wording row explains never loads the 800 codes of ``codes.yaml``).
        call_catalogue: makes :attr:`calls` (called once, when it is first read).
    """

    ascii_causes: RowSet
    ascii_weak: RowSet
    degenerate: RowSet
    harmless: RowSet
    markers: RowSet
    not_markers: RowSet
    suggestions: RowSet
    signed_in: RowSet
    exit_code: Mapping[int, Coded]
    decisive_exit_codes: frozenset[int]
    program_exit_codes: Mapping[str, Mapping[int, Coded]]
    exception: Mapping[str, Coded]
    search_tool: Any
    empty: Any
    retry_after_headers: tuple[str, ...]
    retry_after_text: Any
    full_sets: Callable[[], tuple[RowSet, RowSet, RowSet]] = field(repr=False, compare=False)
    document_commands: tuple[DocumentCommand, ...] = ()
    files: tuple[str, ...] = ()
    ascii_hand_offs: RowSet = field(default_factory=lambda: RowSet((), ascii_only=True))
    code_tables: Callable[[], CodeTables] = field(default=lambda: _bundled_codes(), repr=False, compare=False)
    call_catalogue: Callable[[], InteractiveCatalogue] = field(default=lambda: _bundled_calls(), repr=False,
                                                               compare=False)

    @functools.cached_property
    def _full(self) -> tuple[RowSet, RowSet, RowSet]:
        return self.full_sets()

    @functools.cached_property
    def causes(self) -> RowSet:
        """The cause rows with every alternative of every language (made on first use)."""
        return self._full[0]

    @functools.cached_property
    def weak(self) -> RowSet:
        """The weak rows with every alternative of every language (made on first use)."""
        return self._full[1]

    @functools.cached_property
    def hand_offs(self) -> RowSet:
        """The sign-in hand-off rows of :attr:`causes` (made on first use)."""
        return self._full[2]

    @functools.cached_property
    def codes(self) -> CodeTables:
        """Machine codes and HTTP statuses: ``code_tables()``, made on first use and kept."""
        return self.code_tables()

    @functools.cached_property
    def calls(self) -> InteractiveCatalogue:
        """The interactive-call catalogue: ``call_catalogue()``, made on first use and kept."""
        return self.call_catalogue()

    def row_sets(self) -> tuple[RowSet, ...]:
        """Every row set of the table."""
        return (self.causes, self.ascii_causes, self.weak, self.ascii_weak, self.degenerate, self.harmless,
                self.markers, self.not_markers, self.suggestions, self.signed_in, self.hand_offs,
                self.ascii_hand_offs)


# ----------------------------------------------------------------------------- loading


_TEXT_KEYS = frozenset({"kind", "interactive", "retryable", "pattern", "subject", "source", "success_too", "weak"})
_SECTION_KEYS = frozenset({
    "text", "harmless", "markers", "suggestions", "exit_code", "decisive_exit_codes", "program_exit_codes",
    "exception", "search_tool_pattern", "empty_pattern", "retry_after_headers", "retry_after_text",
    "messages", "tables", "calls", "document_commands", "not_markers", "signed_in",
})


#: A backslash escape in a pattern (``\S``, ``\\``): its letter is not a letter of the text.
_ESCAPE = re.compile(r"\\.", re.DOTALL)


def _compile(where: str, pattern: object, options: Any = None) -> Any:
    if not isinstance(pattern, str) or not pattern:
        raise SignalTableError(f"{where}: pattern must be a non-empty string")
    letters = _ESCAPE.sub("", pattern)
    if letters != letters.lower():
        raise SignalTableError(f"{where}: pattern has an upper-case letter; text is matched in lower case")
    try:
        return re2.compile(pattern, options or _QUIET)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise SignalTableError(
            f"{where}: pattern does not compile under re2, which matches in linear time and so has no "
            f"backreferences and no lookaround: {reason}") from None


def _quiet_options() -> Any:
    """re2 options that do not log a refused pattern to stderr (the error names it instead)."""
    options = re2.Options()
    options.log_errors = False
    return options


_QUIET = _quiet_options()
#: Character classes in a pattern (``[^\s'‘’]``): their non-ASCII members are choices, not
#: required letters, so they do not keep an alternative from matching ASCII-only text.
_CLASSES = re.compile(r"\[(?:\\.|[^\]\\])*\]")
#: A pattern that matches nothing (a row with nothing an ASCII-only text could match).
_NEVER = "[^\\x00-\\x{10ffff}]"


def _span_only_options() -> Any:
    """Options for a capture-free copy of a pattern (spans only: answered from re2's DFA)."""
    options = _quiet_options()
    options.never_capture = True
    options.max_mem = _SET_MAX_MEM
    return options


_SPAN_ONLY = _span_only_options()


def _flag(where: str, raw: Mapping[str, Any], name: str) -> bool:
    value = raw.get(name, False)
    if not isinstance(value, bool):
        raise SignalTableError(f"{where}: {name} must be true or false, got {value!r}")
    return value


def _source(where: str, raw: Mapping[str, Any]) -> str:
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise SignalTableError(f"{where}: every row needs a source (a program's source, a vendor reference, an RFC)")
    return source.strip()


def _verdict(where: str, raw: Mapping[str, Any]) -> Verdict:
    try:
        kind = Kind(raw["kind"])
    except (KeyError, ValueError, TypeError):
        raise SignalTableError(f"{where}: unknown or missing kind {raw.get('kind')!r}") from None
    return Verdict(kind, _flag(where, raw, "interactive"), _flag(where, raw, "retryable"))


def _mapping(where: str, raw: object) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise SignalTableError(f"{where}: must be a mapping, got {type(raw).__name__}")
    return raw


def _rows(where: str, raw: object) -> list[Mapping[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SignalTableError(f"{where}: must be a list of rows")
    return [_mapping(f"{where} row {i}", row) for i, row in enumerate(raw, start=1)]


def _text_rows(name: str, raw: object, *, lazy: bool = False) -> list[Row]:
    """The ``text`` rows of a file; ``lazy``: the bundled file's, whose patterns compile on first
    use (:class:`LazyPattern`; the test suite compiles every one), else compiled and checked now."""
    rows = []
    for index, row in enumerate(_rows(f"{name} text", raw), start=1):
        where = f"{name} text row {index}"
        unknown = sorted(set(map(str, row)) - _TEXT_KEYS)
        if unknown:
            raise SignalTableError(f"{where}: unknown field(s) {', '.join(unknown)}")
        subject = row.get("subject")
        make = LazyPattern if lazy else _compile
        rows.append(Row(
            where, _source(where, row), row.get("pattern", ""), _verdict(where, row),
            success_too=_flag(where, row, "success_too"), weak=_flag(where, row, "weak"),
            compiled=make(where, row.get("pattern")),
            subject=make(f"{where} subject", subject) if subject is not None else None,
            spanner=make(where, row["pattern"], _SPAN_ONLY),
        ))
    return rows


def _plain_rows(name: str, section: str, raw: object, *, markers: bool = False, lazy: bool = False) -> list[Row]:
    """The rows of a section without a verdict (harmless, markers, suggestions ...); ``lazy``:
    the bundled file's, compiled on first use (the test suite compiles and checks every one),
    else compiled and checked now."""
    rows = []
    for index, row in enumerate(_rows(f"{name} {section}", raw), start=1):
        where = f"{name} {section} row {index}"
        strength = None
        if markers:
            try:
                strength = MarkerStrength(str(row.get("strength")))
            except ValueError:
                got = row.get("strength")
                raise SignalTableError(f"{where}: strength must be crash, status or line, got {got!r}") from None
        if lazy:
            compiled: Any = LazyPattern(where, row.get("pattern"))
        else:
            compiled = _compile(where, row.get("pattern"))
            if section == "suggestions" and compiled.groups < 1:
                raise SignalTableError(f"{where}: a suggestion pattern needs a group for the command")
        rows.append(Row(where, _source(where, row), row["pattern"], strength=strength, name=str(row.get("name", "")),
                        compiled=compiled))
    return rows


def _words(where: str, row: Mapping[str, Any], key: str) -> frozenset[str]:
    value = row.get(key, [])
    words = [value] if isinstance(value, str) else value
    if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
        raise SignalTableError(f"{where}: {key} must be a word or a list of words")
    if key == "program" and not words:
        raise SignalTableError(f"{where}: names no program")
    return frozenset(words)


def _coded(where: str, raw: object) -> Coded:
    row = _mapping(where, raw)
    if row.get("ok") is True:
        return Coded(None, _source(where, row))
    return Coded(_verdict(where, row), _source(where, row))


def _int_key(where: str, key: object) -> int:
    try:
        return int(str(key))
    except ValueError:
        raise SignalTableError(f"{where}: {key!r} is not a whole number") from None


def _message_rows(
    name: str, messages: Sequence[tuple[MessageRow, tuple[str, ...]]], *, lazy: bool = False
) -> tuple[list[Row], ...]:
    """Signal rows of programs' messages, each with its patterns in every language
    (:func:`unstuck.recognise.catalogues.patterns_for`): causes, weak rows and harmless rows. ``lazy``:
    each row's own patterns compile on first use (:class:`LazyPattern`; the bundled rows,
    whose every pattern the test suite compiles), else now (a user's rows, checked at load)."""
    causes: list[Row] = []
    weak: list[Row] = []
    harmless: list[Row] = []
    for message, alternatives in messages:
        where = f"{name} {message.domain} {message.msgid!r}"
        if not alternatives:
            continue
        pattern = "|".join(f"(?:{p})" for p in alternatives)
        # captures only where they are read: the subject's group, and a harmless row's matches;
        # any other row is located capture-free (a capturing search of many alternatives costs)
        make = LazyPattern if lazy else _compile
        spanner = make(where, pattern, _SPAN_ONLY)
        captures = message.subject_arg is not None or message.harmless
        compiled = make(where, pattern) if captures else spanner
        # the alternatives an ASCII-only text can match: a translation with a non-ASCII letter
        # cannot (every literal of a message's pattern is required)
        plain = [p for p in alternatives if p.isascii() or _CLASSES.sub("", p).isascii()]
        ascii_pattern = "|".join(f"(?:{p})" for p in plain) if plain else _NEVER
        verdict = None if message.harmless or message.kind is None else Verdict(
            message.kind, message.interactive, message.retryable)
        row = Row(where, message.source, pattern, verdict, weak=message.weak, compiled=compiled,
                  subject=compiled if message.subject_arg is not None else None, spanner=spanner,
                  ascii_pattern=ascii_pattern)
        (harmless if message.harmless else weak if message.weak else causes).append(row)
    return causes, weak, harmless


class _Parts:
    """Rows gathered from several files before compiling (user files first). A plain class, not
    a dataclass: it is made once per table, and a dataclass costs its module's import about a
    millisecond to build."""

    __slots__ = ("calls", "causes", "codes", "decisive", "documents", "exception", "exit_code", "files", "harmless",
                 "markers", "message_causes", "message_weak", "not_markers", "program_exit", "settings", "signed_in",
                 "suggestions", "weak")

    def __init__(self) -> None:
        self.causes: list[Row] = []
        self.message_causes: list[Row] = []
        self.weak: list[Row] = []
        self.message_weak: list[Row] = []
        self.harmless: list[Row] = []
        self.markers: list[Row] = []
        self.not_markers: list[Row] = []
        self.suggestions: list[Row] = []
        self.signed_in: list[Row] = []
        self.exit_code: dict[int, Coded] = {}
        self.decisive: set[int] = set()
        self.program_exit: dict[str, dict[int, Coded]] = {}
        self.exception: dict[str, Coded] = {}
        self.settings: dict[str, Any] = {}
        self.codes: CodeTables | None = None
        self.calls: list[InteractiveRow] = []
        self.documents: list[DocumentCommand] = []
        self.files: list[str] = []


def _add_file(parts: _Parts, name: str, data: Mapping[str, Any], *, bundled: bool = False) -> None:
    unknown = sorted(set(map(str, data)) - _SECTION_KEYS)
    if unknown:
        raise SignalTableError(f"{name}: unknown section(s) {', '.join(unknown)}")
    for row in _text_rows(name, data.get("text"), lazy=bundled):
        (parts.weak if row.weak else parts.causes).append(row)
    parts.harmless += _plain_rows(name, "harmless", data.get("harmless"), lazy=bundled)
    parts.markers += _plain_rows(name, "markers", data.get("markers"), markers=True, lazy=bundled)
    parts.not_markers += _plain_rows(name, "not_markers", data.get("not_markers"), lazy=bundled)
    parts.suggestions += _plain_rows(name, "suggestions", data.get("suggestions"), lazy=bundled)
    parts.signed_in += _plain_rows(name, "signed_in", data.get("signed_in"), lazy=bundled)
    for key, value in _mapping(f"{name} exit_code", data.get("exit_code") or {}).items():
        parts.exit_code.setdefault(_int_key(f"{name} exit_code", key), _coded(f"{name} exit_code {key}", value))
    parts.decisive |= {_int_key(f"{name} decisive_exit_codes", c) for c in data.get("decisive_exit_codes") or []}
    for program, codes in _mapping(f"{name} program_exit_codes", data.get("program_exit_codes") or {}).items():
        table = parts.program_exit.setdefault(str(program), {})
        for key, value in _mapping(f"{name} program_exit_codes {program}", codes).items():
            where = f"{name} program_exit_codes {program} {key}"
            table.setdefault(_int_key(where, key), _coded(where, value))
    for key, value in _mapping(f"{name} exception", data.get("exception") or {}).items():
        parts.exception.setdefault(str(key), _coded(f"{name} exception {key}", value))
    for key in ("search_tool_pattern", "empty_pattern", "retry_after_headers", "retry_after_text"):
        if key in data:
            parts.settings.setdefault(key, data[key])
    if data.get("messages") is not None:
        import yaml

        from unstuck.recognise.catalogues import load_message_rows, patterns_for

        rows = load_message_rows(yaml.safe_dump({"messages": data["messages"]}), where=name)
        causes, weak, harmless = _message_rows(name, [(row, patterns_for(row, ())) for row in rows])
        parts.message_causes += causes
        parts.message_weak += weak
        parts.harmless += harmless
    for index, raw in enumerate(_rows(f"{name} document_commands", data.get("document_commands")), start=1):
        where = f"{name} document_commands row {index}"
        parts.documents.append(DocumentCommand(_words(where, raw, "program"), _words(where, raw, "subcommand"),
                                               _source(where, raw)))
    if data.get("calls") is not None:
        import yaml

        from unstuck.commands.interactive import parse_interactive_calls

        try:
            parts.calls += parse_interactive_calls(yaml.safe_dump({"calls": data["calls"]}), name)
        except ValueError as exc:
            raise SignalTableError(str(exc)) from None
    if data.get("tables") is not None:
        import yaml

        from unstuck.recognise.codes import load_code_tables, merge_code_tables

        extra = load_code_tables(yaml.safe_dump({"tables": data["tables"]}), where=name)
        parts.codes = extra if parts.codes is None else merge_code_tables(parts.codes, extra)
    parts.files.append(name)


def _read_user_file(path: Path) -> Mapping[str, Any]:
    from unstuck.core.readers import parse_yaml, read_text

    text = read_text(path, what="the signal file", error=SignalTableError)
    data = parse_yaml(text, where=str(path), error=SignalTableError) or {}
    return _mapping(str(path), data)


def signal_files_from_env(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The user's signal files named by ``UNSTUCK_SIGNALS`` (``os.pathsep``-separated)."""
    value = (environ if environ is not None else os.environ).get(SIGNALS_ENV, "")
    return tuple(Path(part) for part in value.split(os.pathsep) if part.strip())


def load_signal_table(extra: Iterable[Path] | None = None) -> SignalTable:
    """The compiled signal table: a user's files (``extra``, else those named by
    ``UNSTUCK_SIGNALS``) ahead of the bundled data. Cached per list of files and their
    modification times.

    Raises:
        SignalTableError: naming the file and the row, for an unknown section, kind or field,
            a row without a source, a pattern re2 refuses or with an upper-case letter, a
            suggestion pattern without a group, or a file that is not UTF-8 YAML.
    """
    if extra is None and not os.environ.get(SIGNALS_ENV):
        return _load(())  # the common case, on every call: no files to stat
    from_env = extra is None
    files = tuple(extra) if extra is not None else signal_files_from_env()
    stamps = []
    try:
        for path in files:
            try:
                stamps.append((str(path), path.stat().st_mtime_ns))
            except OSError as exc:
                raise SignalTableError(f"{path}: cannot read the signal file: {exc.strerror or exc}") from exc
        return _load(tuple(stamps))
    except SignalTableError as exc:
        if from_env and files:
            raise SignalTableError(f"{exc} (a file named by {SIGNALS_ENV})") from None
        raise


@functools.cache
def _bundled() -> Mapping[str, Any]:
    return _mapping("signals.yaml", bundled_document("signals.yaml", _yaml_document))


def _yaml_document(text: str) -> Any:
    import yaml  # only when the cached JSON of the file is missing or stale

    # libyaml's parser when PyYAML has it (the same safe constructor, several times faster)
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _bundled_codes() -> CodeTables:
    from unstuck.recognise.codes import load_code_tables

    return load_code_tables()


def _bundled_calls() -> InteractiveCatalogue:
    from unstuck.commands.interactive import load_interactive_catalogue

    return load_interactive_catalogue()


#: The bundled files the message rows are derived from, and the modules that derive them.
_MESSAGE_FILES = ("messages.yaml", "translations.jsonl", "windows_messages.yaml")
_MESSAGE_MODULES = ("signals.py", "catalogues.py", "windows.py")
#: Bumped when the layout of the cached message rows changes.
_MESSAGE_ROWS_LAYOUT = 3
#: What separates the fields of the cached rows, :data:`_FIELDS` to a row: ASCII US, which no
#: pattern holds (the derivations write control characters as escapes, ``\x1f``).
_UNIT = "\x1f"
_FIELDS = 8
#: The encoding of the cached patterns in every language: they are mostly letters beyond
#: Latin-1, all in the Basic Multilingual Plane, and UTF-16 decodes them about ten times faster
#: than UTF-8.
_PATTERNS_ENCODING = "utf-16-le"
#: The groups a message row goes to, as the cache names them.
_GROUPS = ("causes", "weak", "harmless")
#: What a file's message rows are: the causes and weak rows, and the harmless rows.
_FileRows = tuple[list[Row], list[Row], list[Row]]


@functools.cache
def _bundled_message_rows() -> tuple[_FileRows, ...]:
    """The signal rows of ``messages.yaml`` (with the translations) and of
    ``windows_messages.yaml`` that an ASCII-only text is read with, each file's causes, weak rows
    and harmless rows: a cause or weak row with only the alternatives such a text can match (its
    ``ascii_pattern``, :func:`_ascii_variant`), a harmless row whole (the harmless set is one for
    every text). Their patterns compile on first use.

    Deriving them means reading and checking every message row, deriving every translation's
    pattern and deciding which alternatives an ASCII-only text can match (thousands of
    substitutions): tens of milliseconds at every start. So the rows are kept as text by
    :func:`unstuck.core.cache.load_or_derive_text` (``signal-message-rows``) under a SHA-256 of
    the data files and of the modules that derive them, and the patterns in every language
    beside them (``signal-message-patterns``, read by :func:`_bundled_full_message_rows` only
    for a text that is not ASCII); a later process reads the rows back in about a millisecond.
    A stale or damaged entry is derived again.
    """
    return load_or_derive_text("signal-message-rows", _message_rows_key(), _derive_message_rows,
                               _parse_message_rows)


@functools.cache
def _bundled_full_message_rows() -> tuple[tuple[list[Row], list[Row]], ...]:
    """The bundled cause and weak message rows whole, each file's, as :func:`_message_rows` makes
    them: what a text that is not ASCII is read with (``signal-message-patterns``)."""
    shapes = _bundled_message_rows()
    count = sum(len(causes) + len(weak) for causes, weak, _ in shapes)

    def parse(text: str) -> tuple[tuple[list[Row], list[Row]], ...] | None:
        patterns = text.split(_UNIT) if text else []
        if len(patterns) != count or not all(patterns):
            return None
        found = iter(patterns)
        return tuple(([_whole(row, next(found)) for row in causes], [_whole(row, next(found)) for row in weak])
                     for causes, weak, _ in shapes)

    return load_or_derive_text("signal-message-patterns", _message_rows_key(), lambda: _derived()[1], parse,
                               encoding=_PATTERNS_ENCODING)


def _message_rows_key() -> str:
    here = Path(__file__).parent
    return digest_of((f"signal message rows, layout {_MESSAGE_ROWS_LAYOUT}", *map(data_bytes, _MESSAGE_FILES),
                      *((here / name).read_bytes() for name in _MESSAGE_MODULES)))


@functools.cache
def _derived() -> tuple[str, str]:
    """The two cached texts, derived: the rows (with their ASCII alternatives and the harmless
    rows' whole patterns) and the cause and weak rows' whole patterns, in the rows' order."""
    from unstuck.recognise import windows
    from unstuck.recognise.catalogues import bundled_patterns

    fields: list[str] = []
    patterns: list[str] = []
    for number, rows in enumerate((_message_rows("messages.yaml", bundled_patterns(), lazy=True),
                                   _message_rows("windows_messages.yaml", windows.bundled_messages(), lazy=True))):
        for group, grouped in zip(_GROUPS, rows, strict=True):
            for row in grouped:
                fields.extend(_record(number, group, row))
                if group != "harmless":
                    patterns.append(row.pattern)
    if any(_UNIT in pattern or any(ord(char) > 0xFFFF for char in pattern) for pattern in patterns):
        raise ValueError("a message pattern holds a separator of the cached rows or a character beyond the BMP")
    return _UNIT.join(fields), _UNIT.join(patterns)


def _derive_message_rows() -> str:
    rows, patterns = _derived()
    store_text("signal-message-patterns", _message_rows_key(), patterns, encoding=_PATTERNS_ENCODING)
    return rows


def _record(number: int, group: str, row: Row) -> tuple[str, ...]:
    verdict = row.verdict
    fields = (str(number), group, row.where, row.source, verdict.kind.value if verdict is not None else "",
              _bits(verdict is not None and verdict.interactive, verdict is not None and verdict.retryable,
                    row.weak, row.compiled is not row.spanner, row.subject is not None),
              row.ascii_pattern or "", row.pattern if group == "harmless" else "")
    if any(_UNIT in text for text in fields):
        raise ValueError(f"{row.where}: a field holds a separator of the cached rows")
    return fields


def _bits(*flags: bool) -> str:
    return "".join("1" if flag else "0" for flag in flags)


def _parse_message_rows(text: str) -> tuple[_FileRows, ...] | None:
    """The rows :func:`_derive_message_rows` wrote, or ``None`` for text it did not write."""
    found: tuple[_FileRows, ...] = (([], [], []), ([], [], []))
    fields = text.split(_UNIT) if text else []
    if len(fields) % _FIELDS:
        return None
    try:
        for start in range(0, len(fields), _FIELDS):
            number, group, where, source, kind, bits, ascii_pattern, pattern = fields[start:start + _FIELDS]
            harmless = group == "harmless"
            if number not in ("0", "1") or len(bits) != 5 or not ascii_pattern or harmless != bool(pattern):
                return None
            interactive, retryable, weak, captures, subject = (bit == "1" for bit in bits)
            verdict = Verdict(Kind(kind), interactive, retryable) if kind else None
            # a cause or weak row as an ASCII-only text reads it; a harmless row whole
            own = pattern if harmless else ascii_pattern
            spanner = LazyPattern(where, own, _SPAN_ONLY)
            compiled = LazyPattern(where, own) if captures else spanner
            found[int(number)][_GROUPS.index(group)].append(Row(
                where, source, own, verdict, weak=weak, compiled=compiled, subject=compiled if subject else None,
                spanner=spanner, ascii_pattern=ascii_pattern if harmless else None))
    except ValueError:  # an unknown kind or group
        return None
    return found


def _whole(variant: Row, pattern: str) -> Row:
    """The row ``variant`` (its ASCII alternatives) with every alternative, ``pattern``."""
    spanner = LazyPattern(variant.where, pattern, _SPAN_ONLY)
    compiled = LazyPattern(variant.where, pattern) if variant.compiled is not variant.spanner else spanner
    return Row(variant.where, variant.source, pattern, variant.verdict, weak=variant.weak, compiled=compiled,
               subject=compiled if variant.subject is not None else None, spanner=spanner,
               ascii_pattern=variant.pattern)


def _ascii_variant(row: Row, *, lazy: bool) -> Row:
    """A message row as an ASCII-only text reads it: its pattern the alternatives such a text
    can match (``ascii_pattern``; the others hold a letter beyond ASCII that every match
    needs, so a search of such a text finds the same spans with or without them)."""
    if row.ascii_pattern is None:
        return row
    if row.ascii_pattern == row.pattern:  # every alternative is ASCII: the row's own patterns
        compiled, spanner = row.compiled, row.spanner
    else:
        make = LazyPattern if lazy else _compile
        spanner = make(row.where, row.ascii_pattern, _SPAN_ONLY)
        compiled = make(row.where, row.ascii_pattern) if row.compiled is not row.spanner else spanner
    return Row(row.where, row.source, row.ascii_pattern, row.verdict, weak=row.weak, compiled=compiled,
               subject=compiled if row.subject is not None else None, spanner=spanner)


@functools.cache
def _load(stamps: tuple[tuple[str, int], ...]) -> SignalTable:
    parts = _Parts()
    for name, _ in stamps:
        _add_file(parts, name, _read_user_file(Path(name)))
    _add_file(parts, "signals.yaml", _bundled(), bundled=True)
    # a user's message rows whole and as an ASCII-only text reads them (checked now), then the bundled ones
    user_causes, user_weak = parts.message_causes, parts.message_weak
    ascii_causes = [_ascii_variant(row, lazy=False) for row in user_causes]
    ascii_weak = [_ascii_variant(row, lazy=False) for row in user_weak]
    for causes, weak, harmless in _bundled_message_rows():
        ascii_causes += causes
        ascii_weak += weak
        parts.harmless += harmless
    text_causes, text_weak = parts.causes, parts.weak

    def full_sets() -> tuple[RowSet, RowSet, RowSet]:
        every_cause, every_weak = [*text_causes, *user_causes], [*text_weak, *user_weak]
        for causes, weak in _bundled_full_message_rows():
            every_cause += causes
            every_weak += weak
        return (RowSet(every_cause), RowSet(every_weak), RowSet([row for row in every_cause if _hands_off(row)]))

    code_tables: Callable[[], CodeTables] = _bundled_codes
    if parts.codes is not None:  # a user's tables: merged now, so a clash of names is a load error
        from unstuck.recognise.codes import merge_code_tables

        merged = merge_code_tables(_bundled_codes(), parts.codes)
        code_tables = lambda: merged  # noqa: E731
    call_catalogue: Callable[[], InteractiveCatalogue] = _bundled_calls
    if parts.calls:
        from unstuck.commands.interactive import InteractiveCatalogue

        user_calls = InteractiveCatalogue((*parts.calls, *_bundled_calls().rows))
        call_catalogue = lambda: user_calls  # noqa: E731
    settings = parts.settings
    headers = settings.get("retry_after_headers", [])
    if not isinstance(headers, list):
        raise SignalTableError("retry_after_headers must be a list of header names")
    plain_causes = [*text_causes, *ascii_causes]
    table = SignalTable(
        ascii_hand_offs=RowSet([row for row in plain_causes if _hands_off(row)], ascii_only=True),
        ascii_causes=RowSet(plain_causes, ascii_only=True),
        degenerate=RowSet([row for row in plain_causes if row.success_too]),
        ascii_weak=RowSet([*text_weak, *ascii_weak], ascii_only=True),
        full_sets=full_sets,
        harmless=RowSet(parts.harmless),
        markers=RowSet(parts.markers),
        not_markers=RowSet(parts.not_markers),
        suggestions=RowSet(parts.suggestions),
        signed_in=RowSet(parts.signed_in),
        exit_code=parts.exit_code,
        decisive_exit_codes=frozenset(parts.decisive),
        program_exit_codes=parts.program_exit,
        exception=parts.exception,
        search_tool=_compile("search_tool_pattern", settings.get("search_tool_pattern", "search")),
        empty=_compile("empty_pattern", settings.get("empty_pattern", r"^\s*$")),
        retry_after_headers=tuple(str(h).lower() for h in headers),
        retry_after_text=_compile("retry_after_text", settings.get("retry_after_text", "[^\\x00-\\x{10ffff}]")),
        document_commands=tuple(parts.documents),
        files=(*tuple(parts.files), "messages.yaml", "windows_messages.yaml", "codes.yaml"),
        code_tables=code_tables,
        call_catalogue=call_catalogue,
    )
    if stamps:
        # a user's rows: every set compiled now, so a row re2 refuses is a load error
        for rows in table.row_sets():
            rows.build()
    return table
