"""The peer comparison (issue 13): the reference behaviours driven through each framework's own
test model, once with the framework's defaults and once with unstuck's adapter, in a fresh
:class:`~unstuck.evals.shell_world.ShellWorld` each (the real gh behind a plain shell tool).
Internal: not a supported import path (docs/reference/index.md lists those that are).

* ``openai-agents``: a scripted ``agents.models.interface.Model``; adapter
  :func:`~unstuck.integrations.openai_agents.guard_agent`;
* ``langgraph``: langchain_core's ``GenericFakeChatModel`` in ``create_agent``; adapter
  :class:`~unstuck.integrations.langgraph.UnstuckMiddleware`;
* ``pydantic-ai``: ``pydantic_ai.models.function.FunctionModel``; adapter
  :class:`~unstuck.integrations.pydantic_ai.UnstuckToolset`;
* ``mcp``: a scripted ``mcp.ClientSession`` client; adapter
  :func:`~unstuck.integrations.mcp.guarded_session`.

Each model plays :func:`~unstuck.evals.shell_world.commands_of` (one ``run_command`` call a
reply): the improviser the task's command then the reference workarounds, for ever; the
retrier the task's command again and again; the compliant agent the task's command once, then
its answer :data:`~unstuck.evals.shell_world.COMPLIANT_ANSWER` (it asks by itself). The MCP SDK
has no loop, so its "model" is the client itself, calling the real
:mod:`unstuck.integrations.shell_server` over stdio.

The defaults are recorded as they are, in one run: the Agents SDK stops at ``max_turns``
(``MaxTurnsExceeded``), Pydantic AI at its ``request_limit`` (``UsageLimitExceeded``),
LangGraph at its recursion limit (``GraphRecursionError``), MCP never. A run still going after
``cap`` tool calls is cut by the measurement (``capped``, shown as "≥ N calls"): the cap is the
measurement's, not a framework's, and applies to guarded runs too.

    >>> from unstuck.integrations.peers import run_peers, peer_ratios
    >>> runs = run_peers(["pydantic-ai"], ["gh_logged_out"], ["improviser"], cap=60)  # doctest: +SKIP
    >>> for q in peer_ratios(runs):  # doctest: +SKIP
    ...     print(q.framework, q.behaviour, q.text)  # e.g. "≥ 30.0x" when the defaults were capped

A framework that is not installed gives a :class:`PeerRun` whose ``error`` says what to
install; importing this module imports no framework.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from unstuck.evals.shell_world import ANSWER, COMPLIANT_ANSWER, SCENARIOS, TASK, UNBLOCK, Behaviour, ShellWorld
from unstuck.integrations.common import Blocked
from unstuck.store.events import EventLog, EventName, EventSink

__all__ = [
    "FRAMEWORKS",
    "UNBLOCKS",
    "Driver",
    "PeerRatio",
    "PeerRun",
    "peer_ratios",
    "run_langgraph",
    "run_mcp",
    "run_openai_agents",
    "run_peers",
    "run_pydantic_ai",
]

#: What the user must be told per scenario for "the exact unblock reached the user" (the
#: tool's own words for a signed-out gh; unstuck's remedy for a missing program).
UNBLOCKS = {"gh_logged_out": UNBLOCK, "gh_missing": "Install gh"}

#: Final statuses: the run stopped to ask (unstuck's question), a framework limit raised, the
#: model finished with an answer, the measurement cut a run that was still going.
BLOCKED, FAILED, ANSWERED, DONE, RUNNING = "blocked", "failed", "answered", "done", "running"


@dataclass(frozen=True, slots=True)
class PeerRun:
    """One behaviour driven through one framework on one scenario.

    Attributes:
        framework: a key of :data:`FRAMEWORKS`.
        scenario: a :data:`unstuck.evals.shell_world.SCENARIOS` name.
        behaviour: a :class:`~unstuck.evals.shell_world.Behaviour` value.
        guarded: with unstuck's adapter (``True``) or the framework's defaults.
        tool_calls: tool calls that reached the shell tool (refused calls are not counted here).
        capped: the measurement cut the run at ``cap`` calls (so ``tool_calls`` means "≥").
        stopped_by: how the run stopped, e.g. ``"MaxTurnsExceeded (max_turns 10)"``.
        exact_unblock: what the user got holds :data:`UNBLOCKS` of the scenario.
        status: ``blocked`` / ``failed`` / ``answered`` / ``done`` / ``running``.
        error: a harness error (or a framework not installed); ``None`` for a measured run.
        refused_calls: calls the guard refused before they reached the tool, counted from its
            decisions (one ``call.refused`` event each: what the scenario tables count as
            refused, a step that was not dispatched); ``0`` with the framework's defaults,
            where nothing refuses.
    """

    framework: str
    scenario: str
    behaviour: str
    guarded: bool
    tool_calls: int
    capped: bool
    stopped_by: str
    exact_unblock: bool
    status: str
    error: str | None = None
    refused_calls: int = 0

    @property
    def calls_text(self) -> str:
        """``tool_calls`` as shown: ``"≥ 200"`` when capped."""
        return f"≥ {self.tool_calls}" if self.capped else str(self.tool_calls)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PeerRatio:
    """Defaults' tool calls over unstuck's for one framework, scenario and behaviour.

    Attributes:
        defaults_calls: tool calls that ran with the framework's defaults.
        unstuck_calls: tool calls that ran with unstuck.
        unstuck_refused: calls unstuck's guard refused in that run (they never ran, and are
            not in ``unstuck_calls``).
        ratio: ``defaults_calls / unstuck_calls``; ``None`` when unstuck's run made no call
            or either run is missing or failed to run.
        at_least: the defaults' run was capped, so the ratio is a lower bound ("≥").
    """

    framework: str
    scenario: str
    behaviour: str
    defaults_calls: int
    unstuck_calls: int
    ratio: float | None
    at_least: bool
    unstuck_refused: int = 0

    @property
    def text(self) -> str:
        """``"≥ 50.0x"``, ``"2.5x"`` or ``"-"``."""
        if self.ratio is None:
            return "-"
        return f"{'≥ ' if self.at_least else ''}{self.ratio:.1f}x"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field, plus ``text``."""
        return {**asdict(self), "text": self.text}


