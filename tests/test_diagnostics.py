from __future__ import annotations

from conftest import PlaybackModel
from unstuck.core.clock import VirtualClock
from unstuck.core.tools import ToolCall
from unstuck.loop.turn import run_turn
from unstuck.store.diagnostics import Pattern, repeated_calls
from unstuck.store.events import EventLog, EventName
from unstuck.toolkit.specs import tool


def calls(*specs: tuple[str, dict[str, object]]) -> list[ToolCall]:
    return [ToolCall.of(f"c{i}", name, args) for i, (name, args) in enumerate(specs)]


def test_three_identical_calls_are_repetition() -> None:
    push = ("shell", {"command": "git push"})
    assert repeated_calls(calls(push, push)) is None
    assert repeated_calls(calls(push, push, push)) == Pattern(EventName.DIAGNOSTIC_REPETITION, "shell", 3)


def test_five_calls_to_one_tool_with_changing_arguments_are_a_streak() -> None:
    hunt = [("shell", {"command": f"try {i}"}) for i in range(5)]
    assert repeated_calls(calls(*hunt[:4])) is None
    assert repeated_calls(calls(*hunt)) == Pattern(EventName.DIAGNOSTIC_STREAK, "shell", 5)
    assert repeated_calls(calls(*hunt, ("read_file", {"path": "x"}))) is None


def test_the_loop_records_repetition_without_changing_what_it_does() -> None:
    @tool(subject="git", effect="write")
    def shell(command: str) -> str:
        return "Everything up-to-date"

    replies = [("shell", {"command": "git push"})] * 4 + ["pushed"]
    log = EventLog()
    result = run_turn("push", model=PlaybackModel(replies), tools=[shell], unattended=True, events=log,
                      clock=VirtualClock())
    assert result.status.value == "done" and result.tool_calls == 4
    assert [e.get("calls") for e in log.named("diagnostic.repetition")] == [3, 4]
