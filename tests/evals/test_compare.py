from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from unstuck.evals.compare import BaselineError, find_regressions, load_baseline
from unstuck.evals.runner import RunMetrics, run_eval, write_json
from unstuck.evals.scenarios import builtin_scenarios


@pytest.fixture(scope="module")
def results() -> list[RunMetrics]:
    chosen = [s for s in builtin_scenarios() if s.name == "gh_logged_out"]
    return run_eval(chosen, agents=["improviser"])


def test_the_same_results_show_no_regression(results: list[RunMetrics], tmp_path: Path) -> None:
    write_json(results, tmp_path / "base.json")
    regressions, unmatched = find_regressions(load_baseline(tmp_path / "base.json"), results)
    assert regressions == [] and unmatched == 0


def test_worse_results_are_each_reported(results: list[RunMetrics], tmp_path: Path) -> None:
    write_json(results, tmp_path / "base.json")
    guarded = next(r for r in results if r.guarded)
    assert guarded.passed and guarded.steps_to_escalate == 3 and guarded.wasted_calls == 3
    worse = replace(guarded, passed=False, wasted_calls=7, steps_to_escalate=7,
                    judgement=replace(guarded.judgement, stopped_within_budget=2))  # type: ignore[type-var]
    regressions, _ = find_regressions(load_baseline(tmp_path / "base.json"), [worse])
    assert [(r.what, r.before, r.after) for r in regressions] == [
        ("no longer passes", "pass", "fail"),
        ("judged mean fell", "10.0", "8.4"),
        ("more wasted calls", "3", "7"),
        ("asked later", "3", "7"),
    ]


def test_runs_without_a_counterpart_are_counted_not_regressions(results: list[RunMetrics], tmp_path: Path) -> None:
    write_json(results[:1], tmp_path / "base.json")
    regressions, unmatched = find_regressions(load_baseline(tmp_path / "base.json"), results)
    assert regressions == [] and unmatched == len(results) - 1


@pytest.mark.parametrize(("text", "problem"), [
    ("not json", "not JSON"), ('{"runs": 3}', "no 'runs' list"), ('{"runs": [{"agent": "x"}]}', "run 0 is malformed"),
])
def test_a_bad_baseline_is_a_clear_error_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "base.json"
    path.write_text(text)
    with pytest.raises(BaselineError, match=problem) as caught:
        load_baseline(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(("field", "value"), [
    ("steps_to_escalate", "3"), ("wasted_calls", [1]), ("guarded", "false"), ("wasted_calls", 1e999),
])
def test_a_baseline_with_values_of_the_wrong_type_is_a_clear_error(tmp_path: Path, field: str, value: object) -> None:
    import json

    run = {"scenario": "s", "agent": "a", "guarded": True, "repeat": 0, "wasted_calls": 1, "steps_to_escalate": 1}
    run[field] = value
    path = tmp_path / "base.json"
    path.write_text(json.dumps({"runs": [run]}))
    with pytest.raises(BaselineError, match="run 0 is malformed"):
        load_baseline(path)