Driver = Callable[..., PeerRun]


class _CapReached(BaseException):
    """The measurement's cap (a ``BaseException`` so no framework's ``except Exception`` retries it)."""


class _Script:
    """What the scripted model does next: a command (``str``) or, once the behaviour's commands
    run out, the final answer (``None``). Asking for more than ``cap`` calls raises
    :class:`_CapReached`."""

    def __init__(self, behaviour: Behaviour, cap: int) -> None:
        from unstuck.evals.shell_world import commands_of

        self.commands = commands_of(behaviour)
        self.cap = cap
        self.asked = 0

    def next(self) -> str | None:
        command = next(self.commands, None)
        if command is None:
            return None
        if self.asked >= self.cap:
            raise _CapReached
        self.asked += 1
        return command


def _run(framework: str, world: ShellWorld, behaviour: Behaviour, guarded: bool, calls: int, *,
         stopped_by: str, text: str = "", status: str, capped: bool = False, error: str | None = None) -> PeerRun:
    return PeerRun(framework, world.scenario, behaviour.value, guarded, calls, capped, stopped_by,
                   UNBLOCKS[world.scenario] in text, status, error)


def _finished(framework: str, world: ShellWorld, behaviour: Behaviour, guarded: bool, calls: int, text: str,
              how: str = "the model answered") -> PeerRun:
    return _run(framework, world, behaviour, guarded, calls, stopped_by=how, text=text,
                status=DONE if ANSWER in text else ANSWERED)


def _capped(framework: str, world: ShellWorld, behaviour: Behaviour, guarded: bool, calls: int, cap: int) -> PeerRun:
    return _run(framework, world, behaviour, guarded, calls, stopped_by=f"still running, cut at {cap} calls",
                status=RUNNING, capped=True)


def _blocked(framework: str, world: ShellWorld, behaviour: Behaviour, guarded: bool, calls: int, text: str,
             how: str) -> PeerRun:
    return _run(framework, world, behaviour, guarded, calls, stopped_by=how, text=text, status=BLOCKED)


def _not_installed(framework: str, world: ShellWorld, behaviour: Behaviour, guarded: bool, extra: str) -> PeerRun:
    return _run(framework, world, behaviour, guarded, 0, stopped_by="-", status=FAILED,
                error=f"not installed: pip install 'unstuck[{extra}]'")


