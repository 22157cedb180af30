"""Events: every decision of the guard and the loop, as one JSON object per line.

:class:`EventName` owns the names (DESIGN.md, "What the user sees": every decision is an
event): ``tool.called``, ``situation.declared``, ``situation.inferred``, ``call.refused``,
``budget.charged``, ``blocker.opened``, ``blocker.closed``, ``probe.run``, ``turn.escalated``,
``user.answered``, ``turn.ended`` and the rest below. A sink only records; it never changes
what the loop does.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

__all__ = ["Event", "EventLog", "EventName", "EventSink", "JsonLinesSink", "Scalar", "Tee", "event", "read_events"]

Scalar = str | int | float | bool | None


class EventName(enum.StrEnum):
    """The name of every event unstuck records (a ``StrEnum``: it compares equal to its
    dotted string, so readers of JSON lines match either)."""

    TURN_STARTED = "turn.started"
    TURN_RESUMED = "turn.resumed"
    TURN_ESCALATED = "turn.escalated"
    TURN_ENDED = "turn.ended"
    TOOL_CALLED = "tool.called"
    TOOL_RETURNED = "tool.returned"
    CALL_REFUSED = "call.refused"
    SITUATION_DECLARED = "situation.declared"
    SITUATION_INFERRED = "situation.inferred"
    SITUATION_SECOND_OPINION = "situation.second_opinion"
    SITUATION_LOCATED = "situation.located"
    BLOCKER_OPENED = "blocker.opened"
    BLOCKER_CLOSED = "blocker.closed"
    BUDGET_CHARGED = "budget.charged"
    RETRY_SCHEDULED = "retry.scheduled"
    PROBE_RUN = "probe.run"
    PROBE_SETUP = "probe.setup"
    PROBE_REFUSED = "probe.refused"
    FAULT_INJECTED = "fault.injected"
    INTENT_PREPARED = "intent.prepared"
    INTENT_COMMITTED = "intent.committed"
    INTENT_HELD = "intent.held"
    LESSON_SHOWN = "lesson.shown"
    LESSON_APPLIED = "lesson.applied"
    LESSON_INVALIDATED = "lesson.invalidated"
    LESSON_STORED = "lesson.stored"
    LESSON_ERROR = "lesson.error"
    USER_ANSWERED = "user.answered"
    VALIDATION_CHECKED = "validation.checked"
    ANSWER_CHECKED = "answer.checked"
    DIAGNOSTIC_REPETITION = "diagnostic.repetition"
    DIAGNOSTIC_STREAK = "diagnostic.streak"
    DIAGNOSTIC_STALL = "diagnostic.stall"
    STATE_POLICY_DIFFERS = "state.policy_differs"
    STATE_WRITE_REFUSED = "state.write_refused"


@dataclass(frozen=True, slots=True)
class Event:
    """One recorded decision.

    Attributes:
        name: the event name (``blocker.opened``, ...).
        turn_id: the turn it belongs to.
        at_s: seconds since the turn started, on the turn's clock.
        fields: flat details (subject, kind, tool, ...), JSON scalars only.
    """

    name: str
    turn_id: str
    at_s: float
    fields: tuple[tuple[str, Scalar], ...] = ()

    def get(self, key: str) -> Scalar:
        """The value of field ``key``, or ``None``."""
        return next((v for k, v in self.fields if k == key), None)

    def to_dict(self) -> dict[str, Scalar]:
        """A JSON-ready dict: ``event``, ``turn``, ``at_s`` and the fields."""
        return {"event": self.name, "turn": self.turn_id, "at_s": round(self.at_s, 6), **dict(self.fields)}


def event(name: EventName, turn_id: str, at_s: float, **fields: Scalar) -> Event:
    """Build an :class:`Event` from keyword fields."""
    return Event(str(name), turn_id, at_s, tuple(fields.items()))


def read_events(path: Path) -> tuple[list[Event], list[int]]:
    """Read a JSON-lines events file (the inverse of :meth:`Event.to_dict`): the events, and
    the numbers of the lines that are not events (skipped, never raised on; undecodable
    bytes are replaced).

    Raises:
        OSError: when the file cannot be read.
    """
    found: list[Event] = []
    bad: list[int] = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            name, turn_id, at = str(item["event"]), str(item["turn"]), float(item["at_s"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError):  # nested past the stack
            bad.append(number)
            continue
        fields = tuple((k, v) for k, v in item.items() if k not in ("event", "turn", "at_s"))
        found.append(Event(name, turn_id, at, fields))
    return found, bad


class EventSink(Protocol):
    """Something that records events."""

    def emit(self, item: Event) -> None:
        """Record one event."""
        ...


class EventLog:
    """Events kept in memory, in order (thread-safe)."""

    def __init__(self) -> None:
        self._items: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, item: Event) -> None:
        """Append one event."""
        with self._lock:
            self._items.append(item)

    def __iter__(self) -> Iterator[Event]:
        with self._lock:
            return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def named(self, name: str) -> list[Event]:
        """The events called ``name``, in order."""
        return [e for e in self if e.name == name]


class JsonLinesSink:
    """Append events to a JSON-lines file, one flushed line per event.

    Args:
        target: a path (opened for appending, parents created) or an open text stream.
    """

    def __init__(self, target: str | Path | IO[str]) -> None:
        if isinstance(target, str | Path):
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._stream: IO[str] = path.open("a", encoding="utf-8")
            self._owned = True
        else:
            self._stream = target
            self._owned = False
        self._lock = threading.Lock()

    def emit(self, item: Event) -> None:
        """Write one line and flush it."""
        line = json.dumps(item.to_dict(), ensure_ascii=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def close(self) -> None:
        """Close the file if this sink opened it."""
        if self._owned:
            self._stream.close()


class Tee:
    """Send each event to several sinks."""

    def __init__(self, *sinks: EventSink) -> None:
        self._sinks = sinks

    def emit(self, item: Event) -> None:
        """Record ``item`` in every sink."""
        for sink in self._sinks:
            sink.emit(item)

