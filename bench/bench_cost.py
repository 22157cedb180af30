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

With ``--before REV`` the same figures are measured for ``git archive REV src`` too, in the
same run: figures 1 and 2 in child processes taken in turn (one per tree, ``--rounds`` times),
figure 3's processes interleaved case by case and tree by tree.

Run: ``.venv/bin/python bench/bench_cost.py --before main`` (options: ``--calls N --repeats N
--rounds N --runs N``).
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


#: The outputs of ``bench_guard.sample_results``, in order.
MIX = ("gh repo view, logged out (exit 4)", "ls (exit 0)", "command not found (127)", "HTTP 429",
       "HTTP 200", "a Markdown page (str)", "a mapping")


def per_call(calls: int) -> tuple[float, float, float, list[float]]:
    """Median CPU µs of: normalize_result; Guard.before+after on the mix; the same on the
    failure bank; and Guard.before+after for each output of the mix (in :data:`MIX` order)."""
    from bench_guard import sample_results, svc

    from unstuck import Guard
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import ToolCall, normalize_result
    from unstuck.faults.bank import load_bank

    mix = sample_results()
    bank: list[object] = [form.to_result("svc") for form in load_bank()]

    def run(samples: list[object], with_guard: bool) -> float:
        timings: list[int] = []
        by_output.clear()
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
            if i >= calls // 10:
                by_output.setdefault(i % len(samples), []).append(timings[-1])
        return statistics.median(timings[len(timings) // 10:]) / 1000  # the first tenth warms caches

    by_output: dict[int, list[int]] = {}
    run(mix, True)  # the signal table is built once per process, before any call
    bare, guarded = run(mix, False), run(mix, True)
    each = [statistics.median(by_output[k]) / 1000 for k in sorted(by_output)]
    return bare, guarded, run(bank, True), each


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


def one_process(runs: int, trees: dict[str, str], scratch: Path) -> dict[str, dict[str, float]]:
    """Median wall ms per process, per tree (label -> ``src`` folder): ``python -c pass`` (the
    baseline), ``import unstuck``, and classifying one output with a warm and a cold cache."""
    python = sys.executable
    cases = {
        "python -c pass": ((python, "-c", "pass"), False),
        "import unstuck": ((python, "-c", "import unstuck"), False),
        "classify, warm cache": ((python, "-c", CLASSIFY_ONE), False),
        "classify, cold cache": ((python, "-c", CLASSIFY_ONE), True),
    }
    timings: dict[tuple[str, str], list[float]] = {(tree, label): [] for tree in trees for label in cases}
    # bytecode compiled once, as an installed package has it (kept out of the source tree)
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    envs = {tree: {**base, "PYTHONPATH": src, "UNSTUCK_CACHE_DIR": str(scratch / f"warm-{tree}"),
                   "PYTHONPYCACHEPREFIX": str(scratch / f"pycache-{tree}")} for tree, src in trees.items()}
    for tree in trees:  # warm-up: page cache, .pyc files, the warm cache folder
        for argv, _ in cases.values():
            subprocess.run(argv, env=envs[tree], capture_output=True, check=True)
    for round_ in range(runs):  # in turn: every case of every tree, then again
        for tree in trees:
            for label, (argv, cold) in cases.items():
                env = envs[tree] if not cold else {**envs[tree], "UNSTUCK_CACHE_DIR": str(scratch / f"cold-{tree}-{round_}")}
                started = time.perf_counter()
                subprocess.run(argv, env=env, capture_output=True, check=True)
                timings[(tree, label)].append((time.perf_counter() - started) * 1000)
    return {tree: {label: statistics.median(timings[(tree, label)]) for label in cases} for tree in trees}


def in_process(trees: dict[str, str], rounds: int, calls: int, repeats: int,
               scratch: Path) -> dict[str, dict[str, float]]:
    """Figures 1 and 2 for each tree, each measured in ``rounds`` child processes taken in turn
    (before, after, before, after ...); the median of the rounds' medians. Each tree's children
    share a derived-data cache in ``scratch`` (never the user's own: a tree's tables are not
    another's)."""
    found: dict[str, list[dict[str, float]]] = {tree: [] for tree in trees}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for _ in range(rounds):
        for number, (tree, src) in enumerate(trees.items()):
            env = {**base, "PYTHONPATH": src, "UNSTUCK_CACHE_DIR": str(scratch / f"calls-{number}")}
            done = subprocess.run([sys.executable, __file__, "--child", "--calls", str(calls), "--repeats", str(repeats)],
                                  env=env, capture_output=True, text=True, check=True)
            found[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {tree: {key: statistics.median(r[key] for r in results) for key in results[0]}
            for tree, results in found.items()}


def child(calls: int, repeats: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    bare, guarded, bank, each = per_call(calls)
    base, full, size = save_reload(1000, repeats)
    print(json.dumps({"bare": bare, "guarded": guarded, "bank": bank, "base": base, "full": full, "size": size,
                      **{f"each{k}": v for k, v in enumerate(each)}}))


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "missed"


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3, help="child processes per tree for figures 1 and 2")
    parser.add_argument("--runs", type=int, default=15, help="processes per case and tree for figure 3")
    parser.add_argument("--before", metavar="REV", help="also measure this git revision (git archive of src/)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.calls, args.repeats)
        return
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        trees: dict[str, str] = {}
        if args.before:
            old = scratch / "before"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(here), "archive", args.before, "src"], capture_output=True,
                                     check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            trees[f"before ({args.before})"] = str(old / "src")
        trees["after (this tree)"] = str(here / "src")
        print(f"load average at start {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); trees: "
              + ", ".join(trees))
        inside = in_process(trees, args.rounds, args.calls, args.repeats, scratch)
        processes = one_process(args.runs, trees, scratch) if args.runs else {}
    width = max(len(t) for t in trees)
    print(f"1. Guard.before+after per call, CPU µs, median over {args.calls} calls ({args.rounds} processes each); "
          "target <= 30")
    for tree, got in inside.items():
        print(f"   {tree:<{width}}  normalize_result (baseline) {got['bare']:6.1f}   Guard {got['guarded']:6.1f}  "
              f"({got['guarded'] / got['bare']:.1f}x baseline; {verdict(got['guarded'], 30)})   "
              f"failure bank forms {got['bank']:6.1f}")
    print("   each output of the mix (Guard.before+after, CPU µs median): " + "; ".join(MIX))
    for tree, got in inside.items():
        print(f"   {tree:<{width}}  " + "  ".join(f"{got[f'each{k}']:6.1f}" for k in range(len(MIX))))
    print(f"2. state save+reload at 1000 steps, CPU ms, median of {args.repeats} ({args.rounds} processes each); "
          "target <= 15")
    for tree, got in inside.items():
        print(f"   {tree:<{width}}  json.dumps(json.loads(state)) (baseline) {got['base']:6.1f}   "
              f"to_json+from_json {got['full']:6.1f}  ({got['full'] / got['base']:.1f}x baseline; "
              f"{verdict(got['full'], 15)})   state {got['size'] / 1000:.0f} kB")
    print(f"3. one process classifying one output, wall ms, median of {args.runs} runs in turn; target <= 150 (warm)")
    for tree, got in processes.items():
        shown = "   ".join(f"{label} {ms:6.0f}" for label, ms in got.items())
        warm = got["classify, warm cache"]
        print(f"   {tree:<{width}}  {shown}  ({warm / got['python -c pass']:.1f}x python -c pass; "
              f"{verdict(warm, 150)})")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
