"""unstuck for LangChain agents and LangGraph graphs (``pip install 'unstuck[langgraph]'``).

A LangChain 1.x agent (``langchain.agents.create_agent``) gets one middleware::

    from unstuck.integrations.langgraph import UnstuckMiddleware, outcome
    agent = create_agent(model, tools, middleware=[UnstuckMiddleware(tools)])
    result = agent.invoke({"messages": [("user", task)]})
    print(outcome(result).status, outcome(result).question)   # done | blocked, and the question

A hand-built graph puts :class:`UnstuckToolNode`'s node where its ``ToolNode`` was, and its
gate after it and where the model's answer went (the gate ends the run, or pauses it, when the
guard escalated or the answer came while a blocker is open)::

    guarded = UnstuckToolNode(tools, then="agent")
    builder.add_node("tools", guarded.node)
    builder.add_node("unstuck", guarded.gate, destinations=("agent", END))
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "unstuck"})
    builder.add_edge("tools", "unstuck")                  # instead of tools → agent

What it does. Every tool call goes through one :class:`unstuck.Guard` (``before`` → the
framework's handler → ``after``), through the ``wrap_tool_call`` / ``awrap_tool_call`` hooks
that LangChain's ``AgentMiddleware`` and LangGraph's ``langgraph.prebuilt.ToolNode`` document
("intercept tool execution ... can skip calling it to short-circuit"). A refused call never
runs: the model gets the refusal as the call's ``ToolMessage``. When the guard escalates, the
call's ``ToolMessage`` carries the question and the state key :data:`STATE_KEY` records the run
as blocked; the next step (the middleware's ``before_model`` hook, or the gate) then either

* ends the run (default): ``outcome(result).status is TurnStatus.BLOCKED`` with the
  escalation, distinct from a finished run's ``DONE`` (:func:`raise_if_blocked` raises
  :class:`unstuck.integrations.common.Blocked` instead, or ``raise_blocked=True`` raises it
  from the run); or
* with ``pause=True`` (and a checkpointer and a ``thread_id``), pauses with LangGraph's
  ``interrupt(payload)`` (payload: ``{"question", "unblock", "subject", "choices"}``) and
  resumes with ``Command(resume=answer)``, the answer read by
  :func:`unstuck.integrations.common.read_answer`; "I've done it" runs the blocker's probe
  through :meth:`unstuck.Guard.answer`, and the model is told the block is lifted.

A tool that returns a ``Command`` (LangGraph's idiom for a tool that updates state,
``Command(update={"messages": [ToolMessage(...)]})``) is guarded like any other: the text and
status of its ``ToolMessage`` for the call are what the guard classifies, the model gets the
guard's content in that message's place, the rest of its update goes through except
:data:`STATE_KEY` and any message holding tool calls (no tool's return writes the guard's
state or makes a call), and its ``goto`` only while the run goes on, without a ``Send`` whose
payload carries the guard's state, an inlined state or tool calls. The tool node runs only
calls of the model's latest reply in state, as the model made them (id, name, arguments);
while a run of a thread is under way in this process, its guard in memory is the one, and
no snapshot in graph state replaces it. A guard loaded from state runs with this node's policy (``unattended``,
``guarded``, ``config``: the stricter of them and the state's, :meth:`unstuck.Guard.from_json`).

A model's answer (a reply with no tool calls) is checked too (:meth:`unstuck.Guard.check_answer`,
in the middleware's ``after_model`` hook or the gate): an answer given while a blocker is still
open (gh signed out, the model makes one up) stops the run blocked, ended or paused as above,
never ``done``.

One call at a time. ``create_agent`` sends each call of a model reply to the tool node as its
own task and ``ToolNode`` runs a reply's calls concurrently; the guard's rules (a blocker's
workaround budget, no credential hunting while a sign-in is open, the latch) need each call
assessed before the next one is decided. So every model reply is declared to the guard
(:meth:`unstuck.Guard.reply`, the last ``AIMessage``'s ``tool_calls`` in state, in the model's
order) and the guarded calls of one guard run one at a time in that order: a call's ``before``
→ tool → ``after`` ends before the next call's ``before`` (a ``threading.Condition`` for
``invoke``, event-loop futures for ``ainvoke``; a call whose predecessor never shows up goes
after :data:`unstuck.guard.guard.REPLY_WAIT_S` seconds). Parallelism is given up for guarded tools.

Scope. A guard belongs to one conversation: the run's thread id (``configurable.thread_id``,
LangGraph's key of a conversation and of its checkpoints); one agent serving many threads, one
after another or at once, keeps their budgets apart. Without a thread id, the middleware's runs
are told apart by the turn each run's ``before_agent`` began; the runs of a hand-built graph
without a thread id share the tool node's guard (give each conversation its ``thread_id``).

One answer per node run. LangGraph re-runs an interrupted node from its start on resume, and
every ``interrupt()`` the node made before returns its earlier answer again; so each node run
hears one answer (its probe runs once), and an answer that does not lift the block is asked
about again by the next node (the middleware's ``after_agent``, then ``before_model``; the gate
goes to itself), from the guard state the last node left in the checkpointer, in this process
or another.

State. The guard's state (:meth:`unstuck.Guard.to_json`) and the results of the calls of the
current model reply that already ran live in graph state under :data:`STATE_KEY` (reducer
:func:`keep_latest`), so the checkpointer holds them. LangGraph re-runs an interrupted node
from its start on resume; the pause therefore happens in a node that runs no tool (the hook,
the gate), after the tool node's writes were committed, and a tool node that runs again (a
node-level ``RetryPolicy``, a replayed step) replays the calls of its reply that already ran
from state instead of running them again.

Retries never stack. The guard's retry table decides retries (waits on the guard's clock,
then runs the call again through ``before``); a tool's exception is handed to the guard, never
re-raised, so a node-level ``RetryPolicy`` never sees a tool failure, and calls that already
ran are replayed, not re-run, if the node is run again anyway. Do not add LangChain's
``ToolRetryMiddleware`` for guarded tools. ``ToolNode``'s ``handle_tool_errors`` only turns a
tool's exception into an error message, which the guard classifies like any text; the guard's
stop is not an exception, so no error handler can turn it into a plain message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from unstuck.core.tools import ToolCall
from unstuck.decide.escalation import Answer, Escalation
from unstuck.decide.outcome import TurnStatus
from unstuck.decide.policy import Action
from unstuck.guard.guard import REPLY_WAIT_S, Decision, Guard
from unstuck.integrations.common import Blocked, read_answer, spec_for
from unstuck.store.events import EventName
from unstuck.toolkit.specs import ToolSpec

__all__ = ["STATE_KEY", "GuardedState", "RunOutcome", "UnstuckMiddleware", "UnstuckState", "UnstuckToolNode",
           "keep_latest", "outcome", "raise_if_blocked"]

#: The graph-state key holding the guard (a JSON-ready dict: ``seq``, ``turn_id``, ``guard`` =
#: :meth:`unstuck.Guard.to_json`, ``reply`` = the call ids of the reply in progress, ``done`` =
#: call id → ``{"content", "status"}`` of its calls that ran, ``status`` = ``running`` |
#: ``blocked`` | ``done``, ``escalation`` = :meth:`unstuck.decide.escalation.Escalation.to_dict` or
#: ``None``; and, while a paused run's last answer did not lift the block, ``ask`` = ``True`` and
#: ``note`` = what the guard said of that answer, for the next node to ask again).
STATE_KEY = "unstuck"
_RUNNING, _BLOCKED, _DONE = "running", "blocked", "done"
#: Why a call that no model reply made is refused (the ``call.refused`` event's reason).
_NOT_MADE = ("not executed: no model reply made this call (a Send of a tool call that a tool or a graph node "
             "made up); unstuck runs only the calls the model made")
#: What :meth:`_Core.begin` gives for such a call.
_NOT_MADE_MARK: dict[str, str] = {"content": _NOT_MADE, "status": "error"}


def keep_latest(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any] | None:
    """The reducer of :data:`STATE_KEY`: of two snapshots of the guard, the later one (higher
    ``seq``; the right one on a tie). Calls of one reply run as parallel tasks (``create_agent``
    sends each call to the tool node on its own) and share one guard, so the snapshot with the
    most calls in it wins."""
    if left is None:
        return right
    if right is None:
        return left
    return right if int(right.get("seq", 0)) >= int(left.get("seq", 0)) else left


class UnstuckState(AgentState[Any]):
    """``create_agent``'s state with :data:`STATE_KEY` (the middleware's ``state_schema``)."""

    unstuck: NotRequired[Annotated[dict[str, Any] | None, keep_latest]]


class GuardedState(TypedDict):
    """A hand-built graph's state for :class:`UnstuckToolNode`: ``messages`` (LangGraph's
    ``add_messages``) and :data:`STATE_KEY`; subclass it to add keys."""

    messages: Annotated[list[AnyMessage], add_messages]
    unstuck: NotRequired[Annotated[dict[str, Any] | None, keep_latest]]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a guarded run stopped.

    Attributes:
        status: ``TurnStatus.BLOCKED`` (it stopped to ask, ended or paused) or ``DONE``.
        escalation: the question when blocked, else ``None``.
        state: the guard's saved state (:meth:`unstuck.Guard.to_json`), ``""`` before any call.
    """

    status: TurnStatus
    escalation: Escalation | None = None
    state: str = ""

    @property
    def question(self) -> str:
        """What the user reads (the escalation's text), ``""`` when not blocked."""
        return "" if self.escalation is None else self.escalation.text


