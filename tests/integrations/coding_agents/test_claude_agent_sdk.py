"""The Claude Agent SDK adapter's own parts, without the CLI: the hook output dicts it returns
and the hook matchers it adds (the real sessions are in ``test_claude_agent_sdk_real.py``)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

try:
    import claude_agent_sdk as sdk
except ImportError:  # under CI=true a missing SDK fails, never skips
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("claude-agent-sdk is not installed (pip install 'unstuck[claude-agent-sdk]')", allow_module_level=True)

from unstuck.integrations.claude_agent_sdk import PROMPT_EVENT, SdkGuard, sdk_output
from unstuck.integrations.coding_agents.claude_code import EVENTS


def test_sdk_output_spells_continue_as_the_sdk_asks_and_keeps_every_other_key() -> None:
    rendered = {"continue": False, "stopReason": "Blocked: gh", "hookSpecificOutput": {"hookEventName": "PreToolUse"}}
    out = sdk_output(json.dumps(rendered))
    assert out == {"continue_": False, "stopReason": "Blocked: gh", "hookSpecificOutput": rendered["hookSpecificOutput"]}
    assert sdk_output("") == {}
    with pytest.raises(ValueError):
        sdk_output("[1]")


def test_options_append_unstucks_matchers_after_the_callers_own() -> None:
    async def own(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
        return {}

    mine = sdk.HookMatcher(matcher="Bash", hooks=[own])
    guard = SdkGuard()
    options = guard.options(sdk.ClaudeAgentOptions(hooks={"PreToolUse": [mine]}, env={"CI": "true"}))
    assert options.hooks is not None
    assert set(options.hooks) == {*EVENTS, PROMPT_EVENT}
    assert options.hooks["PreToolUse"][0] is mine and len(options.hooks["PreToolUse"]) == 2


def test_a_refused_interactive_call_is_denied_in_the_sdk_s_output_form() -> None:
    guard = SdkGuard()
    guard.options(sdk.ClaudeAgentOptions())
    hook = guard._callback
    payload = {"hook_event_name": "PreToolUse", "session_id": "s1", "cwd": "/", "transcript_path": "",
               "tool_name": "Bash", "tool_input": {"command": "gh auth login --web"}, "tool_use_id": "toolu_1"}
    out = asyncio.run(hook(payload, "toolu_1", {"signal": None}))
    specific = out["hookSpecificOutput"]
    assert specific["hookEventName"] == "PreToolUse" and specific["permissionDecision"] == "deny"
    assert "unattended" in specific["permissionDecisionReason"]  # CLAUDE_CODE_ENTRYPOINT=sdk-py said so
