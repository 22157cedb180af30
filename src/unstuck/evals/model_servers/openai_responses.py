"""The OpenAI Responses API, streamed: what Codex CLI posts to a model provider configured with
``wire_api = "responses"`` (``POST {base_url}/responses``, ``"stream": true``,
``Accept: text/event-stream``; measured on ``codex exec`` 0.171.0).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Request (the fields read here; OpenAI API reference, "Responses: create"):
``input`` is a list of items: ``{"type": "message", "role": "developer"|"system"|"user"|
"assistant", "content": [{"type": "input_text"|"output_text", "text": ...}]}``,
``{"type": "function_call", "call_id", "name", "arguments"}`` (arguments a JSON string),
``{"type": "function_call_output", "call_id", "output"}`` (a string, or a list of
``input_text`` parts), and ``reasoning`` items (skipped); ``instructions`` is the system text;
``tools`` lists ``{"type": "function", "name", "description", "parameters"}`` (other tool types,
such as ``web_search`` or ``namespace``, are not function tools and are not offered to the model).

Reply (OpenAI API reference, "Streaming events" for Responses): ``response.created``,
``response.in_progress``, then per output item ``response.output_item.added``, for a message
``response.content_part.added``, ``response.output_text.delta``, ``response.output_text.done``,
``response.content_part.done``, for a function call ``response.function_call_arguments.delta``
and ``.done``, then ``response.output_item.done``; last ``response.completed`` with the whole
response (``id``, ``status: "completed"``, ``output``, ``usage``). Codex reads
``output_item.done`` items and ``response.completed`` (codex-rs/codex-api/src/sse/responses.rs:
a stream that closes before ``response.completed`` is an error to it).

Errors: ``{"error": {"message", "type", "param", "code"}}`` with the status, as the OpenAI API's
error-codes guide lists them (401 ``invalid_api_key``, 429 ``rate_limit_exceeded``, 500
``server_error``, 503 "overloaded").

Codex's shell tool is ``exec_command`` with the command line in ``cmd`` (its tool list as sent
by 0.171.0); its output states ``Process exited with code N`` (read by
:meth:`ResponsesServer.exit_code_of`).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from unstuck.core.tools import ToolCall
from unstuck.evals.model_servers.base import ModelServer, RecordedRequest, ShellTool, Turn, WireReply
from unstuck.toolkit.models import Message, ModelReply, Role

__all__ = ["ResponsesServer"]

_EXIT = re.compile(r"^Process exited with code (-?\d+)\s*$", re.MULTILINE)

#: (type, code, message) per status: the OpenAI API error-codes guide's wording.
_ERRORS: Mapping[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key",
          "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded",
          "Rate limit reached for requests. Please try again in 20s."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


class ResponsesServer(ModelServer):
    """A scripted OpenAI Responses API; point a Codex model provider's ``base_url`` at
    :attr:`base_url`."""

    shell = ShellTool("exec_command", "cmd")
    #: Codex's words for a call a hook refused (0.171.0: its tool router's error).
    refusals = ("Command blocked by PreToolUse hook:",)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (Codex appends ``/responses``)."""
        return f"{self.origin}/v1"

    def exit_code_of(self, output: str) -> int | None:
        """The code in Codex's ``Process exited with code N`` line."""
        found = _EXIT.search(output)
        return int(found.group(1)) if found else None

    def error_body(self, status: int) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}`` for ``status``."""
        kind, code, message = _ERRORS.get(status, ("server_error", None, f"HTTP {status}"))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def read_turn(self, body: Mapping[str, Any]) -> Turn:
        """The model's view of one ``POST /responses`` body."""
        messages: list[Message] = []
        names: dict[str, str] = {}
        if isinstance(body.get("instructions"), str) and body["instructions"]:
            messages.append(Message(Role.SYSTEM, body["instructions"]))
        for item in body.get("input") or []:
            if not isinstance(item, Mapping):
                continue
            kind = item.get("type", "message")
            if kind == "message":
                role = {"developer": Role.SYSTEM, "system": Role.SYSTEM, "assistant": Role.ASSISTANT}.get(
                    str(item.get("role")), Role.USER)
                messages.append(Message(role, _text_of(item.get("content"))))
            elif kind == "function_call":
                call_id, name = str(item.get("call_id", "")), str(item.get("name", ""))
                names[call_id] = name
                try:
                    arguments = json.loads(item.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                call = self.from_agent(call_id, name, arguments if isinstance(arguments, Mapping) else {})
                if messages and messages[-1].role is Role.ASSISTANT and not messages[-1].content:
                    last = messages.pop()
                    messages.append(Message(Role.ASSISTANT, "", (*last.tool_calls, call)))
                else:
                    messages.append(Message(Role.ASSISTANT, "", (call,)))
            elif kind == "function_call_output":
                call_id = str(item.get("call_id", ""))
                messages.append(self.tool_result(call_id, names.get(call_id, ""), _text_of(item.get("output"))))
        declarations = [
            (str(t.get("name")), str(t.get("description", "")), t.get("parameters") or {})
            for t in body.get("tools") or [] if isinstance(t, Mapping) and t.get("type") == "function"
        ]
        return Turn(tuple(messages), self.tool_specs(declarations), str(body.get("model", "")))

    def answer(self, request: RecordedRequest) -> WireReply:
        """``POST …/responses``: the model's reply as a stream (or one JSON response when the
        request did not ask to stream); anything else: 404 with the API's error body."""
        body = request.body
        if request.method != "POST" or not request.path.split("?")[0].endswith("/responses") or not isinstance(
                body, Mapping):
            return WireReply(404, "application/json", (json.dumps(self.error_body(404)).encode(),))
        fault = self.fault()
        if fault is not None:
            return fault
        reply = self.ask(self.read_turn(body))
        response_id = f"resp_{uuid.uuid4().hex}"
        model = str(body.get("model", ""))
        items = self._items(reply)
        created = int(time.time())
        shell: dict[str, Any] = {
            "id": response_id, "object": "response", "created_at": created, "model": model, "status": "in_progress",
            "output": [], "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)), "tool_choice": "auto",
            "error": None, "incomplete_details": None, "usage": None,
        }
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        done = {**shell, "status": "completed", "output": items, "usage": usage}
        if not body.get("stream"):
            return WireReply(200, "application/json", (json.dumps(done).encode(),))
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": shell},
            {"type": "response.in_progress", "response": shell},
        ]
        for index, item in enumerate(items):
            events.extend(self._item_events(index, item))
        events.append({"type": "response.completed", "response": done})
        for number, event in enumerate(events):
            event["sequence_number"] = number
        return WireReply(200, "text/event-stream", self.sse(events, named=True), (("Cache-Control", "no-cache"),))

    @staticmethod
    def _items(reply: ModelReply) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if reply.content:
            items.append({
                "id": f"msg_{uuid.uuid4().hex}", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
            })
        call: ToolCall
        for call in reply.tool_calls:
            items.append({
                "id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": "completed",
                "call_id": call.id, "name": call.tool, "arguments": json.dumps(call.arguments),
            })
        return items

    @staticmethod
    def _item_events(index: int, item: Mapping[str, Any]) -> list[dict[str, Any]]:
        item_id = item["id"]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            opening = {**item, "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": []}
            return [
                {"type": "response.output_item.added", "output_index": index, "item": opening},
                {"type": "response.content_part.added", "item_id": item_id, "output_index": index,
                 "content_index": 0, "part": part},
                {"type": "response.output_text.delta", "item_id": item_id, "output_index": index,
                 "content_index": 0, "delta": text, "logprobs": []},
                {"type": "response.output_text.done", "item_id": item_id, "output_index": index,
                 "content_index": 0, "text": text, "logprobs": []},
                {"type": "response.content_part.done", "item_id": item_id, "output_index": index,
                 "content_index": 0, "part": {**part, "text": text}},
                {"type": "response.output_item.done", "output_index": index, "item": item},
            ]
        return [
            {"type": "response.output_item.added", "output_index": index,
             "item": {**item, "status": "in_progress", "arguments": ""}},
            {"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index,
             "delta": item["arguments"]},
            {"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index,
             "name": item["name"], "arguments": item["arguments"]},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]
