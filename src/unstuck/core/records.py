"""Frozen records that are cheap to build: :func:`cheap`.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A frozen dataclass refuses every attribute write in its own ``__setattr__``, so its generated
``__init__`` sets each field through ``object.__setattr__``: in CPython 3.11 that costs about a
thousand machine instructions a field, many times an ordinary attribute store. The records the
guard builds on every tool call (a step of 20 fields, a result of 13, the recovery state twice,
the decision twice, ...) cost more to build than most of what decides the call.

:func:`cheap` keeps a frozen slots dataclass exactly as it is to every reader (frozen, equal,
hashable, its repr, ``dataclasses.fields`` / ``replace`` / ``asdict``, its signature, pickling
and copying) and changes only how an instance is built: as an instance of a *twin*, a plain
class with the same ``__slots__`` and no ``__setattr__`` of its own, whose fields are stored
directly, which then becomes an instance of the frozen class by assigning ``__class__``:
CPython allows that between two classes of the same layout (the Python Language Reference,
"Data model", "Notes on using __slots__": "__class__ assignment works only if both classes have
the same __slots__"; both have the same bases). Nothing else ever sees the twin. The
class's ``__new__`` does it all, made (as ``dataclasses`` makes ``__init__``) with the
parameters of the dataclass's own ``__init__``, defaults and default factories included; a
record built so costs a fraction of the frozen ``__init__``.

Only for a class with no ``__post_init__``, no ``InitVar`` and every field an init field (storing
the arguments is then all the frozen ``__init__`` did), never subclassed, and whose bases (if
any) are plain classes with ``__slots__`` of their own and no ``__setattr__`` or ``__new__``
(room for text a record derives from its fields, say: the twin shares them, and those slots
stay unset as the frozen ``__init__`` leaves them).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

__all__ = ["cheap"]

_R = TypeVar("_R")


class _Factory:
    """The default of a parameter whose field has a default factory (called for each record)."""

    def __repr__(self) -> str:
        return "<factory>"


def cheap(cls: type[_R]) -> type[_R]:
    """``cls`` (a frozen slots dataclass) built through a twin: see the module doc.

    Raises:
        TypeError: naming ``cls``, when it is not a frozen slots dataclass, a base of it is not
            a plain class with slots (see the module doc), or it has a ``__post_init__``, an
            ``InitVar`` or a field that is not an init field.
    """
    params = getattr(cls, "__dataclass_params__", None)
    slots = cls.__dict__.get("__slots__")
    if params is None or not params.frozen or slots is None or not all(_plain_base(base) for base in cls.__mro__[1:-1]):
        raise TypeError(f"cheap() takes a frozen slots dataclass whose bases are plain slotted classes, not "
                        f"{cls.__qualname__}")
    described: Any = cls
    fields = dataclasses.fields(described)
    signature = inspect.signature(cls)
    names = [f.name for f in fields]
    if hasattr(cls, "__post_init__") or list(signature.parameters) != names or tuple(slots) != tuple(names):
        raise TypeError(f"cheap() cannot build {cls.__qualname__}: it has a __post_init__, an InitVar or a "
                        "field that is not an init field")
    twin = type(cls.__name__, cls.__bases__,
                {"__slots__": slots, "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    described.__new__ = staticmethod(_new_function(cls, twin, fields, signature))
    described.__getnewargs_ex__ = lambda record: ((), {name: getattr(record, name) for name in names})  # pickle, copy
    described.__init_subclass__ = classmethod(_refuse_subclass)
    del described.__init__  # object.__init__ then: __new__ built the record whole
    described.__signature__ = signature
    return cls


def _new_function(cls: type[Any], twin: type[Any], fields: tuple[dataclasses.Field[Any], ...],
                  signature: inspect.Signature) -> Any:
    """``__new__(cls, <the fields as the dataclass's __init__ takes them>)``: a twin, each
    field stored, then made a ``cls``. Its ``__qualname__`` is ``__init__``'s, so an error in
    a call names ``cls.__init__`` as before."""
    factory = _Factory()
    # the names the function reads besides its parameters, spelled as no field is
    scope: dict[str, Any] = {"__records_new__": object.__new__, "__records_twin__": twin,
                             "__records_factory__": factory}
    parameters: list[str] = []
    body: list[str] = []
    keyword_only = False
    for f, parameter in zip(fields, signature.parameters.values(), strict=True):
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and not keyword_only:
            parameters.append("*")
            keyword_only = True
        if f.default_factory is not dataclasses.MISSING:
            scope[f"__records_make_{f.name}__"] = f.default_factory
            parameters.append(f"{f.name}=__records_factory__")
            body.append(f"    if {f.name} is __records_factory__:\n        {f.name} = __records_make_{f.name}__()")
        elif f.default is not dataclasses.MISSING:
            scope[f"__records_default_{f.name}__"] = f.default
            parameters.append(f"{f.name}=__records_default_{f.name}__")
        else:
            parameters.append(f.name)
    lines = [f"def __new__(__record_class__, {', '.join(parameters)}):", *body,
             "    __record__ = __records_new__(__records_twin__)",
             *(f"    __record__.{f.name} = {f.name}" for f in fields),
             "    __record__.__class__ = __record_class__", "    return __record__"]
    source = "\n".join(lines) + "\n"
    exec(source, scope)  # as dataclasses makes __init__: the parameters spelled out, no *args to unpack
    made = scope["__new__"]
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    made.__module__ = cls.__module__
    return made


def _plain_base(base: type[Any]) -> bool:
    """A base a twin may share: slotted, no dataclass, and no ``__setattr__`` or ``__new__`` of its own."""
    own = base.__dict__
    return ("__slots__" in own and "__dataclass_fields__" not in own and "__setattr__" not in own
            and "__new__" not in own)


def _refuse_subclass(subclass: type[Any], /, **_: Any) -> None:
    raise TypeError(f"{subclass.__mro__[1].__qualname__} is built by cheap() and cannot be subclassed")
