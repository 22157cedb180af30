"""``unstuck mcp-proxy [--trusted] -- CMD ARGS…``: a stdio MCP server that puts the guard in
front of an unmodified stdio MCP server (``unstuck[mcp]``).

It launches ``CMD ARGS…`` as an MCP client over stdio (``mcp.client.stdio.stdio_client``, with
the proxy's own environment and working directory passed through), re-exports its tools
(``tools/list``), and sends every ``tools/call`` through one :class:`unstuck.Guard`
(:class:`unstuck.integrations.mcp.GuardedSession`: the same classification, deadline,
crash handling and ``--trusted`` ``_meta`` declarations). A desktop assistant's config names
the proxy instead of the server::

    {"command": "unstuck", "args": ["mcp-proxy", "--", "npx", "some-mcp-server"]}

When the guard escalates, the proxy asks the client's user, if it can:

* **form mode** (``elicitation/create``, ``mode: "form"``) when the client declared the
  ``elicitation`` capability (an empty one means form, as the specification says) and the
  protocol revision has server-initiated elicitation (2025-06-18, 2025-11-25): one field,
  ``answer``, "I've done it" / "Skip it" / "Stop" (read with
  :func:`unstuck.integrations.common.read_answer`; decline or cancel is "Stop").
  "I've done it" runs the probe (``Guard.answer``) and the call runs again; still blocked asks
  again with the evidence (at most :data:`MAX_ASKS` times); "Skip it" returns the guard's note
  (``isError: true``, the call not run); "Stop" ends the call as blocked;
* **URL mode** (``UrlElicitationRequiredError``, JSON-RPC error -32042, 2025-11-25) when the
  unblock is a sign-in page (an ``https://`` URL) and the client declared ``elicitation.url``:
  the call ends with that error; the client's retry of a call, once its user completed the
  page, is taken as "I've done it" (the probe runs first);
* otherwise (the client did not declare elicitation, or its revision has none: 2024-11-05,
  2025-03-26, and 2026-07-28, whose stateless requests carry no server-initiated requests),
  the call ends as **blocked**: a tool result with ``isError: true`` whose text is the
  escalation (what is blocked, what the user must do, e.g. ``gh auth login``, what happens
  next) and ``_meta["io.unstuck/status"] == "blocked"``; later calls end the same way.

Protocol revisions (``mcp.types.version.SUPPORTED_PROTOCOL_VERSIONS`` of the installed ``mcp``
2.3): 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25 (the ``initialize`` handshake) and
2026-07-28 (``server/discover``, stateless); :data:`ELICITATION_REVISIONS` and
:data:`URL_ELICITATION_REVISIONS` name where the proxy elicits. Retries never stack: the
upstream ``ClientSession.call_tool`` sends one request per call (no retry of its own).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from unstuck.escalation import Answer, Escalation
from unstuck.guard import Action
from unstuck.integrations.common import Blocked, read_answer
from unstuck.integrations.mcp import DEFAULT_DEADLINE_S, GuardedSession, guarded_session

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

__all__ = ["ELICITATION_REVISIONS", "MAX_ASKS", "STATUS_META_KEY", "URL_ELICITATION_REVISIONS", "Proxy",
           "ask_mode", "serve"]

#: Revisions whose server may send ``elicitation/create`` (added 2025-06-18; 2026-07-28 has
#: no server-initiated requests).
ELICITATION_REVISIONS = ("2025-06-18", "2025-11-25")
#: Revisions with URL-mode elicitation and the ``URLElicitationRequired`` error (2025-11-25).
URL_ELICITATION_REVISIONS = ("2025-11-25",)
#: Where a blocked tool result says so: ``_meta["io.unstuck/status"] == "blocked"``.
STATUS_META_KEY = "io.unstuck/status"
#: How many times one call asks the user before it ends as blocked.
MAX_ASKS = 3
_CHOICES = [a.value for a in Answer]


def ask_mode(version: str, capabilities: Any, unblock: str | None) -> str:
    """How the proxy asks: ``"url"``, ``"form"`` or ``"result"`` (a blocked tool result), from
    the negotiated protocol ``version``, the client's ``ClientCapabilities`` (or ``None``) and
    the escalation's unblock."""
    elicitation = getattr(capabilities, "elicitation", None)
    if elicitation is None or version not in ELICITATION_REVISIONS:
        return "result"
    url_ok = version in URL_ELICITATION_REVISIONS and elicitation.url is not None
    if url_ok and unblock is not None and unblock.strip().lower().startswith("https://"):
        return "url"
    form_ok = elicitation.form is not None or elicitation.url is None
    return "form" if form_ok else "result"


