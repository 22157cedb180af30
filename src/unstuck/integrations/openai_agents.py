"""unstuck in the OpenAI Agents SDK (``unstuck[openai-agents]``): every function tool call of an
agent goes through one :class:`unstuck.Guard`, a blocked run stops and asks, and the user's
"I've done it" resumes it through the SDK's own ``RunState``.

For the user::

    guarded = guard_agent(agent, task=TASK, extra_tools=[probe("gh", check_gh)])
    try:
        result = await guarded.run(TASK)
    except RunBlocked as blocked:          # a unstuck.integrations.common.Blocked
        print(blocked.escalation.text)     # what is blocked, the exact unblock, what happens next
        result = await guarded.run(await guarded.resume(blocked, "I've done it"))

How it rides on the SDK (``openai-agents`` 0.24):

* **Each tool call**: every :class:`agents.FunctionTool` of the agent is replaced by a copy whose
  ``on_invoke_tool`` runs :meth:`Guard.before` → the real tool → :meth:`Guard.aafter`. What
  the model gets as the tool output is the guard's ``content``: the tool's text with guidance,
  or the guard's refusal text for a refused call (returned, never raised, so the SDK's generic
  "An error occurred while running the tool" never replaces it).
* **Parallel calls of one model response**: the agent's hooks (``Agent.hooks``, the SDK's
  ``AgentHooks.on_llm_end``, called once the model's response is in and before its tools run;
  the agent's own hooks are still called) declare the response's guarded function calls to
  the guard in the model's order (:meth:`Guard.reply`), and the guarded calls of one guard run
  one at a time in that order (``before`` → the tool → ``after`` of one call completes before
  the next call's ``before``), so a call the model sent alongside the first signal is refused
  once the guard latched, exactly as if the model had sent it alone. The SDK's parallel tool
  execution is given up for guarded tools (other tools still run in parallel). A declared call
  that never starts (the SDK held it for an approval) holds the others up at most
  :data:`unstuck.guard.guard.REPLY_WAIT_S` seconds.
* **Errors and retries never stack**: the real tool runs with its failure formatter removed
  (``set_function_tool_failure_error_function(tool, None)``: the SDK then re-raises), so the
  exception itself reaches :meth:`Guard.aafter`, which classifies it and decides a retry from
  unstuck's table; the tool's own ``timeout_seconds`` is applied around the real tool (the
  ``TimeoutError`` goes to the guard), never around the guard. Function tools have no retry of
  their own in the SDK (its ``retry`` module covers model calls only), so the guard's is the
  only one. The wrapper itself raises only for a bug (a malformed declared situation), and the
  SDK lets that fail the run.
* **Stopping**: once the guard escalated (``guard.escalation``, the latch), every guarded tool
  ``needs_approval`` (the SDK's human-in-the-loop: ``FunctionTool.needs_approval``), so the
  model's next tool call interrupts the run before it runs (``RunResult.interruptions``);
  :meth:`GuardedAgent.run` turns that into :class:`RunBlocked`. A run in which the model
  answered in text while the guard was latched, or whose answer :meth:`Guard.check_answer`
  escalates, is :class:`RunBlocked` too. A run raises :class:`RunBlocked` or returns the SDK's
  ``RunResult`` of a finished run: the two are never confused.
* **State**: the run context must be a mapping (or ``None``: a ``dict`` is made); the guard's
  :meth:`Guard.to_json` is kept in it under :data:`STATE_KEY` after every call, so the SDK's
  ``RunState.to_string()`` holds it, and :meth:`GuardedAgent.resume` rebuilds the guard with
  :meth:`Guard.from_json` from that string (another process may resume).
* **Resuming**: :meth:`GuardedAgent.resume` reads the answer (:func:`read_answer`), gives it to
  :meth:`Guard.answer` (which runs the blocker's probe for "I've done it"), and rejects the
  pending call with the guard's note (``RunState.reject(item, rejection_message=...)``), so the
  model's workaround that was waiting never runs; it returns the ``RunState`` to pass to
  ``Runner.run``. A run that ended in text is continued with ``RunResult.to_input_list()`` plus
  the note (the SDK's way to continue a conversation).

Local MCP servers (``MCPServerStdio``): after connecting them, ``await
guarded.guard_mcp_servers()`` puts their tools behind the same guard (:meth:`GuardedAgent.guard_mcp_servers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, AgentHooks, FunctionTool, RunContextWrapper, Runner, RunResult, RunState
from agents.items import ModelResponse, TResponseInputItem
from agents.tool import set_function_tool_failure_error_function
from agents.tool_context import ToolContext

from unstuck.core.situations import Probe
from unstuck.core.tools import ToolCall
from unstuck.decide.escalation import Answer, Escalation
from unstuck.decide.outcome import TurnStatus
from unstuck.decide.policy import Action
from unstuck.guard.guard import REPLY_WAIT_S, Guard
from unstuck.integrations.common import Blocked, read_answer, spec_for
from unstuck.store.events import EventSink
from unstuck.toolkit.specs import ToolSpec

__all__ = ["STATE_KEY", "GuardedAgent", "RunBlocked", "guard_agent", "probe"]

#: The key of the run context (a mapping) under which the guard's saved state is kept.
STATE_KEY = "unstuck.guard.guard"


class RunBlocked(Blocked):
    """A guarded Agents SDK run ended blocked (a :class:`~unstuck.integrations.common.Blocked`).

    Attributes:
        escalation: the question; ``escalation.text`` is what the user reads.
        state: the guard's saved state (:meth:`unstuck.Guard.to_json`).
        run_state: the SDK's ``RunState`` of the stopped run (``run_state.to_string()`` to keep
            it); its context holds ``state`` under :data:`STATE_KEY`.
        input_list: the run's conversation (``RunResult.to_input_list()``), to continue a run
            that ended in text.
    """

    def __init__(self, escalation: Escalation, state: str, run_state: RunState[Any, Any],
                 input_list: list[TResponseInputItem]) -> None:
        super().__init__(escalation, state)
        self.run_state = run_state
        self.input_list = input_list


def probe(subject: str, check: Callable[[], object], *, description: str = "") -> ToolSpec:
    """A probe for blockers on ``subject`` (a program such as ``"gh"``): a read-only tool named
    after the subject, for the guard only (the model never sees it), whose ``check()`` is run
    by :meth:`Guard.answer` when the user says "I've done it". ``check`` returns what a tool
    returns (text, :class:`~unstuck.core.tools.CommandOutput`, ...); the blocker holds while its
    result reads as a failure (:meth:`Guard.run_probe`).

    Raises:
        ValueError: for an empty subject.
    """
    spec = spec_for(subject, description=description or f"checks whether {subject} is usable",
                    fn=lambda **_: check(), subject=subject)
    return dataclasses.replace(spec, probe=Probe.of(subject))


def _context_of(wrapper: RunContextWrapper[Any]) -> MutableMapping[str, Any] | None:
    context = wrapper.context
    return context if isinstance(context, MutableMapping) else None


@dataclass(slots=True)
class _Order:
    """One model response's guarded calls, in the model's order, run one at a time."""

    ids: list[str]
    expected: set[str] = field(default_factory=set)  # the SDK is about to run them (no approval pending)
    done: set[str] = field(default_factory=set)
    turn: asyncio.Condition = field(default_factory=asyncio.Condition)

    def ready(self, call_id: str) -> bool:
        earlier = self.ids[:self.ids.index(call_id)] if call_id in self.ids else self.ids
        return all(i in self.done for i in earlier if i in self.expected)


class _DeclaringHooks(AgentHooks[Any]):
    """The agent's hooks: ``on_llm_end`` declares the response's calls, then every hook is
    passed on to the agent's own hooks (``inner``, or none)."""

    def __init__(self, owner: GuardedAgent, inner: Any) -> None:
        self.owner, self.inner = owner, inner

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        self.owner.declare(response)
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)


