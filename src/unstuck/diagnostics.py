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

__all__ = ["REPEAT_LIMIT", "STREAK_LIMIT", "Pattern", "repeated_calls"]

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


def repeated_calls(calls: Sequence[ToolCall]) -> Pattern | None:
    """The pattern the most recent calls form, if they reach a limit; ``None`` otherwise.

    Identical calls (same tool and canonical arguments) take precedence over a streak.
    """
    if not calls:
        return None
    last = calls[-1]
    same = 0
    for call in reversed(calls):
        if (call.tool, call.arguments_json) != (last.tool, last.arguments_json):
            break
        same += 1
    if same >= REPEAT_LIMIT:
        return Pattern("repetition", last.tool, same)
    streak = 0
    for call in reversed(calls):
        if call.tool != last.tool:
            break
        streak += 1
    return Pattern("streak", last.tool, streak) if streak >= STREAK_LIMIT else None
