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
looked at for one asleep reading a terminal (its pty, or with ``stdin_tty`` any terminal it
was given): in ``read(2)`` (or ``readv``/``pread``) of a terminal descriptor, or in
``poll``/``select``/``epoll_wait`` on one for input, as ``/proc/PID/syscall`` says (read with
``/proc/PID/mem`` and ``/proc/PID/fdinfo`` for the descriptor sets). The program that waited
(``argv[0]``'s base name, else its ``comm``) is :attr:`LeaseOutcome.waiting_for_input`: the
deadline did not catch a slow command, it caught a pager or a prompt waiting for a person.
When ``/proc/PID/syscall`` cannot be read (another user's process), a process asleep in
``n_tty_read`` (older kernels) or in ``wait_woken`` with the lease's pty as its controlling
terminal (``/proc/PID/wchan``, ``/proc/PID/stat``'s ``tty_nr``) counts as waiting; on this
kernel (6.x) a read of a terminal sleeps in ``wait_woken``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import stat
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = [
    "DEFAULT_GRACE_S",
    "DEFAULT_WINDOW",
    "LEASE_ENV",
    "OUTPUT_GRACE_S",
    "LeaseOutcome",
    "descendants",
    "is_terminal_device",
    "reads_terminal",
    "run_leased",
    "tagged",
    "waiting_program",
]

#: Seconds between SIGTERM and SIGKILL.
DEFAULT_GRACE_S = 2.0
#: Seconds to wait for output still in flight after the command itself has exited.
OUTPUT_GRACE_S = 0.5
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


class _TerminalDrain:
    """Reads a pty's master side in a daemon thread until every slave end is closed (the
    kernel then answers ``EIO``) or it is told to stop; closes the master when done."""

    def __init__(self, master: int) -> None:
        self._master = master
        self._chunks: list[bytes] = []
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
                self._chunks.append(chunk)
        except (OSError, ValueError):  # EIO: the last slave end closed
            return

    def text(self, grace_s: float) -> str:
        self._thread.join(grace_s)
        self._stop.set()  # background jobs may hold the slave open: what came so far is kept
        self._thread.join()
        os.close(self._master)
        return b"".join(self._chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")


def _take_terminal() -> None:
    """In the child, after ``setsid``: make its stdin (the pty's slave) its controlling
    terminal (``TIOCSCTTY``, tty_ioctl(4)), so ``/dev/tty`` opens it and its foreground
    process group is the command's. One ioctl, no allocation or import: safe between fork and
    exec."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


# ----------------------------------------------------------------------------- waiting for input

#: System call numbers (``/proc/PID/syscall``'s first field) that wait for input on
#: descriptors, per machine: ``read``-like calls take the descriptor as their first argument,
#: ``poll``/``ppoll`` a ``struct pollfd`` array and its length, ``select``/``pselect6`` a count
#: and a read set, ``epoll_wait``-like calls an epoll descriptor (its watched descriptors are
#: listed in ``/proc/PID/fdinfo``). Sources: Linux arch/x86/entry/syscalls/syscall_64.tbl
#: (x86_64) and include/uapi/asm-generic/unistd.h (aarch64, which has no poll, select or
#: epoll_wait of its own).
_SYSCALLS: Mapping[str, Mapping[str, frozenset[int]]] = {
    "x86_64": {"read": frozenset({0, 17, 19, 295, 327}), "poll": frozenset({7, 271}),
               "select": frozenset({23, 270}), "epoll": frozenset({232, 281, 441})},
    "aarch64": {"read": frozenset({63, 65, 67, 69, 286}), "poll": frozenset({73}),
                "select": frozenset({72}), "epoll": frozenset({22, 441})},
}
_POLLIN = 0x001 | 0x040  # POLLIN | POLLRDNORM (poll(2))
_EPOLLIN = 0x001  # EPOLLIN (epoll_ctl(2))
_MAX_DESCRIPTORS = 4096
#: Character-device majors of terminals (Linux Documentation/admin-guide/devices.txt): 3 BSD
#: pty slaves, 4 virtual consoles and serial ports, 136-143 Unix98 pty slaves, 166 USB ACM
#: modems, 188 USB serial, 204 low-density serial ports, 229 hypervisor consoles; and 5:0
#: ``/dev/tty`` (the process's controlling terminal), 5:1 ``/dev/console``.
_TERMINAL_MAJORS = frozenset({3, 4, *range(136, 144), 166, 188, 204, 229})
_TERMINAL_DEVICES = frozenset({(5, 0), (5, 1)})
_CONTROLLING_TERMINAL = (5, 0)


def is_terminal_device(device: int) -> bool:
    """Whether ``device`` (a ``st_rdev``) is a terminal: a pty slave, a console, a serial
    port, ``/dev/tty`` (see the majors above, from the kernel's devices.txt)."""
    pair = (os.major(device), os.minor(device))
    return pair[0] in _TERMINAL_MAJORS or pair in _TERMINAL_DEVICES


def _tty_nr(pid: int) -> tuple[int, int] | None:
    """The controlling terminal from ``/proc/PID/stat`` field 7 as (major, minor) (proc(5):
    minor in bits 31-20 and 7-0, major in bits 15-8), ``None`` for none."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        tty_nr = int(raw[raw.rfind(")") + 2:].split()[4])
    except (OSError, IndexError, ValueError):
        return None
    if tty_nr == 0:
        return None
    return (tty_nr >> 8) & 0xFFF, (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)


def _terminal_fd(pid: int, fd: int, device: tuple[int, int] | None, ctty: tuple[int, int] | None) -> bool:
    """Whether descriptor ``fd`` of ``pid`` is a terminal (``device``, when given: that one,
    or ``/dev/tty`` while ``device`` is the process's controlling terminal)."""
    try:
        found = os.stat(f"/proc/{pid}/fd/{fd}")
    except (OSError, ValueError):
        return False
    if not stat.S_ISCHR(found.st_mode):
        return False
    pair = (os.major(found.st_rdev), os.minor(found.st_rdev))
    if device is None:
        return is_terminal_device(found.st_rdev)
    return pair == device or (pair == _CONTROLLING_TERMINAL and ctty == device)


def _memory(pid: int, address: int, size: int) -> bytes:
    """``size`` bytes of ``pid``'s memory at ``address`` (``/proc/PID/mem``, proc(5)); ``b""``
    when it cannot be read."""
    if address <= 0 or size <= 0:
        return b""
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
            memory.seek(address)
            return memory.read(size) or b""
    except (OSError, ValueError, OverflowError):
        return b""


def _polled(pid: int, array: int, count: int) -> list[int]:
    """The descriptors a ``poll`` waits on for input (``struct pollfd``: int fd, short events,
    short revents; poll(2))."""
    count = min(count, _MAX_DESCRIPTORS)
    raw = _memory(pid, array, 8 * count)
    entries = (struct.unpack_from("=ihh", raw, 8 * i) for i in range(len(raw) // 8))
    return [fd for fd, events, _ in entries if fd >= 0 and events & _POLLIN]


def _selected(pid: int, count: int, read_set: int) -> list[int]:
    """The descriptors of a ``select`` read set (an array of longs, bit ``fd`` set; select(2)),
    read only on little-endian machines, where the longs' bits are the bytes' bits in order."""
    if sys.byteorder != "little":
        return []
    count = min(count, _MAX_DESCRIPTORS)
    raw = _memory(pid, read_set, (count + 63) // 64 * 8)
    return [fd for fd in range(min(count, 8 * len(raw))) if raw[fd // 8] >> (fd % 8) & 1]


def _epolled(pid: int, epoll_fd: int) -> list[int]:
    """The descriptors an epoll instance watches for input (``tfd:`` lines of
    ``/proc/PID/fdinfo/EPFD``, proc(5))."""
    try:
        lines = Path(f"/proc/{pid}/fdinfo/{epoll_fd}").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    found: list[int] = []
    for line in lines:
        words = line.split()
        if len(words) >= 4 and words[0] == "tfd:" and words[2] == "events:":
            with contextlib.suppress(ValueError):
                if int(words[3], 16) & _EPOLLIN:
                    found.append(int(words[1]))
    return found


def _waited_descriptors(pid: int, number: int, args: Sequence[int]) -> list[int] | None:
    """The descriptors system call ``number`` waits on for input, or ``None`` when it is not
    one that waits for input (or the machine is not in the table)."""
    table = _SYSCALLS.get(os.uname().machine)
    if table is None or len(args) < 2:
        return None
    if number in table["read"]:
        return [args[0]]
    if number in table["poll"]:
        return _polled(pid, args[0], args[1])
    if number in table["select"]:
        return _selected(pid, args[0], args[1])
    if number in table["epoll"]:
        return _epolled(pid, args[0])
    return None


def reads_terminal(pid: int, device: int | None = None) -> bool:
    """Whether process ``pid`` is asleep waiting for input from a terminal: in ``read(2)`` of
    one, or in ``poll``/``select``/``epoll_wait`` on one for input (see the module doc).

    Args:
        pid: the process.
        device: a terminal's ``st_rdev`` (a lease's pty): only that terminal counts (or
            ``/dev/tty`` while it is the process's controlling terminal); ``None``: any
            terminal (:func:`is_terminal_device`).

    Never raises: a process that is gone or cannot be read is not waiting.
    """
    row = _stat(pid)
    if row is None or row[2] != "S":
        return False
    wanted = (os.major(device), os.minor(device)) if device is not None else None
    ctty = _tty_nr(pid)
    try:
        words = Path(f"/proc/{pid}/syscall").read_text(encoding="ascii", errors="replace").split()
    except OSError:  # another user's process: only the kernel's wait channel says anything
        return _waits_by_channel(pid, wanted, ctty)
    if not words or words[0] in ("running", "-1"):
        return False
    try:
        number, args = int(words[0]), [int(word, 16) for word in words[1:7]]
    except ValueError:
        return False
    descriptors = _waited_descriptors(pid, number, args)
    return bool(descriptors) and any(_terminal_fd(pid, fd, wanted, ctty) for fd in descriptors or ())


def _waits_by_channel(pid: int, device: tuple[int, int] | None, ctty: tuple[int, int] | None) -> bool:
    """The fallback when the system call cannot be read: asleep in ``n_tty_read`` (the
    terminal line discipline's read, named on older kernels), or in ``wait_woken`` (where
    n_tty_read sleeps on newer ones, and other reads too) with the lease's pty as its
    controlling terminal."""
    try:
        channel = Path(f"/proc/{pid}/wchan").read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return False
    if channel == "n_tty_read":
        return ctty is not None and (device is None or ctty == device)
    return channel == "wait_woken" and device is not None and ctty == device


def _program_name(pid: int) -> str | None:
    """The program a process runs: its ``argv[0]``'s base name when that agrees with its
    ``comm`` (``comm`` is cut at 15 bytes), else its ``comm`` (a script run through its
    interpreter is named by the script: ``frontend``, not ``perl``)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    with contextlib.suppress(OSError):
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode("utf-8", errors="replace")
        base = os.path.basename(argv0.split(" ", 1)[0]).lstrip("-")
        if base and comm and base.startswith(comm):
            return base
    return comm or None


def waiting_program(pids: Iterable[int], device: int | None = None) -> str | None:
    """The program of the first of ``pids`` (in pid order) that :func:`reads_terminal`, or
    ``None`` when none is waiting for input."""
    for pid in sorted(pids):
        if reads_terminal(pid, device):
            return _program_name(pid)
    return None


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
    terminal: bool = False,
    window: tuple[int, int] = DEFAULT_WINDOW,
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

    Returns:
        The :class:`LeaseOutcome`; the command's own exit when it ended in time; at expiry,
        the program that was waiting for input, if one was.

    Raises:
        OSError: when the command cannot be started (not found, not executable), or no
            pseudo-terminal can be opened.
        ValueError: when both ``stdin_tty`` and ``terminal`` are set, or ``window`` is not
            two positive sizes below 65536.
    """
    if stdin_tty and terminal:
        raise ValueError("run_leased: stdin_tty (this process's terminal) and terminal (a pty of its own) "
                         "exclude each other")
    token = f"{os.getpid()}-{uuid.uuid4().hex}"
    child_env = {**env, LEASE_ENV: token}
    device: int | None = None
    out_reader: _Drain | _TerminalDrain
    if terminal:
        proc, device, out_reader = _start_on_terminal(argv, cwd, child_env, window)
    else:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=child_env, stdin=None if stdin_tty else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # attended: a new process group in this session, so /dev/tty (a password prompt) still works;
            # unattended: a new session, with no terminal at all
            start_new_session=not stdin_tty, process_group=0 if stdin_tty else None,
        )
        out_reader = _Drain(proc.stdout)
    readers: list[_Drain | _TerminalDrain] = [out_reader, _Drain(proc.stderr)]
    expired = False
    waiting: str | None = None
    terminated: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()
    try:
        try:
            proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            expired = True
            waiting = waiting_program(_everything(proc, token), device)  # before anything is signalled
            terminated, killed, survivors = _end_tree(proc, grace_s, token)
    except BaseException:  # an interrupt while it runs ends the tree before it propagates
        _signal(proc.pid, list(_everything(proc, token)), signal.SIGKILL)
        if isinstance(out_reader, _TerminalDrain):
            out_reader.text(0.0)  # closes the pty
        raise
    out, err = (reader.text(OUTPUT_GRACE_S) for reader in readers)
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return LeaseOutcome(code, out, err, proc.pid, expired, terminated, killed, survivors, waiting)


def _start_on_terminal(
    argv: Sequence[str], cwd: Path, env: dict[str, str], window: tuple[int, int]
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
    return proc, device, _TerminalDrain(master)
