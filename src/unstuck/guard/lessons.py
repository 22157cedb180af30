"""The guard's lesson step: what to show at turn start, what to check before a call, and what to
store after asking (seed 000, section 3.4; the rules are in :mod:`unstuck.store.lessons`).
Internal: not a supported import path (docs/reference/index.md lists those that are).

:class:`LessonKeeper` holds a store and a fingerprint function for one turn; :class:`LessonStep`
is the step the guard runs with it. The guard:

* at turn start, adds :meth:`LessonKeeper.known_blockers` (at most 3 active lessons declared
  by the tools in play whose environment still matches) to the system prompt;
* before dispatching a call, asks :meth:`LessonKeeper.lesson_for` about the call's subject
  (once per subject per turn). With a lesson, the loop runs its probe first: still blocked →
  it escalates at once, citing the lesson, and the call never runs; clear → the lesson is
  invalidated and the call runs. A lesson without a probe only adds a one-line note to the
  call's result. Lessons never add a tool, a permission or a command, and never skip a call
  without saying so;
* after it escalated or the user answered, calls :meth:`LessonKeeper.remember`, which stores
  a declared blocker unless the result that declared it, its unblock or its detail holds an
  injected instruction or a command that runs what it downloads (:func:`unsafe_to_remember`,
  whatever else the text reads as); tool text enters a lesson only as quoted evidence
  (:func:`lesson_content`), and an unblock only when the screen accepts it as a command or
  one plain sentence (:func:`unstuck.recognise.instructions.screen_instruction`): any other unblock is
  kept in the lesson's content as the tool's quoted words, and the lesson has no unblock, so
  it never reaches a later prompt or question as an instruction.

The guard (:class:`unstuck.guard.guard.Guard`) drives these steps through :class:`LessonStep`.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TypeVar

from unstuck.core.redact import redact
from unstuck.core.situations import Situation
from unstuck.core.text import for_terminal, quote_evidence
from unstuck.core.tools import ToolCall
from unstuck.decide import policy, prompts
from unstuck.decide.escalation import Escalation, EscalationReason, unsafe_fix
from unstuck.decide.policy import CloseReason
from unstuck.decide.prompts import GUIDANCE_PREFIX
from unstuck.guard.probes import Probes
from unstuck.guard.state import GuardState
from unstuck.recognise.instructions import find_instruction, screen_instruction
from unstuck.store.events import EventName
from unstuck.store.journal import JournalDecision
from unstuck.store.lessons import Lesson, LessonStore, LessonStoreError, storable
from unstuck.toolkit.specs import Toolset

__all__ = [
    "CANDIDATES_AT_START", "SHOWN_AT_START", "UNBLOCK_AS_EVIDENCE", "UNKNOWN_FINGERPRINT", "LessonKeeper", "LessonStep",
    "known_blocker_note", "lesson_content", "plain_subject", "remembered_unblock", "unsafe_to_remember",
]

#: Lessons shown at turn start (DESIGN.md, "Defaults").
SHOWN_AT_START = 3


#: The fingerprint of a subject whose fingerprint could not be taken: matches nothing.
UNKNOWN_FINGERPRINT = "\x00unknown"

#: Active lessons looked at, at most, to find the ones shown at turn start.
CANDIDATES_AT_START = 20

T = TypeVar("T")

#: A subject a lesson may be about: a program, a file path, a host; one token, no spaces,
#: control characters or shell syntax (so a stored subject can never carry an instruction).
_PLAIN_SUBJECT = re.compile(r"[A-Za-z0-9_./:@+-]{1,200}")


def plain_subject(subject: str) -> bool:
    """Whether ``subject`` is a plain token that may be remembered (see :data:`_PLAIN_SUBJECT`)."""
    return bool(_PLAIN_SUBJECT.fullmatch(subject))


def _day(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, tz=datetime.UTC).strftime("%Y-%m-%d")


def known_blocker_note(lesson: Lesson) -> str:
    """One line about a lesson: what it is about, its unblock, its id and when it was last
    seen to hold."""
    sig = lesson.signature
    fix = f"; the fix was: {lesson.unblock}" if lesson.unblock else ""
    return (f"{sig.subject} ({sig.kind.value}){fix} (lesson {lesson.id}, last verified "
            f"{_day(lesson.last_verified_at)})")


def unsafe_to_remember(situation: Situation, result_text: str) -> str | None:
    """Why ``situation`` (declared in a result reading ``result_text``) must not become a
    lesson, or ``None``: the screen every text that could reach a lesson or a later prompt
    passes, whatever else the text reads as (a failure too) and however the unblock is
    written (a command or a sentence).

    Each of the result text (and, when it is a JSON document, each of its strings), the
    unblock and the detail is read for an injected instruction or a command that runs what it
    downloads (:func:`unstuck.recognise.instructions.find_instruction`); the unblock must not be one the
    screen refuses (:func:`unstuck.decide.escalation.unsafe_fix`). An unblock the screen keeps only as
    evidence does not stop the lesson: :meth:`LessonKeeper.remember` stores it without that
    unblock (:func:`remembered_unblock`).
    """
    unblock = situation.unblock or ""
    texts = [("the result", result_text), *(("the result", value) for value in _json_strings(result_text)),
             ("the unblock", unblock), ("the detail", situation.detail)]
    for name, text in texts:
        if not text:
            continue
        found = find_instruction(text)
        if found is not None:
            return f"{name} holds an instruction: {quote_evidence(found)}"
    refused = unsafe_fix(unblock) if unblock else None  # the very screen the question applies
    return f"the unblock is refused: {refused}" if refused is not None else None


#: A result longer than this is not decoded as JSON for :func:`unsafe_to_remember` (its text
#: is still screened as it is).
_JSON_DECODED_CHARS = 1_000_000


def _json_strings(text: str) -> list[str]:
    """The string values (and keys) of ``text`` when it is a JSON document (a tool's mapping
    is shown to the model as JSON, its strings escaped); none when it is not, is longer than
    :data:`_JSON_DECODED_CHARS`, or nests too deep for the decoder."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")) or len(text) > _JSON_DECODED_CHARS:
        return []
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return []
    found: list[str] = []
    pending: list[object] = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(key for key in value if isinstance(key, str))
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return found


