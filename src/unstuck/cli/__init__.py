"""The command line: one module per command group over one shared console. May import every layer.
The names of the module ``unstuck.cli`` of earlier releases stay here (from
:mod:`unstuck.cli.app`), imported when first used.
Internal: not a supported import path (docs/reference/index.md lists those that are).

The supported face of the command line is its commands and options (``docs/cli.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unstuck.cli.app import (
        app,
        main,
    )

__all__ = [
    "app",
    "main",
]


def __getattr__(name: str) -> Any:
    """The old module's public names, from :mod:`unstuck.cli.app` on first use (PEP 562)."""
    if name in __all__:
        return getattr(importlib.import_module("unstuck.cli.app"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
