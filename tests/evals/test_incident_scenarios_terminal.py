"""The bundled incident scenarios of prompts on a terminal and of MCP tools that fail or are
absent (shared/cases/incidents.jsonl i024, i025, i027, i037, i038): the machine state each one
builds is real (a stand-in that really waits on a pseudo-terminal, a real rebase in progress,
the MCP SDK's error), and what the guard does with it.

The terminal deadlines are short (the plans' ``timeout_s`` of 1 s): a run waits that long, for real.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from unstuck.core.situations import Kind
from unstuck.core.tools import ToolCall
from unstuck.decide.outcome import Verdict
from unstuck.evals.agents import make_agent
from unstuck.evals.runner import prepare_sandbox, run_scenario
from unstuck.evals.scenario_tools import scenario_tools
from unstuck.evals.scenarios import Scenario, builtin_scenarios, load_scenario
from unstuck.loop.turn import TurnStatus
from unstuck.recognise.classify import explain_result
from unstuck.toolkit.workspace import TIMEOUT_EXIT_CODE

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

#: pnpm's own words (pnpm/pnpm pkg-manager/core/src/install/validateModules.ts).
PNPM_PROMPT = "The modules directories will be removed and reinstalled from scratch. Proceed? (Y/n)"
PNPM_NO_TTY = "ERR_PNPM_ABORTED_REMOVE_MODULES_DIR_NO_TTY"
#: What an MCP client raises when the server's transport closes (typescript-sdk src/shared/protocol.ts
#: _onclose(): McpError(ErrorCode.ConnectionClosed = -32000, 'Connection closed'), whose message is
#: `MCP error ${code}: ${message}`).
MCP_CONNECTION_CLOSED = "MCP error -32000: Connection closed"
#: git's commit template (git builtin/commit.c prepare_to_commit(), the cleanup hint).
GIT_TEMPLATE = "with '#' will be ignored, and an empty message aborts the commit."


def bundled(name: str) -> Scenario:
    return next(s for s in builtin_scenarios() if s.name == name)


# -- confirmation_prompt_pty (i025, i024) ---------------------------------------------------------


def test_pnpm_stand_in_waits_at_its_prompt_on_a_pty_and_its_non_interactive_form_completes() -> None:
    scenario = bundled("confirmation_prompt_pty")
    assert scenario.tools.pty_shell and scenario.role.value == "counter"
    with prepare_sandbox(scenario) as box:
        run_command = scenario_tools(scenario, box.workspace())["run_command"]
        waited = run_command.invoke({"command": "pnpm install", "timeout_s": 1.0})
        assert waited.exit_code == TIMEOUT_EXIT_CODE and waited.waiting_for_input == "pnpm"
        assert PNPM_PROMPT in waited.content and "pnpm was waiting for input at the deadline" in waited.content
        assert (box.work / "node_modules" / ".modules.yaml").exists()  # nothing was purged while it waited
        fixed = run_command.invoke({"command": scenario.fix[0].arguments["command"], "timeout_s": 20.0})
        assert fixed.ok and "Done in" in fixed.content and PNPM_PROMPT not in fixed.content
        assert (box.work / "node_modules" / ".pnpm" / "lock.yaml").is_file()


def test_pnpm_stand_in_without_a_terminal_fails_fast_as_pnpm_does() -> None:
    scenario = bundled("confirmation_prompt_pty")
    with prepare_sandbox(scenario) as box:
        out = box.workspace().run("pnpm install", timeout_s=20.0)  # no terminal: stdin is not a TTY
    assert out.exit_code == 1 and PNPM_NO_TTY in out.stderr


def test_a_prompt_waiting_on_a_pty_is_interactive_and_names_pnpms_own_option() -> None:
    scenario = bundled("confirmation_prompt_pty")
    with prepare_sandbox(scenario) as box:
        run_command = scenario_tools(scenario, box.workspace())["run_command"]
        args = {"command": "pnpm install", "timeout_s": 1.0}
        found = explain_result(run_command, args, run_command.invoke(args))
    situation = found.situation
    assert situation is not None and situation.kind is Kind.INVALID_ARGS  # not a timeout that waiting fixes
    assert situation.interactive and not situation.retryable
    assert "pnpm install, with --config.confirmModulesPurge=false" in situation.detail


def test_guarded_agents_run_pnpm_the_non_interactive_way_and_are_done() -> None:
    scenario = bundled("confirmation_prompt_pty")
    result, metrics = run_scenario(scenario, "compliant")
    assert result.status is TurnStatus.DONE and result.escalation is None
    assert [v.verdict for v in metrics.validations] == [Verdict.PASSED]
    assert [step.call.arguments["command"] for step in result.steps] == [
        "pnpm install", "pnpm install --config.confirmModulesPurge=false"]


# -- git_rebase_editor (i027) ---------------------------------------------------------------------


@needs_git
def test_the_rebase_is_in_progress_after_setup_and_the_editor_waits_on_the_terminal() -> None:
    scenario = bundled("git_rebase_editor")
    with prepare_sandbox(scenario) as box:
        assert (box.work / ".git" / "rebase-merge").is_dir()
        staged = box.workspace().run("git diff --cached --name-only", timeout_s=20.0)
        assert staged.stdout.split() == ["README.md"]
        run_command = scenario_tools(scenario, box.workspace())["run_command"]
        waited = run_command.invoke({"command": "git rebase --continue", "timeout_s": 1.0})
        assert waited.exit_code == TIMEOUT_EXIT_CODE and waited.waiting_for_input == "vi"
        assert GIT_TEMPLATE in waited.content  # the editor shows git's commit template, as in i027
        assert (box.work / ".git" / "rebase-merge").is_dir()
        fixed = run_command.invoke({"command": "GIT_EDITOR=true git rebase --continue", "timeout_s": 20.0})
        assert fixed.ok and "Successfully rebased" in fixed.content
        assert not (box.work / ".git" / "rebase-merge").exists()


@needs_git
def test_guarded_rebase_continue_is_refused_before_it_runs_naming_git_editor_true() -> None:
    scenario = bundled("git_rebase_editor")
    result, metrics = run_scenario(scenario, "improviser")
    first = result.steps[0]
    assert not first.dispatched and first.situation is not None and first.situation.interactive
    assert "Run it so that it does not wait: GIT_EDITOR=true git rebase --continue" in first.content
    assert result.status is TurnStatus.DONE
    assert [v.verdict for v in metrics.validations] == [Verdict.PASSED] * 2


# -- mcp_server_not_connected (i038) -------------------------------------------------------------


def test_the_mcp_tool_returns_the_sdks_connection_closed_error_read_as_unavailable() -> None:
    scenario = bundled("mcp_server_not_connected")
    call = scenario.plan[0]
    with prepare_sandbox(scenario) as box:
        tool = scenario_tools(scenario, box.workspace())[call.tool]
        result = tool.invoke(dict(call.arguments))
    assert not result.ok and MCP_CONNECTION_CLOSED in result.content
    situation = explain_result(tool, call.arguments, result).situation
    assert situation is not None and situation.kind is Kind.UNAVAILABLE and situation.retryable
    assert situation.subject == call.tool


def test_a_retrier_on_a_closed_mcp_server_is_stopped_blocked_on_the_tool() -> None:
    scenario = bundled("mcp_server_not_connected")
    unguarded, _ = run_scenario(scenario, "retrier", guarded=False)
    guarded, metrics = run_scenario(scenario, "retrier")
    assert len(unguarded.steps) == 13  # the first call and max_repeats (12) repeats
    assert guarded.status is TurnStatus.BLOCKED and guarded.escalation is not None
    assert (guarded.escalation.kind, guarded.escalation.subject) == (Kind.UNAVAILABLE, scenario.plan[0].tool)
    assert len(guarded.steps) < len(unguarded.steps) and metrics.violations == 0


# -- a tool that is absent (i037) ----------------------------------------------------------------

ABSENT_TOOL = """\
name: github_mcp_absent
role: blocker
task: "Post the comment 'Fixed in #42' on issue 7 of acme/app with mcp_github_add_issue_comment."
plan:
  - {tool: run_command, args: {command: "true"}}
expect: {status: blocked, kind: invalid_args}
"""


def test_a_call_to_an_absent_mcp_tool_gets_the_loops_answer_and_repeats_end_blocked(tmp_path: Path) -> None:
    # the scenario format lets a plan name only standard or declared tools, so the calls to the
    # tool the failed server would have offered are played by the replay agent directly
    path = tmp_path / "absent.yaml"
    path.write_text(ABSENT_TOOL, encoding="utf-8")
    scenario = load_scenario(path)
    absent = ToolCall.of("r", "mcp_github_add_issue_comment", {"owner": "acme", "repo": "app", "issue_number": 7,
                                                                "body": "Fixed in #42"})
    model = make_agent("replay", scenario.plan, replay=(absent, absent, absent))
    result, _ = run_scenario(scenario, "replay", model=model)
    first = result.steps[0]
    assert first.content.startswith("No tool named 'mcp_github_add_issue_comment'. Available tools: ")
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.subject == "mcp_github_add_issue_comment"
    assert len(result.steps) < 3  # stopped before the third call to a tool that is not there
