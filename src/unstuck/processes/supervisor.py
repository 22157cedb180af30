"""The supervisor of one process's leases: it outlives that process and ends what it leaves.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Started by :func:`unstuck.processes.registry.start_supervisor` as ``python -m unstuck.processes.supervisor PID``
in a session of its own, it reads lease lines from its standard input, a pipe whose only
writer is process ``PID``:

- ``+ TOKEN``: a lease with token ``TOKEN`` is starting;
- ``g TOKEN GROUP``: its process group is ``GROUP``;
- ``- TOKEN``: it ended.

End of file means the writer is gone: it exited, crashed or was killed (SIGKILL included:
the kernel closes a dead process's descriptors, pipe(7)). The supervisor then ends, SIGTERM
first and SIGKILL after :data:`GRACE_S` seconds (:func:`unstuck.processes.ending.end_leases`), every
process of the leases still live and every process carrying a token of ``PID``'s
(``UNSTUCK_LEASE=PID-…``), and exits 0. Lines it cannot read are skipped. SIGINT and SIGHUP
are ignored: a terminal's Ctrl-C or hang-up is for the writer, which drains its own leases.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable, Sequence

from unstuck.processes.ending import end_leases
from unstuck.processes.members import token_prefix

__all__ = ["GRACE_S", "leases_left", "main", "supervise"]

#: Seconds between SIGTERM and SIGKILL when the writer is gone.
GRACE_S = 1.0


def leases_left(lines: Iterable[bytes]) -> dict[str, int]:
    """The leases the lines leave live: token -> process group (0 while not yet known)."""
    live: dict[str, int] = {}
    for raw in lines:
        words = raw.decode("utf-8", errors="replace").split()
        if len(words) == 2 and words[0] == "+":
            live.setdefault(words[1], 0)
        elif len(words) == 3 and words[0] == "g" and words[2].isdigit() and words[1] in live:
            live[words[1]] = int(words[2])
        elif len(words) == 2 and words[0] == "-":
            live.pop(words[1], None)
    return live


def supervise(parent: int, lines: Iterable[bytes], grace_s: float = GRACE_S) -> tuple[int, ...]:
    """Read ``lines`` to their end, then end what ``parent``'s leases left (see the module
    doc); returns the pids signalled."""
    live = leases_left(lines)
    return end_leases({**live, token_prefix(parent): 0}, grace_s, exclude=os.getpid())


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m unstuck.processes.supervisor PID``: 0 when done, 2 on a bad argument."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].isdigit() or int(args[0]) <= 0:
        print("usage: python -m unstuck.processes.supervisor PID  (PID: the process whose leases to watch)",
              file=sys.stderr)
        return 2
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    supervise(int(args[0]), sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
