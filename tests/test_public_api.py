"""Each module's ``__all__`` lists exactly its public names (as httpx checks its own)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

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
