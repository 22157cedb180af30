"""Benchmark: issue 24's three cost targets, each beside a baseline measured in the same run.

1. ``Guard.before`` + ``Guard.after`` per call, CPU time (``time.process_time_ns``), median
   over ``--calls`` calls on the mix of outputs of ``bench_guard.py`` (real gh output,
   a listing, command not found, a 429, a 200, a Markdown page, a mapping); target
   <= 30 µs. Baseline: ``normalize_result`` of the same output (what any loop does).
   Also printed: the same over the bundled failure bank's forms (almost all failures, the
   expensive end), for information.
2. Guard state save + reload at 1,000 steps (``to_json`` then ``from_json``), CPU time,
   median of ``--repeats``; target <= 15 ms. Baseline: ``json.dumps(json.loads(state))``
   of the same saved state.
3. One process classifying one output: ``python -c "from unstuck.recognise.classify import
   classify_output; classify_output(...)"``, wall time from outside, median of ``--runs``
   runs taken in turn with ``python -c pass`` (the baseline) and ``python -c "import
   unstuck"``; target <= 150 ms. The derived-data cache (``UNSTUCK_CACHE_DIR``) is a
   temporary folder filled by one warm-up run, as a user's cache is after the first run;
   a cold cache (a new empty folder each run) is printed for information. Bytecode is
   compiled by the warm-up (``PYTHONPYCACHEPREFIX`` a temporary folder), as an installed
   package's is.

The machine is shared: every figure is a median of many repeats, and the CPU figures are
process CPU time, which other processes' load inflates less than wall time.

Run: ``.venv/bin/python bench/bench_cost.py`` (options: ``--calls N --repeats N --runs N``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CLASSIFY_ONE = ("from unstuck.recognise.classify import classify_output; "
                "print(classify_output('gh', {}, 'You are not logged into any GitHub hosts. "
                "Run gh auth login to authenticate.', exit_code=1))")


def per_call(calls: int) -> tuple[float, float, float]:
    """Median CPU µs of: normalize_result; Guard.before+after on the mix; the same on the failure bank."""
    from bench_guard import sample_results, svc

    from unstuck import Guard
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import ToolCall, normalize_result
    from unstuck.faults.bank import load_bank

    mix = sample_results()
    bank: list[object] = [form.to_result("svc") for form in load_bank()]

    def run(samples: list[object], with_guard: bool) -> float:
        timings: list[int] = []
        guard = Guard([svc], unattended=True, clock=VirtualClock())
        for i in range(calls):
            raw = samples[i % len(samples)]
            if i % 50 == 0:
                guard = Guard([svc], unattended=True, clock=VirtualClock())  # a fresh turn: no escalation latch
            call = ToolCall.of(f"c{i}", "svc", {"n": i})
            if with_guard:
                started = time.process_time_ns()
                guard.before(call)
                guard.after(call, raw)
            else:
                started = time.process_time_ns()
                normalize_result("svc", raw)
            timings.append(time.process_time_ns() - started)
        return statistics.median(timings[len(timings) // 10:]) / 1000  # the first tenth warms caches

    run(mix, True)  # the signal table is built once per process, before any call
    return run(mix, False), run(mix, True), run(bank, True)


def save_reload(steps: int, repeats: int) -> tuple[float, float, int]:
    """Median CPU ms of json round trip of the state (baseline) and of to_json + from_json; the state's size."""
    from bench_guard import svc

    from unstuck import Guard
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import ToolCall

    guard = Guard([svc], unattended=True, clock=VirtualClock())
    for i in range(steps):
        call = ToolCall.of(f"c{i}", "svc", {"n": i})
        guard.before(call)
        guard.after(call, "ok")
    saved = guard.to_json()
    base: list[float] = []
    full: list[float] = []
    for _ in range(repeats):
        started = time.process_time()
        json.dumps(json.loads(saved))
        base.append(time.process_time() - started)
        started = time.process_time()
        Guard.from_json(guard.to_json(), [svc], unattended=True)
        full.append(time.process_time() - started)
    return statistics.median(base) * 1000, statistics.median(full) * 1000, len(saved)


def one_process(runs: int) -> dict[str, float]:
    """Median wall ms per process of the baseline, ``import unstuck``, and classifying one output (warm, cold cache)."""
    python = sys.executable
    cases = {
        "python -c pass": ((python, "-c", "pass"), False),
        'python -c "import unstuck"': ((python, "-c", "import unstuck"), False),
        "classify one output, warm cache": ((python, "-c", CLASSIFY_ONE), False),
        "classify one output, cold cache": ((python, "-c", CLASSIFY_ONE), True),
    }
    timings: dict[str, list[float]] = {label: [] for label in cases}
    with tempfile.TemporaryDirectory() as folder:
        warm = Path(folder) / "warm"
        # bytecode compiled once, as an installed package has it (kept out of the source tree)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(UNSTUCK_CACHE_DIR=str(warm), PYTHONPYCACHEPREFIX=str(Path(folder) / "pycache"))
        for argv, _ in cases.values():  # warm-up: page cache, .pyc files, the warm cache folder
            subprocess.run(argv, env=env, capture_output=True, check=True)
        for round_ in range(runs):
            for label, (argv, cold) in cases.items():
                run_env = env if not cold else {**env, "UNSTUCK_CACHE_DIR": str(Path(folder) / f"cold{round_}")}
                started = time.perf_counter()
                subprocess.run(argv, env=run_env, capture_output=True, check=True)
                timings[label].append((time.perf_counter() - started) * 1000)
    return {label: statistics.median(values) for label, values in timings.items()}


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "missed"


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=6000)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    print(f"load average at start {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    bare, guarded, bank = per_call(args.calls)
    print(f"1. per call, CPU median over {args.calls} calls: normalize_result {bare:.1f} µs (baseline); "
          f"Guard.before+after {guarded:.1f} µs (target <= 30 µs: {verdict(guarded, 30)}); "
          f"on the failure bank's forms {bank:.1f} µs")
    base, full, size = save_reload(1000, args.repeats)
    print(f"2. state save+reload at 1000 steps ({size / 1000:.0f} kB), CPU median of {args.repeats}: "
          f"json.dumps(json.loads(state)) {base:.1f} ms (baseline); to_json+from_json {full:.1f} ms "
          f"(target <= 15 ms: {verdict(full, 15)})")
    found = one_process(args.runs)
    shown = "; ".join(f"{label} {ms:.0f} ms" for label, ms in found.items())
    warm = found["classify one output, warm cache"]
    print(f"3. one process, wall median of {args.runs}: {shown} "
          f"(target <= 150 ms, warm cache: {verdict(warm, 150)})")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
