"""Terminal waits: whether a process is asleep reading a terminal, which tells a leased command
that waits for a person from one that is only slow (:func:`reads_terminal`,
:func:`waiting_program`; :mod:`unstuck.processes.leases` asks at expiry).
Internal: not a supported import path (docs/reference/index.md lists those that are).

A process waits when it is in ``read(2)`` (or ``readv``/``pread``) of a terminal descriptor
(its lease's pty, or with ``stdin_tty`` any terminal it was given), or in
``poll``/``select``/``epoll_wait`` on one for input, as ``/proc/PID/syscall`` says (read with
``/proc/PID/mem`` and ``/proc/PID/fdinfo`` for the descriptor sets). The program that waited
is ``argv[0]``'s base name, else its ``comm``. When ``/proc/PID/syscall`` cannot be read
(another user's process), a process asleep in ``n_tty_read`` (older kernels) or in
``wait_woken`` with the lease's pty as its controlling terminal (``/proc/PID/wchan``,
``/proc/PID/stat``'s ``tty_nr``) counts as waiting; on this kernel (6.x) a read of a terminal
sleeps in ``wait_woken``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import psutil

from unstuck.processes.identity import process_of

__all__ = ["is_terminal_device", "reads_terminal", "waiting_program"]


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
    minor in bits 31-20 and 7-0, major in bits 15-8), ``None`` for none. Read here, not
    with psutil: ``Process.terminal`` gives only a name, looked up in a map of ``/dev/pts``
    that psutil builds once per process (psutil/_psposix.py ``get_terminal_map`` is
    memoized), so a pty opened after the first call has no name."""
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
    proc = process_of(pid)
    try:
        if proc is None or proc.status() != psutil.STATUS_SLEEPING:
            return False
    except psutil.Error:
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