def remembered_unblock(situation: Situation) -> str | None:
    """The unblock a lesson of ``situation`` may keep: the declared one when the screen accepts
    it as a command or one plain sentence (:func:`unstuck.recognise.instructions.screen_instruction`),
    else ``None`` (it is then only quoted in the lesson's content)."""
    unblock = situation.unblock
    return unblock if unblock and screen_instruction(unblock).accepted else None


def _quoted(text: str) -> str:
    """Tool text as a lesson keeps it: redacted before it is cut, then quoted evidence."""
    return quote_evidence(redact(for_terminal(text)))


#: In a lesson's content, before a declared unblock kept only as the tool's words.
UNBLOCK_AS_EVIDENCE = "its fix, as the tool wrote it (not kept as an instruction)"


def lesson_content(situation: Situation) -> str:
    """A lesson's line of content: the subject and kind in unstuck's words, then the
    situation's detail (tool text) only as quoted evidence (:func:`unstuck.core.text.quote_evidence`:
    cleaned, one line, at most :data:`unstuck.core.text.EVIDENCE_CHARS` characters, its quotation
    marks neutralised), redacted before it is cut (:func:`unstuck.core.redact.redact`), so no part
    of a secret is kept; and a declared unblock the lesson does not keep
    (:func:`remembered_unblock`), quoted the same way after :data:`UNBLOCK_AS_EVIDENCE`."""
    head = f"{situation.subject} was blocked ({situation.kind.value})"
    parts = [f"{head}: {_quoted(situation.detail)}" if situation.detail.strip() else head]
    if situation.unblock and remembered_unblock(situation) is None:
        parts.append(f"{UNBLOCK_AS_EVIDENCE}: {_quoted(situation.unblock)}")
    return "; ".join(parts)


def _still_safe(lesson: Lesson) -> bool:
    """A stored lesson passes today's screen before it is shown or acted on (a row written by
    an older unstuck, or by hand, is never believed into a prompt or a question): nothing in
    it refused, and its unblock, if any, accepted as a command or one plain sentence."""
    situation = lesson.situation()
    return unsafe_to_remember(situation, "") is None and remembered_unblock(situation) == situation.unblock


