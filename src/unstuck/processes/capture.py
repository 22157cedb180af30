"""What a leased process prints, read while it runs and kept in bounded memory.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Each stream (stdout, stderr) is read by a daemon thread while the process runs, so a full pipe
never blocks it, and what was printed before a kill is kept: a pipe by :class:`PipeReader`, a
pseudo-terminal's master side by :class:`TerminalReader`.

**Output in bounded memory.** A :class:`Capture` keeps at most ``cap`` bytes of its stream
(:data:`DEFAULT_OUTPUT_CAP`, 1 MiB): its first half and its last half, kept while reading, with
:data:`TRUNCATION_MARKER` naming the bytes dropped between them. A stream past
:data:`OVERFLOW_FACTOR` (16) times the cap sets the capture's overflow event, on which the lease
(:func:`unstuck.processes.leases.run_leased`) ends the tree at once as at expiry: ``yes`` costs
milliseconds and a few MiB, not its deadline and gigabytes.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from typing import IO

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "OVERFLOW_FACTOR",
    "TRUNCATION_MARKER",
    "Capture",
    "PipeReader",
    "TerminalReader",
]

#: Bytes of each stream (stdout, stderr) a lease keeps: the first half and the last half of
#: what was printed; what lies between is dropped and counted (1 MiB).
DEFAULT_OUTPUT_CAP = 1 << 20
#: A stream that prints more than this many times its cap is ended (its whole tree, as at
#: expiry): a printer that never stops (``yes``) costs a few milliseconds, not its deadline.
OVERFLOW_FACTOR = 16
#: Put where dropped bytes were (``{dropped}``: how many).
TRUNCATION_MARKER = "\n[unstuck: {dropped} bytes of output dropped here]\n"


class Capture:
    """What one stream printed, in bounded memory: the first ``cap // 2`` bytes and the last
    ``cap - cap // 2``, with the count of the bytes between them dropped. Past
    ``OVERFLOW_FACTOR * cap`` bytes in all it is ``overflowed`` and sets ``overflow`` (which
    wakes the lease, which then ends the process). Safe to add to from one thread while
    another reads it."""

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
        """Keep what of ``chunk`` the head and the tail hold, and count the rest."""
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
        """Bytes dropped between the head and the tail (0 when all was kept)."""
        with self._lock:
            return self.total - len(self._head) - len(self._tail)

    def text(self, pty: bool = False) -> str:
        """The head, a marker naming the bytes dropped (when any were), and the tail, decoded
        as UTF-8 (invalid bytes replaced; a character cut by the marker is dropped); with
        ``pty``, the line discipline's carriage return and line feed pairs read as line feeds."""
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


class PipeReader:
    """Reads one pipe to its end in a daemon thread into a :class:`Capture` (a ``None`` pipe
    reads nothing)."""

    def __init__(self, pipe: IO[bytes] | None, capture: Capture) -> None:
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
        """What was read, after waiting up to ``grace_s`` seconds for the pipe's end."""
        self._thread.join(grace_s)
        return self.capture.text()


class TerminalReader:
    """Reads a pty's master side in a daemon thread until every slave end is closed (the
    kernel then answers ``EIO``) or it is told to stop; closes the master when done."""

    def __init__(self, master: int, capture: Capture) -> None:
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
        """What was read, after waiting up to ``grace_s`` seconds for the last slave end to
        close; then stops reading and closes the master."""
        self._thread.join(grace_s)
        self._stop.set()  # background jobs may hold the slave open: what came so far is kept
        self._thread.join()
        os.close(self._master)
        return self.capture.text(pty=True)
