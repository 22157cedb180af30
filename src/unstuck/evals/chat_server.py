"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, so a loop written for the
``openai`` client (the README's "Guard your own loop") runs without a model.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Started as a program, it plays a reference agent (:mod:`unstuck.evals.agents`) over the wire::

    python -m unstuck.evals.chat_server                 # replay, on http://127.0.0.1:8808/v1
    python -m unstuck.evals.chat_server --agent retrier --port 0 \\
        --call 'gh_repo_view {"repo": "cli/cli"}' --task "Describe cli/cli"

It prints ``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1`` on its first line (``--port 0``: a free
port) and serves until interrupted (Ctrl-C, SIGTERM). ``--call`` is the agent's plan, one call a
flag (a tool name, a space, the arguments as a JSON object); by default the README example's
one call, ``gh_repo_view {"repo": "cli/cli"}``. The default agent, ``replay``, plays the plan
``--repeat`` times over (10), whatever comes back, as the reference incident kept calling
(seed 000): the guard, not the agent, has to stop it. The other agents judge a result by its
wording (:data:`unstuck.evals.agents.FAILURE_MARKERS`). The agent reads the conversation the client
posts (``messages``, the offered ``tools``) and answers with the calls a model would make; a
request that offers no tools (the README's closing and route-around questions) gets its
answer without calls.

The tests use :class:`ChatServer` in-process as well: it plays back scripted replies, then asks
``responder`` (a function of the request), or, with ``agent``, an unstuck
:class:`~unstuck.toolkit.models.Model` for every request (a fresh one from the ``agent`` factory
for each new conversation: a request with tools and no assistant message yet, so a loop run
twice meets the same agent twice); it records every request body in
:attr:`ChatServer.requests`. A reply is a dict with ``content`` and/or ``tool_calls``
(``[(name, arguments_dict)]``), or ``{"raw": bytes, "status": int}`` to send an arbitrary body
(garbage, errors). Without ``agent``, a request without ``tools`` (a closing call) is answered
with ``closing``. The wire format is OpenAI's Chat Completions object
(https://platform.openai.com/docs/api-reference/chat/object).

Nothing here listens on anything but the loopback address.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from unstuck.core.tools import ToolCall
from unstuck.toolkit.models import Message, Model, Role
from unstuck.toolkit.specs import ToolSpec, run_elsewhere

__all__ = ["DEFAULT_CALL", "DEFAULT_PORT", "ChatServer", "main", "messages_of", "reference_agent", "tools_of"]

#: The port ``python -m unstuck.evals.chat_server`` listens on unless ``--port`` says otherwise.
DEFAULT_PORT = 8808
#: The agent's plan unless ``--call`` says otherwise: the README example's one tool call.
DEFAULT_CALL = ("gh_repo_view", {"repo": "cli/cli"})

Reply = dict[str, Any]


def _text(content: Any) -> str:
    """A message's content as text: a string, ``None``, or a list of content parts
    (``{"type": "text", "text": ...}``; other parts are left out)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    raise ValueError(f"message content is neither text nor a list of parts: {type(content).__name__}")


def messages_of(request: Mapping[str, Any]) -> list[Message]:
    """The ``messages`` of a chat-completions request as unstuck messages.

    Raises:
        ValueError: naming the message (by index) that is not a chat message.
    """
    out = []
    for i, raw in enumerate(request.get("messages") or []):
        try:
            role = Role(raw["role"] if raw["role"] != "developer" else "system")
            calls = tuple(ToolCall.of(str(c["id"]), str(c["function"]["name"]),
                                      json.loads(c["function"].get("arguments") or "{}"))
                          for c in raw.get("tool_calls") or [])
            out.append(Message(role, _text(raw.get("content")), calls, raw.get("tool_call_id"), raw.get("name")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"messages[{i}] is not a chat message ({type(exc).__name__}: {exc})") from None
    return out


def tools_of(request: Mapping[str, Any]) -> list[ToolSpec]:
    """The ``tools`` a request offers, as tool specs the server never runs
    (:func:`unstuck.toolkit.specs.run_elsewhere`).

    Raises:
        ValueError: naming the tool (by index) that is not a function tool.
    """
    specs = []
    for i, raw in enumerate(request.get("tools") or []):
        try:
            function = raw["function"]
            parameters = dict(function.get("parameters") or {"type": "object", "properties": {}})
            specs.append(ToolSpec(str(function["name"]), run_elsewhere,
                                  description=str(function.get("description") or ""), parameters=parameters))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"tools[{i}] is not a function tool ({type(exc).__name__}: {exc})") from None
    return specs


class ChatServer:
    """A chat-completions server on ``127.0.0.1`` (a free port unless ``port``); see the module doc.

    ``base_url`` is ``http://127.0.0.1:PORT/v1`` (what ``OPENAI_BASE_URL`` names); the server runs
    on a thread inside its ``with`` block (or :meth:`serve_forever` on the calling thread).
    """

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        closing: str = "I will re-run the check, then finish.",
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        *,
        agent: Callable[[], Model] | None = None,
        port: int = 0,
    ) -> None:
        self.replies = list(replies)
        self.responder = responder
        self.closing = closing
        self.agent = agent
        self.model: Model | None = None
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    request = json.loads(body)
                    with server._lock:
                        auth = self.headers.get("Authorization")
                        server.requests.append({"path": self.path, "auth": auth, **request})
                        status, payload = server.respond(request)
                except ValueError as exc:  # not JSON, or not a chat request: the API's own error shape
                    status = 400
                    payload = json.dumps({"error": {"message": str(exc), "type": "invalid_request_error"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = int(self._httpd.server_address[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _reply(self, request: dict[str, Any]) -> Reply:
        if self.agent is not None and not self.replies:
            fresh = request.get("tools") and not any(
                isinstance(m, Mapping) and m.get("role") == "assistant" for m in request.get("messages") or [])
            if self.model is None or fresh:
                self.model = self.agent()
            answer = self.model.complete(messages_of(request), tools_of(request) if request.get("tools") else ())
            return {"content": answer.content or None,
                    "tool_calls": [(c.tool, c.arguments) for c in answer.tool_calls]}
        if "tools" not in request:
            return {"content": self.closing}
        if self.replies:
            return self.replies.pop(0)
        if self.responder is not None:
            return self.responder(request)
        return {"content": "finished"}

    def respond(self, request: dict[str, Any]) -> tuple[int, bytes]:
        """The status and body that answer one request (a reply in the Chat Completions format)."""
        reply = self._reply(request)
        if "raw" in reply:
            return int(reply.get("status", 200)), reply["raw"]
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        calls = reply.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{len(self.requests)}_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(calls)
            ]
        body = {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": request.get("model", "test"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return 200, json.dumps(body).encode()

    def serve_forever(self) -> None:
        """Serve on this thread until interrupted, then close the socket."""
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def reference_agent(name: str, calls: Sequence[tuple[str, Mapping[str, Any]]], *, task: str = "",
                    subject: str = "", repeat: int = 10) -> Model:
    """The reference agent ``name`` (:data:`unstuck.evals.agents.AGENTS`) with ``calls`` as its
    plan; ``replay`` plays them ``repeat`` times over.

    Raises:
        KeyError: for an unknown agent name, listing the known ones.
        ValueError: for no calls, or ``repeat`` below 1 for ``replay``.
    """
    from unstuck.evals.agents import make_agent

    plan = [ToolCall.of(f"plan_{i}", tool, dict(arguments)) for i, (tool, arguments) in enumerate(calls)]
    if not plan:
        raise ValueError("the agent needs at least one call in its plan")
    if name == "replay":
        if repeat < 1:
            raise ValueError(f"repeat {repeat}: the replay plays its calls at least once")
        return make_agent(name, plan, subject=subject, task=task, replay=plan * repeat)
    return make_agent(name, plan, subject=subject, task=task)


def _call(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME {"json": "object"}`` → (name, arguments); argparse reports the ``ValueError``."""
    name, _, rest = text.strip().partition(" ")
    try:
        arguments = json.loads(rest or "{}")
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: the arguments after {name!r} are not JSON ({exc})") from None
    if not name or not isinstance(arguments, dict):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a tool name, a space, then a JSON object")
    return name, arguments


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m unstuck.evals.chat_server``: serve a reference agent until interrupted (see
    the module doc); exit status 0 when interrupted, 2 for bad arguments or a port in use."""
    from unstuck.evals.agents import AGENTS

    parser = argparse.ArgumentParser(
        prog="python -m unstuck.evals.chat_server",
        description="A scripted OpenAI-compatible chat-completions server on 127.0.0.1 that plays one of "
                    "unstuck's reference agents, so a loop written for the openai client runs without a model.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (0: a free one; "
                                                                         f"default {DEFAULT_PORT})")
    parser.add_argument("--agent", default="replay", choices=list(AGENTS),
                        help="the reference agent to play (default: replay, which makes the plan's calls --repeat "
                             "times over whatever comes back)")
    parser.add_argument("--repeat", type=int, default=10, help="how often replay plays the plan (default 10)")
    parser.add_argument("--call", dest="calls", action="append", type=_call, metavar="'NAME {JSON}'",
                        help="a call of the agent's plan, in order (repeat the flag); default: "
                             f"{DEFAULT_CALL[0]} {json.dumps(DEFAULT_CALL[1])}")
    parser.add_argument("--task", default="Describe cli/cli", help="the task, for the agent's closing sentence")
    parser.add_argument("--subject", default="", help="what a blocker would be on (the improviser's workarounds)")
    args = parser.parse_args(argv)
    calls = args.calls or [DEFAULT_CALL]
    try:
        reference_agent(args.agent, calls, task=args.task, subject=args.subject, repeat=args.repeat)  # fails early
    except ValueError as exc:
        parser.error(str(exc))

    def agent() -> Model:
        return reference_agent(args.agent, calls, task=args.task, subject=args.subject, repeat=args.repeat)

    try:
        server = ChatServer(agent=agent, port=args.port)
    except OSError as exc:
        print(f"chat_server: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"OPENAI_BASE_URL={server.base_url}", flush=True)
    print(f"the {args.agent} reference agent answers chat completions there; Ctrl-C stops it", file=sys.stderr,
          flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
