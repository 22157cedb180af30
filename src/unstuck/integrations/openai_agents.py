"""unstuck in the OpenAI Agents SDK (``unstuck[openai-agents]``): every function tool call of an
agent goes through a :class:`unstuck.Guard` of its run, a blocked run stops and asks, and the user's
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
* **A guard per run**: each :meth:`GuardedAgent.run` (one ``Runner.run``) has a guard of its
  own, never the agent's: one agent serving many conversations, one after another or at once
  (``asyncio.gather``), keeps their budgets, blockers and latches apart. The run's tools and
  hooks find it through a ``contextvars.ContextVar`` that :meth:`GuardedAgent.run` sets around
  ``Runner.run`` (asyncio copies it into every task the SDK starts for the run's tools). The
  SDK's ``RunContextWrapper`` has no slot for a library's own data, and the run context is the
  caller's: it may be of any type (a dataclass, a pydantic model, a mapping, ``None``) and is
  passed on as is, never written to. A run of ``guarded.agent`` that :meth:`GuardedAgent.run`
  did not start (``Runner.run(guarded.agent, ...)``) has no guard of its own: such runs share
  one (a ``DeprecationWarning``).
* **State**: :class:`RunBlocked` carries the guard's state (``state``) beside the SDK's
  ``RunState``; :meth:`RunBlocked.to_string` keeps both in one text for another process. A run
  given no context gets a ``dict`` of unstuck's own as its context (the SDK's slot is then
  free), which holds the guard's state under :data:`STATE_KEY`, so ``RunState.to_string()``
  alone resumes it too.
* **Resuming**: :meth:`GuardedAgent.resume` rebuilds the stopped run's guard from its state,
  reads the answer (:func:`read_answer`), gives it to
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
import contextvars
import copy
import dataclasses
import inspect
import json
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, AgentHooks, FunctionTool, RunContextWrapper, Runner, RunResult, RunState
from agents.exceptions import AgentsException
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

__all__ = ["BLOCKED_KEY", "STATE_KEY", "GuardedAgent", "RunBlocked", "guard_agent", "probe"]

#: The key under which the guard's saved state is kept in the run context unstuck makes for a
#: run given none (a ``dict`` of unstuck's own; a context the caller gave is never written to).
STATE_KEY = "unstuck.guard.guard"
#: The key of :meth:`RunBlocked.to_string`'s JSON object: ``{"run_state": RunState.to_string(),
#: "guard": the guard's saved state}``.
BLOCKED_KEY = "unstuck.run_blocked"


class RunBlocked(Blocked):
    """A guarded Agents SDK run ended blocked (a :class:`~unstuck.integrations.common.Blocked`).

    Attributes:
        escalation: the question; ``escalation.text`` is what the user reads.
        state: the guard's saved state (:meth:`unstuck.Guard.to_json`).
        run_state: the SDK's ``RunState`` of the stopped run (``run_state.to_string()`` to keep
            it); its run context holds ``state`` under :data:`STATE_KEY` only when the run was
            given no context of its own: keep :meth:`to_string` (both) to resume anywhere.
        input_list: the run's conversation (``RunResult.to_input_list()``), to continue a run
            that ended in text.
        context: the run's context object, as the run was given it (``None`` when unknown).
    """

    def __init__(self, escalation: Escalation, state: str, run_state: RunState[Any, Any],
                 input_list: list[TResponseInputItem], *, context: Any = None) -> None:
        super().__init__(escalation, state)
        self.run_state = run_state
        self.input_list = input_list
        self.context = context

    def to_string(self, **run_state_options: Any) -> str:
        """The stopped run as one JSON text, for :meth:`GuardedAgent.resume` in any process: the
        SDK's ``RunState.to_string(**run_state_options)`` (e.g. ``context_serializer`` for a
        context of your own type) and the guard's state, under :data:`BLOCKED_KEY`."""
        return json.dumps({BLOCKED_KEY: {"run_state": self.run_state.to_string(**run_state_options),
                                         "guard": self.state}})


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


@dataclass(slots=True)
class _Run:
    """One run's guard (a ``Runner.run`` through :meth:`GuardedAgent.run`, or the resumed run
    of its ``RunState``), what its tools and hooks use."""

    guard: Guard
    order: _Order = field(default_factory=lambda: _Order([]))
    # the run context unstuck made, the run having been given none: the guard's state is kept in it
    own: dict[str, Any] | None = None
    context: Any = None  # a resumed conversation's run context (the stopped run's)


