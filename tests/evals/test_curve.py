"""Success against the injection rate, and recovery by injected failures per run."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from chromium import chromium_dom
from unstuck.evals.curve import CURVE_LEVELS, Curve, run_curve, summarise
from unstuck.evals.report import write_html
from unstuck.evals.runner import RunMetrics
from unstuck.evals.scenarios import builtin_scenarios


def run(passed: bool, p_inj: float, injected: int, guarded: bool = True) -> RunMetrics:
    return RunMetrics(
        "s", "a", guarded, "counter", "done", "done", 3, None, None, 0, 0, None, None, passed if guarded else None,
        p_inj=p_inj, injected_failures=injected,
    )


def test_curve_levels_are_the_rates_the_issue_names() -> None:
    assert CURVE_LEVELS == (0.0, 0.05, 0.1, 0.2, 0.3)


def test_points_count_guarded_runs_per_rate_and_buckets_group_by_injected_failures() -> None:
    runs = [
        run(True, 0.0, 0), run(True, 0.0, 0), run(False, 0.0, 0, guarded=False),
        run(True, 0.2, 1), run(False, 0.2, 2), run(False, 0.2, 5), run(True, 0.2, 3),
    ]
    curve = summarise(runs)
    assert [(p.p_inj, p.runs, p.passed) for p in curve.points] == [(0.0, 2, 2), (0.2, 4, 2)]
    assert curve.points[1].mean_injected == (1 + 2 + 5 + 3) / 4
    assert curve.points[1].success_rate == 0.5
    assert [(b.label, b.runs, b.passed) for b in curve.buckets] == [("0", 2, 2), ("1", 1, 1), ("2", 1, 0), ("3+", 2, 1)]
    assert curve.buckets[2].success_rate == 0.0
    assert len(curve.runs) == 6  # the unguarded run has no pass check and is left out


def test_a_rate_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        run_curve([], levels=(0.0, 1.2))


@pytest.fixture(scope="module")
def sweep() -> Curve:
    chosen = [s for s in builtin_scenarios() if s.name in ("wrong_path", "gh_logged_out")]
    return run_curve(chosen, levels=(0.0, 1.0), agents=["retrier"], seed=11)


def test_every_return_replaced_fails_what_the_clean_runs_pass(sweep: Curve) -> None:
    clean, broken = sweep.points
    assert (clean.p_inj, clean.passed, clean.runs, clean.mean_injected) == (0.0, 2, 2, 0.0)
    assert broken.p_inj == 1.0 and broken.mean_injected >= 1
    # wrong_path needs one real success to be done; with every return a failure it cannot be
    wrong_path = next(r for r in sweep.runs if r.scenario == "wrong_path" and r.p_inj == 1.0)
    assert not wrong_path.passed and wrong_path.injected_failures >= 1
    assert sum(b.runs for b in sweep.buckets) == 4 and sweep.buckets[0].runs == 2


def test_the_same_seed_sweeps_the_same_injections() -> None:
    chosen = [s for s in builtin_scenarios() if s.name == "wrong_path"]
    first = run_curve(chosen, levels=(0.3,), agents=["improviser"], seed=4)
    again = run_curve(chosen, levels=(0.3,), agents=["improviser"], seed=4)
    assert [(r.injected_failures, r.outcome, r.tool_calls) for r in first.runs] == [
        (r.injected_failures, r.outcome, r.tool_calls) for r in again.runs]


def test_chromium_draws_one_point_per_rate_and_the_recovery_table(sweep: Curve, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_html([replace(r, p_inj=0.0) for r in sweep.runs[:1]], page, curve=sweep)
    dom = chromium_dom(page, tmp_path)
    chart = re.search(r'<svg id="injection-curve".*?</svg>', dom, re.DOTALL)
    assert chart is not None and len(re.findall(r'<circle class="curve-point"', chart.group(0))) == 2
    table = re.search(r'<table id="injected-table">.*?</table>', dom, re.DOTALL)
    assert table is not None and "3+" in table.group(0)
