"""The guard's scope over MCP (issue 27): one guard per client connection. A client-side
:class:`~unstuck.integrations.mcp.GuardedSession` guards one ``ClientSession``; ``unstuck
mcp-proxy`` serves one client over stdio, so each client connection is a proxy of its own
around its own upstream session. Two connections to the same server, open at once, keep their
budgets apart: one blocked on the real, signed-out gh does not refuse the other's calls."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from framework_world import TASK, UNBLOCK, GhWorld, improviser_commands
from unstuck.integrations.common import Blocked
from unstuck.integrations.mcp import guarded_session
from unstuck.integrations.mcp_proxy import STATUS_META_KEY

pytestmark = pytest.mark.slow

SHELL_SERVER = Path(__file__).parent / "mcp_servers" / "shell_server.py"
ROOT = Path(__file__).resolve().parents[1]
#: The second connection's calls: nothing in them touches gh.
CLEAN_COMMANDS = ["echo hello-one", "echo hello-two"]
#: Calls the blocked connection may ask for before the test gives up on it.
CAP = 40


def _server(world: GhWorld, *, proxied: bool) -> StdioServerParameters:
    """The shell server in the sandbox, run directly or behind ``unstuck mcp-proxy``."""
    env = {**world.box.env, "SHELL_SERVER_LOG": str(world.box.root / "server-ran.log")}
    argv = [sys.executable, str(SHELL_SERVER)]
    if proxied:
        env["PYTHONPATH"] = str(ROOT / "src")
        argv = [sys.executable, "-m", "unstuck", "mcp-proxy", "--", *argv]
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(world.box.work))


@contextlib.asynccontextmanager
async def _two_sessions(world: GhWorld, *, proxied: bool) -> AsyncIterator[tuple[ClientSession, ClientSession]]:
    """Two client connections to the shell server (each through a proxy of its own when
    ``proxied``), open at once and initialised."""
    async with stdio_client(_server(world, proxied=proxied)) as (read1, write1), \
            ClientSession(read1, write1) as first, \
            stdio_client(_server(world, proxied=proxied)) as (read2, write2), \
            ClientSession(read2, write2) as second:
        await first.initialize()
        await second.initialize()
        yield first, second


def _text(result: CallToolResult) -> str:
    return "\n".join(str(getattr(item, "text", "")) for item in result.content)


def test_two_proxy_connections_at_once_keep_their_budgets_apart() -> None:
    async def scenario(world: GhWorld) -> tuple[CallToolResult, list[CallToolResult]]:
        async with _two_sessions(world, proxied=True) as (first, second):
            clean = [await second.call_tool("run_command", {"command": CLEAN_COMMANDS[0]})]
            blocked: CallToolResult | None = None
            for calls, command in enumerate(improviser_commands(), start=1):
                result = await first.call_tool("run_command", {"command": command})
                if (result.meta or {}).get(STATUS_META_KEY) == "blocked":
                    blocked = result
                    break
                assert calls < CAP, "the first connection was never blocked"
            assert blocked is not None
            # the first connection's proxy is latched now; the second's is its own
            clean.append(await second.call_tool("run_command", {"command": CLEAN_COMMANDS[1]}))
            return blocked, clean

    with GhWorld() as world:
        blocked, clean = anyio.run(scenario, world)
    assert blocked.is_error and UNBLOCK in _text(blocked)
    for command, result in zip(CLEAN_COMMANDS, clean, strict=True):
        assert not result.is_error and command.split()[-1] in _text(result)
        assert (result.meta or {}).get(STATUS_META_KEY) != "blocked"


def test_two_guarded_client_sessions_keep_their_budgets_apart() -> None:
    async def scenario(world: GhWorld) -> tuple[Blocked, list[str]]:
        async with _two_sessions(world, proxied=False) as (first, second):
            one = await guarded_session(first, task=TASK)
            other = await guarded_session(second, task="Say hello twice with echo.")
            said = [_text(await other.call_tool("run_command", {"command": CLEAN_COMMANDS[0]}))]
            stopped: Blocked | None = None
            for calls, command in enumerate(improviser_commands(), start=1):
                try:
                    await one.call_tool("run_command", {"command": command})
                except Blocked as blocked:
                    stopped = blocked
                    break
                assert calls < CAP, "the first session was never blocked"
            assert stopped is not None
            said.append(_text(await other.call_tool("run_command", {"command": CLEAN_COMMANDS[1]})))
            assert other.guard.escalation is None and not other.guard.state.open_blockers
            assert other.guard.state.calls == len(CLEAN_COMMANDS)  # its own calls only, none of the other's
            return stopped, said

    with GhWorld() as world:
        stopped, said = anyio.run(scenario, world)
    assert UNBLOCK in stopped.escalation.text
    assert [s.strip().splitlines()[0] for s in said] == ["hello-one", "hello-two"]
