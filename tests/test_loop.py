from __future__ import annotations

import re
from typing import Any

import pytest

from conftest import PlaybackModel
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind
from unstuck.loop.presence import Answer, ScriptedAsker
from unstuck.loop.turn import TurnResult, TurnStatus
from unstuck.loop.turn import run_turn as _run_turn
from unstuck.store.events import EventLog
from unstuck.toolkit.models import ModelError, Role
from unstuck.toolkit.specs import ToolSpec, tool


def run_turn(*args: Any, **kwargs: Any) -> TurnResult:
    """The loop on a virtual clock, so the retries of transient failures cost no wall time."""
    kwargs.setdefault("clock", VirtualClock())
    return _run_turn(*args, **kwargs)


class FakeCli:
    """A CLI whose sign-in state a test flips; its tools are plain functions."""

    def __init__(self) -> None:
        self.signed_in = False
        self.sign_in_attempts = 0

    def tools(self) -> list[ToolSpec]:
        @tool(subject=lambda a: a.get("name"))
        def check(name: str) -> dict[str, Any]:
            if self.signed_in:
                return {"status": "success", "signed_in": True}
            return {"status": "error", "situation": {
                "kind": "auth", "subject": name, "interactive": True, "unblock": f"{name} auth login",
                "probe": {"tool": "check", "args": {"name": name}},
            }}

        @tool(interactive=True, effect="write", subject=lambda a: a.get("name"))
        def sign_in(name: str) -> str:
            self.sign_in_attempts += 1
            raise TimeoutError("nobody approved the browser sign-in")

        @tool(subject=lambda a: str(a.get("command", "")).split()[0], effect="write")
        def shell(command: str) -> str:
            if command.startswith("cli ") and not self.signed_in:
                raise PermissionError("authentication required")
            if command.startswith("curl"):
                raise ConnectionRefusedError(111, "Connection refused")
            return f"ran {command}"

        return [check, sign_in, shell]