def _blocked_result(escalation: Escalation, note: str = "") -> CallToolResult:
    from mcp.types import CallToolResult, TextContent
    text = escalation.text if not note else f"{escalation.text}\n\n{note}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True,
                          _meta={STATUS_META_KEY: "blocked"})


@dataclass(slots=True)
class Proxy:
    """The proxy's request handlers over one upstream :class:`GuardedSession`."""

    guarded: GuardedSession
    pending_url: str | None = None  # the elicitation id of a URL the client's user was sent to

    async def list_tools(self, ctx: ServerRequestContext[Any, Any],
                         params: PaginatedRequestParams | None) -> ListToolsResult:
        """The upstream server's tools, as listed when the proxy started."""
        from mcp.types import ListToolsResult
        return ListToolsResult(tools=list(self.guarded.tools))

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        """One ``tools/call`` through the guard; a block is asked or ends the call (module doc).

        Raises:
            mcp.UrlElicitationRequiredError: the unblock is a sign-in page and the client
                takes URL elicitation.
        """
        from mcp import UrlElicitationRequiredError
        from mcp.types import CallToolResult, ElicitRequestURLParams, TextContent
        arguments = dict(params.arguments or {})
        if self.pending_url is not None and self.guarded.guard.escalation is not None:
            self.pending_url = None  # the client retried after the sign-in page: "I've done it"
            decision = await self.guarded.answer(Answer.DONE)
            if decision.action is not Action.CONTINUE:
                return _blocked_result(self.guarded.guard.escalation, decision.content)
        for _ in range(MAX_ASKS):
            try:
                return await self.guarded.call_tool(params.name, arguments)
            except Blocked as blocked:
                escalation = blocked.escalation
            mode = ask_mode(ctx.session.protocol_version, ctx.session.client_capabilities, escalation.unblock)
            if mode == "result":
                return _blocked_result(escalation)
            if mode == "url":
                self.pending_url = uuid.uuid4().hex
                raise UrlElicitationRequiredError([ElicitRequestURLParams(
                    message=escalation.text, url=str(escalation.unblock), elicitation_id=self.pending_url)])
            reply = await ctx.session.elicit_form(escalation.text, {
                "type": "object",
                "properties": {"answer": {"type": "string", "title": "Your answer", "enum": _CHOICES}},
                "required": ["answer"],
            }, related_request_id=ctx.request_id)
            said = Answer.STOP
            if reply.action == "accept" and reply.content is not None:
                try:
                    said = read_answer(dict(reply.content))
                except ValueError:
                    said = Answer.STOP
            decision = await self.guarded.answer(said)
            if said is Answer.STOP:
                return _blocked_result(escalation)
            if said is Answer.SKIP and decision.action is Action.CONTINUE:
                return CallToolResult(content=[TextContent(type="text", text=decision.content)], is_error=True)
            # DONE: continue → call again; still blocked → ask again with the evidence
        final = self.guarded.guard.escalation
        if final is None:  # unreachable: the loop only ends on a block
            raise RuntimeError("the proxy ended a call without a result")
        return _blocked_result(final, f"Asked {MAX_ASKS} times; the call ended blocked.")


async def serve(command: Sequence[str], *, trusted: bool = False, deadline_s: float = DEFAULT_DEADLINE_S,
                task: str = "") -> None:
    """Run the proxy on this process's stdin/stdout until the client closes it.

    Args:
        command: the upstream server's command line (program and arguments).
        trusted: read declared situations from the upstream's ``_meta``.
        deadline_s: seconds each upstream call may take.
        task: the task named in the escalation.

    Raises:
        ValueError: for an empty command.
        OSError: when the upstream server cannot be started.
    """
    if not command:
        raise ValueError("mcp-proxy: name the MCP server to run after --")
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    upstream = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ),
                                     cwd=os.getcwd())
    async with stdio_client(upstream, errlog=sys.stderr) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        guarded = await guarded_session(session, trusted=trusted, deadline_s=deadline_s, task=task)
        proxy = Proxy(guarded)
        server: Server[Any] = Server("unstuck-mcp-proxy", on_list_tools=proxy.list_tools,
                                     on_call_tool=proxy.call_tool)
        async with stdio_server() as (client_read, client_write):
            await server.run(client_read, client_write, server.create_initialization_options())
