"""The replay agent and the tool sets scenarios state (issue 14, deliver 2 and 3).

Real parts only: the real gh (signed out: an empty GH_CONFIG_DIR), bash scripts run as leased
subprocesses in a sandbox, and a real pseudo-terminal for the PTY shell.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from unstuck.core.situations import Kind
from unstuck.core.tools import ToolCall
from unstuck.decide.policy import PolicyConfig
from unstuck.evals.agents import REPLAY_ANSWER, Replay, make_agent
from unstuck.evals.runner import prepare_sandbox, run_scenario
from unstuck.evals.scenario_tools import TOOL_ARGS_VARIABLE, scenario_tools
from unstuck.evals.scenarios import ExtraTool, Scenario, ScenarioError, ToolChoice, load_scenario
from unstuck.loop.turn import TurnResult, TurnStatus
from unstuck.toolkit.workspace import STANDARD_TOOL_NAMES, TIMEOUT_EXIT_CODE

needs_gh = pytest.mark.skipif(shutil.which("gh") is None, reason="needs the real gh")

#: Six calls around a signed-out gh, as an improvising agent made them (the reference incident's
#: shape: the failing call, the API by other routes, the sign-in state, the environment, again).
SIGNED_OUT_REPLAY = """\
name: replay_gh_signed_out
role: blocker
setup: {gh: logged_out}
task: "What is the description of the GitHub repository cli/cli? Use the GitHub CLI."
plan:
  - {tool: run_command, args: {command: "gh repo view cli/cli --json description"}}
replay:
  - {tool: run_command, args: {command: "gh repo view cli/cli --json description"}}
  - {tool: run_command, args: {command: "gh api repos/cli/cli"}}
  - {tool: run_command, args: {command: "curl -sS https://api.github.com/repos/cli/cli"}}
  - {tool: run_command, args: {command: "gh auth status"}}
  - {tool: run_command, args: {command: "env | grep -i token"}}
  - {tool: run_command, args: {command: "gh repo view cli/cli"}}
replay_answer: "The description is: GitHub's official command line tool"
agents: [compliant]
expect: {status: blocked, kind: auth, subject: gh}
"""

#: No standard tool; one tool that is a script and one that is a recorded result.
EXTRA_TOOLS = """\
name: extra_tools_only
role: counter
task: "Deploy to production and report the CI status."
tools:
  standard: false
  extra:
    deploy:
      description: "Deploy the current build."
      script: |
        touch deployed.flag
        echo "deploying with $UNSTUCK_TOOL_ARGS"
        echo "error: quota exceeded for project demo" >&2
      exit: 3
    ci_status: {result: "HTTP 503 Service Unavailable: the CI API is down", ok: false}
plan:
  - {tool: deploy, args: {env: prod}}
replay:
  - {tool: deploy, args: {env: prod}}
  - {tool: ci_status}
  - {tool: run_command, args: {command: "echo hello"}}
agents: [replay]
expect: {status: done}
"""


def write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def model_calls(result: TurnResult) -> list[ToolCall]:
    """The calls the model made, in order (the guard's probes and retries left out)."""
    return [s.call for s in result.steps if not s.probe and not s.retry]


def same_calls(made: list[ToolCall], recorded: tuple[ToolCall, ...]) -> bool:
    return [(c.tool, c.arguments_json) for c in made] == [(c.tool, c.arguments_json) for c in recorded]


# -- the format --------------------------------------------------------------------------------


def test_a_scenario_with_replay_gets_the_replay_agent_added(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, SIGNED_OUT_REPLAY))
    assert scenario.agents == ("compliant", "replay")
    assert len(scenario.replay) == 6 and scenario.replay[2].arguments["command"].startswith("curl")
    assert scenario.replay_answer == "The description is: GitHub's official command line tool"


def test_a_scenario_without_replay_keeps_todays_agents_and_tools(tmp_path: Path) -> None:
    text = SIGNED_OUT_REPLAY.split("replay:")[0] + "expect: {status: blocked, kind: auth}\n"
    scenario = load_scenario(write(tmp_path, text.replace("agents: [compliant]\n", "")))
    assert scenario.agents == ("improviser", "retrier", "compliant")
    assert scenario.replay == () and scenario.replay_answer is None
    assert scenario.tools == ToolChoice() and scenario.tools.standard_names == STANDARD_TOOL_NAMES


