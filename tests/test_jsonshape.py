"""The shape of a JSON tree (depth and value count) as the bounded readers count it."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from unstuck.core.jsonshape import deeper_than, measure, value_count
from unstuck.core.readers import ReadError, check_depth, parse_json

_TREES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab[]{}",:\\', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="k[{:,", max_size=3), inner, max_size=3),
    max_leaves=40,
)


def _refused(value: object, **limits: int) -> bool:
    try:
        check_depth(value, where="x", **limits)
    except ReadError:
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(_TREES, st.integers(min_value=0, max_value=8))
def test_deeper_than_agrees_with_check_depth_on_json_trees(value: object, levels: int) -> None:
    assert deeper_than(value, levels) == _refused(value, max_depth=levels, max_expanded=10**9)


@settings(max_examples=300, deadline=None)
@given(_TREES)
def test_value_count_is_check_depths_expansion_count_and_at_most_the_text_length(value: object) -> None:
    count = value_count(value)
    assert not _refused(value, max_depth=1000, max_expanded=count)
    if count:
        assert _refused(value, max_depth=1000, max_expanded=count - 1)
    assert count <= len(json.dumps(value, separators=(",", ":")))


class _Dict(dict):  # type: ignore[type-arg]
    """A dict subclass: json.dumps writes it as an object."""


class _List(list):  # type: ignore[type-arg]
    """A list subclass: json.dumps writes it as an array."""


def _dressed(value: object, turn: int = 0) -> object:
    """``value`` with its containers turned, in turn, into tuples and subclasses of dict and list."""
    if isinstance(value, dict):
        kept = {k: _dressed(v, turn + 1) for k, v in value.items()}
        return _Dict(kept) if turn % 2 else kept
    if isinstance(value, list):
        items = [_dressed(v, turn + 1) for v in value]
        return (tuple(items), _List(items), items)[turn % 3]
    return value


@settings(max_examples=300, deadline=None)
@given(_TREES, st.integers(min_value=0, max_value=8))
def test_measure_counts_tuples_and_subclasses_as_check_depth_does(value: object, levels: int) -> None:
    dressed = _dressed(value)
    depth, count = measure(dressed, levels)
    assert (depth > levels) == _refused(dressed, max_depth=levels, max_expanded=10**9)
    if depth <= levels:
        assert count == value_count(value) and not _refused(dressed, max_depth=levels, max_expanded=count)


@settings(max_examples=300, deadline=None)
@given(_TREES, st.integers(min_value=0, max_value=8))
def test_measure_of_a_parsed_document_is_the_same_read_as_parsed(value: object, levels: int) -> None:
    parsed = json.loads(json.dumps(value))
    assert measure(parsed, levels, loaded=True) == measure(parsed, levels)


def test_counted_by_hand() -> None:
    assert value_count({"a": [1, 2]}) == 6  # the object, its key and value, the array as a container, 2 elements
    assert value_count(3) == 0
    assert deeper_than([[1]], 1) and not deeper_than([[1]], 2)
    assert not deeper_than("[[[[", 0)
    # 4 levels (object, array, tuple, the empty object); 5 + 3 + 3 + 1 + 1 values; the walk stops past 1 level
    assert measure({"a": [1, (2, {})], "b": {}}, 5) == (4, 13) and measure([[[1]]], 1) == (2, 2)


def test_parse_json_refuses_a_document_one_level_too_deep_and_keeps_one_at_the_limit() -> None:
    assert parse_json("[" * 100 + "]" * 100, where="f") is not None
    try:
        parse_json("[" * 101 + "]" * 101, where="f.json")
    except ReadError as exc:
        assert str(exc) == "f.json: nested more than 100 levels deep"
    else:
        raise AssertionError("a 101-deep document was read")


def test_parse_json_refuses_more_values_than_the_limit() -> None:
    from unstuck.core import readers

    text = json.dumps([0] * 600_000 + [[0] * 400_001])  # 1 + 600,001 + 1 + 400,001 values
    try:
        readers.parse_json(text, where="big.json")
    except ReadError as exc:
        assert str(exc) == "big.json: expands to more than 1000000 values"
    else:
        raise AssertionError("a document of more than a million values was read")
    assert readers.parse_json(json.dumps([0] * 999_999), where="ok.json") is not None  # 1 + 999,999 values
