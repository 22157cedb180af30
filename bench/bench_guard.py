"""Benchmark: the public Guard per call, beside the bare tool call, and whether it grows with the turn.

1. ``Guard.before`` + ``Guard.after`` per call (median and p99, microseconds) on a mix of
   results (real gh output, command-not-found, a rate limit, plain successes), beside the bare
   call (``normalize_result`` only) and the pure work every loop did before the Guard existed
   (classify, ``before_dispatch``, ``after_result``), measured in the same run.
2. Growth with the turn: a 10,000-call turn of a write tool with a journal (an intent before
   each call, a receipt after, a checkpoint per call), and of a read tool without one; the
   guard's added cost per call over the first 200 calls (from call 10) against the 200 calls
   from call 10,000. Target: within 1.2x.
3. State serialisation: ``to_json`` + ``from_json`` round trip at 10 and 1,000 steps.

Run: ``.venv/bin/python bench/bench_guard.py`` (options: ``--calls N --steps N``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from unstuck import Guard
from unstuck.core.clock import VirtualClock
from unstuck.core.tools import CommandOutput, HttpResponse, ToolCall, normalize_result
from unstuck.decide import policy
from unstuck.recognise.classify import explain_result
from unstuck.recognise.signals import load_signal_table
from unstuck.store.journal import Journal
from unstuck.toolkit.specs import tool


def sample_results() -> list[object]:
    with tempfile.TemporaryDirectory() as config:
        gh = subprocess.run(["gh", "repo", "view", "cli/cli"], capture_output=True, text=True, check=False,
                            env={"GH_CONFIG_DIR": config, "HOME": config, "PATH": "/usr/bin:/bin"})
    return [
        CommandOutput("gh repo view cli/cli", gh.returncode, gh.stdout, gh.stderr),
        CommandOutput("ls", 0, "README.md\nsrc\ntests\n" * 20),
        CommandOutput("gh", 127, "", "/bin/bash: line 1: gh: command not found"),
        HttpResponse(429, '{"message": "API rate limit exceeded"}', (("Retry-After", "30"),)),
        HttpResponse(200, '{"ok": true, "items": [1, 2, 3]}'),
        "# Title\n\nSome text with the word error in it, but fine.\n" * 30,
        {"status": "ok", "rows": 3},
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


@tool(subject="svc")
def svc(n: int) -> str:
    """A read tool."""
    return "ok"


@tool(subject="ledger", effect="write")
def book(n: int) -> str:
    """A write tool."""
    return "booked"


def bench_per_call(calls: int) -> tuple[list[float], list[float], list[float]]:
    samples = sample_results()
    load_signal_table()  # the signal table is built once per process, before any call: not a per-call cost
    bare: list[float] = []
    pure: list[float] = []
    guarded: list[float] = []
    state = policy.RecoveryState(unattended=True)
    guard = Guard([svc], unattended=True, clock=VirtualClock())
    for i in range(calls):
        raw = samples[i % len(samples)]
        started = time.perf_counter_ns()
        result = normalize_result("svc", raw)
        bare.append((time.perf_counter_ns() - started) / 1000)
        call = ToolCall.of(f"c{i}", "svc", {"n": i})
        started = time.perf_counter_ns()
        result = normalize_result("svc", raw)
        situation = explain_result(svc, call.arguments, result, thorough=False).situation
        _, counted = policy.before_dispatch(state, call, subject="svc", interactive=False)
        policy.after_result(counted, call, policy.CallOutcome("svc", situation, result.ok))
        pure.append((time.perf_counter_ns() - started) / 1000)
        if i % 50 == 0:
            guard = Guard([svc], unattended=True, clock=VirtualClock())  # a fresh turn: no escalation latch
        call = ToolCall.of(f"c{i}", "svc", {"n": i})
        started = time.perf_counter_ns()
        guard.before(call)
        guard.after(call, raw)
        guarded.append((time.perf_counter_ns() - started) / 1000)
    return bare, pure, guarded


def bench_growth(steps: int, write: bool) -> tuple[float, float]:
    """Median guard cost per call (µs) over calls 10-210 and over the last 200 of ``steps``."""
    with tempfile.TemporaryDirectory() as folder:
        journal = Journal(Path(folder) / "j.db") if write else None
        spec = book if write else svc
        guard = Guard([spec], unattended=True, clock=VirtualClock(), journal=journal, task="t")
        guard.start()
        timings: list[float] = []
        for i in range(steps):
            call = ToolCall.of(f"c{i}", spec.name, {"n": i})
            started = time.perf_counter_ns()
            guard.before(call)
            guard.after(call, "ok")
            guard.checkpoint()
            timings.append((time.perf_counter_ns() - started) / 1000)
        if journal is not None:
            journal.close()
    return statistics.median(timings[10:210]), statistics.median(timings[-200:])


def bench_round_trip(steps: int) -> float:
    guard = Guard([svc], unattended=True, clock=VirtualClock())
    for i in range(steps):
        call = ToolCall.of(f"c{i}", "svc", {"n": i})
        guard.before(call)
        guard.after(call, "ok")
    rounds: list[float] = []
    for _ in range(20):
        started = time.perf_counter_ns()
        Guard.from_json(guard.to_json(), [svc], unattended=True)
        rounds.append((time.perf_counter_ns() - started) / 1000)
    return statistics.median(rounds)


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args(argv)
    bare, pure, guarded = bench_per_call(args.calls)
    for label, values in (("bare (normalise only)", bare), ("classify + policy (the pure work)", pure),
                          ("Guard.before + Guard.after", guarded)):
        print(f"per call ({args.calls} calls), {label}: median {statistics.median(values):.1f} µs, "
              f"p99 {percentile(values, .99):.1f} µs")
    print(f"ratio of medians: Guard / classify+policy {statistics.median(guarded) / statistics.median(pure):.2f}x, "
          f"Guard / bare {statistics.median(guarded) / statistics.median(bare):.1f}x")
    for write in (False, True):
        early, late = bench_growth(args.steps, write)
        label = "write tool, journal" if write else "read tool, no journal"
        verdict = "met" if late <= 1.2 * early else "missed"
        print(f"growth ({label}): calls 10-210 median {early:.1f} µs; calls {args.steps - 200}-{args.steps} median "
              f"{late:.1f} µs; ratio {late / early:.2f} (target <= 1.2: {verdict})")
    for steps in (10, 1000):
        print(f"state round trip (to_json + from_json) at {steps} steps: median {bench_round_trip(steps):.0f} µs")


if __name__ == "__main__":
    main()