def _is_own(context: object) -> bool:
    """A run context unstuck made for a run given none: a dict holding the guard's state only."""
    return isinstance(context, dict) and set(context) == {STATE_KEY}


def _no_context(_: object) -> Mapping[str, Any]:
    """The context serializer of a ``RunState`` whose context the resuming side has already."""
    return {}


class GuardedAgent:
    """An agent whose function tools all go through a :class:`~unstuck.Guard` of the run (see
    the module doc). Build it with :func:`guard_agent`.

    Attributes:
        agent: the agent to run (a clone of the original with guarded tools).
        guard: the guard of the latest run started (each run has its own; runs at once each
            theirs).
        specs: what the guard knows of each tool, plus the extra tools (probes).
        unattended: the run's own (as given): a guard loaded from saved state (:meth:`resume`)
            runs with the stricter of it and the state's (:meth:`unstuck.Guard.from_json`).
    """

    def __init__(self, agent: Agent[Any], *, unattended: bool = False, task: str = "",
                 events: EventSink | None = None, extra_tools: Iterable[ToolSpec] = (),
                 guard_options: Mapping[str, Any] | None = None) -> None:
        self.events, self.unattended, self.task = events, unattended, task
        self.options = dict(guard_options or {})
        tools = [t for t in agent.tools if isinstance(t, FunctionTool)]
        self.specs = [spec_for(t.name, description=t.description, parameters=t.params_json_schema) for t in tools]
        self.specs.extend(extra_tools)
        self.guard = self._new_guard()
        # the run under way in this task (asyncio copies it into the tasks the SDK starts for tools)
        self._current: contextvars.ContextVar[_Run | None] = contextvars.ContextVar(
            f"unstuck.openai_agents.run.{id(self)}", default=None)
        self._direct: _Run | None = None  # for runs of ``self.agent`` not started by :meth:`run`
        # what resume returned (a RunState, or a conversation to continue), by id → its run
        self._resumed: dict[int, tuple[object, _Run]] = {}
        wrapped = {t.name: self._wrap(t) for t in tools}
        self._guarded_names = set(wrapped)
        self.agent = agent.clone(tools=[wrapped.get(t.name, t) if isinstance(t, FunctionTool) else t
                                        for t in agent.tools], hooks=_DeclaringHooks(self, agent.hooks))

    def _new_guard(self) -> Guard:
        return Guard(self.specs, unattended=self.unattended, task=self.task, events=self.events, **self.options)

    def _loaded(self, state: str) -> Guard:
        return Guard.from_json(state, self.specs, unattended=self.unattended, events=self.events, **self.options)

    def _run(self) -> _Run:
        """The run the calling tool or hook belongs to. A run of ``self.agent`` that
        :meth:`run` did not start (``Runner.run(guarded.agent, ...)``) has no guard of its
        own: such runs share one, as every run did before issue 27 (a ``DeprecationWarning``)."""
        run = self._current.get()
        if run is not None:
            return run
        if self._direct is None:
            warnings.warn("Runner.run(guarded.agent, ...) started without GuardedAgent.run: every such run shares "
                          "one guard, so a blocker in one conversation refuses the calls of the next; run it with "
                          "GuardedAgent.run (a guard per run)", DeprecationWarning, stacklevel=3)
            self._direct = _Run(self.guard)
        return self._direct

    def declare(self, response: ModelResponse) -> None:
        """Declare the guarded function calls of one model response to the run's guard, in
        the model's order (:meth:`Guard.reply`); they will run one at a time in that order.
        Called by the agent's ``AgentHooks.on_llm_end``; nothing for a response without
        guarded calls."""
        from openai.types.responses import ResponseFunctionToolCall
        calls = [ToolCall(item.call_id, item.name, item.arguments or "{}") for item in response.output
                 if isinstance(item, ResponseFunctionToolCall) and item.name in self._guarded_names]
        if calls:
            run = self._run()
            run.guard.reply(calls)
            run.order = _Order([c.id for c in calls])

    @contextlib.asynccontextmanager
    async def _turn_of(self, order: _Order, call_id: str) -> AsyncIterator[None]:
        """Hold the guard for ``call_id``: earlier calls of its response first, one at a time."""
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
            run = self._run()
            if run.guard.latched:
                return True
            asked = bool(own_approval)
            if callable(own_approval):
                decided = own_approval(ctx, params, call_id)
                asked = bool(await decided) if inspect.isawaitable(decided) else bool(decided)
            if not asked:
                run.order.expected.add(call_id)
            return asked

        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            call = ToolCall(ctx.tool_call_id, tool.name, arguments or "{}")
            run = self._run()
            async with self._turn_of(run.order, call.id):
                try:
                    return await self._guarded_call(run.guard, ctx, inner, call, timeout_s)
                finally:
                    self._keep(run)

        guarded = dataclasses.replace(tool, on_invoke_tool=invoke, needs_approval=needs_approval,
                                      timeout_seconds=None)
        return set_function_tool_failure_error_function(guarded, None)

    @staticmethod
    async def _guarded_call(guard: Guard, ctx: ToolContext[Any], inner: FunctionTool, call: ToolCall,
                            timeout_s: float | None) -> str:
        while True:
            decision = await guard.abefore(call)
            if decision.action is not Action.DISPATCH:
                return decision.content
            outcome: object
            try:
                outcome = await asyncio.wait_for(inner.on_invoke_tool(ctx, call.arguments_json), timeout_s)
            except Exception as error:  # the tool's failure, classified by the guard
                outcome = error
            decision = await guard.aafter(call, outcome)
            if decision.action is not Action.RETRY:
                return decision.content
            await asyncio.to_thread(guard.clock.sleep, decision.delay_s)

    @staticmethod
    def _keep(run: _Run) -> None:
        if run.own is not None:
            run.own[STATE_KEY] = run.guard.to_json()

    def save(self, ctx: RunContextWrapper[Any]) -> None:
        """Keep the run's guard state in the run context unstuck made for a run given none
        (under :data:`STATE_KEY`, where the SDK's ``RunState`` serialises it). A context the
        caller gave (a mapping, a dataclass, a pydantic model, ...) is never written to."""
        run = self._current.get()
        if run is not None and run.own is not None and ctx.context is run.own:
            self._keep(run)

    async def guard_mcp_servers(self) -> None:
        """Put the tools of the agent's MCP servers (``Agent.mcp_servers``, e.g.
        ``agents.mcp.MCPServerStdio``, connected) behind the guard too: each server tool becomes
        a function tool (``agents.mcp.MCPUtil.to_function_tool``, with ``failure_error_function=None``
        so a failed call's exception reaches the guard), guarded like the others, and the
        servers leave ``mcp_servers`` (the SDK would otherwise list their tools unguarded). An
        ``isError`` result reaches the guard as the SDK renders it (its text). Call it once,
        before the first run.

        Raises:
            agents.exceptions.UserError: a server that is not connected (the SDK's).
        """
        from agents.mcp import MCPUtil  # the SDK's MCP support imports the mcp package

        converted = [MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=False, agent=self.agent,
                                              failure_error_function=None)
                     for server in self.agent.mcp_servers for tool in await server.list_tools(None, self.agent)]
        self.specs.extend(spec_for(t.name, description=t.description, parameters=t.params_json_schema)
                          for t in converted)
        self.guard = self._loaded(self.guard.to_json())
        self._guarded_names.update(t.name for t in converted)
        self.agent = self.agent.clone(tools=[*self.agent.tools, *(self._wrap(t) for t in converted)], mcp_servers=[])

    # -- a run -------------------------------------------------------------------------------

    async def run(self, input: str | list[TResponseInputItem] | RunState[Any, Any], *,
                  context: Any = None, **runner_options: Any) -> RunResult:
        """``Runner.run(self.agent, input, context=..., **runner_options)``, guarded by a guard
        of this run's own (see the module doc).

        Args:
            input: the task, a conversation, or a ``RunState`` from :meth:`resume` (its run
                carries on with the guard :meth:`resume` rebuilt).
            context: the run context, of any type (a dataclass, a pydantic model, a mapping,
                ...), passed to the SDK as is and never written to; ``None`` (the default) gives
                the run a ``dict`` of unstuck's own that holds the guard's state under
                :data:`STATE_KEY`, so ``RunState.to_string()`` carries it. Ignored for a
                ``RunState``, which carries its own.
            runner_options: passed to ``Runner.run`` (``max_turns``, ``run_config``, ...).

        Returns:
            the SDK's ``RunResult`` of a run that finished (the guard's turn ended ``done``).

        Raises:
            RunBlocked: the run stopped to ask the user.
            ValueError: a ``RunState`` that :meth:`resume` did not return (its run has no guard).
            agents.exceptions.AgentsException: as the SDK raises them (``MaxTurnsExceeded``).
        """
        found = self._resumed.pop(id(input), None)
        if found is not None and found[0] is not input:
            found = None
        if isinstance(input, RunState):
            if found is None:
                raise ValueError("a RunState to run must be one GuardedAgent.resume returned (its run's guard is "
                                 "rebuilt there); pass the stopped run's RunBlocked or saved text to resume")
            run = found[1]
            options = dict(runner_options)
        elif found is not None:  # the conversation of a run that ended in text, with the guard's note
            run = found[1]
            kept = run.own if run.own is not None else (run.context if context is None else context)
            options = {**runner_options, "context": kept}
        else:
            own = {STATE_KEY: ""} if context is None else None  # a run given no context: the slot is unstuck's
            run = _Run(self._new_guard(), own=own)
            self._keep(run)
            options = {**runner_options, "context": own if own is not None else context}
        self.guard = run.guard
        run.order = _Order([])  # made in this event loop
        token = self._current.set(run)
        try:
            result = await Runner.run(self.agent, input, **options)
        finally:
            self._current.reset(token)
        self._keep(run)
        guard = run.guard
        escalation = guard.escalation
        if escalation is None and not result.interruptions:
            decision = guard.check_answer()
            if decision.action is Action.ESCALATE:
                escalation = decision.escalation
        if escalation is not None:
            self._keep(run)
            saved = guard.to_json()
            guard.end(TurnStatus.BLOCKED, answer=escalation.text)  # turn.ended, as run_turn's blocked turn
            raise RunBlocked(escalation, saved, result.to_state(), result.to_input_list(),
                             context=result.context_wrapper.context)
        if not result.interruptions:
            guard.end(TurnStatus.DONE, answer=str(result.final_output))
        return result

    async def resume(self, blocked: RunBlocked | str, answer: object, *, state: str | None = None,
                     context_deserializer: Callable[[Mapping[str, Any]], Any] | None = None,
                     ) -> RunState[Any, Any] | list[TResponseInputItem]:
        """Answer the question and return what to run next (pass it to :meth:`run`).

        Args:
            blocked: the :class:`RunBlocked` raised; or, for instance in another process, its
                :meth:`RunBlocked.to_string`, or a stopped run's ``RunState.to_string()`` (it
                holds the guard's state when the run was given no context; else pass ``state``).
            answer: the user's answer, read with :func:`read_answer` ("I've done it", "skip",
                "stop", an :class:`~unstuck.decide.escalation.Answer`).
            state: the guard's saved state (:attr:`RunBlocked.state`), for a ``RunState.to_string()``
                that does not hold it.
            context_deserializer: the SDK's (``RunState.from_string``), to rebuild a run context
                of your own type from its serialized form; the ``RunBlocked`` itself carries the
                context object.

        Returns:
            the ``RunState`` whose waiting call is rejected with the guard's note (the call
            never runs), or, for a run that ended in text, its conversation plus the note.

        Raises:
            RunBlocked: the answer does not lift the block ("stop", or the probe says it
                still holds); the question stands.
            ValueError: an answer that is none of the above, or a text that is neither
                :meth:`RunBlocked.to_string` nor a ``RunState.to_string()`` holding the guard's
                state (not JSON, not a JSON object, no run context, no guard state under
                :data:`STATE_KEY` and no ``state``): the message names which.
        """
        said = read_answer(answer)
        context: Any = None
        text: str | None
        if isinstance(blocked, RunBlocked):
            kept, saved, context, known = blocked.state, None, blocked.context, True
            try:  # bound to this agent through the SDK's own round trip (the context is carried as is)
                text = blocked.run_state.to_string(context_serializer=_no_context)
            except (TypeError, ValueError, AgentsException):  # a mapping context that is not JSON: carry on as is
                text = None
        else:
            text, kept, saved = _saved(blocked, state)
            known = False
        guard = self._loaded(kept)
        guard.start(resumed=True)
        decision = guard.answer(said)
        own: dict[str, Any] | None = None
        if _is_own(context if known else saved):
            own = context = {STATE_KEY: guard.to_json()}
            known = True
        run_state: RunState[Any, Any]
        if text is None:
            assert isinstance(blocked, RunBlocked)
            run_state = blocked.run_state
        elif known:
            wrapper: RunContextWrapper[Any] = RunContextWrapper(context=context)  # the very object, of any type
            run_state = await RunState.from_string(self.agent, text, context_override=wrapper)
        else:
            run_state = await RunState.from_string(self.agent, text, context_deserializer=context_deserializer)
        if decision.action is Action.ESCALATE or said is Answer.STOP:
            assert guard.escalation is not None
            inputs = blocked.input_list if isinstance(blocked, RunBlocked) else []
            again = guard.to_json()
            guard.end(TurnStatus.BLOCKED, answer=guard.escalation.text)
            raise RunBlocked(guard.escalation, again, run_state, inputs, context=context if known else None)
        self.guard = guard
        pending = run_state.get_interruptions()
        if pending:
            for item in pending:
                run_state.reject(item, rejection_message=decision.content)
            self._resumed[id(run_state)] = (run_state, _Run(guard, own=own))
            return run_state
        if not isinstance(blocked, RunBlocked):
            raise ValueError("a run that ended in text resumes from its RunBlocked (its conversation)")
        note: TResponseInputItem = {"role": "user", "content": decision.content}
        conversation = [*blocked.input_list, note]
        self._resumed[id(conversation)] = (conversation, _Run(guard, own=own, context=context))
        return conversation


