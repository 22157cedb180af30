"""Pydantic AI: a :class:`~unstuck.Guard` per run in front of every tool of a toolset (``unstuck[pydantic-ai]``).

:class:`UnstuckToolset` is a Pydantic AI ``WrapperToolset``: every call of the wrapped toolset
goes through the guard (``before`` → the real tool → ``after``). When the guard stops the turn,
the call is deferred (Pydantic AI's ``ApprovalRequired``), so the run ends with
``DeferredToolRequests`` as its output, the question in the request's metadata; the host
answers with ``DeferredToolResults`` (:func:`answer_results`) on the next run::

    toolset = UnstuckToolset(FunctionToolset([run_command]), unattended=False, task=task)
    agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    result = agent.run_sync(task)
    if (asked := escalation_of(result.output)) is not None:   # blocked, not done
        print(asked.text)                                     # ... the user signs in ...
        result = agent.run_sync(message_history=result.all_messages(),
                                deferred_tool_results=answer_results(result.output, "I've done it"))

:class:`UnstuckCapability` does the same for every tool of an agent (a Pydantic AI capability's
``get_wrapper_toolset``) and ends the turn when the run ends (``after_run``); the toolset alone
leaves the turn open (no ``turn.ended`` event).

How each piece maps onto Pydantic AI (``pydantic_ai.toolsets.WrapperToolset``,
``pydantic_ai.exceptions.ApprovalRequired``, ``pydantic_ai.tools.DeferredToolRequests`` /
``DeferredToolResults``, the "Deferred tools" docs):

* **Refused**: a call the guard refuses is not run; its return is the guard's refusal text (a
  plain return, not ``ModelRetry``: the tool's retry cap, 1 by default, would end the run
  before any question).
* **Blocked**: the guard escalates → the call raises ``ApprovalRequired(metadata=...)``; the
  run's output is ``DeferredToolRequests`` whose ``approvals`` hold that call and whose
  ``metadata[call id]["unstuck"]`` holds the escalation (``question``, ``unblock``,
  ``subject``, ``kind``) and the guard's saved state (``state``: :meth:`unstuck.Guard.to_json`).
  A finished run's output is the agent's ``str``; :func:`escalation_of` tells them apart.
  Approvals are the one deferral Pydantic AI hands back to the toolset on the next run
  (``RunContext.tool_call_approved`` and ``tool_call_metadata``, from
  ``DeferredToolResults.metadata``); an external call's result would go to the model unseen.
* **Answered**: :func:`answer_results` approves the deferred call with the user's answer in
  its metadata (any form :func:`~unstuck.integrations.common.read_answer` reads; a bare
  ``True`` approval means "I've done it"). Pydantic AI calls the toolset again for that call;
  the wrapper does not run the tool again, it gives the answer to :meth:`unstuck.Guard.answer`
  (which runs the blocker's probe) and returns its note to the model: "I've done it" with a
  clean probe or "Skip it" → the run goes on; a probe that says it still holds → deferred
  again with the same question; "Stop" → :class:`~unstuck.integrations.common.Blocked` is
  raised out of ``agent.run``. A denied approval (``False``/``ToolDenied``) reaches the model
  as Pydantic AI's denial; the guard stays latched, so the next call is deferred again.
* **A guard per run**: each agent run gets its own guard (Pydantic AI's per-run hook,
  ``AbstractToolset.for_run`` / ``AbstractCapability.for_run``: "return a fresh instance for
  per-run state isolation"), never the agent's or the toolset's: one agent serving many
  conversations, one after another or at once, keeps their budgets, blockers and latches
  apart. A run that answers unstuck's deferred question carries on its blocked run's turn from
  the ``state`` in the deferred call's metadata, which :func:`answer_results` passes back (the
  host keeps only ``message_history`` and the ``DeferredToolRequests``, as Pydantic AI's docs
  have it for any deferred call), so a new process carries on the same turn; a bare ``True``
  approval finds that state by the run's ``RunContext.conversation_id`` and the call's id, in
  this process. Any other run starts a new turn.
* **One call at a time**: Pydantic AI runs a model response's tool calls concurrently; the
  guard's rules (a blocker's workaround budget, no credential hunting while a sign-in is open,
  the latch) need each call assessed before the next one is decided. So each response is
  declared to the guard (:meth:`unstuck.Guard.reply`, the calls of the response in
  ``RunContext.messages``, in the model's order), every guarded tool is marked
  ``sequential=True`` (``ToolDefinition.sequential``: Pydantic AI runs it alone, after the
  calls emitted before it), and an ``asyncio.Lock`` per guard keeps one call's ``before`` →
  tool → ``after`` whole. Parallelism is given up for guarded tools.
* **Answers**: the toolset alone does not check the run's final answer; use
  :class:`UnstuckCapability` for that (an answer given while a blocker is open raises
  :class:`~unstuck.integrations.common.Blocked` out of ``agent.run``).
* **Retries never stack**: the guard's ``retry`` decisions (its retry table: transient
  failures, capped backoff) are executed by the wrapper itself: it waits ``delay_s`` on the
  guard's clock and runs the same call again, inside one Pydantic AI tool call. A tool's own
  ``ModelRetry`` is reported to the guard as the call's result and then re-raised to
  Pydantic AI (counted against the tool's ``max_retries``, as the tool meant) only when the
  guard did not already retry that call; when the guard retried it, its final text is the
  return, so one failure is retried by one mechanism only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    AgentRunError,
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    SkipToolExecution,
    SkipToolValidation,
    ToolFailed,
    UserError,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from unstuck.core.tools import Effect, ToolCall
from unstuck.decide.escalation import Answer, Escalation
from unstuck.decide.outcome import TurnStatus
from unstuck.guard.guard import Action, Decision, Guard
from unstuck.integrations.common import Blocked, read_answer, spec_for
from unstuck.toolkit.specs import ToolSpec

__all__ = ["METADATA_KEY", "UnstuckCapability", "UnstuckToolset", "answer_results", "escalation_of"]


#: Pydantic AI's own control flow from inside a toolset: never assessed, passed on as raised.
_PASS_THROUGH = (CallDeferred, ApprovalRequired, SkipToolExecution, SkipToolValidation, UserError, AgentRunError)


@dataclass(slots=True)
class _Held:
    """One run's guard and what goes with it, shared by the copies Pydantic AI makes of the
    run's toolset (``dataclasses.replace``: ``for_run_step``, ``WrapperToolset.for_run``)."""

    guard: Guard | None
    names: frozenset[str]
    asked: dict[str, bool] = field(default_factory=dict)  # deferred call id → the call ran
    restored: bool = False  # the guard was rebuilt from a deferred call's saved state
    # runs a tool of the wrapped toolset for the guard's probe, while an answer is being heard
    runner: Callable[[str, dict[str, Any]], Any] | None = None
    declared: tuple[str, ...] = ()  # the call ids of the model reply last declared to the guard
    # one guarded call at a time: the lock of the event loop that runs the calls
    lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def lock_for(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        """The :class:`asyncio.Lock` that serializes calls on ``loop`` (a new one for a new
        loop: ``run_sync`` runs each run on its own)."""
        if self.lock is None or self.lock[0] is not loop:
            self.lock = (loop, asyncio.Lock())
        return self.lock[1]


#: How many stopped runs :class:`_Runs` remembers for bare approvals (the oldest is forgotten first).
_WAITING_KEPT = 256


@dataclass(slots=True)
class _Runs:
    """What the runs of one :class:`UnstuckToolset` or :class:`UnstuckCapability` share: never
    a guard in use, only the latest run's (:attr:`UnstuckToolset.current`) and the saved state
    of runs that stopped on a question, by (conversation id, deferred call id), so that a bare
    approval of that call carries on its turn."""

    latest: _Held | None = None
    waiting: dict[tuple[str, str], str] = field(default_factory=dict)

    def stopped(self, conversation: str | None, call_id: str, state: str) -> None:
        self.waiting.pop((conversation or "", call_id), None)
        self.waiting[(conversation or "", call_id)] = state
        while len(self.waiting) > _WAITING_KEPT:
            self.waiting.pop(next(iter(self.waiting)))


def _run_guard_argument(owner: str) -> None:
    warnings.warn(f"{owner}(guard=...) shares one guard between every run of the agent, so a blocker in one "
                  "conversation refuses the calls of the next; each run now gets its own guard: pass "
                  "options={...} for its arguments instead", DeprecationWarning, stacklevel=4)


def _reply_of(messages: Sequence[ModelMessage], call_id: str) -> list[ToolCall]:
    """The tool calls of the model response that holds ``call_id``, in the model's order
    (``RunContext.messages`` ends with the response whose calls are running); ``[]`` when
    no response holds it."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            parts = [p for p in message.parts if isinstance(p, ToolCallPart)]
            if any(p.tool_call_id == call_id for p in parts):
                return [ToolCall.of(p.tool_call_id, p.tool_name, p.args_as_dict()) for p in parts]
    return []

#: The key under which the escalation and the guard's state sit in a deferred call's metadata
#: (``DeferredToolRequests.metadata[call id][METADATA_KEY]``) and the answer in
#: ``DeferredToolResults.metadata[call id][METADATA_KEY]``.
METADATA_KEY = "unstuck"


def _unstuck_metadata(metadata: object) -> Mapping[str, Any] | None:
    if isinstance(metadata, Mapping):
        inner = metadata.get(METADATA_KEY)
        if isinstance(inner, Mapping):
            return inner
    return None


def escalation_of(output: object) -> Escalation | None:
    """The question a guarded run stopped on: ``None`` for a finished run (its output is not
    ``DeferredToolRequests``, or none of its deferred calls is unstuck's), else the
    :class:`~unstuck.decide.escalation.Escalation` (``.text`` is what the user reads; ``.unblock`` the
    exact unblock when a tool declared one)."""
    if not isinstance(output, DeferredToolRequests):
        return None
    for call in output.approvals:
        inner = _unstuck_metadata(output.metadata.get(call.tool_call_id))
        if inner is not None and isinstance(inner.get("escalation"), Mapping):
            return Escalation.from_dict(dict(inner["escalation"]))
    return None


def answer_results(requests: DeferredToolRequests, answer: object) -> DeferredToolResults:
    """The ``DeferredToolResults`` that answer a blocked run: unstuck's deferred call approved,
    with the user's ``answer`` (any form :func:`~unstuck.integrations.common.read_answer` reads:
    ``"I've done it"``, ``"skip"``, ``Answer.STOP`` ...) and the guard's saved state in its
    metadata. Other deferred calls of ``requests`` are left for the host to answer (merge with
    ``DeferredToolResults.update``).

    Raises:
        ValueError: when ``answer`` is not an answer, or ``requests`` holds no unstuck question.
    """
    said = read_answer(answer)
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    metadata: dict[str, dict[str, Any]] = {}
    for call in requests.approvals:
        inner = _unstuck_metadata(requests.metadata.get(call.tool_call_id))
        if inner is None:
            continue
        approvals[call.tool_call_id] = ToolApproved()
        metadata[call.tool_call_id] = {METADATA_KEY: {"answer": said.name, "state": inner.get("state", "")}}
    if not approvals:
        raise ValueError("these deferred tool requests hold no unstuck question to answer")
    return DeferredToolResults(approvals=approvals, metadata=metadata)


@dataclass
class UnstuckToolset(WrapperToolset[Any]):
    """A toolset whose every call goes through one :class:`~unstuck.Guard` (see the module doc):
    ``wrapped``, its first argument (Pydantic AI's ``WrapperToolset``), is the toolset to guard
    (a ``FunctionToolset``, an MCP server toolset, ...).

    Args:
        unattended: nobody can answer now (CI, a server); required, never guessed. With
            ``True`` the guard refuses interactive calls before dispatch.
        task: the run's task, named in the question.
        effects: ``effect`` per tool name (``"write"`` for tools with side effects, journaled as
            effect intents); ``read`` for the others.
        options: further :class:`~unstuck.Guard` arguments (``events``, ``journal``,
            ``lessons``, ``clock``, ``config``, ``closer``, ...).
        guard: deprecated (a ``DeprecationWarning``): one guard for every run of the agent, used
            as is (its tool set must name the wrapped toolset's tools), the scope this adapter
            had before each run got its own. By default each run builds its guard on its first
            step from the tools' definitions (:func:`~unstuck.integrations.common.spec_for`).

    Each run has its own guard (``for_run``, see the module doc); :attr:`current` is the latest
    run's.
    """

    unattended: bool = field(default=False, kw_only=True)
    task: str = field(default="", kw_only=True)
    effects: Mapping[str, Effect | str] = field(default_factory=dict, kw_only=True)
    options: Mapping[str, Any] = field(default_factory=dict, kw_only=True)
    guard: Guard | None = field(default=None, kw_only=True)
    # the run's guard, shared by the copies Pydantic AI makes of this run's toolset
    _shared: _Held | None = field(default=None, kw_only=True, repr=False, compare=False)
    # what all runs share (the latest run, stopped runs' states)
    _runs: _Runs | None = field(default=None, kw_only=True, repr=False, compare=False)
    # this copy is a run's own (``for_run`` made it, or a per-run capability did)
    _bound: bool = field(default=False, kw_only=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._shared is None:  # the user's construction: copies are given their original's
            if self.guard is not None:
                _run_guard_argument(type(self).__name__)
                self._bound = True  # the old scope: every run shares the given guard
            self._shared = _Held(self.guard, frozenset(self.guard.tools) if self.guard is not None else frozenset())
        if self._runs is None:
            self._runs = _Runs(self._shared)

    @property
    def _held(self) -> _Held:
        assert self._shared is not None
        return self._shared

    @property
    def current(self) -> Guard | None:
        """The guard of the latest run started with this toolset (it may have been rebuilt from
        saved state on a resumed run); ``None`` before its first step. Runs going on at once
        each have their own."""
        assert self._runs is not None
        latest = self._held if self._bound else (self._runs.latest or self._held)
        return latest.guard

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        """The toolset of one agent run (Pydantic AI calls it once per run): a copy with a
        guard of its own, so runs never share a guard (see the module doc)."""
        wrapped = await self.wrapped.for_run(ctx)
        if self._bound:
            return self if wrapped is self.wrapped else dataclasses.replace(self, wrapped=wrapped)
        assert self._runs is not None
        held = _Held(None, frozenset())
        self._runs.latest = held
        return dataclasses.replace(self, wrapped=wrapped, _shared=held, _bound=True)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The wrapped toolset's tools, each marked ``sequential=True`` (Pydantic AI's
        ``ToolDefinition.sequential``: a barrier that runs alone, after the calls the model
        emitted before it), so the guard sees one call at a time in the model's order."""
        tools = await self.wrapped.get_tools(ctx)
        self._ensure_guard(tools)
        return {name: dataclasses.replace(tool, tool_def=dataclasses.replace(tool.tool_def, sequential=True))
                for name, tool in tools.items()}

    def _ensure_guard(self, tools: Mapping[str, ToolsetTool[Any]], state: str | None = None) -> Guard:
        held = self._held
        names = frozenset(tools)
        if held.guard is not None and state is None and names <= held.names:
            return held.guard
        specs: list[ToolSpec] = [
            spec_for(name, description=tool.tool_def.description or "", fn=functools.partial(self._probe, name),
                     parameters=tool.tool_def.parameters_json_schema, effect=self.effects.get(name, Effect.READ))
            for name, tool in tools.items()]
        if state:
            held.guard = Guard.from_json(state, specs, unattended=self.unattended, **self.options)
        elif held.guard is None:
            held.guard = Guard(specs, unattended=self.unattended, task=self.task, **self.options)
        else:  # tools appeared (a dynamic toolset): the same turn, a larger tool set
            held.guard = Guard.from_json(held.guard.to_json(), specs, unattended=self.unattended, **self.options)
        held.names = names | held.names
        return held.guard

    def _probe(self, name: str, **arguments: Any) -> Any:
        """Run ``name`` for the guard (its probe, while :meth:`_answered` hears an answer)."""
        runner = self._held.runner
        if runner is None:
            raise RuntimeError("this tool is run by Pydantic AI; the guard only runs it as a probe")
        return runner(name, arguments)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        """Run one call through the guard: its refusal text, the tool's (guided) return, or
        ``ApprovalRequired`` carrying the question (see the module doc).

        Raises:
            ApprovalRequired: the turn stopped to ask the user (the run ends with
                ``DeferredToolRequests``).
            Blocked: the user answered "Stop".
            ModelRetry, ToolFailed: the tool's own (its message as the guard gives it to the
                model), when the guard did not retry the call itself.

        Any other exception of the tool is the call's result: the guard assesses it (a
        timeout is retried by its table) and the model gets its decision's text.
        ``CallDeferred``, ``ApprovalRequired``, ``Skip*``, ``UserError`` and
        ``AgentRunError`` (Pydantic AI's control flow) pass through unassessed.
        """
        async with self._held.lock_for(asyncio.get_running_loop()):
            return await self._call(name, tool_args, ctx, tool)

    async def _call(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        held = self._held
        call_id = ctx.tool_call_id or f"{name}-{len(held.asked)}"
        call = ToolCall.of(call_id, name, tool_args)
        if ctx.tool_call_approved:
            answered = _unstuck_metadata(ctx.tool_call_metadata)
            if answered is None and call_id not in held.asked:  # a bare approval of a stopped run's call
                assert self._runs is not None
                saved = self._runs.waiting.get((ctx.conversation_id or "", call_id))
                answered = None if saved is None else {"state": saved}
            if answered is not None or call_id in held.asked:
                return await self._answered(call, answered or {}, ctx, tool)
        guard = self._ensure_guard({name: tool})
        if call_id not in held.declared:  # the first call of a model reply: declare the reply
            calls = _reply_of(ctx.messages, call_id)
            if calls and len({c.id for c in calls}) == len(calls):
                guard.reply(calls)
                held.declared = tuple(c.id for c in calls)
        decision = await guard.abefore(call)
        raised: ModelRetry | ToolFailed | None = None
        retried = False
        while decision.action is Action.DISPATCH:
            raised = None
            try:
                raw: object = await self.wrapped.call_tool(name, tool_args, ctx, tool)
            except _PASS_THROUGH:
                raise
            except (ModelRetry, ToolFailed) as exc:  # the tool's own word to the model: the guard sees it too
                raw, raised = exc, exc
            except Exception as exc:  # a failing tool is a tool result (Pydantic AI would end the run)
                raw = exc
            decision = await guard.aafter(call, raw)
            if decision.action is not Action.RETRY:
                break
            retried = True
            await asyncio.to_thread(guard.clock.sleep, decision.delay_s)
            decision = await guard.abefore(call)
        if decision.action is Action.ESCALATE or decision.escalation is not None:  # stopped, or latched
            self._defer(call, decision, ctx, ran=decision.step is not None and decision.step.dispatched)
        if raised is not None and not retried and decision.action is Action.CONTINUE:
            raise type(raised)(decision.content or raised.message) from raised
        step = decision.step
        if decision.action is Action.CONTINUE and raised is None and step is not None and step.ok \
                and decision.content == step.content:
            return raw  # a plain success reaches the model as the tool returned it (its own type)
        return decision.content

    def _defer(self, call: ToolCall, decision: Decision, ctx: RunContext[Any], *, ran: bool) -> None:
        guard = self._held.guard
        assert guard is not None and decision.escalation is not None and self._runs is not None
        self._held.asked[call.id] = ran
        escalation = decision.escalation
        state = guard.to_json()
        self._runs.stopped(ctx.conversation_id, call.id, state)
        raise ApprovalRequired(metadata={METADATA_KEY: {
            "question": escalation.text, "unblock": escalation.unblock, "subject": escalation.subject,
            "kind": escalation.kind.value, "escalation": escalation.to_dict(), "state": state}})

    async def _answered(self, call: ToolCall, answered: Mapping[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> str:
        """The user answered the question ``call`` was deferred on: the guard hears it (and
        runs the blocker's probe, a tool of the wrapped toolset, on this run's context); the
        tool is not run again."""
        held = self._held
        state = answered.get("state")
        tools = await self.wrapped.get_tools(ctx)
        if call.id not in held.asked and not held.restored and isinstance(state, str) and state:
            # the run that asked was another (perhaps in another process): carry on from its state,
            # with every tool of the toolset (the blocker's probe may be another tool than the call's)
            guard = self._ensure_guard({**tools, call.tool: tool}, state)
            held.restored = True
        else:
            guard = self._ensure_guard({call.tool: tool})
        if guard.escalation is None:  # another call of the same reply carried the answer
            return guard.note("Not executed: the turn stopped to ask the user, who has answered since. Call it again "
                              "if needed.")  # unstuck's note: the turn's mark (issue 27)
        said = read_answer(answered.get("answer", Answer.DONE))
        loop = asyncio.get_running_loop()

        def run(name: str, arguments: dict[str, Any]) -> Any:
            found = tools.get(name)
            if found is None:
                raise LookupError(f"the probe's tool {name!r} is not in the wrapped toolset")
            return asyncio.run_coroutine_threadsafe(self.wrapped.call_tool(name, arguments, ctx, found), loop).result()

        held.runner = run
        try:  # Guard.answer is synchronous: it runs in a thread while the loop runs the probe's tool
            decision = await asyncio.to_thread(guard.answer, said)
        finally:
            held.runner = None
        assert self._runs is not None
        self._runs.waiting.pop((ctx.conversation_id or "", call.id), None)
        if decision.action is Action.CONTINUE:
            self._held.asked.pop(call.id, None)
            return decision.content
        if said is Answer.STOP:
            raise Blocked(guard.escalation, guard.to_json())
        self._defer(call, decision, ctx, ran=self._held.asked.get(call.id, True))  # the blocker still holds: ask again
        raise AssertionError("unreachable")  # pragma: no cover



@dataclass
class UnstuckCapability(AbstractCapability[Any]):
    """The agent-wide form: every tool of the agent (its ``tools``, ``toolsets`` and MCP
    servers, as Pydantic AI assembles them per run: ``AbstractCapability.get_wrapper_toolset``)
    goes through the run's guard, and the turn is ended when the run ends (``after_run``)::

        agent = Agent(model, tools=[run_command], output_type=[str, DeferredToolRequests],
                      capabilities=[UnstuckCapability(unattended=False, task=task)])

    A run that ends with the agent's answer is checked first (:meth:`unstuck.Guard.check_answer`:
    an answer given while a blocker is still open is not taken as done): if the guard escalates,
    :class:`~unstuck.integrations.common.Blocked` is raised out of ``agent.run``; otherwise the
    turn ends ``done`` (``turn.ended``, the journal's end when the guard has one). A run that
    ends with unstuck's deferred question is left open: the next run carries on the same turn.

    Args: as :class:`UnstuckToolset` (``unattended``, ``task``, ``effects``, ``options``, and
    the deprecated ``guard``).

    Each run has its own guard (``for_run``: Pydantic AI calls it once per run); :attr:`current`
    is the latest run's.
    """

    unattended: bool = field(default=False, kw_only=True)
    task: str = field(default="", kw_only=True)
    effects: Mapping[str, Effect | str] = field(default_factory=dict, kw_only=True)
    options: Mapping[str, Any] = field(default_factory=dict, kw_only=True)
    guard: Guard | None = field(default=None, kw_only=True)
    _shared: _Held | None = field(default=None, kw_only=True, repr=False, compare=False)
    _runs: _Runs | None = field(default=None, kw_only=True, repr=False, compare=False)
    _bound: bool = field(default=False, kw_only=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._shared is None:
            if self.guard is not None:
                _run_guard_argument(type(self).__name__)
                self._bound = True  # the old scope: every run shares the given guard
            self._shared = _Held(self.guard, frozenset(self.guard.tools) if self.guard is not None else frozenset())
        if self._runs is None:
            self._runs = _Runs(self._shared)

    @property
    def current(self) -> Guard | None:
        """The guard of the latest run (``None`` before its first step); runs going on at once
        each have their own."""
        assert self._shared is not None and self._runs is not None
        latest = self._shared if self._bound else (self._runs.latest or self._shared)
        return latest.guard

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        """The capability of one agent run: a copy with a guard of its own (see the module doc)."""
        if self._bound:
            return self
        assert self._runs is not None
        held = _Held(None, frozenset())
        self._runs.latest = held
        return dataclasses.replace(self, _shared=held, _bound=True)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return UnstuckToolset(toolset, unattended=self.unattended, task=self.task, effects=self.effects,
                              options=self.options, guard=self.guard, _shared=self._shared, _runs=self._runs,
                              _bound=True)

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        guard = self.current
        if guard is None or escalation_of(result.output) is not None:
            return result
        decision = guard.check_answer()
        if decision.action is Action.ESCALATE and decision.escalation is not None:
            guard.end(TurnStatus.BLOCKED, answer=decision.escalation.text)
            raise Blocked(decision.escalation, guard.to_json())
        guard.end(TurnStatus.DONE, answer=str(result.output))
        return result
