"""A scripted Anthropic Messages API server on 127.0.0.1: the reference agents' moves played as
Claude Code tool calls, so the real ``claude`` CLI can be driven offline (issue 26, deliver 5).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Claude Code reaches it through its own base-URL setting (``ANTHROPIC_BASE_URL``; any
``ANTHROPIC_API_KEY``). Each ``POST /v1/messages`` of a conversation whose tools include
``Bash`` is answered by one reference agent (:mod:`unstuck.evals.agents`, one per Claude Code
session: the ``X-Claude-Code-Session-Id`` header) reading the conversation as a model reads it;
any other request (a title, a side question) gets a short text. Wire shapes are the API's
(https://docs.anthropic.com/en/api/messages, "Streaming messages"): with ``"stream": true`` a
``text/event-stream`` of ``message_start``, ``ping``, per content block ``content_block_start``,
``content_block_delta`` (``text_delta`` or ``input_json_delta``) and ``content_block_stop``,
then ``message_delta`` (``stop_reason`` ``tool_use`` or ``end_turn``, ``usage``) and
``message_stop``; without it one ``message`` object. Errors are the API's error bodies
(``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}``, "Errors":
400 for a body that is not a request, 404 for another path). ``POST /v1/messages/count_tokens``
answers ``{"input_tokens": N}``.

The reference agents call the scenario tools of :func:`unstuck.toolkit.workspace.standard_tools`;
each move is played as the Claude Code tool that does the same (:func:`claude_move`):
``run_command`` as ``Bash``; ``check_cli_setup``, ``sign_in_cli`` and ``install_cli`` as the
CLI's own commands through ``Bash`` (``gh auth status``, ``gh auth login``, the install
command); ``web_search`` and ``fetch_url`` as the same GET with ``curl`` (Claude Code 2.1.332
defers its web tools behind ``ToolSearch``); ``search_files`` as ``find``; ``read_file`` as
``Read`` on the path under the session's working folder. A tool result goes back to the agent
as a model reads it: its text, and for ``"is_error": true`` the failure in the words the
agents read (``(exit code N)`` after Claude Code's ``Exit code N``, else ``Error:``:
:func:`as_agent_reads`).

When things arrive (:attr:`ScriptedMessagesServer.arrivals`, the
:class:`unstuck.evals.model_servers.base.Arrivals` the other scripted servers keep): each agent
request's arrival on this process's monotonic clock, and for each ``tool_use`` id the arrival of
the first request that carried its ``tool_result`` back (the end of that call as the server sees
it).
"""

from __future__ import annotations

import http.server
import json
import re
import shlex
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unstuck.core.tools import ToolCall
from unstuck.evals.agents import ScriptedAgent
from unstuck.evals.model_servers.base import Arrivals
from unstuck.toolkit.models import Message, ModelReply, Role
from unstuck.toolkit.specs import ToolSpec
from unstuck.toolkit.workspace import KNOWN_CLIS

__all__ = ["Move", "ScriptedMessagesServer", "agent_messages", "as_agent_reads", "claude_move"]

_EXIT_CODE = re.compile(r"\AExit code (-?\d+)")
#: What an agent's side request (no ``Bash`` among the tools) is answered with.
SIDE_REPLY = "OK."


@dataclass(frozen=True, slots=True)
class Move:
    """One tool call the server played: the reference agent's call and Claude Code's."""

    session: str
    agent_call: ToolCall
    tool: str
    arguments: Mapping[str, Any]
    tool_use_id: str