def test_a_plan_and_a_replay_may_call_the_declared_tools(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, EXTRA_TOOLS))
    assert scenario.plan[0].tool == "deploy"
    assert scenario.tools.standard_names == ()
    assert scenario.tools.extra == (
        ExtraTool("deploy", script='touch deployed.flag\necho "deploying with $UNSTUCK_TOOL_ARGS"\n'
                  'echo "error: quota exceeded for project demo" >&2\n', exit_code=3,
                  description="Deploy the current build."),
        ExtraTool("ci_status", result="HTTP 503 Service Unavailable: the CI API is down", ok=False),
    )


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (("agents: [replay]", "agents: [replay]\nreplay: []"), "agents", "no replay: calls"),
        (("standard: false", "standard: false\n  without: [run_shell]"), "tools.without[0]", "unknown tool 'run_shell'"),
        (("standard: false", "standard: maybe"), "tools.standard", "true or false"),
        (("exit: 3", "exit: 300"), "tools.extra.deploy.exit", "0 to 255"),
        (("ok: false}", "ok: false, script: 'true'}"), "tools.extra.ci_status", "exactly one of script"),
        (("    deploy:\n", "    deploy now:\n"), "tools.extra.deploy now", "1 to 64 letters"),
        (("  - {tool: ci_status}", "  - {tool: ci_stats}"), "replay[1].tool", "unknown tool 'ci_stats'"),
        (("standard: false", "standard: true\n  pty_shell: true\n  without: [run_command]"), "tools.pty_shell",
         "cannot be left out"),
    ],
)
def test_a_malformed_replay_or_tool_set_is_named_by_file_and_field(
    tmp_path: Path, change: tuple[str, str], field: str, problem: str
) -> None:
    text = EXTRA_TOOLS.replace(*change)
    if change[0] == "agents: [replay]":  # a replay agent listed, no calls to play
        text = text.split("replay:\n  - {tool: deploy")[0] + "agents: [replay]\nexpect: {status: done}\n"
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert str(path) in str(raised.value)
    assert f"field {field!r}" in str(raised.value) and problem in str(raised.value)


def test_an_extra_tool_may_replace_only_a_standard_tool_left_out(tmp_path: Path) -> None:
    kept = EXTRA_TOOLS.replace("standard: false\n", "standard: true\n").replace("deploy:", "read_file:").replace(
        "tool: deploy", "tool: read_file")
    with pytest.raises(ScenarioError, match="tools.extra.read_file.*standard tool the scenario keeps"):
        load_scenario(write(tmp_path, kept))
    left_out = kept.replace("standard: true\n", "standard: true\n  without: [read_file]\n")
    assert load_scenario(write(tmp_path, left_out)).tools.extra[0].name == "read_file"


def test_the_replay_agent_needs_recorded_calls() -> None:
    plan = (ToolCall.of("p", "run_command", {"command": "true"}),)
    with pytest.raises(ValueError, match="replay: calls"):
        make_agent("replay", plan)
    agent = make_agent("replay", plan, replay=plan)
    assert isinstance(agent, Replay) and agent.answer == REPLAY_ANSWER


# -- the replay, unguarded and guarded ------------------------------------------------------------


@needs_gh
def test_unguarded_replay_runs_every_recorded_call_whatever_comes_back(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, SIGNED_OUT_REPLAY))
    result, metrics = run_scenario(scenario, "replay", guarded=False)
    assert same_calls(model_calls(result), scenario.replay)
    assert all(s.dispatched for s in result.steps)
    # gh signed out: `gh repo view` says to run gh auth login and fails; the replay went on anyway
    first = result.steps[0]
    assert not first.ok and "gh auth login" in first.content
    assert result.status is TurnStatus.DONE and result.answer == scenario.replay_answer
    assert metrics.tool_calls == len(scenario.replay)


@needs_gh
def test_guarded_replay_stops_within_the_workaround_budget(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, SIGNED_OUT_REPLAY))
    result, _ = run_scenario(scenario, "replay", guarded=True)
    assert result.status is TurnStatus.BLOCKED
    assert result.escalation is not None and result.escalation.kind is Kind.AUTH and result.escalation.subject == "gh"
    made = model_calls(result)
    assert len(made) < len(scenario.replay)
    assert same_calls(made, scenario.replay[: len(made)])  # played in order, never reacting
    first = next(i for i, s in enumerate(result.steps) if s.situation is not None and not s.probe)
    after = [s for s in result.steps[first + 1:] if not s.probe and not s.retry]
    # the guard's probe (check_cli_setup) declares the sign-in blocker, so the declared budget
    # applies; the policy escalates when the count passes it (policy.py: workarounds > budget)
    assert any(s.probe and s.call.tool == "check_cli_setup" for s in result.steps)
    assert len(after) <= PolicyConfig().max_workarounds_after_blocker + 1


# -- the tool sets --------------------------------------------------------------------------------


