"""The console script, run as a user runs it: real processes, a real terminal for prompts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pexpect
import pytest

from conftest import bare_env
from unstuck.evals.fake_github import FakeGitHub
from unstuck.evals.runner import SANDBOX_FINGERPRINT
from unstuck.evals.scenarios import builtin_scenarios
from unstuck.store.lessons import LessonStore
from unstuck.store.urls import StoreRole, store_for
from unstuck.toolkit.workspace import Workspace, cli_fingerprint

UNSTUCK = [sys.executable, "-m", "unstuck"]
EXIT_BLOCKED = 3
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    return ANSI.sub("", text)


def unstuck(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([*UNSTUCK, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)


def a_fresh_home(tmp_path: Path) -> dict[str, str]:
    """``HOME`` and the XDG base directories of a user who has never run unstuck, and a shared
    store location (``UNSTUCK_STORE``) of theirs."""
    home = tmp_path / "fresh-home"
    home.mkdir()
    return bare_env(home=home, PATH=os.environ["PATH"], UNSTUCK_STORE=tmp_path / "users-store")


@pytest.mark.slow
def test_eval_prints_the_table_writes_json_and_exits_zero(tmp_path: Path, gh_path: str) -> None:
    out = tmp_path / "results.json"
    user = a_fresh_home(tmp_path)
    proc = unstuck("eval", "--json", str(out), env=user)
    assert proc.returncode == 0, proc.stderr
    # the eval's lessons ("gh is signed out" in its sandboxes) never reach the user's own stores,
    # settings or shell files: nothing written under their home, their shared store untouched
    assert sorted(Path(user["HOME"]).rglob("*")) == []
    assert not Path(user["UNSTUCK_STORE"]).exists()
    header = " ".join(proc.stdout.split("┡")[0].split())  # the table's header rows, wrapped words joined
    for word in ("steps", "escalate", "workaround", "refused", "outcome", "exact", "unblock", "judged", "pass"):
        assert word in header
    runs = json.loads(out.read_text())["runs"]
    bundled = builtin_scenarios()
    assert {r["scenario"] for r in runs} == {s.name for s in bundled}
    assert len(runs) == sum(2 * len(s.agents) for s in bundled)
    guarded = [r for r in runs if r["guarded"]]
    assert all(r["passed"] for r in guarded), [r for r in guarded if not r["passed"]]
    document = json.loads(out.read_text())
    assert document["reference_incident"] == {"calls": 43, "seconds": 480.0}
    improviser = next(c for c in document["comparisons"]
                      if (c["scenario"], c["agent"]) == ("gh_logged_out", "improviser"))
    assert improviser["unguarded_wasted_calls"] >= 10 and improviser["guarded_wasted_calls"] <= 3
    assert improviser["calls_ratio"] == improviser["unguarded_wasted_calls"] / improviser["guarded_wasted_calls"]
    judged = {(r["scenario"], r["agent"], r["guarded"]): r["judgement"] for r in runs}
    assert judged[("gh_logged_out", "improviser", True)]["stopped_within_budget"] == 10
    assert judged[("gh_logged_out", "improviser", False)]["stopped_within_budget"] == 0
    assert judged[("wrong_path", "retrier", True)]["did_not_over_ask"] == 10
    assert "reference incident" in proc.stdout


@pytest.mark.slow
def test_eval_tags_choose_scenarios(tmp_path: Path) -> None:
    out = tmp_path / "counter.json"
    proc = unstuck("eval", "--tags", "counter", "--agents", "compliant", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    names = {r["scenario"] for r in json.loads(out.read_text())["runs"]}
    assert names == {s.name for s in builtin_scenarios() if "counter" in s.tags and "compliant" in s.agents}


def test_eval_exits_non_zero_on_a_malformed_scenario_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: bad\nrole: blocker\n", encoding="utf-8")
    proc = unstuck("eval", "--scenario-dir", str(tmp_path))
    assert proc.returncode != 0 and "bad.yaml" in proc.stderr


def test_run_headless_blocked_turn_prints_the_escalation_and_exits_non_zero(gh_path: str) -> None:
    proc = unstuck("run", "gh_logged_out", "--agent", "improviser", "--unattended")
    assert proc.returncode == EXIT_BLOCKED, proc.stderr
    assert "turn: blocked" in proc.stdout and "gh auth login" in proc.stdout
    assert "after gh was blocked, before asking" in proc.stdout


def test_run_counter_scenario_is_done_and_exits_zero() -> None:
    proc = unstuck("run", "wrong_path", "--agent", "retrier", "--unattended")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pip install example-tool==2.1" in proc.stdout


def test_run_unguarded_improviser_never_asks_and_exits_non_zero_having_given_up(gh_path: str) -> None:
    proc = unstuck("run", "gh_logged_out", "--agent", "improviser", "--unguarded", "--unattended")
    assert proc.returncode == 1
    assert "turn: done · task: gave up · 13 tool call(s)" in proc.stdout


def spawn_attended(sandbox: Path, agent: str = "compliant") -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable, ["-m", "unstuck", "run", "gh_logged_out", "--agent", agent, "--attended",
                         "--sandbox", str(sandbox)],
        encoding="utf-8", timeout=60, dimensions=(40, 160),
    )
    child.expect("Your choice")
    return child


def test_attended_stop_ends_the_turn_blocked(tmp_path: Path, gh_path: str) -> None:
    child = spawn_attended(tmp_path / "box")
    assert "gh auth login" in plain(child.before)
    child.sendline("3")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == EXIT_BLOCKED and "turn: blocked" in plain(child.before)


def test_attended_skip_continues_without_gh(tmp_path: Path, gh_path: str) -> None:
    child = spawn_attended(tmp_path / "box")
    child.sendline("skip")
    child.expect(pexpect.EOF)
    child.close()
    output = plain(child.before)
    assert "Skipped gh" in output and "task: gave up" in output
    assert child.exitstatus == 1, "the task was left undone"


def test_attended_done_with_gh_still_signed_out_asks_again(tmp_path: Path, gh_path: str) -> None:
    child = spawn_attended(tmp_path / "box")
    child.sendline("1")
    child.expect("still blocked")
    child.expect("Your choice")
    child.sendline("3")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == EXIT_BLOCKED


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["compliant", "improviser"])
def test_attended_done_after_signing_in_probes_and_finishes_the_task(tmp_path: Path, gh_path: str, agent: str) -> None:
    box = tmp_path / "box"
    child = spawn_attended(box, agent)
    with tempfile.TemporaryDirectory(prefix="ugh-") as short, FakeGitHub(Path(short) / "api.sock") as api:
        # What the person does at their own keyboard: sign gh in (against the local API).
        (box / "gh-config" / "hosts.yml").write_text(
            f"github.com:\n    oauth_token: {api.token}\n    user: octocat\n    git_protocol: https\n")
        (box / "gh-config" / "config.yml").write_text(f"http_unix_socket: {api.socket_path}\n")
        child.sendline("1")
        child.expect(pexpect.EOF)
        child.close()
        served = api.requests
    assert child.exitstatus == 0, child.before
    assert "GitHub's official command line tool" in plain(child.before)
    assert ("GET", "/") in served  # the probe: gh auth status read the token scopes


def test_run_records_every_decision_as_json_lines(tmp_path: Path, gh_path: str) -> None:
    log = tmp_path / "events.jsonl"
    proc = unstuck("run", "gh_logged_out", "--agent", "improviser", "--unattended", "--events", str(log))
    assert proc.returncode == EXIT_BLOCKED
    events = [json.loads(line) for line in log.read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "turn.started" and names[-1] == "turn.ended"
    assert names.count("blocker.opened") == 1 and names.count("budget.charged") == 3
    assert "call.refused" in names and "situation.declared" in names and "turn.escalated" in names
    opened = next(e for e in events if e["event"] == "blocker.opened")
    assert (opened["subject"], opened["kind"], opened["budget"]) == ("gh", "auth", 2)
    assert events[-1]["status"] == "blocked"
    assert len({e["turn"] for e in events}) == 1


def test_run_rejects_a_directory_as_the_events_file(tmp_path: Path) -> None:
    proc = unstuck("run", "wrong_path", "--unattended", "--events", str(tmp_path))
    assert proc.returncode == 2 and "is a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_user_text_is_never_read_as_markup(tmp_path: Path) -> None:
    proc = unstuck("run", "[/x]", "--unattended")
    assert proc.returncode == 2 and "unknown scenario(s) [/x]" in proc.stderr


@pytest.mark.slow
def test_eval_runs_a_model_behind_an_openai_compatible_server(tmp_path: Path, gh_path: str) -> None:
    from unstuck.evals.chat_server import ChatServer

    def careful_agent(request: dict[str, object]) -> dict[str, object]:
        messages = request["messages"]
        assert isinstance(messages, list)
        last = messages[-1]
        if last["role"] != "tool":
            return {"tool_calls": [("check_cli_setup", {"name": "gh"})]}
        return {"content": "I cannot go on without you." if "BLOCKED" in last["content"] else "I could not do it."}

    out = tmp_path / "model.json"
    with ChatServer([], responder=careful_agent) as server:
        proc = unstuck("eval", "--model", "tiny", "--base-url", server.base_url, "--agents", "model:tiny",
                       "--scenarios", "gh_logged_out", "--repeat", "2", "--seed", "7", "--json", str(out))
        seeds = sorted({r.get("seed") for r in server.requests})
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(out.read_text())["runs"]
    assert {(r["scenario"], r["agent"]) for r in runs} == {("gh_logged_out", "model:tiny")}
    assert sorted((r["repeat"], r["guarded"]) for r in runs) == [(0, False), (0, True), (1, False), (1, True)]
    assert all(r["passed"] and r["exact_unblock"] for r in runs if r["guarded"])
    assert all(r["outcome"] == "gave up" for r in runs if not r["guarded"])
    assert seeds == [7, 8]


def test_classify_reads_stdin_and_prints_the_situation() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([*UNSTUCK, "classify", "--exit-code", "127", "--tool", "bash"], input="bash: jq: command not found",
                          capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("not_installed (blocker) on jq")
    quiet = subprocess.run([*UNSTUCK, "classify", "--exit-code", "0", "--json"], input="0 errors", capture_output=True,
                           text=True, env=env, check=False, timeout=60)
    assert json.loads(quiet.stdout) is None


def test_classify_scores_a_labelled_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "cases.jsonl"
    corpus.write_text(json.dumps({"id": "a", "tool": "gh", "output": "please run: gh auth login", "exit_code": 4,
                                  "http_status": None, "expected_kind": "auth", "interactive": True,
                                  "retryable": False}) + "\n")
    proc = unstuck("classify", "--cases", str(corpus), "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)[0]["kind_accuracy"] == 1.0
    bad = unstuck("classify", "--cases", str(tmp_path / "missing.jsonl"))
    assert bad.returncode == 2 and "cannot read the cases" in bad.stderr


def test_classify_scores_several_corpora_per_file_and_per_tool(tmp_path: Path) -> None:
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    first.write_text(json.dumps({"id": "a", "tool": "gh", "output": "please run: gh auth login", "exit_code": 4,
                                 "http_status": None, "expected_kind": "auth", "interactive": True,
                                 "retryable": False}) + "\n")
    second.write_text("\n".join(json.dumps(case) for case in [
        {"id": "b", "tool": "curl", "output": "curl: (6) Could not resolve host: x.test", "exit_code": 6,
         "http_status": None, "expected_kind": "network", "interactive": False, "retryable": True},
        {"id": "c", "tool": "curl", "output": "curl: (6) Could not resolve host: y.test", "exit_code": 6,
         "http_status": None, "expected_kind": "auth", "interactive": True, "retryable": False},
    ]) + "\n")
    proc = unstuck("classify", "--cases", str(first), "--cases", str(second), "--json")
    assert proc.returncode == 0, proc.stderr
    one, two = json.loads(proc.stdout)
    assert (one["file"], two["file"]) == (str(first), str(second))
    assert two["by_tool"] == [{"tool": "curl", "total": 2, "kind_correct": 1, "interactive": 1, "interactive_flagged": 0}]
    assert two["missed_interactive"] == ["c"]
    table = unstuck("classify", "--cases", str(first), "--cases", str(second))
    assert "per file" in table.stdout and "per tool" in table.stdout


def test_classify_explain_names_the_deciding_row_and_its_source() -> None:
    proc = subprocess.run([*UNSTUCK, "classify", "--explain", "--exit-code", "1"],
                          input="psql: error: FATAL:  sorry, too many clients already", capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200"}, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "unavailable" in proc.stdout and "decided by: cause" in proc.stdout
    assert "source: " in proc.stdout and "PostgreSQL" in proc.stdout
    odd = subprocess.run([*UNSTUCK, "classify", "--explain", "--exit-code", "3"], input="the frobnicator sulks",
                         capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, check=False, timeout=60)
    assert "nothing matched" in odd.stdout and "execution_error" in odd.stdout


def test_bank_stats_and_list_count_the_bundled_forms() -> None:
    from unstuck.faults.bank import load_bank

    bank = load_bank()
    stats = unstuck("bank", "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    counted = json.loads(stats.stdout)
    assert counted["forms"] == len(bank)
    assert sum(sum(by_channel.values()) for by_channel in counted["by_family"].values()) == len(bank)
    listed = unstuck("bank", "list", "--json", "--family", "rate_limit")
    assert listed.returncode == 0, listed.stderr
    forms = json.loads(listed.stdout)
    assert forms and {f["family"] for f in forms} == {"rate_limit"}
    assert len(forms) == sum(1 for f in bank if f.family.value == "rate_limit")


def test_bank_list_names_a_corrupt_bank_file(tmp_path: Path) -> None:
    broken = tmp_path / "bank.jsonl"
    broken.write_text('{"id": "x", "family": "nope"}\n', encoding="utf-8")
    proc = unstuck("bank", "list", "--bank", str(broken))
    assert proc.returncode == 2
    assert f"{broken}:1" in plain(proc.stderr).replace("\n", "") and "family" in proc.stderr


def test_bank_harvest_runs_the_chosen_recipes_and_writes_a_bank(tmp_path: Path) -> None:
    from unstuck.faults.bank import load_bank

    out = tmp_path / "bank.jsonl"
    proc = unstuck("bank", "harvest", "--only", "shell-command-not-found,gh-logged-out", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    forms = {f.id: f for f in load_bank(out)}
    assert set(forms) == {"shell-command-not-found", "gh-logged-out"}
    assert forms["shell-command-not-found"].exit_code == 127
    assert forms["gh-logged-out"].provenance.version is not None and "gh version" in forms["gh-logged-out"].provenance.version


@pytest.mark.slow
def test_eval_with_p_inj_records_the_rate_and_the_injected_failures(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = unstuck("eval", "--scenarios", "wrong_path", "--agents", "retrier", "--p-inj", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "injected" in proc.stdout
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 2 and all(r["p_inj"] == 1.0 and r["injected_failures"] >= 1 for r in runs)


@pytest.mark.slow
def test_eval_curve_reports_each_rate(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = unstuck("eval", "--scenarios", "wrong_path", "--agents", "compliant", "--curve", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    curve = json.loads(out.read_text())["injection_curve"]
    assert [p["p_inj"] for p in curve["points"]] == [0.0, 0.05, 0.1, 0.2, 0.3]
    assert [b["injected"] for b in curve["by_injected_failures"]] == ["0", "1", "2", "3+"]
    assert "guarded success against injected failures" in proc.stdout


@pytest.mark.slow
def test_trace_show_renders_each_turn_and_names_lines_that_are_not_events(tmp_path: Path, gh_path: str) -> None:
    events = tmp_path / "events.jsonl"
    unstuck("run", "gh_logged_out", "--agent", "compliant", "--events", str(events))
    recorded = [json.loads(line) for line in events.read_text().splitlines()]
    with events.open("a") as handle:
        handle.write("not an event\n")
    proc = unstuck("trace", "show", str(events))
    assert proc.returncode == 0, proc.stderr
    out = plain(proc.stdout)
    turn = recorded[0]["turn"]
    assert f"turn {turn}" in out
    for item in recorded:
        assert item["event"] in out
    assert "blocker.opened" in out and "turn.escalated" in out
    assert f"skipped 1 line(s) of {events}" in plain(proc.stderr).replace("\n", "")
    missing = unstuck("trace", "show", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr


def test_trace_show_prints_event_names_that_look_like_markup(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"event": "[/bold]", "turn": "t1", "at_s": 0.0}\n', encoding="utf-8")
    proc = unstuck("trace", "show", str(events))
    assert proc.returncode == 0 and "[/bold]" in proc.stdout


def test_bad_files_and_paths_are_named_before_any_work(tmp_path: Path) -> None:
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe not text \x80\n")
    for args in (("bank", "stats", "--bank", str(binary)), ("classify", "--cases", str(binary))):
        proc = unstuck(*args)
        assert proc.returncode != 0 and "not UTF-8" in plain(proc.stderr).replace("\n", ""), args
    proc = unstuck("eval", "--json", str(tmp_path), "--scenarios", "wrong_path")
    assert proc.returncode != 0 and "is a directory" in proc.stderr
    proc = unstuck("bank", "harvest", "--only", "shell-timeout", "--out", str(tmp_path))
    assert proc.returncode != 0 and "is a directory" in proc.stderr
    proc = unstuck("lessons", "forget", "1", "--store", str(tmp_path / "nope.db"))
    assert proc.returncode == 2 and "no lesson store" in proc.stderr and not (tmp_path / "nope.db").exists()


def test_classify_asks_the_second_opinion_only_about_an_unrecognised_failure() -> None:
    from unstuck.evals.chat_server import ChatServer

    env = {**os.environ, "COLUMNS": "200"}
    with ChatServer([], closing='{"kind": "conflict", "interactive": false, "retryable": true}') as server:
        odd = subprocess.run([*UNSTUCK, "classify", "--exit-code", "3", "--second-opinion", "judge", "--base-url",
                              server.base_url], input="the frobnicator sulks", capture_output=True, text=True,
                             env=env, check=False, timeout=60)
        known = subprocess.run([*UNSTUCK, "classify", "--exit-code", "1", "--second-opinion", "judge", "--base-url",
                                server.base_url], input="cat: x: Permission denied", capture_output=True, text=True,
                               env=env, check=False, timeout=60)
        asked = len(server.requests)
    assert odd.returncode == 0, odd.stderr
    assert odd.stdout.startswith("conflict") and "second opinion (judge): conflict" in odd.stdout
    assert known.stdout.startswith("permission") and "second opinion" not in known.stdout
    assert asked == 1


# -- errors, never tracebacks (issue 12, deliver 4) --------------------------------------------

def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single ``error:`` line the command printed (and that it printed no traceback)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in plain(proc.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_a_1e5_deep_scenario_file_is_one_line_naming_it_and_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "deep.yaml").write_text("[" * 10**5 + "]" * 10**5, encoding="utf-8")
    proc = unstuck("scenarios", "--scenario-dir", str(tmp_path))
    assert proc.returncode == 2
    assert f"{tmp_path / 'deep.yaml'}: nested more than 100 levels deep" in one_line_error(proc)


def test_a_1e5_deep_signal_file_is_one_line_naming_it(tmp_path: Path) -> None:
    deep = tmp_path / "mine.yaml"
    deep.write_text("{a: " * 10**5 + "}" * 10**5, encoding="utf-8")
    proc = subprocess.run([*UNSTUCK, "classify", "--signals", str(deep)], input="x", capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and str(deep) in one_line_error(proc)


def test_a_non_utf8_compare_baseline_is_one_line_naming_it(tmp_path: Path) -> None:
    baseline = tmp_path / "base.json"
    baseline.write_bytes(b'{"runs": ["\xff"]}')
    proc = unstuck("eval", "--compare", str(baseline), "--scenarios", "wrong_path", "--no-sessions")
    assert proc.returncode == 2
    assert f"{baseline}: not UTF-8 text (byte 11" in one_line_error(proc)


def test_events_on_a_full_device_is_one_line_naming_the_events_file_and_a_failed_run() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("this machine has no /dev/full")
    proc = unstuck("run", "wrong_path", "--agent", "retrier", "--unattended", "--events", "/dev/full")
    assert proc.returncode == 1
    line = one_line_error(proc)
    assert "--events /dev/full" in line and "No space left on device" in line and "sandbox" not in line


def test_run_usage_errors_exit_2_and_the_exit_codes_are_in_each_commands_help() -> None:
    assert unstuck("run", "no_such_scenario", "--unattended").returncode == 2
    assert unstuck("run", "wrong_path", "--agent", "nobody", "--unattended").returncode == 2
    for command in ("run", "eval", "classify", "scenarios"):
        shown = " ".join(plain(unstuck(command, "--help").stdout).split())
        assert "2 a usage error" in shown and "3 the turn ended blocked" in shown and "1 failed" in shown, command


def test_a_huge_lesson_id_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    proc = unstuck("lessons", "show", "9" * 40, "--store", str(tmp_path / "l.db"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_classify_reads_1e9_scale_stdin_in_bounded_memory_and_keeps_the_tail() -> None:
    """200 MB through a real pipe: the child's peak RSS stays far under the input size, and a
    failure worded at the very end is still found (the tail is kept)."""
    script = ("import sys\nout = sys.stdout.buffer\nblock = b'x' * (1 << 20)\n"
              "for _ in range(200):\n    out.write(block)\nout.write(b'\\nbash: jq: command not found\\n')\n")
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert writer.stdout is not None
    measure = ("import resource, subprocess, sys\n"
               "p = subprocess.run(sys.argv[1:], stdin=sys.stdin, capture_output=True, text=True)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\nprint(p.returncode)\n"
               "print(p.stdout)\n")
    proc = subprocess.run([sys.executable, "-c", measure, *UNSTUCK, "classify", "--exit-code", "127",
                           "--tool", "bash"], stdin=writer.stdout, capture_output=True, text=True, timeout=120,
                          check=False)
    writer.stdout.close()
    writer.wait(timeout=30)
    peak_kib, code, *out = proc.stdout.splitlines()
    assert code == "0" and "not_installed (blocker) on jq" in " ".join(out), proc.stdout + proc.stderr
    assert int(peak_kib) < 150 * 1024, f"peak RSS {peak_kib} KiB for 200 MB of stdin"


def test_run_never_prints_a_token_the_tool_returned_though_the_model_saw_it(tmp_path: Path) -> None:
    # GitHub's documented personal-access-token format: ghp_ and 36 characters of [A-Za-z0-9]
    token = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
    (tmp_path / "leaky_env.yaml").write_text(
        "name: leaky_env\ntitle: a file holding a token is read and its content given as the answer\n"
        "role: counter\ntags: [counter]\nsetup:\n  files:\n"
        f"    app.env: \"GH_TOKEN={token}\\n\"\n"
        "task: \"What does app.env set?\"\nplan:\n  - {tool: read_file, args: {path: app.env}}\n"
        "agents: [compliant]\nexpect:\n  status: done\n  answer: \"GH_TOKEN\"\n", encoding="utf-8")
    proc = unstuck("run", "leaky_env", "--trust", "--agent", "compliant", "--unattended", "--scenario-dir",
                   str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "GH_TOKEN=***" in proc.stdout  # the answer (the file's line) is printed, its secret masked
    assert "ghp_" not in proc.stdout + proc.stderr


# -- where the stores are (issue 16) ---------------------------------------------------------------


def _with_store(variable: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "unstuck", *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "COLUMNS": "200", "UNSTUCK_STORE": variable})


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_unstuck_store_names_where_run_journals_and_learns_and_where_journal_and_lessons_read(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest, gh_path: str) -> None:
    # an SQLite location is a folder (journal.db and lessons.db inside it); a database holds both
    location = str(tmp_path / "fleet") if engine == "sqlite" else request.getfixturevalue("pg_store").url
    ran = _with_store(location, "run", "gh_logged_out", "--agent", "improviser", "--unattended")
    assert ran.returncode == 3, ran.stderr  # blocked, as the scenario says
    assert "journaled as turn" in ran.stdout and "secret" not in ran.stdout
    if engine == "sqlite":
        assert sorted(p.name for p in (tmp_path / "fleet").iterdir() if p.suffix == ".db") == ["journal.db", "lessons.db"]
    else:
        assert "***" in ran.stdout  # the URL shown with its password masked
    listed = _with_store(location, "journal", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["status"] for t in json.loads(listed.stdout)] == ["blocked"]
    lessons = _with_store(location, "lessons", "list", "--json")
    assert lessons.returncode == 0, lessons.stderr
    assert [(x["subject"], x["kind"]) for x in json.loads(lessons.stdout)] == [("gh", "auth")]
    # the scenario's "gh is signed out" is about its sandbox: a real session on this machine,
    # sharing the store, is never told gh is signed out (issue 23)
    real_gh = cli_fingerprint(Workspace(tmp_path, env=dict(os.environ)), "gh")
    assert real_gh.startswith(os.path.realpath(gh_path))
    store = LessonStore(store_for(StoreRole.LESSONS, environ={"UNSTUCK_STORE": location}))
    try:
        assert store.match("gh", real_gh) is None
        assert [lesson.signature.fingerprint == SANDBOX_FINGERPRINT + real_gh for lesson in store.active()] == [True]
    finally:
        store.close()


def test_run_store_option_wins_over_the_variable_and_a_bad_url_names_its_source(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    ran = _with_store("mysql://nowhere/x", "run", "gh_logged_out", "--agent", "compliant", "--unattended",
                      "--store", str(chosen))
    assert ran.returncode == 3, ran.stderr
    assert (chosen / "journal.db").is_file() and (chosen / "lessons.db").is_file()
    bad = _with_store("mysql://nowhere/x", "run", "gh_logged_out", "--agent", "compliant", "--unattended")
    assert bad.returncode == 2 and "unknown scheme 'mysql'" in bad.stderr
    assert bad.stderr.count("UNSTUCK_STORE") == 1 and "--journal" not in bad.stderr  # named once, as given
    listed = _with_store("mysql://nowhere/x", "journal", "list")
    assert listed.returncode == 2 and listed.stderr.count("UNSTUCK_STORE") == 1 and "--journal" not in listed.stderr
