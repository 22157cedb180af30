"""Mining one environment end to end: every third task is held out, rollouts are verified on
their restored final state, too few contributing tasks mine no rule and write no record, bad
settings are refused before anything runs, and a real run over files_comments keeps only rules
that fix more held-out rollouts than they break, the same way every time."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mining.toy_env import TASKS, NotesEnvironment, make_environment
from unstuck.core.tools import Effect
from unstuck.mining import mine
from unstuck.mining.agents import default_pool
from unstuck.mining.backends import run_in_folder, run_rollouts
from unstuck.mining.contrast import MIN_CONTRAST_TASKS
from unstuck.mining.environment import MiningError, Snapshot, Task
from unstuck.mining.envs import environment
from unstuck.mining.mine import REPORT_LEVELS, MiningReport, mine_environment, split_tasks, tool_effects, verify_trace
from unstuck.mining.rollout import RolloutSpec
from unstuck.mining.rules import load_record, record_path
from unstuck.mining.trace import Trace

TOY = "toy_notes"


# -- held-out tasks --------------------------------------------------------------------------------

def tasks(count: int) -> tuple[Task, ...]:
    return tuple(Task(f"t{i}", f"task {i}", ()) for i in range(count))


def test_split_tasks_holds_every_third_task_out() -> None:
    mining, held = split_tasks(tasks(12))
    assert [t.id for t in held] == ["t2", "t5", "t8", "t11"]
    assert [t.id for t in mining] == ["t0", "t1", "t3", "t4", "t6", "t7", "t9", "t10"]


def test_split_tasks_of_the_toy_environment_leaves_four_for_mining() -> None:
    mining, held = split_tasks(TASKS)
    assert [t.id for t in held] == [TASKS[2].id, TASKS[5].id]
    assert len(mining) == 4 and set(mining).isdisjoint(held)


def test_split_tasks_of_fewer_than_three_holds_nothing_out() -> None:
    assert split_tasks(tasks(2)) == (tasks(2), ())


# -- tool effects and verification --------------------------------------------------------------------

def test_tool_effects_are_read_from_a_session_of_the_environment() -> None:
    # toy_env declares list_notes and get_note as reads, the append, publish and ask_user as writes
    assert tool_effects(make_environment()) == {
        "list_notes": Effect.READ, "get_note": Effect.READ, "append_to_note": Effect.WRITE,
        "publish_note": Effect.WRITE, "ask_user": Effect.WRITE}


def played(tmp_path: Path, task_id: str, appends: Iterable[tuple[str, str]]) -> tuple[Task, Trace]:
    """A final state made by the toy environment's real tools (each append in turn), as a trace
    whose session folder is then emptied: only the snapshot carries the state."""
    env = make_environment()
    task = next(t for t in env.tasks if t.id == task_id)
    root = tmp_path / "played"
    root.mkdir()
    session = env.open(task, root)
    try:
        for note_id, text in appends:
            assert session.tools["append_to_note"].invoke({"note_id": note_id, "text": text}).ok
        final: Snapshot = session.snapshot()
    finally:
        session.close()
    for path in root.iterdir():
        path.unlink()
    return task, Trace(TOY, task_id, "hand", "0", 0.0, (), "Done.", "done", final)


def test_verify_trace_passes_a_right_final_state_restored_in_a_fresh_session(tmp_path: Path) -> None:
    task, trace = played(tmp_path, "append_owner", [("n-21c9", "Owner: Dana")])
    assert verify_trace(make_environment(), task, trace).passed


@pytest.mark.parametrize("appends", [
    pytest.param([("n-21c9", "Owner: Dana"), ("n-21c9", "Owner: Dana")], id="appended-twice"),
    pytest.param([("n-7f3a", "Owner: Dana")], id="wrong-note"),
    pytest.param([], id="nothing-done"),
])
def test_verify_trace_fails_a_wrong_final_state(tmp_path: Path, appends: list[tuple[str, str]]) -> None:
    task, trace = played(tmp_path, "append_owner", appends)
    assert not verify_trace(make_environment(), task, trace).passed


def test_verify_trace_passes_a_careful_rollout_of_the_toy_environment() -> None:
    env = make_environment()
    trace = run_in_folder(RolloutSpec(TOY, "append_owner", "careful", factory=make_environment))
    assert verify_trace(env, env.tasks[2], trace).passed


# -- refused before anything runs ------------------------------------------------------------------

class FiveTasks(NotesEnvironment):
    """The toy workspace with one task fewer than mining needs."""

    tasks = TASKS[:5]


@pytest.mark.parametrize(("settings", "message"), [
    ({"p_inj": 1.5}, "p_inj 1.5"),
    ({"p_inj": -0.1}, "p_inj -0.1"),
    ({"report_levels": (0.0, 1.2)}, "report level 1.2: an injection rate is from 0 to 1"),
    ({"pair_cap": 0}, "pair_cap 0"),
    ({"seeds": 0}, "seeds 0"),
])
def test_bad_settings_are_mining_errors(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(MiningError, match=message):
        mine_environment(make_environment(), **settings)


def test_an_environment_with_fewer_than_six_tasks_is_a_mining_error(tmp_path: Path) -> None:
    with pytest.raises(MiningError, match="'toy_notes' has 5 tasks; mining needs at least 6"):
        mine_environment(FiveTasks(), records=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_backend_is_a_mining_error() -> None:
    with pytest.raises(MiningError, match="unknown backend 'spark'"):
        mine_environment(make_environment(), backend="spark")


# -- too few contributing tasks -----------------------------------------------------------------------

def with_toy_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    """mine.py names the environment in each spec; a spawned worker finds the (unshipped) toy
    environment through the spec's factory instead."""

    def run(specs: Iterable[RolloutSpec], **options: Any) -> list[Trace]:
        return run_rollouts([replace(spec, factory=make_environment) for spec in specs], **options)

    monkeypatch.setattr(mine, "run_rollouts", run)