def outcome(result: Mapping[str, Any]) -> RunOutcome:
    """Read a run's final (or paused) state: ``agent.invoke(...)``'s result or
    ``graph.get_state(config).values``. A run with no guarded call is ``DONE``."""
    snap = result.get(STATE_KEY)
    if not isinstance(snap, Mapping):
        return RunOutcome(TurnStatus.DONE)
    raw = snap.get("escalation")
    escalation = Escalation.from_dict(raw) if isinstance(raw, Mapping) else None
    blocked = snap.get("status") == _BLOCKED and escalation is not None
    return RunOutcome(TurnStatus.BLOCKED if blocked else TurnStatus.DONE, escalation if blocked else None,
                      str(snap.get("guard", "")))


def raise_if_blocked(result: Mapping[str, Any]) -> None:
    """Raise :class:`unstuck.integrations.common.Blocked` (the escalation and the guard's
    state) when ``result`` is a blocked run; return quietly for a finished one."""
    seen = outcome(result)
    if seen.escalation is not None:
        raise Blocked(seen.escalation, seen.state)


def _spec_of(item: BaseTool | ToolSpec | Callable[..., Any]) -> ToolSpec:
    if isinstance(item, ToolSpec):
        return item
    tool = item if isinstance(item, BaseTool) else as_tool(item)
    parameters = convert_to_openai_tool(tool)["function"].get("parameters")  # what the model is shown
    # a tool with a synchronous body the guard may run itself: "I've done it" re-runs the call
    # that opened the blocker (Guard.probe_for); an async-only tool is run by LangGraph alone
    runnable = getattr(tool, "func", None) is not None or getattr(tool, "coroutine", None) is None

    def invoke(**arguments: Any) -> Any:  # as a tool call, so injected arguments (InjectedToolCallId) are filled
        message = tool.invoke({"name": tool.name, "args": arguments, "id": "unstuck-probe", "type": "tool_call"})
        return getattr(message, "content", message)

    return spec_for(tool.name, description=tool.description, parameters=parameters,
                    fn=invoke if runnable else None)


