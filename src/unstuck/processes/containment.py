"""Ending every lease a process leaves, however it ends: on SIGTERM or SIGINT, after its death,
and at the next run's start.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Three means, which :func:`install_containment` sets up together for ``unstuck run``:

* :func:`install_signal_drain` makes SIGTERM and SIGINT end every live lease
  (:func:`unstuck.processes.registry.live_leases`) and every process left with one of this
  process's tokens (:func:`drain_leases`) before the signal acts as before;
* :func:`unstuck.processes.registry.start_supervisor` starts a process that outlives this one
  (SIGKILL included) and then ends what its leases left;
* :func:`sweep_leftovers` ends what earlier runs that died left: processes whose token names an
  owner that is gone, and the cgroups of such owners.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

import psutil

from unstuck.processes import cgroups
from unstuck.processes.ending import DEFAULT_GRACE_S, end_leases
from unstuck.processes.identity import start_time, ticks_since_boot
from unstuck.processes.members import LEASE_ENV, token_owner, token_prefix
from unstuck.processes.registry import live_leases, start_supervisor

__all__ = ["drain_leases", "install_containment", "install_signal_drain", "sweep_leftovers"]


def drain_leases() -> tuple[int, ...]:
    """End every live lease of this process at once (SIGKILL; see
    :func:`unstuck.processes.ending.end_leases`), and every process left carrying one of this
    process's tokens (a background job a command that ended in time left running): what a
    process about to die calls. Returns the pids signalled."""
    return end_leases({**live_leases(), token_prefix(): 0})


_INSTALLED: dict[int, signal.Handlers | Callable[[int, FrameType | None], Any] | int | None] = {}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    drain_leases()
    previous = _INSTALLED.get(signum)
    if callable(previous):
        previous(signum, frame)  # SIGINT: Python's default handler raises KeyboardInterrupt
        return
    if previous == signal.SIG_IGN:
        return
    signal.signal(signum, signal.SIG_DFL)  # die of the signal as before, with the leases ended
    os.kill(os.getpid(), signum)


def install_signal_drain(signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """Make SIGTERM and SIGINT (or ``signals``) end every live lease of this process before
    they act as before (the previous handler runs next: SIGINT still raises
    KeyboardInterrupt; a signal that had its default disposition is delivered again with it,
    so the process dies of it as before). A signal this process ignores is left ignored: a
    command started in the background by a shell without job control inherits SIGINT and
    SIGQUIT ignored (POSIX Shell Command Language, 2.11 "Signals and Error Handling"), and a
    SIGINT sent to it must not end its tools while it carries on. Idempotent; call it from the
    main thread (signal(2), Python's ``signal.signal``).

    Raises:
        ValueError: when called from another thread than the main one (Python's rule).
    """
    for signum in signals:
        if signum in _INSTALLED or signal.getsignal(signum) == signal.SIG_IGN:
            continue  # an ignored signal stays ignored (a background job's SIGINT: see the doc)
        _INSTALLED[signum] = signal.signal(signum, _on_signal)


def sweep_leftovers(grace_s: float = DEFAULT_GRACE_S) -> tuple[int, ...]:
    """End the processes earlier runs left: every live process carrying an ``UNSTUCK_LEASE``
    token whose owner (the pid the token begins with, :func:`unstuck.processes.members.token_prefix`)
    is gone. An owner counts as gone when no process has its pid, or the process with its pid
    started after the leftover did (a pid reused later: the owner of a lease started before
    every process of it; start times from :func:`unstuck.processes.identity.start_time`, clock
    ticks since boot). Leases of live owners, this process's included, are left alone. Each
    orphaned token is ended as :func:`unstuck.processes.ending.end_leases` does (SIGTERM,
    ``grace_s`` seconds, then SIGKILL). Never raises.

    Returns the pids signalled (sorted); empty when nothing was left."""
    me = os.getpid()
    orphaned: set[str] = set()
    owners: dict[int, int | None] = {}
    for proc in psutil.process_iter():
        try:
            token = proc.environ().get(LEASE_ENV)
            owner = token_owner(token) if token else None
            if token is None or owner is None or owner == me or proc.pid == me:
                continue
            with proc.oneshot():
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                started = ticks_since_boot(proc.create_time())
        except (psutil.Error, OSError):
            continue
        if owner not in owners:
            owners[owner] = start_time(owner)
        owner_start = owners[owner]
        if owner_start is None or owner_start > started:
            orphaned.add(token)
    for cgroup in cgroups.lease_cgroups():  # an empty one left by a run that died, or a daemon hiding in one
        owner = token_owner(cgroup.token)
        if owner is not None and owner != me and start_time(owner) is None:
            orphaned.add(cgroup.token)
    if not orphaned:
        return ()
    return end_leases(dict.fromkeys(orphaned, 0), grace_s)


def install_containment() -> int:
    """What a command that runs turns (``unstuck run``) calls once at its start, from the
    main thread: :func:`sweep_leftovers` (what earlier runs that died left), then
    :func:`install_signal_drain` and :func:`unstuck.processes.registry.start_supervisor` (whose
    pid it returns), so the turn's tool processes end however the command ends: SIGTERM,
    SIGINT, SIGKILL or a crash.

    Raises:
        OSError: when the supervisor cannot be started.
        ValueError: when not called from the main thread.
    """
    sweep_leftovers()
    install_signal_drain()
    return start_supervisor()