@pytest.mark.slow
def test_mining_the_toy_environment_reports_too_few_contributing_tasks_and_writes_no_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_toy_factory(monkeypatch)
    stages: set[str] = set()
    report = mine_environment(make_environment(), seeds=1, records=tmp_path, workers=2,
                              progress=lambda stage, done, total: stages.add(stage))
    assert [e.task for e in report.eligibility] == [t.id for t in TASKS]
    assert len(report.mining_tasks) <= 4  # 6 tasks: every third is held out
    assert report.rollouts == len(report.mining_tasks) * len(default_pool())
    assert len(report.contrast.tasks) < MIN_CONTRAST_TASKS and not report.contrast.enough
    assert report.contrast.message.endswith(f"at least {MIN_CONTRAST_TASKS} tasks are needed, so no rules are mined")
    assert (report.rules, report.levels, report.record_path, report.kept_rules) == ((), (), None, ())
    assert list(tmp_path.iterdir()) == []
    assert stages == {"eligibility", "rollouts"}  # no interventions without rules
    assert json.loads(json.dumps(mine.report_to_dict(report)))["contrast"]["enough"] is False


# -- a real run ----------------------------------------------------------------------------------------

Mined = Callable[[Path], MiningReport]


def mine_files_comments(records: Path) -> MiningReport:
    return mine_environment(environment("files_comments"), p_inj=0.1, seeds=1, records=records, workers=2)


@pytest.fixture(scope="module")
def files_comments(tmp_path_factory: pytest.TempPathFactory) -> tuple[MiningReport, Path]:
    records = tmp_path_factory.mktemp("records")
    return mine_files_comments(records), records


@pytest.mark.slow
def test_mining_files_comments_keeps_rules_that_fix_more_than_they_break(
        files_comments: tuple[MiningReport, Path]) -> None:
    report, _ = files_comments
    assert len(report.contrast.tasks) >= MIN_CONTRAST_TASKS and report.contrast.enough
    assert report.kept_rules, "no rule was kept"
    for result in report.rules:
        assert result.rule.effect == result.effect
        assert result.rule.enabled is result.kept is (result.effect.fixed > result.effect.broke)
    assert set(report.held_out).isdisjoint(report.mining_tasks)


