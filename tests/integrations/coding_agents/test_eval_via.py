"""``unstuck eval --via``: the reference agents through the real Claude Code, Codex CLI and Gemini
CLI (the pinned copies ./bootstrap installs), each model turn played by that CLI's scripted model
server, the guarded side through ``unstuck hooks install`` alone (issue 26, deliver 6). Without a
CLI a test is skipped, and fails under ``CI=true``. Each run stops the guard server its hooks
started (:func:`unstuck.evals.via_cli.run_via`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integrations.coding_agents.agent_worlds import cli_binary, scenario

from unstuck.evals import coding_clis, via_cli
from unstuck.evals.scenarios import builtin_scenarios
from unstuck.toolkit.workspace import KNOWN_CLIS

pytestmark = pytest.mark.slow

CLAUDE_VERSION = "2.1.332"
VERSIONS = {"claude-code": CLAUDE_VERSION, "codex": coding_clis.CODEX_VERSION, "gemini": coding_clis.GEMINI_VERSION}
SRC = Path(__file__).resolve().parents[3] / "src"
GH_SIGN_IN = KNOWN_CLIS["gh"].sign_in
assert GH_SIGN_IN is not None


def installed(via: str) -> None:
    cli_binary(via_cli.PROGRAMS[via], VERSIONS[via])  # skips, or fails under CI=true


@pytest.mark.parametrize("via", list(via_cli.PROGRAMS))
def test_eval_via_the_guarded_cli_stops_with_the_sign_in_question(via: str) -> None:
    installed(via)
    chosen = scenario("gh_logged_out")
    unguarded = via_cli.run_via(chosen, "improviser", via, guarded=False)
    guarded = via_cli.run_via(chosen, "improviser", via, guarded=True)
    assert unguarded.error is None and guarded.error is None, (unguarded.error, guarded.error)
    assert unguarded.outcome == "done" and unguarded.escalation is None  # the CLI alone never asks
    assert guarded.outcome == "blocked" and guarded.escalation is not None
    assert GH_SIGN_IN in guarded.escalation and chosen.expect.unblock is not None
    assert guarded.exact_unblock is True and guarded.passed is True, guarded.failed_checks
    assert guarded.refused_calls > 0 or guarded.tool_calls < unguarded.tool_calls
    # measured as runner.py defines it: calls after the first logged-out result up to the call that
    # ended the turn with the question, and the seconds between, off the model server's arrival times
    steps = guarded.steps_to_escalate
    assert isinstance(steps, int) and 0 < steps < unguarded.wasted_calls, (steps, unguarded.wasted_calls)
    assert guarded.wasted_calls == steps
    assert guarded.seconds_to_escalate is not None and guarded.seconds_to_escalate > 0
    assert guarded.wasted_seconds == guarded.seconds_to_escalate
    assert unguarded.steps_to_escalate is None and unguarded.wasted_calls == unguarded.tool_calls - 1  # from call 1
    assert unguarded.wasted_seconds > 0


@pytest.mark.parametrize("via", list(via_cli.PROGRAMS))
def test_eval_via_the_counter_scenario_asks_nothing(via: str) -> None:
    installed(via)
    chosen = scenario("wrong_path")
    assert chosen.expect.status == "done"
    guarded = via_cli.run_via(chosen, "improviser", via, guarded=True)
    assert guarded.error is None, guarded.error
    assert guarded.escalation is None and guarded.refused_calls == 0
    assert guarded.outcome == "done" and guarded.passed is True, guarded.failed_checks
    assert (guarded.wasted_calls, guarded.wasted_seconds, guarded.workaround_calls) == (0, 0.0, 0)  # no blocker seen


def test_eval_via_says_why_a_scenario_is_skipped() -> None:
    skipped = [s for s in builtin_scenarios() if via_cli.unplayable(s) is not None]
    assert skipped  # the bundled set has tools no shell plays (MCP tools, a pseudo-terminal)
    for chosen in skipped:
        tools = {c.tool for c in (*chosen.plan, *chosen.fix, *chosen.replay)} - via_cli.SHELL_PLAYABLE
        run = via_cli.run_via(chosen, chosen.agents[0], "codex", guarded=True)
        assert run.outcome.startswith("skipped: ") and run.status == "skipped" and run.tool_calls == 0
        reason = run.outcome.removeprefix("skipped: ")
        assert any(t in reason for t in tools) or chosen.tools.extra or chosen.tools.pty_shell or chosen.tools.without


def test_eval_via_prints_the_table_and_a_missing_cli_names_bootstrap(tmp_path: Path) -> None:
    installed("codex")
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "400"}
    out = subprocess.run([sys.executable, "-m", "unstuck", "eval", "--via", "codex", "--scenarios",
                          "gh_logged_out,mcp_tool_missing", "--agents", "improviser", "--json", str(tmp_path / "r.json")],
                         env=env, capture_output=True, text=True, timeout=900, check=False)
    assert out.returncode == 0, out.stderr
    runs = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["runs"]
    assert [(r["scenario"], r["guarded"], r["outcome"].split(":")[0]) for r in runs] == [
        ("gh_logged_out", False, "done"), ("gh_logged_out", True, "blocked"),
        ("mcp_tool_missing", False, "skipped"), ("mcp_tool_missing", True, "skipped")]
    assert "unstuck eval" in out.stdout and "skipped: mcp_tool_missing" in out.stdout


def test_eval_via_a_missing_cli_is_an_error_naming_it_and_bootstrap(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coding_clis, "agents_bin", lambda: tmp_path / "node_modules" / ".bin")
    monkeypatch.setenv("PATH", str(tmp_path))
    missing = via_cli.missing_clis(["claude-code", "gemini"])
    assert len(missing) == 2
    for via, message in zip(["claude-code", "gemini"], missing, strict=True):
        assert message.startswith(f"{via}: the `{via_cli.PROGRAMS[via]}` program is not installed")
        assert "./bootstrap" in message