def test_extra_tools_run_a_real_script_and_return_a_recorded_result(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, EXTRA_TOOLS))
    box = tmp_path / "box"
    result, _ = run_scenario(scenario, "replay", guarded=False, sandbox_root=box, keep_sandbox=True)
    assert same_calls(model_calls(result), scenario.replay)
    deploy, ci, shell = result.steps
    assert (box / "work" / "deployed.flag").is_file()  # the script ran in the sandbox's work directory
    assert not deploy.ok
    assert f"deploying with {json.dumps({'env': 'prod'})}" in deploy.content
    assert "error: quota exceeded for project demo" in deploy.content and "(exit code 3)" in deploy.content
    assert not ci.ok and ci.content.startswith("HTTP 503 Service Unavailable: the CI API is down")
    assert not shell.ok and "No tool named 'run_command'" in shell.content  # the standard tools are gone
    assert result.answer == REPLAY_ANSWER


def test_the_tool_set_keeps_the_standard_order_minus_the_left_out_then_the_extra(tmp_path: Path) -> None:
    text = EXTRA_TOOLS.replace("standard: false\n", "standard: true\n  without: [web_search, fetch_url]\n")
    scenario = load_scenario(write(tmp_path, text))
    with prepare_sandbox(scenario) as box:
        tools = scenario_tools(scenario, box.workspace())
    expected = [n for n in STANDARD_TOOL_NAMES if n not in ("web_search", "fetch_url")] + ["deploy", "ci_status"]
    assert list(tools) == expected
    assert TOOL_ARGS_VARIABLE == "UNSTUCK_TOOL_ARGS"


PAGER = """\
name: pager_under_pty
role: counter
setup:
  files: {notes.txt: "PLACEHOLDER"}
tools: {pty_shell: true}
task: "Show notes.txt."
plan:
  - {tool: run_command, args: {command: "less notes.txt"}}
expect: {status: done}
"""


def _pager_scenario(tmp_path: Path, pty: bool) -> Scenario:
    lines = "".join(f"line {n}\\n" for n in range(400))  # more than a screen: less waits at its prompt
    text = PAGER.replace("PLACEHOLDER", lines)
    if not pty:
        text = text.replace("tools: {pty_shell: true}\n", "")
    return load_scenario(write(tmp_path, text))


@pytest.mark.skipif(shutil.which("less") is None, reason="needs less")
def test_pty_shell_pager_waits_and_is_named_as_waiting_for_input(tmp_path: Path) -> None:
    scenario = _pager_scenario(tmp_path, pty=True)
    assert scenario.tools.pty_shell
    with prepare_sandbox(scenario) as box:
        run_command = scenario_tools(scenario, box.workspace())["run_command"]
        assert run_command.terminal  # the guard judges its calls as a terminal's
        result = run_command.invoke({"command": "less notes.txt", "timeout_s": 1.0})
    assert result.exit_code == TIMEOUT_EXIT_CODE
    assert result.waiting_for_input == "less"
    assert "less was waiting for input at the deadline" in result.content


@pytest.mark.skipif(shutil.which("less") is None, reason="needs less")
def test_without_the_pty_shell_the_same_pager_copies_its_file_and_ends(tmp_path: Path) -> None:
    scenario = _pager_scenario(tmp_path, pty=False)
    with prepare_sandbox(scenario) as box:
        run_command = scenario_tools(scenario, box.workspace())["run_command"]
        result = run_command.invoke({"command": "less notes.txt", "timeout_s": 5.0})
    # less(1): when standard output is not a terminal, less behaves like cat
    assert result.ok and result.waiting_for_input is None and "line 399" in result.content


@pytest.mark.skipif(shutil.which("less") is None or shutil.which("git") is None, reason="needs git and less")
def test_pty_shell_git_log_opens_its_pager_and_the_pager_is_named_waiting(tmp_path: Path) -> None:
    scenario = _pager_scenario(tmp_path, pty=True)
    history = ("git init -q . && for n in $(seq 60); do git -c user.name=t -c user.email=t@example.invalid "
               "commit -q --allow-empty -m \"change $n\"; done")
    with prepare_sandbox(scenario) as box:
        run_command = scenario_tools(scenario, box.workspace())["run_command"]
        assert run_command.invoke({"command": history, "timeout_s": 30.0}).ok
        # git-config(1) core.pager: with PAGER unset git runs `less`; 60 commits fill more than a screen
        result = run_command.invoke({"command": "PAGER=less git log", "timeout_s": 1.5})
    assert result.exit_code == TIMEOUT_EXIT_CODE and result.waiting_for_input == "less"
    # the sandbox's TERM=dumb: less warns "terminal is not fully functional" and waits for RETURN first
    assert "Press RETURN to continue" in result.content
