"""The loopback server under every scripted model API, and what it plays.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A :class:`ModelServer` listens on ``127.0.0.1`` (a free port), records every request
(:attr:`ModelServer.requests`), reads each model turn the agent asks for into unstuck's own
conversation (:class:`Turn`: :class:`~unstuck.toolkit.models.Message` objects and the offered
tools as :class:`~unstuck.toolkit.specs.ToolSpec` objects), asks its
:class:`~unstuck.toolkit.models.Model` for the reply, and writes the reply back in the API's
wire format (a subclass per API: :mod:`.openai_responses`, :mod:`.gemini`).

The agent's shell tool is shown to the model under one name, ``run_command`` with a
``command`` argument (:data:`SHELL_ALIAS`: the name the reference agents of
:mod:`unstuck.evals.agents` and the standard tools use), so one reference agent drives every
CLI; a call the model makes to ``run_command`` goes to the agent as its own shell tool
(Codex's ``exec_command`` ``cmd``, Gemini CLI's ``run_shell_command`` ``command``), and the
agent's earlier shell calls read back as the calls the model made. The reference agents' other
scenario tools (:func:`unstuck.toolkit.workspace.standard_tools`) go to the agent as the shell
command that does the same (:func:`shell_move`): ``check_cli_setup`` as ``NAME auth status``,
``sign_in_cli`` as the CLI's sign-in flow (:attr:`~unstuck.toolkit.workspace.CliFacts.sign_in_flow`,
what ``sign_in_cli`` itself runs: ``gh auth login --web``), ``install_cli`` as its install
command, ``web_search`` and ``fetch_url`` as the same GET with ``curl``, ``search_files`` as
``find``, ``read_file`` as ``cat``. A shell result reads, for the
model, as the agent's own text with ``(exit code N)`` added when the agent's text says the
command exited non-zero (:meth:`ModelServer.exit_code_of`, per agent), which is how the
reference agents tell a failure (:data:`unstuck.evals.agents.FAILURE_MARKERS`).

:class:`PlayList` is the simplest model: a list of moves played in order whatever comes back.

When things arrive: each request is stamped with this process's monotonic clock as it arrives
(:attr:`RecordedRequest.arrived_s`), and :class:`Arrivals` keeps, per model turn, when its request
arrived and, per tool call, when its result first reached the server (a tool call's result goes
back with the agent's next request): the end of that call as the server can see it. The same
:class:`Arrivals` serves :class:`unstuck.evals.messages_api.ScriptedMessagesServer`.

Faults: ``faults=(429, 500)`` answers the next model turns with those statuses and the API's
own error body (each subclass's :meth:`ModelServer.error_body`, from the vendor's error
reference) before the model is asked.

Nothing here listens on anything but the loopback address; :meth:`ModelServer.stop` (or leaving
the ``with`` block) shuts the server and its thread down.
"""

from __future__ import annotations

import http.server
import json
import shlex
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from unstuck.core.tools import ToolCall
from unstuck.toolkit.models import Message, Model, ModelReply, Role
from unstuck.toolkit.specs import ToolSpec, run_elsewhere
from unstuck.toolkit.workspace import KNOWN_CLIS

__all__ = [
    "SHELL_ALIAS",
    "SHELL_ARGUMENT",
    "Arrivals",
    "ModelServer",
    "PlayList",
    "RecordedRequest",
    "ShellTool",
    "Turn",
    "WireReply",
    "shell_call",
    "shell_move",
]

#: The name a model calls the agent's shell tool by, whatever the agent names it.
SHELL_ALIAS = "run_command"
#: Its one argument: the command line.
SHELL_ARGUMENT = "command"

_SHELL_SPEC = ToolSpec(
    SHELL_ALIAS, run_elsewhere, description="Run a shell command line in the agent's working folder.",
    parameters={"type": "object", "properties": {SHELL_ARGUMENT: {"type": "string"}}, "required": [SHELL_ARGUMENT]},
    command_argument=SHELL_ARGUMENT,
)


