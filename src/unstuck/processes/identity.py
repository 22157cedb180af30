"""Process identity: which process a pid names (with its start time in clock ticks since boot,
:func:`start_time`), whether that process still runs (:func:`process_alive`), and which machine
and pid namespace a pid means something on (:func:`host_identity`). Leases, the journal's
effect intents and the eval's sandboxes name processes this way.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

__all__ = [
    "HOST_ENV",
    "host_identity",
    "process_alive",
    "process_identity",
    "process_of",
    "start_time",
    "ticks_since_boot",
]

#: The environment variable that names the machine a process runs on, in place of what the
#: system says (``/etc/machine-id``, the boot id): containers that share a kernel, or tests that
#: play several machines, set it (:func:`host_identity`; the stores record it, :mod:`unstuck.store.urls`).
HOST_ENV = "UNSTUCK_HOST_ID"

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_of(pid: int) -> psutil.Process | None:
    """psutil's handle on process ``pid``, or ``None`` when there is none (or ``pid`` is not one)."""
    try:
        return psutil.Process(pid)
    except (psutil.Error, ValueError):
        return None


def ticks_since_boot(created: float) -> int:
    """A start time in clock ticks since boot (``/proc/PID/stat`` field 22, proc(5)) from
    psutil's seconds since the epoch (which is that field over ``SC_CLK_TCK`` plus the boot
    time, psutil/_pslinux.py ``Process.create_time``)."""
    return round((created - psutil.boot_time()) * _CLOCK_TICKS)


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (with the pid, it names one
    process: a pid reused later has another start time); ``None`` when there is no such
    process (or it is a zombie)."""
    proc = process_of(pid)
    if proc is None:
        return None
    try:
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return ticks_since_boot(proc.create_time())
    except psutil.Error:
        return None


def host_identity() -> str:
    """This machine's boot and pid namespace (``/proc/sys/kernel/random/boot_id`` and the
    inode of ``/proc/self/ns/pid``): pids mean something only where these match. Prefixed
    with :data:`HOST_ENV` (``UNSTUCK_HOST_ID``) when that is set, so processes given different
    host ids count as different machines. Empty when neither tells."""
    override = os.environ.get(HOST_ENV, "").strip()
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return override
    return f"{override}@{boot}/{namespace}" if override else f"{boot}/{namespace}"


def process_identity(pid: int | None = None) -> tuple[int, int]:
    """(pid, start time in clock ticks since boot) of a process, this one by default; the
    start time tells a live owner from a later process that reused its pid."""
    pid = os.getpid() if pid is None else pid
    return pid, start_time(pid) or 0


def process_alive(pid: int, start: int | None) -> bool:
    """Whether the process ``pid`` started at ``start`` (clock ticks since boot) still runs
    (not a zombie); ``start`` ``None`` or 0: any process with that pid."""
    found = start_time(pid)
    return found is not None and (start is None or start == 0 or found == start)
