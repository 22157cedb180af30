"""Diagnostics: observers with no authority (DESIGN.md, "Defaults"; issue 5).

They read a turn's steps and say what looks wrong; the loop records what they say as events
and changes nothing because of it.

* repetition: :data:`REPEAT_LIMIT` (3) consecutive identical calls: same tool, same
  arguments (incident i001 repeated one failing ``git push`` all night);
* streak: :data:`STREAK_LIMIT` (5) consecutive calls to the same tool with changing
  arguments (an agent hunting with one tool).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from unstuck.tools import ToolCall

__all__ = ["REPEAT_LIMIT", "STREAK_LIMIT", "Pattern", "RunLengths", "advance", "repeated_calls"]

#: Consecutive identical calls that count as repetition.
REPEAT_LIMIT = 3
#: Consecutive calls to one tool (arguments changing) that count as a streak.
STREAK_LIMIT = 5


@dataclass(frozen=True, slots=True)
class Pattern:
    """What the last calls look like: ``kind`` is ``repetition`` or ``streak``; ``count`` how
    many calls it spans so far; ``tool`` the tool they call.
    """

    kind: str
    tool: str
    count: int


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
            return Pattern("repetition", self.last.tool, self.same)
        if self.streak >= STREAK_LIMIT:
            return Pattern("streak", self.last.tool, self.streak)
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
