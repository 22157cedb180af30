"""A google-re2 pattern compiled on first use: what a module keeps at module level when a
process may never read it.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A module of command-line rules holds dozens of patterns (the screen's ``sed`` and ``awk``
shapes, the credential shapes); compiling them all when the module is imported costs
milliseconds at the start of every process, though most processes read a handful. A
:class:`LazyRegex` compiles its pattern the first time one of its attributes is read and from
then on holds the compiled pattern's methods itself, so a later ``search`` costs what it costs
on the compiled pattern.

Only for patterns written in the source (the test suite compiles every module-level one): a
pattern from a user's file is compiled where it is read, so a pattern re2 refuses is an error
at load.
"""

from __future__ import annotations

from typing import Any

import re2

__all__ = ["LazyRegex"]

#: What a compiled pattern offers and a :class:`LazyRegex` keeps once compiled.
_KEPT = ("search", "match", "fullmatch", "finditer", "findall", "split", "subn", "sub", "groups", "groupindex",
         "pattern", "options", "programsize")


class LazyRegex:
    """``re2.compile(pattern, options)``, done when an attribute is first read.

    Reading any attribute of the compiled pattern (``search``, ``sub``, ``groups`` ...)
    compiles it (once; two threads compiling at once compile equal patterns).

    Raises:
        re2.error: on first use, when re2 refuses the pattern (a defect of the source).
    """

    def __init__(self, pattern: str | bytes, options: Any = None) -> None:
        self._source = pattern
        self._flags = options

    @property
    def compiled(self) -> Any:
        """The compiled pattern (compiled now if it was not yet)."""
        found = self.__dict__.get("_compiled")
        if found is None:
            found = re2.compile(self._source, self._flags)
            for name in _KEPT:  # later reads find them on the instance: no second lookup
                self.__dict__[name] = getattr(found, name)
            self.__dict__["_compiled"] = found
        return found

    def __getattr__(self, name: str) -> Any:  # only for what the instance does not hold yet
        if name.startswith("__") or name in ("_source", "_flags", "_compiled"):
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def __repr__(self) -> str:
        return f"LazyRegex({self._source!r})"
