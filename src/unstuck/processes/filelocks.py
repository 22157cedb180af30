"""Who holds a lock on a file: read from ``/proc/locks`` (Linux).
Internal: not a supported import path (docs/reference/index.md lists those that are).

``/proc/locks`` lists every lock the kernel holds, one per line (proc(5), "/proc/locks")::

    1: POSIX  ADVISORY  WRITE 4242 fd:01:1835011 1073741824 1073742335
    2: FLOCK  ADVISORY  WRITE 4243 00:2f:1234567 0 EOF
    2: -> FLOCK  ADVISORY  WRITE 4250 00:2f:1234567 0 EOF      (a process waiting for it)

The fields are the lock's ordinal, its type (``FLOCK`` from flock(2), ``POSIX`` from fcntl(2)
record locks as SQLite takes them, ``OFDLCK``), ``ADVISORY`` or ``MANDATORY``, ``READ`` or
``WRITE``, the holder's pid, the file as ``major:minor:inode`` (major and minor in hex), and
the locked byte range. Waiters (``->``) hold nothing and are skipped. An open file
description lock (``OFDLCK``) belongs to no process, so its pid reads -1: the holder is then
named as unknown. On a system without ``/proc/locks`` nothing is ever reported held.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import psutil

from unstuck.recognise.declare import LockHolder

__all__ = ["LOCK_TYPES", "PROC_LOCKS", "lock_holders", "parse_proc_locks"]

PROC_LOCKS = Path("/proc/locks")
#: The lock types counted (``LEASE`` and ``DELEG`` lines are skipped).
LOCK_TYPES = frozenset({"FLOCK", "POSIX", "OFDLCK"})


def parse_proc_locks(text: str) -> list[tuple[int, int, int, LockHolder]]:
    """Parse ``/proc/locks`` into (major, minor, inode, holder) rows; lines that do not
    parse (a kernel with another format) are skipped, never raised on. The holder's command
    is left empty here (see :func:`lock_holders`)."""
    rows: list[tuple[int, int, int, LockHolder]] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or "->" in fields:
            continue
        try:
            lock_type, access, pid = fields[1], fields[3], int(fields[4])
            major, minor, inode = fields[5].split(":")
            if lock_type not in LOCK_TYPES:
                continue  # leases and delegations are not locks another writer waits on
            rows.append((int(major, 16), int(minor, 16), int(inode), LockHolder(pid, "", lock_type, access)))
        except ValueError:
            continue
    return rows


def _command(pid: int) -> str:
    """The holder's program name (psutil's ``Process.name``: ``/proc/PID/comm``, completed
    from the command line when the kernel cut it at 15 bytes); ``"unknown"`` for no pid (an
    ``OFDLCK``), ``"?"`` when the process cannot be read."""
    if pid <= 0:
        return "unknown"
    try:
        return psutil.Process(pid).name() or "?"
    except psutil.Error:
        return "?"


def lock_holders(
    paths: Iterable[Path], *, exclude_pids: Sequence[int] = (), writes_only: bool = True,
    source: Path = PROC_LOCKS,
) -> dict[Path, list[LockHolder]]:
    """For each existing file of ``paths``, the live processes holding a lock on it.

    Args:
        paths: files to look up (missing ones are skipped).
        exclude_pids: pids whose locks do not count (the caller's own).
        writes_only: count only ``WRITE`` locks (a reader's shared lock blocks no reader).
        source: the locks table (``/proc/locks``).

    Returns:
        Only the paths that are locked, each with its holders (pid order, one per pid).
    """
    try:
        table = parse_proc_locks(source.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}
    if not table:
        return {}
    by_file: dict[tuple[int, int, int], list[LockHolder]] = {}
    for major, minor, inode, holder in table:
        if holder.pid in exclude_pids or (writes_only and holder.access != "WRITE"):
            continue
        by_file.setdefault((major, minor, inode), []).append(holder)
    found: dict[Path, list[LockHolder]] = {}
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        holders = by_file.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
        if holders:
            unique = {h.pid: h for h in holders}
            found[path] = [
                LockHolder(pid, _command(pid), h.lock_type, h.access) for pid, h in sorted(unique.items())
            ]
    return found
