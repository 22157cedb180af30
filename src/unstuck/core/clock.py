"""Clocks: time comes into the loop as an argument (DESIGN.md, "Layers").
Internal: not a supported import path (docs/reference/index.md lists those that are).

:class:`RealClock` reads the monotonic clock and really sleeps. :class:`VirtualClock` is for
tests and evals: sleeping returns at once and moves the reading forward by the slept
seconds, so a run that waits 60 s for a rate limit costs no wall time yet reports 60 s.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "RealClock", "VirtualClock"]


class Clock(Protocol):
    """A source of time in seconds (monotonic: only differences mean anything)."""

    def now(self) -> float:
        """The current reading, in seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a negative value waits nothing)."""
        ...


class RealClock:
    """The machine's monotonic clock; :meth:`sleep` blocks."""

    def now(self) -> float:
        """``time.monotonic()``, in seconds."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds``."""
        if seconds > 0:
            time.sleep(seconds)


class VirtualClock:
    """A clock whose sleeps are free.

    Args:
        start: the first reading, in seconds.
        follow_real_time: when true (the default), the reading also advances with the wall
            clock, so the time real tool calls take is counted; when false, only
            :meth:`sleep` and :meth:`advance` move it (fully deterministic tests).
    """

    def __init__(self, start: float = 0.0, *, follow_real_time: bool = True) -> None:
        self._offset = start
        self._follow = follow_real_time
        self._origin = time.monotonic()

    def now(self) -> float:
        """The virtual reading, in seconds."""
        real = time.monotonic() - self._origin if self._follow else 0.0
        return self._offset + real

    def sleep(self, seconds: float) -> None:
        """Advance the reading by ``seconds`` without waiting."""
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move the reading forward by ``seconds`` (negative values are ignored)."""
        if seconds > 0:
            self._offset += seconds
