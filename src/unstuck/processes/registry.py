"""The leases of this process still running, mirrored to its supervisor.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Every lease is in the registry from just before its first process starts (:func:`starting`,
group 0) until it has ended (:func:`ended`); :func:`live_leases` reads it (the signal drain of
:mod:`unstuck.processes.containment` ends what it names). :func:`start_supervisor` starts
:mod:`unstuck.processes.supervisor`, a process that outlives this one (SIGKILL included) and
ends what its leases left; while it runs, every change to the registry is also written to it
as a lease line (``+ TOKEN``, ``g TOKEN GROUP``, ``- TOKEN``: the supervisor's module doc).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from unstuck.processes.members import LEASE_ENV

__all__ = ["ended", "live_leases", "start_supervisor", "started", "starting", "stop_supervisor"]


@dataclass(slots=True)
class _Link:
    owner: int  # the pid that started it: a forked child does not write to its parent's supervisor
    proc: subprocess.Popen[bytes]
    fd: int


_LINK: list[_Link] = []


def _supervisor_send(line: str) -> None:
    """Tell the supervisor (when this process started one) a lease line; never raises (a
    dead supervisor must not stop a tool)."""
    link = _LINK[0] if _LINK else None
    if link is None or link.owner != os.getpid():
        return
    with contextlib.suppress(OSError):
        os.write(link.fd, line.encode("utf-8"))


class _Registry:
    """The leases of this process still running: token -> process group (0 while starting)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._live: dict[str, int] = {}

    @contextlib.contextmanager
    def starting(self, token: str) -> Iterator[None]:
        with self.lock:  # a signal arriving here drains after the Popen, with the group known
            self._live[token] = 0
            _supervisor_send(f"+ {token}\n")
            try:
                yield
            except BaseException:
                self.ended(token)
                raise

    def started(self, token: str, proc: subprocess.Popen[Any]) -> None:
        with self.lock:
            self._live[token] = proc.pid
            _supervisor_send(f"g {token} {proc.pid}\n")

    def ended(self, token: str) -> None:
        with self.lock:
            self._live.pop(token, None)
            _supervisor_send(f"- {token}\n")

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self._live)


_REGISTRY = _Registry()


@contextlib.contextmanager
def starting(token: str) -> Iterator[None]:
    """Hold the lease ``token`` in the registry (group 0) while its first process starts;
    the block calls :func:`started` once it has; taken off again when the block raises."""
    with _REGISTRY.starting(token):
        yield


def started(token: str, proc: subprocess.Popen[Any]) -> None:
    """The lease ``token``'s first process has started: its pid is the lease's group."""
    _REGISTRY.started(token, proc)


def ended(token: str) -> None:
    """The lease ``token`` has ended: off the registry (idempotent)."""
    _REGISTRY.ended(token)


def live_leases() -> dict[str, int]:
    """The leases of this process still running: their token and process group (0 for one
    being started)."""
    return _REGISTRY.snapshot()


def start_supervisor() -> int:
    """Start this process's supervisor (``python -m unstuck.processes.supervisor``, see its
    module doc) unless it runs already, and tell it the leases now live; returns its pid. It
    reads the lease lines this process writes on a pipe, and when the pipe closes (this process
    exits, however: the kernel closes a dead process's descriptors, even after SIGKILL) it
    ends every process of the leases still live and every process carrying one of this
    process's lease tokens, then exits.

    Raises:
        OSError: when the supervisor cannot be started.
    """
    with _REGISTRY.lock:
        if _LINK and _LINK[0].owner == os.getpid() and _LINK[0].proc.poll() is None:
            return _LINK[0].proc.pid
        env = {k: v for k, v in os.environ.items() if k != LEASE_ENV}
        proc = subprocess.Popen(
            [sys.executable, "-m", "unstuck.processes.supervisor", str(os.getpid())], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True,  # a terminal's Ctrl-C or a kill of this group does not reach it
        )
        assert proc.stdin is not None
        _LINK[:] = [_Link(os.getpid(), proc, proc.stdin.fileno())]
        for token, group in _REGISTRY.snapshot().items():
            _supervisor_send(f"+ {token}\n" + (f"g {token} {group}\n" if group else ""))
        return proc.pid


def stop_supervisor(timeout_s: float = 5.0) -> int | None:
    """Close the pipe to this process's supervisor (it then ends what is still live, as at
    this process's death) and wait up to ``timeout_s`` seconds for it; its exit status, or
    ``None`` when none was running or it did not exit in time."""
    with _REGISTRY.lock:
        link = _LINK.pop() if _LINK else None
    if link is None or link.owner != os.getpid():
        return None
    assert link.proc.stdin is not None
    link.proc.stdin.close()
    try:
        return link.proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return None
