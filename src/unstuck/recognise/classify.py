"""Infer a situation from a tool result that declared none, from generic signals only.

The signals are data (:mod:`unstuck.recognise.signals`; DESIGN.md, "How a result is recognised"), read
in two steps.

**Did it fail?** A failure status (a non-zero exit, an HTTP status of 400 or more, a raised
exception, a tool's own ``error``) says so, unless a *harmless* wording explains it ("nothing
to commit" under exit 1) or the program's manual gives that exit status another meaning
(``grep`` exits 1 when nothing matched). Without a status, the text decides: a failure
marker (an error or fatal log level, a traceback, a panic, an exception name), an envelope
that says it failed (``ok: false``, a GraphQL ``errors`` array, a Kubernetes ``Status`` of
``Failure``), or a cause worded. A status that says success is overruled only by a crash
(a traceback, a panic), a structural failure envelope, or a marker with a cause worded. A
*document* a tool returns (``read_file``'s text, a fetched page: ``ToolDescription.document_output``)
is data, never read for failure.

**What does it mean?** The first stage of this table that says something decides
(:data:`PRECEDENCE`); a body naming a specific cause beats a bare status:

=================  ==========================================================================
stage              evidence
=================  ==========================================================================
not executed       the call was refused before it ran → ``permission``
(waited)           its deadline passed while its program waited for input (a pager, a prompt)
                   → interactive ``invalid_args`` with the non-interactive fix (a cause)
decisive exit      126 / 127 (POSIX shells: cannot execute / not found) beat generic wording
                   (a cause row worded beside them still decides)
cause              the first wording row that names a cause (sign-in and prompt shapes,
                   spent quotas, locks, ...), then a program's own message in any installed
                   language (gettext catalogues)
code               a machine code in an envelope's fields (by table priority) or in the text
                   (errno, Node, gRPC, SQLSTATE, AWS, Entra AADSTS, Google, Slack, GitHub,
                   OpenAI, Anthropic, ...); an envelope's documented code also decides a cause
                   worded in its own message when the message names two causes ("A or B")
status             the HTTP status (the result's, else one the body states), the exception
                   class, the exit code; a status that names only its class (400, 500)
                   yields to a concept
weak               generic wording ("not found", "already exists") and category-level codes
                   (``invalid_request_error``)
concept            a cause said in plain words: a concept of :mod:`unstuck.recognise.concepts` (the
                   thing and the negation or modality that makes it a failure, met in one
                   sentence: "must be authenticated", "budget exceeded", "readonly database")
unrecognised       a failure nothing explains → ``execution_error`` (inferred), said so by
                   :func:`explain_result`
=================  ==========================================================================

A success is read only for degenerate and adversarial signals (truncation, emptiness, an
injected instruction used, not only quoted by a text about injections:
:mod:`unstuck.recognise.mentions`). The tool's own suggested fix ("please run: gh auth login") rides on the
situation as ``suggestion``, screened (:func:`unstuck.commands.screen.screen_command`) and always quoted
as what the tool said. Inferred situations have ``source=inferred`` and never an unblock or a
probe.

Only a window of a result is read: its first :data:`SCAN_HEAD_CHARS` and last
:data:`SCAN_TAIL_CHARS` characters; every signal compiles under re2, so a result costs time
linear in the window, and flat beyond it.
"""

from __future__ import annotations

import enum
import functools
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from unstuck.core.records import cheap
from unstuck.core.situations import Kind, Situation, Source
from unstuck.core.text import clean_terminal_text, has_invisible, match_form, smuggled_text, valid_utf8
from unstuck.core.tools import ToolDescription, ToolResult
from unstuck.recognise.mentions import about_injections, is_mention
from unstuck.recognise.signals import Coded, MarkerStrength, RowMatch, RowSet, SignalTable, Verdict, load_signal_table

if TYPE_CHECKING:  # the command-line modules load when a command line is first read (tree-sitter, their tables)
    from unstuck.commands.screen import Screened
    from unstuck.recognise.codes import CodeVerdict
    from unstuck.recognise.concepts import ConceptMatch
    from unstuck.recognise.envelopes import Envelope

__all__ = [
    "PRECEDENCE",
    "SCAN_HEAD_CHARS",
    "SCAN_TAIL_CHARS",
    "Classification",
    "Decision",
    "Evidence",
    "Stage",
    "classify_output",
    "classify_result",
    "explain_output",
    "explain_result",
    "find_injection",
]

_DETAIL_CHARS = 240
#: A success longer than this is not empty, whatever the empty pattern would say.
_EMPTY_CHARS = 200
_SUGGESTION_CHARS = 200
#: Only this much of a result is read: its head and its tail (characters). Failures are worded
#: at the start or the end; a tool's own truncation keeps a result under the head size.
SCAN_HEAD_CHARS = 96_000
SCAN_TAIL_CHARS = 16_000


class Stage(enum.StrEnum):
    """Which kind of evidence decided a classification (see the module's table)."""

    NOT_EXECUTED = "not executed"
    DECISIVE_EXIT = "decisive exit code"
    CAUSE = "cause"
    CODE = "code"
    STATUS = "status"
    WEAK = "weak"
    CONCEPT = "concept"
    UNRECOGNISED = "unrecognised"
    SUCCESS = "success"


#: The order in which stages decide a failure's kind: the first that says something wins.
PRECEDENCE: tuple[Stage, ...] = (
    Stage.NOT_EXECUTED, Stage.DECISIVE_EXIT, Stage.CAUSE, Stage.CODE, Stage.STATUS, Stage.WEAK,
    Stage.CONCEPT, Stage.UNRECOGNISED,
)


@cheap
@dataclass(frozen=True, slots=True)
class Decision:
    """The rule that decided: its stage, where it is (``signals.yaml text row 7``,
    ``codes.yaml sqlstate 53300``, ``HTTP 403``) and its documented source."""

    stage: Stage
    rule: str
    source: str


@cheap
@dataclass(frozen=True, slots=True)
class Evidence:
    """One thing the classifier saw: what (``marker: traceback``, ``envelope: graphql``,
    ``code: grpc UNAVAILABLE``, ``status: HTTP 403``, ``harmless``, ``suggestion``) and a
    short excerpt."""

    what: str
    excerpt: str


@cheap
@dataclass(frozen=True, slots=True)
class Classification:
    """A classification with its reasons (``unstuck classify --explain``).

    Attributes:
        situation: the inferred situation, or ``None`` for an ordinary success.
        failed: whether the result was read as a failure.
        decided_by: the rule that decided the kind (``None`` for a plain success).
        evidence: what was seen on the way, in order.
    """

    situation: Situation | None
    failed: bool
    decided_by: Decision | None
    evidence: tuple[Evidence, ...] = ()

    @property
    def recognised(self) -> bool:
        """False when a failure matched nothing (it stays ``execution_error``, inferred)."""
        return self.decided_by is None or self.decided_by.stage is not Stage.UNRECOGNISED


# ----------------------------------------------------------------------------- reading


def _window(text: str) -> str:
    if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        return text
    return text[:SCAN_HEAD_CHARS] + "\n" + text[-SCAN_TAIL_CHARS:]