def test_improvising_agent_is_stopped_and_asked_with_the_exact_unblock() -> None:
    cli = FakeCli()
    model = PlaybackModel([
        ("check", {"name": "cli"}), ("sign_in", {"name": "cli"}), ("shell", {"command": "curl api"}),
        ("shell", {"command": "cli view"}), ("shell", {"command": "curl other"}),
    ])
    log = EventLog()
    result = run_turn("view the repo", model=model, tools=cli.tools(), unattended=True, events=log,
                      clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED
    assert result.escalation is not None and "cli auth login" in result.escalation.text
    assert result.answer == result.escalation.text
    assert cli.sign_in_attempts == 0, "the interactive tool must never run unattended"
    assert result.tool_calls == 4 and result.refused_calls == 1
    assert [e.name for e in log.named("blocker.opened")] == ["blocker.opened"]
    assert len(log.named("budget.charged")) == 3
    _, closing_tools = model.requests[-1]
    assert closing_tools == (), "the closing call withholds tools"
    assert result.escalation.next_step == "I will retry the task."


def test_model_ending_the_turn_while_a_blocker_is_open_is_blocked_not_done() -> None:
    cli = FakeCli()
    model = PlaybackModel([("check", {"name": "cli"}), "I cannot continue without you."])
    result = run_turn("view the repo", model=model, tools=cli.tools(), unattended=True)
    assert result.status is TurnStatus.BLOCKED and result.status is not TurnStatus.DONE
    assert result.escalation is not None and result.escalation.subject == "cli"


def test_recovery_prompt_reaches_the_model_with_the_tool_result() -> None:
    cli = FakeCli()
    model = PlaybackModel([("check", {"name": "cli"}), "stop"])
    run_turn("t", model=model, tools=cli.tools(), unattended=True)
    messages, _ = model.requests[1]
    tool_message = messages[-1]
    assert tool_message.role is Role.TOOL and re.search(r"\[unstuck [0-9a-f]{16}\] BLOCKED: cli", tool_message.content)
    assert '"status": "error"' in tool_message.content


def test_failed_closing_call_ships_the_first_two_parts_with_the_error() -> None:
    cli = FakeCli()
    model = PlaybackModel([("check", {"name": "cli"}), "stop"], closing=ModelError("server said 500"))
    result = run_turn("view the repo", model=model, tools=cli.tools(), unattended=True)
    assert result.escalation is not None
    text = result.escalation.text
    assert "Blocked: cli is not signed in" in text and "Run: cli auth login" in text
    assert "server said 500" in text and result.escalation.closing_error is not None


def test_malformed_declaration_raises_naming_the_tool_and_keeps_recorded_events() -> None:
    @tool
    def broken() -> dict[str, Any]:
        return {"status": "error", "situation": {"kind": "logged_out", "subject": "x"}}

    log = EventLog()
    with pytest.raises(ValueError, match="'broken'.*unknown kind 'logged_out'"):
        run_turn("t", model=PlaybackModel([("broken", {})]), tools=[broken], unattended=True, events=log)
    assert [e.name for e in log][:2] == ["turn.started", "tool.called"]


def test_model_failure_ends_the_turn_failed_with_the_error() -> None:
    result = run_turn("t", model=PlaybackModel([ModelError("garbage: tool call arguments are not JSON")]),
                      tools=FakeCli().tools(), unattended=True)
    assert result.status is TurnStatus.FAILED and "not JSON" in (result.error or "")


def test_unknown_tool_is_an_invalid_args_result_and_the_turn_goes_on() -> None:
    model = PlaybackModel([("teleport", {}), "done anyway"])
    result = run_turn("t", model=model, tools=FakeCli().tools(), unattended=True)
    assert result.status is TurnStatus.DONE
    assert result.steps[0].situation is not None and result.steps[0].situation.kind is Kind.INVALID_ARGS
    assert "No tool named 'teleport'" in result.steps[0].content


def test_a_tool_the_task_names_but_the_tool_set_lacks_is_a_not_installed_blocker() -> None:
    # incident i037: the instructed MCP tool was absent because its server failed to start
    task = "Post the comment with mcp_github_add_issue_comment."
    model = PlaybackModel([("mcp_github_add_issue_comment", {"body": "x"})])
    result = run_turn(task, model=model, tools=FakeCli().tools(), unattended=True)
    situation = result.steps[0].situation
    assert situation is not None and situation.kind is Kind.NOT_INSTALLED
    assert situation.subject == "mcp_github_add_issue_comment" and not situation.retryable
    assert result.steps[0].opened == ("mcp_github_add_issue_comment",)  # a blocker: the workaround budget applies
    assert "No tool named 'mcp_github_add_issue_comment'" in result.steps[0].content


@pytest.mark.parametrize("task", ["Please search the notes for the key.", "Do not use search; read the notes."])
def test_a_plain_word_of_the_task_is_not_a_tool_the_task_names(task: str) -> None:
    model = PlaybackModel([("search", {}), "done anyway"])
    result = run_turn(task, model=model, tools=FakeCli().tools(), unattended=True)
    assert result.steps[0].situation is not None and result.steps[0].situation.kind is Kind.INVALID_ARGS


def test_a_tool_the_task_names_asks_for_the_tool_not_an_install() -> None:
    model = PlaybackModel([("MCP_Jira_Create", {})])
    result = run_turn("Open the ticket with mcp_jira_create.", model=model, tools=FakeCli().tools(), unattended=True)
    situation = result.steps[0].situation
    assert situation is not None and situation.kind is Kind.NOT_INSTALLED
    assert situation.unblock is not None and situation.unblock.startswith("Make the tool MCP_Jira_Create available")


def test_a_tool_name_that_is_only_part_of_a_word_in_the_task_is_still_an_invention() -> None:
    model = PlaybackModel([("comment", {}), "done anyway"])
    result = run_turn("Post the comment_draft as is.", model=model, tools=FakeCli().tools(), unattended=True)
    assert result.steps[0].situation is not None and result.steps[0].situation.kind is Kind.INVALID_ARGS
    assert result.steps[0].opened == ()


def test_step_limit_fails_the_turn() -> None:
    model = PlaybackModel([("shell", {"command": "echo hi"})] * 10)
    result = run_turn("t", model=model, tools=FakeCli().tools(), unattended=True, max_steps=3)
    assert result.status is TurnStatus.FAILED and "step limit" in (result.error or "")


def test_attended_done_runs_the_probe_and_continues_when_clean() -> None:
    cli = FakeCli()

    class SignsInThenAnswers(ScriptedAsker):
        def ask(self, escalation: Any, *, note: str | None = None) -> Answer:
            cli.signed_in = True  # the person signs in at their own keyboard
            return super().ask(escalation, note=note)

    asker = SignsInThenAnswers([Answer.DONE])
    model = PlaybackModel([("check", {"name": "cli"}), "need you", ("shell", {"command": "cli view"}), "viewed"])
    result = run_turn("view", model=model, tools=cli.tools(), unattended=False, asker=asker)
    assert result.status is TurnStatus.DONE and result.answer == "viewed"
    probes = [s for s in result.steps if s.probe]
    assert len(probes) == 1 and probes[0].ok and probes[0].closed == ("cli",)
    assert len(asker.asked) == 1


def test_attended_done_with_a_dirty_probe_asks_again_then_stop_ends_blocked() -> None:
    cli = FakeCli()
    notes: list[str | None] = []

    class Recording(ScriptedAsker):
        def ask(self, escalation: Any, *, note: str | None = None) -> Answer:
            notes.append(note)
            return super().ask(escalation, note=note)

    result = run_turn("view", model=PlaybackModel([("check", {"name": "cli"}), "need you"]), tools=cli.tools(),
                      unattended=False, asker=Recording([Answer.DONE, Answer.STOP]))
    assert result.status is TurnStatus.BLOCKED
    assert notes[0] is None and notes[1] is not None and "still blocked" in notes[1]


def test_attended_skip_refuses_further_calls_on_the_subject() -> None:
    cli = FakeCli()
    model = PlaybackModel([("check", {"name": "cli"}), "need you", ("check", {"name": "cli"}), "left undone"])
    result = run_turn("view", model=model, tools=cli.tools(), unattended=False, asker=ScriptedAsker([Answer.SKIP]))
    assert result.status is TurnStatus.DONE
    last = result.steps[-1]
    assert not last.dispatched and "skip" in last.content


def test_attended_run_dispatches_interactive_tools() -> None:
    cli = FakeCli()
    model = PlaybackModel([("sign_in", {"name": "cli"}), "gave up"])
    run_turn("t", model=model, tools=cli.tools(), unattended=False, asker=ScriptedAsker([]))
    assert cli.sign_in_attempts == 1


def test_unguarded_loop_runs_everything_and_never_escalates() -> None:
    cli = FakeCli()
    calls = [("check", {"name": "cli"}), ("sign_in", {"name": "cli"})] + [("shell", {"command": "curl x"})] * 6
    model = PlaybackModel([*calls, "I give up"])
    result = run_turn("t", model=model, tools=cli.tools(), unattended=True, guarded=False)
    assert result.status is TurnStatus.DONE and result.escalation is None
    assert cli.sign_in_attempts == 1 and result.tool_calls == 8
    assert all("[unstuck" not in m.content for m in result.messages if m.role is Role.TOOL)


def test_cost_line_counts_steps_and_seconds_after_the_blocker() -> None:
    cli = FakeCli()
    clock = VirtualClock(follow_real_time=False)

    @tool(subject="sleepy")
    def slow() -> str:
        clock.advance(30)
        raise RuntimeError("gave up after 30 s")

    model = PlaybackModel([("check", {"name": "cli"}), ("slow", {}), ("slow", {}), ("slow", {})])
    result = run_turn("t", model=model, tools=[*cli.tools(), slow], unattended=True, clock=clock)
    assert result.cost_line == "3 steps · 90 s after cli was blocked, before asking"


def test_answer_after_routing_around_a_blocker_is_done_and_reports_the_open_blocker() -> None:
    cli = FakeCli()
    model = PlaybackModel([("check", {"name": "cli"}), ("shell", {"command": "cat local-clone/README"}),
                           "The description is in the local clone: a CLI."],
                          confirm="Yes: the local clone's README has the description.")
    result = run_turn("describe", model=model, tools=cli.tools(), unattended=True)
    assert result.status is TurnStatus.DONE and result.escalation is None
    assert result.answer.startswith("The description is in the local clone")
    assert result.open_blockers == ("cli",)


def test_interrupt_ends_the_turn_interrupted_with_its_record() -> None:
    @tool
    def hang() -> str:
        raise KeyboardInterrupt

    log = EventLog()
    result = run_turn("t", model=PlaybackModel([("hang", {})]), tools=[hang], unattended=True, events=log)
    assert result.status is TurnStatus.INTERRUPTED
    assert log.named("turn.ended")[0].get("status") == "interrupted"


def test_calls_in_the_reply_that_opened_a_blocker_are_not_charged() -> None:
    from unstuck.core.tools import ToolCall
    from unstuck.toolkit.models import ModelReply

    cli = FakeCli()
    batch = ModelReply("", (ToolCall.of("a", "check", {"name": "cli"}), ToolCall.of("b", "shell", {"command": "curl x"}),
                            ToolCall.of("c", "shell", {"command": "curl y"})))
    result = run_turn("t", model=PlaybackModel([batch, "stop"]), tools=cli.tools(), unattended=True)
    assert [s.charged for s in result.steps] == [(), (), ()]
    assert result.status is TurnStatus.BLOCKED


def test_cost_line_names_the_subject_the_turn_asked_about() -> None:
    cli = FakeCli()

    @tool(subject="glab")
    def check_glab() -> dict[str, Any]:
        return {"status": "error", "situation": {"kind": "auth", "subject": "glab", "unblock": "glab auth login"}}

    @tool(subject="glab")
    def glab_version() -> str:
        return "glab 1.0"

    model = PlaybackModel([("check_glab", {}), ("glab_version", {}), ("check", {"name": "cli"}),
                           ("shell", {"command": "curl a"}), ("shell", {"command": "curl b"}),
                           ("shell", {"command": "curl c"})])
    result = run_turn("t", model=model, tools=[*cli.tools(), check_glab, glab_version], unattended=True)
    assert result.escalation is not None and result.escalation.subject == "cli"
    assert result.cost_line is not None and result.cost_line.startswith("3 steps")
    assert "after cli was blocked" in result.cost_line


def test_skipped_subjects_are_reported_with_the_turn() -> None:
    cli = FakeCli()
    model = PlaybackModel([("check", {"name": "cli"}), "need you", "left undone"])
    result = run_turn("view", model=model, tools=cli.tools(), unattended=False, asker=ScriptedAsker([Answer.SKIP]))
    assert result.skipped_subjects == ("cli",)


def test_the_loop_retries_a_read_only_tool_after_the_backoff_on_its_clock() -> None:
    failures = [ConnectionResetError(104, "Connection reset by peer")] * 2

    @tool(subject="api.example")
    def fetch_status() -> str:
        if failures:
            raise failures.pop()
        return "all systems normal"

    clock = VirtualClock(follow_real_time=False)
    log = EventLog()
    model = PlaybackModel([("fetch_status", {}), "the status is normal"])
    result = run_turn("status?", model=model, tools=[fetch_status], unattended=True, clock=clock, events=log)
    assert result.status is TurnStatus.DONE and result.tool_calls == 1
    assert [s.retry for s in result.steps] == [False, True, True] and result.steps[-1].ok
    assert [e.get("delay_s") for e in log.named("retry.scheduled")] == [10.0, 20.0]  # network: 3 attempts, base 10 s
    assert clock.now() == 30.0
    final_message = model.requests[1][0][-1].content
    assert final_message.startswith("all systems normal") and "Retried 2 time(s) over 30 s" in final_message


def test_a_write_tool_is_never_retried_by_the_loop() -> None:
    calls = []

    @tool(subject="ledger", effect="write")
    def append_row() -> str:
        calls.append(1)
        raise TimeoutError("timed out waiting for the ledger")

    result = run_turn("t", model=PlaybackModel([("append_row", {}), "stop"]), tools=[append_row], unattended=True)
    assert len(calls) == 1 and not any(s.retry for s in result.steps)


def test_a_str_subclass_whose_methods_raise_is_read_as_its_plain_text() -> None:
    """Issue 12: any tool return becomes a result; a hostile ``str`` subclass (its ``lower``,
    ``__len__``, ``__str__``, ``encode`` … raise) is read as the text it holds."""
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.specs import tool

    class Hostile(str):
        def _refuse(self, *args: object, **kwargs: object) -> object:
            raise RuntimeError("no")

        __len__ = __str__ = __getitem__ = __contains__ = __format__ = __iter__ = _refuse  # type: ignore[assignment]
        encode = lower = find = split = strip = replace = _refuse  # type: ignore[assignment]

    @tool()
    def read_note() -> str:
        """Read the note."""
        return Hostile("the note says: all good")

    result = run_turn("read the note", model=PlaybackModel([("read_note", {}), "done"]), tools=[read_note],
                      unattended=True, clock=VirtualClock())
    assert result.status.value == "done"
    assert result.steps[0].ok and "all good" in result.steps[0].content
