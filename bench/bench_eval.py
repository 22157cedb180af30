"""Benchmark: the full default eval suite, end to end (issue 3: under 2 minutes on 2 cores).

Runs every bundled scenario with every reference agent, unguarded and guarded, as
``unstuck eval`` does, and prints the wall time of the whole suite and of each mode, with the
guarded/unguarded ratio measured in the same run.

Run: ``.venv/bin/python bench/bench_eval.py``
"""

from __future__ import annotations

import time

from unstuck.evals.runner import RunMetrics, run_eval
from unstuck.evals.scenarios import builtin_scenarios


def main() -> None:
    scenarios = builtin_scenarios()
    stamps: list[tuple[RunMetrics, float]] = []
    last = time.perf_counter()

    def record(metrics: RunMetrics) -> None:
        nonlocal last
        now = time.perf_counter()
        stamps.append((metrics, now - last))
        last = now

    started = time.perf_counter()
    results = run_eval(scenarios, progress=record)
    total = time.perf_counter() - started
    guarded = sum(seconds for metrics, seconds in stamps if metrics.guarded)
    unguarded = sum(seconds for metrics, seconds in stamps if not metrics.guarded)
    errors = sum(1 for r in results if r.error)
    print(f"full default suite: {len(scenarios)} scenarios, {len(results)} runs, {total:.1f} s wall "
          f"(target: under 120 s); harness errors: {errors}")
    print(f"unguarded runs {unguarded:.1f} s, guarded runs {guarded:.1f} s, ratio guarded/unguarded "
          f"{guarded / unguarded:.2f}")


if __name__ == "__main__":
    main()
