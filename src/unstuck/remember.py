"""The loop's side of lessons: what to show at turn start, what to check before a call, and
what to store after asking (seed 000, section 3.4; the rules are in :mod:`unstuck.lessons`).

:class:`LessonKeeper` holds a store and a fingerprint function for one turn. The loop:

* at turn start, adds :meth:`LessonKeeper.known_blockers` (at most 3 active lessons declared
  by the tools in play whose environment still matches) to the system prompt;
* before dispatching a call, asks :meth:`LessonKeeper.lesson_for` about the call's subject
  (once per subject per turn). With a lesson, the loop runs its probe first: still blocked →
  it escalates at once, citing the lesson, and the call never runs; clear → the lesson is
  invalidated and the call runs. A lesson without a probe only adds a one-line note to the
  call's result. Lessons never add a tool, a permission or a command, and never skip a call
  without saying so;
* after it escalated or the user answered, calls :meth:`LessonKeeper.remember`, which stores
  a declared blocker unless the result that declared it reads as an injected instruction.

The guard (:class:`unstuck.guard.Guard`) drives these steps through the keeper's public methods.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

from unstuck.classify import find_injection
from unstuck.lessons import Lesson, LessonStore, LessonStoreError, storable
from unstuck.prompts import unblock_is_sentence
from unstuck.shell import screen_command
from unstuck.situations import Situation

__all__ = [
    "CANDIDATES_AT_START", "SHOWN_AT_START", "UNKNOWN_FINGERPRINT", "LessonKeeper",
    "known_blocker_note", "plain_subject",
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


class LessonKeeper:
    """Lessons for one turn (see the module doc).

    Args:
        store: the lesson store.
        fingerprint: the environment fingerprint of a subject (for a CLI, its resolved path
            and ``--version``: :func:`unstuck.toolkit.cli_fingerprint`); asked once per subject.
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
        """At most 3 active lessons declared by ``tools`` whose fingerprint still matches
        (fingerprints are computed for at most :data:`CANDIDATES_AT_START` candidates)."""
        found: list[Lesson] = []
        none: list[Lesson] = []
        for lesson in self._guard(lambda: self.store.active(tools=tools, limit=CANDIDATES_AT_START), none):
            if lesson.signature.fingerprint == self.fingerprint(lesson.signature.subject):
                found.append(lesson)
            if len(found) == SHOWN_AT_START:
                break
        return found

    def by_id(self, lesson_id: int) -> Lesson | None:
        """The lesson with ``lesson_id`` (``None`` when it is gone or the store cannot be read)."""
        return self._guard(lambda: self.store.get(lesson_id), None)

    def on_subject(self, subject: str) -> list[Lesson]:
        """Active lessons on ``subject`` (none when the store cannot be read)."""
        none: list[Lesson] = []
        return self._guard(lambda: self.store.on_subject(subject), none)

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
            if stale.signature.fingerprint != current:  # gh upgraded or moved: the old lesson is closed, kept
                self.close(stale, f"its environment changed ({stale.signature.fingerprint!r} -> {current!r})")
        with_probe = [lesson for lesson in matching if lesson.probe is not None]
        chosen = with_probe or matching
        return chosen[0] if chosen else None

    def remember(self, situation: Situation, *, tool: str, result_text: str, why: str) -> Lesson | None:
        """Store the lesson of a declared blocker the turn asked about; ``None`` when the
        rules say no (see :func:`unstuck.lessons.storable`) or the declaring result reads
        as an injected instruction."""
        if storable(situation) is not None or not plain_subject(situation.subject):
            return None
        # what would be stored (the unblock, the detail) is screened with the result it came in
        screened = "\n".join((result_text, situation.unblock or "", situation.detail))
        if find_injection(screened) is not None:
            return None
        command = situation.unblock if situation.unblock and not unblock_is_sentence(situation.unblock) else None
        if command is not None and screen_command(command).command is None:
            return None  # a command that fails the structural screen is never remembered
        if self.fingerprint(situation.subject) == UNKNOWN_FINGERPRINT:
            return None
        content = f"{situation.subject} was blocked ({situation.kind.value}): {situation.detail}".strip()
        return self._guard(lambda: self.store.record(
            situation, tool=tool, fingerprint=self.fingerprint(situation.subject), content=content, source=why,
        ), None)
