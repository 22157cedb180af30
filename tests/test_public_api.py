"""Each module's ``__all__`` lists exactly its public names (as httpx checks its own)."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import unstuck

MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(unstuck.__path__, "unstuck.") if not name.endswith("__main__")
)


@pytest.mark.parametrize("module_name", MODULES)
def test_all_lists_exactly_the_public_names_defined_here(module_name: str) -> None:
    module = importlib.import_module(module_name)
    declared = set(getattr(module, "__all__", ()))
    defined = {
        name for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == module_name
    }
    assert defined <= declared, f"public but not in __all__: {sorted(defined - declared)}"
    missing = {name for name in declared if not hasattr(module, name)}
    assert not missing, f"in __all__ but not defined: {sorted(missing)}"


def test_package_exports_are_importable_and_sorted() -> None:
    assert unstuck.__all__ == sorted(unstuck.__all__)
    for name in unstuck.__all__:
        assert hasattr(unstuck, name)


def _type_checking_imports() -> dict[str, str]:
    """What the ``if TYPE_CHECKING:`` block of ``unstuck/__init__.py`` imports: name → module
    (each import must keep its own name, ``X as X``, the explicit re-export of PEP 484)."""
    tree = ast.parse(Path(unstuck.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None, ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"{ast.unparse(node)}: write it `{alias.name} as {alias.name}`"
            found[alias.name] = node.module
    return found


def test_the_public_face_is_one_table_the_type_checking_imports_and_all_agree_with() -> None:
    table: dict[str, str] = unstuck._PUBLIC  # type: ignore[attr-defined]
    assert _type_checking_imports() == table
    assert unstuck.__all__ == sorted(["__version__", *table])
    for name, module in table.items():
        assert getattr(unstuck, name) is getattr(importlib.import_module(module), name), name


def test_import_unstuck_imports_none_of_the_modules_behind_its_names() -> None:
    code = "import sys, unstuck; print(sorted(m for m in sys.modules if m.startswith('unstuck')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert loaded.stdout.split() == ["['unstuck',", "'unstuck.core',", "'unstuck.core.aliases']"]


@pytest.mark.slow
def test_mypy_strict_reads_the_package_names_with_their_types(tmp_path: Path) -> None:
    user = tmp_path / "use.py"
    user.write_text("from unstuck import Guard, run_turn\n\nguard: type[Guard] = Guard\nreveal_type(run_turn)\n",
                    encoding="utf-8")
    checked = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                              str(user)],
                             capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
                             env={**os.environ, "MYPYPATH": str(Path(unstuck.__file__).parents[1])})
    assert checked.returncode == 0, checked.stdout
    assert "def (task: str" in checked.stdout and "TurnResult" in checked.stdout
