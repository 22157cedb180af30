"""``unstuck eval --compare BASELINE.json``: what got worse since a baseline run.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A regression is a run (same scenario, agent, mode and repeat) that, against the baseline:

* passed its expectation and no longer does;
* now has a lower judged mean (by more than :data:`MEAN_TOLERANCE`);
* now wastes more calls after the blocker opened, when guarded;
* now asks the user later, when guarded (``steps_to_escalate`` grew).

Runs missing from either side are not regressions; they are counted separately.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unstuck.core.errors import UnstuckError
from unstuck.core.readers import parse_json, read_text
from unstuck.evals.runner import RunMetrics

__all__ = ["MEAN_TOLERANCE", "BaselineError", "Regression", "find_regressions", "load_baseline"]

#: A judged mean may drop by this much before it counts as a regression.
MEAN_TOLERANCE = 0.25

RunKey = tuple[str, str, bool, int]


class BaselineError(UnstuckError, ValueError):
    """The baseline file cannot be read or is not an ``unstuck eval --json`` result."""


@dataclass(frozen=True, slots=True)
class Regression:
    """One way one run got worse: ``what`` changed from ``before`` to ``after``."""

    scenario: str
    agent: str
    guarded: bool
    repeat: int
    what: str
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class _Baseline:
    passed: bool | None
    mean: float | None
    wasted_calls: int
    steps_to_escalate: int | None


def load_baseline(path: Path) -> dict[RunKey, _Baseline]:
    """Read a result written by ``unstuck eval --json``.

    Raises:
        BaselineError: naming the file, when it cannot be read, is not JSON, or a run lacks
            a field (naming the run's position).
    """
    document = parse_json(read_text(path, what="the baseline", error=BaselineError), where=str(path),
                          error=BaselineError)
    runs = document.get("runs") if isinstance(document, Mapping) else None
    if not isinstance(runs, list):
        raise BaselineError(f"{path}: no 'runs' list; is it an `unstuck eval --json` result?")
    baseline: dict[RunKey, _Baseline] = {}
    for index, run in enumerate(runs):
        try:
            guarded, steps, wasted = run["guarded"], run.get("steps_to_escalate"), run.get("wasted_calls", 0)
            if not isinstance(guarded, bool):
                raise TypeError(f"guarded must be true or false, not {guarded!r}")
            for name, value in (("steps_to_escalate", steps), ("wasted_calls", wasted)):
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                    raise TypeError(f"{name} must be a whole number, not {value!r}")
            key = (str(run["scenario"]), str(run["agent"]), guarded, int(run.get("repeat", 0)))
            judgement = run.get("judgement") or {}
            scores = [v for v in judgement.values() if isinstance(v, int | float) and not isinstance(v, bool)]
            passed = run.get("passed")
            baseline[key] = _Baseline(
                passed if isinstance(passed, bool) else None, sum(scores) / len(scores) if scores else None,
                int(wasted or 0), steps,
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise BaselineError(f"{path}: run {index} is malformed ({type(exc).__name__}: {exc})") from exc
    return baseline


def _checks(before: _Baseline, now: RunMetrics) -> Iterable[tuple[str, Any, Any]]:
    if before.passed and now.passed is False:
        yield "no longer passes", "pass", "fail"
    mean = now.judgement.mean if now.judgement is not None else None
    if before.mean is not None and mean is not None and mean < before.mean - MEAN_TOLERANCE:
        yield "judged mean fell", f"{before.mean:.1f}", f"{mean:.1f}"
    if now.guarded and now.wasted_calls > before.wasted_calls:
        yield "more wasted calls", before.wasted_calls, now.wasted_calls
    if now.guarded and before.steps_to_escalate is not None and now.steps_to_escalate is not None \
            and now.steps_to_escalate > before.steps_to_escalate:
        yield "asked later", before.steps_to_escalate, now.steps_to_escalate


def find_regressions(
    baseline: Mapping[RunKey, _Baseline], results: Sequence[RunMetrics]
) -> tuple[list[Regression], int]:
    """The regressions of ``results`` against ``baseline``, and how many runs had no
    counterpart on the other side.
    """
    found: list[Regression] = []
    matched = 0
    for now in results:
        before = baseline.get((now.scenario, now.agent, now.guarded, now.repeat))
        if before is None:
            continue
        matched += 1
        found.extend(
            Regression(now.scenario, now.agent, now.guarded, now.repeat, what, str(old), str(new))
            for what, old, new in _checks(before, now)
        )
    unmatched = (len(results) - matched) + (len(baseline) - matched)
    return found, unmatched
