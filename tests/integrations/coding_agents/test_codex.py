"""Codex CLI's hook mapping on the payloads the real ``codex exec`` 0.171.0 sent
(``tests/data/coding_agents/codex-0.171.0.json`` and its transcript)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.integrations.coding_agents.fixtures import DATA, captured, finder, with_transcript

from unstuck.core.tools import CommandOutput, ToolResult
from unstuck.integrations.coding_agents import codex
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

CAPTURE = captured("codex", "0.171.0")
TRANSCRIPT = DATA / "codex-0.171.0.transcript.jsonl"
find = finder(CAPTURE["events"])
HOOKS = codex.HOOKS
#: The command the capture played that exits 3 after writing to both streams.
FAILING = "echo hello; echo oops >&2; exit 3"


def payload(event: str, tmp_path: Path, **match: Any) -> dict[str, Any]:
    return with_transcript(find(event, **match)["payload"], TRANSCRIPT, tmp_path)


def test_codex_mapping_is_an_agent_hooks() -> None:
    assert isinstance(HOOKS, AgentHooks)
    assert HOOKS.agent is Agent.CODEX
    assert set(HOOKS.event_names) == {"SessionStart", "PreToolUse", "PostToolUse", "Stop"}


def test_codex_pre_tool_use_reads_the_shell_command_line(tmp_path: Path) -> None:
    raw = payload("PreToolUse", tmp_path, command="gh pr view 1 --repo cli/cli")
    event = HOOKS.parse("PreToolUse", raw, {})
    assert event.kind is HookKind.PRE_TOOL
    assert event.session_id == raw["session_id"] and event.cwd == raw["cwd"]
    assert event.raw_tool == "Bash"
    assert event.call is not None and event.call.id == raw["tool_use_id"]
    spec = HOOKS.tool_spec(event.call.tool)
    assert spec.command_line(event.call.arguments) == "gh pr view 1 --repo cli/cli"
    assert spec.subject_of(event.call.arguments) == "gh"  # the program the shell parser finds


def test_codex_post_tool_use_takes_the_exit_status_from_the_transcript(tmp_path: Path) -> None:
    event = HOOKS.parse("PostToolUse", payload("PostToolUse", tmp_path, command=FAILING), {})
    assert event.kind is HookKind.POST_TOOL_FAILURE
    assert isinstance(event.output, CommandOutput)
    assert event.output.exit_code == 3  # the command's own `exit 3`
    assert event.output.stdout == "hello\noops\n"  # Codex reports both streams as one
    assert event.output.command == FAILING


def test_codex_post_tool_use_of_logged_out_gh_reads_gh_auth_exit_status(tmp_path: Path) -> None:
    event = HOOKS.parse("PostToolUse", payload("PostToolUse", tmp_path, command="gh pr view 1 --repo cli/cli"), {})
    assert isinstance(event.output, CommandOutput)
    assert event.output.exit_code == 4  # gh's exitAuth (cli/cli cmd/gh/main.go)
    assert "gh auth login" in event.output.stdout


def test_codex_post_tool_use_of_a_command_that_succeeded_is_a_post_tool(tmp_path: Path) -> None:
    event = HOOKS.parse("PostToolUse", payload("PostToolUse", tmp_path, command="ls"), {})
    assert event.kind is HookKind.POST_TOOL
    assert isinstance(event.output, CommandOutput) and event.output.exit_code == 0


def test_codex_post_tool_use_without_a_transcript_states_no_exit_status(tmp_path: Path) -> None:
    raw = {**find("PostToolUse", command=FAILING)["payload"], "transcript_path": str(tmp_path / "gone.jsonl")}
    event = HOOKS.parse("PostToolUse", raw, {})
    assert isinstance(event.output, ToolResult)
    assert not event.output.status_stated
    assert event.output.content == raw["tool_response"]
    assert event.kind is HookKind.POST_TOOL


def test_codex_exec_session_reads_as_unattended_from_its_transcript(tmp_path: Path) -> None:
    event = HOOKS.parse("PreToolUse", payload("PreToolUse", tmp_path, command="ls"), {})
    assert event.unattended_hint == "codex exec (session_meta.source=exec)"


def test_codex_without_transcript_is_unattended_only_by_a_ci_variable(tmp_path: Path) -> None:
    raw = {**find("PreToolUse", command="ls")["payload"], "transcript_path": None}
    assert HOOKS.parse("PreToolUse", raw, {}).unattended_hint is None
    assert HOOKS.parse("PreToolUse", raw, {"CI": "true"}).unattended_hint == "CI=true"
    assert HOOKS.parse("PreToolUse", raw, {"CI": "false"}).unattended_hint is None


def test_codex_session_start_and_stop_read_their_fields(tmp_path: Path) -> None:
    start = HOOKS.parse("SessionStart", payload("SessionStart", tmp_path), {})
    assert start.kind is HookKind.SESSION_START and start.source == "startup" and start.call is None
    raw = payload("Stop", tmp_path)
    stop = HOOKS.parse("Stop", raw, {})
    assert stop.kind is HookKind.STOP and stop.stop_active is False
    assert stop.text == raw["last_assistant_message"]


@pytest.mark.parametrize(("event_name", "change", "field"), [
    ("PreToolUse", {"tool_use_id": None}, "tool_use_id"),
    ("PreToolUse", {"tool_input": "ls"}, "tool_input"),
    ("PreToolUse", {"hook_event_name": "PostToolUse"}, "hook_event_name"),
    ("PostToolUse", {"session_id": ""}, "session_id"),
    ("Stop", {"stop_hook_active": "no"}, "stop_hook_active"),
])
def test_codex_bad_payload_names_the_field(tmp_path: Path, event_name: str, change: dict[str, Any],
                                           field: str) -> None:
    raw = {**payload(event_name, tmp_path), **change}
    with pytest.raises(HookPayloadError) as caught:
        HOOKS.parse(event_name, raw, {})
    assert caught.value.agent is Agent.CODEX and caught.value.event == event_name and caught.value.field == field


def test_codex_unknown_event_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HookPayloadError, match="UserPromptSubmit"):
        HOOKS.parse("UserPromptSubmit", find("UserPromptSubmit")["payload"], {})


def test_codex_deny_before_a_call_is_the_permission_decision_codex_accepts(tmp_path: Path) -> None:
    event = HOOKS.parse("PreToolUse", payload("PreToolUse", tmp_path, command="ls"), {})
    text, code = HOOKS.render(event, HookReply(HookAction.DENY, reason="gh is not signed in"))
    assert code == 0
    assert json.loads(text) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "gh is not signed in"}}


def test_codex_stop_before_a_call_never_sends_continue_false(tmp_path: Path) -> None:
    # codex-rs/hooks/src/engine/output_parser.rs: PreToolUse "returned unsupported continue:false".
    event = HOOKS.parse("PreToolUse", payload("PreToolUse", tmp_path, command="ls"), {})
    out = json.loads(HOOKS.render(event, HookReply(HookAction.STOP, reason="stop", user_message="Q?"))[0])
    assert "continue" not in out and "stopReason" not in out
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["systemMessage"] == "Q?"


def test_codex_stop_at_the_end_of_a_turn_is_continue_false(tmp_path: Path) -> None:
    event = HOOKS.parse("Stop", payload("Stop", tmp_path), {})
    out = json.loads(HOOKS.render(event, HookReply(HookAction.STOP, reason="blocked", user_message="Q?"))[0])
    assert out == {"continue": False, "stopReason": "Q?", "systemMessage": "Q?"}


def test_codex_deny_after_a_call_blocks_its_result(tmp_path: Path) -> None:
    event = HOOKS.parse("PostToolUse", payload("PostToolUse", tmp_path, command=FAILING), {})
    out = json.loads(HOOKS.render(event, HookReply(HookAction.DENY, reason="not this way"))[0])
    assert out == {"decision": "block", "reason": "not this way"}


def test_codex_context_goes_in_additional_context(tmp_path: Path) -> None:
    event = HOOKS.parse("SessionStart", payload("SessionStart", tmp_path), {})
    out = json.loads(HOOKS.render(event, HookReply(HookAction.CONTEXT, context="gh needs a sign-in"))[0])
    assert out == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "gh needs a sign-in"}}


def test_codex_plain_allow_prints_nothing(tmp_path: Path) -> None:
    event = HOOKS.parse("PreToolUse", payload("PreToolUse", tmp_path, command="ls"), {})
    assert HOOKS.render(event, HookReply()) == ("", 0)


def test_codex_tool_specs_map_patches_and_mcp_tools() -> None:
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch\n"
    assert codex.patch_paths(patch) == ("src/app.py",)
    assert HOOKS.tool_spec("apply_patch").subject_of({"command": patch}) == "src/app.py"
    assert HOOKS.tool_spec("mcp__github__get_issue").subject_of({}) == "mcp:github"
    assert HOOKS.tool_spec("request_user_input").interactive


def test_codex_mcp_result_reads_its_is_error(tmp_path: Path) -> None:
    # The shape Codex hands PostToolUse for an MCP tool: the MCP CallToolResult (isError, content).
    base = payload("PostToolUse", tmp_path, command="ls")
    raw = {**base, "tool_name": "mcp__shell__run_command", "tool_input": {"command": "gh pr view 1"},
           "tool_response": {"content": [{"type": "text", "text": "To get started with GitHub CLI"}],
                             "isError": True}}
    event = HOOKS.parse("PostToolUse", raw, {})
    assert isinstance(event.output, ToolResult) and event.output.status_stated and not event.output.ok
    assert event.kind is HookKind.POST_TOOL_FAILURE
    assert event.output.content == "To get started with GitHub CLI"


def test_codex_install_entries_run_the_command_with_the_event_name() -> None:
    entries = HOOKS.install_entries(f"/bin/{OWN_MARKER} codex")
    assert [e.event_name for e in entries] == list(codex.EVENTS)
    for entry in entries:
        (hook,) = entry.group["hooks"]
        assert hook["command"] == f"/bin/{OWN_MARKER} codex {entry.event_name}"
        assert is_own_group(entry.group)
        assert ("matcher" in entry.group) == (entry.event_name in ("PreToolUse", "PostToolUse"))


def test_codex_settings_are_hooks_json_beside_config_toml(tmp_path: Path) -> None:
    assert HOOKS.settings_path("user", tmp_path / "h", tmp_path / "p") == tmp_path / "h" / ".codex" / "hooks.json"
    assert HOOKS.settings_path("project", tmp_path / "h", tmp_path / "p") == tmp_path / "p" / ".codex" / "hooks.json"
