"""Success against the injection rate: the eval re-run with faults injected (seed 003).
Internal: not a supported import path (docs/reference/index.md lists those that are).

:func:`run_curve` runs the guarded loop on the scenarios at each rate of
:data:`CURVE_LEVELS`; :func:`summarise` turns the runs into one point per rate (the share of
runs that passed their scenario's check) and a breakdown of the same runs by how many
injected failures each episode met (0, 1, 2, 3 or more), so recovery from one injected
failure can be told from recovery from several.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from unstuck.evals.runner import ModelFactory, RunMetrics, run_eval
from unstuck.evals.scenarios import Scenario
from unstuck.faults.bank import FailureBank

__all__ = ["CURVE_LEVELS", "Curve", "CurvePoint", "InjectedBucket", "run_curve", "summarise"]

#: The injection rates of the curve (issue 4; seed 003 sweeps the same range).
CURVE_LEVELS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3)

#: Episodes meeting this many injected failures or more share the last bucket.
_TOP_BUCKET = 3


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """Guarded runs at one injection rate: how many, how many passed, and the mean number of
    injected failures per run."""

    p_inj: float
    runs: int
    passed: int
    mean_injected: float

    @property
    def success_rate(self) -> float | None:
        """passed / runs, or ``None`` with no runs."""
        return self.passed / self.runs if self.runs else None


@dataclass(frozen=True, slots=True)
class InjectedBucket:
    """Guarded runs (all rates) that met ``injected`` failures (the last bucket: that many or
    more): how many, and how many still passed."""

    injected: int
    runs: int
    passed: int

    @property
    def label(self) -> str:
        """``"0"``, ``"1"``, ``"2"``, ``"3+"``."""
        return f"{self.injected}+" if self.injected == _TOP_BUCKET else str(self.injected)

    @property
    def success_rate(self) -> float | None:
        """passed / runs, or ``None`` with no runs."""
        return self.passed / self.runs if self.runs else None


@dataclass(frozen=True, slots=True)
class Curve:
    """The whole sweep: one point per rate, the breakdown by injected failures, the runs."""

    points: tuple[CurvePoint, ...]
    buckets: tuple[InjectedBucket, ...]
    runs: tuple[RunMetrics, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (each point and bucket with its success rate)."""
        return {
            "points": [{**asdict(p), "success_rate": p.success_rate} for p in self.points],
            "by_injected_failures": [
                {"injected": b.label, "runs": b.runs, "passed": b.passed, "success_rate": b.success_rate}
                for b in self.buckets
            ],
        }


def summarise(runs: Iterable[RunMetrics]) -> Curve:
    """Points and buckets from guarded runs (unguarded runs are left out: they have no pass
    check). Points come in rising rate order."""
    guarded = tuple(r for r in runs if r.guarded)
    rates = sorted({r.p_inj for r in guarded})
    points = []
    for rate in rates:
        at = [r for r in guarded if r.p_inj == rate]
        points.append(CurvePoint(
            rate, len(at), sum(1 for r in at if r.passed), sum(r.injected_failures for r in at) / len(at),
        ))
    buckets = []
    for count in range(_TOP_BUCKET + 1):
        members = [r for r in guarded if min(r.injected_failures, _TOP_BUCKET) == count]
        buckets.append(InjectedBucket(count, len(members), sum(1 for r in members if r.passed)))
    return Curve(tuple(points), tuple(buckets), guarded)


def run_curve(
    scenarios: Sequence[Scenario],
    *,
    levels: Sequence[float] = CURVE_LEVELS,
    agents: Iterable[str] | None = None,
    models: Mapping[str, ModelFactory] | None = None,
    repeat: int = 1,
    seed: int | str = 0,
    progress: Callable[[RunMetrics], None] | None = None,
    bank: FailureBank | None = None,
) -> Curve:
    """Run the guarded loop on ``scenarios`` at each rate of ``levels`` (``repeat`` times)
    and summarise. Every rate uses the same random stream (``seed``), so a run at 0.2 is
    the run ``unstuck eval --p-inj 0.2 --seed SEED`` makes, and a return replaced at a low
    rate is replaced at every higher one (common random numbers: the curve's steps come from
    the rate, not from luck).

    Raises:
        ValueError: when a level is outside [0, 1].
    """
    for level in levels:
        if not 0.0 <= level <= 1.0:
            raise ValueError(f"injection rate {level!r} is outside [0, 1]")
    runs: list[RunMetrics] = []
    for level in levels:
        runs.extend(run_eval(
            scenarios, agents=agents, models=models, repeat=repeat, progress=progress, p_inj=level,
            seed=seed, modes=(True,), bank=bank,
        ))
    return summarise(runs)