def _passed_on(name: str) -> Callable[..., Any]:
    async def hook(self: _DeclaringHooks, *args: Any, **kwargs: Any) -> Any:
        if self.inner is not None:
            return await getattr(self.inner, name)(*args, **kwargs)
        return None
    hook.__name__ = name
    return hook


for _name in ("on_start", "on_end", "on_handoff", "on_tool_start", "on_tool_end", "on_llm_start"):
    setattr(_DeclaringHooks, _name, _passed_on(_name))


class GuardedAgent:
    """An agent whose function tools all go through one :class:`~unstuck.Guard` (see the
    module doc). Build it with :func:`guard_agent`.

    Attributes:
        agent: the agent to run (a clone of the original with guarded tools).
        guard: the guard of the current run (rebuilt by :meth:`resume`).
        specs: what the guard knows of each tool, plus the extra tools (probes).
        unattended: the run's own (as given): a guard loaded from saved state (:meth:`resume`)
            runs with the stricter of it and the state's (:meth:`unstuck.Guard.from_json`).
    """

    def __init__(self, agent: Agent[Any], *, unattended: bool = False, task: str = "",
                 events: EventSink | None = None, extra_tools: Iterable[ToolSpec] = (),
                 guard_options: Mapping[str, Any] | None = None) -> None:
        self.events, self.unattended = events, unattended
        self.options = dict(guard_options or {})
        tools = [t for t in agent.tools if isinstance(t, FunctionTool)]
        self.specs = [spec_for(t.name, description=t.description, parameters=t.params_json_schema) for t in tools]
        self.specs.extend(extra_tools)
        self.guard = Guard(self.specs, unattended=unattended, task=task, events=events, **self.options)
        self._order = _Order([])
        wrapped = {t.name: self._wrap(t) for t in tools}
        self._guarded_names = set(wrapped)
        self.agent = agent.clone(tools=[wrapped.get(t.name, t) if isinstance(t, FunctionTool) else t
                                        for t in agent.tools], hooks=_DeclaringHooks(self, agent.hooks))

    def declare(self, response: ModelResponse) -> None:
        """Declare the guarded function calls of one model response to the guard, in the
        model's order (:meth:`Guard.reply`); they will run one at a time in that order.
        Called by the agent's ``AgentHooks.on_llm_end``; nothing for a response without
        guarded calls."""
        from openai.types.responses import ResponseFunctionToolCall
        calls = [ToolCall(item.call_id, item.name, item.arguments or "{}") for item in response.output
                 if isinstance(item, ResponseFunctionToolCall) and item.name in self._guarded_names]
        if calls:
            self.guard.reply(calls)
            self._order = _Order([c.id for c in calls])

    @contextlib.asynccontextmanager
    async def _turn_of(self, call_id: str) -> AsyncIterator[None]:
        """Hold the guard for ``call_id``: earlier calls of its response first, one at a time."""
        order = self._order
        async with order.turn:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(order.turn.wait_for(lambda: order.ready(call_id)), REPLY_WAIT_S)
            try:
                yield
            finally:
                order.done.add(call_id)
                order.turn.notify_all()

    # -- the tools ---------------------------------------------------------------------------

    def _wrap(self, tool: FunctionTool) -> FunctionTool:
        inner = set_function_tool_failure_error_function(copy.copy(tool), None)  # the SDK re-raises
        timeout_s = tool.timeout_seconds
        own_approval = tool.needs_approval

        async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            if self.guard.latched:
                return True
            asked = bool(own_approval)
            if callable(own_approval):
                decided = own_approval(ctx, params, call_id)
                asked = bool(await decided) if inspect.isawaitable(decided) else bool(decided)
            if not asked:
                self._order.expected.add(call_id)
            return asked

        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            call = ToolCall(ctx.tool_call_id, tool.name, arguments or "{}")
            async with self._turn_of(call.id):
                try:
                    return await self._guarded_call(ctx, inner, call, timeout_s)
                finally:
                    self.save(ctx)

        guarded = dataclasses.replace(tool, on_invoke_tool=invoke, needs_approval=needs_approval,
                                      timeout_seconds=None)
        return set_function_tool_failure_error_function(guarded, None)

    async def _guarded_call(self, ctx: ToolContext[Any], inner: FunctionTool, call: ToolCall,
                            timeout_s: float | None) -> str:
        while True:
            decision = await self.guard.abefore(call)
            if decision.action is not Action.DISPATCH:
                return decision.content
            outcome: object
            try:
                outcome = await asyncio.wait_for(inner.on_invoke_tool(ctx, call.arguments_json), timeout_s)
            except Exception as error:  # the tool's failure, classified by the guard
                outcome = error
            decision = await self.guard.aafter(call, outcome)
            if decision.action is not Action.RETRY:
                return decision.content
            await asyncio.to_thread(self.guard.clock.sleep, decision.delay_s)

    def save(self, ctx: RunContextWrapper[Any]) -> None:
        """Keep the guard's state in the run context (under :data:`STATE_KEY`), where the
        SDK's ``RunState`` serialises it. Nothing for a context that is not a mapping."""
        context = _context_of(ctx)
        if context is not None:
            context[STATE_KEY] = self.guard.to_json()

    async def guard_mcp_servers(self) -> None:
        """Put the tools of the agent's MCP servers (``Agent.mcp_servers``, e.g.
        ``agents.mcp.MCPServerStdio``, connected) behind the guard too: each server tool becomes
        a function tool (``agents.mcp.MCPUtil.to_function_tool``, with ``failure_error_function=None``
        so a failed call's exception reaches the guard), guarded like the others, and the
        servers leave ``mcp_servers`` (the SDK would otherwise list their tools unguarded). An
        ``isError`` result reaches the guard as the SDK renders it (its text). Call it once,
        before the first run; the guard keeps the state it has.

        Raises:
            agents.exceptions.UserError: a server that is not connected (the SDK's).
        """
        from agents.mcp import MCPUtil  # the SDK's MCP support imports the mcp package

        converted = [MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=False, agent=self.agent,
                                              failure_error_function=None)
                     for server in self.agent.mcp_servers for tool in await server.list_tools(None, self.agent)]
        self.specs.extend(spec_for(t.name, description=t.description, parameters=t.params_json_schema)
                          for t in converted)
        self.guard = Guard.from_json(self.guard.to_json(), self.specs, unattended=self.unattended, events=self.events,
                                     **self.options)
        self._guarded_names.update(t.name for t in converted)
        self.agent = self.agent.clone(tools=[*self.agent.tools, *(self._wrap(t) for t in converted)], mcp_servers=[])

    # -- a run -------------------------------------------------------------------------------

    async def run(self, input: str | list[TResponseInputItem] | RunState[Any, Any], *,
                  context: MutableMapping[str, Any] | None = None, **runner_options: Any) -> RunResult:
        """``Runner.run(self.agent, input, context=..., **runner_options)``, guarded.

        Args:
            input: the task, a conversation, or a ``RunState`` from :meth:`resume`.
            context: the run context, a mutable mapping (a new ``dict`` by default; ignored
                for a ``RunState``, which carries its own).
            runner_options: passed to ``Runner.run`` (``max_turns``, ``run_config``, ...).

        Returns:
            the SDK's ``RunResult`` of a run that finished (the guard's turn ended ``done``).

        Raises:
            RunBlocked: the run stopped to ask the user.
            TypeError: for a context that is not a mutable mapping.
            agents.exceptions.AgentsException: as the SDK raises them (``MaxTurnsExceeded``).
        """
        self._order = _Order([])  # made in this event loop
        if isinstance(input, RunState):
            result = await Runner.run(self.agent, input, **runner_options)
        else:
            if context is None:
                context = {}
            if not isinstance(context, MutableMapping):
                raise TypeError(f"a guarded run needs a mutable mapping as its context, got {type(context).__name__}")
            context[STATE_KEY] = self.guard.to_json()
            result = await Runner.run(self.agent, input, context=context, **runner_options)
        self.save(result.context_wrapper)
        escalation = self.guard.escalation
        if escalation is None and not result.interruptions:
            decision = self.guard.check_answer()
            if decision.action is Action.ESCALATE:
                escalation = decision.escalation
        if escalation is not None:
            self.save(result.context_wrapper)
            saved = self.guard.to_json()
            self.guard.end(TurnStatus.BLOCKED, answer=escalation.text)  # turn.ended, as run_turn's blocked turn
            raise RunBlocked(escalation, saved, result.to_state(), result.to_input_list())
        if not result.interruptions:
            self.guard.end(TurnStatus.DONE, answer=str(result.final_output))
        return result

    async def resume(self, blocked: RunBlocked | str, answer: object) -> RunState[Any, Any] | list[TResponseInputItem]:
        """Answer the question and return what to run next (pass it to :meth:`run`).

        Args:
            blocked: the :class:`RunBlocked` raised, or a stopped run's ``RunState`` as
                ``RunState.to_string()`` gave it (for instance in another process).
            answer: the user's answer, read with :func:`read_answer` ("I've done it", "skip",
                "stop", an :class:`~unstuck.decide.escalation.Answer`).

        Returns:
            the ``RunState`` whose waiting call is rejected with the guard's note (the call
            never runs), or, for a run that ended in text, its conversation plus the note.

        Raises:
            RunBlocked: the answer does not lift the block ("stop", or the probe says it
                still holds); the question stands.
            ValueError: an answer that is none of the above, or a state that is not a
                ``RunState.to_string()`` holding the guard's (not JSON, not a JSON object, no
                mapping run context, no guard state under :data:`STATE_KEY`): the message
                names which.
        """
        said = read_answer(answer)
        text = blocked.run_state.to_string() if isinstance(blocked, RunBlocked) else blocked
        saved = _saved_context(text)
        self.guard = Guard.from_json(saved[STATE_KEY], self.specs, unattended=self.unattended, events=self.events,
                                     **self.options)
        self.guard.start(resumed=True)
        decision = self.guard.answer(said)
        context = {**saved, STATE_KEY: self.guard.to_json()}
        state = await RunState.from_string(self.agent, text, context_deserializer=lambda _: context)
        if decision.action is Action.ESCALATE or said is Answer.STOP:
            assert self.guard.escalation is not None
            inputs = blocked.input_list if isinstance(blocked, RunBlocked) else []
            kept = self.guard.to_json()
            self.guard.end(TurnStatus.BLOCKED, answer=self.guard.escalation.text)
            raise RunBlocked(self.guard.escalation, kept, state, inputs)
        pending = state.get_interruptions()
        if pending:
            for item in pending:
                state.reject(item, rejection_message=decision.content)
            return state
        if not isinstance(blocked, RunBlocked):
            raise ValueError("a run that ended in text resumes from its RunBlocked (its conversation)")
        note: TResponseInputItem = {"role": "user", "content": decision.content}
        return [*blocked.input_list, note]