@pytest.mark.slow
def test_the_record_holds_only_the_kept_rules_enabled(files_comments: tuple[MiningReport, Path]) -> None:
    report, records = files_comments
    path = record_path("files_comments", records)
    assert report.record_path == str(path)
    assert [p.name for p in records.iterdir()] == ["files_comments.json"]
    record = load_record(path)
    env = environment("files_comments")
    assert (record.environment, record.version, record.tools) == ("files_comments", env.version, env.tool_names)
    assert record.rules == report.kept_rules == record.enabled_rules()
    assert all(rule.effect is not None and rule.effect.fixed > rule.effect.broke for rule in record.rules)
    assert record.bad_patterns == report.bad_patterns
    stats = dict(record.stats)
    assert stats["agreement_rate"] == report.labels.agreement_rate
    assert stats["contributing_tasks"] == len(report.contrast.tasks)


@pytest.mark.slow
def test_held_out_success_is_measured_at_each_rate_and_rules_do_not_hurt_a_clean_run(
        files_comments: tuple[MiningReport, Path]) -> None:
    report, _ = files_comments
    assert [level.p_inj for level in report.levels] == list(REPORT_LEVELS)
    runs = len(report.held_out) * len(default_pool())  # one seed
    assert all(level.runs == runs for level in report.levels)
    clean = report.levels[0]
    assert clean.with_rules >= clean.without_rules


@pytest.mark.slow
def test_the_cli_mines_the_same_rules_and_levels_and_keeps_a_disabled_rule_disabled(
        files_comments: tuple[MiningReport, Path], tmp_path: Path) -> None:
    """`unstuck mine` in another process, same settings: the same report (determinism across
    processes), its JSON as documented, and a rule the user disabled stays disabled."""
    import os
    import subprocess
    import sys

    from unstuck.mining.mine import report_to_dict
    from unstuck.mining.rules import save_record

    first, records = files_comments
    record = load_record(record_path("files_comments", records))
    chosen = record.rules[0]
    folder = tmp_path / "records"
    save_record(record.with_rule(replace(chosen, enabled=False)), record_path("files_comments", folder))
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "UNSTUCK_RECORDS_DIR"}
    proc = subprocess.run([sys.executable, "-m", "unstuck", "mine", "files_comments", "--seeds", "1", "--workers", "2",
                           "--records", str(folder), "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    expected = report_to_dict(first)
    for key in ("eligibility", "mining_tasks", "held_out", "rollouts", "labels", "contrast", "bad_patterns", "rules",
                "levels", "pool"):
        assert data[key] == json.loads(json.dumps(expected[key])), key
    labels = data["labels"]  # agreement over the rollouts both labelled; discards over all of them
    agreed, disagreed, errors = labels["agreed"], labels["disagreed"], labels["analyzer_errors"]
    assert labels["agreement_rate"] == pytest.approx(agreed / (agreed + disagreed))
    assert labels["discard_rate"] == pytest.approx((disagreed + errors) / (agreed + disagreed + errors))
    assert [level["p_inj"] for level in data["levels"]] == [0.0, 0.1, 0.3]
    assert all(rule["kept"] == (rule["fixed"] > rule["broke"]) for rule in data["rules"])
    assert data["record"] == str(record_path("files_comments", folder)) and "record written to" in proc.stdout
    assert data["kept_disabled"] == [chosen.id] and f"kept disabled as you left them: {chosen.id}" in proc.stdout
    rewritten = load_record(record_path("files_comments", folder))
    assert rewritten.rule(chosen.id).enabled is False
    assert [replace(r, enabled=True) for r in rewritten.rules] == list(first.kept_rules)


# -- models are asked once before mining (review: a dead model joined the pool silently) -----------

def test_a_model_that_does_not_answer_stops_mining_before_any_rollout() -> None:
    import socket

    from unstuck.mining.agents import ModelSpec
    from unstuck.mining.mine import check_models

    with socket.socket() as closed:  # a port on loopback that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(MiningError, match=rf"--model ghost at http://127.0.0.1:{port}/v1: no reply .*mining did not"):
        check_models([ModelSpec("ghost", base_url=f"http://127.0.0.1:{port}/v1")], timeout_s=5)


def test_a_model_that_answers_passes_the_check() -> None:
    from unstuck.evals.chat_server import ChatServer
    from unstuck.mining.agents import ModelSpec
    from unstuck.mining.mine import check_models

    with ChatServer([], closing="OK") as server:
        check_models([ModelSpec("local", base_url=server.base_url)])
        assert len(server.requests) == 1 and "tools" not in server.requests[0]
