"""One tool call: the per-call pipeline and its state, the lesson step. May import store and below.
The names of the module ``unstuck.guard`` of earlier releases stay here (from
:mod:`unstuck.guard.guard`), imported when first used.
Internal: not a supported import path; use ``unstuck.guard.guard``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unstuck.guard.guard import (
        REPLY_WAIT_S,
        STATE_VERSION,
        Action,
        Decision,
        Guard,
        GuardStateError,
        receipt_of,
    )

__all__ = [
    "REPLY_WAIT_S",
    "STATE_VERSION",
    "Action",
    "Decision",
    "Guard",
    "GuardStateError",
    "receipt_of",
]


def __getattr__(name: str) -> Any:
    """The old module's public names, from :mod:`unstuck.guard.guard` on first use (PEP 562)."""
    if name in __all__:
        return getattr(importlib.import_module("unstuck.guard.guard"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