def shell_call(command: str, call_id: str = "") -> ToolCall:
    """A model's call of the agent's shell tool running ``command`` (as :data:`SHELL_ALIAS`)."""
    return ToolCall.of(call_id, SHELL_ALIAS, {SHELL_ARGUMENT: command})


def shell_move(call: ToolCall) -> str | None:
    """The shell command line that makes a reference agent's scenario-tool ``call`` (module doc),
    or ``None`` for a tool that is not one of them."""
    args = call.arguments
    name = str(args.get("name") or "")
    facts = KNOWN_CLIS.get(name)
    if call.tool == SHELL_ALIAS:
        return str(args.get(SHELL_ARGUMENT, ""))
    if call.tool == "check_cli_setup":
        return f"{shlex.quote(name)} auth status"
    if call.tool == "sign_in_cli":
        flow = facts.sign_in_flow or facts.sign_in if facts is not None else None
        return flow or f"{shlex.quote(name)} auth login"
    if call.tool == "install_cli":
        return facts.install if facts is not None and facts.install else f"sudo apt-get install -y {shlex.quote(name)}"
    if call.tool == "web_search":
        url = "https://html.duckduckgo.com/html/?" + urllib.parse.urlencode({"q": str(args.get("query", ""))})
        return f"curl -sS --max-time 10 {shlex.quote(url)}"
    if call.tool == "fetch_url":
        return f"curl -sS --max-time 10 {shlex.quote(str(args.get('url', '')))}"
    if call.tool == "search_files":
        return f"find . -ipath {shlex.quote('*' + str(args.get('query', '')).strip('*') + '*')} -type f"
    if call.tool == "read_file":
        return f"cat {shlex.quote(str(args.get('path', '')))}"
    return None


@dataclass(frozen=True, slots=True)
class ShellTool:
    """How an agent names its shell tool and the tool's command-line argument."""

    name: str
    argument: str


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One HTTP request the server received.

    Attributes:
        method: ``"POST"``, ``"GET"``.
        path: the request target with its query (``"/v1/responses"``).
        headers: (name, value) pairs as sent.
        body: the JSON body decoded, or ``None`` (no body, or not JSON).
        arrived_s: when it arrived, in seconds of this process's monotonic clock
            (:func:`time.monotonic`).
    """

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: Any
    arrived_s: float = 0.0

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (any case), or ``None``."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


@dataclass(frozen=True, slots=True)
class Turn:
    """One model turn an agent asked for, as the model reads it.

    Attributes:
        messages: the conversation (system, user, assistant with tool calls, tool results).
        tools: the tools the agent offered (its shell tool as :data:`SHELL_ALIAS`); empty
            when the request offered none (a side request: a title, a routing question).
        model: the model name the agent asked for.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    model: str = ""


@dataclass(frozen=True, slots=True)
class WireReply:
    """An HTTP answer: status, content type, and the body in the chunks to write (each flushed:
    a server-sent event per chunk for a stream)."""

    status: int
    content_type: str
    chunks: tuple[bytes, ...]
    headers: tuple[tuple[str, str], ...] = ()


class Arrivals:
    """When a scripted model server saw things arrive, in seconds of this process's monotonic
    clock (:func:`time.monotonic`, the clock a harness in this process reads too).

    Attributes:
        turns: when each model turn's request arrived, in order.
        results: for each tool call id, when its result first reached the server (the request
            that carried it back arrived); a call whose result never came back is absent.

    The server records under its own lock (:meth:`record`); readers read after the run.
    """

    def __init__(self) -> None:
        self.turns: list[float] = []
        self.results: dict[str, float] = {}

    def record(self, at: float, result_ids: Iterable[str]) -> None:
        """One model turn's request arrived at ``at`` carrying the results of ``result_ids``;
        a result seen before (each request repeats the conversation) keeps its first time."""
        self.turns.append(at)
        for call_id in result_ids:
            self.results.setdefault(call_id, at)

    def result_at(self, call_id: str) -> float | None:
        """When the result of ``call_id`` first reached the server, or ``None``: it never did."""
        return self.results.get(call_id)


