"""A chat-completions server on 127.0.0.1 that speaks the OpenAI wire format.

It plays back scripted replies, then asks ``responder`` (a function of the request), and
records every request body. A reply is a dict with
``content`` and/or ``tool_calls`` ([(name, arguments_dict)]), or ``{"raw": bytes, "status": int}``
to send an arbitrary body (garbage, errors). Requests without ``tools`` (a closing call) are
answered with ``closing``.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable
from typing import Any


class ChatServer:
    def __init__(
        self,
        replies: list[dict[str, Any]],
        closing: str = "I will re-run the check, then finish.",
        responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.responder = responder
        self.closing = closing
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = json.loads(body)
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **request})
                status, payload = server.respond(request)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def respond(self, request: dict[str, Any]) -> tuple[int, bytes]:
        if "tools" not in request:
            reply: dict[str, Any] = {"content": self.closing}
        elif self.replies:
            reply = self.replies.pop(0)
        elif self.responder is not None:
            reply = self.responder(request)
        else:
            reply = {"content": "finished"}
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

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
