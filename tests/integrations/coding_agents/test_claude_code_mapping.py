"""Claude Code's hook mapping on the payloads the real Claude Code 2.1.332 sent
(``data/claude_code_2.1.332_hooks.json``), and its replies in the forms its hooks reference
defines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from unstuck.core.tools import CommandOutput, ToolResult
from unstuck.integrations.coding_agents.claude_code import EVENTS, HOOKS, unattended_hint
from unstuck.integrations.coding_agents.events import (
    OWN_MARKER,
    AgentHooks,
    HookAction,
    HookKind,
    HookPayloadError,
    HookReply,
    is_own_group,
)

RECORDED = json.loads((Path(__file__).parent / "data" / "claude_code_2.1.332_hooks.json").read_text(encoding="utf-8"))
ENV: dict[str, str] = RECORDED["environment"]


def recorded(event: str, command: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = next(h["payload"] for h in RECORDED["hooks"] if h["event"] == event and (
        command is None or h["payload"].get("tool_input", {}).get("command") == command))
    return found


def test_the_mapping_is_an_agent_hooks_for_every_event_unstuck_installs() -> None:
    assert isinstance(HOOKS, AgentHooks)
    assert set(HOOKS.event_names) == {"SessionStart", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop"}


def test_a_failed_bash_call_reads_as_the_exit_code_and_output_claude_code_reported() -> None:
    payload = recorded("PostToolUseFailure", "gh repo view cli/cli --json description")
    event = HOOKS.parse("PostToolUseFailure", payload, ENV)
    assert event.kind is HookKind.POST_TOOL_FAILURE and event.call is not None
    assert event.call.id == payload["tool_use_id"] and event.call.tool == "Bash"
    assert isinstance(event.output, CommandOutput)
    code_line, _, rest = payload["error"].partition("\n")
    assert event.output.exit_code == int(code_line.removeprefix("Exit code "))
    assert event.output.stderr == rest


def test_a_bash_call_that_succeeded_reads_as_exit_status_zero_with_its_streams() -> None:
    payload = recorded("PostToolUse")
    event = HOOKS.parse("PostToolUse", payload, ENV)
    assert event.output == CommandOutput(payload["tool_input"]["command"], 0, payload["tool_response"]["stdout"],
                                         payload["tool_response"]["stderr"])


def test_claude_code_headless_flag_in_the_hook_environment_says_the_session_is_unattended() -> None:
    assert ENV["CLAUDE_CODE_SESSION_ATTENDED"] == "0"  # what 2.1.332 set under claude -p
    event = HOOKS.parse("PreToolUse", recorded("PreToolUse"), ENV)
    assert event.unattended_hint == "CLAUDE_CODE_SESSION_ATTENDED=0"
    assert unattended_hint({"CLAUDE_CODE_SESSION_ATTENDED": "1"}) is None
    assert unattended_hint({"CLAUDE_CODE_SESSION_ATTENDED": "1", "CI": "true"}) == "CI=true"
    assert unattended_hint({"CI": "false"}) is None


def test_session_start_and_stop_carry_their_own_fields() -> None:
    start = HOOKS.parse("SessionStart", recorded("SessionStart"), ENV)
    assert (start.kind, start.source, start.call) == (HookKind.SESSION_START, "startup", None)
    stop = HOOKS.parse("Stop", recorded("Stop"), ENV)
    assert stop.kind is HookKind.STOP and stop.text == recorded("Stop")["last_assistant_message"]
    assert stop.stop_active is False


@pytest.mark.parametrize(("event", "payload", "field"), [
    ("PreToolUse", {"session_id": "s", "tool_name": "Bash", "tool_input": "ls", "tool_use_id": "t"}, "tool_input"),
    ("PreToolUse", {"tool_name": "Bash", "tool_input": {}, "tool_use_id": "t"}, "session_id"),
    ("PostToolUseFailure", {"session_id": "s", "tool_name": "Bash", "tool_input": {}, "tool_use_id": "t"}, "error"),
    ("PostToolUse", {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash"}, "hook_event_name"),
    ("Notification", {"session_id": "s"}, ""),
])
def test_a_payload_off_the_documented_shape_is_refused_naming_the_event_and_field(
        event: str, payload: dict[str, Any], field: str) -> None:
    with pytest.raises(HookPayloadError) as caught:
        HOOKS.parse(event, payload, {})
    assert caught.value.event == event and caught.value.field == field and "claude-code" in str(caught.value)


def test_a_refused_call_is_denied_with_the_reason_claude_reads() -> None:
    event = HOOKS.parse("PreToolUse", recorded("PreToolUse"), ENV)
    out, code = HOOKS.render(event, HookReply(HookAction.DENY, reason="Not executed: gh auth login waits"))
    assert code == 0
    assert json.loads(out) == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                                      "permissionDecisionReason": "Not executed: gh auth login waits"}}
    assert HOOKS.render(event, HookReply()) == ("", 0)


def test_a_stop_ends_the_session_with_the_question_for_the_user_and_never_blocks_a_stop() -> None:
    pre = HOOKS.parse("PreToolUse", recorded("PreToolUse"), ENV)
    out = json.loads(HOOKS.render(pre, HookReply(HookAction.STOP, reason="why", user_message="Blocked: gh"))[0])
    assert out["continue"] is False and out["stopReason"] == out["systemMessage"] == "Blocked: gh"
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    stop = HOOKS.parse("Stop", recorded("Stop"), ENV)
    out = json.loads(HOOKS.render(stop, HookReply(HookAction.STOP, reason="why", user_message="Blocked: gh"))[0])
    assert out == {"continue": False, "stopReason": "Blocked: gh", "systemMessage": "Blocked: gh"}  # no "block"


def test_context_goes_where_each_event_takes_it() -> None:
    start = HOOKS.parse("SessionStart", recorded("SessionStart"), ENV)
    out = json.loads(HOOKS.render(start, HookReply(HookAction.CONTEXT, context="gh is signed out"))[0])
    assert out == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "gh is signed out"}}
    failure = HOOKS.parse("PostToolUseFailure", recorded("PostToolUseFailure"), ENV)
    out = json.loads(HOOKS.render(failure, HookReply(HookAction.STOP, reason="the turn stopped", user_message="Q"))[0])
    assert out["hookSpecificOutput"]["additionalContext"] == "the turn stopped" and "decision" not in out


def test_claude_code_tools_map_to_shell_file_web_and_mcp_specs() -> None:
    bash = HOOKS.tool_spec("Bash")
    assert bash.command_argument == "command" and bash.subject_of({"command": "cd x && gh pr list"}) == "gh"
    assert bash.interactive_call({"command": "gh auth login --web"}) is not None
    read = HOOKS.tool_spec("Read")
    assert read.document_output and read.subject_of({"file_path": "/repo/README.md"}) == "/repo/README.md"
    assert HOOKS.tool_spec("WebFetch").subject_of({"url": "https://api.github.com/repos/cli/cli"}) == "api.github.com"
    assert HOOKS.tool_spec("mcp__github__get_issue").subject_of({}) == "mcp:github"
    assert HOOKS.tool_spec("AskUserQuestion").interactive


def test_installed_groups_run_the_client_for_each_event_and_read_as_unstuck_s_own() -> None:
    entries = HOOKS.install_entries(f"/home/u/.local/share/unstuck/bin/{OWN_MARKER} claude-code")
    assert [e.event_name for e in entries] == list(EVENTS)
    for entry in entries:
        (hook,) = entry.group["hooks"]
        assert hook["command"].endswith(f"claude-code {entry.event_name}") and is_own_group(entry.group)
    assert not is_own_group({"hooks": [{"type": "command", "command": "~/bin/check.sh"},
                                       {"type": "command", "command": f"{OWN_MARKER} claude-code Stop"}]})


def test_output_of_a_tool_other_than_bash_is_its_text() -> None:
    event = HOOKS.parse("PostToolUse", {"session_id": "s", "tool_name": "Read", "tool_input": {"file_path": "/a"},
                                        "tool_use_id": "t", "tool_response": {"type": "text", "file": {
                                            "filePath": "/a", "content": "hello"}}}, {})
    assert event.output == ToolResult("Read", True, "hello", status_stated=True)
