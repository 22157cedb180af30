"""The MCP adapter (issue 13): the client-side guarded session and ``unstuck mcp-proxy``,
against real MCP server processes over stdio (tests/mcp_servers) in the GhWorld (the real gh,
signed out), driven by a scripted MCP client that plays :func:`improviser_commands`."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.framework_world import ANSWER, TASK, TASK_COMMAND, UNBLOCK, GhWorld, improviser_commands

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.types import (  # noqa: E402
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    InitializedNotification,
    InitializeRequest,
    InitializeRequestParams,
    InitializeResult,
)
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS  # noqa: E402

from unstuck.core.clock import VirtualClock  # noqa: E402
from unstuck.core.tools import TRUNCATION_MARKER, truncate_content  # noqa: E402
from unstuck.integrations.common import Blocked  # noqa: E402
from unstuck.integrations.mcp import SITUATION_META_KEY, guarded_session, result_of  # noqa: E402
from unstuck.integrations.mcp_proxy import ANSWER_TOOL, ELICITATION_REVISIONS, MAX_ASKS, STATUS_META_KEY, ask_mode  # noqa: E402

SERVERS = Path(__file__).parent / "mcp_servers"
SHELL_SERVER = SERVERS / "shell_server.py"
ROOT = Path(__file__).resolve().parents[1]
#: Calls a client without unstuck is allowed before the test stops it (the SDK never does).
CAP = 40
#: "stops within 3 tool calls after the first signal": the first call is the first signal.
WITHIN = 1 + 3

pytestmark = pytest.mark.slow


def _log(world: GhWorld) -> Path:
    return world.box.root / "server-ran.log"


def _ran(world: GhWorld) -> list[str]:
    """Every command line the shell server ran (the tool calls that reached the tool)."""
    log = _log(world)
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def _env(world: GhWorld) -> dict[str, str]:
    return {**world.box.env, "SHELL_SERVER_LOG": str(_log(world))}


def _params(world: GhWorld, *argv: str) -> StdioServerParameters:
    """A server process run with the sandbox's environment, in its work directory."""
    return StdioServerParameters(command=sys.executable, args=list(argv), env=_env(world), cwd=str(world.box.work))


def _shell(world: GhWorld, script: Path = SHELL_SERVER, *extra: str) -> StdioServerParameters:
    return _params(world, str(script), *extra)


def _proxy(world: GhWorld, *extra: str, server_args: tuple[str, ...] = (),
           script: Path = SHELL_SERVER) -> StdioServerParameters:
    env = {**_env(world), "PYTHONPATH": str(ROOT / "src")}
    return StdioServerParameters(command=sys.executable, args=["-m", "unstuck", "mcp-proxy", *extra, "--",
                                                               sys.executable, str(script), *server_args],
                                 env=env, cwd=str(world.box.work))


def _text(result: CallToolResult) -> str:
    return "\n".join(str(getattr(item, "text", "")) for item in result.content)


def _capabilities(elicits: bool) -> mcp.types.ClientCapabilities:
    """What a client with (or without) an elicitation callback declares (both modes)."""
    if not elicits:
        return mcp.types.ClientCapabilities()
    return mcp.types.ClientCapabilities(elicitation=mcp.types.ElicitationCapability(
        form=mcp.types.FormElicitationCapability(), url=mcp.types.UrlElicitationCapability()))


async def _connect(session: ClientSession, version: str | None, *, elicits: bool) -> str:
    """Initialize, pinning ``version`` when given: a handshake revision goes in the
    ``initialize`` request's ``protocolVersion`` (``ClientSession.initialize`` always offers
    the newest, so the request is sent by hand and adopted); a modern one is
    ``server/discover``. Returns the negotiated revision."""
    if version is None:
        await session.initialize()
    elif version in MODERN_PROTOCOL_VERSIONS:
        await session.discover()
    else:
        result = await session.send_request(InitializeRequest(params=InitializeRequestParams(
            protocol_version=version, capabilities=_capabilities(elicits),
            client_info=mcp.types.Implementation(name="scripted-client", version="1"))), InitializeResult)
        session.adopt(result)
        await session.send_notification(InitializedNotification())
    negotiated = session.protocol_version
    assert negotiated is not None
    return negotiated


