"""Gemini CLI's hook mapping on the payloads the real ``gemini -p`` 0.61.0 sent
(``tests/data/coding_agents/gemini-0.61.0.json``)."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from tests.integrations.coding_agents.fixtures import captured, finder

from unstuck.core.tools import CommandOutput, ToolResult
from unstuck.integrations.coding_agents import gemini
from unstuck.integrations.coding_agents.events import (
    OWN_MARKER,
    Agent,
    AgentHooks,
    HookAction,
    HookKind,
    HookPayloadError,
    HookReply,
    is_own_group,
)

CAPTURE = captured("gemini", "0.61.0")
find = finder(CAPTURE["events"])
FAILING = "echo hello; echo oops >&2; exit 3"


def parse(event: str, **match: Any) -> Any:
    entry = find(event, **match)
    return gemini.GeminiHooks().parse(event, entry["payload"], entry["env"])


def test_gemini_mapping_is_an_agent_hooks() -> None:
    assert isinstance(gemini.HOOKS, AgentHooks)
    assert gemini.HOOKS.agent is Agent.GEMINI
    assert set(gemini.HOOKS.event_names) == {"SessionStart", "BeforeTool", "AfterTool", "AfterAgent"}


def test_gemini_before_tool_reads_the_shell_command_line() -> None:
    raw = find("BeforeTool", command="gh pr view 1 --repo cli/cli")["payload"]
    hooks = gemini.GeminiHooks()
    event = hooks.parse("BeforeTool", raw, {})
    assert event.kind is HookKind.PRE_TOOL and event.raw_tool == "run_shell_command"
    assert event.session_id == raw["session_id"] and event.cwd == raw["cwd"]
    assert event.call is not None
    spec = hooks.tool_spec(event.call.tool)
    assert spec.command_line(event.call.arguments) == "gh pr view 1 --repo cli/cli"
    assert spec.subject_of(event.call.arguments) == "gh"


def test_gemini_call_gets_the_same_id_before_and_after_it_ran() -> None:
    before = parse("BeforeTool", command=FAILING)
    after = parse("AfterTool", command=FAILING)
    assert before.call is not None and after.call is not None
    assert before.call.id == after.call.id == gemini.call_id(before.session_id, "run_shell_command",
                                                             {"command": FAILING})
    assert parse("BeforeTool", command="ls").call.id != before.call.id


def _before(hooks: gemini.GeminiHooks, command: str, session: str | None = None) -> Any:
    entry = find("BeforeTool", command="gh pr view 1 --repo cli/cli")
    payload = {**entry["payload"], "tool_input": {**entry["payload"]["tool_input"], "command": command}}
    if session is not None:
        payload["session_id"] = session
    return hooks.parse("BeforeTool", payload, entry["env"])


def test_gemini_same_call_made_twice_is_two_calls_with_two_ids() -> None:
    hooks = gemini.GeminiHooks()
    first, second = _before(hooks, "gh auth login --web"), _before(hooks, "gh auth login --web")
    assert first.call.id == gemini.call_id(first.session_id, "run_shell_command", {"command": "gh auth login --web"})
    assert second.call.id == first.call.id + "-2" and second.call.arguments == first.call.arguments
    other = _before(hooks, "gh auth login --web", session="another-session")
    assert other.call.id not in (first.call.id, second.call.id)


def test_gemini_after_tool_takes_the_id_of_the_latest_before_tool_of_that_call() -> None:
    hooks = gemini.GeminiHooks()
    entry = find("AfterTool", command=FAILING)
    before = [hooks.parse("BeforeTool", find("BeforeTool", command=FAILING)["payload"], {}) for _ in range(2)]
    after = hooks.parse("AfterTool", entry["payload"], entry["env"])
    assert after.call.id == before[1].call.id != before[0].call.id  # each AfterTool follows its own BeforeTool
    start = find("SessionStart")
    hooks.parse("SessionStart", {**start["payload"], "session_id": before[0].session_id}, start["env"])
    again = hooks.parse("BeforeTool", find("BeforeTool", command=FAILING)["payload"], {})
    assert again.call.id == before[0].call.id  # a (re)started session numbers its calls afresh


def test_gemini_second_identical_refused_sign_in_is_charged_as_a_second_workaround() -> None:
    from unstuck.integrations.coding_agents.sessions import SessionKeeper

    keeper, hooks = SessionKeeper(None, None), gemini.GeminiHooks()
    opened = find("AfterTool", command="gh pr view 1 --repo cli/cli")  # gh signed out: the blocker opens
    keeper.handle(hooks, hooks.parse("BeforeTool", find("BeforeTool", command="gh pr view 1 --repo cli/cli")[
        "payload"], {}), {}, unattended_flag="--unattended")
    keeper.handle(hooks, hooks.parse("AfterTool", opened["payload"], opened["env"]), {}, unattended_flag="--unattended")
    session = keeper.find(opened["payload"]["session_id"])
    assert session is not None and "gh" in session.guard.state.open_blockers
    charged = []
    for _ in range(2):
        event = _before(hooks, "gh auth login --web")
        outcome = keeper.handle(hooks, event, {}, unattended_flag="--unattended")
        assert json.loads(outcome.stdout)["decision"] == "deny"  # rule 1: nobody to sign in, unattended
        blocker = session.guard.state.open_blockers.get("gh")
        charged.append(blocker.workarounds if blocker is not None else None)
    assert charged[1] == charged[0] + 1, charged  # not a replay of the first: the model asked again
    keeper.close()


def test_gemini_after_tool_reads_the_exit_code_line() -> None:
    event = parse("AfterTool", command=FAILING)
    assert event.kind is HookKind.POST_TOOL_FAILURE
    assert isinstance(event.output, CommandOutput)
    assert event.output.exit_code == 3  # the command's own `exit 3`
    assert event.output.stdout == "hello\noops\n"  # Gemini CLI reports both streams as one
    assert event.output.stderr == ""


def test_gemini_after_tool_of_logged_out_gh_reads_gh_auth_exit_status() -> None:
    event = parse("AfterTool", command="gh pr view 1 --repo cli/cli")
    assert isinstance(event.output, CommandOutput)
    assert event.output.exit_code == 4  # gh's exitAuth (cli/cli cmd/gh/main.go)
    assert event.output.stdout.startswith("To get started with GitHub CLI")


def test_gemini_after_tool_without_exit_code_line_exited_zero() -> None:
    event = parse("AfterTool", command="ls")
    assert event.kind is HookKind.POST_TOOL
    assert isinstance(event.output, CommandOutput) and event.output.exit_code == 0
    assert event.output.stdout == "notes.txt\n"  # the capture's folder held notes.txt alone


@pytest.mark.parametrize(("text", "code", "stdout", "stderr"), [
    ("Output: (empty)\nExit Code: 2\nProcess Group PGID: 7", 2, "", ""),
    ("Output: partial\nExit Code: (none)\nSignal: SIGTERM\nProcess Group PGID: 7", 128 + signal.SIGTERM, "partial\n", ""),
    ("Output: (empty)\nError: spawn bash ENOENT", 1, "", "spawn bash ENOENT"),
    ("Output: Error: from the program\nExit Code: 1", 1, "Error: from the program\n", ""),
])
def test_gemini_shell_result_lines_read_as_gemini_cli_writes_them(text: str, code: int, stdout: str,
                                                                   stderr: str) -> None:
    found = gemini.shell_output("cmd", f"<untrusted_context>\n{text}\n</untrusted_context>")
    assert found == CommandOutput("cmd", code, stdout, stderr)


def test_gemini_cancelled_and_backgrounded_commands() -> None:
    cancelled = gemini.shell_output("sleep 9", "Command was cancelled by user before it could complete. "
                                               "There was no output before it was cancelled.")
    assert cancelled is not None and cancelled.exit_code == 124
    assert gemini.shell_output("sleep 9 &", "Command moved to background (PID: 12). Output hidden.") is None


def test_gemini_file_tools_read_their_error_field() -> None:
    ok = parse("AfterTool", tool="read_file")
    assert isinstance(ok.output, ToolResult) and ok.output.ok and ok.output.content == "line one\n"
    missing = next(e for e in CAPTURE["events"] if e["event"] == "AfterTool"
                   and e["payload"]["tool_input"].get("file_path") == "missing.txt")
    event = gemini.GeminiHooks().parse("AfterTool", missing["payload"], {})
    assert event.kind is HookKind.POST_TOOL_FAILURE
    assert isinstance(event.output, ToolResult) and not event.output.ok and event.output.status_stated
    spec = gemini.HOOKS.tool_spec("write_file")
    assert spec.subject_of({"file_path": "out.txt"}) == "out.txt"


def test_gemini_web_fetch_subject_is_the_host_of_the_prompt_url() -> None:
    event = parse("BeforeTool", tool="web_fetch")
    assert event.call is not None
    assert gemini.HOOKS.tool_spec("web_fetch").subject_of(event.call.arguments) == "127.0.0.1"
    assert gemini.HOOKS.tool_spec("google_web_search").subject_of({"query": "x"}) == "web"


def test_gemini_mcp_tool_is_its_servers_as_mcp_context_names_it() -> None:
    hooks = gemini.GeminiHooks()
    entry = find("AfterTool", tool="mcp_shellsrv_run_command")
    event = hooks.parse("AfterTool", entry["payload"], {})
    assert hooks.tool_spec("mcp_shellsrv_run_command").subject_of({}) == "mcp:shellsrv"
    assert event.kind is HookKind.POST_TOOL_FAILURE  # the server's isError, as Gemini CLI's error field
    assert isinstance(event.output, ToolResult) and "gh auth login" in event.output.content
    renamed = {**entry["payload"], "tool_name": "mcp_my_srv_run",
               "mcp_context": {**entry["payload"]["mcp_context"], "server_name": "my_srv"}}
    hooks.parse("AfterTool", renamed, {})
    assert hooks.tool_spec("mcp_my_srv_run").subject_of({}) == "mcp:my_srv"


def test_gemini_unattended_only_by_a_ci_variable() -> None:
    entry = find("BeforeTool", command="ls")
    assert gemini.GeminiHooks().parse("BeforeTool", entry["payload"], entry["env"]).unattended_hint is None
    assert gemini.GeminiHooks().parse("BeforeTool", entry["payload"],
                                      {"GITHUB_ACTIONS": "true"}).unattended_hint == "GITHUB_ACTIONS=true"


def test_gemini_session_start_and_after_agent_read_their_fields() -> None:
    start = parse("SessionStart")
    assert start.kind is HookKind.SESSION_START and start.source == "startup"
    raw = find("AfterAgent")["payload"]
    stop = gemini.GeminiHooks().parse("AfterAgent", raw, {})
    assert stop.kind is HookKind.STOP and not stop.stop_active and stop.text == raw["prompt_response"]


@pytest.mark.parametrize(("event_name", "change", "field"), [
    ("BeforeTool", {"tool_name": None}, "tool_name"),
    ("BeforeTool", {"tool_input": []}, "tool_input"),
    ("AfterTool", {"tool_response": "x"}, "tool_response"),
    ("AfterAgent", {"hook_event_name": "BeforeAgent"}, "hook_event_name"),
])
def test_gemini_bad_payload_names_the_field(event_name: str, change: dict[str, Any], field: str) -> None:
    raw = {**find(event_name)["payload"], **change}
    with pytest.raises(HookPayloadError) as caught:
        gemini.GeminiHooks().parse(event_name, raw, {})
    assert caught.value.agent is Agent.GEMINI and caught.value.field == field


def test_gemini_unknown_event_is_refused() -> None:
    with pytest.raises(HookPayloadError, match="BeforeAgent"):
        gemini.GeminiHooks().parse("BeforeAgent", find("BeforeAgent")["payload"], {})


def test_gemini_deny_before_a_tool_is_decision_deny() -> None:
    event = parse("BeforeTool", command="ls")
    text, code = gemini.HOOKS.render(event, HookReply(HookAction.DENY, reason="gh is not signed in"))
    assert code == 0 and json.loads(text) == {"decision": "deny", "reason": "gh is not signed in"}


def test_gemini_stop_before_a_tool_ends_the_agent_with_the_question() -> None:
    event = parse("BeforeTool", command="ls")
    out = json.loads(gemini.HOOKS.render(event, HookReply(HookAction.STOP, reason="blocked", user_message="Q?"))[0])
    assert out == {"decision": "deny", "reason": "blocked", "continue": False, "stopReason": "Q?",
                   "systemMessage": "Q?"}


def test_gemini_after_agent_deny_retries_and_stop_ends() -> None:
    event = parse("AfterAgent")
    assert json.loads(gemini.HOOKS.render(event, HookReply(HookAction.DENY, reason="ask the user"))[0]) == {
        "decision": "deny", "reason": "ask the user"}
    assert json.loads(gemini.HOOKS.render(event, HookReply(HookAction.STOP, reason="r", user_message="Q?"))[0]) == {
        "continue": False, "stopReason": "Q?", "systemMessage": "Q?"}


def test_gemini_context_goes_where_gemini_cli_takes_it() -> None:
    start = parse("SessionStart")
    out = json.loads(gemini.HOOKS.render(start, HookReply(HookAction.CONTEXT, context="gh needs a sign-in"))[0])
    assert out == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "gh needs a sign-in"}}
    before = parse("BeforeTool", command="ls")
    assert gemini.HOOKS.render(before, HookReply(HookAction.CONTEXT, context="x")) == ("", 0)


def test_gemini_install_entries_name_each_hook() -> None:
    entries = gemini.HOOKS.install_entries(f"/bin/{OWN_MARKER} gemini")
    assert [e.event_name for e in entries] == list(gemini.EVENTS)
    for entry in entries:
        (hook,) = entry.group["hooks"]
        assert hook["command"] == f"/bin/{OWN_MARKER} gemini {entry.event_name}"
        assert hook["timeout"] == gemini.HOOK_TIMEOUT_MS
        assert is_own_group(entry.group)
        assert ("matcher" in entry.group) == (entry.event_name != "AfterAgent")


def test_gemini_settings_paths(tmp_path: Any) -> None:
    assert gemini.HOOKS.settings_path("user", tmp_path / "h", tmp_path / "p") == tmp_path / "h" / ".gemini" / "settings.json"
    assert gemini.HOOKS.settings_path("project", tmp_path / "h", tmp_path / "p") == tmp_path / "p" / ".gemini" / "settings.json"
