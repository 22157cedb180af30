"""Frozen records that are cheap to build: :func:`cheap` (internal).

A frozen dataclass refuses every attribute write in its own ``__setattr__``, so its generated
``__init__`` sets each field through ``object.__setattr__``: in CPython 3.11 that costs about a
thousand machine instructions a field, several times an ordinary attribute store. The records
the guard builds on every tool call (a step of 20 fields, a result of 13, the recovery state
twice, the decision twice, ...) spent more on those writes than on deciding anything.

:func:`cheap` keeps a frozen slots dataclass exactly as it is to every reader (frozen, equal,
hashable, its repr, ``dataclasses.fields`` / ``replace`` / ``asdict``, pickling and copying) and
changes only how an instance is built: on a *twin*, a plain (unfrozen) slots dataclass with the
same fields in the same order, whose generated ``__init__`` stores each field directly; the
built twin then becomes an instance of the frozen class by assigning ``__class__``, which CPython
allows between two classes of the same layout (the Python Language Reference, "Data model",
"Notes on using __slots__": "__class__ assignment works only if both classes have the same
__slots__"; both derive from ``object`` alone). Nothing else sees the twin. A record built so
costs about a quarter of what the frozen ``__init__`` costs.

Only for a class with no ``__post_init__``, no ``InitVar`` and every field an init field (what the
twin's ``__init__`` does is then all the frozen ``__init__`` did), and never subclassed.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

__all__ = ["cheap"]

_R = TypeVar("_R")


def cheap(cls: type[_R]) -> type[_R]:
    """``cls`` (a frozen slots dataclass) built on a twin: see the module doc.

    Raises:
        TypeError: naming ``cls``, when it is not a frozen dataclass with slots, has a
            ``__post_init__``, an ``InitVar`` or a field that is not an init field.
    """
    params = getattr(cls, "__dataclass_params__", None)
    slots = cls.__dict__.get("__slots__")
    if params is None or not params.frozen or slots is None or cls.__bases__ != (object,):
        raise TypeError(f"cheap() takes a frozen slots dataclass with no base class, not {cls.__qualname__}")
    described: Any = cls
    fields = dataclasses.fields(described)
    signature = inspect.signature(cls)
    if hasattr(cls, "__post_init__") or list(signature.parameters) != [f.name for f in fields]:
        raise TypeError(f"cheap() cannot build {cls.__qualname__}: it has a __post_init__, an InitVar or a "
                        "field that is not an init field")
    twin = dataclasses.make_dataclass(
        cls.__name__, [(f.name, f.type, _same_field(f)) for f in fields], slots=True,
        namespace={"__qualname__": cls.__qualname__, "__module__": cls.__module__})  # errors name cls
    if twin.__dict__["__slots__"] != slots:
        raise TypeError(f"cheap() cannot build {cls.__qualname__}: its slots are not its fields")
    names = tuple(f.name for f in fields)

    def build(kind: type[_R], /, *args: Any, **kwargs: Any) -> _R:
        made = twin(*args, **kwargs)
        made.__class__ = kind
        return made  # type: ignore[no-any-return]

    def newargs(record: _R) -> tuple[tuple[()], dict[str, Any]]:
        return (), {name: getattr(record, name) for name in names}  # pickle and copy build a copy as a call would

    def refuse_subclass(subclass: type[Any], /, **_: Any) -> None:
        raise TypeError(f"{cls.__qualname__} is built by cheap() and cannot be subclassed")

    described.__new__ = staticmethod(build)
    described.__getnewargs_ex__ = newargs
    described.__init_subclass__ = classmethod(refuse_subclass)
    del described.__init__  # object.__init__ then: __new__ built it whole
    described.__signature__ = signature
    return cls


def _same_field(f: dataclasses.Field[Any]) -> Any:
    """A field for the twin with ``f``'s default, default factory and keyword-only flag."""
    options: dict[str, Any] = {"kw_only": f.kw_only} if f.kw_only is not dataclasses.MISSING else {}
    if f.default is not dataclasses.MISSING:
        options["default"] = f.default
    if f.default_factory is not dataclasses.MISSING:
        options["default_factory"] = f.default_factory
    return dataclasses.field(**options)
