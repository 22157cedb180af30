from __future__ import annotations

from unstuck.escalation import build_escalation
from unstuck.situations import Kind, Situation, Source

GH_AUTH = Situation(Kind.AUTH, "gh", interactive=True, unblock="gh auth login",
                    detail="To get started with GitHub CLI, please run:  gh auth login")


def test_escalation_has_three_parts_from_the_fields() -> None:
    escalation = build_escalation(GH_AUTH, task="show cli/cli", next_step="I will run gh repo view again.")
    lines = escalation.text.splitlines()
    assert lines[0].startswith("Blocked: gh is not signed in")
    assert lines[1] == "You need to: Run: gh auth login"
    assert lines[2] == "Then: I will run gh repo view again."
    assert escalation.unblock == "gh auth login" and escalation.interactive


def test_failed_closing_call_keeps_parts_one_and_two_and_appends_the_error() -> None:
    escalation = build_escalation(GH_AUTH, task="show cli/cli", closing_error="ModelError: connection refused")
    text = escalation.text
    assert "Blocked: gh is not signed in" in text
    assert "You need to: Run: gh auth login" in text
    assert "Then: Once you have done this, I will re-check gh and continue the task: show cli/cli" in text
    assert text.endswith("(The agent's own next step could not be written: ModelError: connection refused)")


def test_without_an_unblock_the_user_action_says_no_exact_command_was_given() -> None:
    inferred = Situation(Kind.NOT_INSTALLED, "gh", source=Source.INFERRED, detail="gh: command not found")
    escalation = build_escalation(inferred, task="t")
    assert escalation.blocked.startswith("gh is not installed on this machine.")
    assert escalation.user_action == "Install gh (the tool gave no exact command)."
    assert escalation.unblock is None
