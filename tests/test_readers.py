"""Bounded readers: depth-limited JSON and YAML, head-and-tail streams, and every file reader
of the package refusing a 10^5-deep document with an error naming the file."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from unstuck.core.errors import UnstuckError
from unstuck.core.readers import MAX_DEPTH, ReadError, check_depth, parse_json, parse_yaml, read_head_tail, read_text
from unstuck.core.tools import normalize_result
from unstuck.evals.casebook import CaseError, load_cases
from unstuck.evals.compare import BaselineError, load_baseline
from unstuck.evals.scenarios import ScenarioError, load_scenario
from unstuck.faults.bank import BankError, load_bank
from unstuck.recognise.signals import SignalTableError, load_signal_table

DEEP = 10**5


def test_a_1e5_deep_json_document_is_a_read_error_naming_where() -> None:
    with pytest.raises(ReadError, match=r"^f\.json: nested more than 100 levels deep$"):
        parse_json("[" * DEEP + "]" * DEEP, where="f.json")


def test_a_1e5_deep_yaml_document_flow_or_block_is_a_read_error_naming_where() -> None:
    with pytest.raises(ReadError, match="f.yaml: nested more than"):
        parse_yaml("[" * DEEP + "]" * DEEP, where="f.yaml")
    block = "".join("  " * i + "- \n" for i in range(2 * MAX_DEPTH))
    with pytest.raises(ReadError, match="f.yaml: nested more than"):
        parse_yaml(block, where="f.yaml")


def test_nesting_at_the_limit_reads_and_one_past_it_is_refused() -> None:
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, where="x") is not None
    with pytest.raises(ReadError):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), where="x")


def test_a_yaml_alias_inside_its_own_anchor_is_refused() -> None:
    with pytest.raises(ReadError, match="contains itself"):
        parse_yaml("&a [*a]", where="loop.yaml")


def test_billion_laughs_aliases_are_walked_once_each_and_refused_for_their_expansion() -> None:
    # 2^40 leaves if walked (or serialised) naively; each shared list is measured once
    lines = ["a0: &a0 [x, x]"] + [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 40)]
    with pytest.raises(ReadError, match=r"^laughs.yaml: expands to more than 1000000 values"):
        parse_yaml("\n".join(lines), where="laughs.yaml")
    few = parse_yaml("\n".join(lines[:10]), where="few.yaml")  # 2^10 leaves: a fine document
    assert isinstance(few, dict) and len(few) == 10


def test_a_shared_deep_value_reached_again_deeper_is_still_measured() -> None:
    inner: list[object] = []
    for _ in range(MAX_DEPTH - 5):
        inner = [inner]
    deeper: list[object] = [inner]
    for _ in range(10):
        deeper = [deeper]
    with pytest.raises(ReadError):
        check_depth([inner, deeper], where="shared")


def test_read_text_names_the_file_for_missing_and_non_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ReadError, match=rf"{bad}: not UTF-8 text \(byte 7"):
        read_text(bad)
    with pytest.raises(ReadError, match="cannot read the baseline: No such file"):
        read_text(tmp_path / "none.json", what="the baseline")


@pytest.mark.parametrize(("name", "text", "load", "error"), [
    ("scenario.yaml", "[" * DEEP + "]" * DEEP, load_scenario, ScenarioError),
    ("signals.yaml", "[" * DEEP + "]" * DEEP, lambda p: load_signal_table([p]), SignalTableError),
    ("bank.jsonl", "[" * DEEP + "]" * DEEP, load_bank, BankError),
    ("cases.jsonl", "[" * DEEP + "]" * DEEP, load_cases, CaseError),
    ("baseline.json", '{"runs": ' + "[" * DEEP + "]" * DEEP + "}", load_baseline, BaselineError),
])
def test_every_file_reader_refuses_a_1e5_deep_file_naming_it(
    tmp_path: Path, name: str, text: str, load: object, error: type[UnstuckError],
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(error, match=f"{path}.*nested more than"):
        load(path)  # type: ignore[operator]


def test_guard_state_nested_1e5_deep_is_a_guard_state_error() -> None:
    from unstuck.guard.guard import Guard, GuardStateError
    from unstuck.toolkit.specs import Toolset

    with pytest.raises(GuardStateError, match="saved guard state: nested more than"):
        Guard.from_json("[" * DEEP + "]" * DEEP, Toolset([]), unattended=True)


def test_head_tail_keeps_both_ends_of_a_pipe_and_counts_the_middle() -> None:
    read_end, write_end = os.pipe()
    data = b"H" * 1000 + b"m" * 5_000_000 + b"T" * 100
    pid = os.fork()
    if pid == 0:  # the writer: a real pipe, as stdin would be
        os.close(read_end)
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        kept = read_head_tail(stream, head_bytes=1000, tail_bytes=100)
    os.waitpid(pid, 0)
    assert (kept.head, kept.tail, kept.skipped) == (b"H" * 1000, b"T" * 100, 5_000_000)


def test_head_tail_of_a_short_stream_is_the_whole_stream() -> None:
    kept = read_head_tail(io.BytesIO(b"abc"), head_bytes=10, tail_bytes=10)
    assert (kept.head, kept.tail, kept.skipped) == (b"abc", b"", 0)


def test_a_tool_returning_a_1e5_deep_structure_is_a_failed_result_not_a_raise() -> None:
    deep: list[object] = []
    for _ in range(DEEP):
        deep = [deep]
    result = normalize_result("fetch", deep)
    assert not result.ok and result.error_type == "RecursionError" and "nested too deeply" in result.content


def test_a_tool_returning_an_object_whose_str_raises_is_a_failed_result() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    result = normalize_result("odd", Unprintable())
    assert not result.ok and result.error_type == "RuntimeError" and "Unprintable" in result.content


def test_a_tool_returning_a_list_that_contains_itself_is_a_failed_result() -> None:
    loop: list[object] = []
    loop.append(loop)
    result = normalize_result("loop", loop)
    assert not result.ok and "contains itself" in result.content


def test_a_malformed_declared_situation_still_raises_value_error_naming_the_tool() -> None:
    with pytest.raises(ValueError, match="tool 'gh'"):
        normalize_result("gh", {"situation": {"kind": "no-such-kind", "subject": "gh"}})


def test_a_key_given_twice_in_one_yaml_mapping_is_refused_with_its_line() -> None:
    # YAML 1.2.2 section 3.2.1.1: the keys of a mapping are unique (PyYAML alone keeps the last)
    with pytest.raises(ReadError, match=r"f.yaml: not valid YAML: line 3 column 1: found the key 'agents' twice"):
        parse_yaml("agents: [a]\nname: x\nagents: [b]\n", where="f.yaml")


def test_a_yaml_error_names_the_line_and_column_not_a_unicode_string_stand_in() -> None:
    with pytest.raises(ReadError) as caught:
        parse_yaml("a: 1\nb:\n\tc: 2\n", where="tab.yaml")
    assert str(caught.value).startswith("tab.yaml: not valid YAML: line 3 column 1: ")
    assert "<unicode string>" not in str(caught.value)