def _text_of(message: ToolMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def _command_result(command: Command[Any], call: ToolCall) -> tuple[str, bool, dict[str, Any], list[Any]]:
    """What a tool that returned a ``Command`` (LangGraph's idiom for a tool that updates
    state: ``Command(update={"messages": [ToolMessage(..., tool_call_id=...)], ...})``)
    returned for ``call``: (the text of its ``ToolMessage`` for the call, the ``ToolMessage``'s
    ``status == "error"``, the rest of its update without ``messages`` and without
    :data:`STATE_KEY`, the other messages of the update). The texts of several such
    messages are joined; none at all reads as an empty result (the guard assesses that too).
    An update that is not a mapping or a sequence of ``(key, value)`` pairs is read as text
    (``str``), with nothing kept."""
    raw = command.update
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, list | tuple) and all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[0], str)
                                               for i in raw):
        items = list(raw)
    elif raw is None:
        items = []
    else:
        return str(raw), False, {}, []
    rest: dict[str, Any] = {}
    messages: list[Any] = []
    for key, value in items:
        if key == "messages":
            messages.extend(value if isinstance(value, list | tuple) else [value])
        elif key != STATE_KEY:  # the guard's state is the guard's: no tool writes it
            rest[key] = value
    mine = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call.id]
    others = [m for m in messages if not any(m is n for n in mine)]
    text = "\n".join(_text_of(m) for m in mine)
    return text, any(m.status == "error" for m in mine), rest, others


def _seq_of(snap: Mapping[str, Any]) -> int:
    """A snapshot's ``seq`` (0 when it has none, or not a whole number)."""
    seq = snap.get("seq", 0)
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0


def _makes_calls(message: Any) -> bool:
    """Whether ``message``, in any form ``add_messages`` and ``ToolNode`` take (a message, a
    dict, a ``(role, content)`` pair, a tool call dict), is or holds a tool call: an
    ``AIMessage`` with ``tool_calls`` (or ``invalid_tool_calls``, which a later parse may
    read), or a ``{"type": "tool_call"}`` dict. A form ``convert_to_messages`` cannot read
    holds none (LangGraph refuses it on its own)."""
    if isinstance(message, Mapping) and message.get("type") == "tool_call":
        return True
    if isinstance(message, BaseMessage):
        read: list[BaseMessage] = [message]
    else:
        try:
            read = convert_to_messages([message])
        except (ValueError, TypeError, KeyError, NotImplementedError):
            return False
    return any(isinstance(m, AIMessage) and bool(m.tool_calls or m.invalid_tool_calls) for m in read)


def _forged(send: Send) -> str | None:
    """Why a ``Send`` a tool returned (in its ``Command``'s ``goto``) is dropped, or ``None``
    when it is kept. ``ToolNode`` runs the calls of any payload that holds them, whatever node
    it is sent to (``langgraph.prebuilt.ToolNode._parse_input``: a list of tool calls, a
    ``ToolCallWithContext``, a state or list of messages whose last ``AIMessage`` has tool
    calls), so a ``Send`` is dropped when its payload carries the guard's state
    (:data:`STATE_KEY`), an inlined state (``ToolCallWithContext``, whose ``state`` becomes
    the called node's state), or a tool call in any of those forms (calls no model reply
    made: :func:`_makes_calls`)."""
    arg = send.arg
    if isinstance(arg, Mapping):
        if arg.get("__type") == "tool_call_with_context":
            return "a tool call with its own state (ToolCallWithContext)"
        if STATE_KEY in arg:
            return f"the guard's state key {STATE_KEY!r}"
        messages = arg.get("messages")
    elif isinstance(arg, list | tuple):
        messages = arg
    else:
        if getattr(arg, STATE_KEY, None) is not None:
            return f"the guard's state key {STATE_KEY!r}"
        messages = getattr(arg, "messages", None)
    if isinstance(messages, BaseMessage | Mapping):
        messages = [messages]
    if isinstance(messages, list | tuple) and any(_makes_calls(m) for m in messages):
        return "tool calls no model reply made"
    return None


def _kept_goto(goto: Any) -> tuple[Any, list[str]]:
    """A tool's ``Command.goto`` without the sends :func:`_forged` drops, and why each
    was dropped."""
    items = list(goto) if isinstance(goto, list | tuple) else [goto]
    kept: list[Any] = []
    dropped: list[str] = []
    for item in items:
        why = _forged(item) if isinstance(item, Send) else None
        if why is None:
            kept.append(item)
        else:
            dropped.append(f"a Send to {item.node!r} carrying {why}")
    if not isinstance(goto, list | tuple):
        return (kept[0] if kept else ()), dropped
    return kept, dropped


def _writes_state_key(command: Command[Any]) -> bool:
    """The command's update names :data:`STATE_KEY` (a mapping, or ``(key, value)`` pairs)."""
    raw = command.update
    if isinstance(raw, Mapping):
        return STATE_KEY in raw
    return isinstance(raw, list | tuple) and any(isinstance(i, tuple) and i[:1] == (STATE_KEY,) for i in raw)


