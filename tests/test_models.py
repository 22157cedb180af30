"""The OpenAI-compatible adapter against a loopback server speaking the real wire format."""

from __future__ import annotations

import re

import pytest

from unstuck.core.clock import VirtualClock
from unstuck.core.tools import ToolCall
from unstuck.evals.chat_server import ChatServer
from unstuck.evals.runner import prepare_sandbox
from unstuck.evals.scenarios import builtin_scenarios
from unstuck.loop.turn import TurnStatus, run_turn
from unstuck.toolkit.models import Message, ModelError, OpenAIChatModel, Role
from unstuck.toolkit.specs import tool
from unstuck.toolkit.workspace import standard_tools


@tool
def lookup(name: str) -> str:
    """Look a name up."""
    return name


def test_tool_calls_round_trip_in_the_chat_completions_format() -> None:
    with ChatServer([{"tool_calls": [("lookup", {"name": "gh"})]}]) as server:
        model = OpenAIChatModel("local-model", base_url=server.base_url, max_retries=0)
        messages = [Message(Role.SYSTEM, "s"), Message(Role.USER, "u"),
                    Message(Role.ASSISTANT, "", (ToolCall.of("call_a", "lookup", {"name": "x"}),)),
                    Message(Role.TOOL, "x", tool_call_id="call_a", name="lookup")]
        reply = model.complete(messages, [lookup])
    assert reply.tool_calls[0].tool == "lookup" and reply.tool_calls[0].arguments == {"name": "gh"}
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["model"] == "local-model"
    assert sent["tools"] == [{"type": "function", "function": {
        "name": "lookup", "description": "Look a name up.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}]
    assert sent["messages"][2]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"name": "x"}'}
    assert sent["messages"][3] == {"role": "tool", "content": "x", "tool_call_id": "call_a"}


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"raw": b"<html>not json</html>"}, "model 'm'"),
        ({"raw": b'{"error": {"message": "overloaded", "type": "server_error"}}', "status": 500}, "InternalServerError"),
        ({"raw": b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}'}, "no choices"),
        ({"raw": b'{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
                 b'"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":'
                 b'[{"id":"c","type":"function","function":{"name":"lookup","arguments":"{not json"}}]}}]}'},
         "arguments that are not JSON"),
    ],
)
def test_garbage_from_the_server_is_a_model_error(reply: dict[str, object], problem: str) -> None:
    with ChatServer([reply]) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
        with pytest.raises(ModelError, match=problem):
            model.complete([Message(Role.USER, "u")], [lookup])


def test_unreachable_server_is_a_model_error() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=5)
    with pytest.raises(ModelError, match="APIConnectionError"):
        model.complete([Message(Role.USER, "u")], [lookup])


def test_real_gh_turn_through_the_openai_client_escalates_and_withholds_tools_on_closing(gh_path: str) -> None:
    scenario = next(s for s in builtin_scenarios() if s.name == "gh_logged_out")
    replies = [
        {"tool_calls": [("check_cli_setup", {"name": "gh"})]},
        {"tool_calls": [("sign_in_cli", {"name": "gh"})]},
        {"tool_calls": [("run_command", {"command": "curl -sS --max-time 5 https://api.github.com/repos/cli/cli"})]},
        {"tool_calls": [("run_command", {"command": "GH_TOKEN=x gh repo view cli/cli"})]},
        {"tool_calls": [("run_command", {"command": "env"})]},
    ]
    with ChatServer(replies) as server, prepare_sandbox(scenario) as sandbox:
        model = OpenAIChatModel("local", base_url=server.base_url, max_retries=0)
        result = run_turn(scenario.task, model=model, tools=standard_tools(sandbox.workspace()), unattended=True,
                          clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED
    assert result.escalation is not None and "gh auth login" in result.escalation.text
    assert result.escalation.next_step == "I will re-run the check, then finish."
    closing = server.requests[-1]
    assert "tools" not in closing, "the closing call must withhold tools"
    tool_messages = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert re.search(r"\[unstuck [0-9a-f]{16}\] BLOCKED: gh", tool_messages[0]["content"])
