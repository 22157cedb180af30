"""``unstuck mcp-proxy``: an MCP server's tools served over stdio with the guard in front of
every call (:mod:`unstuck.integrations.mcp_proxy`, the ``mcp`` extra).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

from typing import Annotated

import typer

from unstuck.core.errors import UnstuckError
from unstuck.core.output import raw_stdout

__all__ = ["mcp_proxy_command"]


def mcp_proxy_command(
    command: Annotated[list[str], typer.Argument(help="The MCP server's command line, after --.")],
    trusted: Annotated[bool, typer.Option("--trusted", help="Read situations the server declares in _meta.")] = False,
    deadline: Annotated[float, typer.Option(help="Seconds each tool call may take.")] = 120.0,
    task: Annotated[str, typer.Option(help="The task, named in the question when a call is blocked.")] = "",
    attended: Annotated[bool, typer.Option(
        "--attended", help="Someone can answer the upstream's prompts: do not refuse interactive calls.")] = False,
) -> None:
    """Serve an MCP server's tools over stdio with the guard in front of every call (the mcp extra)."""
    try:  # the proxy's machinery is imported only here (pip install "unstuck[mcp]")
        import anyio

        from unstuck.integrations.mcp_proxy import serve
    except ModuleNotFoundError as exc:
        raise UnstuckError(f"mcp-proxy needs the mcp extra: pip install 'unstuck[mcp]' ({exc})") from exc
    raw_stdout()  # the MCP channel to the agent: what the model reads, as the tools returned it (DESIGN.md)
    anyio.run(lambda: serve(command, trusted=trusted, deadline_s=deadline, task=task, unattended=not attended))

