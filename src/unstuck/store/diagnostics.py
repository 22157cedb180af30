"""Diagnostics: observers with no authority (DESIGN.md, "Defaults"; issue 5).
Internal: not a supported import path (docs/reference/index.md lists those that are).

They read a turn's steps and say what looks wrong; the loop records what they say as events
and changes nothing because of it.

* repetition: :data:`REPEAT_LIMIT` (3) consecutive identical calls: same tool, same
  arguments (incident i001 repeated one failing ``git push`` all night);
* streak: :data:`STREAK_LIMIT` (5) consecutive calls to the same tool with changing
  arguments (an agent hunting with one tool);
* stall suspicion: :data:`STALL_AFTER_S` (5 minutes) without an event in an active turn
  (:class:`StallWatch`): a tool or a model that hangs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from unstuck.core.clock import Clock
from unstuck.core.records import cheap
from unstuck.core.tools import ToolCall
from unstuck.store.events import Event, EventName, EventSink, event

__all__ = [
    "REPEAT_LIMIT", "STALL_AFTER_S", "STREAK_LIMIT", "Pattern", "RunLengths", "StallWatch", "advance", "repeated_calls",
]

#: Consecutive identical calls that count as repetition.
REPEAT_LIMIT = 3
#: Consecutive calls to one tool (arguments changing) that count as a streak.
STREAK_LIMIT = 5


@cheap
@dataclass(frozen=True, slots=True)
class Pattern:
    """What the last calls look like: ``kind`` is :attr:`EventName.DIAGNOSTIC_REPETITION` or
    :attr:`EventName.DIAGNOSTIC_STREAK` (the event it is recorded as); ``count`` how many calls
    it spans so far; ``tool`` the tool they call.
    """

    kind: EventName
    tool: str
    count: int


@cheap
@dataclass(frozen=True, slots=True)
class RunLengths:
    """The runs the calls so far end with: the last call, how many identical calls end the
    sequence, and how many calls to the same tool end it. Updated in constant time per call.
    """

    last: ToolCall | None = None
    same: int = 0
    streak: int = 0

    @property
    def pattern(self) -> Pattern | None:
        """The pattern the runs form, if they reach a limit; repetition wins over a streak."""
        if self.last is None:
            return None
        if self.same >= REPEAT_LIMIT:
            return Pattern(EventName.DIAGNOSTIC_REPETITION, self.last.tool, self.same)
        if self.streak >= STREAK_LIMIT:
            return Pattern(EventName.DIAGNOSTIC_STREAK, self.last.tool, self.streak)
        return None


def advance(runs: RunLengths, call: ToolCall) -> RunLengths:
    """The runs after one more call."""
    last = runs.last
    same_tool = last is not None and last.tool == call.tool
    identical = same_tool and last is not None and last.arguments_json == call.arguments_json
    return RunLengths(call, runs.same + 1 if identical else 1, runs.streak + 1 if same_tool else 1)


def repeated_calls(calls: Sequence[ToolCall]) -> Pattern | None:
    """The pattern the most recent calls form, if they reach a limit; ``None`` otherwise.

    Identical calls (same tool and canonical arguments) take precedence over a streak.
    """
    runs = RunLengths()
    for call in calls:
        runs = advance(runs, call)
    return runs.pattern


#: Seconds of silence (no event) in an active turn before a stall is suspected (DESIGN.md).
STALL_AFTER_S = 300.0


class StallWatch:
    """An event sink that passes events on and notices silence: when an active turn (started,
    not ended) has emitted nothing for ``after_s`` seconds, :meth:`poll` emits one
    ``diagnostic.stall`` event (once per silence) naming the last event and the silence.

    The loop polls it from a daemon thread on a real clock; tests call :meth:`poll` on a
    virtual clock. It has no authority: it stops nothing.

    Args:
        inner: where events (and the stall event) go.
        clock: the turn's clock.
        after_s: the silence that counts as a stall, in seconds (default 300).
    """

    def __init__(self, inner: EventSink, clock: Clock, after_s: float = STALL_AFTER_S) -> None:
        self.inner, self.clock, self.after_s = inner, clock, after_s
        self._lock = threading.Lock()
        self._last: Event | None = None
        self._last_at = clock.now()
        self._active = False
        self._reported = False

    def emit(self, item: Event) -> None:
        with self._lock:
            self._last, self._last_at, self._reported = item, self.clock.now(), False
            if item.name in (EventName.TURN_STARTED, EventName.TURN_RESUMED):
                self._active = True
            elif item.name == EventName.TURN_ENDED:
                self._active = False
        self.inner.emit(item)

    def poll(self) -> Event | None:
        """Emit and return the stall event when the active turn has been silent too long."""
        with self._lock:
            silence = self.clock.now() - self._last_at
            if not self._active or self._reported or silence < self.after_s or self._last is None:
                return None
            self._reported = True
            last = self._last
        stall = event(EventName.DIAGNOSTIC_STALL, last.turn_id, last.at_s + silence, silent_s=round(silence, 3),
                      last_event=last.name)
        self.inner.emit(stall)
        return stall

    def watch(self, interval_s: float) -> Callable[[], None]:
        """Poll every ``interval_s`` seconds (real time) in a daemon thread; returns ``stop``."""
        stopped = threading.Event()

        def loop() -> None:
            while not stopped.wait(interval_s):
                self.poll()

        threading.Thread(target=loop, name="unstuck-stall-watch", daemon=True).start()
        return stopped.set
