"""Contrast pairs: an agreed success and an agreed failure of the same task, capped per task,
in a deterministic order, and enough of them only from five distinct tasks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from tests.mining.hand_traces import EFFECTS, careful, guessed, noisy_recovered, task, unchecked

from unstuck.mining.contrast import MIN_CONTRAST_TASKS, ContrastSet, contrast_pairs
from unstuck.mining.environment import MiningError, Verification
from unstuck.mining.labels import DeterministicAnalyzer, JointLabel, joint_label
from unstuck.mining.trace import BadPattern, Trace

PASSED = Verification(True, "the note holds the comment once")
FAILED = Verification(False, "the note holds no such comment")
ANALYZER = DeterministicAnalyzer()


def agreed(t: Trace, verification: Verification) -> JointLabel:
    joined = joint_label(ANALYZER.label(t, task(t.task), EFFECTS), verification, t)
    assert joined is not None, f"the analyzer and the verifier disagree on {t.agent}"
    return joined


def success(task_id: str = "budget-comment", agent: str = "careful", seed: str = "0") -> JointLabel:
    return agreed(careful(task_id=task_id, agent=agent, seed=seed), PASSED)


def failure(task_id: str = "budget-comment", agent: str = "careless", seed: str = "0") -> JointLabel:
    return agreed(guessed(task_id=task_id, agent=agent, seed=seed), FAILED)


def test_a_pair_is_an_agreed_success_and_an_agreed_failure_of_the_same_task() -> None:
    good, bad = success(), failure()
    found = contrast_pairs([good, bad], pair_cap=3)
    (pair,) = found.pairs
    assert (pair.task, pair.success, pair.failure) == ("budget-comment", good.trace, bad.trace)
    assert (pair.pattern, pair.first_error_turn) == (BadPattern.UNVERIFIED_IDENTIFIER, 0)
    assert pair.diagnosis == bad.diagnosis and pair.pre_error_state == bad.trace.steps[0].before
    assert (found.tasks, found.per_task, found.environment) == (("budget-comment",), (("budget-comment", 1),), "notes")


def test_a_recovered_noisy_success_is_a_success() -> None:
    noisy = agreed(noisy_recovered(agent="reader", seed="7"), PASSED)
    assert noisy.trace.injected == 1 and noisy.correct
    (pair,) = contrast_pairs([noisy, failure()], pair_cap=2).pairs
    assert pair.success == noisy.trace
    # it never stands in for the failure of a pair
    assert contrast_pairs([noisy, success()], pair_cap=2).pairs == ()


def test_a_task_with_only_successes_supplies_no_pair() -> None:
    found = contrast_pairs([success(agent="a"), success(agent="b")], pair_cap=5)
    assert (found.pairs, found.tasks, found.per_task) == ((), (), ())


def test_a_task_with_only_failures_supplies_no_pair() -> None:
    assert contrast_pairs([failure(agent="a"), failure(agent="b")], pair_cap=5).pairs == ()


def test_a_success_and_a_failure_of_different_tasks_make_no_pair() -> None:
    assert contrast_pairs([success("budget-comment"), failure("launch-comment")], pair_cap=5).pairs == ()


def test_pair_cap_limits_pairs_per_task() -> None:
    goods = [success(agent=f"good-{i}") for i in range(2)]
    bads = [failure(agent=f"bad-{i}") for i in range(3)]
    other = [success("launch-comment"), failure("launch-comment")]
    found = contrast_pairs([*goods, *bads, *other], pair_cap=4)
    assert found.per_task == (("budget-comment", 4), ("launch-comment", 1))
    assert len(found.pairs) == 5
    uncapped = contrast_pairs([*goods, *bads], pair_cap=100)
    assert len(uncapped.pairs) == 2 * 3  # every success with every failure, once
    assert len({(p.success.agent, p.failure.agent) for p in uncapped.pairs}) == 6


def test_a_small_cap_spreads_over_distinct_failures_first() -> None:
    goods = [success(agent=f"good-{i}") for i in range(2)]
    bads = [failure(agent=f"bad-{i}") for i in range(3)]
    found = contrast_pairs([*goods, *bads], pair_cap=3)
    assert sorted(p.failure.agent for p in found.pairs) == ["bad-0", "bad-1", "bad-2"]
    assert {p.success.agent for p in found.pairs} == {"good-0", "good-1"}


def test_pairs_come_in_the_same_order_whatever_order_the_labels_come_in() -> None:
    labels = [success(agent="good-0"), success(agent="good-1"), failure(agent="bad-0"),
              agreed(unchecked(agent="bad-1"), FAILED), success("launch-comment"), failure("launch-comment")]

    def order(found: ContrastSet) -> Sequence[tuple[str, str, str]]:
        return [(p.task, p.success.agent, p.failure.agent) for p in found.pairs]

    first = order(contrast_pairs(labels, pair_cap=3))
    assert [t for t, _, _ in first] == sorted(t for t, _, _ in first)
    for shuffled in itertools.permutations(labels):
        assert order(contrast_pairs(shuffled, pair_cap=3)) == first


def test_fewer_than_five_contributing_tasks_is_not_enough_and_says_how_many() -> None:
    tasks = [f"task-{i}" for i in range(MIN_CONTRAST_TASKS - 2)]
    found = contrast_pairs([label for t in tasks for label in (success(t), failure(t))], pair_cap=2)
    assert len(found.tasks) == 3 and not found.enough
    assert f"3 tasks contributed 3 contrast pairs in notes; at least {MIN_CONTRAST_TASKS} tasks are needed" in found.message
    assert "no rules" in found.message


def test_five_contributing_tasks_are_enough() -> None:
    tasks = [f"task-{i}" for i in range(MIN_CONTRAST_TASKS)]
    # a sixth task with only a success does not count
    found = contrast_pairs([*(label for t in tasks for label in (success(t), failure(t))), success("lonely")],
                           pair_cap=2)
    assert found.tasks == tuple(tasks) and found.enough
    assert found.message == f"{MIN_CONTRAST_TASKS} tasks contributed {MIN_CONTRAST_TASKS} contrast pairs in notes"


@pytest.mark.parametrize("cap", [0, -1, True, 1.5])
def test_a_pair_cap_below_one_is_refused(cap: object) -> None:
    with pytest.raises(MiningError, match="pair_cap"):
        contrast_pairs([success(), failure()], pair_cap=cap)  # type: ignore[arg-type]


def test_labels_of_two_environments_are_refused() -> None:
    elsewhere = agreed(guessed(environment="tracker"), FAILED)
    with pytest.raises(MiningError, match="per environment"):
        contrast_pairs([success(), elsewhere], pair_cap=2)


def test_a_failure_label_without_its_turn_is_refused() -> None:
    bad = failure()
    broken = JointLabel(bad.trace, False, bad.pattern, bad.diagnosis, None, None, bad.analyzer, bad.evidence)
    with pytest.raises(MiningError, match="lacks its pattern"):
        contrast_pairs([success(), broken], pair_cap=2)
