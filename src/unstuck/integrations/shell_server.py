"""A small real MCP server over stdio: one tool, ``run_command``, that runs a shell command line
as a real subprocess (``/bin/bash -c``) in the server's working directory and environment, the
way third-party shell servers do (a failure is ``isError: true`` with the output and the exit
status as text).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Run as ``python -m unstuck.integrations.shell_server [--crash-on TEXT] [--hang-on TEXT]
[--declare-url URL] [--read-only]`` (needs ``unstuck[mcp]``; the peer comparison,
:mod:`unstuck.integrations.peers`, and the MCP tests run it):
a call whose command contains ``--crash-on``'s text kills the process mid-call (``os._exit``),
one containing ``--hang-on``'s never answers; ``--declare-url`` makes every failure carry a
declared ``auth`` situation under ``_meta["io.unstuck/situation"]`` whose unblock is that sign-in
page (what a trusted server that knows its own sign-in does); ``--read-only`` annotates the tool
``readOnlyHint: true`` (a server that promises its commands only read, so a client may send a
call again, or re-run it as a probe; without it the tool has MCP's defaults: it may be
destructive and is not idempotent). With ``$SHELL_SERVER_LOG`` set,
every command it runs is appended to that file (what the tests count as tool calls that ran).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from unstuck.integrations.mcp import SITUATION_META_KEY

__all__ = ["LOG_ENV", "RUN_COMMAND", "build", "main"]

#: When set, every command line the server runs is appended to this file (one a line).
LOG_ENV = "SHELL_SERVER_LOG"
RUN_COMMAND = types.Tool(
    name="run_command",
    description="Run a shell command line and return its output.",
    input_schema={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
)


def _run(command: str) -> tuple[int, str]:
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as ran:
            ran.write(command.replace("\n", " ") + "\n")
    out = subprocess.run(["/bin/bash", "-c", command], capture_output=True, text=True, timeout=30,
                         env=dict(os.environ), check=False, stdin=subprocess.DEVNULL)
    text = "\n".join(part for part in (out.stdout.rstrip("\n"), out.stderr.rstrip("\n")) if part)
    return out.returncode, text


def build(crash_on: str | None, hang_on: str | None, declare_url: str | None, *,
          read_only: bool = False) -> Server[Any]:
    """The low-level ``mcp.server.lowlevel.Server`` with the ``run_command`` tool (see the module doc)."""
    listed = RUN_COMMAND.model_copy(update={"annotations": types.ToolAnnotations(read_only_hint=True)}) \
        if read_only else RUN_COMMAND

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[listed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        command = str((params.arguments or {}).get("command", ""))
        if crash_on and crash_on in command:
            os._exit(17)  # dies mid-call: no response ever comes
        if hang_on and hang_on in command:
            while True:
                time.sleep(3600)  # hangs: blocks the whole server, as a stuck server does
        code, text = await anyio.to_thread.run_sync(_run, command)
        if code == 0:
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        meta = None
        if declare_url:
            meta = {SITUATION_META_KEY: {"kind": "auth", "subject": "gh", "interactive": True,
                                         "unblock": declare_url}}
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{text}\n(exit status {code})")],
                                    is_error=True, _meta=meta)

    return Server("shell", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    """Parse the options (module doc) and serve over stdio until the client closes."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-on")
    parser.add_argument("--hang-on")
    parser.add_argument("--declare-url")
    parser.add_argument("--read-only", action="store_true")
    args = parser.parse_args()
    server = build(args.crash_on, args.hang_on, args.declare_url, read_only=args.read_only)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
