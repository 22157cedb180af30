"""Stall suspicion: silence in an active turn is noticed and recorded, with no authority."""

from __future__ import annotations

import time
from collections.abc import Sequence

from unstuck.core.clock import RealClock, VirtualClock
from unstuck.decide.outcome import TurnStatus
from unstuck.loop.turn import run_turn
from unstuck.store.diagnostics import STALL_AFTER_S, StallWatch
from unstuck.store.events import EventLog, EventName, event
from unstuck.toolkit.models import Message, ModelReply
from unstuck.toolkit.specs import ToolSpec


def test_the_default_is_five_minutes() -> None:
    assert STALL_AFTER_S == 300.0


def test_silence_past_the_threshold_in_an_active_turn_is_reported_once() -> None:
    clock, log = VirtualClock(), EventLog()
    watch = StallWatch(log, clock, after_s=300)
    watch.emit(event(EventName.TURN_STARTED, "t", 0.0))
    watch.emit(event(EventName.TOOL_CALLED, "t", 0.0, tool="run_command"))
    clock.sleep(299)
    assert watch.poll() is None
    clock.sleep(2)
    stall = watch.poll()
    assert stall is not None and stall.name == "diagnostic.stall"
    assert stall.get("last_event") == "tool.called" and stall.get("silent_s") == 301
    assert watch.poll() is None  # once per silence
    watch.emit(event(EventName.TOOL_CALLED, "t", 301.0))
    clock.sleep(300)
    assert watch.poll() is not None  # a new silence is a new suspicion
    assert [e.name for e in log].count("diagnostic.stall") == 2


def test_an_ended_turn_is_never_a_stall() -> None:
    clock, log = VirtualClock(), EventLog()
    watch = StallWatch(log, clock, after_s=1)
    watch.emit(event(EventName.TURN_STARTED, "t", 0.0))
    watch.emit(event(EventName.TURN_ENDED, "t", 0.0))
    clock.sleep(1000)
    assert watch.poll() is None


class SlowModel:
    """A model that hangs for a while (as a remote model can) before answering."""

    name = "slow"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        time.sleep(1.0)
        return ModelReply("done")


def test_the_loop_watches_a_real_clock_and_the_stall_changes_nothing() -> None:
    log = EventLog()
    result = run_turn("x", model=SlowModel(), tools=[], unattended=True, clock=RealClock(), events=log,
                      stall_after_s=0.2)
    assert result.status is TurnStatus.DONE
    names = [e.name for e in log]
    assert "diagnostic.stall" in names and names.index("diagnostic.stall") < names.index("turn.ended")