def run_improviser(world: GhWorld, guarded: bool) -> tuple[int, str, bool, str]:
    """The improviser, as a scripted MCP client, against the real shell server over stdio.

    Returns (tool calls that ran, how it stopped, whether the exact unblock reached the user,
    final status: ``blocked`` / ``running``). Without unstuck the MCP SDK has no loop and never
    stops: the client is cut at :data:`CAP` calls and that is recorded as "≥ CAP"; with the
    guarded session, the calls the client asked for and the guard refused are named in "how".
    """
    async def run() -> tuple[int, str, bool, str]:
        async with stdio_client(_shell(world)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            commands = improviser_commands()
            if not guarded:
                for calls, command in enumerate(commands, start=1):
                    await session.call_tool("run_command", {"command": command})
                    if calls >= CAP:
                        return len(_ran(world)), f"never stopped (cut at {CAP} calls: ≥ {CAP})", False, "running"
            wrapped = await guarded_session(session, task=TASK)
            for calls, command in enumerate(commands, start=1):
                try:
                    await wrapped.call_tool("run_command", {"command": command})
                except Blocked as blocked:
                    return (len(_ran(world)), f"Blocked raised to the host ({calls} calls asked for, "
                            f"{calls - len(_ran(world))} refused)", UNBLOCK in blocked.escalation.text, "blocked")
                if calls >= CAP:
                    break
        return len(_ran(world)), f"never stopped (cut at {CAP} calls: ≥ {CAP})", False, "running"

    return anyio.run(run)


def test_the_plain_mcp_sdk_never_stops_an_improviser() -> None:
    with GhWorld() as world:
        calls, how, reached, status = run_improviser(world, guarded=False)
    print(f"MCP ClientSession defaults: {calls} tool calls ran; {how}; unblock: {reached}; {status}")
    assert calls >= CAP and status == "running" and not reached, how


def test_the_guarded_session_stops_within_three_calls_and_raises_blocked_with_the_unblock() -> None:
    with GhWorld() as world:
        calls, how, reached, status = run_improviser(world, guarded=True)
    print(f"MCP ClientSession + guarded_session: {calls} tool calls ran; {how}; unblock: {reached}; {status}")
    assert calls <= WITHIN, (calls, how)
    assert status == "blocked" and reached


def test_done_after_signing_in_lets_the_guarded_session_go_on() -> None:
    async def run(world: GhWorld) -> tuple[str, str]:
        async with stdio_client(_shell(world)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            wrapped = await guarded_session(session, task=TASK)
            with pytest.raises(Blocked) as blocked:
                for command in improviser_commands():
                    await wrapped.call_tool("run_command", {"command": command})
            world.sign_in()
            decision = await wrapped.answer("I've done it")
            result = await wrapped.call_tool("run_command", {"command": TASK_COMMAND})
            return blocked.value.escalation.text, decision.action.value + "\n" + _text(result)

    with GhWorld() as world:
        question, after = anyio.run(run, world)
    assert UNBLOCK in question
    assert after.startswith("continue") and ANSWER in after


def _gh_declares(url: str) -> Callable[[GhWorld], StdioServerParameters]:
    return lambda world: _shell(world, SHELL_SERVER, "--declare-url", url)


def test_meta_declarations_are_read_only_from_trusted_servers() -> None:
    declared = CallToolResult(content=[mcp.types.TextContent(type="text", text="sign in first")], is_error=True,
                              _meta={SITUATION_META_KEY: {"kind": "auth", "subject": "gh",
                                                          "unblock": "https://github.com/login/device"}})
    trusted = result_of("run_command", declared, trusted=True)
    untrusted = result_of("run_command", declared, trusted=False)
    assert trusted.declared is not None and trusted.declared.unblock == "https://github.com/login/device"
    assert untrusted.declared is None and not untrusted.ok


def test_a_malformed_declaration_from_a_trusted_server_is_a_loud_error() -> None:
    bad = CallToolResult(content=[], is_error=True, _meta={SITUATION_META_KEY: {"kind": "sleepy", "subject": "gh"}})
    with pytest.raises(ValueError, match="run_command"):
        result_of("run_command", bad, trusted=True)


def _one_call(world: GhWorld, script: Path, deadline_s: float) -> tuple[str, float]:
    async def run() -> str:
        async with stdio_client(_shell(world, script)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            wrapped = await guarded_session(session, task=TASK, deadline_s=deadline_s, clock=VirtualClock())
            try:
                result = await wrapped.call_tool("run_command", {"command": TASK_COMMAND})
            except Blocked as blocked:
                return "blocked: " + blocked.escalation.text
            return ("failed: " if result.is_error else "ok: ") + _text(result)

    began = time.monotonic()
    outcome = anyio.run(run)
    return outcome, time.monotonic() - began


def test_a_server_that_crashes_mid_call_gives_a_failed_result_or_blocked_not_a_traceback() -> None:
    with GhWorld() as world:
        outcome, took = _one_call(world, SERVERS / "crashing_server.py", deadline_s=10)
    print(f"crashing server: {took:.1f} s: {outcome[:300]!r}")
    assert outcome.startswith(("failed: ", "blocked: ")), outcome
    assert took < 60


def test_a_server_that_hangs_gives_a_failed_result_or_blocked_within_its_deadlines() -> None:
    with GhWorld() as world:
        outcome, took = _one_call(world, SERVERS / "hanging_server.py", deadline_s=2)
    print(f"hanging server: {took:.1f} s: {outcome[:300]!r}")
    assert outcome.startswith(("failed: ", "blocked: ")), outcome
    assert took < 60


# -- the proxy ----------------------------------------------------------------------------------


asked: list[ElicitRequestParams] = []  # what the client's elicitation callback was asked


async def _through_proxy(world: GhWorld, version: str | None,
                         elicit: Callable[[Any, ElicitRequestParams], Awaitable[ElicitResult]] | None,
                         extra: tuple[str, ...] = ()) -> tuple[str, list[CallToolResult]]:
    """Play the improviser through the proxy until a call comes back blocked (or CAP calls),
    then call the task's command once more; returns the revision and every result."""
    results: list[CallToolResult] = []
    async with stdio_client(_proxy(world, *extra)) as (read, write), \
            ClientSession(read, write, elicitation_callback=elicit) as session:
        negotiated = await _connect(session, version, elicits=elicit is not None)
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["run_command", ANSWER_TOOL]
        for command in improviser_commands():
            results.append(await session.call_tool("run_command", {"command": command}))
            blocked = (results[-1].meta or {}).get(STATUS_META_KEY) == "blocked"
            if blocked or len(results) >= CAP or asked:
                break
        results.append(await session.call_tool("run_command", {"command": TASK_COMMAND}))
    return negotiated, results


@pytest.mark.parametrize("version", [v for v in SUPPORTED_PROTOCOL_VERSIONS if v in ELICITATION_REVISIONS])
def test_the_proxy_asks_an_elicitation_capable_client_and_done_after_sign_in_goes_on(version: str) -> None:
    asked.clear()
    ran_before_asking: list[str] = []
    with GhWorld() as world:
        async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
            asked.append(params)
            ran_before_asking.extend(_ran(world))
            world.sign_in()  # what the user does before answering
            return ElicitResult(action="accept", content={"answer": "I've done it"})

        negotiated, results = anyio.run(_through_proxy, world, version, elicit)
    assert negotiated == version
    assert len(asked) == 1 and asked[0].mode == "form" and UNBLOCK in asked[0].message
    assert len(ran_before_asking) <= WITHIN
    assert not results[-1].is_error and ANSWER in _text(results[-1])


@pytest.mark.parametrize("version", [*[v for v in HANDSHAKE_PROTOCOL_VERSIONS if v not in ELICITATION_REVISIONS],
                                     *MODERN_PROTOCOL_VERSIONS])
def test_on_a_revision_without_elicitation_the_blocked_result_carries_the_question(version: str) -> None:
    asked.clear()

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="cancel")

    with GhWorld() as world:
        negotiated, results = anyio.run(_through_proxy, world, version, elicit)
        ran = _ran(world)
    blocked = [r for r in results if (r.meta or {}).get(STATUS_META_KEY) == "blocked"]
    assert negotiated == version and not asked
    assert blocked and blocked[0].is_error and UNBLOCK in _text(blocked[0])
    assert len(ran) <= WITHIN and ran.count(TASK_COMMAND) == 1  # the blocked turn's later calls never ran


def test_a_client_without_the_elicitation_capability_gets_the_blocked_result() -> None:
    with GhWorld() as world:
        _, results = anyio.run(_through_proxy, world, None, None)
    blocked = [r for r in results if (r.meta or {}).get(STATUS_META_KEY) == "blocked"]
    assert blocked and blocked[0].is_error and UNBLOCK in _text(blocked[0])
    assert results[-1].is_error  # the turn stays blocked: later calls end the same way


def test_a_sign_in_page_is_asked_in_url_mode_only_where_the_client_takes_it() -> None:
    caps = mcp.types.ClientCapabilities(elicitation=mcp.types.ElicitationCapability(
        form=mcp.types.FormElicitationCapability(), url=mcp.types.UrlElicitationCapability()))
    page = "https://github.com/login/device"
    assert ask_mode("2025-11-25", caps, page) == "url"
    assert ask_mode("2025-11-25", caps, UNBLOCK) == "form"
    assert ask_mode("2025-06-18", caps, page) == "form"
    assert ask_mode("2025-03-26", caps, page) == "result"
    assert ask_mode("2025-11-25", mcp.types.ClientCapabilities(), page) == "result"


def test_a_trusted_servers_sign_in_page_is_asked_in_url_mode_and_the_retry_goes_on() -> None:
    page = "https://github.com/login/device"

    async def run(world: GhWorld) -> tuple[list[str], CallToolResult]:
        async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
            return ElicitResult(action="accept", content={"answer": "Stop"})  # form mode is not what is asked here

        urls: list[str] = []
        async with stdio_client(_proxy(world, "--trusted", server_args=("--declare-url", page))) as (read, write), \
                ClientSession(read, write, elicitation_callback=elicit) as session:
            await _connect(session, "2025-11-25", elicits=True)
            for command in improviser_commands():
                try:
                    await session.call_tool("run_command", {"command": command})
                except mcp.MCPError as error:
                    urls = [e.url for e in mcp.UrlElicitationRequiredError.from_error(error.error).elicitations]
                    break
            world.sign_in()  # the user finished the page
            return urls, await session.call_tool("run_command", {"command": TASK_COMMAND})

    with GhWorld() as world:
        urls, after = anyio.run(run, world)
        ran = _ran(world)
    assert urls == [page]
    assert len(ran) - 1 <= WITHIN  # before the question (the last one ran after "done")
    assert not after.is_error and ANSWER in _text(after)


def test_an_untrusted_servers_declaration_never_reaches_a_client_that_trusts_the_proxy() -> None:
    evil = "evil.test"

    async def run(world: GhWorld) -> tuple[list[str], list[CallToolResult]]:
        seen: list[str] = []  # everything the downstream model or user reads
        async with stdio_client(_proxy(world, script=SERVERS / "hostile_server.py")) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            raw = [await session.call_tool("run_command", {"command": "echo hello"})]  # the proxy's own result
            downstream = await guarded_session(session, trusted=True, task=TASK)
            for command in ["echo hello", "ls", TASK_COMMAND]:
                try:
                    result = await downstream.call_tool("run_command", {"command": command})
                except Blocked as blocked:
                    seen.append(blocked.escalation.text)
                    break
                seen.append(_text(result))
        return seen, raw

    with GhWorld() as world:
        seen, raw = anyio.run(run, world)
    assert seen and not any(evil in text for text in seen), seen
    assert "hello" in seen[0]  # the harmless call went through as a plain result
    assert not any(str(key).startswith("io.unstuck/") for key in (raw[0].meta or {}))


def _elicit_through_proxy(world: GhWorld, elicit: Callable[[Any, ElicitRequestParams], Awaitable[ElicitResult]],
                          later: int = 2, server_args: tuple[str, ...] = ()) -> list[CallToolResult]:
    """Play the improviser through the proxy (a 2025-11-25 client that declared form
    elicitation) until a call ends blocked, then ``later`` more calls of the task's command."""
    async def run() -> list[CallToolResult]:
        results: list[CallToolResult] = []
        async with stdio_client(_proxy(world, server_args=server_args)) as (read, write), \
                ClientSession(read, write, elicitation_callback=elicit) as session:
            await _connect(session, "2025-11-25", elicits=True)
            for command in improviser_commands():
                results.append(await session.call_tool("run_command", {"command": command}))
                if (results[-1].meta or {}).get(STATUS_META_KEY) == "blocked" or len(results) >= CAP:
                    break
            for _ in range(later):
                results.append(await session.call_tool("run_command", {"command": TASK_COMMAND}))
        return results

    return anyio.run(run)


def test_a_client_whose_elicitation_fails_gets_the_blocked_result_not_an_error() -> None:
    tries: list[str] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        tries.append(params.message)
        raise RuntimeError("this client's elicitation is broken")

    with GhWorld() as world:
        results = _elicit_through_proxy(world, elicit)  # an MCPError here would fail the test
        ran = _ran(world)
    blocked = [r for r in results if (r.meta or {}).get(STATUS_META_KEY) == "blocked"]
    assert blocked and UNBLOCK in _text(blocked[0]) and ANSWER_TOOL in _text(blocked[0])
    assert all((r.meta or {}).get(STATUS_META_KEY) == "blocked" for r in results[-2:])
    assert len(tries) == 1 and len(ran) <= WITHIN  # asked once, then never again; nothing more ran


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_the_question_is_stop_and_later_calls_end_blocked_without_asking_again(action: str) -> None:
    tries: list[str] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        tries.append(params.message)
        return ElicitResult(action=action)  # type: ignore[arg-type]

    with GhWorld() as world:
        results = _elicit_through_proxy(world, elicit, later=3)
        ran = _ran(world)
    assert len(tries) == 1 and UNBLOCK in tries[0]
    assert all((r.meta or {}).get(STATUS_META_KEY) == "blocked" and r.is_error for r in results[-3:])
    assert len(ran) <= WITHIN and ran.count(TASK_COMMAND) == 1


def test_done_that_the_probe_refutes_asks_at_most_max_asks_times() -> None:
    tries: list[str] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        tries.append(params.message)  # the user says done but never signs in
        return ElicitResult(action="accept", content={"answer": "I've done it"})

    with GhWorld() as world:  # a read-only server: "I've done it" re-runs the call that failed as the probe
        results = _elicit_through_proxy(world, elicit, later=0, server_args=("--read-only",))
    assert len(tries) == MAX_ASKS
    assert (results[-1].meta or {}).get(STATUS_META_KEY) == "blocked" and UNBLOCK in _text(results[-1])


def test_a_client_without_elicitation_answers_with_the_unstuck_answer_tool_and_goes_on() -> None:
    async def run(world: GhWorld) -> tuple[CallToolResult, CallToolResult, CallToolResult]:
        async with stdio_client(_proxy(world, "--task", TASK)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            blocked = None
            for command in improviser_commands():
                result = await session.call_tool("run_command", {"command": command})
                if (result.meta or {}).get(STATUS_META_KEY) == "blocked":
                    blocked = result
                    break
            assert blocked is not None
            world.sign_in()  # what the user does, told by the blocked result
            answered = await session.call_tool(ANSWER_TOOL, {"answer": "I've done it"})
            return blocked, answered, await session.call_tool("run_command", {"command": TASK_COMMAND})

    with GhWorld() as world:
        blocked, answered, after = anyio.run(run, world)
    assert UNBLOCK in _text(blocked) and f'call {ANSWER_TOOL} with "I\'ve done it"' in _text(blocked)
    assert TASK.strip() in _text(blocked)  # --task: the question names the task
    assert not answered.is_error
    assert not after.is_error and ANSWER in _text(after)


@pytest.mark.parametrize("attended", [False, True])
def test_attended_lets_an_interactive_call_reach_the_server_and_unattended_refuses_it(attended: bool) -> None:
    async def run(world: GhWorld) -> None:
        extra = ("--attended",) if attended else ()
        async with stdio_client(_proxy(world, *extra)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("run_command", {"command": UNBLOCK})

    with GhWorld() as world:
        anyio.run(run, world)
        ran = _ran(world)
    assert (UNBLOCK in ran) is attended  # unattended (the default): refused before dispatch


def test_a_huge_tool_output_is_cut_to_the_default_limit_before_the_model_sees_it() -> None:
    size = 20_000_000

    async def run(world: GhWorld) -> CallToolResult:
        async with stdio_client(_shell(world)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            wrapped = await guarded_session(session, task=TASK)
            return await wrapped.call_tool("run_command", {"command": f"head -c {size} /dev/zero | tr '\\0' a"})

    with GhWorld() as world:
        result = anyio.run(run, world)
    text = _text(result)
    limit = len(truncate_content("a" * size).encode("utf-8"))  # what truncate_content's default keeps
    assert TRUNCATION_MARKER in text and len(text.encode("utf-8")) < limit + 4_000  # plus unstuck's guidance


# -- the documentation's example -----------------------------------------------------------------


def test_the_docs_example_runs_as_copied_and_is_blocked_then_goes_on() -> None:
    text = (ROOT / "docs" / "frameworks" / "mcp.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {"__name__": "docs_example"}  # nothing injected: the block as it stands
    exec(compile(blocks[0], "docs/frameworks/mcp.md", "exec"), namespace)
    assert UNBLOCK in namespace["question"]  # set only where Blocked was caught
    assert ANSWER in namespace["answer"]  # after sign-in and "I've done it" the task's command goes through


# -- an effect runs at most once (issue 23) ----------------------------------------------------

LEDGER_SERVER = SERVERS / "ledger_server.py"
#: How long the ledger server's first call of each tool takes to answer (its work is done at
#: once): past the proxy's one-second deadline, so the call times out after its effect.
SLOW_S = "4"


def _through_proxy_to_the_ledger(tmp_path: Path, tool: str, arguments: dict[str, Any]) -> tuple[CallToolResult,
                                                                                              list[str]]:
    """One call through ``unstuck mcp-proxy --deadline 1`` to the real ledger server; the
    result, and every call that reached the server's tools."""
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "LEDGER": str(tmp_path / "ledger"),
           "LEDGER_RUNS": str(runs), "LEDGER_SLOW_S": SLOW_S}
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "unstuck", "mcp-proxy", "--deadline", "1", "--", sys.executable, str(LEDGER_SERVER)],
        env=env, cwd=str(tmp_path))

    async def run() -> CallToolResult:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool(tool, arguments)

    result = anyio.run(run)
    return result, runs.read_text(encoding="utf-8").splitlines() if runs.exists() else []


def test_the_proxy_never_resends_a_timed_out_call_to_a_tool_without_annotations(tmp_path: Path) -> None:
    # MCP ToolAnnotations: readOnlyHint false, destructiveHint true, idempotentHint false by
    # default: the payment may have been booked, so a second request could book it twice.
    result, runs = _through_proxy_to_the_ledger(tmp_path, "append_payment", {"amount": 125})
    assert runs == ["append_payment"]
    assert (tmp_path / "ledger").read_text(encoding="utf-8").splitlines() == ["125"]
    assert result.is_error and "timed out" in _text(result)


@pytest.mark.parametrize(("tool", "arguments"), [("set_payment", {"payment_id": "p-1", "amount": 125}),
                                                 ("read_ledger", {})])
def test_the_proxy_retries_a_timed_out_call_to_an_idempotent_or_read_only_tool(
        tmp_path: Path, tool: str, arguments: dict[str, Any]) -> None:
    result, runs = _through_proxy_to_the_ledger(tmp_path, tool, arguments)
    assert runs == [tool, tool]  # timed out once, sent again after the wait, answered
    assert not result.is_error


def test_a_call_on_a_connection_that_closed_is_never_sent_and_only_such_a_call_is_retried() -> None:
    async def run(world: GhWorld) -> tuple[list[Any], str]:
        async with stdio_client(_shell(world, SERVERS / "crashing_server.py")) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            wrapped = await guarded_session(session, task=TASK, deadline_s=10, clock=VirtualClock())
            first = await wrapped.call_tool("run_command", {"command": TASK_COMMAND})  # the server dies mid-call
            assert first.is_error
            try:
                second = _text(await wrapped.call_tool("run_command", {"command": "echo hello"}))
            except Blocked as blocked:
                second = blocked.escalation.text
            return wrapped.guard.steps, second

    with GhWorld() as world:
        steps, second = anyio.run(run, world)
        ran = _ran(world)
    assert ran == []  # the server died on receiving the call, before running it
    first_calls = [s for s in steps if s.call.arguments.get("command") == TASK_COMMAND]
    later = [s for s in steps if s.call.arguments.get("command") == "echo hello"]
    assert len(first_calls) == 1 and not first_calls[0].auto_retry  # run_command has no annotations: a write
    assert len(later) > 1 and later[0].auto_retry and later[0].decision.value == "retry"
    assert "not sent" in second or "unavailable" in second
