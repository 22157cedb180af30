"""The scripted model servers on 127.0.0.1 (:mod:`unstuck.evals.model_servers`): the wire shapes
each API documents, the model's view of the agent's history, the error bodies; and the real CLIs
reading them (a fault answered with the API's error body is retried by the CLI)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from unstuck.core.tools import ToolCall
from unstuck.evals.agents import make_agent
from unstuck.evals.messages_api import ScriptedMessagesServer
from unstuck.evals.model_servers.base import SHELL_ALIAS, PlayList, shell_move
from unstuck.evals.model_servers.gemini import GeminiServer
from unstuck.evals.model_servers.openai_responses import ResponsesServer
from unstuck.toolkit.models import Role


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def test_responses_server_streams_a_function_call_as_the_responses_api_does() -> None:
    with ResponsesServer(PlayList(["gh auth status"])) as server:
        body = {"model": "m", "stream": True, "input": [{"type": "message", "role": "user",
                                                         "content": [{"type": "input_text", "text": "go"}]}],
                "tools": [{"type": "function", "name": "exec_command", "parameters": {}}]}
        reply = httpx.post(f"{server.base_url}/responses", json=body, timeout=10)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    events = sse_events(reply.text)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    (done,) = [e for e in events if e["type"] == "response.output_item.done"]
    assert done["item"]["type"] == "function_call" and done["item"]["name"] == "exec_command"
    assert json.loads(done["item"]["arguments"]) == {"cmd": "gh auth status"}
    assert events[-1]["response"]["output"] == [done["item"]]
    (turn,) = server.turns
    assert [t.name for t in turn.tools] == [SHELL_ALIAS]  # the agent's shell tool, as the model knows it


def test_responses_server_reads_codex_history_back_as_the_model_s_own_calls() -> None:
    model = PlayList([ToolCall.of("c1", "check_cli_setup", {"name": "gh"})])
    with ResponsesServer(model) as server:
        first = {"model": "m", "stream": True, "input": [], "tools": [{"type": "function", "name": "exec_command"}]}
        httpx.post(f"{server.base_url}/responses", json=first, timeout=10)
        later = {**first, "input": [
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd": "gh auth status"}'},
            {"type": "function_call_output", "call_id": "c1",
             "output": "Process exited with code 1\nOutput:\nYou are not logged into any GitHub hosts."},
        ]}
        httpx.post(f"{server.base_url}/responses", json=later, timeout=10)
    messages = server.turns[1].messages
    assert messages[0].tool_calls == (ToolCall.of("c1", "check_cli_setup", {"name": "gh"}),)
    assert messages[1].role is Role.TOOL and messages[1].name == "check_cli_setup"
    assert messages[1].content.endswith("(exit code 1)")


def test_gemini_server_streams_function_calls_and_reads_function_responses() -> None:
    with GeminiServer(PlayList(["ls"], answer="done")) as server:
        body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
                "tools": [{"functionDeclarations": [{"name": "run_shell_command", "parameters": {}}]}]}
        url = f"{server.base_url}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        reply = httpx.post(url, json=body, timeout=10)
        (chunk,) = sse_events(reply.text)
        part = chunk["candidates"][0]["content"]["parts"][0]["functionCall"]
        assert part["name"] == "run_shell_command" and part["args"] == {"command": "ls"}
        assert chunk["candidates"][0]["finishReason"] == "STOP"
        body["contents"] += [{"role": "model", "parts": [{"functionCall": part}]},
                             {"role": "user", "parts": [{"functionResponse": {
                                 "id": part["id"], "name": "run_shell_command",
                                 "response": {"output": "Output: x\nExit Code: 2"}}}]}]
        whole = httpx.post(f"{server.base_url}/v1beta/models/gemini-2.5-pro:generateContent", json=body, timeout=10)
    assert whole.json()["candidates"][0]["content"]["parts"] == [{"text": "done"}]
    assert server.turns[1].messages[-1].content.endswith("(exit code 2)")


@pytest.mark.parametrize(("status", "code"), [(429, "rate_limit_exceeded"), (401, "invalid_api_key")])
def test_responses_server_faults_carry_the_openai_error_body(status: int, code: str) -> None:
    with ResponsesServer(PlayList([]), faults=(status,)) as server:
        reply = httpx.post(f"{server.base_url}/responses", json={"input": []}, timeout=10)
    assert reply.status_code == status
    assert reply.json()["error"]["code"] == code and set(reply.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(("status", "name"), [(429, "RESOURCE_EXHAUSTED"), (503, "UNAVAILABLE"), (400, "INVALID_ARGUMENT")])
def test_gemini_server_faults_carry_google_s_error_model(status: int, name: str) -> None:
    with GeminiServer(PlayList([]), faults=(status,)) as server:
        reply = httpx.post(f"{server.base_url}/v1beta/models/m:generateContent", json={"contents": []}, timeout=10)
    assert reply.status_code == status
    assert reply.json()["error"]["code"] == status and reply.json()["error"]["status"] == name


def test_scenario_tools_become_the_commands_that_do_the_same() -> None:
    assert shell_move(ToolCall.of("", "sign_in_cli", {"name": "gh"})) == "gh auth login --web"  # its sign-in flow
    assert shell_move(ToolCall.of("", "check_cli_setup", {"name": "gh"})) == "gh auth status"
    assert shell_move(ToolCall.of("", "read_file", {"path": "docs/a b.md"})) == "cat 'docs/a b.md'"
    assert shell_move(ToolCall.of("", "ask_user", {})) is None


def timed_post(url: str, body: dict[str, Any], **headers: str) -> tuple[float, float]:
    """POST ``body`` to ``url``: this process's monotonic clock before sending and after the reply."""
    before = time.monotonic()
    assert httpx.post(url, json=body, headers=headers, timeout=10).status_code == 200
    return before, time.monotonic()