@dataclass(slots=True)
class _Live:
    """The guard of one thread between calls (shared by the parallel calls of one reply)."""

    guard: Guard
    seq: int
    reply: list[str] = field(default_factory=list)
    done: dict[str, dict[str, str]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)  # calls of the reply that went through (in this process)
    busy: bool = False  # a call of this guard is between its ``before`` and its ``after``


class _Core:
    """What the middleware and the tool node share: the guard per thread, the wrapped call,
    the stop or pause."""

    def __init__(self, tools: Iterable[BaseTool | ToolSpec | Callable[..., Any]], *, pause: bool,
                 raise_blocked: bool, unattended: bool | None, task: str, options: Mapping[str, Any],
                 starts_turns: bool = False) -> None:
        self.specs = [_spec_of(t) for t in tools]
        self.pause, self.raise_blocked, self.task = pause, raise_blocked, task
        self.starts_turns = starts_turns  # a hook begins each turn (the middleware's before_agent)
        self.unattended = (not pause) if unattended is None else unattended
        self.options = dict(options)
        self._live: dict[str, _Live] = {}
        self._lock = threading.RLock()
        self._turn = threading.Condition(self._lock)  # one guarded call at a time, in the model's order
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    # -- the guard of a thread -----------------------------------------------------------------

    def key(self, state: Mapping[str, Any], thread: str, guard: Guard | None = None) -> str:
        """Whose guard a step uses: the run's thread id (``configurable.thread_id``, LangGraph's
        key of a conversation); without one, for the middleware, the turn its ``before_agent``
        began for this run (``guard``'s, or the turn id of the snapshot in state, which only
        unstuck writes there: a tool's write of :data:`STATE_KEY` is dropped); else ``""``: the
        runs of a hand-built graph without a thread id share the node's guard (a node may
        inline any state in a ``Send``, so a snapshot there cannot say whose run it is)."""
        if thread or not self.starts_turns:
            return thread
        if guard is not None:
            return f"turn:{guard.turn_id}"
        snap = state.get(STATE_KEY)
        turn = snap.get("turn_id") if isinstance(snap, Mapping) else None
        return f"turn:{turn}" if isinstance(turn, str) and turn else ""

    def new_guard(self) -> Guard:
        return Guard(self.specs, unattended=self.unattended, task=self.task, **self.options)

    def load(self, snap: Mapping[str, Any]) -> Guard:
        loading = {k: v for k, v in self.options.items() if k != "turn_id"}  # the policy is this node's
        return Guard.from_json(str(snap["guard"]), self.specs, unattended=self.unattended, **loading)

    def live(self, state: Mapping[str, Any], thread: str, call_id: str = "") -> _Live:
        """The thread's guard. While a run of the thread is under way in this process, its
        guard is held in memory and is the one: no snapshot in graph state replaces it,
        whatever its ``seq`` or turn (a call's state is not always the checkpointed one: a
        ``Send`` may inline any state, LangGraph's ``ToolCallWithContext``). The state's guard
        is loaded only when this process holds none for the thread: a fresh process, or a run
        that paused or ended here (:meth:`release`) and is resumed from the checkpointer. With
        neither, a new guard; so too for the tool node of a hand-built graph (no hook begins
        its turns) when the state holds no guard and the call is not of the reply in progress:
        a new run without a checkpointer."""
        snap = state.get(STATE_KEY)
        saved = isinstance(snap, Mapping) and bool(snap.get("guard"))
        key = self.key(state, thread)
        with self._lock:
            live = self._live.get(key)
            if live is not None and (saved or self.starts_turns or call_id in live.reply):
                if isinstance(snap, Mapping):  # its own snapshots must win the reducer (keep_latest)
                    live.seq = max(live.seq, _seq_of(snap))
                return live
            if saved:
                assert isinstance(snap, Mapping)
                live = _Live(self.load(snap), _seq_of(snap), [str(i) for i in snap.get("reply", [])],
                             {str(k): dict(v) for k, v in snap.get("done", {}).items()})
            else:
                live = _Live(self.new_guard(), 0)
            self._live[key] = live
            return live

    def release(self, key: str) -> None:
        """The run of ``key`` (:meth:`key`) paused or ended here: its guard leaves memory, and
        the next call on the thread (a resume, perhaps in another process) loads it from the
        checkpointer."""
        with self._lock:
            self._live.pop(key, None)

    def start(self, thread: str) -> dict[str, Any]:
        """A new turn on ``thread`` (or, without one, of this run): a new guard, its snapshot."""
        with self._lock:
            live = _Live(self.new_guard(), 1)
            self._live[self.key({}, thread, live.guard)] = live
            return self.snapshot(live)

    def snapshot(self, live: _Live, status: str | None = None) -> dict[str, Any]:
        guard = live.guard
        if status is None:
            status = _BLOCKED if guard.escalation is not None else _RUNNING
        return {"seq": live.seq, "turn_id": guard.turn_id, "guard": guard.to_json(), "reply": list(live.reply),
                "done": {k: dict(v) for k, v in live.done.items()}, "status": status,
                "escalation": None if guard.escalation is None else guard.escalation.to_dict()}

    # -- one call ------------------------------------------------------------------------------

    def begin(self, request: ToolCallRequest) -> tuple[_Live, ToolCall, dict[str, str] | None]:
        """The call's guard and :class:`~unstuck.core.tools.ToolCall`, declaring its reply on first
        sight; and its earlier result when it already ran (to replay, not run again), or
        :data:`_NOT_MADE_MARK` when no model reply made it: the model's latest reply with tool
        calls in state does not hold it, with this name and these arguments (a ``Send`` of a
        tool call that a tool or a node made up). Such a call never runs and is never declared
        to the guard; a ``call.refused`` event names it."""
        state = request.state if isinstance(request.state, Mapping) else {}
        thread = _thread_of(request)
        raw = request.tool_call
        call = ToolCall(str(raw["id"]), raw["name"], json.dumps(raw.get("args", {}), sort_keys=True))
        live = self.live(state, thread, call.id)
        with self._lock:
            ids = _reply_ids(state)
            if (call.id, call.tool, call.arguments_json) not in ids:
                live.guard.emit(EventName.CALL_REFUSED, tool=call.tool, subject=call.tool, reason=_NOT_MADE)
                return live, call, _NOT_MADE_MARK
            if call.id in live.done:
                return live, call, live.done[call.id]
            if call.id not in live.reply:
                live.guard.reply([ToolCall(i, n, a) for i, n, a in ids])
                live.reply, live.done, live.finished = [i for i, _, _ in ids], {}, set()
        return live, call, None

    # -- one guarded call at a time, in the model's order ----------------------------------------

    @staticmethod
    def _may_go(live: _Live, call_id: str, late: bool) -> bool:
        """No other call of the guard is running, and every earlier call of the reply went
        through (or has not shown up for :data:`unstuck.guard.guard.REPLY_WAIT_S` seconds: ``late``)."""
        if live.busy:
            return False
        if late or call_id not in live.reply:
            return True
        earlier = live.reply[:live.reply.index(call_id)]
        return all(e in live.finished or e in live.done for e in earlier)

    def enter(self, live: _Live, call_id: str) -> None:
        """Wait (a thread) for the call's turn: ``before`` → run → ``after`` of one call ends
        before the next call's ``before`` begins."""
        deadline = time.monotonic() + REPLY_WAIT_S
        with self._turn:
            while not self._may_go(live, call_id, time.monotonic() >= deadline):
                self._turn.wait(timeout=0.5)
            live.busy = True

    async def aenter(self, live: _Live, call_id: str) -> None:
        """:meth:`enter` without blocking the event loop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REPLY_WAIT_S
        while True:
            with self._turn:
                if self._may_go(live, call_id, loop.time() >= deadline):
                    live.busy = True
                    return
                future: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, future))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout=0.5)

    def leave(self, live: _Live, call_id: str) -> None:
        """The call went through: the next one may begin."""
        with self._turn:
            live.busy = False
            live.finished.add(call_id)
            self._turn.notify_all()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop has nobody waiting
                loop.call_soon_threadsafe(_wake, future)

    def finish(self, live: _Live, call: ToolCall, decision: Decision, failed: bool,
               returned: Command[Any] | None = None) -> Command[Any]:
        """The call's ``Command``: its ``ToolMessage`` (the guard's content) and the guard's
        snapshot; for a tool that returned a ``Command`` itself (``returned``), that command
        with its own ``ToolMessage`` for this call replaced by the guard's, its update of
        :data:`STATE_KEY` dropped (no tool writes the guard's state), any message of its
        update that holds tool calls dropped (no tool makes a model reply: :func:`_makes_calls`),
        and its ``goto`` kept only when the run goes on (a stopped run's next step is the
        stop), without any ``Send`` that carries the guard's state or a tool call
        (:func:`_forged`): each thing dropped is a ``state.write_refused`` event."""
        content = decision.content or (decision.escalation.text if decision.escalation is not None else "")
        refused = decision.action is Action.REFUSE or decision.action is Action.ESCALATE
        status = "error" if failed or refused else "success"
        with self._lock:
            live.done[call.id] = {"content": content, "status": status}
            live.seq += 1
            snap = self.snapshot(live)
        if returned is None:
            return self.command(call, content, status, snap)
        _, _, update, others = _command_result(returned, call)
        message = ToolMessage(content, tool_call_id=call.id, name=call.tool, status=status)
        calling = [m for m in others if _makes_calls(m)]  # a model reply no model made: the tool node would run it
        update["messages"] = [*(m for m in others if not any(m is c for c in calling)), message]
        if returned.graph is None:  # a command for a parent graph carries no state of this one
            update[STATE_KEY] = dict(snap)
        goes_on = decision.action is Action.CONTINUE and live.guard.escalation is None
        goto, dropped = _kept_goto(returned.goto)
        dropped[:0] = ["a message with tool calls no model reply made"] * len(calling)
        if _writes_state_key(returned):
            dropped.insert(0, f"an update of the guard's state key {STATE_KEY!r}")
        for what in dropped:  # no tool's return writes the guard's state or makes a call
            live.guard.emit(EventName.STATE_WRITE_REFUSED, tool=call.tool, dropped=what)
        return Command(graph=returned.graph, update=update, resume=returned.resume, goto=goto if goes_on else ())

    @staticmethod
    def command(call: ToolCall, content: str, status: str, snap: Mapping[str, Any] | None) -> Command[Any]:
        message = ToolMessage(content, tool_call_id=call.id, name=call.tool, status=status)
        update: dict[str, Any] = {"messages": [message]}
        if snap is not None:
            update[STATE_KEY] = dict(snap)
        return Command(update=update)

    def wrap(self, request: ToolCallRequest,
             handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]) -> ToolMessage | Command[Any]:
        live, call, ran = self.begin(request)
        if ran is _NOT_MADE_MARK:
            return Command(update={})  # nothing for the model: it never made this call
        if ran is not None:
            return self.command(call, ran["content"], ran["status"], None)
        self.enter(live, call.id)
        try:
            guard, failed = live.guard, False
            decision = guard.before(call)
            returned: Command[Any] | None = None
            while decision.action is Action.DISPATCH:
                raw, failed = _run(handler, request)
                returned = raw if isinstance(raw, Command) else None
                if returned is not None:  # a tool that updates state itself: its result is read like any other
                    raw, failed, _, _ = _command_result(returned, call)
                decision = guard.after(call, raw)
                if decision.action is not Action.RETRY:
                    break
                guard.clock.sleep(decision.delay_s)
                decision = guard.before(call)
            return self.finish(live, call, decision, failed, returned)
        finally:
            self.leave(live, call.id)

    async def awrap(self, request: ToolCallRequest,
                    handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
                    ) -> ToolMessage | Command[Any]:
        live, call, ran = self.begin(request)
        if ran is _NOT_MADE_MARK:
            return Command(update={})  # nothing for the model: it never made this call
        if ran is not None:
            return self.command(call, ran["content"], ran["status"], None)
        await self.aenter(live, call.id)
        try:
            guard, failed = live.guard, False
            decision = await guard.abefore(call)
            returned: Command[Any] | None = None
            while decision.action is Action.DISPATCH:
                raw, failed = await _arun(handler, request)
                returned = raw if isinstance(raw, Command) else None
                if returned is not None:
                    raw, failed, _, _ = _command_result(returned, call)
                decision = await guard.aafter(call, raw)
                if decision.action is not Action.RETRY:
                    break
                await asyncio.to_thread(guard.clock.sleep, decision.delay_s)
                decision = await guard.abefore(call)
            return self.finish(live, call, decision, failed, returned)
        finally:
            self.leave(live, call.id)

    # -- the stop or the pause -----------------------------------------------------------------

    def settle(self, state: Mapping[str, Any], thread: str) -> tuple[dict[str, Any], str]:
        """After the tool node: ``({}, "")`` when the run goes on as it is; when the guard
        escalated, (the state update, where the run goes: ``"end"`` (it ends), ``""`` (the user
        answered and the run goes on), or ``"again"`` (the answer did not lift the block: the
        next node of the guard asks again, :data:`STATE_KEY`'s ``ask``)). Paused runs ask with
        ``interrupt()`` here, in a node that runs no tool, so re-running it on resume repeats
        no call; and each run of the node hears ONE answer: LangGraph re-runs an interrupted
        node from its start on resume, where every earlier ``interrupt()`` of the node returns
        its earlier answer again, so a node that asked twice would hear (and probe) the first
        answer again. The guard is read from state each time, as the last node left it."""
        snap = state.get(STATE_KEY)
        if not isinstance(snap, Mapping) or snap.get("status") != _BLOCKED or not snap.get("guard"):
            return {}, ""
        guard = self.load(snap)
        escalation = guard.escalation
        if escalation is None:
            return {}, ""
        seq = _seq_of(snap) + 1
        key = self.key(state, thread)
        self.release(key)  # the run ends or pauses here: a resume loads the guard from the checkpointer
        if not self.pause:
            guard.end(TurnStatus.BLOCKED, answer=escalation.text)
            if self.raise_blocked:
                raise Blocked(escalation, guard.to_json())
            return {STATE_KEY: self.snapshot(_Live(guard, seq), _BLOCKED)}, "end"
        payload: dict[str, Any] = {"question": escalation.text, "unblock": escalation.unblock,
                                   "subject": escalation.subject, "choices": [a.value for a in Answer]}
        note = snap.get("note")
        if isinstance(note, str) and note:
            payload["note"] = note
        while True:  # a reply that is no answer is asked again here: hearing it again on resume runs nothing
            said = interrupt(payload)
            try:
                answer = read_answer(said)
            except ValueError as exc:
                payload = {**payload, "note": str(exc)}
                continue
            break
        decision = guard.answer(answer)  # the one answer of this node run: its probe runs once
        if decision.action is not Action.CONTINUE and answer is Answer.STOP:
            guard.end(TurnStatus.BLOCKED, answer=escalation.text)
            return {STATE_KEY: self.snapshot(_Live(guard, seq), _BLOCKED)}, "end"
        if decision.action is not Action.CONTINUE:  # it still holds: the next node asks again
            again = self.snapshot(_Live(guard, seq), _BLOCKED)
            again.update(ask=True, note=decision.content)
            return {STATE_KEY: again}, "again"
        with self._lock:
            live = _Live(guard, seq)
            self._live[self.key(state, thread, guard)] = live
            snap_now = self.snapshot(live, _RUNNING)
        return {"messages": [HumanMessage(decision.content)], STATE_KEY: snap_now}, ""

    def check(self, state: Mapping[str, Any], thread: str) -> tuple[dict[str, Any], str]:
        """The model answered (its last message has no tool calls): the guard checks the
        answer (:meth:`unstuck.Guard.check_answer`, no ``confirm``: an answer given while a
        blocker is open escalates). ``({}, "")`` when the answer stands; else the run stops
        as for an escalation from a tool call (:meth:`settle`): (the update, ``"end"``),
        (the update, ``"again"``: asked again by the next node), or, paused and answered so
        that the run goes on, (the update, ``"model"``)."""
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        snap = state.get(STATE_KEY)
        if not isinstance(last, AIMessage) or last.tool_calls or not isinstance(snap, Mapping) \
                or not snap.get("guard") or snap.get("status") != _RUNNING:
            return {}, ""
        guard = self.load(snap)
        decision = guard.check_answer()
        if decision.action is not Action.ESCALATE or guard.escalation is None:
            return {}, ""
        blocked = self.snapshot(_Live(guard, _seq_of(snap) + 1), _BLOCKED)
        update, route = self.settle({**state, STATE_KEY: blocked}, thread)
        return {STATE_KEY: blocked, **update}, route or "model"

    def end(self, state: Mapping[str, Any], thread: str) -> dict[str, Any] | None:
        """The run finished: ``done`` unless it stopped blocked (then it was already ended)."""
        snap = state.get(STATE_KEY)
        if not isinstance(snap, Mapping) or not snap.get("guard") or snap.get("status") == _BLOCKED:
            return None
        live = self.live(state, thread)
        messages = state.get("messages", [])
        last = messages[-1] if messages else None
        answer = last.text if isinstance(last, AIMessage) else ""
        live.guard.end(TurnStatus.DONE, answer=answer)
        with self._lock:
            live.seq += 1
            self.release(self.key(state, thread))
            return {STATE_KEY: self.snapshot(live, _DONE)}


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _thread_of(request: ToolCallRequest) -> str:
    runtime = request.runtime
    config = getattr(runtime, "config", None) or {}
    return _thread_in(config)


def _thread_in(config: Mapping[str, Any]) -> str:
    configurable = config.get("configurable") or {}
    return str(configurable.get("thread_id", ""))


def _reply_ids(state: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The calls of the model's latest reply with tool calls in ``state`` (its last
    ``AIMessage`` that has any), in the model's order: (id, tool, arguments as sorted JSON);
    empty when there is none."""
    for message in reversed(state.get("messages", []) or []):
        if isinstance(message, AIMessage) and message.tool_calls:
            return [(str(c["id"]), c["name"], json.dumps(c.get("args", {}), sort_keys=True))
                    for c in message.tool_calls]
    return []


def _run(handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
         request: ToolCallRequest) -> tuple[object, bool]:
    """(what the call returned for the guard, whether it failed); a tool's exception is the
    guard's to assess, never re-raised (GraphBubbleUp, LangGraph's interrupt, passes)."""
    from langgraph.errors import GraphBubbleUp

    try:
        result = handler(request)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        return exc, True
    if isinstance(result, ToolMessage):
        return _text_of(result), result.status == "error"
    return result, False


async def _arun(handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
                request: ToolCallRequest) -> tuple[object, bool]:
    from langgraph.errors import GraphBubbleUp

    try:
        result = await handler(request)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        return exc, True
    if isinstance(result, ToolMessage):
        return _text_of(result), result.status == "error"
    return result, False


class UnstuckMiddleware(AgentMiddleware[UnstuckState, Any, Any]):
    """A ``langchain.agents.AgentMiddleware`` that guards every tool call of a
    ``create_agent`` agent (see the module doc).

    Args:
        tools: the agent's tools (``BaseTool``, plain functions, or
            :class:`~unstuck.toolkit.specs.ToolSpec` for a tool that needs more, e.g. ``effect="write"``).
        pause: ask with ``interrupt()`` and resume with ``Command(resume=answer)`` (needs a
            checkpointer and a ``thread_id``) instead of ending the run.
        raise_blocked: end a blocked run by raising :class:`~unstuck.integrations.common.Blocked`.
        unattended: nobody can answer now; by default ``not pause``.
        task: the turn's task, named in the question.
        guard_options: the other :class:`unstuck.Guard` arguments (``config``, ``clock``,
            ``events``, ``journal``, ``lessons``, ...).

    Hooks used (``AgentMiddleware``): ``before_agent`` (a new turn: a new guard),
    ``wrap_tool_call``/``awrap_tool_call`` (each call), ``before_model`` with
    ``@hook_config(can_jump_to=["end"])`` (the stop or the pause), ``after_agent`` (``done``).

    Raises:
        ValueError: from :func:`~unstuck.integrations.common.spec_for`, for a nameless tool.
    """

    state_schema = UnstuckState

    def __init__(self, tools: Sequence[BaseTool | ToolSpec | Callable[..., Any]], *, pause: bool = False,
                 raise_blocked: bool = False, unattended: bool | None = None, task: str = "",
                 **guard_options: Any) -> None:
        super().__init__()
        self.core = _Core(tools, pause=pause, raise_blocked=raise_blocked, unattended=unattended, task=task,
                          options=guard_options, starts_turns=True)

    def before_agent(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """A new turn (``invoke`` with new input; a resume does not run it)."""
        return {STATE_KEY: self.core.start(_thread_in(_config_of(runtime)))}

    async def abefore_agent(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """:meth:`before_agent` for ``ainvoke``."""
        return self.before_agent(state, runtime)

    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]) -> ToolMessage | Command[Any]:
        """Guard one call: refuse it (the model gets the refusal), or run it and hand the
        model the guard's content; the guard's state goes to :data:`STATE_KEY`."""
        return self.core.wrap(request, handler)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """:meth:`wrap_tool_call` for ``ainvoke``/``astream``."""
        return await self.core.awrap(request, handler)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """When the guard escalated: end the run (``jump_to: end``), or pause it with
        ``interrupt()`` and carry on once the user answered. An answer that does not lift the
        block is asked about again by :meth:`after_agent` (``jump_to: end``), in a node of its
        own: one answer per node run (:meth:`_Core.settle`)."""
        update, route = self.core.settle(cast("Mapping[str, Any]", state), _thread_in(_config_of(runtime)))
        if route:
            return {**update, "jump_to": "end"}
        return update or None

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """:meth:`before_model` for ``ainvoke``."""
        return self.before_model(state, runtime)

    @hook_config(can_jump_to=["end", "model"])
    def after_model(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """When the model answered (no tool calls): the guard checks the answer
        (:meth:`unstuck.Guard.check_answer`); an answer given while a blocker is open ends
        the run blocked, or pauses it, as an escalation from a tool call does."""
        update, route = self.core.check(cast("Mapping[str, Any]", state), _thread_in(_config_of(runtime)))
        if not route:
            return None
        return {**update, "jump_to": "end" if route == "end" else "model"}  # "again": before_model asks

    @hook_config(can_jump_to=["end", "model"])
    async def aafter_model(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """:meth:`after_model` for ``ainvoke``."""
        return self.after_model(state, runtime)

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """The run finished: the turn ends ``done`` (a blocked one already ended). Or the
        user's last answer did not lift the block (:data:`STATE_KEY`'s ``ask``): ask again
        here, and go back to the model's hooks (``jump_to: model``) when the run goes on or the
        next answer is to be heard (by :meth:`before_model`)."""
        snap = state.get(STATE_KEY)
        thread = _thread_in(_config_of(runtime))
        if isinstance(snap, Mapping) and snap.get("ask") and snap.get("status") == _BLOCKED:
            update, route = self.core.settle(cast("Mapping[str, Any]", state), thread)
            return update if route == "end" else {**update, "jump_to": "model"}
        return self.core.end(cast("Mapping[str, Any]", state), thread)

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(self, state: UnstuckState, runtime: Any) -> dict[str, Any] | None:
        """:meth:`after_agent` for ``ainvoke``."""
        return self.after_agent(state, runtime)


def _config_of(runtime: Any) -> Mapping[str, Any]:
    """The run's config: the hook's ``Runtime`` does not carry it, LangGraph's
    ``get_config()`` does inside a node."""
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:
        return {}


class UnstuckToolNode:
    """A guarded ``langgraph.prebuilt.ToolNode`` for hand-built graphs, and the gate node that
    stops or pauses the run (see the module doc). The graph's state needs :data:`STATE_KEY`
    (:class:`GuardedState`).

    Args:
        tools: as :class:`UnstuckMiddleware`.
        then: the node the gate goes to when the run goes on (the model's node).
        pause: as :class:`UnstuckMiddleware`.
        raise_blocked: as :class:`UnstuckMiddleware`.
        unattended: as :class:`UnstuckMiddleware`.
        task: as :class:`UnstuckMiddleware`.
        guard_options: as :class:`UnstuckMiddleware`.
        handle_tool_errors: ``ToolNode``'s own; the default re-raises a tool's exception to
            the guard, which assesses it (``True`` turns it into an error message first, which
            the guard classifies; neither can hide the guard's stop, which is no exception).

    Attributes:
        node: the ``ToolNode`` (``wrap_tool_call`` / ``awrap_tool_call`` set).
    """

    def __init__(self, tools: Sequence[BaseTool | Callable[..., Any]], *, then: str = "agent", pause: bool = False,
                 raise_blocked: bool = False, unattended: bool | None = None, task: str = "",
                 handle_tool_errors: Any = None, **guard_options: Any) -> None:
        self.core = _Core(tools, pause=pause, raise_blocked=raise_blocked, unattended=unattended, task=task,
                          options=guard_options)
        self.then = then
        extra: dict[str, Any] = {} if handle_tool_errors is None else {"handle_tool_errors": handle_tool_errors}
        self.node = ToolNode(list(tools), wrap_tool_call=self.core.wrap, awrap_tool_call=self.core.awrap, **extra)

    def gate(self, state: Mapping[str, Any]) -> Command[Any]:
        """A graph node after the tool node, and where the model's node goes when its reply
        has no tool calls: to ``then``, or to ``END`` when the run stopped blocked (after
        asking, with ``pause=True``). A model's answer is checked first
        (:meth:`unstuck.Guard.check_answer`): given while a blocker is open, the run stops
        blocked as for an escalation from a tool call; otherwise it ends ``done``. An answer
        that does not lift the block is asked about again by the gate in its next run
        (``goto`` itself: one answer per node run)."""
        config = _config_of(None)
        thread = _thread_in(config)
        snap = state.get(STATE_KEY)
        if not (isinstance(snap, Mapping) and snap.get("status") == _BLOCKED):
            update, route = self.core.check(state, thread)
            if route:
                return Command(update=update, goto=self._where(route, config))
            messages = state.get("messages") or []
            if messages and isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls:
                return Command(update=self.core.end(state, thread), goto=END)  # the answer stands
        update, route = self.core.settle(state, thread)
        return Command(update=update or None, goto=self._where(route, config))

    def _where(self, route: str, config: Mapping[str, Any]) -> str:
        """The gate's next node for a route of :meth:`_Core.settle`: ``END``, itself (to ask
        again: its node name, LangGraph's ``metadata.langgraph_node``), or ``then``."""
        if route == "end":
            return END
        if route == "again":
            node = (config.get("metadata") or {}).get("langgraph_node")
            if not isinstance(node, str) or not node:
                raise RuntimeError("the gate asks again from its own node, but LangGraph's config names no node "
                                   "(metadata.langgraph_node): run the gate as a graph node")
            return node
        return self.then