def claude_move(call: ToolCall, cwd: str) -> tuple[str, dict[str, Any]]:
    """The Claude Code tool (name, input) that makes the reference agent's ``call`` (see the module
    doc); ``cwd`` is the session's working folder (``Read`` takes absolute paths)."""
    args = call.arguments
    name = str(args.get("name") or "")
    if call.tool == "run_command":
        return "Bash", {"command": str(args.get("command", "")), "description": "Run a command"}
    if call.tool == "check_cli_setup":
        return "Bash", {"command": f"{shlex.quote(name)} auth status", "description": f"Check {name}'s sign-in"}
    if call.tool == "sign_in_cli":
        facts = KNOWN_CLIS.get(name)
        line = facts.sign_in if facts is not None and facts.sign_in else f"{shlex.quote(name)} auth login"
        return "Bash", {"command": line, "description": f"Sign {name} in"}
    if call.tool == "install_cli":
        facts = KNOWN_CLIS.get(name)
        line = facts.install if facts is not None and facts.install else f"sudo apt-get install -y {shlex.quote(name)}"
        return "Bash", {"command": line, "description": f"Install {name}"}
    if call.tool == "web_search":
        url = "https://html.duckduckgo.com/html/?" + urllib.parse.urlencode({"q": str(args.get("query", ""))})
        return "Bash", {"command": f"curl -sS --max-time 10 {shlex.quote(url)}", "description": "Search the web"}
    if call.tool == "fetch_url":
        return "Bash", {"command": f"curl -sS --max-time 10 {shlex.quote(str(args.get('url', '')))}",
                        "description": "Fetch a page"}
    if call.tool == "search_files":
        pattern = f"*{str(args.get('query', '')).strip('*')}*"
        return "Bash", {"command": f"find . -ipath {shlex.quote(pattern)} -type f", "description": "Find files"}
    if call.tool == "read_file":
        path = str(args.get("path", ""))
        return "Read", {"file_path": path if path.startswith("/") else f"{cwd.rstrip('/')}/{path}"}
    return "Bash", {"command": f"echo {shlex.quote(call.tool)} is not a Claude Code tool", "description": "No-op"}


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return ""


def as_agent_reads(block: Mapping[str, Any]) -> str:
    """A ``tool_result`` block (``content``, ``is_error``) as a model reads it: its text; for
    ``"is_error": true``, Claude Code's leading ``Exit code N`` moved to a closing
    ``(exit code N)``, else ``Error:`` before the text (unless it starts so already)."""
    text = _text_of(block.get("content"))
    if block.get("is_error") is not True:
        return text
    found = _EXIT_CODE.match(text)
    if found is not None:
        return f"{text[found.end():].lstrip()}\n(exit code {found.group(1)})"
    return text if text.startswith(("Error:", "error:")) else f"Error: {text}"


def _input(block: Mapping[str, Any]) -> Mapping[str, Any]:
    given = block.get("input")
    return given if isinstance(given, Mapping) else {}


