"""Benchmark: mining rollouts per second, in-process, local processes and Ray (issue 15, "Show").

One list of :class:`unstuck.mining.rollout.RolloutSpec` (by default every task of
``files_comments`` × every profile of the default pool × 2 seeds at ``p_inj`` 0.1) is run
three ways in one run:

* **serial** (the baseline): :func:`unstuck.mining.rollout.run_spec` in a loop in this
  process, each rollout in a fresh temporary folder (what a worker does);
* **local**: :func:`unstuck.mining.backends.run_rollouts` with ``backend="local"``
  (``spawn``ed worker processes), ``--workers`` of them;
* **ray**: the same with ``backend="ray"``, on Ray's local cluster started here with
  ``ray.init(num_cpus=WORKERS, include_dashboard=False)`` and shut down afterwards.
  ``ray.init`` is timed separately, so the rate is reported with and without it.

Printed: rollouts per second for each, the ratio of each to the serial baseline and of ray to
local, and whether the three gave identical traces (the same answer and status, and every step
the same call, shown content, ``ok``, situation kind and injected form; the state snapshots
are compared too and reported on their own line). On a 2-core machine the parallel backends
cannot do much better than 2x serial: the comparison measures their overhead (process start,
pickling, Ray's scheduler and object store), not a cluster's speed-up.

Run: ``.venv/bin/python bench/bench_mining.py`` (options: ``--environment NAME``,
``--seeds N``, ``--p-inj P``, ``--workers N``). Ray comes with ``pip install -e '.[mining]'``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from unstuck.mining.agents import default_pool
from unstuck.mining.backends import run_rollouts
from unstuck.mining.envs import environment
from unstuck.mining.rollout import RolloutSpec, run_spec
from unstuck.mining.trace import Trace


def specs_for(name: str, seeds: int, p_inj: float) -> list[RolloutSpec]:
    """Every task of ``name`` × every pool profile × ``seeds`` seeds at ``p_inj``."""
    made = environment(name)
    return [RolloutSpec(name, task.id, profile.name, seed=seed, p_inj=p_inj)
            for task in made.tasks for profile in default_pool() for seed in range(seeds)]


def serial(specs: Sequence[RolloutSpec]) -> list[Trace]:
    """The baseline: each spec in turn in this process, each in a fresh folder."""
    traces = []
    for spec in specs:
        with tempfile.TemporaryDirectory(prefix="unstuck-bench-") as folder:
            traces.append(run_spec(spec, Path(folder)))
    return traces


def shown(trace: Trace) -> tuple[object, ...]:
    """What the agent did and was shown: the answer, the status and every step's call,
    content, ok, situation kind and injected form (no state snapshots)."""
    return (trace.task, trace.agent, trace.seed, trace.answer, trace.status,
            tuple((s.call.tool, s.call.arguments_json, s.content, s.ok, s.kind, s.injected)
                  for s in trace.steps))


def states(trace: Trace) -> tuple[object, ...]:
    """The state snapshots: before every step and the final one."""
    return (*(step.before for step in trace.steps), trace.final)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environment", default="files_comments")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--p-inj", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    import ray

    specs = specs_for(args.environment, args.seeds, args.p_inj)
    pool = len(default_pool())
    print(f"{len(specs)} rollouts: {args.environment}, {len(specs) // (pool * args.seeds)} tasks x {pool} profiles "
          f"x {args.seeds} seeds at p_inj {args.p_inj:g}; {args.workers} workers on {os.cpu_count()} CPUs; "
          f"load average at start {os.getloadavg()[0]:.2f}", flush=True)

    started = time.perf_counter()
    baseline = serial(specs)
    serial_s = time.perf_counter() - started
    print(f"  serial (run_spec in a loop)  {serial_s:7.2f} s  {len(specs) / serial_s:7.1f} rollouts/s", flush=True)

    started = time.perf_counter()
    local = run_rollouts(specs, backend="local", workers=args.workers)
    local_s = time.perf_counter() - started
    print(f"  local ({args.workers} processes)        {local_s:7.2f} s  {len(specs) / local_s:7.1f} rollouts/s",
          flush=True)

    started = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - started
    try:
        started = time.perf_counter()
        on_ray = run_rollouts(specs, backend="ray", workers=args.workers)
        ray_s = time.perf_counter() - started
    finally:
        started = time.perf_counter()
        ray.shutdown()
        shutdown_s = time.perf_counter() - started
    whole_s = init_s + ray_s
    print(f"  ray ({args.workers} CPUs), with init      {whole_s:7.2f} s  {len(specs) / whole_s:7.1f} rollouts/s"
          f"  (ray.init {init_s:.2f} s; ray.shutdown {shutdown_s:.2f} s, not counted)", flush=True)
    print(f"  ray ({args.workers} CPUs), without init   {ray_s:7.2f} s  {len(specs) / ray_s:7.1f} rollouts/s")

    rate = {"serial": len(specs) / serial_s, "local": len(specs) / local_s,
            "ray+init": len(specs) / whole_s, "ray": len(specs) / ray_s}
    print("ratios (rollouts/s over serial's): " + ", ".join(
        f"{name} {value / rate['serial']:.2f}" for name, value in rate.items() if name != "serial")
        + f"; ray/local {rate['ray'] / rate['local']:.2f} (without init), "
          f"{rate['ray+init'] / rate['local']:.2f} (with init)")

    same_shown = [shown(a) == shown(b) == shown(c) for a, b, c in zip(baseline, local, on_ray, strict=True)]
    same_state = [states(a) == states(b) == states(c) for a, b, c in zip(baseline, local, on_ray, strict=True)]
    steps = sum(len(t.steps) for t in baseline)
    injected = sum(t.injected for t in baseline)
    print(f"identical traces (answer, status, every step's call/content/ok/kind/injected): "
          f"{sum(same_shown)} of {len(specs)}; identical state snapshots: {sum(same_state)} of {len(specs)} "
          f"({steps} steps, {injected} injected returns)")
    if args.workers >= (os.cpu_count() or 1):
        print(f"note: {args.workers} workers on {os.cpu_count()} CPUs: at most {os.cpu_count()}x serial is possible; "
              "the local/ray comparison measures the backends' overhead, not a cluster's speed-up")
    print(f"load average at the end {os.getloadavg()[0]:.2f} (above 0 means other work shared the CPUs)")
    if not all(same_shown):
        raise SystemExit("the backends gave different traces")


if __name__ == "__main__":
    main()
