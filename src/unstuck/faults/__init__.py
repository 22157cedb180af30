"""Fault injection: the failure bank of observed failures and the injector that draws from it
(seed 003). ``unstuck bank`` and ``unstuck eval --p-inj`` are the command-line side.
Internal: not a supported import path (docs/reference/index.md lists those that are).

The public names load on first use (PEP 562), so ``unstuck.faults.bank`` alone does not load
the injector and the eval's toolkit.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unstuck.faults.bank import (
        FAMILY_KINDS,
        BankError,
        Channel,
        FailureBank,
        FailureForm,
        Family,
        Provenance,
        bundled_bank_path,
        family_of,
        load_bank,
    )
    from unstuck.faults.injector import DEFAULT_P_INJ, Injection, Injector, call_targets

__all__ = [
    "DEFAULT_P_INJ",
    "FAMILY_KINDS",
    "BankError",
    "Channel",
    "FailureBank",
    "FailureForm",
    "Family",
    "Injection",
    "Injector",
    "Provenance",
    "bundled_bank_path",
    "call_targets",
    "family_of",
    "load_bank",
]

_INJECTOR = frozenset({"DEFAULT_P_INJ", "Injection", "Injector", "call_targets"})


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'unstuck.faults' has no attribute {name!r}")
    module = importlib.import_module("unstuck.faults.injector" if name in _INJECTOR else "unstuck.faults.bank")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
