"""The harness's verdicts on real runs: real sandboxes, real commands, the reference agents."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unstuck.evals.runner import run_eval, run_scenario
from unstuck.evals.scenarios import Scenario, builtin_scenarios, load_scenario
from unstuck.loop.turn import TurnStatus

COUNTER = """\
name: {name}
role: counter
task: "What does a.md say?"
setup:
  files: {{a.md: "the answer is 42\\n"}}
plan:
{plan}
agents: [compliant]
expect:
  status: done
{expect}
"""


def scenario(tmp_path: Path, expect: str = "", plan: str = "  - {tool: read_file, args: {path: a.md}}",
             name: str = "mine") -> Scenario:
    path = tmp_path / f"{name}.yml"
    path.write_text(COUNTER.format(name=name, plan=plan, expect=expect), encoding="utf-8")
    return load_scenario(path)


def bundled(name: str) -> Scenario:
    return next(s for s in builtin_scenarios() if s.name == name)


def test_a_false_done_unguarded_is_caught_by_its_validator(tmp_path: Path) -> None:
    # the task asks for a file the agent never writes: it still answers, so the bare turn is done
    chosen = scenario(tmp_path, "  validators: ['test -f summary.txt']")
    result, metrics = run_scenario(chosen, "compliant", guarded=False)
    assert result.status is TurnStatus.DONE and metrics.outcome == "done"
    assert metrics.validator == "failed" and metrics.false_completion
    assert metrics.validations[0].evidence.startswith("exit 1")  # test(1): 1 when the file does not exist


def test_the_guarded_turn_checks_the_validators_so_a_false_done_is_failed(tmp_path: Path) -> None:
    chosen = scenario(tmp_path, "  validators: ['test -f summary.txt']")
    result, metrics = run_scenario(chosen, "compliant", guarded=True)
    assert result.status is TurnStatus.FAILED and metrics.outcome == "failed"
    assert [v.name for v in result.validations] == ["test -f summary.txt"]
    assert metrics.validator == "failed" and not metrics.false_completion
    assert metrics.passed is False  # expected done: a failed turn does not meet it
    expected_failed = dataclasses.replace(chosen, expect=dataclasses.replace(chosen.expect, status="failed"))
    _, metrics = run_scenario(expected_failed, "compliant", guarded=True)
    assert metrics.passed is True  # a scenario that states the false done: the guard turns it into failed


def test_an_unguarded_run_is_as_stated_by_status_and_least_calls(tmp_path: Path) -> None:
    # the compliant agent reads a.md once and answers: done after 1 call
    for stated, expected in (("{status: done, min_calls: 1}", True), ("{status: done, min_calls: 2}", False),
                             ("{status: failed, min_calls: 0}", False)):
        path = tmp_path / "stated.yaml"
        path.write_text(COUNTER.format(name="stated", plan="  - {tool: read_file, args: {path: a.md}}", expect="")
                        + f"unguarded:\n  compliant: {stated}\n", encoding="utf-8")
        chosen = load_scenario(path)
        _, bare = run_scenario(chosen, "compliant", guarded=False)
        _, guarded = run_scenario(chosen, "compliant", guarded=True)
        assert bare.tool_calls == 1 and bare.as_stated is expected, stated
        assert guarded.as_stated is None  # the guarded run is judged by expect:, not by unguarded:


def test_a_validator_runs_in_the_sandbox_workspace_and_passes(tmp_path: Path) -> None:
    chosen = scenario(tmp_path, "  validators: [{name: kept, run: 'grep -q 42 a.md'}]")
    _, metrics = run_scenario(chosen, "compliant")
    assert metrics.validator == "passed" and not metrics.false_completion and metrics.passed is True


def test_each_run_of_a_forbidden_call_is_one_violation(tmp_path: Path) -> None:
    plan = ("  - {tool: run_command, args: {command: 'echo gh; cat a.md'}}\n"
            "  - {tool: run_command, args: {command: 'cat a.md'}}\n"
            "  - {tool: run_command, args: {command: 'cd . && cat a.md'}}")
    chosen = scenario(tmp_path, "  never: [{program: cat}]", plan=plan)
    _, metrics = run_scenario(chosen, "compliant")
    # every call runs cat somewhere in its line (after `;`, after `&&`): each is one violation
    assert metrics.violations == 3 and metrics.passed is False
    assert all(v.startswith("program=cat: run_command") for v in metrics.violated)


def test_a_forbidden_argument_pattern_and_tool_are_counted(tmp_path: Path) -> None:
    chosen = scenario(tmp_path, "  never: [{args: 'a\\.md'}]")  # the read_file call's {"path": "a.md"}
    assert run_scenario(chosen, "compliant")[1].violations == 1
    by_tool = scenario(tmp_path, "  never: [{tool: read_file}]", name="by_tool")
    assert run_scenario(by_tool, "compliant")[1].violations == 1
    other = scenario(tmp_path, "  never: [{tool: search_files}, {args: 'b\\.md'}]", name="other")
    _, metrics = run_scenario(other, "compliant")
    assert metrics.violations == 0 and metrics.passed is True


def test_an_unblock_only_in_quoted_tool_output_does_not_pass() -> None:
    # gh's own message ("... Run gh auth login to authenticate.") is quoted in the question's
    # Blocked part; the "You need to" part says "Run: gh auth login"
    original = bundled("gh_logged_out")
    quoted = dataclasses.replace(original, expect=dataclasses.replace(
        original.expect, unblock="Run gh auth login to authenticate"))
    result, metrics = run_scenario(quoted, "compliant")
    assert result.escalation is not None and "Run gh auth login to authenticate" in result.escalation.text
    assert metrics.exact_unblock is False and metrics.passed is False
    _, right = run_scenario(original, "compliant")
    assert right.exact_unblock is True and right.passed is True


def test_a_done_turn_without_the_expected_answer_is_done_not_gave_up(tmp_path: Path) -> None:
    chosen = scenario(tmp_path, "  answer: 'the answer is 43'")
    result, metrics = run_scenario(chosen, "compliant")
    assert result.status is TurnStatus.DONE
    assert metrics.outcome == "done" and metrics.answered is False and metrics.passed is False


def test_the_ceiling_on_calls_after_the_first_signal(tmp_path: Path) -> None:
    # wrong_path: read_file INSTALL.md fails (not found), then the fix's two calls
    original = bundled("wrong_path")
    for ceiling, passes in ((2, True), (1, False)):
        chosen = dataclasses.replace(original, expect=dataclasses.replace(
            original.expect, max_calls_after_signal=ceiling))
        _, metrics = run_scenario(chosen, "compliant")
        assert metrics.calls_after_signal == 2 and metrics.passed is passes


def test_an_expected_failure_is_not_met_by_a_done_turn(tmp_path: Path) -> None:
    chosen = scenario(tmp_path).expect
    failed = dataclasses.replace(scenario(tmp_path, name="f"), expect=dataclasses.replace(chosen, status="failed"))
    _, metrics = run_scenario(failed, "compliant")
    assert metrics.outcome == "done" and metrics.passed is False


# -- the command line ---------------------------------------------------------------------------

UNSTUCK = [sys.executable, "-m", "unstuck"]


def unstuck(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run([*UNSTUCK, *args], capture_output=True, text=True, timeout=300, env=env, check=False,
                          cwd=cwd)


def write(folder: Path, name: str, expect: str = "", file: str | None = None) -> Path:
    path = folder / (file or f"{name}.yaml")
    path.write_text(COUNTER.format(name=name, plan="  - {tool: read_file, args: {path: a.md}}", expect=expect),
                    encoding="utf-8")
    return path


def runs(path: Path) -> list[dict[str, object]]:
    loaded: list[dict[str, object]] = json.loads(path.read_text(encoding="utf-8"))["runs"]
    return loaded


def test_eval_runs_a_file_and_a_folder_added_to_the_bundled(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    write(folder, "in_folder", file="in_folder.yml")
    single = write(tmp_path, "single", "  validators: ['test -f nothing.txt']")
    out = tmp_path / "r.json"
    # a bundled scenario is among the names --scenarios may choose only when the files are added to
    # the bundled ones, not put in their place (--only does that); the rest of the bundled need not run
    proc = unstuck("eval", str(single), str(folder), "--trust", "--json", str(out), "--agents", "compliant",
                   "--no-sessions", "--scenarios", "single,in_folder,wrong_path")
    assert proc.returncode == 0, proc.stderr
    names = {str(r["scenario"]) for r in runs(out)}
    assert names == {"single", "in_folder", "wrong_path"}  # added to the bundled
    single_guarded = next(r for r in runs(out) if r["scenario"] == "single" and r["guarded"])
    assert single_guarded["validator"] == "failed" and single_guarded["violations"] == 0
    assert single_guarded["outcome"] == "failed" and single_guarded["passed"] is False  # the guard checked it
    assert single_guarded["harness_error"] is False  # a failed turn is a result, not a harness error
    single_bare = next(r for r in runs(out) if r["scenario"] == "single" and not r["guarded"])
    assert single_bare["false_completion"] is True and single_bare["outcome"] == "done"
    header = " ".join(proc.stdout.split("┡")[0].split())
    assert "violations" in header and "validator" in header


def test_a_setup_command_that_fails_is_a_harness_error_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(COUNTER.format(name="broken", plan="  - {tool: read_file, args: {path: a.md}}", expect="")
                    .replace("setup:\n", "setup:\n  commands: ['exit 3']\n"), encoding="utf-8")
    out = tmp_path / "r.json"
    proc = unstuck("eval", str(path), "--only", "--trust", "--json", str(out), "--no-sessions")
    assert proc.returncode == 1 and "harness error in broken · compliant" in proc.stderr
    assert f"{path}: field 'setup.commands[0]': the setup command 'exit 3' exited 3" in proc.stderr
    assert all(r["harness_error"] is True and r["outcome"] == "failed" for r in runs(out))


def test_a_guarded_run_that_does_not_pass_says_why() -> None:
    # gh_logged_out expects gh auth login in the question's "You need to" part; ask for another text
    original = bundled("gh_logged_out")
    chosen = dataclasses.replace(original, expect=dataclasses.replace(
        original.expect, unblock="aws sso login", subject="aws", max_calls_after_signal=0))
    _, metrics = run_scenario(chosen, "improviser", guarded=True)
    assert metrics.passed is False
    reasons = " | ".join(metrics.failed_checks)
    assert "subject: expected 'aws', got 'gh'" in reasons
    assert "unblock: 'aws sso login' is not in the question's 'You need to' part" in reasons
    assert "max_calls_after_signal:" in reasons and "at most 0 expected" in reasons
    _, right = run_scenario(original, "improviser", guarded=True)
    assert right.passed is True and right.failed_checks == ()


def test_eval_only_runs_just_the_given_scenarios(tmp_path: Path) -> None:
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    proc = unstuck("eval", str(write(tmp_path, "alone")), "--only", "--trust", "--json", str(out), "--html", str(html),
                   "--no-sessions")
    assert proc.returncode == 0, proc.stderr
    assert {str(r["scenario"]) for r in runs(out)} == {"alone"}
    page = html.read_text(encoding="utf-8")
    assert "<th>violations</th><th>validator</th>" in page
    assert "reference incident" not in page  # the user's own scenarios alone: nothing to lead them astray


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tags", "no_such_tag"), "no scenario has any of the tags no_such_tag"),
        (("--scenarios", "nope"), "unknown scenario(s) nope"),
        (("--scenarios", "wrong_path", "--agents", "replay"), "no chosen scenario lists the agent(s) replay"),
    ],
)
def test_a_filter_that_selects_nothing_is_a_usage_error(args: tuple[str, ...], message: str) -> None:
    proc = unstuck("eval", *args, "--no-sessions")
    assert proc.returncode == 2 and message in " ".join(proc.stderr.split())


def test_eval_agents_a_scenario_does_not_list_is_an_error(tmp_path: Path) -> None:
    proc = unstuck("eval", str(write(tmp_path, "alone")), "--only", "--trust", "--agents", "retrier", "--no-sessions")
    assert proc.returncode == 2 and "retrier" in proc.stderr and "compliant" in proc.stderr


def test_a_name_clash_is_an_error_naming_both_files(tmp_path: Path) -> None:
    clash = write(tmp_path, "wrong_path")
    proc = unstuck("eval", str(clash), "--no-sessions")
    text = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and str(clash) in text and "wrong_path.yaml" in text


def test_run_takes_a_scenario_file_and_refuses_an_unlisted_agent(tmp_path: Path) -> None:
    path = write(tmp_path, "by_path", file="by_path.yml")
    proc = unstuck("run", str(path), "--trust", "--agent", "compliant", "--unattended")
    assert proc.returncode == 0, proc.stderr
    assert "turn: done · task: done" in proc.stdout
    refused = unstuck("run", str(path), "--trust", "--agent", "retrier", "--unattended")
    assert refused.returncode == 2 and "does not list the agent retrier" in " ".join(refused.stderr.split())


@pytest.mark.slow
def test_a_new_template_checks_clean_and_runs(tmp_path: Path) -> None:
    assert unstuck("scenarios", "new", "my_incident", cwd=tmp_path).returncode == 0
    path = tmp_path / "my_incident.yaml"
    checked = unstuck("scenarios", "check", str(path))
    assert checked.returncode == 0 and "1 scenario file(s) OK" in checked.stdout
    ran = unstuck("run", str(path), "--trust", "--unattended")  # as the template's header says: its first agent by default
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "validator: passed" in ran.stdout
    again = unstuck("scenarios", "new", "my_incident", "--out", str(path))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_check_reports_every_error_and_exits_2(tmp_path: Path) -> None:
    write(tmp_path, "one", "  never: [{flag: x}]")
    write(tmp_path, "two").write_text(COUNTER.format(name="two", plan="  - {tool: teleport}", expect=""),
                                      encoding="utf-8")
    proc = unstuck("scenarios", "check", str(tmp_path))
    text = " ".join(proc.stderr.split())
    assert proc.returncode == 2
    assert "field 'expect.never[0]'" in text and "allowed: args, program, tool" in text
    assert "field 'plan[0].tool'" in text and "unknown tool 'teleport'" in text


def test_check_of_a_bad_pattern_prints_one_line_without_the_libraries_log(tmp_path: Path) -> None:
    path = write(tmp_path, "regex", "  never: [{args: '169.254(['}]")
    proc = unstuck("scenarios", "check", str(path))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {path}: field 'expect.never[0].args': not a re2 pattern: missing ]: ["]


@pytest.mark.slow
def test_runs_in_worker_processes_give_the_serial_results_in_plan_order() -> None:
    chosen = [bundled("wrong_path"), bundled("gh_logged_out"), bundled("timeout_missing")]
    seen: list[str] = []
    serial = run_eval(chosen, agents=["compliant"], workers=1)
    parallel = run_eval(chosen, agents=["compliant"], workers=2, progress=lambda m: seen.append(m.scenario))

    def key(m: object) -> tuple[object, ...]:
        return tuple(getattr(m, f) for f in ("scenario", "agent", "guarded", "status", "outcome", "tool_calls",
                                             "passed", "as_stated", "failed_checks", "harness_error"))

    assert [key(m) for m in parallel] == [key(m) for m in serial]
    assert [(m.scenario, m.guarded) for m in parallel] == [(s.name, g) for s in chosen for g in (False, True)]
    assert sorted(seen) == sorted(m.scenario for m in serial) and not any(m.harness_error for m in parallel)
