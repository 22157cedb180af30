"""Leased tool processes: every subprocess a tool starts runs in its own process group under
a deadline (seed 002, "leases"; DESIGN.md: a hung prompt costs one deadline, never the turn).

Every process of the lease carries a token in its environment (``UNSTUCK_LEASE``), which
children inherit. On expiry :func:`run_leased` ends the whole tree:

1. it notes every process of the group, every descendant of the child (the process table
   read with psutil, walked by parent pid, so one that left the group with ``setsid`` is
   caught while its parent lives), and every process carrying the token (so a double-forked
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

**Output in bounded memory.** Each stream keeps at most ``output_cap`` bytes
(:data:`DEFAULT_OUTPUT_CAP`, 1 MiB): its first half and its last half, kept while reading,
with :data:`TRUNCATION_MARKER` naming the bytes dropped between them
(:attr:`LeaseOutcome.stdout_dropped`). A stream past :data:`OVERFLOW_FACTOR` (16) times the
cap ends the tree at once as at expiry (:attr:`LeaseOutcome.overflowed`): ``yes`` costs
milliseconds and a few MiB, not its deadline and gigabytes.

**However the caller ends.** Every lease running is in a registry (:func:`live_leases`).
:func:`install_signal_drain` makes SIGTERM and SIGINT end them all (and every process left
with one of this process's tokens) before the signal acts as before;
:func:`start_supervisor` starts :mod:`unstuck.processes.supervisor`, a process that outlives this one
(SIGKILL included) and then ends what its leases left; :func:`install_containment` does
both, for ``unstuck run``.

**A cgroup per lease.** Where this process may make cgroups (cgroup v2; see
:mod:`unstuck.processes.cgroups`), each lease's first process is moved into a cgroup of its own,
``unstuck-<token>``, as soon as it has started, and every process it starts is born there: a
daemon that double-forks and clears its environment is still a member. Expiry, the signal
drain, the supervisor and the sweep end the cgroup's members with the rest of the tree
(``cgroup.kill``) and remove the cgroup once it is empty; a command that ended in time has
its cgroup removed at once when nothing of it is left (:attr:`LeaseOutcome.cgroup` names it).

Start times (the identity of a process, with its pid) are clock ticks since boot
(:func:`unstuck.processes.identity.start_time`, from psutil).

**On a terminal** (``terminal=True``, the PTY shell tool) the command gets a pseudo-terminal
of its own (``os.openpty``) as its controlling terminal: its stdin and stdout are the pty's
slave, so pagers page and prompts prompt as they would in a terminal window; its stderr stays
a pipe, so what it reports stays apart from what it shows. The window is ``window`` (24 rows
by 80 columns by default, set with ``TIOCSWINSZ``); ``TERM`` is the caller's, else ``dumb``.
The pty's line discipline writes each line feed as a carriage return and a line feed
(``ONLCR``, termios(3)); stdout comes back with those pairs as line feeds. As in a terminal
window, when the command's first process (the session leader) exits, the kernel sends SIGHUP
to the terminal's foreground process group, which holds the jobs a non-interactive shell
started with ``&``.

**Waiting for input.** At expiry, before anything is signalled, every process of the lease is
looked at for one asleep reading a terminal (:mod:`unstuck.processes.waits`); the program that
waited is :attr:`LeaseOutcome.waiting_for_input`: the deadline did not catch a slow command,
it caught a pager or a prompt waiting for a person.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

import psutil

from unstuck.processes import cgroups
from unstuck.processes.cgroups import LeaseCgroup
from unstuck.processes.identity import start_time, ticks_since_boot
from unstuck.processes.waits import waiting_program

__all__ = [
    "DEFAULT_GRACE_S",
    "DEFAULT_OUTPUT_CAP",
    "DEFAULT_WINDOW",
    "LEASE_ENV",
    "OUTPUT_GRACE_S",
    "OVERFLOW_FACTOR",
    "TRUNCATION_MARKER",
    "LeaseOutcome",
    "LeasedProcess",
    "descendants",
    "drain_leases",
    "end_lease",
    "end_leases",
    "install_containment",
    "install_signal_drain",
    "live_leases",
    "run_leased",
    "start_lease",
    "start_supervisor",
    "stop_supervisor",
    "sweep_leftovers",
    "tagged",
    "token_prefix",
]

#: Seconds between SIGTERM and SIGKILL.
DEFAULT_GRACE_S = 2.0
#: Seconds to wait for output still in flight after the command itself has exited.
OUTPUT_GRACE_S = 0.5
#: Bytes of each stream (stdout, stderr) a lease keeps: the first half and the last half of
#: what was printed; what lies between is dropped and counted (1 MiB).
DEFAULT_OUTPUT_CAP = 1 << 20
#: A stream that prints more than this many times its cap is ended (its whole tree, as at
#: expiry): a printer that never stops (``yes``) costs a few milliseconds, not its deadline.
OVERFLOW_FACTOR = 16
#: Put where dropped bytes were (``{dropped}``: how many).
TRUNCATION_MARKER = "\n[unstuck: {dropped} bytes of output dropped here]\n"
#: The terminal window a command on a pty gets: (rows, columns), a VT100's 24 by 80.
DEFAULT_WINDOW = (24, 80)


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
        waiting_for_input: at expiry, the program that was asleep reading its terminal (a
            pager waiting for a key, a prompt waiting for an answer), e.g. ``"less"``; ``None``
            when nothing was (a slow command, or the command ended in time).
        overflowed: a stream printed more than ``OVERFLOW_FACTOR`` times its cap and the
            tree was ended (as at expiry: ``terminated``, ``killed``, ``survivors``);
            ``expired`` is then false.
        stdout_dropped, stderr_dropped: bytes of each stream dropped between the head and
            the tail kept (where :data:`TRUNCATION_MARKER` stands in the text); 0 when all
            was kept.
        cgroup: the folder of the lease's cgroup (see the module doc), ``None`` when it had
            none; gone once the lease has left nothing running.
    """

    exit_code: int
    stdout: str
    stderr: str
    group: int = 0
    expired: bool = False
    terminated: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()
    waiting_for_input: str | None = None
    overflowed: bool = False
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    cgroup: str | None = None


