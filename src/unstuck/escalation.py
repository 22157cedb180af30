"""The escalation: the one precise question that ends a blocked turn (Rule 4).

Seed 000 section 3.3, Rule 4: an escalation always says three things, built
deterministically from the situation's fields so a weak model cannot lose them:

1. what is blocked;
2. what the user must do (the exact ``unblock`` text from tool code, when there is one);
3. what the agent will do once answered; this part may come from one closing model call
   with tools withheld. If that call fails, parts 1 and 2 ship with the error appended,
   never silently trimmed.
"""

from __future__ import annotations

from dataclasses import dataclass

from unstuck import prompts
from unstuck.situations import Kind, Situation

__all__ = ["Escalation", "build_escalation"]


@dataclass(frozen=True, slots=True)
class Escalation:
    """A blocked turn's question to the user.

    Attributes:
        subject: what is blocked (``"gh"``).
        kind: the blocker's kind.
        blocked: part 1, what is blocked.
        user_action: part 2, what the user must do.
        next_step: part 3, what the agent will do once answered.
        unblock: the exact unblock text from tool code, or ``None``.
        interactive: the remedy needs a person at a keyboard.
        closing_error: why the closing model call failed, when it did.
        workaround_calls: failing or refused calls made after the blocker opened.
    """

    subject: str
    kind: Kind
    blocked: str
    user_action: str
    next_step: str
    unblock: str | None = None
    interactive: bool = False
    closing_error: str | None = None
    workaround_calls: int = 0

    @property
    def text(self) -> str:
        """The three parts as the user reads them, one per line, plus any closing error."""
        lines = [f"Blocked: {self.blocked}", f"You need to: {self.user_action}", f"Then: {self.next_step}"]
        if self.closing_error is not None:
            lines.append(f"(The agent's own next step could not be written: {self.closing_error})")
        return "\n".join(lines)


def build_escalation(
    situation: Situation,
    *,
    task: str,
    next_step: str | None = None,
    closing_error: str | None = None,
    workaround_calls: int = 0,
) -> Escalation:
    """Build the escalation for a blocker from its situation's fields.

    Args:
        situation: the blocker's situation (declared fields give the exact unblock).
        task: the turn's task, named in the default third part.
        next_step: part 3 from the closing model call, when it succeeded.
        closing_error: the closing call's error, when it failed; it is shown, and part 3
            falls back to the deterministic default.
        workaround_calls: failing or refused calls made after the blocker opened.
    """
    written = (next_step or "").strip()
    default_next = prompts.NEXT_STEP_DEFAULT.format(subject=situation.subject, task=task.strip())
    return Escalation(
        subject=situation.subject,
        kind=situation.kind,
        blocked=prompts.what_is_blocked(situation),
        user_action=prompts.user_action(situation),
        next_step=written or default_next,
        unblock=situation.unblock,
        interactive=situation.interactive,
        closing_error=closing_error,
        workaround_calls=workaround_calls,
    )
