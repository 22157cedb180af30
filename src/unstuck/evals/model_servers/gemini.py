"""The Gemini API's generate-content methods: what Gemini CLI posts to ``GOOGLE_GEMINI_BASE_URL``
with an API key (``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` for the agent's
turns, ``POST /v1beta/models/MODEL:generateContent`` for its side questions; the key in the
``x-goog-api-key`` header; measured on ``gemini -p`` 0.61.0).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Request (Gemini API reference, "Generating content"): ``contents`` is a list of
``{"role": "user"|"model", "parts": [...]}``; a part is ``{"text"}`` (``"thought": true`` marks
the model's thinking, skipped here), ``{"functionCall": {"name", "args", "id"?}}`` or
``{"functionResponse": {"name", "response", "id"?}}``; ``systemInstruction`` is
``{"parts": [{"text"}]}``; ``tools`` is a list of ``{"functionDeclarations": [{"name",
"description", "parameters" | "parametersJsonSchema"}]}``.

Reply: a ``GenerateContentResponse``: ``{"candidates": [{"content": {"role": "model", "parts":
[...]}, "finishReason": "STOP", "index": 0}], "usageMetadata": {...}, "modelVersion",
"responseId"}``; streamed with ``alt=sse`` as one ``data: {GenerateContentResponse}`` event per
chunk (the text first, then each ``functionCall`` part, the last chunk carrying
``finishReason``).

Errors: Google's error model (AIP-193), as the Gemini API's troubleshooting guide lists the
statuses: ``{"error": {"code", "message", "status"}}`` (400 ``INVALID_ARGUMENT``, 403
``PERMISSION_DENIED``, 404 ``NOT_FOUND``, 429 ``RESOURCE_EXHAUSTED``, 500 ``INTERNAL``, 503
``UNAVAILABLE``, 504 ``DEADLINE_EXCEEDED``).

Gemini CLI's shell tool is ``run_shell_command`` with the command line in ``command``; its
result states ``Exit Code: N`` when the command exited non-zero (read by
:meth:`GeminiServer.exit_code_of`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from unstuck.evals.model_servers.base import ModelServer, RecordedRequest, ShellTool, Turn, WireReply
from unstuck.toolkit.models import Message, ModelReply, Role

__all__ = ["GeminiServer"]

_METHOD = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)")
_EXIT = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)

#: (status name, message) per HTTP status: the Gemini API troubleshooting guide's table.
_ERRORS: Mapping[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    403: ("PERMISSION_DENIED", "Your API key doesn't have the required permissions."),
    404: ("NOT_FOUND", "Requested entity was not found."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: ("INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
}


class GeminiServer(ModelServer):
    """A scripted Gemini API; set ``GOOGLE_GEMINI_BASE_URL`` to :attr:`base_url`."""

    shell = ShellTool("run_shell_command", "command")
    #: Gemini CLI's words for a call or result a hook refused (0.61.0's executeToolWithHooks).
    refusals = ("Tool execution blocked:", "Tool result blocked:", "Agent execution stopped by hook:")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (Gemini CLI appends ``/v1beta/models/…``)."""
        return self.origin

    def exit_code_of(self, output: str) -> int | None:
        """The code in Gemini CLI's ``Exit Code: N`` line."""
        found = _EXIT.search(output)
        return int(found.group(1)) if found else None

    def error_body(self, status: int) -> dict[str, Any]:
        """``{"error": {"code", "message", "status"}}`` for ``status``."""
        name, message = _ERRORS.get(status, ("UNKNOWN", f"HTTP {status}"))
        return {"error": {"code": status, "message": message, "status": name}}

    def read_turn(self, model: str, body: Mapping[str, Any]) -> Turn:
        """The model's view of one generate-content body."""
        messages: list[Message] = []
        system = body.get("systemInstruction")
        if isinstance(system, Mapping):
            text = "".join(str(p.get("text", "")) for p in system.get("parts") or [] if isinstance(p, Mapping))
            if text:
                messages.append(Message(Role.SYSTEM, text))
        pending: dict[str, list[str]] = {}  # function name -> ids of its calls not yet answered
        for number, content in enumerate(body.get("contents") or []):
            if not isinstance(content, Mapping):
                continue
            role = Role.ASSISTANT if content.get("role") == "model" else Role.USER
            texts, calls = [], []
            for index, part in enumerate(content.get("parts") or []):
                if not isinstance(part, Mapping) or part.get("thought"):
                    continue
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif isinstance(part.get("functionCall"), Mapping):
                    fc = part["functionCall"]
                    name = str(fc.get("name", ""))
                    call_id = str(fc.get("id") or f"gemini_{number}_{index}")
                    pending.setdefault(name, []).append(call_id)
                    args = fc.get("args")
                    calls.append(self.from_agent(call_id, name, args if isinstance(args, Mapping) else {}))
                elif isinstance(part.get("functionResponse"), Mapping):
                    fr = part["functionResponse"]
                    name = str(fr.get("name", ""))
                    waiting = pending.get(name) or [""]
                    call_id = str(fr.get("id") or waiting[0])
                    if call_id in waiting:
                        waiting.remove(call_id)
                    response = fr.get("response")
                    failed = isinstance(response, Mapping) and "error" in response and "output" not in response
                    output = response.get("output", response.get("error")) if isinstance(response, Mapping) else None
                    text = output if isinstance(output, str) else json.dumps(response)
                    messages.append(self.tool_result(call_id, name, text, error=failed))
            if texts or calls:
                messages.append(Message(role, "\n".join(texts), tuple(calls)))
        declarations = []
        for tool in body.get("tools") or []:
            for declaration in (tool.get("functionDeclarations") or []) if isinstance(tool, Mapping) else []:
                parameters = declaration.get("parametersJsonSchema") or declaration.get("parameters") or {}
                declarations.append((str(declaration.get("name")), str(declaration.get("description", "")),
                                     parameters))
        return Turn(tuple(messages), self.tool_specs(declarations), model)

    def answer(self, request: RecordedRequest) -> WireReply:
        """``…:generateContent`` (one JSON response) and ``…:streamGenerateContent?alt=sse``
        (server-sent events); anything else: 404 with the API's error body."""
        found = _METHOD.match(request.path)
        if request.method != "POST" or found is None or not isinstance(request.body, Mapping):
            return WireReply(404, "application/json", (json.dumps(self.error_body(404)).encode(),))
        fault = self.fault()
        if fault is not None:
            return fault
        model = found.group("model")
        reply = self.ask(self.read_turn(model, request.body))
        chunks = self._chunks(model, reply)
        if found.group("method") == "generateContent":
            parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
            whole = {**chunks[-1], "candidates": [{**chunks[-1]["candidates"][0],
                                                   "content": {"role": "model", "parts": parts}}]}
            return WireReply(200, "application/json", (json.dumps(whole).encode(),))
        return WireReply(200, "text/event-stream", self.sse(chunks, named=False))

    @staticmethod
    def _chunks(model: str, reply: ModelReply) -> list[dict[str, Any]]:
        response_id = uuid.uuid4().hex[:22]
        parts: list[dict[str, Any]] = []
        if reply.content:
            parts.append({"text": reply.content})
        for call in reply.tool_calls:
            parts.append({"functionCall": {"id": call.id, "name": call.tool, "args": call.arguments}})
        if not parts:
            parts.append({"text": ""})
        chunks = []
        for index, part in enumerate(parts):
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
            if index == len(parts) - 1:
                candidate["finishReason"] = "STOP"
            chunks.append({
                "candidates": [candidate], "modelVersion": model, "responseId": response_id,
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            })
        return chunks