def run_openai_agents(world: ShellWorld, behaviour: Behaviour, *, guarded: bool, cap: int = 200,
                      events: EventSink | None = None) -> PeerRun:
    """``behaviour`` as a scripted ``agents.models.interface.Model`` driving an ``Agent`` with one
    ``run_command`` function tool: ``Runner.run`` with its defaults (``max_turns`` 10, then
    ``MaxTurnsExceeded``) or :func:`~unstuck.integrations.openai_agents.guard_agent` (a blocked
    run raises :class:`~unstuck.integrations.openai_agents.RunBlocked`)."""
    name = "openai-agents"
    try:
        from agents import Agent, RunConfig, Runner, function_tool
        from agents.exceptions import MaxTurnsExceeded
        from agents.items import ModelResponse
        from agents.models.interface import Model
        from agents.run import DEFAULT_MAX_TURNS
        from agents.testing import assistant_message, function_call
        from agents.usage import Usage
    except ImportError:
        return _not_installed(name, world, behaviour, guarded, "openai-agents")
    from unstuck.integrations.openai_agents import guard_agent

    script = _Script(behaviour, cap)
    ids = itertools.count(1)

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            command = script.next()
            if command is None:
                return ModelResponse(output=[assistant_message(COMPLIANT_ANSWER)], usage=Usage(), response_id=None)
            call = function_call("run_command", {"command": command}, call_id=f"call_{next(ids)}")
            return ModelResponse(output=[call], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    @function_tool
    def run_command(command: str) -> str:
        """Run a shell command line and return its output."""
        return world.shell(command)

    agent: Agent[Any] = Agent(name=behaviour.value, instructions="Do the task with the shell.",
                              tools=[run_command], model=Scripted())

    quiet = RunConfig(tracing_disabled=True)  # no trace export (no API key); the run is otherwise as is

    async def go() -> PeerRun:
        try:
            if guarded:
                result = await guard_agent(agent, task=TASK, events=events).run(TASK, run_config=quiet)
            else:
                result = await Runner.run(agent, TASK, run_config=quiet)
        except Blocked as blocked:
            return _blocked(name, world, behaviour, guarded, len(world.commands), blocked.escalation.text,
                            "RunBlocked (unstuck's question)")
        except MaxTurnsExceeded:
            return _run(name, world, behaviour, guarded, len(world.commands),
                        stopped_by=f"MaxTurnsExceeded (max_turns {DEFAULT_MAX_TURNS})", status=FAILED)
        except _CapReached:
            return _capped(name, world, behaviour, guarded, len(world.commands), cap)
        return _finished(name, world, behaviour, guarded, len(world.commands), str(result.final_output))

    return asyncio.run(go())


def run_langgraph(world: ShellWorld, behaviour: Behaviour, *, guarded: bool, cap: int = 200,
                  events: EventSink | None = None) -> PeerRun:
    """``behaviour`` as langchain_core's ``GenericFakeChatModel`` (tool calls scripted) in
    ``langchain.agents.create_agent`` with one ``run_command`` tool, invoked without a config
    (LangGraph's default recursion limit, then ``GraphRecursionError``), or with
    :class:`~unstuck.integrations.langgraph.UnstuckMiddleware` (a blocked run ends with the
    question in graph state, read by :func:`~unstuck.integrations.langgraph.outcome`)."""
    name = "langgraph"
    try:
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.tools import tool
        from langgraph.errors import GraphRecursionError
    except ImportError:
        return _not_installed(name, world, behaviour, guarded, "langgraph")
    from unstuck.decide.outcome import TurnStatus
    from unstuck.integrations.langgraph import UnstuckMiddleware, outcome

    script = _Script(behaviour, cap)

    def replies() -> Iterator[AIMessage]:
        for number in itertools.count(1):
            command = script.next()
            if command is None:
                yield AIMessage(COMPLIANT_ANSWER)
                return
            yield AIMessage("", tool_calls=[{"name": "run_command", "args": {"command": command},
                                             "id": f"call_{number}", "type": "tool_call"}])

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
            return self  # the replies are scripted: no schema needed

    @tool
    def run_command(command: str) -> str:
        """Run a shell command line and return its output."""
        return world.shell(command)

    middleware = [UnstuckMiddleware([run_command], task=TASK, events=events)] if guarded else []
    agent = create_agent(Scripted(messages=replies()), [run_command], middleware=middleware)
    try:
        start: Any = {"messages": [("user", TASK)]}  # no config: LangGraph's default recursion limit
        result = agent.invoke(start)
    except _CapReached:
        return _capped(name, world, behaviour, guarded, len(world.commands), cap)
    except GraphRecursionError:
        return _run(name, world, behaviour, guarded, len(world.commands),
                    stopped_by="GraphRecursionError (recursion limit)", status=FAILED)
    seen = outcome(result)
    if seen.status is TurnStatus.BLOCKED:
        return _blocked(name, world, behaviour, guarded, len(world.commands), seen.question,
                        "run ended with unstuck's question")
    return _finished(name, world, behaviour, guarded, len(world.commands), str(result["messages"][-1].content))


def run_pydantic_ai(world: ShellWorld, behaviour: Behaviour, *, guarded: bool, cap: int = 200,
                    events: EventSink | None = None) -> PeerRun:
    """``behaviour`` as Pydantic AI's ``FunctionModel`` in an ``Agent`` with a ``FunctionToolset``
    of one ``run_command`` tool: ``run_sync`` with the default ``UsageLimits`` (``request_limit``
    50, then ``UsageLimitExceeded``) or through
    :class:`~unstuck.integrations.pydantic_ai.UnstuckToolset` (a blocked run's output is
    ``DeferredToolRequests`` carrying the question, read by
    :func:`~unstuck.integrations.pydantic_ai.escalation_of`)."""
    name = "pydantic-ai"
    try:
        from pydantic_ai import Agent
        from pydantic_ai.exceptions import UsageLimitExceeded
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.tools import DeferredToolRequests
        from pydantic_ai.toolsets import FunctionToolset
        from pydantic_ai.usage import UsageLimits
    except ImportError:
        return _not_installed(name, world, behaviour, guarded, "pydantic-ai")
    from unstuck.integrations.pydantic_ai import UnstuckToolset, escalation_of

    script = _Script(behaviour, cap)
    ids = itertools.count(1)

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        command = script.next()
        if command is None:
            return ModelResponse(parts=[TextPart(COMPLIANT_ANSWER)])
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": command}, f"call-{next(ids)}")])

    def run_command(command: str) -> str:
        """Run a shell command line and return its output."""
        return world.shell(command)

    tools: FunctionToolset[Any] = FunctionToolset([run_command])
    try:
        if guarded:
            agent: Agent[None, Any] = Agent(FunctionModel(reply), toolsets=[UnstuckToolset(
                tools, unattended=False, task=TASK, options={"events": events} if events is not None else {})],
                                            output_type=[str, DeferredToolRequests])
        else:
            agent = Agent(FunctionModel(reply), toolsets=[tools])
        result = agent.run_sync(TASK)
    except UsageLimitExceeded:
        return _run(name, world, behaviour, guarded, len(world.commands),
                    stopped_by=f"UsageLimitExceeded (request_limit {UsageLimits().request_limit})", status=FAILED)
    except _CapReached:
        return _capped(name, world, behaviour, guarded, len(world.commands), cap)
    asked = escalation_of(result.output)
    if asked is not None:
        return _blocked(name, world, behaviour, guarded, len(world.commands), asked.text,
                        "DeferredToolRequests (unstuck's question)")
    return _finished(name, world, behaviour, guarded, len(world.commands), str(result.output))


def run_mcp(world: ShellWorld, behaviour: Behaviour, *, guarded: bool, cap: int = 200,
            events: EventSink | None = None) -> PeerRun:
    """``behaviour`` as a scripted client of ``mcp.ClientSession`` calling ``run_command`` on
    the real :mod:`unstuck.integrations.shell_server` over stdio (``stdio_client``), plain (the
    SDK has no loop: it never stops) or through
    :func:`~unstuck.integrations.mcp.guarded_session` (a blocked call raises
    :class:`~unstuck.integrations.common.Blocked` to the host). Tool calls are counted from the
    server's own log of the commands it ran."""
    name = "mcp"
    try:
        import anyio
        from mcp import ClientSession, StdioServerParameters, stdio_client
    except ImportError:
        return _not_installed(name, world, behaviour, guarded, "mcp")
    from unstuck.integrations.mcp import guarded_session

    log = Path(world.box.root) / "shell-server-ran.log"
    server = StdioServerParameters(command=sys.executable, args=["-m", "unstuck.integrations.shell_server"],
                                   env={**world.box.env, "SHELL_SERVER_LOG": str(log)}, cwd=str(world.box.work))
    script = _Script(behaviour, cap)

    def ran() -> int:
        return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0

    async def go() -> PeerRun:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            call: Any = session.call_tool
            guarded_calls = await guarded_session(session, task=TASK, events=events) if guarded else None
            if guarded_calls is not None:
                call = guarded_calls.call_tool
            try:
                while (command := script.next()) is not None:
                    await call("run_command", {"command": command})
            except Blocked as blocked:
                return _blocked(name, world, behaviour, guarded, ran(), blocked.escalation.text,
                                "Blocked raised to the host")
            except _CapReached:
                return _capped(name, world, behaviour, guarded, ran(), cap)
            finally:
                if guarded_calls is not None:
                    guarded_calls.end()  # the host ends the turn, as run_turn does
        return _finished(name, world, behaviour, guarded, ran(), COMPLIANT_ANSWER, "the client answered")

    result: PeerRun = anyio.run(go)
    return result


#: The frameworks compared, by the name ``unstuck eval --frameworks`` takes.
FRAMEWORKS: dict[str, Driver] = {
    "openai-agents": run_openai_agents,
    "langgraph": run_langgraph,
    "pydantic-ai": run_pydantic_ai,
    "mcp": run_mcp,
}


def run_peers(frameworks: Iterable[str], scenarios: Iterable[str] = ("gh_logged_out",),
              behaviours: Iterable[str | Behaviour] = tuple(Behaviour), *, cap: int = 200,
              progress: Callable[[PeerRun], None] | None = None) -> list[PeerRun]:
    """Every framework × scenario × behaviour, with the defaults and then with unstuck, each in
    a fresh :class:`ShellWorld`; ``progress`` is called after each run. A driver that raises is
    recorded as a run with ``error`` (a harness error), not raised. A guarded run's
    ``refused_calls`` are the guard's ``call.refused`` events (its decisions), recorded in
    memory for the run.

    Raises:
        ValueError: an unknown framework, scenario or behaviour, or ``cap`` < 1.
    """
    chosen, worlds, acts = list(frameworks), list(scenarios), [Behaviour(b) for b in behaviours]
    unknown = [f for f in chosen if f not in FRAMEWORKS] + [s for s in worlds if s not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown framework or scenario {', '.join(unknown)}; "
                         f"known: {', '.join([*FRAMEWORKS, *SCENARIOS])}")
    if cap < 1:
        raise ValueError(f"cap must be at least 1, not {cap}")
    runs: list[PeerRun] = []
    for framework, scenario, behaviour, guarded in itertools.product(chosen, worlds, acts, (False, True)):
        decisions = EventLog()
        with ShellWorld(scenario) as world:
            try:
                run = FRAMEWORKS[framework](world, behaviour, guarded=guarded, cap=cap,
                                            events=decisions if guarded else None)
            except Exception as exc:  # a harness error is recorded, the comparison goes on
                run = _run(framework, world, behaviour, guarded, len(world.commands), stopped_by="-",
                           status=FAILED, error=f"{type(exc).__name__}: {exc}")
        run = replace(run, refused_calls=len(decisions.named(EventName.CALL_REFUSED)))
        runs.append(run)
        if progress is not None:
            progress(run)
    return runs


def peer_ratios(runs: Sequence[PeerRun]) -> list[PeerRatio]:
    """Per framework, scenario and behaviour (in the order first seen): the defaults' tool
    calls over unstuck's, a lower bound ("≥") when the defaults' run was capped, beside the
    calls unstuck refused."""
    pairs: dict[tuple[str, str, str], dict[bool, PeerRun]] = {}
    for run in runs:
        pairs.setdefault((run.framework, run.scenario, run.behaviour), {})[run.guarded] = run
    ratios: list[PeerRatio] = []
    for (framework, scenario, behaviour), pair in pairs.items():
        plain, guarded = pair.get(False), pair.get(True)
        if plain is None or guarded is None:
            continue
        usable = plain.error is None and guarded.error is None and guarded.tool_calls > 0
        ratios.append(PeerRatio(framework, scenario, behaviour, plain.tool_calls, guarded.tool_calls,
                                plain.tool_calls / guarded.tool_calls if usable else None, plain.capped,
                                guarded.refused_calls))
    return ratios
