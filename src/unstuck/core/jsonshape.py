"""The shape of a JSON value (what ``json.loads`` returns, or what ``json.dumps`` accepts): how
deeply its containers nest and how many values it holds, found in one lean walk.
Internal: not a supported import path (docs/reference/index.md lists those that are).

:func:`unstuck.core.readers.check_depth` answers the same questions for any value, YAML's
included, whose aliases can share one container many times over or make it contain itself;
it keeps a table of every container it met, which for a 1,000-step saved guard state cost
fifteen times the parse (60 ms against 4 ms). A JSON document is a tree (no container is
shared, none contains itself), so these walks keep only a stack: a few milliseconds for the
same state. Neither recurses, so no depth gives a ``RecursionError``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["deeper_than", "value_count"]

#: The containers ``json.dumps`` writes (subclasses included): ``dict`` as an object, ``list``
#: and ``tuple`` as an array. ``json.loads`` returns only ``dict`` and ``list``.
_CONTAINERS = (dict, list, tuple)


def deeper_than(value: object, levels: int) -> bool:
    """Whether the containers of the JSON tree ``value`` nest more than ``levels`` deep (a
    scalar nests 0 levels, a flat array or object 1, an array of arrays 2...).

    ``value`` must be a tree: a container inside itself is walked until ``levels + 1``."""
    if not isinstance(value, _CONTAINERS):
        return False
    stack: list[tuple[object, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, level = pop()
        if level > levels:
            return True
        for child in (node.values() if isinstance(node, dict) else node):  # type: ignore[attr-defined]
            if isinstance(child, _CONTAINERS):
                push((child, level + 1))
    return False


def value_count(value: object) -> int:
    """How many values the JSON tree ``value`` holds, counted as
    :func:`unstuck.core.readers.check_depth` counts them: each container once, and each array
    element and each object key and value once more (``{"a": [1, 2]}`` holds 6: the object,
    its key and its value, the array once more as a container, its two elements; a scalar 0).
    A document of N characters holds at most N values so counted."""
    if not isinstance(value, _CONTAINERS):
        return 0
    total = 0
    stack: list[dict[Any, Any] | list[Any] | tuple[Any, ...]] = [value]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        children = node.values() if isinstance(node, dict) else node
        total += 1 + (2 if isinstance(node, dict) else 1) * len(children)
        for child in children:
            if isinstance(child, _CONTAINERS):
                push(child)
    return total
