"""Ending a lease's processes: SIGTERM, a grace period, SIGKILL to whatever is left, and a
check that none survives.
Internal: not a supported import path (docs/reference/index.md lists those that are).

:func:`end_tree` ends one running lease (at expiry, or when its output overflows):

1. it notes every process of the lease (:func:`unstuck.processes.members.lease_tree`: the
   group, the descendants, those carrying the token, the cgroup's members);
2. sends SIGTERM to the group and to each of them;
3. waits ``grace_s`` seconds for them to exit;
4. looks again (processes started during the grace period count too) and sends SIGKILL to
   whatever is left, up to three rounds, then kills the cgroup whole (``cgroup.kill``);
5. checks that none survives (a pid still alive with the same start time), and reports the
   pids it signalled, those it killed and any survivor.

:func:`end_leases` does the same for leases known only by token and process group (the signal
drain, the supervisor, the start-up sweep: :mod:`unstuck.processes.containment`), and removes
their cgroups.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from unstuck.processes import cgroups
from unstuck.processes.cgroups import LeaseCgroup
from unstuck.processes.members import alive, cgroup_members, descendants, lease_tree, tagged

__all__ = ["DEFAULT_GRACE_S", "EndedTree", "end_leases", "end_tree", "kill_tree"]

#: Seconds between SIGTERM and SIGKILL.
DEFAULT_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class EndedTree:
    """What :func:`end_tree` did, each a sorted tuple of pids.

    Attributes:
        terminated: sent SIGTERM.
        killed: still alive after the grace period, sent SIGKILL (or killed with the cgroup).
        survivors: still alive after SIGKILL (should be empty; reported, never hidden).
    """

    terminated: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()


def _signal(group: int, pids: Sequence[int], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def end_tree(proc: subprocess.Popen[bytes], grace_s: float, token: str,
             group: LeaseCgroup | None = None) -> EndedTree:
    """End the lease whose first process is ``proc`` (its process group), whose processes
    carry ``token`` and live in ``group`` (see the module doc), and reap ``proc``. Never
    raises on a process already gone."""
    tree = lease_tree(proc.pid, token, group)
    _signal(proc.pid, list(tree), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
        if not alive(tree) and proc.poll() is not None and not tagged(token) and not cgroup_members(group):
            break
    killed: dict[int, int] = {}
    for _ in range(3):  # processes started during the grace period, or while killing, count too
        left = {**alive(tree), **lease_tree(proc.pid, token, group)}
        if not left and proc.poll() is not None:
            break
        killed.update(left)
        _signal(proc.pid, list(left), signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
        settle = time.monotonic() + 1.0
        while alive(left) and time.monotonic() < settle:  # the kernel reaps killed processes promptly
            time.sleep(0.01)
    if group is not None:
        for pid in group.kill():  # what hid from the walks: born in the cgroup, whatever it did since
            killed.setdefault(pid, 0)
    proc.wait()
    survivors = {**alive({pid: start for pid, start in killed.items() if start}), **tagged(token),
                 **cgroup_members(group)}
    return EndedTree(tuple(sorted(tree)), tuple(sorted(killed)), tuple(sorted(survivors)))


def kill_tree(proc: subprocess.Popen[bytes], token: str, group: LeaseCgroup | None = None) -> None:
    """SIGKILL to every process of the lease at once, no grace period, and its cgroup killed
    and removed: what an interrupt of the caller does before it propagates. Never raises on a
    process already gone."""
    _signal(proc.pid, list(lease_tree(proc.pid, token, group)), signal.SIGKILL)
    if group is not None:
        group.kill()
        group.remove()


def end_leases(leases: Mapping[str, int], grace_s: float = 0.0, *, exclude: int | None = None) -> tuple[int, ...]:
    """End every process of ``leases`` (token -> process group): the groups, the groups'
    descendants, and every process carrying a token; SIGTERM, then after ``grace_s``
    seconds SIGKILL to whatever is left (at once when ``grace_s`` is 0). Never raises.

    Returns the pids signalled (sorted); ``exclude`` (this process by default) is never one."""
    me = os.getpid() if exclude is None else exclude
    # each lease's cgroup; a token that stands for all of a process's (token_prefix) finds them all
    held = cgroups.lease_cgroups(leases) if leases else ()

    def everything() -> dict[int, int]:
        found: dict[int, int] = {}
        for token, group in leases.items():
            if group > 0:
                found.update(descendants(group, group))
            found.update(tagged(token))
        for cgroup in held:
            found.update(cgroup_members(cgroup))
        found.pop(me, None)
        return found

    signalled: dict[int, int] = {}
    for signum in (signal.SIGTERM, signal.SIGKILL) if grace_s > 0 else (signal.SIGKILL,):
        for _ in range(3):
            tree = everything()
            if not tree and signum == signal.SIGTERM:
                break
            signalled.update(tree)
            for group in {g for g in leases.values() if g > 0}:
                with contextlib.suppress(OSError):
                    os.killpg(group, signum)
            for pid in tree:
                with contextlib.suppress(OSError):
                    os.kill(pid, signum)
            if signum == signal.SIGTERM:
                break
            settle = time.monotonic() + 0.5
            while alive(tree) and time.monotonic() < settle:
                time.sleep(0.01)
            if not tree:
                break
        if signum == signal.SIGTERM and signalled:
            settle = time.monotonic() + grace_s
            while alive(signalled) and time.monotonic() < settle:
                time.sleep(0.02)
    for cgroup in held:
        signalled.update(dict.fromkeys((pid for pid in cgroup.kill() if pid != me), 0))
        cgroup.remove()
    return tuple(sorted(signalled))
