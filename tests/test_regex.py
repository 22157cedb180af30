"""Patterns compiled on first use (unstuck.core.regex.LazyRegex)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import re2

import unstuck
from unstuck.core.regex import LazyRegex


def test_a_lazy_pattern_compiles_on_first_use_and_then_answers_as_the_compiled_one() -> None:
    lazy = LazyRegex(r"(\d+) apples")
    assert "_compiled" not in vars(lazy)
    found = lazy.search("we have 12 apples")
    assert found is not None and found.group(1) == "12"
    assert "_compiled" in vars(lazy) and lazy.groups == 1
    compiled = re2.compile(r"(\d+) apples")
    text = "1 apples, 22 apples"
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in compiled.finditer(text)]
    assert lazy.sub("x", text) == compiled.sub("x", text)
    assert lazy.fullmatch("3 apples") is not None and lazy.match("no apples") is None


def test_a_lazy_pattern_re2_refuses_raises_on_first_use() -> None:
    lazy = LazyRegex(r"(a)\1")  # a backreference: re2 has none
    with pytest.raises(re2.error):
        lazy.search("aa")


def test_every_module_level_lazy_pattern_of_the_package_compiles() -> None:
    """Each module's own patterns compile when first used; here every one is compiled."""
    seen = 0
    for info in pkgutil.walk_packages(unstuck.__path__, "unstuck."):
        if info.name.endswith("__main__") or info.name.startswith(
                ("unstuck.integrations.", "unstuck.evals.", "unstuck.mining.")):
            continue  # the command line's entry, and optional frameworks: none keeps a LazyRegex
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, LazyRegex):
                assert value.compiled is not None, f"{info.name}.{name}"
                seen += 1
    assert seen >= 40  # the screen's and the credential catalogue's patterns


def test_every_pattern_of_the_bundled_interpreter_table_compiles() -> None:
    """The bundled table's patterns compile on first use (the screen reads only its options);
    here every one is compiled, as a user's table is when it is read."""
    from unstuck.commands.interpreters import interpreter_table

    seen = 0
    for interpreter in interpreter_table().values():
        patterns = [*interpreter.env_unset, *interpreter.file_write, *interpreter.command_run,
                    *(p for write in interpreter.env_write for p in (write.pattern, write.keys) if p is not None)]
        for pattern in patterns:
            assert isinstance(pattern, LazyRegex) and pattern.compiled is not None, interpreter.source
            seen += 1
    assert seen > 40
