"""The model side of the loop: messages, the :class:`Model` protocol, and an adapter for any
OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp's server).
Internal: not a supported import path (docs/reference/index.md lists those that are).

The adapter speaks the documented chat-completions wire format through the ``openai`` client:
tools go out as ``{"type": "function", "function": {name, description, parameters}}``; tool
calls come back in ``choices[0].message.tool_calls`` with JSON-encoded ``arguments``; tool
results go back as ``{"role": "tool", "tool_call_id": ..., "content": ...}``.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from unstuck.core.errors import UnstuckError
from unstuck.core.tools import ToolCall
from unstuck.toolkit.specs import ToolSpec

__all__ = [
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "OpenAIChatModel",
    "Role",
    "message_from_json",
    "message_to_json",
]


class ModelError(UnstuckError, RuntimeError):
    """The model could not be reached, or answered something that is not a usable reply."""


class Role(enum.StrEnum):
    """Chat roles."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message.

    ``tool_calls`` is set on assistant messages that call tools; ``tool_call_id`` and
    ``name`` on tool messages that answer one.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


def message_to_json(message: Message) -> str:
    """One message as JSON (how the journal checkpoints a conversation)."""
    return json.dumps({
        "role": message.role.value, "content": message.content,
        "tool_calls": [[c.id, c.tool, c.arguments_json] for c in message.tool_calls],
        "tool_call_id": message.tool_call_id, "name": message.name,
    })


def message_from_json(text: str) -> Message:
    """The inverse of :func:`message_to_json`.

    Raises:
        ValueError: for text that is not such a message (naming what is wrong).
    """
    try:
        data = json.loads(text)
        return Message(
            Role(data["role"]), str(data["content"]),
            tuple(ToolCall(str(i), str(t), str(a)) for i, t, a in data.get("tool_calls", [])),
            data.get("tool_call_id"), data.get("name"),
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a journaled message ({type(exc).__name__}: {exc}): {text[:80]!r}") from None


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What the model said: text, tool calls, or both. No tool calls ends the turn."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


class Model(Protocol):
    """Anything that answers a conversation, optionally calling tools.

    ``complete`` receives the whole conversation and the tools it may call (an empty
    sequence withholds tools) and returns one reply. It raises :class:`ModelError` when it
    cannot answer.
    """

    name: str

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        """Answer the conversation."""
        ...


def _wire_message(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.tool, "arguments": c.arguments_json}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    return wire


def _wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": dict(spec.parameters)},
    }


def _parse_call(index: int, raw: Any) -> ToolCall:
    function = getattr(raw, "function", None)
    name = getattr(function, "name", None)
    if not isinstance(name, str) or not name:
        raise ModelError(f"tool call {index} has no function name")
    arguments_text = getattr(function, "arguments", None) or "{}"
    try:
        arguments = json.loads(arguments_text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ModelError(f"tool call {index} to {name!r} has arguments that are not JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise ModelError(f"tool call {index} to {name!r} has arguments that are not a JSON object")
    call_id = getattr(raw, "id", None) or f"call_{uuid.uuid4().hex[:12]}_{index}"  # unique in the turn
    return ToolCall.of(str(call_id), name, arguments)


class OpenAIChatModel:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model name the server knows (``"llama3.1"``, ``"gpt-4o-mini"``).
        base_url: the server's API root, e.g. ``"http://127.0.0.1:11434/v1"``.
        api_key: the key; local servers accept any string.
        timeout_s: seconds before a request is abandoned (default 120).
        max_retries: the client's own retries of connection errors and 429/5xx (default 2).
        temperature: sampling temperature (default 0).
        seed: a sampling seed sent with every request (servers that support it repeat their
            output for the same seed), or ``None``.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str = "unstuck",
        timeout_s: float = 120.0,
        max_retries: int = 2,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> None:
        import openai  # imported here so the rest of unstuck loads without the client

        self.name = model
        self._temperature = temperature
        self._seed = seed
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries
        )

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        """Send the conversation; return the first choice as a :class:`ModelReply`.

        Raises:
            ModelError: on any client error (connection, HTTP status, timeout, a body that is
                not JSON), an empty choice list, or a tool call whose arguments are not a JSON
                object.
        """
        request: dict[str, Any] = {
            "model": self.name,
            "messages": [_wire_message(m) for m in messages],
            "temperature": self._temperature,
        }
        if self._seed is not None:
            request["seed"] = self._seed
        if tools:
            request["tools"] = [_wire_tool(t) for t in tools]
        try:
            response = self._client.chat.completions.create(**request)
        except Exception as exc:  # the client raises its own errors, and JSON/type errors on garbage
            raise ModelError(f"model {self.name!r}: {type(exc).__name__}: {exc}") from exc
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(f"model {self.name!r} returned no choices")
        message = choices[0].message
        raw_calls = getattr(message, "tool_calls", None) or []
        calls = tuple(_parse_call(i, raw) for i, raw in enumerate(raw_calls))
        return ModelReply(content=message.content or "", tool_calls=calls)
