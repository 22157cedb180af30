"""Starting a command on a pseudo-terminal of its own, as its controlling terminal.
Internal: not a supported import path (docs/reference/index.md lists those that are).

The command (the PTY shell tool's, :func:`unstuck.processes.leases.run_leased` with
``terminal=True``) gets a pseudo-terminal (``os.openpty``): its stdin and stdout are the pty's
slave, so pagers page and prompts prompt as they would in a terminal window; its stderr stays a
pipe, so what it reports stays apart from what it shows. The window is ``window`` (24 rows by
80 columns by default, set with ``TIOCSWINSZ``); ``TERM`` is the caller's, else ``dumb``. The
pty's line discipline writes each line feed as a carriage return and a line feed (``ONLCR``,
termios(3)); :class:`~unstuck.processes.capture.TerminalReader` gives those pairs back as line
feeds. As in a terminal window, when the command's first process (the session leader) exits,
the kernel sends SIGHUP to the terminal's foreground process group, which holds the jobs a
non-interactive shell started with ``&``.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
from collections.abc import Sequence
from pathlib import Path

from unstuck.processes.capture import Capture, TerminalReader

__all__ = ["DEFAULT_WINDOW", "start_on_terminal"]

#: The terminal window a command on a pty gets: (rows, columns), a VT100's 24 by 80.
DEFAULT_WINDOW = (24, 80)


def _take_terminal() -> None:
    """In the child, after ``setsid``: make its stdin (the pty's slave) its controlling
    terminal (``TIOCSCTTY``, tty_ioctl(4)), so ``/dev/tty`` opens it and its foreground
    process group is the command's. One ioctl, no allocation or import: safe between fork and
    exec."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def start_on_terminal(
    argv: Sequence[str], cwd: Path, env: dict[str, str], window: tuple[int, int], capture: Capture
) -> tuple[subprocess.Popen[bytes], int, TerminalReader]:
    """Start ``argv`` in a new session on a new pty as its controlling terminal; ``env`` gets
    ``TERM=dumb`` unless it names one.

    Returns:
        The process, the pty's device (``st_rdev``) and the reader of its master side, which
        feeds ``capture``.

    Raises:
        ValueError: ``window`` is not (rows, columns), each 1-65535.
        OSError: no pty can be opened, or the command cannot be started.
    """
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
    return proc, device, TerminalReader(master, capture)
