"""One rollout: a fresh session, the state snapshotted before every call, the injector's
noise (a replaced return never rolls the write back), the guard only observing, and the same
spec giving the same trace."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from mining.toy_env import INITIAL_NOTES, NotesEnvironment, NotesSession, make_environment
from unstuck.evals.chat_server import ChatServer
from unstuck.faults.bank import FailureBank, load_bank
from unstuck.mining.agents import ModelSpec, ScriptedMiner, profile
from unstuck.mining.environment import MiningError, Snapshot, Task
from unstuck.mining.rollout import RolloutSpec, find_task, injection_seed, rollout, run_spec
from unstuck.mining.rules import ActionKind, Moment, Rule, RuleAction, Trigger
from unstuck.mining.trace import BadPattern


def notes(snapshot_text: str | None) -> dict[str, str]:
    assert snapshot_text is not None
    return {n["id"]: n["body"] for n in json.loads(snapshot_text)["notes"]}


def folder(tmp_path: Path, name: str) -> Path:
    """An empty folder for one session."""
    made = tmp_path / name
    made.mkdir()
    return made


def write_only_bank() -> FailureBank:
    """The bundled timeout form, made to fit only the toy's write tool: at p_inj 1 every
    append's return is replaced and nothing else's."""
    form = load_bank().get("python-timeout-error")
    assert form is not None
    return FailureBank([replace(form, id="append-timeout", tools=("append_to_note",))])


def spec(task: str, agent: str = "careful", **changes: object) -> RolloutSpec:
    base = RolloutSpec("toy_notes", task, agent, seed=7, p_inj=0.0, factory=make_environment)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_trace_names_its_rollout_and_ends_with_the_final_state(tmp_path: Path) -> None:
    trace = run_spec(spec("append_owner"), tmp_path)
    assert (trace.environment, trace.task, trace.agent, trace.p_inj) == ("toy_notes", "append_owner", "careful", 0.0)
    assert trace.seed == injection_seed(7, "toy_notes", "append_owner", "careful") == "7:toy_notes:append_owner:careful"
    assert trace.status == "done"
    assert [s.index for s in trace.steps] == list(range(len(trace.steps)))
    assert notes(trace.final.text("notes.json"))["n-21c9"] == "Ship the beta.\nOwner: Dana"


def test_each_step_keeps_the_real_state_before_its_call(tmp_path: Path) -> None:
    trace = run_spec(spec("append_owner"), folder(tmp_path, "run"))
    fresh = NotesEnvironment().open(find_task(make_environment(), "append_owner"), folder(tmp_path, "fresh"))
    assert trace.steps[0].before == fresh.snapshot()
    tools = [s.call.tool for s in trace.steps]
    assert tools == ["list_notes", "append_to_note", "get_note"]
    assert notes(trace.steps[1].before.text("notes.json"))["n-21c9"] == INITIAL_NOTES[1]["body"]  # before the write
    assert notes(trace.steps[2].before.text("notes.json"))["n-21c9"].endswith("\nOwner: Dana")  # after it


def test_an_injected_failure_on_a_write_leaves_the_write_done(tmp_path: Path) -> None:
    environment = make_environment()
    task = find_task(environment, "append_owner")
    agent = ScriptedMiner(task, profile("no_readback").behaviour, name="no_readback")
    trace = rollout(environment, task, "no_readback", agent, p_inj=1.0, seed=1, root=tmp_path, bank=write_only_bank())
    writes = [s for s in trace.steps if s.call.tool == "append_to_note"]
    # no_readback retries a transient failure blindly, up to 2 repeats: every return was replaced
    assert len(writes) == 3
    assert all(not s.ok and s.injected == "append-timeout" and s.kind == "timeout" for s in writes)
    assert notes(trace.final.text("notes.json"))["n-21c9"].count("Owner: Dana") == 3  # each write happened
    assert trace.injected == 3


def test_reading_back_recovers_from_an_injected_write_failure(tmp_path: Path) -> None:
    environment = make_environment()
    task = find_task(environment, "append_owner")
    trace = rollout(environment, task, "careful", ScriptedMiner(task, profile("careful").behaviour), p_inj=1.0,
                    seed=1, root=folder(tmp_path, "run"), bank=write_only_bank())
    assert [s.call.tool for s in trace.steps] == ["list_notes", "append_to_note", "get_note"]
    assert trace.steps[1].injected == "append-timeout" and trace.steps[2].injected is None
    session = environment.open(task, folder(tmp_path, "check"))
    session.restore(trace.final)
    assert session.verify(task, trace.answer).passed


def test_the_same_spec_gives_the_same_trace_in_different_folders(tmp_path: Path) -> None:
    one = run_spec(spec("append_two", p_inj=0.4), folder(tmp_path, "a"))
    two = run_spec(spec("append_two", p_inj=0.4), folder(tmp_path, "b"))
    assert one == two
    assert pickle.loads(pickle.dumps(one)) == one


def test_different_seeds_give_different_injections(tmp_path: Path) -> None:
    patterns = set()
    for seed in range(5):
        trace = run_spec(spec("append_two", "careful", seed=seed, p_inj=0.5), folder(tmp_path, str(seed)))
        patterns.add(tuple((s.call.tool, s.injected) for s in trace.steps))
    assert len(patterns) > 1


def test_rollouts_run_unguarded_so_a_blocker_does_not_stop_the_agent(tmp_path: Path) -> None:
    trace = run_spec(spec("publish_launch", "no_ask"), tmp_path)
    # the guard records the tool's auth situation but neither stops nor refuses the repeat
    assert [(s.call.tool, s.kind) for s in trace.steps] == [("list_notes", None), ("publish_note", "auth"),
                                                          ("publish_note", "auth")]
    assert trace.status == "done"


def test_rules_in_a_spec_reach_the_scripted_agent(tmp_path: Path) -> None:
    lookup = Rule("r1", BadPattern.UNVERIFIED_IDENTIFIER, Trigger(Moment.BEFORE_CALL, "get_note", argument="note_id"),
                  RuleAction(ActionKind.LOOK_UP, "list_notes"), "Look the note up with list_notes.", support=3)
    trace = run_spec(spec("read_deadline", "reckless", rules=(lookup,)), tmp_path)
    assert [s.call.tool for s in trace.steps] == ["list_notes", "get_note"]


def test_a_model_spec_rollout_runs_an_openai_compatible_model(tmp_path: Path) -> None:
    server = ChatServer([{"tool_calls": [("list_notes", {})]}, {"content": "The urgent note is Vendor contract."}])
    with server:
        trace = run_spec(spec("find_urgent", ModelSpec("local-model", server.base_url)), tmp_path)  # type: ignore[arg-type]
    assert trace.agent == "local-model"
    assert [s.call.tool for s in trace.steps] == ["list_notes"] and trace.steps[0].ok
    assert trace.answer == "The urgent note is Vendor contract."


def test_a_model_rollout_samples_with_the_rollouts_seed(tmp_path: Path) -> None:
    server = ChatServer([{"content": "Nothing to do."}, {"content": "Nothing to do."}])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with server:
        run_spec(replace(spec("find_urgent", ModelSpec("local-model", server.base_url)), seed=7),  # type: ignore[arg-type]
                 tmp_path / "a")
        run_spec(replace(spec("find_urgent", ModelSpec("local-model", server.base_url, seed=3)), seed=7),  # type: ignore[arg-type]
                 tmp_path / "b")
    assert [request.get("seed") for request in server.requests] == [7, 3]  # a model's own seed wins


class _Unreadable(NotesSession):
    """A notes session whose state cannot be read (its folder is gone)."""

    closed = 0

    def snapshot(self) -> Snapshot:
        raise FileNotFoundError(f"{self.root} is gone")

    def close(self) -> None:
        _Unreadable.closed += 1


class _UnreadableNotes(NotesEnvironment):
    def open(self, task: Task, root: Path) -> NotesSession:
        return _Unreadable(root, super().open(task, root).tools)


def test_a_state_that_cannot_be_snapshotted_fails_the_rollout_and_still_closes_the_session(tmp_path: Path) -> None:
    environment = _UnreadableNotes()
    task = find_task(environment, "find_urgent")
    with pytest.raises(MiningError, match="snapshotted before a call.*is gone"):
        rollout(environment, task, "careful", ScriptedMiner(task, profile("careful").behaviour), p_inj=0.0, seed=0,
                root=tmp_path)
    assert _Unreadable.closed == 1


def test_specs_are_picklable_and_name_what_does_not_exist(tmp_path: Path) -> None:
    one = spec("find_urgent", rules=())
    assert pickle.loads(pickle.dumps(one)) == one
    with pytest.raises(MiningError, match="no task 'nope'.*read_deadline"):
        run_spec(spec("nope"), tmp_path)
    with pytest.raises(MiningError, match="profile"):
        run_spec(spec("find_urgent", "genius"), tmp_path)
    with pytest.raises(MiningError, match="unknown environment"):
        run_spec(RolloutSpec("no_such_env", "t", "careful"), tmp_path)
    with pytest.raises(MiningError, match="p_inj"):
        run_spec(spec("find_urgent", p_inj=1.5), tmp_path)