class _Capture:
    """What one stream printed, in bounded memory: the first ``cap // 2`` bytes and the last
    ``cap - cap // 2``, with the count of the bytes between them dropped. Past
    ``OVERFLOW_FACTOR * cap`` bytes in all it is ``overflowed`` and sets ``overflow`` (which
    wakes the lease, which then ends the process)."""

    def __init__(self, cap: int, overflow: threading.Event) -> None:
        self._head_cap = cap // 2
        self._tail_cap = cap - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._limit = OVERFLOW_FACTOR * cap
        self._wake = overflow
        self.overflowed = False
        self._lock = threading.Lock()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            room = self._head_cap - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self._tail += chunk[-self._tail_cap:]
                if len(self._tail) > self._tail_cap:
                    del self._tail[:len(self._tail) - self._tail_cap]
            if self.total > self._limit:
                self.overflowed = True
                self._wake.set()

    @property
    def dropped(self) -> int:
        with self._lock:
            return self.total - len(self._head) - len(self._tail)

    def text(self, pty: bool = False) -> str:
        """The head, a marker naming the bytes dropped (when any were), and the tail, decoded
        as UTF-8 (invalid bytes replaced; a character cut by the marker is dropped)."""
        with self._lock:
            head, tail, dropped = bytes(self._head), bytes(self._tail), self.total - len(self._head) - len(self._tail)
        if not dropped:
            whole = (head + tail).decode("utf-8", errors="replace")
            return whole.replace("\r\n", "\n") if pty else whole
        first = head.decode("utf-8", errors="ignore") if _cut_at_end(head) else head.decode("utf-8", "replace")
        while tail and tail[0] & 0xC0 == 0x80:  # continuation bytes of a character cut at the marker
            tail = tail[1:]
        last = tail.decode("utf-8", errors="replace")
        whole = first + TRUNCATION_MARKER.format(dropped=dropped) + last
        return whole.replace("\r\n", "\n") if pty else whole