def _saved_context(text: object) -> Mapping[str, Any]:
    """The run context kept in a ``RunState.to_string()`` (``{"context": {"context": {...}}}``),
    holding the guard's state. Raises ValueError naming what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"resume takes a RunBlocked or a RunState.to_string(), got {type(text).__name__}")
    try:
        state = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"this run state is not JSON (RunState.to_string() gives JSON): {error}") from None
    if not isinstance(state, Mapping):
        raise ValueError(f"this run state is a JSON {type(state).__name__}, not the object RunState.to_string() gives")
    wrapper = state.get("context")
    if not isinstance(wrapper, Mapping):
        raise ValueError("this run state's \"context\" is not an object (RunState.to_string() keeps the run "
                         f"context there), got {type(wrapper).__name__}")
    saved = wrapper.get("context")
    if not isinstance(saved, Mapping):
        raise ValueError("this run state's run context (\"context\".\"context\") is not a mapping, got "
                         f"{type(saved).__name__}; a guarded run's context is a mapping")
    if not isinstance(saved.get(STATE_KEY), str):
        raise ValueError(f"this run state holds no guard state under {STATE_KEY!r}")
    return saved


def guard_agent(agent: Agent[Any], *, unattended: bool = False, task: str = "", events: EventSink | None = None,
                extra_tools: Iterable[ToolSpec] = (), **guard_options: Any) -> GuardedAgent:
    """Guard every function tool of ``agent`` (see the module doc).

    Args:
        agent: an ``agents.Agent``; its function tools are described to the guard with
            :func:`~unstuck.integrations.common.spec_for` (a ``command`` string parameter
            makes a command-line tool, whose subject is the program it runs). Other tools
            (hosted tools, handoffs) pass through unguarded.
        unattended: nobody can answer now (CI, a server): interactive calls are refused.
        task: the run's task, named in the question.
        events: where the guard records its decisions.
        extra_tools: tools for the guard only, e.g. :func:`probe` specs.
        guard_options: other :class:`~unstuck.Guard` arguments (``config``, ``clock``,
            ``journal``, ``lessons``...).
    """
    return GuardedAgent(agent, unattended=unattended, task=task, events=events, extra_tools=extra_tools,
                        guard_options=guard_options)
