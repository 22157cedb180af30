"""Leased tool processes: every subprocess a tool starts runs in its own process group under
a deadline (seed 002, "leases"; DESIGN.md: a hung prompt costs one deadline, never the turn).

Every process of the lease carries a token in its environment (``UNSTUCK_LEASE``), which
children inherit. On expiry :func:`run_leased` ends the whole tree:

1. it notes every process of the group, every descendant of the child (walking
   ``/proc/*/stat`` by parent pid, so one that left the group with ``setsid`` is caught
   while its parent lives), and every process carrying the token (so a double-forked
   daemon, reparented away, is caught too, unless it cleared its environment);
2. sends SIGTERM to the group and to each of them;
3. waits ``grace_s`` seconds for them to exit;
4. looks again (processes started during the grace period count too) and sends SIGKILL to
   whatever is left, up to three rounds;
5. checks that none survives (a pid still alive with the same start time), and reports the
   pids it killed and any survivor.

A command that ends in time may leave background jobs running (``server &``): the lease
ends at expiry only, as its deadline says.

Stdin is ``/dev/null`` unless the caller passes ``stdin_tty=True`` (attended runs), so a
password or sign-in prompt reads end-of-file or waits on nothing and the deadline ends it.
Output is read by two threads while the process runs (a full pipe never blocks it); what
was printed before the kill is kept.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["DEFAULT_GRACE_S", "LEASE_ENV", "OUTPUT_GRACE_S", "LeaseOutcome", "descendants", "run_leased", "tagged"]

#: Seconds between SIGTERM and SIGKILL.
DEFAULT_GRACE_S = 2.0
#: Seconds to wait for output still in flight after the command itself has exited.
OUTPUT_GRACE_S = 0.5


@dataclass(frozen=True, slots=True)
class LeaseOutcome:
    """What a leased process left.

    Attributes:
        exit_code: the child's exit status (negative: the signal that ended it).
        group: the process group (the child's pid).
        stdout, stderr: what it printed (decoded UTF-8, invalid bytes replaced).
        expired: the deadline passed and the tree was ended.
        terminated: pids sent SIGTERM at expiry.
        killed: pids that were still alive after the grace period and got SIGKILL.
        survivors: pids still alive after SIGKILL (should be empty; reported, never hidden).
    """

    exit_code: int
    stdout: str
    stderr: str
    group: int = 0
    expired: bool = False
    terminated: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()


class _Drain:
    """Reads one pipe to its end in a daemon thread."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[bytes] | None) -> None:
        if pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: pipe.read1(65536), b""):  # type: ignore[attr-defined]
                self._chunks.append(chunk)

    def text(self, grace_s: float) -> str:
        self._thread.join(grace_s)
        return b"".join(list(self._chunks)).decode("utf-8", errors="replace")


def _stat(pid: int) -> tuple[int, int, str, int] | None:
    """(parent pid, process group, state, start time) from ``/proc/PID/stat``, or ``None``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    try:
        return int(fields[1]), int(fields[2]), fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _table() -> dict[int, tuple[int, int, str, int]]:
    rows: dict[int, tuple[int, int, str, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (row := _stat(int(entry))) is not None:
            rows[int(entry)] = row
    return rows


def descendants(pid: int, group: int | None = None) -> dict[int, int]:
    """Live processes under ``pid`` (by parent pid) and in process group ``group``, with
    their start times (to tell a pid reused later from the same process). Zombies excluded."""
    table = _table()
    found: dict[int, int] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, _pgrp, state, start) in table.items():
            if ppid == parent and child not in found and state != "Z":
                found[child] = start
                frontier.append(child)
    for member, (_ppid, pgrp, state, start) in table.items():
        if group is not None and pgrp == group and state != "Z":
            found.setdefault(member, start)
    if pid in table and table[pid][2] != "Z":
        found.setdefault(pid, table[pid][3])
    return found


#: The environment variable that marks a lease's processes.
LEASE_ENV = "UNSTUCK_LEASE"


def tagged(token: str) -> dict[int, int]:
    """Live processes whose environment carries ``UNSTUCK_LEASE=token``, with start times."""
    marker = f"{LEASE_ENV}={token}".encode()
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and (row := _stat(int(entry))) is not None and row[2] != "Z":
            found[int(entry)] = row[3]
    return found


def _alive(pids: Mapping[int, int]) -> dict[int, int]:
    alive: dict[int, int] = {}
    for pid, start in pids.items():
        row = _stat(pid)
        if row is not None and row[3] == start and row[2] != "Z":
            alive[pid] = start
    return alive


def _signal(group: int, pids: Sequence[int], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


_Pids = tuple[int, ...]


def _everything(proc: subprocess.Popen[bytes], token: str) -> dict[int, int]:
    found = {**descendants(proc.pid, proc.pid), **tagged(token)}
    found.pop(os.getpid(), None)
    return found


def _end_tree(proc: subprocess.Popen[bytes], grace_s: float, token: str) -> tuple[_Pids, _Pids, _Pids]:
    tree = _everything(proc, token)
    _signal(proc.pid, list(tree), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
        if not _alive(tree) and proc.poll() is not None and not tagged(token):
            break
    killed: dict[int, int] = {}
    for _ in range(3):  # processes started during the grace period, or while killing, count too
        left = {**_alive(tree), **_everything(proc, token)}
        if not left and proc.poll() is not None:
            break
        killed.update(left)
        _signal(proc.pid, list(left), signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
        settle = time.monotonic() + 1.0
        while _alive(left) and time.monotonic() < settle:  # the kernel reaps killed processes promptly
            time.sleep(0.01)
    proc.wait()
    survivors = {**_alive(killed), **tagged(token)}
    return tuple(sorted(tree)), tuple(sorted(killed)), tuple(sorted(survivors))


def run_leased(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    deadline_s: float,
    grace_s: float = DEFAULT_GRACE_S,
    stdin_tty: bool = False,
) -> LeaseOutcome:
    """Run ``argv`` in a new session and process group under a deadline (see the module doc).

    Args:
        argv: the command line.
        cwd: its working directory.
        env: its whole environment.
        deadline_s: seconds it may run.
        grace_s: seconds between SIGTERM and SIGKILL at expiry.
        stdin_tty: inherit this process's stdin (attended runs); ``/dev/null`` otherwise.

    Returns:
        The :class:`LeaseOutcome`; the command's own exit when it ended in time.

    Raises:
        OSError: when the command cannot be started (not found, not executable).
    """
    token = f"{os.getpid()}-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env={**env, LEASE_ENV: token}, stdin=None if stdin_tty else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # attended: a new process group in this session, so /dev/tty (a password prompt) still works;
        # unattended: a new session, with no terminal at all
        start_new_session=not stdin_tty, process_group=0 if stdin_tty else None,
    )
    readers = [_Drain(proc.stdout), _Drain(proc.stderr)]
    expired = False
    terminated: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()
    try:
        try:
            proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            expired = True
            terminated, killed, survivors = _end_tree(proc, grace_s, token)
    except BaseException:  # an interrupt while it runs ends the tree before it propagates
        _signal(proc.pid, list(_everything(proc, token)), signal.SIGKILL)
        raise
    out, err = (reader.text(OUTPUT_GRACE_S) for reader in readers)
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return LeaseOutcome(code, out, err, proc.pid, expired, terminated, killed, survivors)
