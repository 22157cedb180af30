"""The import paths of earlier releases keep working after the move into layer folders (issue
24): each old module path is the same module object as its new home, an old module that was
split (``unstuck.tools``, ``unstuck.leases``) holds the public names of all its parts, and the four
folders named like old modules (guard, loop, toolkit, cli) still give those modules' public names."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from unstuck.core.aliases import MOVED


@pytest.mark.parametrize("old", sorted(name for name, homes in MOVED.items() if len(homes) == 1))
def test_an_old_module_path_is_its_new_home(old: str) -> None:
    (home,) = MOVED[old]
    assert importlib.import_module(old) is importlib.import_module(home)


@pytest.mark.parametrize("old", sorted(name for name, homes in MOVED.items() if len(homes) > 1))
def test_an_old_module_that_was_split_holds_the_public_names_of_all_its_parts(old: str) -> None:
    merged = importlib.import_module(old)
    for home in MOVED[old]:
        part = importlib.import_module(home)
        for name in part.__all__:
            assert getattr(merged, name) is getattr(part, name), f"{old}.{name}"


#: What ``unstuck.leases`` published before it was split by job (its ``__all__`` before issue 24).
OLD_LEASES = ("DEFAULT_GRACE_S", "DEFAULT_OUTPUT_CAP", "DEFAULT_WINDOW", "LEASE_ENV", "OUTPUT_GRACE_S",
              "OVERFLOW_FACTOR", "TRUNCATION_MARKER", "LeaseOutcome", "LeasedProcess", "descendants",
              "drain_leases", "end_lease", "end_leases", "install_containment", "install_signal_drain",
              "live_leases", "run_leased", "start_lease", "start_supervisor", "stop_supervisor",
              "sweep_leftovers", "tagged", "token_prefix")


def test_the_old_leases_module_still_publishes_every_name_it_did() -> None:
    old = importlib.import_module("unstuck.leases")
    assert set(OLD_LEASES) <= set(old.__all__)
    from unstuck.processes.containment import install_containment
    from unstuck.processes.leases import run_leased
    assert old.run_leased is run_leased and old.install_containment is install_containment


def test_the_documented_imports_of_earlier_releases_still_run_in_a_fresh_process() -> None:
    # What README.md and docs/ showed before the move; run in a new interpreter so nothing
    # imported by this test session helps.
    source = (
        "from unstuck import Guard, run_turn, tool, ToolSpec, ToolResult, classify_result\n"
        "from unstuck.guard import Guard as G2\n"
        "from unstuck.loop import run_turn as r2\n"
        "from unstuck.toolkit import standard_tools\n"
        "from unstuck.tools import ToolSpec as S2, normalize_result\n"
        "from unstuck.policy import PolicyConfig\n"
        "from unstuck.journal import Journal\n"
        "from unstuck.classify import classify_output\n"
        "from unstuck.leases import run_leased, install_containment, LeaseOutcome, sweep_leftovers\n"
        "import unstuck.situations\n"
        "assert G2 is Guard and r2 is run_turn and S2 is ToolSpec\n"
        "assert unstuck.situations.Kind.AUTH.value == 'auth'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_path_that_never_existed_still_fails_to_import() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("unstuck.no_such_module")
