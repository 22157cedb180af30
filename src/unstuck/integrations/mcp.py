"""unstuck for MCP, client side: every ``tools/call`` of an MCP :class:`mcp.ClientSession`
(any server, third-party included) goes through one :class:`unstuck.Guard` (``unstuck[mcp]``).

Usage (3 lines inside your session; ``mcp.ClientSession`` and ``mcp.client.stdio.stdio_client``
as the MCP SDK documents them)::

    guarded = await guarded_session(session, task="Describe cli/cli")   # lists the tools
    result = await guarded.call_tool("run_command", {"command": "gh repo view cli/cli"})
    # a blocked turn raises unstuck.integrations.common.Blocked: ask your user blocked.escalation.text

What it does with each call:

* the tools come from ``session.list_tools()`` (every page), each described to the guard by
  :func:`~unstuck.integrations.common.spec_for` with its ``inputSchema`` (a string
  ``command`` argument makes it a shell tool whose subject is the program it runs);
* ``guard.before``, then the real ``session.call_tool`` under a deadline (``deadline_s``: the
  SDK's ``read_timeout_seconds`` and an anyio cancel scope), then ``guard.aafter`` with the
  ``CallToolResult`` read as the MCP specification's "Tools" section defines it: ``isError``
  says whether the call failed (its word, not a guess), the ``text`` content items are what
  is classified, and ``structuredContent`` is shown as JSON when there is no text. A server
  that crashed mid-call, a closed connection or a call past its deadline is a failed result
  the guard assesses like any other (never a traceback, never a hang);
* a declared situation is read ONLY from the result's ``_meta`` under
  :data:`SITUATION_META_KEY` (a reverse-DNS key, as the specification's ``_meta`` rules
  require) and ONLY when the user marked the server ``trusted``; from any other server,
  ``_meta`` and ``structuredContent`` are data and everything is classified (DESIGN.md:
  only a tool's own code declares). A malformed declaration from a trusted server is a loud
  ``ValueError`` naming the tool;
* ``continue``: the call returns a ``CallToolResult`` whose text is what the guard hands the
  model (the tool's text with unstuck's guidance), ``isError`` as the server sent it,
  ``structuredContent`` as sent unless its JSON is over :data:`OUTPUT_LIMIT_BYTES` (then
  dropped), and ``_meta`` as sent, except that an untrusted server's ``io.unstuck/*`` keys are
  removed (:func:`meta_for_model`: a proxy never passes on an untrusted declaration);
* huge outputs: the text is cut to :data:`OUTPUT_LIMIT_BYTES` (64 000 UTF-8 bytes, the default
  of :func:`unstuck.core.tools.truncate_content`: head and tail kept, the cut marked) before the
  guard reads it, so a tool that returns 20 MB never reaches the model whole;
* ``refuse``: a ``CallToolResult`` with ``isError: true`` and the refusal (nothing was sent to
  the server); ``retry``: it waits ``delay_s`` on the guard's clock and calls again (the guard
  retries only a read-only or idempotent tool, by its annotations, or a call never sent: a
  tool without annotations may be destructive, so a call of it that timed out or whose server
  died is never sent twice, :func:`specs_of`); ``escalate``: it raises
  :class:`~unstuck.integrations.common.Blocked` (the question, and the guard's state) for the
  host application to ask its user.

Retries never stack: the MCP SDK's ``ClientSession.call_tool`` does not retry a call (it
sends one ``tools/call`` request and waits for its response or its read timeout), so
unstuck's retry table is the only one. "I've done it": ``await guarded.answer("done")`` runs
the blocker's probe (``Guard.answer``) and lifts the latch, and the next ``call_tool`` goes on.

:mod:`unstuck.integrations.mcp_proxy` (``unstuck mcp-proxy -- CMD…``) puts this wrapper in front of an
unmodified stdio server for clients such as desktop assistants.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from unstuck.core.situations import validate_situation
from unstuck.core.tools import Effect, ToolCall, ToolResult, truncate_content
from unstuck.decide.escalation import Answer
from unstuck.decide.outcome import TurnStatus
from unstuck.guard.guard import Action, Decision, Guard
from unstuck.integrations.common import Blocked, read_answer, spec_for
from unstuck.toolkit.specs import ToolSpec

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult, Tool

__all__ = ["DEFAULT_DEADLINE_S", "OUTPUT_LIMIT_BYTES", "SITUATION_META_KEY", "UNSTUCK_META_PREFIX", "GuardedSession",
           "guarded_session", "meta_for_model", "result_of", "specs_of"]

#: Where a trusted server declares a situation: ``CallToolResult._meta["io.unstuck/situation"]``,
#: a mapping with :class:`unstuck.core.situations.Situation`'s fields (``kind``, ``subject``,
#: ``interactive``, ``unblock``, ``probe``...). The MCP specification reserves ``_meta`` keys
#: with a prefix ``modelcontextprotocol``/``mcp`` and asks others for a reverse-DNS prefix.
SITUATION_META_KEY = "io.unstuck/situation"
#: The prefix of every ``_meta`` key unstuck reads or writes (``io.unstuck/situation``,
#: ``io.unstuck/status``): removed from an untrusted server's results (:func:`meta_for_model`).
UNSTUCK_META_PREFIX = "io.unstuck/"
#: The most a tool result's text may take (UTF-8 bytes) before it is cut, head and tail kept,
#: with the cut marked (:func:`unstuck.core.tools.truncate_content` and its default limit).
OUTPUT_LIMIT_BYTES = 64_000
#: Seconds a ``tools/call`` may take before it is a failed (timed-out) result.
DEFAULT_DEADLINE_S = 120.0


def _text_of(result: CallToolResult) -> str:
    parts: list[str] = []
    for item in result.content:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(str(getattr(item, "text", "")))
        else:
            parts.append(f"[{kind} content]")
    if not any(p.strip() for p in parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False, default=str)]
    return truncate_content("\n".join(parts), OUTPUT_LIMIT_BYTES)


def meta_for_model(meta: Mapping[str, Any] | None, *, trusted: bool) -> dict[str, Any] | None:
    """A result's ``_meta`` as the guarded session hands it on: a trusted server's as sent; an
    untrusted server's without any :data:`UNSTUCK_META_PREFIX` key (so that a proxy never
    passes an untrusted server's declaration on to a client that trusts the proxy); ``None``
    when nothing is left."""
    if meta is None:
        return None
    kept = {k: v for k, v in meta.items() if trusted or not str(k).startswith(UNSTUCK_META_PREFIX)}
    return kept or None


def _structured_for_model(structured: dict[str, Any] | None) -> dict[str, Any] | None:
    """``structuredContent`` as handed on: dropped when its JSON is over :data:`OUTPUT_LIMIT_BYTES`."""
    if structured is None:
        return None
    size = len(json.dumps(structured, ensure_ascii=False, default=str).encode("utf-8"))
    return structured if size <= OUTPUT_LIMIT_BYTES else None


def result_of(tool: str, result: CallToolResult, *, trusted: bool) -> ToolResult:
    """One MCP ``CallToolResult`` as a :class:`~unstuck.core.tools.ToolResult`: ``ok`` is ``not
    isError`` (the server's word: ``status_stated``), ``content`` the text items joined
    (``structuredContent`` as JSON when there is no text), cut to :data:`OUTPUT_LIMIT_BYTES`
    (:func:`unstuck.core.tools.truncate_content`: head and tail, the cut marked), ``declared`` the situation under
    :data:`SITUATION_META_KEY` in ``_meta`` when ``trusted``, else ``None`` (``_meta`` is data).

    Raises:
        ValueError: naming the tool, when a trusted server declared a malformed situation.
    """
    declared = None
    if trusted and isinstance(result.meta, Mapping) and SITUATION_META_KEY in result.meta:
        declared = validate_situation(tool, result.meta[SITUATION_META_KEY])
    return ToolResult(tool, not result.is_error, _text_of(result), declared=declared, status_stated=True)


def _connection_closed(exc: BaseException) -> bool:
    """The SDK says the connection is gone (``MCPError`` with ``mcp.types.CONNECTION_CLOSED``;
    or the stream itself closed): no later request can be sent."""
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream):
        return True
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED
    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


def _effect_of(tool: Tool) -> Effect:
    """``read`` only when the tool says ``readOnlyHint: true``; otherwise ``write``: MCP's
    ``ToolAnnotations`` default ``readOnlyHint`` to false and ``destructiveHint`` to true (a
    tool without annotations "may perform destructive updates")."""
    hints = tool.annotations
    return Effect.READ if hints is not None and hints.read_only_hint is True else Effect.WRITE


def _idempotent(tool: Tool) -> bool:
    """The tool says a repeated call has no further effect: ``idempotentHint: true`` (MCP's
    default is false), or it is read-only."""
    hints = tool.annotations
    return hints is not None and (hints.read_only_hint is True or hints.idempotent_hint is True)


class GuardedSession:
    """A :class:`mcp.ClientSession` whose ``call_tool`` goes through one :class:`~unstuck.Guard`
    (see the module doc). Build it with :func:`guarded_session`, which lists the tools.

    Args:
        session: an initialized ``mcp.ClientSession``.
        tools: the server's tools (``list_tools().tools``, every page).
        trusted: read declared situations from ``_meta`` (:data:`SITUATION_META_KEY`).
        deadline_s: seconds each call may take (:data:`DEFAULT_DEADLINE_S`).
        guard: a guard to drive (e.g. :meth:`unstuck.Guard.from_json` after a pause); by
            default a new one built from ``guard_options`` (``Guard``'s keyword arguments;
            ``unattended`` defaults to ``True``: a tool call over MCP has no terminal for the
            user, so an interactive call such as ``gh auth login`` is refused before dispatch,
            and the host asks its user once :class:`~unstuck.integrations.common.Blocked` is
            raised).

    Raises:
        TypeError: for a guard option :class:`~unstuck.Guard` does not take.
    """

    def __init__(self, session: ClientSession, tools: Iterable[Tool], *, trusted: bool = False,
                 deadline_s: float = DEFAULT_DEADLINE_S, guard: Guard | None = None, **guard_options: Any) -> None:
        self.session, self.trusted, self.deadline_s = session, trusted, deadline_s
        self.tools = tuple(tools)
        self.specs = specs_of(self.tools, self._probe_runner)
        guard_options.setdefault("unattended", True)
        self.guard = guard if guard is not None else Guard(self.specs, **guard_options)
        self._ids = itertools.count(1)
        self._ended = False
        #: Why the connection to the server is known closed (a call met it closed), else ``None``:
        #: later calls are not sent, and their results say so (``ToolResult.sent`` false).
        self.closed: str | None = None

    async def raw_call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult | BaseException:
        """The real ``tools/call``, bounded by ``deadline_s``: the result read by
        :func:`result_of`, or the exception it ended with (a crashed server, a closed
        connection, a ``TimeoutError`` past the deadline), for the guard to assess."""
        return (await self._send(name, arguments))[0]

    async def _send(self, name: str, arguments: Mapping[str, Any]) -> tuple[ToolResult | BaseException,
                                                                           CallToolResult | None]:
        if self.closed is not None:  # the connection is gone: the request is never sent
            return ToolResult(name, False, f"not sent: the connection to the MCP server closed before this call "
                                           f"({self.closed})", sent=False), None
        try:
            with anyio.fail_after(self.deadline_s):
                result = await self.session.call_tool(name, dict(arguments), read_timeout_seconds=self.deadline_s)
        except TimeoutError:
            return TimeoutError(f"the MCP server gave no result for {name} within {self.deadline_s:g} s "
                                "(timed out)"), None
        except Exception as exc:  # a crashed or closed server: a failed result, never a traceback
            if _connection_closed(exc):
                self.closed = f"{type(exc).__name__}: {exc}"
            return exc, None
        from mcp.types import CallToolResult
        if not isinstance(result, CallToolResult):
            return RuntimeError(f"the MCP server answered {name} with a {type(result).__name__}, "
                                "not a tool result"), None
        return result_of(name, result, trusted=self.trusted), result

    def _probe_runner(self, name: str) -> Any:
        def run(**arguments: Any) -> object:  # the guard runs probes in a worker thread (see answer())
            return anyio.from_thread.run(self.raw_call, name, arguments)
        return run

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> CallToolResult:
        """Call ``name`` through the guard.

        Returns:
            a ``CallToolResult`` whose text is what the model gets (see the module doc).

        Raises:
            Blocked: the turn stopped to ask the user (the call, or an earlier one, escalated).
            ValueError: a trusted server declared a malformed situation.
        """
        from mcp.types import CallToolResult, TextContent
        call = ToolCall.of(f"mcp-{next(self._ids)}", name, dict(arguments or {}))
        while True:
            decision = self.guard.before(call)
            if decision.action is Action.ESCALATE or (decision.action is Action.REFUSE and self.guard.latched):
                raise self._blocked(decision)
            if decision.action is Action.REFUSE:
                return CallToolResult(content=[TextContent(type="text", text=decision.content)], is_error=True)
            raw, sent = await self._send(name, call.arguments)
            decision = await self.guard.aafter(call, raw)
            if decision.action is Action.RETRY:
                await anyio.to_thread.run_sync(self.guard.clock.sleep, decision.delay_s)
                continue
            if decision.action is Action.ESCALATE:
                raise self._blocked(decision)
            failed = not isinstance(raw, ToolResult) or not raw.ok
            return CallToolResult(content=[TextContent(type="text", text=decision.content)], is_error=failed,
                                  structured_content=None if sent is None else
                                  _structured_for_model(sent.structured_content),
                                  _meta=None if sent is None else meta_for_model(sent.meta, trusted=self.trusted))

    async def __aenter__(self) -> GuardedSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.end()

    def end(self) -> None:
        """End the guard's turn (``turn.ended``: ``blocked`` when the session stopped to ask
        and was not answered, else ``done``), as a run of :func:`unstuck.run_turn` ends; what
        an ``async with`` block does on exit. The session itself stays open (it is the host's).
        Idempotent."""
        if self._ended:
            return
        self._ended = True
        status = TurnStatus.BLOCKED if self.guard.latched else TurnStatus.DONE
        escalation = self.guard.escalation
        self.guard.end(status, answer=escalation.text if escalation is not None else "")

    def _blocked(self, decision: Decision) -> Blocked:
        escalation = decision.escalation or self.guard.escalation
        if escalation is None:  # an escalate decision always carries its question
            raise RuntimeError("the guard escalated without a question")
        return Blocked(escalation, self.guard.to_json())

    async def answer(self, answer: object) -> Decision:
        """The user answered the question (an :class:`~unstuck.decide.escalation.Answer`, its label,
        or a plain word: :func:`~unstuck.integrations.common.read_answer`). "I've done it" runs
        the blocker's probe (:meth:`unstuck.Guard.answer`, in a worker thread so a probe can
        call the server) and, when clean, lifts the latch.

        Returns:
            the guard's decision: ``continue`` (go on) or ``escalate`` (still blocked, or Stop).
        """
        said: Answer = read_answer(answer)
        return await anyio.to_thread.run_sync(self.guard.answer, said)


def specs_of(tools: Iterable[Tool], runner: Any = None) -> tuple[ToolSpec, ...]:
    """The guard's :class:`~unstuck.toolkit.specs.ToolSpec` of each MCP tool: its name, description
    and ``inputSchema`` (:func:`~unstuck.integrations.common.spec_for`); ``effect="read"``
    only when its annotations say ``readOnlyHint: true``, else ``write`` (MCP's defaults: a
    tool without annotations may be destructive and is not idempotent); ``idempotent`` when
    they say ``idempotentHint: true`` (or read-only). The guard retries a timed-out or
    failed call only for a read-only or idempotent tool, or a call that was never sent;
    ``runner(name)`` gives the callable a probe runs."""
    return tuple(spec_for(t.name, description=t.description or "", parameters=t.input_schema, effect=_effect_of(t),
                          idempotent=_idempotent(t), fn=runner(t.name) if runner is not None else None)
                 for t in tools)


async def guarded_session(session: ClientSession, *, trusted: bool = False, deadline_s: float = DEFAULT_DEADLINE_S,
                          guard: Guard | None = None, **guard_options: Any) -> GuardedSession:
    """Wrap an initialized ``mcp.ClientSession``: lists its tools (every page of
    ``session.list_tools``) and returns the :class:`GuardedSession` (arguments as there)."""
    from mcp.types import PaginatedRequestParams
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return GuardedSession(session, tools, trusted=trusted, deadline_s=deadline_s, guard=guard, **guard_options)