class LessonKeeper:
    """Lessons for one turn (see the module doc).

    Args:
        store: the lesson store.
        fingerprint: the environment fingerprint of a subject (for a CLI, its resolved path
            and ``--version``: :func:`unstuck.toolkit.workspace.cli_fingerprint`); asked once per subject.
    """

    def __init__(
        self, store: LessonStore, fingerprint: Callable[[str], str] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.on_error = on_error
        self._fingerprint = fingerprint or (lambda subject: "")
        self._prints: dict[str, str] = {}
        self.checked: set[str] = set()
        self.errors: list[str] = []

    def fingerprint(self, subject: str) -> str:
        """The subject's fingerprint, computed once per turn; :data:`UNKNOWN_FINGERPRINT`
        (which matches no lesson, and stores none) when the fingerprint function fails."""
        if subject not in self._prints:
            try:
                self._prints[subject] = self._fingerprint(subject)
            except Exception as exc:  # e.g. a PATH script that cannot be exec'd for --version
                self._error(f"fingerprint of {subject}: {type(exc).__name__}: {exc}")
                self._prints[subject] = UNKNOWN_FINGERPRINT
        return self._prints[subject]

    def verified(self, lesson: Lesson) -> None:
        """Its probe says the lesson still holds; a store error is recorded, never raised."""
        self._guard(lambda: self.store.verified(lesson.id), None)

    def known_blockers(self, tools: Iterable[str]) -> list[Lesson]:
        """At most 3 active lessons declared by ``tools`` whose fingerprint still matches and
        that pass today's screen (:func:`unsafe_to_remember`); fingerprints are computed for at
        most :data:`CANDIDATES_AT_START` candidates."""
        found: list[Lesson] = []
        none: list[Lesson] = []
        for lesson in self._guard(lambda: self.store.active(tools=tools, limit=CANDIDATES_AT_START), none):
            if not _still_safe(lesson):
                continue
            if lesson.signature.fingerprint == self.fingerprint(lesson.signature.subject):
                found.append(lesson)
            if len(found) == SHOWN_AT_START:
                break
        return found

    def by_id(self, lesson_id: int) -> Lesson | None:
        """The lesson with ``lesson_id`` (``None`` when it is gone or the store cannot be read)."""
        return self._guard(lambda: self.store.get(lesson_id), None)

    def on_subject(self, subject: str) -> list[Lesson]:
        """Active lessons on ``subject`` that pass today's screen (:func:`unsafe_to_remember`);
        none when the store cannot be read."""
        none: list[Lesson] = []
        return [lesson for lesson in self._guard(lambda: self.store.on_subject(subject), none) if _still_safe(lesson)]

    def close(self, lesson: Lesson, reason: str) -> None:
        """Invalidate ``lesson`` (its row stays); a store error is recorded, never raised."""
        self._guard(lambda: self.store.invalidate(lesson.id, reason), False)

    def _guard(self, action: Callable[[], T], fallback: T) -> T:
        """Run a store action; a broken store must not break the turn: the action gives its
        fallback, the error is kept in :attr:`errors` and reported (a ``lesson.error`` event),
        and the turn goes on."""
        try:
            return action()
        except (LessonStoreError, ValueError) as exc:
            self._error(f"{type(exc).__name__}: {exc}")
            return fallback

    def _error(self, message: str) -> None:
        self.errors.append(message)
        if self.on_error is not None:
            self.on_error(message)

    def lesson_for(self, subject: str) -> Lesson | None:
        """The lesson on ``subject`` to act on before its first call this turn, or ``None``
        (no lesson, a changed environment, or already checked this turn)."""
        if subject in self.checked:
            return None
        self.checked.add(subject)
        candidates = self.on_subject(subject)  # the fingerprint (a subprocess for a CLI) only when needed
        if not candidates:
            return None
        current = self.fingerprint(subject)
        matching = [lesson for lesson in candidates if lesson.signature.fingerprint == current]
        for stale in candidates:
            # gh upgraded or moved here: the old lesson is closed, kept. Another machine's lesson
            # (a fleet's shared store) is scoped by its fingerprint: not matched, never closed.
            # A fingerprint that could not be taken this time (a --version that timed out) says nothing.
            if (stale.signature.fingerprint != current and current != UNKNOWN_FINGERPRINT
                    and stale.host in ("", self.store.host)):
                self.close(stale, f"its environment changed ({stale.signature.fingerprint!r} -> {current!r})")
        with_probe = [lesson for lesson in matching if lesson.probe is not None]
        chosen = with_probe or matching
        return chosen[0] if chosen else None

    def remember(self, situation: Situation, *, tool: str, result_text: str, why: str) -> Lesson | None:
        """Store the lesson of a declared blocker the turn asked about; ``None`` when the
        rules say no (see :func:`unstuck.store.lessons.storable`) or the declaring result reads
        as an injected instruction."""
        if storable(situation) is not None or not plain_subject(situation.subject):
            return None
        if unsafe_to_remember(situation, result_text) is not None:
            return None
        if self.fingerprint(situation.subject) == UNKNOWN_FINGERPRINT:
            return None
        content = lesson_content(situation)
        kept = replace(situation, unblock=remembered_unblock(situation))
        return self._guard(lambda: self.store.record(
            kept, tool=tool, fingerprint=self.fingerprint(situation.subject), content=content, source=why,
        ), None)


class LessonStep:
    """The guard's lesson step for one turn: a lesson's probe before the first call on its
    subject, a note when it has none, the lesson closed when a call shows the blocker gone,
    and the lesson stored once the turn asked (see the module doc).

    The books (``cited``, ``noted``: subject → lesson id; ``lessons_checked``) are in the
    guard's :class:`~unstuck.guard.state.GuardState`; the lessons they name are read from the
    store once per turn.

    Args:
        keeper: the turn's keeper; ``None``: no lesson store (every step is a no-op).
        state: the guard's state.
        tools: the tool set.
        emit: records an event.
        probes: runs a lesson's probe.
        record_decision: journals a decision (``known``) after the last step.
    """

    def __init__(self, keeper: LessonKeeper | None, state: GuardState, tools: Toolset, *,
                 emit: Callable[..., None], probes: Probes,
                 record_decision: Callable[[JournalDecision, str], None]) -> None:
        self.keeper, self.state, self.tools = keeper, state, tools
        self.emit, self.probes, self.record_decision = emit, probes, record_decision
        self._lessons: dict[int, Lesson] = {}
        self._notes: dict[str, str] = {}  # call id → a lesson's note for its result
        if keeper is not None:
            keeper.checked = state.lessons_checked

    def restore(self) -> None:
        """After loading saved state: keep the books' lessons the store still has (without a
        store, the books and the subjects checked are dropped)."""
        if self.keeper is None:
            self.state.lessons_checked.clear()
        for book in (self.state.cited, self.state.noted):
            for subject, lesson_id in list(book.items()):
                lesson = self.keeper.by_id(lesson_id) if self.keeper is not None else None
                if lesson is None:
                    del book[subject]
                else:
                    self._lessons[lesson.id] = lesson

    def _book(self, book: dict[str, int], subject: str, lesson: Lesson) -> None:
        book[subject] = lesson.id
        self._lessons[lesson.id] = lesson

    def check(self, call: ToolCall) -> policy.OpenBlocker | None:
        """Before a call on a subject with a lesson: probe it. Still blocked → the blocker to
        ask about at once (the call never runs); clear → the lesson is closed; no probe → a
        one-line note for the call's result."""
        s = self.state
        if self.keeper is None or not s.guarded:
            return None
        spec = self.tools.get(call.tool)
        subject = spec.subject_of(call.arguments) if spec is not None else call.tool
        lesson = self.keeper.lesson_for(subject)
        if lesson is None:
            return None
        note = f"{GUIDANCE_PREFIX} Known blocker on this machine: {known_blocker_note(lesson)}."
        if lesson.probe is None or not self.probes.allowed(lesson.probe):
            self.emit(EventName.LESSON_APPLIED, lesson=lesson.id, subject=subject, probe=False)
            self._book(s.noted, subject, lesson)
            self._notes[call.id] = note
            return None
        clean, _evidence = self.probes.run(lesson.probe)
        found = s.steps[-1].situation
        if clean:
            self.keeper.close(lesson, "its probe came back clean")
            self.emit(EventName.LESSON_INVALIDATED, lesson=lesson.id, subject=subject,
                      reason=CloseReason.PROBE_CLEAN.value)
            return None
        holds = found is not None and found.subject == subject and found.is_blocker and found.is_declared
        if not holds:  # the probe failed some other way (missing tool, a blip, an injected fault): it cannot tell
            self.emit(EventName.LESSON_APPLIED, lesson=lesson.id, subject=subject, probe=True, probe_told=False)
            self._book(s.noted, subject, lesson)
            self._notes[call.id] = f"{note} (Its probe could not tell whether it still holds.)"
            return None
        assert found is not None
        self.keeper.verified(lesson)
        self.emit(EventName.LESSON_APPLIED, lesson=lesson.id, subject=subject, probe=True)
        s.state = policy.open_known_blocker(s.state, found, len(s.steps) - 1)
        self.record_decision(JournalDecision.KNOWN, subject)
        self._book(s.cited, subject, lesson)
        return s.state.open_blockers[subject]

    def note(self, call_id: str) -> str:
        """The note a lesson left for ``call_id``'s result (once), or ``""``."""
        return self._notes.pop(call_id, "")

    def settle_noted(self, subject: str, ok: bool) -> None:
        """A call on a subject with a probe-less (or undecided) lesson succeeded: the blocker
        is gone (DESIGN.md: a blocker closes when a call on its subject succeeds)."""
        if self.keeper is None or not ok:
            return
        lesson_id = self.state.noted.pop(subject, None)
        lesson = self._lessons.get(lesson_id) if lesson_id is not None else None
        if lesson is not None:
            self.keeper.close(lesson, "a call on its subject succeeded")
            self.emit(EventName.LESSON_INVALIDATED, lesson=lesson.id, subject=subject,
                      reason=CloseReason.CALL_SUCCEEDED.value)

    def cite(self, escalation: Escalation, subject: str) -> tuple[Escalation, Lesson | None]:
        """``escalation`` naming the lesson the turn escalated on for ``subject``, if any."""
        lesson_id = self.state.cited.get(subject)
        lesson = self._lessons.get(lesson_id) if lesson_id is not None else None
        if lesson is None:
            return escalation, None
        known = f"Known blocker: {known_blocker_note(lesson)}; its probe says it still holds."
        return replace(escalation, blocked=f"{escalation.blocked} {known}"), lesson

    def remember(self, blocker: policy.OpenBlocker) -> None:
        """The turn asked about ``blocker``: store its lesson (see :meth:`LessonKeeper.remember`)."""
        if self.keeper is None or blocker.subject in self.state.cited or blocker.reason is not EscalationReason.BLOCKED:
            return
        declaring = next((s for s in reversed(self.state.steps) if s.situation == blocker.situation), None)
        if declaring is None or not declaring.dispatched:
            return  # unstuck's own refusal says what this run may do, not what the machine is
        lesson = self.keeper.remember(blocker.situation, tool=declaring.call.tool, result_text=declaring.content,
                                      why="escalated")
        if lesson is not None:
            self.emit(EventName.LESSON_STORED, lesson=lesson.id, subject=lesson.signature.subject,
                      kind=lesson.signature.kind.value)

    def resolved(self, subject: str) -> None:
        """The user resolved the blocker on ``subject`` (and its probe, if any, agrees): its
        lessons are closed."""
        if self.keeper is None:
            return
        for lesson in self.keeper.on_subject(subject):
            self.keeper.close(lesson, "the user resolved it")
            self.emit(EventName.LESSON_INVALIDATED, lesson=lesson.id, subject=subject,
                      reason=CloseReason.USER_RESOLVED.value)

    def known_blockers_note(self) -> str | None:
        """The system prompt's section on remembered blockers (at most 3 lessons whose
        environment still matches), or ``None``; each shown lesson is an event."""
        if self.keeper is None or not self.state.guarded:
            return None
        known = self.keeper.known_blockers(self.tools)
        if not known:
            return None
        for lesson in known:
            self.emit(EventName.LESSON_SHOWN, lesson=lesson.id, subject=lesson.signature.subject)
        section = "\n".join(f"- {known_blocker_note(lesson)}" for lesson in known)
        return f"{prompts.KNOWN_BLOCKERS_HEADING}\n{section}"
