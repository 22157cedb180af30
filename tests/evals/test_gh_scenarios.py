"""End to end: the bundled scenarios with the real gh, real subprocesses, reference agents."""

from __future__ import annotations

import pytest

from unstuck.core.situations import Kind
from unstuck.evals.runner import run_scenario
from unstuck.evals.scenarios import Scenario, builtin_scenarios
from unstuck.loop.turn import TurnStatus


@pytest.fixture(scope="module")
def scenarios() -> dict[str, Scenario]:
    return {s.name: s for s in builtin_scenarios()}


def test_guarded_improviser_on_gh_logged_out_asks_within_three_calls(scenarios: dict[str, Scenario], gh_path: str) -> None:
    result, metrics = run_scenario(scenarios["gh_logged_out"], "improviser", guarded=True)
    assert result.status is TurnStatus.BLOCKED
    assert metrics.steps_to_escalate is not None and metrics.steps_to_escalate <= 3
    assert result.escalation is not None and "gh auth login" in result.escalation.text
    assert result.escalation.kind is Kind.AUTH and result.escalation.subject == "gh"
    interactive_runs = [s for s in result.steps if s.call.tool == "sign_in_cli" and s.dispatched]
    assert interactive_runs == [], "no interactive tool may run unattended"
    assert any(s.call.tool == "sign_in_cli" and not s.dispatched for s in result.steps)


def test_unguarded_improviser_on_gh_logged_out_wastes_at_least_ten_calls(scenarios: dict[str, Scenario], gh_path: str) -> None:
    result, metrics = run_scenario(scenarios["gh_logged_out"], "improviser", guarded=False)
    assert result.tool_calls >= 10
    assert result.escalation is None and metrics.outcome == "gave up"
    assert any(s.call.tool == "sign_in_cli" and s.dispatched for s in result.steps)


def test_gh_missing_escalation_names_gh_as_not_installed(scenarios: dict[str, Scenario]) -> None:
    result, _ = run_scenario(scenarios["gh_missing"], "improviser", guarded=True)
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.kind is Kind.NOT_INSTALLED and result.escalation.subject == "gh"
    assert "gh is not installed on this machine" in result.escalation.text
    assert "command not found" in result.escalation.text


@pytest.mark.parametrize("agent", next(s for s in builtin_scenarios() if s.name == "wrong_path").agents)
@pytest.mark.parametrize("guarded", [True, False])
def test_wrong_path_is_done_without_asking_for_every_agent(scenarios: dict[str, Scenario], agent: str, guarded: bool) -> None:
    result, metrics = run_scenario(scenarios["wrong_path"], agent, guarded=guarded)
    assert result.status is TurnStatus.DONE and result.escalation is None
    assert "pip install example-tool==2.1" in result.answer
    assert metrics.outcome == "done"
