"""The import paths of earlier releases keep working after the move into layer folders (issue
24): each old module path is the same module object as its new home, ``unstuck.tools`` holds the
public names of both halves it was split into, and the four folders named like old modules
(guard, loop, toolkit, cli) still give those modules' public names."""

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


def test_the_old_tools_module_holds_the_public_names_of_both_its_halves() -> None:
    old = importlib.import_module("unstuck.tools")
    from unstuck.core import tools as records
    from unstuck.toolkit import specs
    for half in (records, specs):
        for name in half.__all__:
            assert getattr(old, name) is getattr(half, name)


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