def _cut_at_end(data: bytes) -> bool:
    """Whether ``data`` ends inside a UTF-8 character (its last lead byte wants more bytes
    than follow it; RFC 3629 section 3)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:
            wanted = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
            return wanted > back
    return False


class _Drain:
    """Reads one pipe to its end in a daemon thread into a :class:`_Capture`."""

    def __init__(self, pipe: IO[bytes] | None, capture: _Capture) -> None:
        self.capture = capture
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[bytes] | None) -> None:
        if pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: pipe.read1(65536), b""):  # type: ignore[attr-defined]
                self.capture.add(chunk)

    def text(self, grace_s: float) -> str:
        self._thread.join(grace_s)
        return self.capture.text()


class _TerminalDrain:
    """Reads a pty's master side in a daemon thread until every slave end is closed (the
    kernel then answers ``EIO``) or it is told to stop; closes the master when done."""

    def __init__(self, master: int, capture: _Capture) -> None:
        self._master = master
        self.capture = capture
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._master], [], [], 0.05)
                if not ready:
                    if self._stop.is_set():
                        return
                    continue
                chunk = os.read(self._master, 65536)
                if not chunk:
                    return
                self.capture.add(chunk)
        except (OSError, ValueError):  # EIO: the last slave end closed
            return

    def text(self, grace_s: float) -> str:
        self._thread.join(grace_s)
        self._stop.set()  # background jobs may hold the slave open: what came so far is kept
        self._thread.join()
        os.close(self._master)
        return self.capture.text(pty=True)


def _take_terminal() -> None:
    """In the child, after ``setsid``: make its stdin (the pty's slave) its controlling
    terminal (``TIOCSCTTY``, tty_ioctl(4)), so ``/dev/tty`` opens it and its foreground
    process group is the command's. One ioctl, no allocation or import: safe between fork and
    exec."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


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


#: The environment variable that marks a lease's processes.
LEASE_ENV = "UNSTUCK_LEASE"


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


def _alive(pids: Mapping[int, int]) -> dict[int, int]:
    return {pid: start for pid, start in pids.items() if start_time(pid) == start}


def _signal(group: int, pids: Sequence[int], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


_Pids = tuple[int, ...]


def _members(group: LeaseCgroup | None) -> dict[int, int]:
    """The processes of a lease's cgroup, with their start times."""
    if group is None:
        return {}
    found = {}
    for pid in group.members():
        started = start_time(pid)
        if started is not None:
            found[pid] = started
    return found


def _everything(proc: subprocess.Popen[bytes], token: str, group: LeaseCgroup | None = None) -> dict[int, int]:
    found = {**descendants(proc.pid, proc.pid), **tagged(token), **_members(group)}
    found.pop(os.getpid(), None)
    return found


def _end_tree(
    proc: subprocess.Popen[bytes], grace_s: float, token: str, group: LeaseCgroup | None = None
) -> tuple[_Pids, _Pids, _Pids]:
    tree = _everything(proc, token, group)
    _signal(proc.pid, list(tree), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
        if not _alive(tree) and proc.poll() is not None and not tagged(token) and not _members(group):
            break
    killed: dict[int, int] = {}
    for _ in range(3):  # processes started during the grace period, or while killing, count too
        left = {**_alive(tree), **_everything(proc, token, group)}
        if not left and proc.poll() is not None:
            break
        killed.update(left)
        _signal(proc.pid, list(left), signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
        settle = time.monotonic() + 1.0
        while _alive(left) and time.monotonic() < settle:  # the kernel reaps killed processes promptly
            time.sleep(0.01)
    if group is not None:
        for pid in group.kill():  # what hid from the walks: born in the cgroup, whatever it did since
            killed.setdefault(pid, 0)
    proc.wait()
    survivors = {**_alive({pid: start for pid, start in killed.items() if start}), **tagged(token), **_members(group)}
    return tuple(sorted(tree)), tuple(sorted(killed)), tuple(sorted(survivors))


def run_leased(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    deadline_s: float,
    grace_s: float = DEFAULT_GRACE_S,
    stdin_tty: bool = False,
    terminal: bool = False,
    window: tuple[int, int] = DEFAULT_WINDOW,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> LeaseOutcome:
    """Run ``argv`` in a new session and process group under a deadline (see the module doc).

    Args:
        argv: the command line.
        cwd: its working directory.
        env: its whole environment.
        deadline_s: seconds it may run.
        grace_s: seconds between SIGTERM and SIGKILL at expiry.
        stdin_tty: inherit this process's stdin (attended runs); ``/dev/null`` otherwise.
        terminal: run it on a pseudo-terminal of its own (stdin and stdout the pty, stderr a
            pipe; see the module doc).
        window: the pty's size as (rows, columns), with ``terminal``.
        output_cap: bytes kept of each stream (head and tail halves, the rest dropped with
            :data:`TRUNCATION_MARKER`); a stream past ``OVERFLOW_FACTOR`` times this ends the
            tree (:attr:`LeaseOutcome.overflowed`).

    Returns:
        The :class:`LeaseOutcome`; the command's own exit when it ended in time; at expiry,
        the program that was waiting for input, if one was.

    Raises:
        OSError: when the command cannot be started (not found, not executable), or no
            pseudo-terminal can be opened.
        ValueError: when both ``stdin_tty`` and ``terminal`` are set, ``window`` is not
            two positive sizes below 65536, or ``output_cap`` is below 2.
    """
    if stdin_tty and terminal:
        raise ValueError("run_leased: stdin_tty (this process's terminal) and terminal (a pty of its own) "
                         "exclude each other")
    if not isinstance(output_cap, int) or output_cap < 2:
        raise ValueError(f"run_leased: output_cap must be a whole number of bytes, at least 2, got {output_cap!r}")
    token = f"{token_prefix()}{uuid.uuid4().hex}"
    child_env = {**env, LEASE_ENV: token}
    device: int | None = None
    overflow = threading.Event()
    out_capture, err_capture = _Capture(output_cap, overflow), _Capture(output_cap, overflow)
    out_reader: _Drain | _TerminalDrain
    with _REGISTRY.starting(token), _cgroup_for(token) as group:
        if group is not None:
            argv = _joining(group, argv, cwd, child_env)
        if terminal:
            proc, device, out_reader = _start_on_terminal(argv, cwd, child_env, window, out_capture)
        else:
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=child_env, stdin=None if stdin_tty else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                # attended: a new process group in this session, so /dev/tty (a password prompt) still works;
                # unattended: a new session, with no terminal at all
                start_new_session=not stdin_tty, process_group=0 if stdin_tty else None,
            )
            out_reader = _Drain(proc.stdout, out_capture)
        _REGISTRY.started(token, proc)
    readers: list[_Drain | _TerminalDrain] = [out_reader, _Drain(proc.stderr, err_capture)]
    expired = overflowed = False
    waiting: str | None = None
    terminated: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()
    try:
        try:
            _wait(proc, deadline_s, overflow)
        except subprocess.TimeoutExpired:
            overflowed = out_capture.overflowed or err_capture.overflowed
            expired = not overflowed
            if expired:
                waiting = waiting_program(_everything(proc, token, group), device)  # before anything is signalled
            terminated, killed, survivors = _end_tree(proc, grace_s, token, group)
    except BaseException:  # an interrupt while it runs ends the tree before it propagates
        _signal(proc.pid, list(_everything(proc, token, group)), signal.SIGKILL)
        if group is not None:
            group.kill()
            group.remove()
        if isinstance(out_reader, _TerminalDrain):
            out_reader.text(0.0)  # closes the pty
        raise
    finally:
        _REGISTRY.ended(token)
    out, err = (reader.text(OUTPUT_GRACE_S) for reader in readers)
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    if group is not None:
        group.remove()  # only when empty: background jobs keep it until they end or are ended
    return LeaseOutcome(code, out, err, proc.pid, expired, terminated, killed, survivors, waiting,
                        overflowed, out_capture.dropped, err_capture.dropped,
                        str(group.path) if group is not None else None)


@contextlib.contextmanager
def _cgroup_for(token: str) -> Iterator[LeaseCgroup | None]:
    """A new cgroup for the lease ``token`` while its first process starts (``None`` where
    none can be made); removed again when the start fails."""
    group = cgroups.create(token)
    try:
        yield group
    except BaseException:
        if group is not None:
            group.kill()
            group.remove()
        raise


#: What a lease's first process runs when it has a cgroup: it moves itself into the cgroup
#: (``$0``: the cgroup's ``cgroup.procs``), then executes the command in its place, so the
#: command and all it starts are born in the cgroup (no Python runs between fork and exec).
_JOIN_CGROUP = 'echo "$$" > "$0" 2>/dev/null; exec "$@"'


def _joining(group: LeaseCgroup, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> list[str]:
    """``argv`` run through :data:`_JOIN_CGROUP` by ``/bin/sh``, when it can start: a program
    that cannot raises here as :class:`subprocess.Popen` would (the shell would only exit 127).

    Raises:
        FileNotFoundError: the program is not found (on the environment's ``PATH``, or at its
            path relative to ``cwd``).
        PermissionError: it is found but not executable.
    """
    program = argv[0] if argv else ""
    found: str | None
    if "/" in program:
        found = str(cwd / program) if os.path.exists(cwd / program) else None
    else:
        found = shutil.which(program, mode=os.F_OK, path=env.get("PATH", os.defpath)) if program else None
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return ["/bin/sh", "-c", _JOIN_CGROUP, str(group.path / "cgroup.procs"), *argv]


def _wait(proc: subprocess.Popen[bytes], deadline_s: float, wake: threading.Event) -> None:
    """Wait for ``proc`` to exit; :class:`subprocess.TimeoutExpired` when ``deadline_s``
    passes or ``wake`` is set (a stream overflowed) while it still runs."""
    def reap() -> None:
        with contextlib.suppress(Exception):
            proc.wait()
        wake.set()

    threading.Thread(target=reap, daemon=True).start()
    wake.wait(deadline_s)
    if proc.poll() is None:
        raise subprocess.TimeoutExpired(proc.args, deadline_s)


def _start_on_terminal(
    argv: Sequence[str], cwd: Path, env: dict[str, str], window: tuple[int, int], capture: _Capture
) -> tuple[subprocess.Popen[bytes], int, _TerminalDrain]:
    """Start ``argv`` on a new pty as its controlling terminal: the process, the pty's device
    (``st_rdev``) and the reader of its master side."""
    rows, columns = window
    if not all(isinstance(n, int) and 0 < n < 65536 for n in (rows, columns)):
        raise ValueError(f"run_leased: window must be (rows, columns), each 1-65535, got {window!r}")
    env.setdefault("TERM", "dumb")
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        device = os.fstat(slave).st_rdev
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=_take_terminal,
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)  # the child holds it now: the master reads EIO once the last holder is gone
    return proc, device, _TerminalDrain(master, capture)


# ----------------------------------------------------------------------------- the supervisor

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


def start_supervisor() -> int:
    """Start this process's supervisor (``python -m unstuck.processes.supervisor``, see its module doc)
    unless it runs already, and tell it the leases now live; returns its pid. It reads the
    lease lines this process writes on a pipe, and when the pipe closes (this process
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


def install_containment() -> int:
    """What a command that runs turns (``unstuck run``) calls once at its start, from the
    main thread: :func:`sweep_leftovers` (what earlier runs that died left), then
    :func:`install_signal_drain` and :func:`start_supervisor` (whose pid it returns), so the
    turn's tool processes end however the command ends: SIGTERM, SIGINT,
    SIGKILL or a crash.

    Raises:
        OSError: when the supervisor cannot be started.
        ValueError: when not called from the main thread.
    """
    sweep_leftovers()
    install_signal_drain()
    return start_supervisor()


# ----------------------------------------------------------------------------- live leases

class _Registry:
    """The leases of this process still running: token -> process group (0 while starting).
    Read by :func:`drain_leases` (a signal handler) and mirrored to the supervisor."""

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


def live_leases() -> dict[str, int]:
    """The leases of this process still running: their token and process group (0 for one
    being started)."""
    return _REGISTRY.snapshot()


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
            found.update(_members(cgroup))
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
            while _alive(tree) and time.monotonic() < settle:
                time.sleep(0.01)
            if not tree:
                break
        if signum == signal.SIGTERM and signalled:
            settle = time.monotonic() + grace_s
            while _alive(signalled) and time.monotonic() < settle:
                time.sleep(0.02)
    for cgroup in held:
        signalled.update(dict.fromkeys((pid for pid in cgroup.kill() if pid != me), 0))
        cgroup.remove()
    return tuple(sorted(signalled))


def drain_leases() -> tuple[int, ...]:
    """End every live lease of this process at once (SIGKILL; see :func:`end_leases`), and
    every process left carrying one of this process's tokens (a background job a command
    that ended in time left running): what a process about to die calls. Returns the pids
    signalled."""
    return end_leases({**_REGISTRY.snapshot(), token_prefix(): 0})


def token_prefix(pid: int | None = None) -> str:
    """What every lease token of process ``pid`` (this one by default) begins with; as a
    token for :func:`tagged` or :func:`end_leases` it stands for all of them."""
    return f"{os.getpid() if pid is None else pid}-"


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
    so the process dies of it as before). Idempotent; call it from the main thread
    (signal(2), Python's ``signal.signal``).

    Raises:
        ValueError: when called from another thread than the main one (Python's rule).
    """
    for signum in signals:
        if signum in _INSTALLED:
            continue
        _INSTALLED[signum] = signal.signal(signum, _on_signal)


# ----------------------------------------------------------------------------- leftovers

def _owner(token: str) -> int | None:
    """The pid a lease token names as its owner (``PID-…``, see :func:`token_prefix`);
    ``None`` for a token of another shape."""
    head, dash, _ = token.partition("-")
    return int(head) if dash and head.isascii() and head.isdigit() and 0 < int(head) < 1 << 22 else None


def sweep_leftovers(grace_s: float = DEFAULT_GRACE_S) -> tuple[int, ...]:
    """End the processes earlier runs left: every live process carrying an ``UNSTUCK_LEASE``
    token whose owner (the pid the token begins with, :func:`token_prefix`) is gone. An
    owner counts as gone when no process has its pid, or the process with its pid started
    after the leftover did (a pid reused later: the owner of a lease started before every
    process of it; start times from :func:`start_time`, clock ticks since boot). Leases of
    live owners, this process's included, are left alone. Each orphaned token is ended as
    :func:`end_leases` does (SIGTERM, ``grace_s`` seconds, then SIGKILL). Never raises.

    Returns the pids signalled (sorted); empty when nothing was left."""
    me = os.getpid()
    orphaned: set[str] = set()
    owners: dict[int, int | None] = {}
    for proc in psutil.process_iter():
        try:
            token = proc.environ().get(LEASE_ENV)
            owner = _owner(token) if token else None
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
        owner = _owner(cgroup.token)
        if owner is not None and owner != me and start_time(owner) is None:
            orphaned.add(cgroup.token)
    if not orphaned:
        return ()
    return end_leases(dict.fromkeys(orphaned, 0), grace_s)


# ----------------------------------------------------------------------------- leased fixtures

@dataclass(frozen=True, slots=True)
class LeasedProcess:
    """A long-lived helper process started under a lease (:func:`start_lease`): a fixture
    that holds a lock, a fake server. It carries ``token`` in its environment and is in the
    registry until :func:`end_lease`, so the signal drain, the supervisor and
    :func:`sweep_leftovers` end it as they end a tool's processes.

    Attributes:
        token: its ``UNSTUCK_LEASE`` value.
        proc: the process (text-mode pipes; its pid is its process group).
    """

    token: str
    proc: subprocess.Popen[str]


def start_lease(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
) -> LeasedProcess:
    """Start ``argv`` as a leased helper with no deadline: in a session and process group
    of its own, stdin ``/dev/null``, stdout a text pipe (UTF-8) the caller reads, stderr
    inherited; its environment ``env`` (this process's by default) plus its lease token.
    End it with :func:`end_lease`.

    Raises:
        OSError: when the command cannot be started.
    """
    token = f"{token_prefix()}{uuid.uuid4().hex}"
    child_env = {**(os.environ if env is None else env), LEASE_ENV: token}
    with _REGISTRY.starting(token), _cgroup_for(token) as group:
        if group is not None:
            argv = _joining(group, argv, cwd or Path.cwd(), child_env)
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", start_new_session=True,
        )
        _REGISTRY.started(token, proc)
    return LeasedProcess(token, proc)


def end_lease(lease: LeasedProcess, grace_s: float = 0.0) -> tuple[int, ...]:
    """End a helper started with :func:`start_lease`: its group, its descendants and every
    process carrying its token (see :func:`end_leases`), then reap it, close its pipe and
    take it off the registry. Idempotent; never raises. Returns the pids signalled."""
    try:
        # a reaped child's pid may be reused: its group only while it is unreaped (alive or a zombie)
        return end_leases({lease.token: lease.proc.pid if lease.proc.poll() is None else 0}, grace_s)
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            lease.proc.wait(timeout=5)
        if lease.proc.stdout is not None:
            with contextlib.suppress(OSError):
                lease.proc.stdout.close()
        _REGISTRY.ended(token=lease.token)
