"""Fault injection: the failure bank of observed failures and the injector that draws from it
(seed 003). ``unstuck bank`` and ``unstuck eval --p-inj`` are the command-line side."""

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
