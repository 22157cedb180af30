"""Contrast pairs: an agreed success and an agreed failure of the same task (seed 003, "Why
Success and Failure Must Share a Task").

For a task ``q`` with agreed correct rollouts ``C_q`` and agreed failed ones ``F_q`` (each with
its diagnosis ``e``, first erroneous turn ``t*`` and pre-error state ``s*``), the candidates
are ``{(q, τ+, τ−, e, t*, s*) : τ+ ∈ C_q, (τ−, e, t*, s*) ∈ F_q}``. At most ``pair_cap`` are
taken per task; a task without both outcomes supplies nothing; an environment needs pairs
from at least :data:`MIN_CONTRAST_TASKS` distinct tasks before rules are mined from them.

Only joint labels (:func:`unstuck.mining.labels.joint_label`) enter, so a noisy rollout that
recovered and was agreed correct is a success, never a failure: whether noise was injected
plays no part in the outcome.

Order is deterministic whatever order the rollouts finished in: tasks by id; within a task,
rollouts by (agent, seed); the capped selection takes every failure once (each with the next
success in turn) before any failure twice, so a small cap spreads over distinct failures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from unstuck.mining.environment import MiningError, Snapshot
from unstuck.mining.labels import JointLabel
from unstuck.mining.trace import BadPattern, Trace

__all__ = ["MIN_CONTRAST_TASKS", "ContrastPair", "ContrastSet", "contrast_pairs"]

#: Distinct tasks that must contribute pairs before an environment's rules are mined (seed 003:
#: "each environment draws pairs from at least five distinct tasks").
MIN_CONTRAST_TASKS = 5


@dataclass(frozen=True, slots=True)
class ContrastPair:
    """``(task, success, failure, diagnosis, first erroneous turn, pre-error state)`` with the
    failure's bad pattern. ``first_error_turn`` is a step index of ``failure``, or
    ``len(failure.steps)`` for its final answer; ``pre_error_state`` the state before it."""

    task: str
    success: Trace
    failure: Trace
    pattern: BadPattern
    diagnosis: str
    first_error_turn: int
    pre_error_state: Snapshot


@dataclass(frozen=True, slots=True)
class ContrastSet:
    """The pairs of one environment, the tasks that contributed (by id), and pairs per task
    as ``(task id, count)`` in task order."""

    environment: str
    pairs: tuple[ContrastPair, ...]
    tasks: tuple[str, ...]
    per_task: tuple[tuple[str, int], ...]

    @property
    def enough(self) -> bool:
        """At least :data:`MIN_CONTRAST_TASKS` distinct tasks contributed pairs."""
        return len(self.tasks) >= MIN_CONTRAST_TASKS

    @property
    def message(self) -> str:
        """One line saying how many tasks contributed and, when too few, that no rules are
        mined, e.g. ``3 tasks contributed contrast pairs in files; at least 5 are needed, so no
        rules are mined``."""
        where = f" in {self.environment}" if self.environment else ""
        counted = f"{len(self.tasks)} task{'' if len(self.tasks) == 1 else 's'} contributed {len(self.pairs)} " \
                  f"contrast pair{'' if len(self.pairs) == 1 else 's'}{where}"
        if self.enough:
            return counted
        return f"{counted}; at least {MIN_CONTRAST_TASKS} tasks are needed, so no rules are mined"


def _rollout_key(label: JointLabel) -> tuple[str, str]:
    return (label.trace.agent, label.trace.seed)


def contrast_pairs(labeled: Iterable[JointLabel], pair_cap: int) -> ContrastSet:
    """The contrast pairs among ``labeled`` (agreed joint labels of one environment), at most
    ``pair_cap`` per task (see the module doc for the order).

    Raises:
        MiningError: for a ``pair_cap`` below 1, labels from more than one environment, or a
            failure label without its pattern, turn or pre-error state.
    """
    if isinstance(pair_cap, bool) or not isinstance(pair_cap, int) or pair_cap < 1:
        raise MiningError(f"pair_cap must be a whole number of pairs of at least 1, got {pair_cap!r}")
    successes: dict[str, list[JointLabel]] = defaultdict(list)
    failures: dict[str, list[JointLabel]] = defaultdict(list)
    environments: set[str] = set()
    for label in labeled:
        environments.add(label.trace.environment)
        if label.correct:
            successes[label.task].append(label)
            continue
        if label.pattern is None or label.first_error_turn is None or label.pre_error_state is None:
            raise MiningError(f"failure label of task {label.task!r} by {label.trace.agent!r} "
                              f"(seed {label.trace.seed!r}) lacks its pattern, turn or pre-error state")
        failures[label.task].append(label)
    if len(environments) > 1:
        raise MiningError(f"contrast pairs are mined per environment; the labels come from {sorted(environments)}")
    pairs: list[ContrastPair] = []
    per_task: list[tuple[str, int]] = []
    for task in sorted(set(successes) & set(failures)):
        good = sorted(successes[task], key=_rollout_key)
        bad = sorted(failures[task], key=_rollout_key)
        chosen = [
            (good[(j + k) % len(good)], bad[j])
            for k in range(len(good)) for j in range(len(bad))
        ][:pair_cap]
        for success, failure in chosen:
            assert failure.pattern is not None and failure.first_error_turn is not None
            assert failure.pre_error_state is not None
            pairs.append(ContrastPair(task, success.trace, failure.trace, failure.pattern, failure.diagnosis,
                                      failure.first_error_turn, failure.pre_error_state))
        per_task.append((task, len(chosen)))
    environment = next(iter(environments), "")
    return ContrastSet(environment, tuple(pairs), tuple(t for t, _ in per_task), tuple(per_task))
