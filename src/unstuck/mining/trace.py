"""Rollout traces and the bad patterns an analyzer finds in them (seed 003, "Why Success and
Failure Must Share a Task").

A :class:`Trace` is one agent's attempt at one task: every call with the return the agent was
shown (perhaps an injected failure: replacing a return never rolls back the tool's state),
the situation kind unstuck's guard recorded for it (rollouts run unguarded: the guard only
observes), the state snapshot taken *before* the call, the final answer and the final state.

:class:`BadPattern` is the vocabulary of what goes wrong first in a failed rollout; the
analyzer diagnoses it and a mined rule's trigger names it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from unstuck.mining.environment import Snapshot
from unstuck.tools import ToolCall

__all__ = ["BadPattern", "Trace", "TraceStep"]


class BadPattern(enum.StrEnum):
    """What a failed rollout did wrong first (the deterministic analyzer's trace rules).

    * ``unverified_identifier``: a call acted on an identifier no earlier result showed (and
      the task did not give);
    * ``unchecked_write``: after a write whose return was a failure, the agent wrote again, or
      answered, without reading back whether the first write took effect;
    * ``repeated_failed_call``: the same call again, unchanged, after it failed, beyond what
      the retry table allows (:mod:`unstuck.retry`: transient kinds only, within their
      attempts);
    * ``worked_around_blocker``: after a blocker's situation (auth, permission, not installed,
      a spent quota), other calls instead of asking the user;
    * ``false_final_answer``: the final answer claims what no successful call in the trace did;
    * ``gave_up``: the rollout ended with the task undone and none of the above.
    """

    UNVERIFIED_IDENTIFIER = "unverified_identifier"
    UNCHECKED_WRITE = "unchecked_write"
    REPEATED_FAILED_CALL = "repeated_failed_call"
    WORKED_AROUND_BLOCKER = "worked_around_blocker"
    FALSE_FINAL_ANSWER = "false_final_answer"
    GAVE_UP = "gave_up"


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One call of a rollout.

    ``content`` and ``ok`` are what the agent was shown; ``injected`` names the failure form
    that replaced the real return (``None``: the real one); ``kind`` is the situation kind the
    guard recorded (``None``: no situation); ``before`` is the state before the call ran.
    """

    index: int
    call: ToolCall
    content: str
    ok: bool
    kind: str | None
    injected: str | None
    before: Snapshot


@dataclass(frozen=True, slots=True)
class Trace:
    """One rollout: who attempted which task under which noise, every step, and how it ended.

    ``seed`` is the rollout's injection seed; ``status`` the turn's status (``done``,
    ``blocked``, ``failed``); ``final`` the state after the last step.
    """

    environment: str
    task: str
    agent: str
    seed: str
    p_inj: float
    steps: tuple[TraceStep, ...]
    answer: str
    status: str
    final: Snapshot

    @property
    def injected(self) -> int:
        """Returns replaced by an injected failure."""
        return sum(1 for step in self.steps if step.injected is not None)
