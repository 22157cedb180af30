"""Which live processes belong to a lease: the tree under its first process, those carrying its
token, and its cgroup's members.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Every process of a lease carries a token in its environment (:data:`LEASE_ENV`,
``UNSTUCK_LEASE``), which children inherit: ``PID-HEX``, where ``PID`` is the process that
started the lease (:func:`token_prefix`, :func:`token_owner`). A lease's processes are found
three ways, so that each way's escape is caught by another: by parent pid and process group
(the process table read with psutil, walked by parent pid, so one that left the group with
``setsid`` is caught while its parent lives: :func:`descendants`), by the token (a
double-forked daemon, reparented away, unless it cleared its environment: :func:`tagged`), and
by the lease's cgroup (every process born there, whatever it did since:
:func:`cgroup_members`, :mod:`unstuck.processes.cgroups`).

A process is known by its pid with its start time (clock ticks since boot,
:func:`unstuck.processes.identity.start_time`), so a pid reused later is never taken for it
(:func:`alive`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from unstuck.processes.cgroups import LeaseCgroup
from unstuck.processes.identity import start_time, ticks_since_boot

__all__ = [
    "LEASE_ENV",
    "alive",
    "cgroup_members",
    "descendants",
    "lease_tree",
    "new_token",
    "tagged",
    "token_owner",
    "token_prefix",
]

#: The environment variable that marks a lease's processes.
LEASE_ENV = "UNSTUCK_LEASE"


def token_prefix(pid: int | None = None) -> str:
    """What every lease token of process ``pid`` (this one by default) begins with; as a
    token for :func:`tagged` or :func:`unstuck.processes.ending.end_leases` it stands for all
    of them."""
    return f"{os.getpid() if pid is None else pid}-"


def new_token() -> str:
    """A new lease token of this process (:func:`token_prefix` and 32 random hex digits)."""
    return f"{token_prefix()}{uuid.uuid4().hex}"


def token_owner(token: str) -> int | None:
    """The pid a lease token names as its owner (``PID-…``, see :func:`token_prefix`);
    ``None`` for a token of another shape."""
    head, dash, _ = token.partition("-")
    return int(head) if dash and head.isascii() and head.isdigit() and 0 < int(head) < 1 << 22 else None


@dataclass(frozen=True, slots=True)
class _Row:
    ppid: int
    pgrp: int
    zombie: bool
    start: int


def _table() -> dict[int, _Row]:
    """Every visible process: parent, process group, zombie or not, start time (psutil)."""
    rows: dict[int, _Row] = {}
    for proc in psutil.process_iter():
        try:
            with proc.oneshot():
                row = _Row(proc.ppid(), os.getpgid(proc.pid), proc.status() == psutil.STATUS_ZOMBIE,
                           ticks_since_boot(proc.create_time()))
        except (psutil.Error, OSError):
            continue
        rows[proc.pid] = row
    return rows


def descendants(pid: int, group: int | None = None) -> dict[int, int]:
    """Live processes under ``pid`` (by parent pid) and in process group ``group``, with
    their start times (clock ticks since boot: tells a pid reused later from the same
    process). Zombies excluded."""
    table = _table()
    children: dict[int, list[int]] = {}
    for child, row in table.items():
        children.setdefault(row.ppid, []).append(child)
    found: dict[int, int] = {}
    frontier = [pid]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            row = table[child]
            if child not in found and not row.zombie:
                found[child] = row.start
                frontier.append(child)
    for member, row in table.items():
        if group is not None and row.pgrp == group and not row.zombie:
            found.setdefault(member, row.start)
    if pid in table and not table[pid].zombie:
        found.setdefault(pid, table[pid].start)
    return found


def tagged(token: str) -> dict[int, int]:
    """Live processes whose environment carries ``UNSTUCK_LEASE=token``, with start times;
    a ``token`` ending in ``-`` matches every token it begins (all leases of one process)."""
    found: dict[int, int] = {}
    for proc in psutil.process_iter():
        try:
            value = proc.environ().get(LEASE_ENV)
            if value is None or not (value == token or (token.endswith("-") and value.startswith(token))):
                continue
            with proc.oneshot():
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found[proc.pid] = ticks_since_boot(proc.create_time())
        except (psutil.Error, OSError):
            continue
    return found


def cgroup_members(group: LeaseCgroup | None) -> dict[int, int]:
    """The processes of a lease's cgroup (none for ``None``), with their start times."""
    if group is None:
        return {}
    found = {}
    for pid in group.members():
        started = start_time(pid)
        if started is not None:
            found[pid] = started
    return found


def lease_tree(pid: int, token: str, group: LeaseCgroup | None = None) -> dict[int, int]:
    """Every live process of the lease whose first process is ``pid`` (its process group's
    leader): its descendants and group, those carrying ``token``, the members of ``group``;
    never this process."""
    found = {**descendants(pid, pid), **tagged(token), **cgroup_members(group)}
    found.pop(os.getpid(), None)
    return found


def alive(pids: Mapping[int, int]) -> dict[int, int]:
    """Those of ``pids`` (pid -> start time) still running as the same process."""
    return {pid: start for pid, start in pids.items() if start_time(pid) == start}
