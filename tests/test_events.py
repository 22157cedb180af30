"""Reading an events file back."""

from __future__ import annotations

from pathlib import Path

from unstuck.store.events import EventName, JsonLinesSink, event, read_events


def test_events_written_as_json_lines_read_back_and_bad_lines_are_numbered(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    written = [event(EventName.TURN_STARTED, "t1", 0.0, task="x"), event(EventName.BLOCKER_OPENED, "t1", 0.25, subject="gh")]
    for item in written:
        sink.emit(item)
    sink.close()
    with path.open("a", encoding="utf-8") as handle:
        handle.write("not json\n{\"event\": \"x\"}\n")
    read, bad = read_events(path)
    assert read == written and bad == [3, 4]


def test_a_line_nested_past_the_stack_is_a_bad_line_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    good = '{"event": "turn.started", "turn": "t1", "at_s": 0.0}'
    path.write_text(f"{good}\n{deep}\n{{\"event\": {deep}}}\n{good}\n", encoding="utf-8")
    found, bad = read_events(path)
    assert [e.name for e in found] == ["turn.started", "turn.started"] and bad == [2, 3]
