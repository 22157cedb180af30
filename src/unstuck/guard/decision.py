"""The guard's words about one call: where the call comes from (:class:`Origin`) and what the
guard decided (:class:`Decision`).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from unstuck.core.records import cheap
from unstuck.core.situations import Situation
from unstuck.core.tools import ToolCall
from unstuck.decide.escalation import Escalation
from unstuck.decide.outcome import StepRecord
from unstuck.decide.policy import Action

__all__ = ["LATCHED", "Action", "Decision", "Origin"]

#: What a call after the escalation gets (the latch).
LATCHED = "Not executed: the turn stopped to ask the user."


class Origin(enum.Enum):
    """Where a step's call comes from, and so how the guard assesses it (a step's ``probe``
    and ``retry`` fields, and whether a ``tool.returned`` event is recorded, follow from it)."""

    MODEL = "model"  # the model asked for it and it ran (reported to Guard.after)
    REFUSED = "refused"  # the model asked for it; the guard refused it before dispatch, nothing ran
    RETRY = "retry"  # the guard sent a call of the model's again, after a failure that waiting may fix
    PROBE = "probe"  # the guard's own read-only check of a blocker (never charged)

    @property
    def ran(self) -> bool:
        """The call reached its tool."""
        return self is not Origin.REFUSED


@cheap
@dataclass(frozen=True, slots=True)
class Decision:
    """What the guard decided about one call.

    Attributes:
        action: :class:`~unstuck.decide.policy.Action`: ``dispatch`` (run it now), ``refuse`` (do not
            run it), ``continue`` (hand the model ``content``), ``retry`` (wait ``delay_s``
            seconds on the turn's clock, then run the same call again through
            :meth:`Guard.before <unstuck.guard.guard.Guard.before>`), ``escalate`` (stop: the turn
            asks ``escalation``).
        call: the call decided on.
        content: what the model gets as the call's result: the tool's text with unstuck's
            guidance, a refusal, or the "not executed" of a latched turn; empty for
            ``dispatch``.
        situation: the declared or inferred situation of the result (a refusal's own), if any.
        delay_s: for ``retry``, seconds to wait (jittered when the guard was given a random
            source; a server's Retry-After never shortened).
        escalation: for ``escalate``, the question.
        step: the step recorded for the call (``None`` until it was assessed).
    """

    action: Action
    call: ToolCall | None = None
    content: str = ""
    situation: Situation | None = None
    delay_s: float = 0.0
    escalation: Escalation | None = None
    step: StepRecord | None = None

    @property
    def stop(self) -> bool:
        """The turn must stop and ask."""
        return self.action is Action.ESCALATE
