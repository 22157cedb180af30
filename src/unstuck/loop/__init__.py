"""The agent loop: a model and its tools driven through the guard, resuming a journaled turn, the
asker. May import guard and below. The names of the module ``unstuck.loop`` of earlier releases
stay here (from :mod:`unstuck.loop.turn`), imported when first used.
Internal: not a supported import path; use ``unstuck.loop.turn``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unstuck.loop.turn import (
        DEFAULT_SYSTEM_PROMPT,
        Conversation,
        StepRecord,
        TurnResult,
        TurnStatus,
        receipt_of,
        run_turn,
    )

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Conversation",
    "StepRecord",
    "TurnResult",
    "TurnStatus",
    "receipt_of",
    "run_turn",
]


def __getattr__(name: str) -> Any:
    """The old module's public names, from :mod:`unstuck.loop.turn` on first use (PEP 562)."""
    if name in __all__:
        return getattr(importlib.import_module("unstuck.loop.turn"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
