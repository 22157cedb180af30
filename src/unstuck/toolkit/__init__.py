"""Tools and models as the guard sees them: tool specs and the tool decorator, messages and the
model protocol, the standard tools of a workspace. May import processes, recognise, commands and
core. The names of the module ``unstuck.toolkit`` of earlier releases stay here (from
:mod:`unstuck.toolkit.workspace`), imported when first used.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unstuck.toolkit.workspace import (
        KNOWN_CLIS,
        OUTPUT_GRACE_S,
        STANDARD_TOOL_NAMES,
        TIMEOUT_EXIT_CODE,
        CliFacts,
        Workspace,
        check_cli,
        cli_fingerprint,
        command_subject,
        install,
        needs_a_person,
        path_words,
        sign_in,
        standard_tools,
    )

__all__ = [
    "KNOWN_CLIS",
    "OUTPUT_GRACE_S",
    "STANDARD_TOOL_NAMES",
    "TIMEOUT_EXIT_CODE",
    "CliFacts",
    "Workspace",
    "check_cli",
    "cli_fingerprint",
    "command_subject",
    "install",
    "needs_a_person",
    "path_words",
    "sign_in",
    "standard_tools",
]


def __getattr__(name: str) -> Any:
    """The old module's public names, from :mod:`unstuck.toolkit.workspace` on first use (PEP 562)."""
    if name in __all__:
        return getattr(importlib.import_module("unstuck.toolkit.workspace"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