def _saved(text: object, state: str | None) -> tuple[str, str, object]:
    """(the SDK's ``RunState.to_string()``, the guard's saved state, the serialized run context)
    of what :meth:`GuardedAgent.resume` was given as text: a :meth:`RunBlocked.to_string`, or a
    ``RunState.to_string()`` with the guard's state under :data:`STATE_KEY` of its run context
    or in ``state``. Raises ValueError naming what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"resume takes a RunBlocked, its to_string() or a RunState.to_string(), "
                         f"got {type(text).__name__}")
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"this run state is not JSON (RunState.to_string() gives JSON): {error}") from None
    if not isinstance(loaded, Mapping):
        raise ValueError(f"this run state is a JSON {type(loaded).__name__}, not the object RunState.to_string() gives")
    envelope = loaded.get(BLOCKED_KEY)
    if isinstance(envelope, Mapping):
        run_state, guard = envelope.get("run_state"), envelope.get("guard")
        if not isinstance(run_state, str) or not isinstance(guard, str):
            raise ValueError(f"this RunBlocked.to_string() has no \"run_state\" and \"guard\" texts under "
                             f"{BLOCKED_KEY!r}")
        return run_state, state or guard, _saved_context_of(run_state)
    wrapper = loaded.get("context")
    if not isinstance(wrapper, Mapping):
        raise ValueError("this run state's \"context\" is not an object (RunState.to_string() keeps the run "
                         f"context there), got {type(wrapper).__name__}")
    saved = wrapper.get("context")
    if state is not None:
        return text, state, saved
    if saved is not None and not isinstance(saved, Mapping):
        raise ValueError("this run state's run context (\"context\".\"context\") is not a mapping, got "
                         f"{type(saved).__name__}, and no guard state was given: pass state=blocked.state, "
                         "or keep RunBlocked.to_string()")
    kept = saved.get(STATE_KEY) if isinstance(saved, Mapping) else None
    if not isinstance(kept, str) or not kept:
        raise ValueError(f"this run state holds no guard state under {STATE_KEY!r} (a run given a context of "
                         "its own keeps none there): pass state=blocked.state, or keep RunBlocked.to_string()")
    return text, kept, saved


def _saved_context_of(run_state: str) -> object:
    with contextlib.suppress(ValueError, AttributeError):
        return json.loads(run_state)["context"]["context"]
    return None


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