def _line_around(text: str, start: int, end: int) -> str:
    if start < end and text[start] == "\n":  # a row anchored on the line break before its line
        start += 1
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    if end - first > _DETAIL_CHARS:  # a long line (a JSON document on one line): the excerpt holds the match
        first = max(first, (start + end - _DETAIL_CHARS) // 2)
    line = text[first : last if last != -1 else len(text)].strip()
    return line[:_DETAIL_CHARS]


#: Words without which no envelope can state a failure or carry a code: a cheap test that
#: spares the parser the many results that hold none (envelopes.py: failure fields and codes).
_ENVELOPE_WORDS = ("error", "fail", "fault", "exception", "false", "detail", "code", "status", "level",
                   "severity", "reason", "__type")


def _lowered_offsets(text: str, lowered: str) -> list[int]:
    """For each offset of ``lowered`` (``text.lower()``), the offset in ``text`` of the character it
    was lowered from, and ``len(text)`` after the last: each character lowers on its own, to one
    character or more (SpecialCasing.txt; the conditional mappings Python applies, final sigma,
    keep the length)."""
    positions = [index for index, char in enumerate(text) for _ in range(len(char.lower()))]
    positions += [len(text)] * (len(lowered) + 1 - len(positions))
    return positions[:len(lowered) + 1]


def _adversarial(row: Any) -> bool:
    return row.verdict is not None and row.verdict.kind is Kind.INJECTED_INSTRUCTION


def _not_adversarial(row: Any) -> bool:
    return not _adversarial(row)


def _any_row(row: Any) -> bool:
    return True


def _says_any(text: str, words: tuple[str, ...]) -> bool:
    """Whether any of ``words`` occurs in ``text`` (a loop: cheaper than ``any`` over a generator)."""
    for word in words:  # noqa: SIM110 (a loop: no generator to resume per word)
        if word in text:
            return True
    return False


#: A reader's cache holds no value yet for the key (where ``None`` is a value).
_UNREAD: Any = object()


class _Derived:
    """What classification derives once from one signal table, for every result after.

    Attributes:
        table: the table.
        first_read: the rows of ``markers``, ``ascii_hand_offs`` and ``degenerate``, in that
            order and with the patterns those sets match an ASCII text with, as one set
            (:meth:`_Reader.first_read`); ``None`` when they do not fit in one part.
        bounds: where the hand-off rows and the degenerate rows start in ``first_read``.
        plain_read: ``first_read`` when it holds every degenerate row (what
            :func:`_plain_success` needs), else ``None``.
        failure_read: the rows of the first part of ``ascii_causes``, of ``harmless`` and of
            ``suggestions``, in that order, as one set (:meth:`_Reader.failure_read`);
            ``None`` when they do not fit in one part.
        failure_bounds: where the harmless rows and the suggestion rows start in ``failure_read``.
    """

    def __init__(self, table: SignalTable) -> None:
        self.table = table
        hand_offs = tuple(replace(row, pattern=row.ascii_pattern) if row.ascii_pattern is not None else row
                          for row in table.ascii_hand_offs.rows)
        joined = RowSet((*table.markers.rows, *hand_offs, *table.degenerate.rows))
        self.first_read = joined if joined.parts == 1 else None
        self.bounds = (len(table.markers), len(table.markers) + len(hand_offs))
        # what :func:`_plain_success` reads: the joined set, when the degenerate rows are all in it
        self.plain_read = self.first_read if table.degenerate.parts == 1 else None
        causes = table.ascii_causes.part_rows(0) if table.ascii_causes.parts else ()
        failing = RowSet((*causes, *table.harmless.rows, *table.suggestions.rows), by_file=False)
        single = failing.parts == 1 and table.harmless.parts == 1 and table.suggestions.parts == 1
        self.failure_read = failing if single else None
        self.failure_bounds = (len(causes), len(causes) + len(table.harmless))
        self._searches: dict[str, bool] = {}
        self._documents: dict[str, bool] = {}

    def search_tool(self, name: str) -> bool:
        """Whether the tool ``name`` (lower case) is a search (``search_tool_pattern``)."""
        found = self._searches.get(name)
        if found is None:
            found = self.table.search_tool.search(name) is not None
            _remember(self._searches, name, found)
        return found

    def document_tool(self, name: str) -> bool:
        """Whether the program ``name``, run with no command line, prints documents (a
        ``document_commands`` row with no subcommands covers it)."""
        found = self._documents.get(name)
        if found is None:
            found = any(d.covers(name, None) and not d.subcommands for d in self.table.document_commands)
            _remember(self._documents, name, found)
        return found


def _remember(answers: dict[str, bool], name: str, answer: bool) -> None:
    """Keep ``answer`` for the tool ``name`` (at most :data:`_NAMES_KEPT` names: a model may
    invent any number of tool names)."""
    if len(answers) >= _NAMES_KEPT:
        answers.clear()
    answers[name] = answer


#: Tool names whose answers a :class:`_Derived` keeps, at most.
_NAMES_KEPT = 1024


#: The derived parts of the tables in use, by the table's id (a few tables: a process's, a test's).
_DERIVED: dict[int, _Derived] = {}
#: Tables whose derived parts are kept, at most.
_DERIVED_KEPT = 8


def _derived(table: SignalTable) -> _Derived:
    """:class:`_Derived` of ``table``, made on its first use."""
    found = _DERIVED.get(id(table))
    if found is None or found.table is not table:
        if len(_DERIVED) >= _DERIVED_KEPT:
            _DERIVED.clear()
        found = _DERIVED[id(table)] = _Derived(table)
    return found


class _Reader:
    """One result's window, read lazily: each signal set at most once."""

    __slots__ = ("_cache", "_to_text", "causes", "encoded", "hand_offs", "inner", "lowered", "plain", "raw",
                 "refused_suggestion", "searchable", "table", "text", "weak_rows")

    def __init__(self, table: SignalTable, window: str) -> None:
        self.table = table
        text = window if window.isascii() else valid_utf8(window)  # ASCII holds no lone surrogate
        self.raw = text
        # escape sequences, NULs and zero-width or tag characters between words would hide wording from every row
        self.text = (clean_terminal_text(text) if "\x1b" in text or "\x00" in text or "\x9b" in text
                     or has_invisible(text) else text)
        self.lowered = self.text.lower()  # patterns are lower case: faster than case-folding each
        # Lower-casing can change a string's length ("İ", U+0130, is "i̇", two characters:
        # Unicode SpecialCasing.txt): offsets into lowered are then mapped back to the text, so
        # what is shown is always the tool's own text, in its case (a lower-cased AWS key or
        # JWT would no longer look like one to the redaction of what is stored).
        self._to_text = None if len(self.lowered) == len(self.text) else _lowered_offsets(self.text, self.lowered)
        self.encoded = self.lowered.encode("utf-8")  # re2 matches UTF-8: encoded once, matched by every set
        # an ASCII-only text is matched with the alternatives it can match (most output is)
        self.plain = plain = self.lowered.isascii()
        # what a row's own pattern is searched in: an ASCII text's UTF-8 bytes (their offsets are
        # its character offsets, and re2 would encode the text again for every search), else the text
        self.searchable: str | bytes = self.encoded if plain else self.lowered
        self.causes = table.ascii_causes if plain else table.causes
        self.weak_rows = table.ascii_weak if plain else table.weak
        self.hand_offs = table.ascii_hand_offs if plain else table.hand_offs
        self._cache: dict[object, Any] = {}
        self.refused_suggestion: str | None = None  # a suggested command the screen refused, and why
        self.inner = False  # the text inside a wrapper (its wrappers are not opened again)

    def _once(self, key: object, compute: Any) -> Any:
        cache = self._cache
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def computed(self, key: str) -> bool:
        return key in self._cache

    def first_read(self, derived: _Derived) -> None:
        """Match the three sets every success reads (markers, sign-in hand-offs, degenerate
        and adversarial rows) as one (:attr:`_Derived.first_read`), and keep what each of
        them matched, as if each had been matched alone: one pass over the text instead of
        three. Nothing when the joined set is not one part (a user's large rows), or the text
        is not ASCII (a hand-off is matched there with its every alternative, in its own set)."""
        joined = derived.first_read
        if joined is None or not self.plain:
            return
        found = joined.matching_part(0, self.encoded)
        cache = self._cache
        if not found:  # the usual success: none of the three matches
            cache["marker rows"], cache["hand-off worded"], cache[("indices", "degenerate", 0)] = (), False, ()
            return
        markers, hand_offs = derived.bounds
        cache["marker rows"] = tuple(i for i in found if i < markers)
        cache["hand-off worded"] = any(markers <= i < hand_offs for i in found)
        cache[("indices", "degenerate", 0)] = tuple(i - hand_offs for i in found if i >= hand_offs)

    def failure_read(self, derived: _Derived) -> None:
        """Match the three sets almost every failure reads (the first part of the cause rows,
        the harmless rows, the suggestion rows) as one (:attr:`_Derived.failure_read`), and
        keep what each of them matched, as if each had been matched alone. Nothing when the
        joined set is not one part, or the text is not ASCII (the cause rows are matched with
        every alternative there)."""
        joined = derived.failure_read
        if joined is None or not self.plain:
            return
        found = joined.matching_part(0, self.encoded)
        cache = self._cache
        if not found:
            cache[("indices", "causes", 0)], cache["harmless rows"], cache["suggestion rows"] = (), (), ()
            return
        harmless, suggestions = derived.failure_bounds
        causes: list[int] = []
        quiet: list[int] = []
        suggested: list[int] = []
        for index in found:  # in row order: the three sets' rows one after the other
            if index < harmless:
                causes.append(index)
            elif index < suggestions:
                quiet.append(index - harmless)
            else:
                suggested.append(index - suggestions)
        cache[("indices", "causes", 0)], cache["harmless rows"], cache["suggestion rows"] = (
            tuple(causes), tuple(quiet), tuple(suggested))

    def suggestion_rows(self) -> tuple[int, ...]:
        """The suggestion rows that occur in the text (matched once per text)."""
        found: tuple[int, ...] | None = self._cache.get("suggestion rows")
        if found is None:
            found = self._cache["suggestion rows"] = self.table.suggestions.matching(self.encoded)
        return found

    def excerpt(self, match: RowMatch) -> str:
        return self.line_around(match.start, match.end)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of :attr:`text` that the span ``start:end`` of :attr:`lowered` was lowered from."""
        positions = self._to_text
        if positions is None:
            return start, end
        first = positions[min(start, len(positions) - 1)]
        last = positions[min(end - 1, len(positions) - 1)] + 1 if end > start else first
        return first, max(first, last)

    def original(self, start: int, end: int) -> str:
        """The text that ``lowered[start:end]`` was lowered from, in its own case."""
        first, last = self.span(start, end)
        return self.text[first:last]

    def line_around(self, start: int, end: int) -> str:
        """:func:`_line_around` the match at ``start:end`` of :attr:`lowered`, from :attr:`text`
        (once per span: a cause's line is read for its wording and shown as its evidence)."""
        key = ("line", start, end)
        line: str | None = self._cache.get(key)
        if line is None:
            first, last = self.span(start, end)
            line = self._cache[key] = _line_around(self.text, first, last)
        return line

    def _first(self, name: str, rows: RowSet, accept: Any) -> RowMatch | None:
        # part by part, in row order: the first accepted row of a part comes before any of the
        # next, whose set is then never compiled nor matched
        cache = self._cache
        for part in range(rows.parts):
            indices: tuple[int, ...] | None = cache.get(("indices", name, part))
            if indices is None:
                indices = cache[("indices", name, part)] = rows.matching_part(part, self.encoded)
            for index in indices:
                if accept(rows.rows[index]):
                    # each row located once per text (the first cause and the first failure cause are often one row)
                    key = ("located", name, index)
                    located: RowMatch | None = cache.get(key, _UNREAD)
                    if located is _UNREAD:
                        located = cache[key] = rows.locate(index, self.searchable)
                    return located
        return None

    def part_indices(self, name: str, rows: RowSet, part: int) -> tuple[int, ...]:
        """The rows of part ``part`` of ``rows`` (the set called ``name``) that occur in the
        text (:meth:`RowSet.matching_part`), matched once per text."""
        key = ("indices", name, part)
        indices: tuple[int, ...] | None = self._cache.get(key)
        if indices is None:
            indices = self._cache[key] = rows.matching_part(part, self.encoded)
        return indices

    def read_part(self, name: str, part: int) -> tuple[int, ...] | None:
        """:meth:`part_indices` of the set called ``name`` if that part was matched already, else ``None``."""
        found: tuple[int, ...] | None = self._cache.get(("indices", name, part))
        return found

    def cause(self, *, failed: bool) -> RowMatch | None:
        """The first cause row (a failure is never read for an injected instruction)."""
        key = "causeTrue" if failed else "causeFalse"
        found: RowMatch | None = self._cache.get(key, _UNREAD)
        if found is _UNREAD:
            found = self._cache[key] = self._first("causes", self.causes, _not_adversarial if failed else _any_row)
        return found

    def failure_cause(self) -> RowMatch | None:
        """The first cause row that names a failure (not a degenerate or adversarial one)."""
        return self._once("failure_cause", lambda: self._first(  # type: ignore[no-any-return]
            "causes", self.causes, lambda row: not row.success_too))

    def success_signal(self) -> RowMatch | None:
        """The first adversarial row used, not only mentioned (:meth:`used_injection`), else the
        first degenerate one (what a success is read for)."""
        found = self._cache.get("success", _UNREAD)
        if found is _UNREAD:
            found = self._cache["success"] = self.used_injection() or self._first(
                "degenerate", self.table.degenerate, _not_adversarial)
        return found  # type: ignore[no-any-return]

    def used_injection(self) -> RowMatch | None:
        """:meth:`injection`, where an adversarial row's every occurrence in the text is no
        mention (:func:`unstuck.recognise.mentions.is_mention`: quoted or cited by a text about
        injections); ``None`` when every one is."""
        rows = self.table.degenerate
        mentioned = False
        for part in range(rows.parts):
            for index in self.part_indices("degenerate", rows, part):
                row = rows.rows[index]
                if not _adversarial(row):
                    continue
                about = about_injections(self.lowered) if not mentioned else True
                for found in itertools.islice(row.compiled.finditer(self.lowered), 16):
                    if not about or not is_mention(self.lowered, found.start(), found.end(), about=True):
                        return RowMatch(row, found.start(), found.end())
                    mentioned = True
        return None if mentioned else self.injection()

    def injection(self) -> RowMatch | None:
        """The first adversarial row, whatever else the text reads as: in the text, else in its
        :func:`unstuck.core.text.match_form` (fullwidth or styled letters, format characters), where
        the match stands for the whole line it is on (lines are kept one for one)."""
        found = self._cache.get("injection", _UNREAD)
        if found is _UNREAD:
            found = self._cache["injection"] = self._injection()
        return found  # type: ignore[no-any-return]

    def _injection(self) -> RowMatch | None:
        """:meth:`injection`, computed (once per text)."""
        found: RowMatch | None = self._first("degenerate", self.table.degenerate, _adversarial)
        if found is not None or self.raw.isascii():
            return found
        found = self._smuggled()
        if found is not None or self.lowered.isascii():
            return found
        # the n-th line of the folded text is the n-th of this one: only a carriage return
        # (which the cleaning turns into a line break) could add one, so such text is folded
        # line by line
        folded = match_form(self.text) if "\r" not in self.text else "\n".join(
            match_form(line).replace("\n", " ") for line in self.text.split("\n"))
        if folded == self.text:
            return None
        inner = _Reader(self.table, folded).injection()
        if inner is None:
            return None
        number = folded.count("\n", 0, inner.start)  # the line it matched on, in this text
        start = 0
        for _ in range(number):
            after = self.lowered.find("\n", start)
            if after == -1:
                break
            start = after + 1
        end = self.lowered.find("\n", start)
        return RowMatch(inner.row, start, len(self.lowered) if end == -1 else end)

    def concept(self) -> ConceptMatch | None:
        """The first concept of the lexicon a sentence of the text says (:mod:`unstuck.recognise.concepts`)."""
        from unstuck.recognise.concepts import load_lexicon  # loaded when a text is first read for one

        return self._once("concept", lambda: load_lexicon().find(self.lowered))  # type: ignore[no-any-return]

    def _smuggled(self) -> RowMatch | None:
        """An adversarial row in the text that tag characters spell
        (:func:`unstuck.core.text.smuggled_text`, read from the window as it came: cleaning removes
        them), standing for the line of this text where the first tag character was."""
        hidden = smuggled_text(self.raw)
        inner = _Reader(self.table, hidden).injection() if hidden is not None else None
        if inner is None:
            return None
        first = next(index for index, char in enumerate(self.raw) if 0xE0020 <= ord(char) <= 0xE007E)
        start = self.lowered.rfind("\n", 0, len(clean_terminal_text(self.raw[:first]).lower())) + 1
        end = self.lowered.find("\n", start)
        return RowMatch(inner.row, start, len(self.lowered) if end == -1 else end)

    def worded_kinds(self) -> frozenset[Kind]:
        """The failure kinds the text's wording names, as far as it was read: every cause row
        of the sets already matched (the cause stage reads them part by part, up to the first
        cause) and the first weak row (not the degenerate and adversarial rows)."""
        def compute() -> frozenset[Kind]:
            kinds: set[Kind] = set()
            for part in range(self.causes.parts):
                read = self.read_part("causes", part)
                if read is None:
                    continue
                rows = (self.causes.rows[i] for i in read)
                kinds.update(row.verdict.kind for row in rows if row.verdict is not None and not row.success_too)
            weak = self.weak()
            if weak is not None and weak.row.verdict is not None:
                kinds.add(weak.row.verdict.kind)
            return frozenset(kinds)
        return self._once("worded", compute)  # type: ignore[no-any-return]

    def weak(self) -> RowMatch | None:
        return self._once("weak", lambda: self._first("weak", self.weak_rows, lambda row: True))  # type: ignore[no-any-return]

    def harmless(self) -> tuple[RowMatch, ...]:
        found: tuple[RowMatch, ...] | None = self._cache.get("harmless")
        if found is None:
            known: tuple[int, ...] | None = self._cache.get("harmless rows")
            found = self._cache["harmless"] = () if known == () else self.table.harmless.every(
                self.searchable, self.encoded, indices=known)
        return found

    def markers(self) -> tuple[RowMatch, ...]:
        """Failure markers, minus those on a line a harmless wording explains."""
        found: tuple[RowMatch, ...] | None = self._cache.get("markers")
        if found is None:
            found = self._cache["markers"] = self._markers()
        return found

    def _markers(self) -> tuple[RowMatch, ...]:
        known: tuple[int, ...] | None = self._cache.get("marker rows")
        if known == ():
            return ()
        found = self.table.markers.every(self.searchable, self.encoded, indices=known)
        if not found:
            return ()
        quiet = {self.line_of(m.start) for m in self.harmless()}
        quiet |= {self.line_of(m.start) for m in self.table.not_markers.every(self.searchable, self.encoded)}
        return tuple(m for m in found if self.line_of(m.start) not in quiet)

    def hand_off_worded(self) -> bool:
        """Some sign-in hand-off row (:attr:`SignalTable.hand_offs`) matches the text."""
        found: bool | None = self._cache.get("hand-off worded")
        if found is None:
            rows = self.hand_offs
            found = self._cache["hand-off worded"] = any(
                rows.matching_part(part, self.encoded) for part in range(rows.parts))
        return found

    def crashed(self) -> bool:
        markers = self.markers()
        return bool(markers) and any(m.row.strength is MarkerStrength.CRASH for m in markers)

    def step_failed(self) -> bool:
        """A runner stated the step's own non-zero status (a ``status`` marker)."""
        markers = self.markers()
        return bool(markers) and any(m.row.strength is MarkerStrength.STATUS for m in markers)

    def line_of(self, offset: int) -> int:
        """The offset where the line holding ``offset`` starts (a match that begins on the line
        break before its line belongs to the next line)."""
        if offset < len(self.lowered) and self.lowered[offset] == "\n":
            offset += 1
        return self.lowered.rfind("\n", 0, offset) + 1

    def envelopes(self) -> tuple[Envelope, ...]:
        def compute() -> tuple[Envelope, ...]:
            if not _says_any(self.lowered, _ENVELOPE_WORDS):
                return ()
            from unstuck.recognise.envelopes import find_envelopes  # loaded when a text may hold one

            return find_envelopes(self.text)
        return self._once("envelopes", compute)  # type: ignore[no-any-return]

    def codes(self) -> tuple[CodeVerdict, ...]:
        """Machine codes: envelope fields first (in envelope order), then tokens in the text."""
        def compute() -> tuple[CodeVerdict, ...]:
            found: list[CodeVerdict] = []
            for envelope in self.envelopes():
                found.extend(_field_codes(self, envelope))
            found.extend(self.table.codes.in_text(self.text))
            return tuple(dict.fromkeys(found))
        return self._once("codes", compute)  # type: ignore[no-any-return]

    def stated_status(self) -> int | None:
        """An HTTP status the body states: an envelope's, else one worded with context."""
        def compute() -> int | None:
            for envelope in self.envelopes():
                if envelope.status is not None and envelope.failed:
                    return envelope.status
            return self.table.codes.status_in_text(self.text)
        return self._once("status", compute)  # type: ignore[no-any-return]

    def evidence(self) -> list[Evidence]:
        """What was read (and only that: a cheap classification reads little)."""
        seen: list[Evidence] = []
        if self.computed("markers"):
            seen += [Evidence(f"marker: {m.row.name}", self.excerpt(m)) for m in self.markers()]
        if self.computed("envelopes"):
            seen += [Evidence(f"envelope: {e.shape.value}{' (failed)' if e.failed else ''}",
                              self.text[e.start:e.end][:_DETAIL_CHARS]) for e in self.envelopes()]
        if self.computed("codes"):
            seen += [Evidence(f"code: {c.table} {c.code}", c.kind.value) for c in self.codes()]
        if self.computed("harmless"):
            seen += [Evidence("harmless", self.excerpt(m)) for m in self.harmless()]
        concept = self._cache.get("concept")
        if concept is not None:
            sentence = self.line_around(concept.start, concept.end)
            seen.append(Evidence(f"concept: {concept.concept.name}", f"words: {concept.describe()} | {sentence}"))
        return seen


#: Envelope shapes that are log lines: a line-strength marker, not a structural failure
#: (:class:`unstuck.recognise.envelopes.Shape` values: a ``StrEnum`` member is equal to its
#: value, and the envelope reader loads only when a text may hold an envelope).
_LOG_SHAPES = frozenset({"logfmt", "json_log"})


#: Words without which no structure states a failure (error objects, ``errors`` arrays,
#: ``ok: false``, a ``Status`` of ``Failure``, ``isError``, ``<Error>``): a success without any
#: is not parsed just to learn that it did not fail.
_FAILURE_WORDS = ("error", "fail", "fault", "exception", "false")


def _structural_failure(reader: _Reader) -> Envelope | None:
    if not reader.computed("envelopes") and not _says_any(reader.lowered, _FAILURE_WORDS):
        return None
    return next((e for e in reader.envelopes() if e.failed and e.shape not in _LOG_SHAPES), None)


def _log_failure(reader: _Reader) -> Envelope | None:
    return next((e for e in reader.envelopes() if e.failed and e.shape in _LOG_SHAPES), None)


def _program(tool: ToolDescription | str, subject: str) -> str:
    name = tool.name if not isinstance(tool, str) else tool
    return subject if subject and subject != name and "/" not in subject and " " not in subject else name


def _is_document(table: SignalTable, tool: ToolDescription | str, args: Mapping[str, Any], result: ToolResult) -> bool:
    """A successful result that is a document, not the program's own report: a
    ``document_output`` tool's, or one from a command line whose every program prints
    documents (``cat app.log``, ``git log``, ``kubectl logs``; the tool's name stands for the
    program when there is no command line) under a success status."""
    if not isinstance(tool, str) and tool.document_output:
        return True
    if result.exit_code != 0 or not table.document_commands:
        return False
    command = tool.command_line(args) if not isinstance(tool, str) else None
    if command is None:
        name = tool.name if not isinstance(tool, str) else tool
        return _derived(table).document_tool(name)
    from unstuck.commands.parse import is_setup, parse_command_line  # loaded when a command line is first read

    simple = [c for c in parse_command_line(command).commands if not c.in_substitution and not is_setup(c)]
    if not simple:
        return False
    for command_run in simple:
        first = next((a for a in command_run.args if not a.startswith("-")), None)
        if not any(d.covers(command_run.program or "", first) for d in table.document_commands):
            return False
    return True


def _failure_evidence(reader: _Reader, result: ToolResult, program: str) -> tuple[bool, Coded | None]:
    """Whether the result failed; and, when a program's exit status or a harmless wording
    explains a failure status, what it means instead (``None`` verdict: nothing failed)."""
    if not result.ok:
        program_code = _program_exit(reader, program, result)
        explained = program_code is not None and (
            program_code.verdict is None or program_code.verdict.kind is Kind.EMPTY)
        harmless = () if explained else reader.harmless()
        if (explained or harmless) and reader.failure_cause() is None and _structural_failure(reader) is None:
            if explained:
                return False, program_code
            if not reader.crashed():
                return False, Coded(None, harmless[0].row.source)
        return True, None
    if reader.crashed() or reader.step_failed() or _structural_failure(reader) is not None:
        return True, None
    # a status is stated: an exit code, an HTTP status, an exception, or the tool's own word
    if result.exit_code is not None or result.http_status is not None or result.error_type is not None \
            or result.status_stated:
        if _hand_off_waiting(reader):
            return True, None
        # a status that says success is overruled only where a marker and a cause share a line
        # ("ERROR: permission denied"), not by words scattered through a long output
        markers = reader.markers()
        if not markers:
            return False, None
        marked = {reader.line_of(m.start) for m in markers}
        cause = reader.failure_cause()
        return cause is not None and reader.line_of(cause.start) in marked, None
    if reader.markers() or _log_failure(reader) is not None:
        return True, None
    coded = any(not c.weak for e in reader.envelopes() for c in _field_codes(reader, e))
    return coded or reader.failure_cause() is not None or reader.concept() is not None, None


def _hand_off_waiting(reader: _Reader) -> bool:
    """A sign-in hand-off (a device code, a browser sign-in, a one-time code or password prompt:
    an interactive ``auth`` row) that no completed sign-in follows (``signed_in`` rows): the
    program printed it and stopped without anyone answering, whatever its exit status says."""
    if not reader.hand_off_worded():
        return False  # no hand-off row matches: the first cause, whatever it is, is none (SignalTable.hand_offs)
    cause = reader.failure_cause()
    verdict = cause.row.verdict if cause is not None else None
    if cause is None or verdict is None or verdict.kind is not Kind.AUTH or not verdict.interactive:
        return False
    return not any(m.start > cause.start for m in reader.table.signed_in.every(reader.searchable, reader.encoded))


def _program_exit(reader: _Reader, program: str, result: ToolResult) -> Coded | None:
    """What a program's manual says its exit status means (``grep`` 1: nothing matched)."""
    if not result.exit_code:
        return None
    return reader.table.program_exit_codes.get(program, {}).get(result.exit_code)


def _field_codes(reader: _Reader, envelope: Envelope) -> tuple[CodeVerdict, ...]:
    """The codes of one envelope's fields, by the priority of their tables (codes.yaml lists its
    tables from the most specific: a Google ErrorInfo ``reason`` before the canonical gRPC
    ``status`` of the same error, AIP-193), then in the order met."""
    found = (reader.table.codes.for_field(code.leaf, code.value, text=reader.text) for code in envelope.codes)
    verdicts = [verdict for verdict in found if verdict is not None]
    if len(verdicts) < 2:
        return tuple(verdicts)
    rank = {name: index for index, name in enumerate(reader.table.codes.names)}
    return tuple(sorted(verdicts, key=lambda verdict: rank.get(verdict.table, len(rank))))


#: A code field as a JSON body or a Python dict repr writes its name (the fields the code tables
#: read for a vendor's own code: OpenAI's ``code``, Google's ``reason``, Anthropic's ``type``).
_CODE_FIELDS = ('"code"', "'code'", '"reason"', "'reason'", '"type"', "'type'", '"error_code"', '"errorcode"',
                '"__type"')


def _documented_code(reader: _Reader, cause: RowMatch) -> CodeVerdict | None:
    """The specific code a failed envelope carries in its own fields, when the cause's wording is
    that envelope's message and the message names two causes ("A or B") of which the code is
    one: the vendor's documented code decides between the readings of its own message
    (OpenAI's ``model_not_found`` for "The model does not exist or you do not have access to
    it": not found, not a permission). A code outside the envelope, a weak one, an HTTP status,
    or one whose kind the envelope never words (``unsupported_value`` beside "Your organization
    must be verified") does not. A cause line with no "or", or a text with no structure that has
    a code field, is not parsed."""
    verdict = cause.row.verdict
    if verdict is None or "{" not in reader.lowered or " or " not in reader.line_around(cause.start, cause.end):
        return None  # no structure, or a message that names one cause: nothing for a code to decide
    if not reader.computed("envelopes") and not any(field in reader.lowered for field in _CODE_FIELDS):
        return None  # no structure with a code field: nothing to parse
    at, _ = reader.span(cause.start, cause.end)
    for envelope in reader.envelopes():
        if envelope.failed and envelope.start <= at < envelope.end:
            code = next((c for c in _field_codes(reader, envelope) if not c.weak and c.table != "http"), None)
            if code is None or code.kind is verdict.kind:
                return None
            # the envelope's own words, not a status line beside it ("400 Bad Request {...}")
            inner = _Reader(reader.table, reader.text[envelope.start:envelope.end])
            inner.cause(failed=True)  # its cause sets read, as the outer text's were
            return code if code.kind in inner.worded_kinds() else None
    return None


def _decide(
    reader: _Reader, result: ToolResult, program: str = ""
) -> tuple[Verdict, Decision, RowMatch | None, str]:
    """The failure's verdict, the rule that decided, the row match (for a subject) and the
    evidence line."""
    inner = _inside_wrapper(reader, result, program)
    if inner is not None:
        return inner
    cause = reader.cause(failed=True)
    if cause is not None and cause.row.verdict is not None:
        documented = _documented_code(reader, cause)
        if documented is not None:
            return (_code_verdict(documented), _code_decision(Stage.CODE, documented), None,
                    _code_line(reader, documented))
        return cause.row.verdict, Decision(Stage.CAUSE, cause.row.where, cause.row.source), cause, reader.excerpt(cause)
    codes = reader.codes()
    strong = next((c for c in codes if not c.weak), None)
    if strong is not None:
        return _code_verdict(strong), _code_decision(Stage.CODE, strong), None, _code_line(reader, strong)
    status = _status_verdict(reader, result, program)
    if status is not None:
        return status
    weak_status = _weak_status_verdict(reader, result)
    if weak_status is not None:
        # a status that names only its class (400 Bad Request, 500) yields to a cause said in
        # plain words ("Budget has been exceeded" under a 400): the body names the cause
        concept = reader.concept()
        return weak_status if concept is None else _concept_verdict(reader, concept)
    weak_row = reader.weak()
    weak_verdict = weak_row.row.verdict if weak_row is not None else None
    if weak_row is not None and weak_verdict is not None:
        row = weak_row.row
        return weak_verdict, Decision(Stage.WEAK, row.where, row.source), weak_row, reader.excerpt(weak_row)
    weak_code = next((c for c in codes if c.weak), None)
    if weak_code is not None:
        return _code_verdict(weak_code), _code_decision(Stage.WEAK, weak_code), None, _code_line(reader, weak_code)
    concept = reader.concept()
    if concept is not None:
        return _concept_verdict(reader, concept)
    text = reader.text.strip()
    last = text.splitlines()[-1] if text else ""
    return (Verdict(Kind.EXECUTION_ERROR), Decision(Stage.UNRECOGNISED, "no signal matched",
                                                    "DESIGN.md: a failure that matches nothing is execution_error"),
            None, last[:_DETAIL_CHARS])


#: Wrappers that carry a tool's own words inside them: what they hold is read before the
#: wrapper's generic rule ("isError": true is an execution_error only when nothing inside says more).
_WRAPPERS = frozenset({"mcp_result", "json_rpc", "tool_result"})  # Shape values, as _LOG_SHAPES
#: Words without which no text is such a wrapper.
_WRAPPER_WORDS = ("iserror", "is_error", "jsonrpc")


def _inside_wrapper(
    reader: _Reader, result: ToolResult, program: str
) -> tuple[Verdict, Decision, RowMatch | None, str] | None:
    """The decision the text inside a failed MCP result, JSON-RPC error or tool-result block
    gives on its own (its messages, unescaped: MCP schema ``CallToolResult.content``, JSON-RPC
    2.0 ``error.message``), unless nothing inside decides (then the wrapper's own rule does).
    One level deep: the inner text's wrappers are not opened again."""
    if reader.inner or not _says_any(reader.lowered, _WRAPPER_WORDS):
        return None
    messages = [m for e in reader.envelopes() if e.failed and e.shape in _WRAPPERS for m in e.messages]
    if not messages:
        return None
    inner = _Reader(reader.table, "\n".join(messages))
    inner.inner = True
    verdict, decision, _, line = _decide(inner, ToolResult(result.tool, False, inner.text), program)
    if decision.stage is Stage.UNRECOGNISED:
        return None
    return verdict, Decision(decision.stage, f"inside the wrapper: {decision.rule}", decision.source), None, line


def _concept_verdict(reader: _Reader, concept: ConceptMatch) -> tuple[Verdict, Decision, RowMatch | None, str]:
    said = concept.concept
    return (Verdict(said.kind, said.interactive, said.retryable),
            Decision(Stage.CONCEPT, f"concepts.yaml concept '{said.name}' (words: {concept.describe()})",
                     said.source), None, reader.line_around(concept.start, concept.end))


def _code_verdict(code: CodeVerdict) -> Verdict:
    return Verdict(code.kind, code.interactive, code.retryable)


def _code_decision(stage: Stage, code: CodeVerdict) -> Decision:
    return Decision(stage, f"code table {code.table}: {code.code}", code.source)


def _code_line(reader: _Reader, code: CodeVerdict) -> str:
    at = reader.text.find(code.code)
    return _line_around(reader.text, at, at + len(code.code)) if at != -1 else f"{code.table} code {code.code}"


def _status_verdict(
    reader: _Reader, result: ToolResult, program: str = ""
) -> tuple[Verdict, Decision, None, str] | None:
    table = reader.table
    program_code = _program_exit(reader, program, result)
    if program_code is not None and program_code.verdict is not None:
        return (program_code.verdict, Decision(Stage.STATUS, f"{program} exit status {result.exit_code}",
                                               program_code.source), None, _first_line(reader) or
                f"{program} exited {result.exit_code}")
    status = _http_status(reader, result)
    coded = table.codes.http_status(status) if status is not None else None
    if status is not None and coded is not None and not coded.weak:
        return (_code_verdict(coded), Decision(Stage.STATUS, f"HTTP {status}", coded.source), None,
                _status_line(reader, status))
    if result.error_type and result.error_type in table.exception:
        exc = table.exception[result.error_type]
        if exc.verdict is not None:
            line = reader.text.strip().splitlines()[-1] if reader.text.strip() else result.error_type
            return exc.verdict, Decision(Stage.STATUS, f"exception {result.error_type}", exc.source), None, line
    if result.exit_code is not None and result.exit_code in table.exit_code:
        coded_exit = table.exit_code[result.exit_code]
        if coded_exit.verdict is not None:
            return (coded_exit.verdict, Decision(Stage.STATUS, f"exit code {result.exit_code}", coded_exit.source),
                    None, f"exit code {result.exit_code}")
    return None


def _http_status(reader: _Reader, result: ToolResult) -> int | None:
    """The failing HTTP status: the result's, else (when it has none) one the body states."""
    if result.http_status is not None:
        return result.http_status if result.http_status >= 400 else None
    return reader.stated_status()


def _weak_status_verdict(reader: _Reader, result: ToolResult) -> tuple[Verdict, Decision, None, str] | None:
    """A status that names only its class (400, 500: a weak row of the http table), which still
    beats generic wording and nothing."""
    status = _http_status(reader, result)
    coded = reader.table.codes.http_status(status) if status is not None else None
    if status is None or coded is None:
        return None
    return (_code_verdict(coded), Decision(Stage.STATUS, f"HTTP {status}", coded.source), None,
            _status_line(reader, status))


def _first_line(reader: _Reader) -> str:
    """The first line of the output that says something (not a bare status line)."""
    for line in reader.text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.lower().startswith("http "):
            return stripped[:_DETAIL_CHARS]
    return ""


def _status_line(reader: _Reader, status: int) -> str:
    said = _first_line(reader)
    return f"HTTP {status}: {said}"[:_DETAIL_CHARS] if said else f"HTTP {status}"


def _retry_after(table: SignalTable, result: ToolResult, lowered: str) -> float | None:
    for name in table.retry_after_headers if result.headers else ():
        wanted = name.lower()  # the first header of that name, in any case (ToolResult.header)
        value = next((v for k, v in result.headers if k.lower() == wanted), None)
        if value is not None:
            try:
                wait = float(value.strip())
            except ValueError:
                continue  # an HTTP-date Retry-After needs a clock: tools declare it (unstuck.recognise.declare)
            if math.isfinite(wait):  # "nan" and "inf" parse as floats; neither is a wait
                return max(wait, 0.0)
    found = table.retry_after_text.search(lowered)
    if found is None:
        return None
    wait = float(next(group for group in found.groups() if group is not None))
    return wait if math.isfinite(wait) else None


def _subject(tool: ToolDescription | str, args: Mapping[str, Any]) -> str:
    if not isinstance(tool, str):
        return tool.subject_of(args)
    return tool


#: Words a naming pattern may take for a subject that never are one: log levels and the
#: prefixes programs put before their messages ("ERROR: permission denied").
_NOT_SUBJECTS = frozenset({
    "error", "fatal", "warning", "warn", "info", "debug", "critical", "crit", "panic", "e", "w", "err", "failed",
    "failure", "emerg", "alert", "notice", "trace",
})
#: The word or path just before ": <message>" on a line (coreutils' "cat: PATH: message").
_BEFORE_MESSAGE = re.compile(r"([^\s:'‘’\"]+)['’\"]?\s*[:：]\s*$")
#: Kinds whose subject is what a message was about: a path refused or missing.
_PATH_KINDS = frozenset({Kind.PERMISSION, Kind.NOT_FOUND})


def _first_group(found: Any) -> tuple[int, int] | None:
    """The span of the first capture group of a re2 match that took some text (up to its
    ``lastindex``), or ``None``: read from the spans (an unmatched group's is ``(-1, -1)``),
    not by slicing each group's text out."""
    for index in range(1, (found.lastindex or 0) + 1):
        start, end = found.span(index)
        if end > start:
            return start, end
    return None


def _named_subject(match: RowMatch | None, reader: _Reader, default: str) -> str:
    """The subject a row's wording names (a missing program, a refused path), in its
    original case; for a row with no naming pattern (a program's message in another
    language), the path just before the message on its line."""
    if match is None or (match.row.subject is None and (
            match.row.verdict is None or match.row.verdict.kind not in _PATH_KINDS)):
        return default  # no naming pattern, and no path a message is about
    first = reader.line_of(match.start)
    last = reader.lowered.find("\n", match.end)
    last = len(reader.lowered) if last == -1 else last + 1  # the line break too: re2's $ is the text's end
    named: str | None = None
    if match.row.subject is not None:
        # the subject is named on the line the row matched (a short text: captures are cheap)
        found = match.row.subject.search(reader.searchable, first, last)
        span = None if found is None else _first_group(found)
        if span is not None:
            named = reader.original(*span).strip()
    elif match.row.verdict is not None and match.row.verdict.kind in _PATH_KINDS:
        start = match.start + 1 if reader.lowered[match.start:match.start + 1] == "\n" else match.start
        head = reader.original(first, start)
        before = _BEFORE_MESSAGE.search(head)
        candidate = before.group(1) if before is not None else None
        program_prefix = head.split(":", 1)[0].strip()
        if candidate and candidate != program_prefix and ("/" in candidate or "." in candidate):
            named = candidate
    if not named or named.lower() in _NOT_SUBJECTS:
        return default
    return named


#: Words that end a suggested command where prose begins ("gh auth login to authenticate").
_PROSE = frozenset({
    "to", "and", "for", "or", "then", "if", "first", "again", "before", "after", "which", "that", "so", "in",
    "from", "when", "once", "instead", "as", "on", "with", "by", "this", "it", "more",
})
#: Words that are not programs ("run the tests", "run out of memory", "this run can be found
#: in", "could not run to completion"): articles, pronouns, prepositions and auxiliaries.
_NOT_PROGRAMS = frozenset({
    "the", "a", "an", "it", "this", "that", "out", "into", "again", "away", "time", "command", "following",
    "your", "our", "its", "on", "in", "as", "with", "for", "from", "these", "those", "was", "is", "are", "be",
    "been", "can", "could", "will", "would", "should", "may", "might", "must", "has", "have", "had", "not",
    "no", "to", "all", "any", "some", "each", "which", "what", "when", "where", "who", "you", "we", "they",
    "there", "here", "at", "by", "of", "completion", "successfully", "correctly", "properly", "now",
})
#: A word just before the verb that makes it no imperative to the user: a determiner or a
#: possessive ("this run", "the last run"), or a negation ("could not run", "failed to run").
_NOT_IMPERATIVE = frozenset({
    "this", "the", "a", "an", "that", "each", "every", "your", "my", "our", "their", "its", "of", "last",
    "previous", "next", "dry", "test", "same", "whole", "not", "never", "cannot", "can't", "couldn't",
    "won't", "didn't", "don't", "doesn't", "wasn't", "isn't", "failed", "unable", "trying", "attempting",
    "while", "when", "during", "after", "before",
})
#: Words before "to" that keep the verb an instruction ("you need to run", "please remember to run").
_TO_IMPERATIVE = frozenset({"need", "needs", "have", "has", "want", "please", "must", "remember", "able", "how"})
#: A program word as typed (lower case unless quoted: a capitalised word in prose is a name,
#: "Re-run Maven using the -X switch"); never a path, a URL or a log file.
_PROGRAM_WORD = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
_QUOTE_MARKS = "`'\"‘’“”"
#: A Windows drive's path (``C:\\``): no program word.
_DRIVE = re.compile(r"^[a-z]:\\", re.I)


def _imperative(before: str) -> bool:
    """Whether the text on the line before a suggestion's verb leaves it an imperative to the
    user: nothing (after a log prefix that ends in punctuation), a sentence's end, or words that
    are no determiner and no negation of the verb."""
    stripped = before.rstrip()
    if not stripped or stripped[-1] in ".:!;?>$*•→-#|)]":
        return True
    # the last two words are all that is read (the rest of the line stays whole in the first piece)
    words = [w.strip(",\"'`()[]").lower() for w in stripped.rsplit(None, 2)[-2:]]
    last = words[-1] if words else ""
    if last in _NOT_IMPERATIVE or (len(words) > 1 and words[-2] in {"not", "never", "cannot", "unable", "failed"}):
        return False
    if last == "to":
        return len(words) > 1 and words[-2] in _TO_IMPERATIVE
    return True


#: The bare verbs that also head a log's section or step: GitHub Actions prints each step's
#: header as "Run <the step's command>" (actions/runner src/Runner.Worker/Handlers/ScriptHandler.cs,
#: the step's display name), Playwright heads the calls it made "Call log:"
#: (playwright-core src/server/callLog.ts, buildCallLog).
_HEADING_VERBS = frozenset({"run", "call"})


#: A log line's prefix before its text: bracketed markers (``##[group]``), timestamps, numbers.
_LOG_PREFIX = re.compile(r"^(?:\[[^\]\n]*\]|[#>|*\s]|[\d:.TZ+-])*$")


def _heading(before: str, verb: str, words: list[str]) -> bool:
    """Whether a bare ``Run X`` / ``Call X`` heads its line rather than tells the user: the verb
    first on its line (after a log prefix), no colon after it (``Run: X`` and ``please run X``
    tell), an unquoted argument that fills the rest of the line with no purpose clause ("to
    authenticate") and ends no sentence: a step's title ("Run npm test") or a section's label
    ("Call log:")."""
    if verb.strip(" \t$").lower() not in _HEADING_VERBS or not _LOG_PREFIX.match(before):
        return False
    return not words[-1].endswith((".", "!")) or words[-1].endswith(":")


def _command_shaped(words: list[str], quoted: bool) -> bool:
    """Whether ``words`` read as a command line: after any leading assignments (``VAR=1``), a
    program word (lower case unless quoted), not an option alone, a path, a URL or a log file."""
    rest = list(words)
    while rest and "=" in rest[0] and not rest[0].startswith("-"):
        rest.pop(0)  # an environment assignment before the program (RUST_BACKTRACE=1 cargo test)
    if not rest:
        return False
    first = rest[0]
    if first.startswith(("-", "/", "./", "../", "~", "\\")) or "://" in first or _DRIVE.match(first):
        return False
    if first.lower().endswith((".log", ".txt", ".out", ".json")) or first.lower() in _NOT_PROGRAMS:
        return False
    return bool(_PROGRAM_WORD.match(first if not quoted else first.lower()))


@functools.lru_cache(maxsize=4096)
def _screen(command: str) -> Screened:
    """:func:`unstuck.commands.screen.screen_command`, remembered: tools repeat their suggestions."""
    from unstuck.commands.screen import screen_command  # loaded when a tool first suggests a command

    return screen_command(command)


def _suggestion(reader: _Reader) -> str | None:
    """The command the tool's own output says fixes it, cut where prose begins and screened;
    ``None`` when there is none or it fails the screen.

    Only an imperative to the user is read ("please run: gh auth login", "Run `npm login`"),
    never a noun or a negated verb ("A complete log of this run can be found in: PATH", "could
    not run to completion"), and only a command-shaped argument (:func:`_command_shaped`):
    never a path, a URL to a log, or a sentence fragment."""
    for index in reader.suggestion_rows():
        for found in itertools.islice(reader.table.suggestions.rows[index].compiled.finditer(reader.searchable), 8):
            start, end = found.span(1)
            if start == -1:  # the group took no part in the match
                continue
            at = found.start()
            before = reader.original(reader.line_of(at), at)  # the line before the verb
            if not _imperative(before):
                continue
            quoted = start > 0 and reader.original(start - 1, start) in _QUOTE_MARKS
            words = reader.original(start, end).split()
            kept: list[str] = []
            for position, word in enumerate(words):
                if position > 0 and word.lower() in _PROSE:
                    break
                kept.append(word)
            command = " ".join(kept).rstrip(".,:;!")
            if not kept or not _command_shaped(command.split(), quoted):
                continue
            if not quoted and len(kept) == len(words) and _heading(before, reader.lowered[at:start], words):
                continue
            return _screened_suggestion(reader, command, kept)
    return None


def _screened_suggestion(reader: _Reader, command: str, kept: list[str]) -> str | None:
    """``command`` as the screen leaves it, or ``None`` (the reason kept on the reader)."""
    screened = _screen(command)
    if screened.command is None:
        # the command itself is not repeated: it may carry the very secret it was refused for
        reader.refused_suggestion = f"a `{kept[0][:40]}` command: {screened.refused}"
        return None
    return screened.command[:_SUGGESTION_CHARS]


def _situation(
    reader: _Reader, verdict: Verdict, subject: str, result: ToolResult, detail: str, suggestion: str | None = None
) -> Situation:
    retry_after = _retry_after(reader.table, result, reader.lowered) if verdict.retryable else None
    return Situation(
        kind=verdict.kind,
        subject=subject,
        interactive=verdict.interactive,
        retryable=verdict.retryable,
        retry_after_s=retry_after,
        source=Source.INFERRED,
        detail=detail[:_DETAIL_CHARS],
        suggestion=suggestion,
    )


def _success(
    reader: _Reader, tool: ToolDescription | str, subject: str, result: ToolResult, program_code: Coded | None = None,
) -> Classification:
    signal = reader.success_signal()
    signal_verdict = signal.row.verdict if signal is not None else None
    if signal is not None and signal_verdict is not None:
        row = signal.row
        situation = _situation(reader, signal_verdict, subject, result, reader.excerpt(signal))
        return Classification(situation, False, Decision(Stage.SUCCESS, row.where, row.source))
    if program_code is not None:
        if program_code.verdict is None:
            return Classification(None, False, Decision(Stage.SUCCESS, "harmless", program_code.source))
        situation = _situation(reader, program_code.verdict, subject, result, "no results")
        return Classification(situation, False, Decision(Stage.SUCCESS, "program exit status", program_code.source))
    tool_name = (tool.name if not isinstance(tool, str) else tool).lower()
    short = len(reader.lowered) <= _EMPTY_CHARS  # an empty result is short by definition
    if short and _derived(reader.table).search_tool(tool_name) and reader.table.empty.fullmatch(reader.lowered):
        situation = _situation(reader, Verdict(Kind.EMPTY), subject, result, "no results")
        return Classification(situation, False, Decision(Stage.SUCCESS, "search_tool_pattern + empty_pattern",
                                                         "signals.yaml: an empty success from a search tool"))
    return _NOTHING_FOUND


#: An ordinary success, as :func:`_success` reads it (one value, shared).
_NOTHING_FOUND = Classification(None, False, None)


def explain_result(
    tool: ToolDescription | str,
    args: Mapping[str, Any],
    result: ToolResult,
    *,
    table: SignalTable | None = None,
    thorough: bool = True,
) -> Classification:
    """Classify ``result`` and say why: the deciding rule (stage, row or code, source) and the
    evidence seen. Never raises on any content.

    Args:
        tool: the tool's spec (its ``subject_of(args)`` names the subject; a
            ``document_output`` tool's success is data, never read for failure) or just its
            name (then the name is the subject).
        args: the call's arguments.
        result: the normalised result; its declared situation, if any, is ignored here (the
            loop prefers it: declared beats inferred).
        table: a signal table; :func:`unstuck.recognise.signals.load_signal_table` by default.
        thorough: read every kind of evidence for the explanation (markers, envelopes, codes);
            ``False`` reads only what the verdict needs (the same verdict, less evidence).
    """
    table = table or load_signal_table()
    subject = _subject(tool, args)
    if not thorough and result.ok and _plain_success(table, tool, result):
        return _NOTHING_FOUND
    reader = _Reader(table, _window(result.content))
    if not result.executed:
        situation = _situation(reader, Verdict(Kind.PERMISSION), subject, result, reader.text.strip())
        return Classification(situation, True, Decision(Stage.NOT_EXECUTED, "not executed",
                                                        "seed 000 section 3.2: a call a permission tier refused"))
    if result.ok:  # a success reads its markers, hand-offs and degenerate rows: one pass for the three
        reader.first_read(_derived(table))
    else:  # a failure its first cause rows, harmless wordings and the tool's suggestions: one pass
        reader.failure_read(_derived(table))
    found = _classify(reader, tool, args, subject, result)
    if not thorough:
        return found
    reader.markers()
    reader.envelopes()
    if found.failed:
        reader.codes()
    extra: list[Evidence] = []
    if found.situation is not None and found.situation.suggestion is not None:
        extra.append(Evidence("suggestion", found.situation.suggestion))
    if reader.refused_suggestion:
        extra.append(Evidence("suggestion refused", reader.refused_suggestion))
    return Classification(found.situation, found.failed, found.decided_by, (*reader.evidence(), *extra))


def _plain_success(table: SignalTable, tool: ToolDescription | str, result: ToolResult) -> bool:
    """Whether ``result`` is an ordinary success, found with one set match where
    :func:`_classify` would make the whole reading come to the same answer
    (:data:`_NOTHING_FOUND`); ``False`` whenever any part of that reading could say more
    (then it is read in full).

    It holds for a success whose status is stated (an exit code, an HTTP status, an
    exception, a tool's own ``status``: an unstated one is read for a cause worded), whose
    window is ASCII with no escape sequence or NUL (nothing to clean), holds none of the
    :data:`_FAILURE_WORDS` (no envelope can state a failure: :func:`_structural_failure`) and
    no row of the first read (:attr:`_Derived.first_read`: no marker, hence no crash, runner
    status or marked cause; no sign-in hand-off; no degenerate or adversarial row, and ASCII
    has no smuggled or styled one), and is not a short result of a search tool (which may be
    ``empty``). That is every test :func:`_failure_evidence` and :func:`_success` make of such
    a result, whether or not it is a document (:func:`_is_document`: both readings end in
    :func:`_success` with no program code)."""
    if not result.ok or not result.executed:
        return False
    if result.exit_code is None and result.http_status is None and result.error_type is None \
            and not result.status_stated:
        return False
    text = _window(result.content)
    if not text.isascii() or "\x1b" in text or "\x00" in text:
        return False
    lowered = text.lower()
    if _says_any(lowered, _FAILURE_WORDS):
        return False
    derived = _derived(table)
    joined = derived.plain_read
    if joined is None or joined.matching_part(0, lowered.encode("ascii")):
        return False
    if len(lowered) <= _EMPTY_CHARS:
        return not derived.search_tool((tool.name if not isinstance(tool, str) else tool).lower())
    return True


def _classify(
    reader: _Reader, tool: ToolDescription | str, args: Mapping[str, Any], subject: str, result: ToolResult
) -> Classification:
    if result.ok and _is_document(reader.table, tool, args, result):
        return _success(reader, tool, subject, result)
    if not result.ok and result.waiting_for_input:
        return _waited(reader, tool, args, subject, result.waiting_for_input, result)
    if not result.ok and result.exit_code in reader.table.decisive_exit_codes and _worded_otherwise(reader) is None:
        return _decisive(reader, subject, result)
    program = _program(tool, subject)
    failed, instead = _failure_evidence(reader, result, program)
    if not failed:
        return _success(reader, tool, subject, result, instead)
    verdict, decision, match, line = _decide(reader, result, program)
    named = _named_subject(match, reader, subject)
    option = _option_as_program(reader, verdict, match)
    if option is not None:
        verdict, named = Verdict(Kind.INVALID_ARGS), option
        decision = Decision(decision.stage, f"{decision.rule}, naming an option ('{option[:40]}') as the program",
                            _OPTION_SOURCE)
    situation = _situation(reader, verdict, named, result, line, _suggestion(reader))
    return Classification(situation, True, decision)


#: Why a "command not found" that names an option is a command line split apart, not a
#: missing program.
_OPTION_SOURCE = (
    "POSIX.1-2017 XBD 12.2 Utility Syntax Guidelines 4-5 (an option is an argument that begins with "
    "'-'; a program name never does); Microsoft Learn, cmd (a batch file's lines end in CR LF; cmd "
    "splits an unquoted command line at spaces): a shell that reports an option as the command it "
    "could not find read an argument as a command name (a line broken by LF endings, an unquoted "
    "space, a stray line break), so nothing is missing: the command line is wrong")


def _option_as_program(reader: _Reader, verdict: Verdict, match: RowMatch | None) -> str | None:
    """The first name a not-found-program row names that is option-shaped (``--flag``): then
    the shell read an argument as a program (:data:`_OPTION_SOURCE`); else ``None``."""
    if verdict.kind is not Kind.NOT_INSTALLED or match is None or match.row.subject is None or "-" not in reader.text:
        return None  # (an option-shaped name holds a "-")
    for count, found in enumerate(match.row.subject.finditer(reader.searchable)):
        if count >= 32:
            break
        span = _first_group(found)
        if span is None:
            continue
        name = reader.original(*span).strip().strip("'\"‘’“”«»")
        if name.startswith("-") and len(name) > 1 and (name[1].isalnum() or name[1] == "-"):
            return name
    return None


def _waited(reader: _Reader, tool: ToolDescription | str, args: Mapping[str, Any], subject: str, program: str,
            result: ToolResult) -> Classification:
    """A call whose deadline passed while its program waited for input (a pager waiting for a
    key, a prompt for an answer; :attr:`ToolResult.waiting_for_input`): not a timeout that
    waiting fixes but the pager row's verdict (interactive ``invalid_args``, not retryable),
    its detail naming the program and the way to run the command without waiting
    (:func:`unstuck.commands.waiting.non_interactive_fix`)."""
    from unstuck.commands.waiting import non_interactive_fix

    command = tool.command_line(args) if not isinstance(tool, str) else None
    fix = non_interactive_fix(program, command, catalogue=reader.table.calls)
    situation = _situation(reader, Verdict(Kind.INVALID_ARGS, interactive=True), subject, result, fix.describe())
    return Classification(situation, True, Decision(Stage.CAUSE, "waited for input at the deadline", fix.source))


def _worded_otherwise(reader: _Reader) -> RowMatch | None:
    """A specific cause worded beside a 126/127 (bash's "unbound variable" exits 127, a
    container runtime's "executable file not found" exits 126): it decides, as a bare "gh: not
    found" (weak wording) does not."""
    cause = reader.failure_cause()
    if cause is None or cause.row.verdict is None or cause.row.weak:
        return None
    return cause


def _decisive(reader: _Reader, subject: str, result: ToolResult) -> Classification:
    """126 or 127 with no specific cause worded: the exit status decides; the subject comes
    from that kind's naming pattern."""
    code = result.exit_code if result.exit_code is not None else 0
    coded = reader.table.exit_code[code]
    verdict = coded.verdict or Verdict(Kind.EXECUTION_ERROR)
    # the subject comes from that kind's naming pattern, even where its wording row does not
    # match (dash says only "gh: not found")
    namers = [row for row in reader.table.causes.rows
              if row.verdict is not None and row.verdict.kind is verdict.kind and row.subject is not None]
    named, line = subject, ""
    for row in namers:
        found = row.subject.search(reader.searchable)
        if found is not None:
            named = _named_subject(RowMatch(row, found.start(), found.end()), reader, subject)
            line = reader.line_around(found.start(), found.end())
            break
    text = reader.text.strip()
    line = line or (text.splitlines()[0] if text else f"exit code {code}")
    situation = _situation(reader, verdict, named, result, line, _suggestion(reader))
    return Classification(situation, True, Decision(Stage.DECISIVE_EXIT, f"exit code {code}", coded.source))


def classify_result(
    tool: ToolDescription | str,
    args: Mapping[str, Any],
    result: ToolResult,
    *,
    table: SignalTable | None = None,
) -> Situation | None:
    """Infer what ``result`` means for the loop, from generic signals only.

    Returns:
        An inferred :class:`Situation` (never with ``unblock`` or ``probe``; perhaps with the
        tool's own screened ``suggestion``), or ``None`` when the result is an ordinary
        success. Never raises on any content. See :func:`explain_result` for the reasons.
    """
    return explain_result(tool, args, result, table=table, thorough=False).situation


def explain_output(
    tool: ToolDescription | str,
    args: Mapping[str, Any],
    output: str,
    *,
    exit_code: int | None = None,
    http_status: int | None = None,
    table: SignalTable | None = None,
) -> Classification:
    """:func:`explain_result` for printed output when the caller may not know whether the
    call failed: an exit code or an HTTP status states it (exit 0 and a status below 400 are
    a success); without either, the text decides. Never raises on any text."""
    return explain_result(tool, args, _printed(tool, output, exit_code, http_status), table=table)


def classify_output(
    tool: ToolDescription | str,
    args: Mapping[str, Any],
    output: str,
    *,
    exit_code: int | None = None,
    http_status: int | None = None,
    table: SignalTable | None = None,
) -> Situation | None:
    """Classify a tool's printed output (see :func:`explain_output`)."""
    return explain_result(tool, args, _printed(tool, output, exit_code, http_status), table=table,
                          thorough=False).situation


def _printed(tool: ToolDescription | str, output: str, exit_code: int | None, http_status: int | None) -> ToolResult:
    """The result a printed output stands for: failed when a status says so."""
    name = tool.name if not isinstance(tool, str) else tool
    ok = exit_code in (None, 0) and (http_status is None or http_status < 400)
    return ToolResult(name, ok, output, exit_code=exit_code, http_status=http_status)


def find_injection(text: str, *, table: SignalTable | None = None) -> str | None:
    """The line of ``text`` that reads as an instruction aimed at the agent (an adversarial
    row: "ignore previous instructions", a download piped into a shell), whether or not the
    text also reads as a failure; ``None`` when there is none. What is screened before it is
    stored or shown (a lesson's unblock and detail) goes through this, never through
    :func:`classify_output`, whose failure reading takes precedence over the adversarial one."""
    reader = _Reader(table or load_signal_table(), _window(text))
    found = reader.injection()
    return reader.excerpt(found) if found is not None else None