def test_responses_server_records_when_each_call_s_result_came_back() -> None:
    model = PlayList([ToolCall.of("c1", "run_command", {"command": "gh auth status"})])
    with ResponsesServer(model) as server:
        url = f"{server.base_url}/responses"
        first = {"model": "m", "input": [], "tools": [{"type": "function", "name": "exec_command"}]}
        timed_post(url, first)
        assert server.arrivals.result_at("c1") is None  # played, not yet run
        later = {**first, "input": [
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd": "gh auth status"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 1\nOutput:\nno"}]}
        before, after = timed_post(url, later)
        timed_post(url, later)  # the same history again: the result's first arrival stands
    assert len(server.arrivals.turns) == 3 and server.arrivals.turns == sorted(server.arrivals.turns)
    assert before <= server.arrivals.results["c1"] <= after
    assert server.arrivals.result_at("c1") == server.arrivals.turns[1] == server.requests[1].arrived_s


def test_gemini_server_records_when_each_call_s_result_came_back() -> None:
    with GeminiServer(PlayList(["ls"], answer="done")) as server:
        url = f"{server.base_url}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
                                "tools": [{"functionDeclarations": [{"name": "run_shell_command", "parameters": {}}]}]}
        reply = httpx.post(url, json=body, timeout=10)
        part = sse_events(reply.text)[0]["candidates"][0]["content"]["parts"][0]["functionCall"]
        body["contents"] += [{"role": "model", "parts": [{"functionCall": part}]},
                             {"role": "user", "parts": [{"functionResponse": {
                                 "id": part["id"], "name": "run_shell_command", "response": {"output": "Output: x"}}}]}]
        before, after = timed_post(url, body)
    assert before <= (server.arrivals.result_at(part["id"]) or 0.0) <= after


def test_messages_server_records_when_each_tool_use_s_result_came_back() -> None:
    agent = make_agent("improviser", (ToolCall.of("", "check_cli_setup", {"name": "gh"}),), subject="gh")
    with ScriptedMessagesServer(lambda: agent, cwd="/work") as api:
        url = f"{api.url}/v1/messages"
        body: dict[str, Any] = {"model": "claude-scripted", "tools": [{"name": "Bash", "input_schema": {}}],
                                "messages": [{"role": "user", "content": "What is the description of cli/cli?"}]}
        timed_post(url, body, **{"X-Claude-Code-Session-Id": "s1"})
        (move,) = api.moves_of("s1")
        assert api.arrivals.result_at(move.tool_use_id) is None
        body["messages"] += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": move.tool_use_id, "name": move.tool,
                                               "input": dict(move.arguments)}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": move.tool_use_id, "is_error": True,
                                          "content": "Exit code 1\nYou are not logged into any GitHub hosts."}]}]
        before, after = timed_post(url, body, **{"X-Claude-Code-Session-Id": "s1"})
    assert before <= (api.arrivals.result_at(move.tool_use_id) or 0.0) <= after
    assert len(api.arrivals.turns) == 2


def test_servers_stop_and_free_their_port() -> None:
    server = ResponsesServer(PlayList([])).start()
    url = server.base_url
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/responses", json={}, timeout=2)


@pytest.mark.slow
def test_real_codex_retries_a_server_error_and_gemini_a_503(tmp_path: Path) -> None:
    from tests.integrations.coding_agents.agent_worlds import CodexWorld, GeminiWorld

    codex_world, gemini_world = CodexWorld(tmp_path / "c"), GeminiWorld(tmp_path / "g")
    try:
        codex = codex_world.run(PlayList(["ls"], answer="A-CODEX"), "List.", faults=(500,))
        assert codex.exit_code == 0 and "A-CODEX" in codex.stdout
        assert len(codex.server.requests) == len(codex.server.turns) + 1  # the fault, then the retry
        gemini = gemini_world.run(PlayList(["ls"], answer="A-GEMINI"), "List.", faults=(503,))
        assert gemini.exit_code == 0 and "A-GEMINI" in gemini.stdout
        assert len(gemini.server.requests) == len(gemini.server.turns) + 1
    finally:
        codex_world.close()
        gemini_world.close()