@dataclass
class PlayList:
    """A model that plays ``moves`` in order, one per model turn that offers tools, whatever
    comes back; then answers ``answer``. A turn without tools (a side request) gets ``answer``.

    A move is a command line (a :data:`SHELL_ALIAS` call running it), a
    :class:`~unstuck.core.tools.ToolCall` (any tool by the agent's own name), or a whole
    :class:`~unstuck.toolkit.models.ModelReply`.
    """

    moves: Sequence[str | ToolCall | ModelReply]
    answer: str = "Done."
    name: str = "playlist"
    played: int = field(default=0)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        """The next move, or the answer once all are played (or when tools are withheld)."""
        if not tools or self.played >= len(self.moves):
            return ModelReply(content=self.answer)
        move = self.moves[self.played]
        self.played += 1
        if isinstance(move, ModelReply):
            return move
        call = shell_call(move) if isinstance(move, str) else move
        return ModelReply(tool_calls=(call,))


class ModelServer:
    """A scripted model API on ``127.0.0.1``; subclasses speak one API.

    Args:
        model: answers each model turn (a reference agent, a :class:`PlayList`).
        faults: HTTP statuses to answer the next model turns with (each with the API's error
            body), in order, before the model is asked again.

    Attributes:
        requests: every request received, in order.
        turns: every model turn read from the requests, in order (side requests included).
        replies: the model's reply to each turn, in order.
        arrivals: when each turn's request and each tool call's result arrived (:class:`Arrivals`).
    """

    #: The agent's shell tool (set by each subclass).
    shell: ShellTool = ShellTool("shell", "command")

    def __init__(self, model: Model, *, faults: Sequence[int] = ()) -> None:
        self.model = model
        self.faults = list(faults)
        self.requests: list[RecordedRequest] = []
        self.turns: list[Turn] = []
        self.replies: list[ModelReply] = []
        self.arrivals = Arrivals()
        self._lock = threading.Lock()
        self._calls = 0
        self._played: dict[str, ToolCall] = {}  # call id -> the model's own call
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _serve(self) -> None:
                arrived = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                request = RecordedRequest(self.command, self.path, tuple(self.headers.items()), body, arrived)
                with owner._lock:
                    owner.requests.append(request)
                    reply = owner.answer(request)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                for name, value in reply.headers:
                    self.send_header(name, value)
                if len(reply.chunks) <= 1:
                    self.send_header("Content-Length", str(sum(len(c) for c in reply.chunks)))
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()

            def do_POST(self) -> None:
                self._serve()

            def do_GET(self) -> None:
                self._serve()

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="model-server", daemon=True)
        self._started = False

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ModelServer:
        """Start serving (once)."""
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (safe to call twice)."""
        if self._started:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._started = False
        self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- what a subclass defines -------------------------------------------------------------

    def answer(self, request: RecordedRequest) -> WireReply:
        """The reply to one request (under the server's lock)."""
        raise NotImplementedError

    def error_body(self, status: int) -> dict[str, Any]:
        """The API's error body for ``status``."""
        raise NotImplementedError

    def exit_code_of(self, output: str) -> int | None:
        """The exit code the agent's shell-tool output states, or ``None`` when it states none."""
        return None

    #: How the agent words a call its hook refused (the start of the tool result it sends).
    refusals: tuple[str, ...] = ()

    # -- shared ------------------------------------------------------------------------------

    def fault(self) -> WireReply | None:
        """The next scripted fault as a reply, or ``None`` when none is left."""
        if not self.faults:
            return None
        status = self.faults.pop(0)
        return WireReply(status, "application/json", (json.dumps(self.error_body(status)).encode(),))

    def ask(self, turn: Turn) -> ModelReply:
        """Record ``turn`` (and in :attr:`arrivals`, when the request being answered arrived and
        the results it carries), ask the model, record and return its reply (shell calls by the
        agent's own tool name and argument, each with an id when the model gave none). Called
        under the server's lock, from :meth:`answer`: the request being answered is the last
        one recorded."""
        self.turns.append(turn)
        arrived = self.requests[-1].arrived_s if self.requests else time.monotonic()
        self.arrivals.record(arrived, (m.tool_call_id for m in turn.messages if m.tool_call_id))
        reply = self.model.complete(list(turn.messages), list(turn.tools))
        calls = []
        for call in reply.tool_calls:
            self._calls += 1
            own = ToolCall(call.id or f"call_{self._calls:04d}", call.tool, call.arguments_json)
            self._played[own.id] = own
            calls.append(self.to_agent(own))
        reply = ModelReply(content=reply.content, tool_calls=tuple(calls))
        self.replies.append(reply)
        return reply

    def to_agent(self, call: ToolCall) -> ToolCall:
        """A model's call as the agent makes it: a scenario tool (:func:`shell_move`) as the
        agent's shell tool running its command line; any other tool unchanged."""
        line = shell_move(call)
        if line is None:
            return call
        return ToolCall.of(call.id, self.shell.name, {self.shell.argument: line})

    def from_agent(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> ToolCall:
        """An earlier call from the agent's history as the model made it: the call this server
        played under that id, else the agent's shell tool as :data:`SHELL_ALIAS`."""
        played = self._played.get(call_id)
        if played is not None:
            return played
        if name == self.shell.name:
            return shell_call(str(arguments.get(self.shell.argument, "")), call_id)
        return ToolCall.of(call_id, name, arguments)

    def played(self) -> list[tuple[ToolCall, ToolCall]]:
        """Every call played, in order: (the model's call, the call as the agent made it)."""
        return [(own, self.to_agent(own)) for own in self._played.values()]

    def tool_result(self, call_id: str, name: str, output: str, *, error: bool = False) -> Message:
        """A tool's result as the model reads it: the agent's text, with ``(exit code N)`` added
        for a shell result the agent says exited non-zero, and ``Error:`` before a result the
        agent marks as an error or words as a hook's refusal (:attr:`refusals`)."""
        code = self.exit_code_of(output) if name in (self.shell.name, SHELL_ALIAS) else None
        if code:
            output = f"{output}\n(exit code {code})"
        elif (error or output.startswith(self.refusals)) and not output.startswith(("Error:", "error:")):
            output = f"Error: {output}"
        played = self._played.get(call_id)
        shown = played.tool if played is not None else (SHELL_ALIAS if name == self.shell.name else name)
        return Message(Role.TOOL, output, tool_call_id=call_id, name=shown)

    def tool_specs(self, declarations: Sequence[tuple[str, str, Mapping[str, Any]]]) -> tuple[ToolSpec, ...]:
        """The offered tools (name, description, JSON-schema parameters) as the model sees them."""
        specs = []
        for name, description, parameters in declarations:
            if name == self.shell.name:
                specs.append(_SHELL_SPEC)
            else:
                specs.append(ToolSpec(name, run_elsewhere, description=description, parameters=dict(parameters)))
        return tuple(specs)

    @staticmethod
    def sse(events: Sequence[Mapping[str, Any]], *, named: bool) -> tuple[bytes, ...]:
        """Server-sent events, one chunk each (``event: TYPE`` lines when ``named``)."""

        def chunks() -> Iterator[bytes]:
            for event in events:
                data = json.dumps(event, separators=(",", ":"))
                head = f"event: {event['type']}\n" if named else ""
                yield f"{head}data: {data}\n\n".encode()

        return tuple(chunks())
