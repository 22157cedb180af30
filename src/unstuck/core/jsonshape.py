"""The shape of a JSON value (what ``json.loads`` returns, or what ``json.dumps`` accepts): how
deeply its containers nest and how many values it holds, found in one walk, level by level.
Internal: not a supported import path (docs/reference/index.md lists those that are).

:func:`unstuck.core.readers.check_depth` answers the same questions for any value, YAML's
included, whose aliases can share one container many times over or make it contain itself;
it keeps a table of every container it met, which for a 1,000-step saved guard state cost
fifteen times the parse (60 ms against 4 ms). A JSON document is a tree (no container is
shared, none contains itself), so :func:`measure` keeps only the containers of one level:
each level's values are gathered, typed and sorted into the next level's containers by the
interpreter's own iterators (``map``, ``itertools.chain`` and ``itertools.compress``), with
no Python code run per value, about a millisecond for that state. Nothing recurses, so no
depth gives a ``RecursionError``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from itertools import chain, compress
from typing import Any

__all__ = ["deeper_than", "measure", "value_count"]

#: The containers ``json.dumps`` writes (subclasses included): ``dict`` as an object, ``list``
#: and ``tuple`` as an array. ``json.loads`` returns only ``dict`` and ``list``.
_CONTAINERS = (dict, list, tuple)

#: Types a value of a JSON tree usually has: scalars and the exact containers. A value of
#: another type (a subclass of ``dict``, ``list``, ``tuple``...) is looked at on its own.
_PLAIN = frozenset({str, int, float, bool, type(None), dict, list, tuple})
_IS_CONTAINER = frozenset({dict, list, tuple}).__contains__
_IS_DICT = frozenset({dict}).__contains__
_IS_ARRAY = frozenset({list, tuple}).__contains__


def measure(value: object, levels: int, *, loaded: bool = False) -> tuple[int, int]:
    """How deeply the containers of the JSON tree ``value`` nest, and how many values it holds,
    walking at most ``levels + 1`` levels: ``(depth, count)``.

    ``depth``: a scalar nests 0 levels, a flat array or object 1, an array of arrays 2...;
    once it passes ``levels`` the walk stops there (``depth == levels + 1``, and ``count``
    holds only the levels walked). ``count`` is what
    :func:`unstuck.core.readers.check_depth` counts: each container once, and each array
    element and each object key and value once more (``{"a": [1, 2]}`` holds 6). A
    document of N characters holds at most N values so counted.

    ``loaded``: ``value`` is what ``json.loads`` returned (no hooks), so every value is a
    ``str``, ``int``, ``float``, ``bool``, ``None``, ``dict`` or ``list``, none a subclass,
    and the walk need not look for one. ``value`` must be a tree: a container inside itself
    is walked until ``levels + 1``. Memory: the values of one level at a time."""
    objects: list[Any] = []
    arrays: list[Any] = []
    _sort_odd([value], objects, arrays)
    depth = count = 0
    while objects or arrays:
        depth += 1
        if depth > levels:
            break
        count += len(objects) + len(arrays) + 2 * sum(map(len, objects)) + sum(map(len, arrays))
        # the level's values, gathered twice (cheaper than keeping them): typed, then the containers taken
        found = list(compress(_values(objects, arrays), map(_IS_CONTAINER, map(type, _values(objects, arrays)))))
        odd = [] if loaded or _PLAIN.issuperset(map(type, _values(objects, arrays))) else [
            v for v in _values(objects, arrays) if type(v) not in _PLAIN]
        kinds = list(map(type, found))
        objects = list(compress(found, map(_IS_DICT, kinds)))
        arrays = list(compress(found, map(_IS_ARRAY, kinds)))
        _sort_odd(odd, objects, arrays)
    return depth, count


def _values(objects: list[Any], arrays: list[Any]) -> Iterator[Any]:
    """The values of one level: each object's values, then each array's elements."""
    return chain(chain.from_iterable(map(dict.values, objects)), chain.from_iterable(arrays))


def _sort_odd(values: list[Any], objects: list[Any], arrays: list[Any]) -> None:
    """Add the containers among ``values`` (of types not sorted by type alone: subclasses)
    to ``objects`` or ``arrays``, by ``isinstance``, as ``json.dumps`` writes them."""
    for item in values:
        if isinstance(item, dict):
            objects.append(item)
        elif isinstance(item, list | tuple):
            arrays.append(item)


def deeper_than(value: object, levels: int) -> bool:
    """Whether the containers of the JSON tree ``value`` nest more than ``levels`` deep (a
    scalar nests 0 levels, a flat array or object 1, an array of arrays 2...; :func:`measure`).

    ``value`` must be a tree: a container inside itself is walked until ``levels + 1``."""
    if not isinstance(value, _CONTAINERS):
        return False
    return measure(value, levels)[0] > levels


def value_count(value: object) -> int:
    """How many values the JSON tree ``value`` holds, counted as
    :func:`unstuck.core.readers.check_depth` counts them: each container once, and each array
    element and each object key and value once more (``{"a": [1, 2]}`` holds 6: the object,
    its key and its value, the array once more as a container, its two elements; a scalar 0).
    A document of N characters holds at most N values so counted. ``value`` must be a tree."""
    return measure(value, sys.maxsize)[1]