def agent_messages(messages: Sequence[Mapping[str, Any]], played: Mapping[str, ToolCall]) -> list[Message]:
    """A Messages API conversation as the reference agents read it: user text, the assistant's
    tool calls (as the agent made them, by ``tool_use`` id in ``played``), and each tool result."""
    found: list[Message] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
        if role == "assistant":
            calls = tuple(played.get(str(b.get("id"))) or ToolCall.of(str(b.get("id")), str(b.get("name")), _input(b))
                          for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use")
            found.append(Message(Role.ASSISTANT, _text_of(blocks), calls))
            continue
        for block in blocks:
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "tool_result":
                use = str(block.get("tool_use_id", ""))
                agent_call = played.get(use)
                found.append(Message(Role.TOOL, as_agent_reads(block), tool_call_id=use,
                                     name=agent_call.tool if agent_call is not None else None))
            elif block.get("type") == "text":
                found.append(Message(Role.USER, str(block.get("text", ""))))
    return found


@dataclass
class _Conversation:
    agent: ScriptedAgent
    played: dict[str, ToolCall] = field(default_factory=dict)
    replies: dict[int, dict[str, Any]] = field(default_factory=dict)  # by message count: a retried request


class ScriptedMessagesServer:
    """The server (module doc) on ``127.0.0.1`` and a free port, in a thread.

    Args:
        make_agent: makes the reference agent of a new Claude Code session.
        cwd: the sessions' working folder (for ``Read`` paths).

    Attributes:
        moves: every tool call played, in order.
        answers: each session's final text.
        requests: how many requests came in.
        arrivals: when each agent request (one with ``Bash`` among its tools) arrived, and when
            each ``tool_use`` id's result first came back (module doc).

    Use as a context manager, or :meth:`start` and :meth:`stop`.
    """

    def __init__(self, make_agent: Callable[[], ScriptedAgent], *, cwd: str) -> None:
        self.make_agent, self.cwd = make_agent, cwd
        self.moves: list[Move] = []
        self.answers: dict[str, str] = {}
        self.requests = 0
        self.arrivals = Arrivals()
        self._conversations: dict[str, _Conversation] = {}
        self._lock = threading.Lock()
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (``ANTHROPIC_BASE_URL``)."""
        assert self._httpd is not None, "the server is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> ScriptedMessagesServer:
        """Listen and serve in a background thread."""
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="messages-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedMessagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def moves_of(self, session: str) -> list[Move]:
        """The moves played in one Claude Code session."""
        return [m for m in self.moves if m.session == session]

    def reply(self, body: Mapping[str, Any], session: str, *, arrived_s: float | None = None) -> dict[str, Any]:
        """The assistant ``message`` for one request (module doc); ``arrived_s`` is when the
        request arrived (:func:`time.monotonic`; now by default), for :attr:`arrivals`."""
        tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
        if not any(t.get("name") == "Bash" for t in tools):
            return _message(body, [{"type": "text", "text": SIDE_REPLY}], "end_turn")
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        returned = [str(b.get("tool_use_id", "")) for m in messages if isinstance(m.get("content"), list)
                    for b in m["content"] if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        with self._lock:
            self.arrivals.record(time.monotonic() if arrived_s is None else arrived_s, returned)
            self.requests += 1
            talk = self._conversations.get(session)
            if talk is None:
                talk = self._conversations[session] = _Conversation(self.make_agent())
            if len(messages) in talk.replies:
                return talk.replies[len(messages)]
            said: ModelReply = talk.agent.complete(agent_messages(messages, talk.played), _SOME_TOOL)
            blocks: list[dict[str, Any]] = []
            if said.content:
                blocks.append({"type": "text", "text": said.content})
            for call in said.tool_calls:
                name, arguments = claude_move(call, self.cwd)
                use = f"toolu_{uuid.uuid4().hex[:24]}"
                talk.played[use] = call
                self.moves.append(Move(session, call, name, arguments, use))
                blocks.append({"type": "tool_use", "id": use, "name": name, "input": arguments})
            if not said.tool_calls:
                self.answers[session] = said.content
            made = _message(body, blocks or [{"type": "text", "text": ""}],
                            "tool_use" if said.tool_calls else "end_turn")
            talk.replies[len(messages)] = made
            return made


#: The reference agents' ``complete`` is given a non-empty tool list (an empty one asks for the
#: closing sentence): Claude Code's tools are not the agents', so one stands for all.
_SOME_TOOL: tuple[ToolSpec, ...] = (ToolSpec("run_command", lambda **_: None),)


def _message(body: Mapping[str, Any], blocks: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
            "model": str(body.get("model") or "claude-scripted"), "content": blocks, "stop_reason": stop,
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


def _events(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The stream of server-sent events that delivers ``message``."""
    start = dict(message, content=[], stop_reason=None)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start}),
                                                ("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opened, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        events += [("content_block_start", {"type": "content_block_start", "index": index, "content_block": opened}),
                   ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": index})]
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                  "usage": {"output_tokens": 1}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def _handler(server: ScriptedMessagesServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _json(self, status: int, document: Mapping[str, Any]) -> None:
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, kind: str, message: str) -> None:
            self._json(status, {"type": "error", "error": {"type": kind, "message": message}})

        def do_POST(self) -> None:
            arrived = time.monotonic()
            path = urllib.parse.urlsplit(self.path).path
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                self._error(400, "invalid_request_error", "The request body is not valid JSON.")
                return
            if not isinstance(body, dict):
                self._error(400, "invalid_request_error", "The request body must be a JSON object.")
                return
            if path == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": max(1, len(json.dumps(body.get("messages", []))) // 4)})
                return
            if path != "/v1/messages":
                self._error(404, "not_found_error", f"Not found: {path}")
                return
            if not isinstance(body.get("messages"), list) or not body.get("model"):
                self._error(400, "invalid_request_error", "messages: Field required")
                return
            session = self.headers.get("X-Claude-Code-Session-Id") or "default"
            message = server.reply(body, session, arrived_s=arrived)
            if not body.get("stream"):
                self._json(200, message)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for name, data in _events(message):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler
