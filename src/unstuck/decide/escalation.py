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

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from unstuck.core.situations import Kind, Situation
from unstuck.core.text import for_terminal, quote_evidence
from unstuck.decide import prompts
from unstuck.recognise.instructions import Use, screen_instruction

__all__ = ["Answer", "Escalation", "EscalationReason", "build_escalation", "recount_escalation", "same_text",
           "unsafe_fix"]


class EscalationReason(enum.StrEnum):
    """Why a turn escalates."""

    BLOCKED = "blocked"  # a blocker's workaround budget ran out
    REPEATED_FAILURE = "repeated_failure"  # the same call failed PolicyConfig.repetition times in a row
    FAILING_STREAK = "failing_streak"  # PolicyConfig.failures_in_a_row calls in a row failed, whatever they were
    UNKNOWN_TOOL = "unknown_tool"  # calls to tools that are not in the tool set



class Answer(enum.Enum):
    """The user's reply to an escalation (DESIGN.md, "What the user sees")."""

    DONE = "I've done it"
    SKIP = "Skip it"
    STOP = "Stop"


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
        reason: ``blocked`` (a blocker's budget ran out, or the agent answered with one open
            and did not confirm it finished without it), ``repeated_failure`` or
            ``unknown_tool`` (the agent is stuck).
        refused: unstuck's own refusals this turn, listed beside the question (never
            instead of the blocker a tool reported).
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
    reason: EscalationReason = EscalationReason.BLOCKED
    refused: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The three parts as the user reads them, one per line, plus unstuck's refusals and
        any closing error.

        Each part is made safe to show (:func:`unstuck.core.text.for_terminal`: no control or escape
        sequence, no bidirectional override) and kept on its one line (a line break inside a
        part becomes a space), so no text inside a part can move the cursor, hide the "You
        need to:" line or add a line that looks like one of unstuck's. :meth:`to_dict` keeps
        every field exact. It reads only the fields :func:`same_text` compares."""
        lines = [f"Blocked: {_one_line(self.blocked)}", f"You need to: {_one_line(self.user_action)}",
                 f"Then: {_one_line(self.next_step)}"]
        if self.refused:
            shown = [prompts.excerpt(for_terminal(r.removeprefix("Not executed: ")), 160) for r in self.refused]
            lines.append(prompts.REFUSED_BESIDE.format(refusals=" | ".join(shown)))
        if self.closing_error is not None:
            lines.append(f"(The agent's own next step could not be written: {_one_line(self.closing_error)})")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of every field (:meth:`from_dict` reads it back)."""
        return {"subject": self.subject, "kind": self.kind.value, "blocked": self.blocked,
                "user_action": self.user_action, "next_step": self.next_step, "unblock": self.unblock,
                "interactive": self.interactive, "closing_error": self.closing_error,
                "workaround_calls": self.workaround_calls, "reason": self.reason.value, "refused": list(self.refused)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Escalation:
        """Read :meth:`to_dict`'s output.

        Raises:
            ValueError: naming what is malformed.
        """
        try:
            return cls(str(raw["subject"]), Kind(raw["kind"]), str(raw["blocked"]), str(raw["user_action"]),
                       str(raw["next_step"]), raw.get("unblock"), bool(raw.get("interactive", False)),
                       raw.get("closing_error"), int(raw.get("workaround_calls", 0)),
                       EscalationReason(raw.get("reason", "blocked")),
                       tuple(map(str, raw.get("refused", []))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a saved escalation is malformed: {type(exc).__name__}: {exc}") from None


def _one_line(part: str) -> str:
    """``part`` safe for a terminal (:func:`unstuck.core.text.for_terminal`) and on one line."""
    return " ".join(line.strip() for line in for_terminal(part).strip().split("\n") if line.strip())


def unsafe_fix(text: str) -> str | None:
    """Why a tool's fix (a declared unblock, a suggested command) must not be repeated at all,
    neither as the user's action nor quoted, nor remembered, or ``None`` when it may be: what
    :func:`unstuck.recognise.instructions.screen_instruction` refuses (a line that reads as an
    instruction to the agent, a command that runs what it downloads, hidden characters, a
    command the command screen refuses: a secret sent over the network, a write to a trust
    file, …). One screen for the question and for memory (issue 12, deliver 1; issue 23,
    deliver 4). A fix the screen keeps only as evidence is not refused here: it is quoted as
    the tool's words (:func:`unstuck.decide.prompts.user_action`) and never stored as an unblock."""
    screened = screen_instruction(text)
    return screened.reason if screened.use is Use.REFUSED else None


def build_escalation(
    situation: Situation,
    *,
    task: str,
    next_step: str | None = None,
    closing_error: str | None = None,
    workaround_calls: int = 0,
    reason: EscalationReason = EscalationReason.BLOCKED,
    evidence: str = "",
    count: int = 0,
    refused: tuple[str, ...] = (),
) -> Escalation:
    """Build the escalation for a blocker from its situation's fields.

    Args:
        situation: the blocker's situation (declared fields give the exact unblock).
        task: the turn's task, named in the default third part.
        next_step: part 3 from the closing model call, when it succeeded.
        closing_error: the closing call's error, when it failed; it is shown, and part 3
            falls back to the deterministic default.
        workaround_calls: failing or refused calls made after the blocker opened.
        reason: why the turn escalates (``blocked``, ``repeated_failure``, ``unknown_tool``);
            a stuck turn's parts 1 and 2 say so
            (:data:`unstuck.decide.prompts.STUCK_WHAT`), quoting ``evidence`` (bounded).
        evidence: the failing call's result, for a stuck turn.
        count: the calls the stuck pattern spans.
        refused: unstuck's own refusals this turn, listed beside the question.

    A declared unblock or a suggested command that :func:`unsafe_fix` refuses (it downloads and
    runs code, reads as an instruction to the agent, or fails the command screen) is left out
    of the question (and is no :attr:`Escalation.unblock`),
    with :data:`unstuck.decide.prompts.UNSAFE_FIX_NOTE` saying so (issue 12, deliver 1: the screen
    runs on every text that reaches a question). A declared unblock that is neither a command
    nor one plain sentence (:func:`unstuck.recognise.instructions.screen_instruction`: evidence) is
    quoted as the tool's words (:data:`unstuck.decide.prompts.DECLARED_FIX_QUOTE`) and is no
    :attr:`Escalation.unblock` either (issue 23, deliver 4).
    """
    unsafe = [text for text in (situation.unblock, situation.suggestion) if text and unsafe_fix(text)]
    if unsafe:  # shown to a person, never as the exact unblock: screened as a lesson is
        situation = replace(situation, unblock=None if situation.unblock in unsafe else situation.unblock,
                            suggestion=None if situation.suggestion in unsafe else situation.suggestion)
    exact = situation.unblock if situation.unblock and screen_instruction(situation.unblock).accepted else None
    written = (next_step or "").strip()
    default_next = prompts.NEXT_STEP_DEFAULT.format(subject=situation.subject, task=task.strip() or "as asked")
    blocked = prompts.what_is_blocked(situation)
    action = prompts.user_action(situation) + (prompts.UNSAFE_FIX_NOTE if unsafe else "")
    if reason.value in prompts.STUCK_WHAT:
        quoted = quote_evidence(evidence or situation.detail, 300)
        blocked = prompts.STUCK_WHAT[reason.value].format(count=count, evidence=quoted, subject=situation.subject)
        action = prompts.STUCK_ACTION.get(reason.value, action)
    return Escalation(
        subject=situation.subject,
        kind=situation.kind,
        blocked=blocked,
        user_action=action,
        next_step=written or default_next,
        unblock=exact,
        interactive=situation.interactive,
        closing_error=closing_error,
        workaround_calls=workaround_calls,
        reason=reason,
        refused=refused,
    )


def recount_escalation(escalation: Escalation, situation: Situation, *, workaround_calls: int, count: int = 0,
                       evidence: str = "") -> Escalation:
    """``escalation`` (what :func:`build_escalation` built for ``situation``) with other counts:
    equal to :func:`build_escalation` of the same situation, task, next step, closing error,
    reason and refusals given ``workaround_calls``, ``count`` and ``evidence``, without
    screening the situation's fixes again (only a stuck turn's part 1 names the count and the
    evidence; every other part is the situation's). A latched turn whose later calls are
    charged asks the same question with a larger count."""
    blocked = escalation.blocked
    if escalation.reason.value in prompts.STUCK_WHAT:
        quoted = quote_evidence(evidence or situation.detail, 300)
        blocked = prompts.STUCK_WHAT[escalation.reason.value].format(count=count, evidence=quoted,
                                                                     subject=situation.subject)
    if blocked == escalation.blocked and workaround_calls == escalation.workaround_calls:
        return escalation
    return replace(escalation, blocked=blocked, workaround_calls=workaround_calls)


def same_text(first: Escalation, second: Escalation) -> bool:
    """Whether ``first.text == second.text``, told from the fields :attr:`Escalation.text`
    reads, without rendering either (a question recounted with a larger count reads the same)."""
    return (first.blocked, first.user_action, first.next_step, first.refused, first.closing_error) == (
        second.blocked, second.user_action, second.next_step, second.refused, second.closing_error)
