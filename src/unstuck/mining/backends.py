"""Running many rollouts in parallel: local processes by default, or Ray tasks (seed 003 runs
a pool of agents over every task; issue 15: "scale-out on an existing engine").

Each rollout runs in its own temporary folder (removed afterwards) with its own services, and
its noise comes only from its spec's seed, so the same specs give the same traces on either
backend, in spec order.

* ``local``: :class:`concurrent.futures.ProcessPoolExecutor` with ``spawn``ed workers (a
  fresh interpreter each: nothing of the parent's threads or open services is inherited);
* ``ray``: one Ray task per rollout (``pip install 'unstuck[mining]'``); an already connected
  cluster is used as it is, otherwise a local one with ``workers`` CPUs is started and shut
  down afterwards.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed

from unstuck.core.trees import temporary_tree
from unstuck.mining.environment import Environment, MiningError
from unstuck.mining.rollout import RolloutSpec, check_spec, resolve_environment, run_spec
from unstuck.mining.trace import Trace

__all__ = ["BACKENDS", "Progress", "run_in_folder", "run_rollouts"]

#: The backends :func:`run_rollouts` knows.
BACKENDS = ("local", "ray")

#: Called after each finished rollout with (finished, total).
Progress = Callable[[int, int], None]


def run_in_folder(spec: RolloutSpec) -> Trace:
    """Run ``spec`` in a fresh temporary folder, removed afterwards (what each worker runs)."""
    with temporary_tree("unstuck-rollout-") as folder:
        return run_spec(spec, folder)


def _check(specs: tuple[RolloutSpec, ...]) -> None:
    made: dict[str, Environment] = {}
    for spec in specs:
        if spec.environment not in made:
            made[spec.environment] = resolve_environment(spec)
        check_spec(spec, made)


def run_rollouts(
    specs: Iterable[RolloutSpec],
    *,
    backend: str = "local",
    workers: int | None = None,
    progress: Progress | None = None,
) -> list[Trace]:
    """Run every spec; the traces in spec order.

    Args:
        specs: the rollouts.
        backend: ``"local"`` (processes) or ``"ray"``.
        workers: parallel rollouts (default: the machine's CPUs, at most one per spec).
        progress: called with (finished, total) after each rollout.

    Raises:
        MiningError: for an unknown backend, ``workers`` below 1, a spec whose environment,
            task or agent profile does not exist (checked before any rollout starts), or the
            ray backend without Ray installed.
    """
    if backend not in BACKENDS:
        raise MiningError(f"unknown backend {backend!r}; the backends are {', '.join(BACKENDS)}")
    if workers is not None and workers < 1:
        raise MiningError(f"workers must be at least 1, got {workers!r}")
    todo = tuple(specs)
    _check(todo)
    if not todo:
        return []
    count = min(workers or os.cpu_count() or 1, len(todo))
    if backend == "ray":
        return _on_ray(todo, count, progress)
    return _local(todo, count, progress)


def _local(specs: tuple[RolloutSpec, ...], workers: int, progress: Progress | None) -> list[Trace]:
    traces: list[Trace | None] = [None] * len(specs)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_in_folder, spec): i for i, spec in enumerate(specs)}
        for done, future in enumerate(as_completed(futures), 1):
            traces[futures[future]] = future.result()
            if progress is not None:
                progress(done, len(specs))
    return [trace for trace in traces if trace is not None]


def _on_ray(specs: tuple[RolloutSpec, ...], workers: int, progress: Progress | None) -> list[Trace]:
    try:
        import ray
    except ImportError as exc:
        raise MiningError("the ray backend needs Ray: pip install 'unstuck[mining]'") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_in_folder)
        refs = [task.remote(spec) for spec in specs]
        pending = list(refs)
        done = 0
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            done += len(finished)
            if progress is not None:
                progress(done, len(specs))
        traces: list[Trace] = ray.get(refs)
        return traces
    finally:
        if started:
            ray.shutdown()
