"""Running rollouts in parallel: local processes and Ray tasks give the same traces as one
process, in spec order; bad input fails before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mining.toy_env import make_environment
from unstuck.mining.backends import run_in_folder, run_rollouts
from unstuck.mining.environment import MiningError
from unstuck.mining.rollout import RolloutSpec

TESTS = Path(__file__).resolve().parent.parent


def specs() -> list[RolloutSpec]:
    tasks = ("append_two", "copy_deadline", "publish_launch")
    agents = ("careful", "reckless")
    return [RolloutSpec("toy_notes", task, agent, seed=3, p_inj=0.3, factory=make_environment)
            for task in tasks for agent in agents]


def in_process() -> list:  # type: ignore[type-arg]
    return [run_in_folder(spec) for spec in specs()]


def test_an_unknown_backend_is_a_mining_error() -> None:
    with pytest.raises(MiningError, match="unknown backend 'spark'.*local, ray"):
        run_rollouts(specs(), backend="spark")


def test_a_task_that_does_not_exist_fails_before_any_rollout_runs() -> None:
    bad = [*specs(), RolloutSpec("toy_notes", "no_such_task", "careful", factory=make_environment)]
    with pytest.raises(MiningError, match="no task 'no_such_task'"):
        run_rollouts(bad)


def test_an_environment_that_does_not_exist_is_a_mining_error() -> None:
    with pytest.raises(MiningError, match="unknown environment 'nowhere'"):
        run_rollouts([RolloutSpec("nowhere", "t", "careful")])


def test_an_unknown_agent_profile_and_bad_workers_are_mining_errors() -> None:
    with pytest.raises(MiningError, match="unknown agent profile"):
        run_rollouts([RolloutSpec("toy_notes", "find_urgent", "genius", factory=make_environment)])
    with pytest.raises(MiningError, match="workers"):
        run_rollouts(specs(), workers=0)


def test_no_specs_run_nothing() -> None:
    assert run_rollouts([]) == []


def test_a_temporary_folder_per_rollout_is_removed_afterwards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    run_in_folder(specs()[0])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_local_processes_give_the_same_traces_as_one_process_in_spec_order() -> None:
    seen: list[tuple[int, int]] = []
    traces = run_rollouts(specs(), backend="local", workers=2, progress=lambda done, total: seen.append((done, total)))
    assert traces == in_process()
    assert [(t.task, t.agent) for t in traces] == [(s.task, s.agent) for s in specs()]
    assert seen == [(i, len(specs())) for i in range(1, len(specs()) + 1)]


@pytest.mark.slow
def test_ray_tasks_give_the_same_traces_as_local_processes() -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(TESTS)}})  # workers import the toy environment
    try:
        seen: list[int] = []
        traces = run_rollouts(specs(), backend="ray", workers=2, progress=lambda done, total: seen.append(done))
        assert ray.is_initialized()  # a cluster it did not start is left running
    finally:
        ray.shutdown()
    assert traces == run_rollouts(specs(), backend="local", workers=2)
    assert seen == list(range(1, len(specs()) + 1))


@pytest.mark.slow
def test_the_ray_backend_starts_and_shuts_down_its_own_local_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("PYTHONPATH", str(TESTS))  # the workers it starts import the toy environment
    assert not ray.is_initialized()
    traces = run_rollouts(specs()[:2], backend="ray", workers=2)
    assert not ray.is_initialized()
    assert traces == in_process()[:2]
