"""One guarded tool call: before it runs, after it returns, and the turn's state between calls.

:class:`Guard` is the only place where the pure decisions (:mod:`unstuck.decide.policy`) meet I/O
for one call (DESIGN.md, "Layers"). Every loop drives it the same way: :func:`unstuck.loop.turn.run_turn`,
:func:`unstuck.loop.resume.resume_turn`, and any framework's glue. It is caller-driven, like
httpx's ``Auth.auth_flow``: the caller runs the tool, the guard decides::

    guard = Guard(tools, unattended=True, task="...")
    decision = guard.before(call)                 # DISPATCH, or REFUSE with the refusal text
    if decision.action is Action.DISPATCH:
        decision = guard.after(call, run_it())    # CONTINUE, RETRY (wait delay_s), or ESCALATE
    hand_to_model(decision.content)
    if guard.escalation is not None:              # latched: every later call is refused
        stop_and_ask(guard.escalation.text)

:meth:`Guard.call` does the same for a tool in its tool set, retries and probes included.

What it keeps, per turn: the recovery state (budgets, blockers, retries, repetition), one
:class:`~unstuck.decide.outcome.StepRecord` per call, the escalation once the turn escalated (the
latch), effect intents around ``effect="write"`` calls when it has a journal, lessons when it
has a store. :meth:`Guard.to_json` / :meth:`Guard.from_json` carry it across a framework's
pause and resume (schema version :data:`STATE_VERSION`), so budgets are neither lost nor
counted twice.

Calls of one model reply are one reply (:meth:`Guard.reply`): each is charged exactly once,
in reply order, even when a framework runs them concurrently: a result that arrives before an
earlier call of its reply has been assessed waits for it (at most :data:`REPLY_WAIT_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import math
import os
import random
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import re2

from unstuck.commands.credentials import credential_changes, credential_changes_in_arguments
from unstuck.commands.installed import locate_off_path
from unstuck.commands.interactive import Waits
from unstuck.commands.waiting import non_interactive_fix
from unstuck.core.clock import Clock, RealClock
from unstuck.core.errors import UnstuckError
from unstuck.core.readers import parse_json
from unstuck.core.redact import redact_document, redact_value, redacted_prefix
from unstuck.core.situations import Kind, KindClass, Probe, Situation, Source, validate_situation
from unstuck.core.tools import Effect, ToolCall, ToolResult, normalize_result
from unstuck.decide import policy, prompts
from unstuck.decide.escalation import Answer, Escalation, EscalationReason, build_escalation
from unstuck.decide.outcome import StepRecord, TurnStatus, Validation, Validator, Verdict
from unstuck.decide.policy import Action
from unstuck.decide.prompts import GUIDANCE_PREFIX, RETRIED_NOTE
from unstuck.decide.retry import full_jitter
from unstuck.guard.lessons import LessonKeeper, known_blocker_note
from unstuck.recognise.classify import explain_result
from unstuck.store.diagnostics import RunLengths, advance
from unstuck.store.events import EventName, EventSink, Scalar, event
from unstuck.store.journal import Journal
from unstuck.store.lessons import Lesson, LessonStore
from unstuck.store.second_opinion import SecondOpinion
from unstuck.toolkit.specs import Toolset, ToolSpec

__all__ = ["REPLY_WAIT_S", "STATE_VERSION", "Action", "Decision", "Guard", "GuardStateError", "receipt_of"]

#: Version of :meth:`Guard.to_json`'s schema; :meth:`Guard.from_json` refuses another.
STATE_VERSION = 1
#: Seconds a result waits for an earlier call of its reply to be assessed before it is
#: assessed anyway (a framework that never reports that call must not hang the turn).
REPLY_WAIT_S = 30.0
#: What :meth:`Guard.call` reports for a call to a tool that is not in the tool set (a result a
#: framework reports for a tool the guard does not know, a hand-off say, is assessed as given).
_NO_SUCH_TOOL = object()
_UNKNOWN_TOOL = "UnknownTool"
#: A word of a task: a tool name's characters (OpenAI function names: letters, digits, ``_``, ``-``).
_TASK_WORD = re2.compile(r"[A-Za-z0-9_-]+")


def _absent_tool(name: str, task: str) -> Situation:
    """The situation of a call to a tool the tool set lacks.

    A tool the task itself names (``"post the comment with mcp_github_add_issue_comment"``) is
    one the user's setup should provide but does not: ``not_installed``, a blocker on that
    tool, so the workaround budget applies (incident i037 in ``shared/cases``: a GitHub MCP
    server failed to start, its tools were simply absent, and the agent improvised with a
    scraped credential). Only a compound name (with ``_``, ``-`` or ``.``, as tool
    identifiers are) counts, matched as a whole word in any case: "search the notes" names no
    tool. A tool nobody named is the model's own invention: ``invalid_args``,
    self-fixable (the unknown-tool limit of :class:`unstuck.decide.policy.PolicyConfig` stops a
    model that keeps inventing).
    """
    compound = any(mark in name for mark in "_-.")  # a tool's identifier, not a word of prose ("search")
    if compound and name.lower() in {word.lower() for word in _TASK_WORD.findall(task)}:
        return Situation(Kind.NOT_INSTALLED, name, detail=f"the task names the tool {name!r}, but this session has "
                         "no tool by that name (a tool server that failed to start leaves its tools out)",
                         unblock=f"Make the tool {name} available to this session; if an MCP server provides it, "
                                 "check that the server starts.")
    return Situation(Kind.INVALID_ARGS, name, detail=f"unknown tool {name!r}")


#: What the model gets for a write it asks for again after a resume reported it made already.
_HELD_WRITE_REFUSAL = ("Not executed: this exact {tool} call already took effect before an interruption "
                       "(effect {ref}); unstuck does not make the same effect twice. If it must happen again, "
                       "stop and say so: a person decides.")
#: Words that take back a "yes" in the route-around check ("Yes, but I could not list them").
_HEDGES = frozenset({"but", "not", "no", "however", "although", "couldn't", "cannot", "can't", "partly", "partially"})
#: What a call after the escalation gets (the latch).
LATCHED = "Not executed: the turn stopped to ask the user."


class GuardStateError(UnstuckError, ValueError):
    """Saved guard state that cannot be read back (named: what and where)."""


def receipt_of(result: ToolResult) -> str:
    """What the journal keeps of a side-effecting call's return (JSON; content cut at 4,000
    characters, after redaction: :func:`unstuck.core.redact.redacted_prefix`, so a cut never keeps
    the head of a secret)."""
    return json.dumps({"ok": result.ok, "content": redacted_prefix(result.content, 4000), "exit_code": result.exit_code,
                       "http_status": result.http_status, "injected": result.injected})


def _reads_as_failure(situation: Situation | None) -> bool:
    """A result whose situation says the call failed, whatever its type said (a plain string
    "you are not logged in" is no success); an empty or truncated result, or one carrying
    instructions, did run."""
    return situation is not None and situation.kind_class not in (KindClass.DEGENERATE, KindClass.ADVERSARIAL)


#: The types of the saved state's top-level fields (:meth:`Guard.to_json`).
_SAVED_TYPES: Mapping[str, type | tuple[type, ...]] = {
    "turn_id": str, "task": str, "guarded": bool, "elapsed_s": (int, float), "state": dict, "steps": list,
    "escalation": (dict, type(None)), "escalated_blocker": (dict, type(None)), "escalated_at": (list, type(None)),
    "replies": int, "reply": (dict, type(None)), "done": list, "retrying": dict, "waited": dict, "intents": dict,
    "runs": (dict, type(None)), "cited": dict, "noted": dict, "setup_checked": list, "saved_steps": int,
    "last_ref": str, "lessons_checked": list, "held_writes": dict, "signature": str,
}


def _signature(key: bytes, saved: Mapping[str, Any]) -> str:
    """HMAC-SHA256 (RFC 2104, the standard library's :mod:`hmac`) of a saved state's canonical
    JSON (keys sorted, no spaces, UTF-8), every field but ``signature``; hex."""
    body = json.dumps({k: v for k, v in saved.items() if k != "signature"}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()


def _state_key(key: object) -> bytes | None:
    if key is None:
        return None
    if not isinstance(key, bytes | bytearray) or not key:
        raise TypeError(f"state_key must be non-empty bytes (the key the caller signs saved state with), "
                        f"got {type(key).__name__}")
    return bytes(key)


def _check_types(raw: Mapping[str, Any]) -> None:
    for name, kind in _SAVED_TYPES.items():
        if name in raw and (not isinstance(raw[name], kind) or (kind is int and isinstance(raw[name], bool))):
            raise GuardStateError(f"saved guard state: {name} has the wrong type ({type(raw[name]).__name__})")
    elapsed = raw.get("elapsed_s", 0.0)
    if not math.isfinite(elapsed) or elapsed < 0:
        raise GuardStateError(f"saved guard state: elapsed_s must be a finite number of seconds, got {elapsed!r}")
    reply = raw.get("reply")
    if reply is not None and not (isinstance(reply.get("ids"), list) and isinstance(reply.get("begun"), list)):
        raise GuardStateError("saved guard state: reply.ids and reply.begun must be lists")


#: How many out-of-range values of a loaded state its warning event names, at most.
_OUT_OF_RANGE_SHOWN = 20


def _count(out_of_range: list[str], name: str, value: int, *, high: int | None = None) -> int:
    """A count read from saved state, in its range (``0`` to ``high``); one outside it is
    noted in ``out_of_range`` (``name: value``)."""
    fixed = max(value, 0) if high is None else min(max(value, 0), high)
    if fixed != value:
        out_of_range.append(f"{name}: {value}")
    return fixed


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(frozen=True, slots=True)
class Decision:
    """What the guard decided about one call.

    Attributes:
        action: :class:`~unstuck.decide.policy.Action`: ``dispatch`` (run it now), ``refuse`` (do not
            run it), ``continue`` (hand the model ``content``), ``retry`` (wait ``delay_s``
            seconds on the turn's clock, then run the same call again through
            :meth:`Guard.before`), ``escalate`` (stop: the turn asks ``escalation``).
        call: the call decided on.
        content: what the model gets as the call's result: the tool's text with unstuck's
            guidance, a refusal, or the "not executed" of a latched turn; empty for
            ``dispatch``.
        situation: the declared or inferred situation of the result (a refusal's own), if any.
        delay_s: for ``retry``, seconds to wait (jittered when the guard was given a random
            source; a server's Retry-After never shortened).
        escalation: for ``escalate``, the question.
        step: the step recorded for the call (``None`` until it was assessed).
    """

    action: Action
    call: ToolCall | None = None
    content: str = ""
    situation: Situation | None = None
    delay_s: float = 0.0
    escalation: Escalation | None = None
    step: StepRecord | None = None

    @property
    def stop(self) -> bool:
        """The turn must stop and ask."""
        return self.action is Action.ESCALATE


@dataclass(slots=True)
class _Reply:
    """One model reply's calls, assessed in order."""

    seq: int
    ids: list[str]
    position: int = 0  # calls before it have been assessed
    begun: set[str] = field(default_factory=set)  # dispatched (in flight) or refused
    refusals: dict[str, tuple[ToolCall, Situation, str, bool]] = field(default_factory=dict)
    fresh: frozenset[str] = frozenset()  # blockers first opened by this reply's calls
    declared: bool = True  # by reply(); False: a call seen alone made it
    refused: dict[str, Decision] = field(default_factory=dict)  # refusals already given, by call id


class Guard:
    """The per-call guard of one turn (see the module doc).

    Args:
        tools: the tool set (a :class:`~unstuck.toolkit.specs.Toolset` or :class:`~unstuck.toolkit.specs.ToolSpec`
            items); calls to other tools fail with the set listed, and the second escalates.
        unattended: nobody can answer now; required, never guessed. Interactive calls are
            refused before dispatch (Rule 1).
        task: the turn's task, named in the escalation.
        guarded: enforce the policy; ``False`` records situations but refuses, retries and
            escalates nothing (the bare loop, for comparison).
        config: the policy's budgets (:class:`~unstuck.decide.policy.PolicyConfig`).
        clock: time source (:class:`~unstuck.core.clock.RealClock` by default).
        events: where decisions are recorded.
        turn_id: the turn's id; a random one by default.
        journal: where steps, effect intents and receipts are recorded durably.
        lessons: remembered blockers, probed before the first call on their subject and
            stored after the turn asked.
        fingerprint: the environment fingerprint of a subject, for lessons.
        second_opinion: the user's model, asked about failures no signal recognises.
        jitter: a random source for full jitter of computed backoff; ``None`` waits exactly.
        closer: writes part 3 of the escalation (what happens once answered), e.g. one
            closing model call with tools withheld; it gets the draft escalation and returns
            a sentence, or raises (the error is shown in the question, never hidden).
        validators: postconditions on the world, checked by :meth:`end` before ``done``.
        held_writes: calls never to run again in this turn, by :func:`unstuck.decide.policy.call_key`
            (tool and canonical arguments), each with the ``effect_ref`` of the intent that
            already made the effect: a resumed turn passes those reported to the model as
            "not repeated" (:func:`unstuck.loop.resume.resume_turn`). Such a call is refused
            before dispatch (a refusal the policy counts like any other), never run.
        state_key: a secret the caller holds (bytes): :meth:`to_json` signs the saved state
            with it (HMAC-SHA256) and :meth:`from_json` given it refuses a state that is
            unsigned or whose signature does not verify (a state edited where it was kept).

    Attributes:
        held_writes: as the argument; :func:`unstuck.loop.resume.resume_turn` sets it once it
            has settled the interrupted reply.
        escalation: the turn's question once it escalated (the latch: every later call is
            refused), else ``None``; :meth:`answer` lifts it.
        state: the policy's :class:`~unstuck.decide.policy.RecoveryState` (budgets, open blockers).
        steps: every call so far, one :class:`~unstuck.decide.outcome.StepRecord` each (probes and
            retries included).
        turn_id: the turn's id (the journal's and the events').

    With a ``journal``, :meth:`start` (or the first call) opens the turn's record and
    :meth:`end` closes it; :meth:`checkpoint` writes steps between.

    Raises:
        TypeError: when ``fingerprint`` is given and is not callable, or ``state_key`` is not
            non-empty bytes.
    """

    def __init__(
        self, tools: Toolset | Iterable[ToolSpec], *, unattended: bool, task: str = "", guarded: bool = True,
        config: policy.PolicyConfig | None = None, clock: Clock | None = None, events: EventSink | None = None,
        turn_id: str | None = None, journal: Journal | None = None, lessons: LessonStore | None = None,
        fingerprint: Callable[[str], str] | None = None, second_opinion: SecondOpinion | None = None,
        jitter: random.Random | None = None, closer: Callable[[Escalation], str] | None = None,
        validators: Sequence[Validator] = (), held_writes: Mapping[str, str] | None = None,
        state_key: bytes | None = None,
    ) -> None:
        if fingerprint is not None and not callable(fingerprint):
            raise TypeError(f"fingerprint must be a function of a subject returning a string, got {fingerprint!r}")
        self.tools = tools if isinstance(tools, Toolset) else Toolset(tools)
        self.task, self.guarded = task, guarded
        self.state = policy.RecoveryState(unattended=unattended, config=config or policy.PolicyConfig())
        self.clock = clock or RealClock()
        self.events = events
        self.turn_id = turn_id or uuid.uuid4().hex[:12]
        self.journal = journal
        self.second_opinion, self.jitter, self.closer = second_opinion, jitter, closer
        self.validators = tuple(validators)
        self.held_writes: Mapping[str, str] = dict(held_writes or {})
        self.state_key = _state_key(state_key)
        self.keeper: LessonKeeper | None = None
        if lessons is not None:
            self.keeper = LessonKeeper(lessons, fingerprint, on_error=lambda message: self.emit(
                EventName.LESSON_ERROR, error=message))
        self.started = self.clock.now()
        self.steps: list[StepRecord] = []
        self.escalation: Escalation | None = None  # the latch: set once the turn escalated
        self.escalated_blocker: policy.OpenBlocker | None = None
        self.escalated_at: tuple[float, int] | None = None  # (seconds into the turn, calls) at the first escalation
        self.runs = RunLengths()
        self.cited: dict[str, Lesson] = {}  # subjects escalated on a lesson's word
        self.noted: dict[str, Lesson] = {}  # subjects whose lesson only added a note
        self.setup_checked: set[str] = set()
        self.saved_steps = 0  # steps already in the journal
        self.last_ref = ""  # the effect_ref of the last side-effecting call
        self._replies = 0
        self._reply: _Reply | None = None
        self._retrying: dict[str, int] = {}  # call id → retries so far, while a retry is pending
        self._waited: dict[str, float] = {}
        self._intents: dict[str, str] = {}  # call id → effect_ref of a prepared intent
        self._done: dict[tuple[int, str], Decision] = {}  # assessed calls of the current reply (exactly once)
        self._dispatched_at: dict[str, float] = {}  # call id → seconds into the turn when it was dispatched
        self._notes: dict[str, str] = {}  # call id → a lesson's note for its result
        self._started = False
        self._lock = threading.RLock()
        self._turn_changed = threading.Condition(self._lock)
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    # -- recording ---------------------------------------------------------------------------

    def at(self) -> float:
        """Seconds since the turn started, on the turn's clock."""
        return self.clock.now() - self.started

    def emit(self, name: EventName, **fields: Scalar) -> None:
        """Record one event (nothing without a sink). Every event unstuck makes passes here, so
        this is the event boundary: each text field is redacted
        (:func:`unstuck.core.redact.redact_document`) before any sink sees it, and no events file,
        trace (:class:`unstuck.store.otel.OtelSink`) or sink of the caller's receives a secret."""
        if self.events is not None:
            clean = {k: redact_document(v) if isinstance(v, str) else v for k, v in fields.items()}
            self.events.emit(event(name, self.turn_id, self.at(), **clean))

    def checkpoint(self, messages: Sequence[str] = (), first_seq: int = 0) -> None:
        """Write the steps not yet in the journal, and the loop's new ``messages`` (JSON,
        numbered from ``first_seq``), in one transaction that rides on the journal's next
        synced commit (:meth:`unstuck.store.journal.Journal.checkpoint`); nothing without a journal.
        The journal redacts what it writes (its store boundary); the model saw the steps whole."""
        if self.journal is None:
            return
        steps = self.steps[self.saved_steps:]
        self.journal.checkpoint(self.turn_id, steps=steps, messages=messages, first_seq=first_seq, ref=self.last_ref)
        self.saved_steps = len(self.steps)

    @property
    def latched(self) -> bool:
        """The turn escalated: every later call is refused until the user answers."""
        return self.escalation is not None

    # -- a turn's start and end ----------------------------------------------------------------

    def start(self, *, model: str = "", resumed: bool = False, **fields: Scalar) -> None:
        """Record the turn's start (the journal's turn row, a ``turn.started`` event); the
        first :meth:`before` or :meth:`after` does it when nobody did. ``resumed``: the turn
        is already in the journal (:func:`unstuck.loop.resume.resume_turn`): a ``turn.resumed``
        event with ``fields`` instead."""
        if self._started:
            return
        self._started = True
        if resumed:
            self.emit(EventName.TURN_RESUMED, **fields)
            return
        if self.journal is not None:
            self.journal.begin_turn(self.turn_id, self.task, unattended=self.state.unattended, guarded=self.guarded,
                                    config_json=json.dumps(self.state.config.to_dict()))
        self.emit(EventName.TURN_STARTED, task=self.task, model=model, guarded=self.guarded,
                  unattended=self.state.unattended)

    def end(self, status: TurnStatus, *, answer: str = "", error: str | None = None,
            messages: Sequence[str] = (), first_seq: int = 0) -> tuple[TurnStatus, tuple[Validation, ...], str | None]:
        """End the turn: validators decide a ``done`` (a failed one makes it ``failed``; a
        turn that stopped records them as ``not required``), then the journal and the
        ``turn.ended`` event. Returns the final status, the validations and the error."""
        validations: tuple[Validation, ...] = ()
        if status is TurnStatus.DONE and self.validators:
            validations = tuple(v.run() for v in self.validators)
            failed = [v for v in validations if v.verdict is not Verdict.PASSED]
            if failed:
                status = TurnStatus.FAILED
                error = "validation failed: " + "; ".join(f"{v.name}: {v.evidence or 'false'}" for v in failed)
        elif self.validators:
            validations = tuple(Validation(v.name, Verdict.NOT_REQUIRED, f"the turn ended {status.value}")
                                for v in self.validators)
        for v in validations:
            self.emit(EventName.VALIDATION_CHECKED, validator=v.name, verdict=v.verdict.value, evidence=v.evidence)
        self.emit(EventName.TURN_ENDED, status=status.value, calls=len(self.steps), elapsed_s=round(self.at(), 6),
                  error=error)
        if self.journal is not None:
            self.checkpoint(messages, first_seq)
            for v in validations:
                self.journal.record_validation(self.turn_id, v.name, v.verdict.value, v.evidence)
            self.journal.end_turn(self.turn_id, status.value, answer=answer, error=error)
        return status, validations, error

    # -- replies -------------------------------------------------------------------------------

    def reply(self, calls: Sequence[ToolCall], *, seq: int | None = None) -> int:
        """Declare the calls of one model reply, in the order the model gave them; returns the
        reply's number. ``seq`` is where the reply sits in the conversation (the journal
        matches effect intents to it on resume); the reply count by default. A call
        :meth:`before` sees outside a declared reply is a reply of its own."""
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids):
            repeated = sorted({i for i in ids if ids.count(i) > 1})
            raise UnstuckError(f"the calls of one reply need distinct ids; repeated: {', '.join(repeated)} "
                               "(unstuck.core.tools.unique_call_ids renames them)")
        with self._lock:
            number = self._replies if seq is None else seq
            self._replies = max(self._replies, number) + 1
            self._reply = _Reply(number, [c.id for c in calls])
            self._done = {}
            self._notify()
            return number

    def _reply_for(self, call: ToolCall, *, fresh: bool = False) -> _Reply:
        """The reply ``call`` belongs to: the declared one when it lists the call (or, while
        that reply is still in progress, one it did not list: it joins at the end); else a
        reply of its own. ``fresh`` (a new :meth:`before`): an id already assessed in the
        reply is a new call that reuses the id (frameworks that number calls per reply)."""
        reply = self._reply
        if reply is not None and call.id in reply.ids:
            earlier = reply.refused.get(call.id)
            reused = (reply.seq, call.id) in self._done or (
                earlier is not None and earlier.call is not None and earlier.call.arguments_json != call.arguments_json)
            if not (fresh and reused and call.id not in self._retrying):
                return reply
        elif reply is not None and reply.declared and reply.position < len(reply.ids):
            reply.ids.append(call.id)
            return reply
        self.reply([call])
        assert self._reply is not None
        self._reply.declared = False
        return self._reply

    def _my_turn(self, reply: _Reply, call_id: str) -> bool:
        if reply is not self._reply or call_id not in reply.ids:
            return True
        index = reply.ids.index(call_id)
        if index <= reply.position:
            return True
        # only earlier calls already under way hold it back: one never begun cannot deadlock it
        return not any(earlier in reply.begun for earlier in reply.ids[reply.position:index])

    def _advance(self, reply: _Reply, call_id: str) -> None:
        """``call_id`` has been assessed: move the reply on, assessing refusals that are next."""
        if reply is not self._reply or call_id not in reply.ids:
            return
        reply.position = max(reply.position, reply.ids.index(call_id) + 1)
        while reply.position < len(reply.ids) and reply.ids[reply.position] in reply.refusals:
            queued = reply.ids[reply.position]
            self._assess_refusal(reply, *reply.refusals.pop(queued))
            reply.position += 1
        self._notify()

    def _notify(self) -> None:
        self._turn_changed.notify_all()
        waiters, self._async_waiters = self._async_waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop has nobody waiting
                loop.call_soon_threadsafe(_wake, future)

    # -- before --------------------------------------------------------------------------------

    def before(self, call: ToolCall) -> Decision:
        """Decide whether ``call`` may run now (Rule 1, skipped subjects, tainted addresses,
        credential changes during a sign-in or permission blocker, the latch, and a
        remembered blocker whose probe says it still holds).

        Returns:
            ``dispatch`` (run it, then report with :meth:`after`), ``refuse`` (``content``
            is what the model gets; do not call :meth:`after`), or ``escalate`` (a lesson's
            probe says the subject is still blocked: the turn asks at once).

        Raises:
            ValueError: naming the tool, when a probe's tool declares a malformed situation.
        """
        with self._lock:
            self.start()
            if self.latched:
                return Decision(Action.REFUSE, call, LATCHED, escalation=self.escalation)
            if call.id in self._retrying:
                self._reply_for(call).begun.add(call.id)
                self._dispatched_at[call.id] = self.at()  # a tool.returned event's duration counts from here
                return Decision(Action.DISPATCH, call)
            reply = self._reply_for(call, fresh=True)
            if call.id in reply.refused:  # the same refused call asked again (a framework replaying): charged once
                return reply.refused[call.id]
            known = self._check_lesson(call)
            if isinstance(known, policy.OpenBlocker):
                escalation = self._escalate(known)
                return Decision(Action.ESCALATE, call, escalation.text, known.situation, escalation=escalation)
            spec = self.tools.get(call.tool)
            arguments = call.arguments
            subject = spec.subject_of(arguments) if spec is not None else call.tool
            hand_off = spec.interactive_call(arguments) if spec is not None else None
            interactive = spec is not None and (spec.interactive or hand_off is not None)
            waits_for = None if hand_off is None else f"`{hand_off.command}` waits for a person: {hand_off.why}"
            without_wait = None
            if hand_off is not None and hand_off.waits is Waits.WITH_TERMINAL and spec is not None:
                fix = non_interactive_fix(hand_off.program, spec.command_line(arguments))
                without_wait = f"{fix.command} ({fix.source})"
            decision, self.state = policy.before_dispatch(
                self.state, call, subject=subject, interactive=interactive, waits_for=waits_for,
                without_wait=without_wait,
                credential_changes=self._credential_changes(arguments, spec) if self.state.open_blockers else (),
            )
            held_ref = None
            if self.held_writes:  # keyed by the journal's arguments, which keep a secret as ***
                stored = replace(call, arguments_json=redact_document(call.arguments_json))
                held_ref = self.held_writes.get(policy.call_key(call)) or self.held_writes.get(policy.call_key(stored))
            if held_ref is not None and not isinstance(decision, policy.Refuse):  # an effect made already: not again
                held = Situation(Kind.PERMISSION, subject, source=Source.UNSTUCK,
                                 detail=_HELD_WRITE_REFUSAL.format(tool=call.tool, ref=held_ref))
                decision = policy.Refuse(call, held, held.detail)
                if held.detail not in self.state.refusals:
                    self.state = replace(self.state, refusals=(*self.state.refusals, held.detail)[:8])
            reply.begun.add(call.id)
            if isinstance(decision, policy.Refuse) and self.guarded:
                self.emit(EventName.CALL_REFUSED, tool=call.tool, subject=subject, reason=decision.reason)
                if self._my_turn(reply, call.id):
                    step = self._assess_refusal(reply, call, decision.situation, subject, interactive)
                    self._advance(reply, call.id)
                    content = self._content_of(step, decision.reason)
                    if self.latched:
                        assert self.escalation is not None
                        stopped = f"{LATCHED}\n{self.escalation.text}"
                        refused = Decision(Action.ESCALATE, call, stopped, decision.situation,
                                           escalation=self.escalation, step=step)
                    else:
                        refused = Decision(Action.REFUSE, call, content, decision.situation, step=step)
                else:
                    reply.refusals[call.id] = (call, decision.situation, subject, interactive)
                    refused = Decision(Action.REFUSE, call, decision.reason, decision.situation)
                reply.refused[call.id] = refused
                return refused
            self.emit(EventName.TOOL_CALLED, tool=call.tool, subject=subject, probe=False)
            self._prepare_intent(call, spec, reply.seq)
            self._dispatched_at[call.id] = self.at()  # a tool.returned event's duration counts from here
            return Decision(Action.DISPATCH, call)

    def _pending_retries(self, saved: Mapping[str, int], out_of_range: list[str]) -> dict[str, int]:
        """Of a saved state's pending retries (call id → retries so far), the ones its steps
        show: the call's last step decided ``retry`` and the guard could retry it by itself
        (``auto_retry``), for a tool of this tool set that is no hand-off to a person. A
        pending retry is dispatched without the checks before dispatch (it was checked when
        the model asked for it), so saved state naming another call id would let that call
        skip them; such an id is dropped and noted in ``out_of_range``."""
        last: dict[str, StepRecord] = {step.call.id: step for step in self.steps}
        kept: dict[str, int] = {}
        for call_id, retries in saved.items():
            step = last.get(call_id)
            spec = self.tools.get(step.call.tool) if step is not None else None
            if (step is not None and spec is not None and step.decision is Action.RETRY and step.auto_retry
                    and not step.interactive and not spec.interactive):
                kept[call_id] = retries
            else:
                out_of_range.append(f"retrying.{call_id}: no retry of it is pending")
        return kept

    def _credential_changes(self, arguments: Mapping[str, Any], spec: ToolSpec | None) -> tuple[Any, ...]:
        """What a call changes in credentials: its command line read as a shell would; for
        other tools, credentials in its arguments, and the files its path arguments name
        read (or, for a writing tool, written) as ``cat``/``tee`` would (``read_file`` of
        ``~/.config/gh/hosts.yml`` prints a token as ``cat`` of it does)."""
        line = spec.command_line(arguments) if spec is not None else None
        if line is not None:
            return credential_changes(line)
        found = list(credential_changes_in_arguments(arguments))
        verb = "tee" if spec is not None and spec.effect is Effect.WRITE else "cat"
        for value in arguments.values():
            if isinstance(value, str) and 0 < len(value) < 4096 and value[:1] in "/~." and "\n" not in value:
                found.extend(credential_changes(f"{verb} {shlex.quote(value)}"))
        return tuple(found)

    def _assess_refusal(self, reply: _Reply, call: ToolCall, situation: Situation, subject: str,
                        interactive: bool) -> StepRecord:
        result = ToolResult(call.tool, False, situation.detail, executed=False, declared=situation)
        step, _ = self._assess(call, result, situation, subject=subject, interactive=interactive, auto_retry=False,
                               reply=reply, started=self.at())
        return step

    # -- after ---------------------------------------------------------------------------------

    def after(self, call: ToolCall, result: object) -> Decision:
        """Assess what ``call`` returned (a :class:`~unstuck.core.tools.ToolResult`, a
        :class:`~unstuck.core.tools.CommandOutput`, an :class:`~unstuck.core.tools.HttpResponse`, an
        exception, or a plain string / JSON value as frameworks return them: it is
        classified like any text, never taken for a success on its type).

        Returns:
            ``continue`` with the content for the model, ``retry`` (wait ``delay_s`` seconds,
            then :meth:`before` and run the call again), or ``escalate`` (the turn stops; the
            guard is latched). A call reported twice is assessed once: the second report gets
            the first decision.

        Raises:
            ValueError: naming the tool, when it declared a malformed situation (a bug in
                that tool, never guessed around).
        """
        with self._lock:
            self.start()
            reply = self._reply_for(call)
            key = (reply.seq, call.id)
            if key in self._done and call.id not in self._retrying:
                return self._done[key]
            deadline = time.monotonic() + REPLY_WAIT_S  # real time: a frozen turn clock must not hang it
            while not self._my_turn(reply, call.id) and time.monotonic() < deadline:
                self._turn_changed.wait(timeout=min(REPLY_WAIT_S, 1.0))
            return self._after(call, result, reply)

    async def aafter(self, call: ToolCall, result: object) -> Decision:
        """:meth:`after` for asyncio: waits for earlier calls of the reply without blocking
        the event loop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REPLY_WAIT_S
        while True:
            with self._lock:
                reply = self._reply_for(call)
                if self._my_turn(reply, call.id) or loop.time() > deadline:
                    key = (reply.seq, call.id)
                    if key in self._done and call.id not in self._retrying:
                        return self._done[key]
                    return self._after(call, result, reply)
                future: asyncio.Future[None] = loop.create_future()
                self._async_waiters.append((loop, future))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout=max(deadline - loop.time(), 0.0))

    async def abefore(self, call: ToolCall) -> Decision:
        """:meth:`before` for asyncio (it never waits on other calls)."""
        return self.before(call)

    def _after(self, call: ToolCall, raw: object, reply: _Reply) -> Decision:
        try:
            return self._assess_result(call, raw, reply)
        except BaseException:
            self._retrying.pop(call.id, None)
            self._advance(reply, call.id)  # the reply's later calls are not held up by this one's error
            raise

    def _assess_result(self, call: ToolCall, raw: object, reply: _Reply) -> Decision:
        spec = self.tools.get(call.tool)
        retry = call.id in self._retrying
        arguments = call.arguments
        subject = spec.subject_of(arguments) if spec is not None else call.tool
        result = self._result_of(call, spec, raw)
        ref = self._intents.pop(call.id, None)
        if ref is not None:
            self._commit_intent(ref, result)
        if result.injected is not None:
            self.emit(EventName.FAULT_INJECTED, tool=call.tool, subject=subject, form=result.injected)
        situation = self._situation_of(call, spec, result, arguments)
        interactive = spec is not None and (spec.interactive or (
            not retry and spec.interactive_call(arguments) is not None))
        # A call is sent again only when that cannot make its effect twice: a read or an
        # idempotent write (ToolSpec.retry_safe), or a call that never reached the tool.
        auto_retry = spec is not None and not interactive and (spec.retry_safe or not result.sent)
        step, assessment = self._assess(call, result, situation, subject=subject, interactive=interactive,
                                        auto_retry=auto_retry, reply=reply,
                                        started=self._dispatched_at.pop(call.id, self.at()), retry=retry,
                                        dispatched=True)
        self._settle_noted(subject, result.ok and situation is None)
        decision = self._decide(call, result, step, assessment)
        if decision.action is not Action.RETRY:
            self._retrying.pop(call.id, None)
            self._done[(reply.seq, call.id)] = decision
            self._advance(reply, call.id)
        return decision

    def _result_of(self, call: ToolCall, spec: ToolSpec | None, raw: object) -> ToolResult:
        if spec is None and raw is _NO_SUCH_TOOL:
            known = ", ".join(self.tools) or "none"
            return ToolResult(call.tool, False, f"No tool named {call.tool!r}. Available tools: {known}.",
                              error_type=_UNKNOWN_TOOL, declared=_absent_tool(call.tool, self.task))
        return normalize_result(call.tool, raw, document=spec is not None and spec.document_output)

    def _subject(self, call: ToolCall, spec: ToolSpec | None) -> str:
        return spec.subject_of(call.arguments) if spec is not None else call.tool

    def _situation_of(self, call: ToolCall, spec: ToolSpec | None, result: ToolResult,
                      arguments: Mapping[str, Any] | None = None) -> Situation | None:
        if not result.executed and result.declared is not None and result.declared.is_refusal:
            return result.declared
        declared = validate_situation(call.tool, result.declared)
        if declared is not None:
            self.emit(EventName.SITUATION_DECLARED, tool=call.tool, kind=declared.kind.value, subject=declared.subject,
                      interactive=declared.interactive, retryable=declared.retryable, unblock=declared.unblock)
            return declared
        found = explain_result(spec or call.tool, call.arguments if arguments is None else arguments, result,
                               thorough=False)
        inferred = found.situation
        if inferred is not None and not found.recognised and self.second_opinion is not None:
            opinion = self.second_opinion.review(call.tool, result.content, inferred)
            self.emit(EventName.SITUATION_SECOND_OPINION, tool=call.tool, kind=(
                opinion.situation.kind.value if opinion.situation is not None else None),
                cached=opinion.cached, problem=opinion.problem)
            inferred = opinion.situation or inferred
        if inferred is not None and inferred.kind is Kind.NOT_INSTALLED and inferred.location is None:
            inferred = self._locate(inferred, spec)
        if inferred is not None:
            self.emit(EventName.SITUATION_INFERRED, tool=call.tool, kind=inferred.kind.value, subject=inferred.subject,
                      interactive=inferred.interactive, retryable=inferred.retryable)
        return inferred

    def _locate(self, situation: Situation, spec: ToolSpec | None) -> Situation:
        """"Not installed" first looks on disk outside ``PATH`` (:func:`unstuck.commands.installed.locate_off_path`)."""
        environment = spec.environ if spec is not None and spec.environ is not None else os.environ
        try:
            found = locate_off_path(situation.subject, environment.get("PATH", ""), environment.get("HOME"))
        except ValueError:  # not a program name ("foo bar", "-rf"): nothing to look for
            return situation
        if found is None:
            return situation
        self.emit(EventName.SITUATION_LOCATED, subject=situation.subject, location=found)
        return replace(situation, location=found)

    # -- assessing -----------------------------------------------------------------------------

    def _assess(
        self, call: ToolCall, result: ToolResult, situation: Situation | None, *, subject: str, interactive: bool,
        auto_retry: bool, reply: _Reply | None, started: float, retry: bool = False, dispatched: bool = False,
        probe: bool = False,
    ) -> tuple[StepRecord, policy.Assessment]:
        exempt = reply.fresh if reply is not None else frozenset()
        if dispatched:
            self.emit(EventName.TOOL_RETURNED, tool=call.tool, subject=subject, ok=result.ok,
                      kind=situation.kind.value if situation is not None else None,
                      duration_s=round(self.at() - started, 6))
        ok = result.ok and not _reads_as_failure(situation)
        outcome = policy.CallOutcome(subject, situation, ok, result.executed, probe, retry, auto_retry, exempt,
                                     unknown_tool=result.error_type == _UNKNOWN_TOOL and call.tool not in self.tools,
                                     interactive=interactive)
        assessment = policy.after_result(self.state, call, outcome)
        if not self.guarded:
            assessment = replace(assessment, decision=policy.Continue(None))
        self.state = assessment.state
        for key in assessment.opened:
            self.emit(EventName.BLOCKER_OPENED, subject=key, kind=self.state.open_blockers[key].situation.kind.value,
                      budget=self.state.open_blockers[key].budget)
        for key in assessment.charged:
            blocker = self.state.open_blockers.get(key) or self.state.skipped[key]
            self.emit(EventName.BUDGET_CHARGED, subject=key, workarounds=blocker.workarounds, budget=blocker.budget)
        for key in assessment.closed:
            self.emit(EventName.BLOCKER_CLOSED, subject=key, reason="probe clean" if probe else "call succeeded")
        if not (probe or retry):
            self.runs = advance(self.runs, call)
            found = self.runs.pattern
            if found is not None:
                self.emit(found.kind, tool=found.tool, calls=found.count)
        if reply is not None:
            reply.fresh |= {key for key in assessment.opened if self.state.open_blockers[key].workarounds == 0}
        step = StepRecord(
            len(self.steps), call, subject, result.executed, probe, ok, situation, started,
            self.at() - started, assessment.charged, assessment.opened, assessment.closed, result.content, retry,
            result.injected, interactive, auto_retry, tuple(sorted(exempt)), assessment.decision.action,
            reply.seq if reply is not None else -1,
        )
        self.steps.append(step)
        if isinstance(assessment.decision, policy.Escalate) and self.guarded and not probe:
            self._escalate(assessment.decision.blocker)
        return step, assessment

    def _decide(self, call: ToolCall, result: ToolResult, step: StepRecord, assessment: policy.Assessment) -> Decision:
        decision = assessment.decision
        if self.guarded and isinstance(decision, policy.RetryAfter):
            delay = decision.delay_s
            if self.jitter is not None and not decision.server_said:
                delay = full_jitter(delay, self.jitter.random())
            self.emit(EventName.RETRY_SCHEDULED, tool=call.tool, attempt=decision.attempt, delay_s=round(delay, 6))
            self._retrying[call.id] = self._retrying.get(call.id, 0) + 1
            self._waited[call.id] = self._waited.get(call.id, 0.0) + delay
            return Decision(Action.RETRY, call, result.content, step.situation, delay_s=delay, step=step)
        if self.latched:
            assert self.escalation is not None
            stopped = f"{result.content}\n\n{GUIDANCE_PREFIX} The turn stopped to ask the user:\n{self.escalation.text}"
            return Decision(Action.ESCALATE, call, stopped, step.situation, escalation=self.escalation, step=step)
        guidance = decision.guidance if isinstance(decision, policy.Continue) else None
        checked = self._check_setup(call, assessment)
        if checked is not None:
            guidance = checked
        text = result.content
        retried = self._retrying.get(call.id, 0)
        if retried:
            waited = f"{self._waited.pop(call.id, 0.0):g}"
            text = f"{text}\n\n{RETRIED_NOTE.format(times=retried, seconds=waited)}"
        content = self._content_of(step, text, guidance if self.guarded else None)
        return Decision(Action.CONTINUE, call, content, step.situation, step=step)

    def _content_of(self, step: StepRecord, text: str, guidance: str | None = None) -> str:
        content = f"{text}\n\n{guidance}" if guidance else text
        note = self._notes.pop(step.call.id, "")
        return f"{note}\n{content}" if note else content

    # -- escalation ----------------------------------------------------------------------------

    def _escalate(self, blocker: policy.OpenBlocker) -> Escalation:
        """Latch the turn on ``blocker`` and build its question (Rule 4)."""
        if self.escalated_at is None:
            self.escalated_at = (self.at(), len(self.steps))
        reason = blocker.reason
        draft = build_escalation(blocker.situation, task=self.task, reason=reason, evidence=blocker.evidence,
                                 count=blocker.workarounds)
        next_step: str | None = None
        error: str | None = None
        if self.closer is not None:
            try:
                next_step = self.closer(draft).strip() or None
                if next_step is None:
                    error = "the closing model call returned no text"
            except Exception as exc:  # any failure of the closing call is shown, never hidden
                error = f"{type(exc).__name__}: {exc}"
        refused = tuple(r for r in self.state.refusals if r != blocker.situation.detail)
        escalation = build_escalation(
            blocker.situation, task=self.task, next_step=next_step, closing_error=error,
            workaround_calls=blocker.workarounds, reason=reason, evidence=blocker.evidence, count=blocker.workarounds,
            refused=refused,
        )
        cited = self.cited.get(blocker.subject)
        if cited is not None:
            known = f"Known blocker: {known_blocker_note(cited)}; its probe says it still holds."
            escalation = replace(escalation, blocked=f"{escalation.blocked} {known}")
        self.escalation, self.escalated_blocker = escalation, blocker
        self.emit(EventName.TURN_ESCALATED, subject=escalation.subject, kind=escalation.kind.value,
                  reason=reason.value, blocked=escalation.blocked, user_action=escalation.user_action,
                  next_step=escalation.next_step, unblock=escalation.unblock, workaround_calls=blocker.workarounds,
                  closing_error=error, lesson=cited.id if cited is not None else None)
        self._remember(blocker)
        return escalation

    def escalate_open_blocker(
        self, reason: EscalationReason = EscalationReason.BLOCKED, *, subject: str | None = None,
    ) -> Escalation | None:
        """Latch the turn on the open blocker on ``subject`` (by default the first real one:
        a tool's word, not unstuck's refusal), e.g. a resumed turn whose budget was already
        spent; ``None`` when no such blocker is open."""
        with self._lock:
            real = [b for b in self.state.open_blockers.values() if not b.situation.is_refusal]
            chosen = real[0] if real else next(iter(self.state.open_blockers.values()), None)
            if subject is not None:
                chosen = self.state.open_blockers.get(subject)
            if chosen is None:
                return None
            return self._escalate(replace(chosen, reason=reason))

    def check_answer(self, confirm: Callable[[str], str] | None = None) -> Decision:
        """The model answered. With no blocker open, the answer stands (``continue``). With one
        open, or one that only a mere success on its subject closed (``gh --version`` after "not
        signed in": no probe or answer showed it lifted): validators decide when the turn has
        them (``continue``; :meth:`end` runs them);
        otherwise ``confirm`` is asked, once, "did you complete the task without <subject>?"
        (:data:`unstuck.decide.prompts.ROUTE_AROUND_CHECK`; e.g. one model call with tools withheld):
        an answer whose first word is "yes" lets the answer stand, with the blocker reported
        open; no, anything else, no ``confirm``, or a ``confirm`` that raises, escalates."""
        with self._lock:
            open_now = [b for b in self.state.open_blockers.values()]
            settled = [b for b in self.state.settled.values() if b.situation.is_blocker]
            if not self.guarded or not (open_now or settled) or self.validators:
                return Decision(Action.CONTINUE)
            if open_now:
                blocker = next((b for b in open_now if not b.situation.is_refusal), open_now[0])
                template = prompts.ROUTE_AROUND_CHECK
            else:
                blocker, template = settled[0], prompts.ROUTE_AROUND_CHECK_SETTLED
            question = template.format(subject=blocker.subject, kind=blocker.situation.kind.value)
            said = ""
            if confirm is not None:
                try:
                    said = confirm(question)
                except Exception as exc:  # an unreadable answer is not a yes
                    said = f"(the check failed: {type(exc).__name__}: {exc})"
            first_line = said.strip().lower().lstrip("*_`\"' ").split("\n", 1)[0]
            words = first_line.replace(",", " ").replace(".", " ").split()
            confirmed = bool(words) and words[0].rstrip(":;!") == "yes" and not _HEDGES & set(words)
            self.emit(EventName.ANSWER_CHECKED, subject=blocker.subject, confirmed=confirmed,
                      said=prompts.excerpt(said, 200))
            if confirmed:
                return Decision(Action.CONTINUE)
            escalation = self._escalate(blocker)
            return Decision(Action.ESCALATE, None, escalation.text, blocker.situation, escalation=escalation)

    # -- the user's answer ---------------------------------------------------------------------

    def answer(self, answer: Answer) -> Decision:
        """The user answered the escalation ("I've done it" / "Skip it" / "Stop").

        Returns:
            ``continue`` with a note for the model when the turn may go on (the blocker's
            probe came back clean, or there was none; or the subject is skipped and its calls
            will be refused); ``escalate`` when it must stop (Stop, or the probe says the
            blocker still holds: ``content`` names the evidence, and the question may be put
            again).

        Raises:
            UnstuckError: when the turn has not escalated.
        """
        with self._lock:
            blocker = self.escalated_blocker
            if self.escalation is None or blocker is None:
                raise UnstuckError("answer() needs an escalated turn; this one has not escalated")
            self.emit(EventName.USER_ANSWERED, subject=blocker.subject, answer=answer.name.lower())
            if answer is Answer.STOP:
                return Decision(Action.ESCALATE, None, self.escalation.text, escalation=self.escalation)
            if answer is Answer.SKIP:
                self.state = policy.skip_subject(self.state, blocker.subject)
                self._record_decision("skip", blocker.subject)
                self.emit(EventName.BLOCKER_CLOSED, subject=blocker.subject, reason="user skipped")
                self._unlatch()
                return Decision(Action.CONTINUE, None, (
                    f"{GUIDANCE_PREFIX} The user chose to skip {blocker.subject}. Calls on it will be "
                    "refused. Finish what you can without it, then report what was left undone."))
            probe = self.probe_for(blocker)
            if probe is None:
                clean, evidence = True, "no probe; the user's answer closes it"
            else:
                clean, evidence = self.run_probe(probe)
            if not clean:
                return Decision(Action.ESCALATE, None, f"{blocker.subject} is still blocked: {evidence}",
                                escalation=self.escalation)
            named = (blocker.situation.detail, *self.state.refusals)  # what the question said unstuck refused
            self.state = policy.release_unknown_effects(policy.close_blocker(self.state, blocker.subject), named)
            if self.keeper is not None:  # the user resolved it, and the probe (if any) agrees
                for lesson in self.keeper.on_subject(blocker.subject):
                    self.keeper.close(lesson, "the user resolved it")
                    self.emit(EventName.LESSON_INVALIDATED, lesson=lesson.id, subject=blocker.subject,
                              reason="user resolved")
            self._record_decision("close", blocker.subject)
            self.emit(EventName.BLOCKER_CLOSED, subject=blocker.subject, reason="user answered")
            self._unlatch()
            return Decision(Action.CONTINUE, None, (
                f"{GUIDANCE_PREFIX} The user has resolved the block on {blocker.subject} ({evidence}). "
                "Continue the task."))

    def _unlatch(self) -> None:
        self.escalation, self.escalated_blocker = None, None
        self.state = replace(self.state, repeat=policy.Repeat(), unknown_tools=0)

    def _record_decision(self, action: str, subject: str) -> None:
        if self.journal is not None:
            self.journal.record_decision(self.turn_id, len(self.steps) - 1, action, subject)

    # -- probes --------------------------------------------------------------------------------

    def probe_for(self, blocker: policy.OpenBlocker) -> Probe | None:
        """The probe that re-checks ``blocker``: its situation's, else its tool's own, else the
        call that opened it, again, when that call is one the guard may run as a probe (a
        read-only, non-interactive tool the guard can run itself, :attr:`ToolSpec.runs_here`):
        ``gh repo view cli/cli`` through a plain shell tool is the most exact check that gh
        works now. ``None`` when there is none: the user's answer is then taken at its word."""
        if blocker.situation.probe is not None:
            return blocker.situation.probe
        spec = self.tools.get(blocker.subject)
        if spec is not None and spec.probe is not None:
            return spec.probe
        opening = next((step.call for step in self.steps
                        if not step.probe and step.dispatched and step.situation is not None
                        and step.situation.subject == blocker.subject), None)
        if opening is None:
            return None
        runner = self.tools.get(opening.tool)
        if runner is None or not runner.runs_here or runner.interactive_call(opening.arguments) is not None:
            return None
        probe = Probe(opening.tool, opening.arguments_json)
        return probe if self.probe_allowed(probe) else None

    def probe_allowed(self, probe: Probe) -> bool:
        """A probe is a cheap read-only call (DESIGN.md): one naming a missing, interactive or
        writing tool is never run, whoever declared it."""
        spec = self.tools.get(probe.tool)
        return spec is not None and not spec.interactive and spec.effect is Effect.READ

    def run_probe(self, probe: Probe) -> tuple[bool, str]:
        """Run ``probe`` as a step that is never charged; (clean, evidence)."""
        if not self.probe_allowed(probe):
            self.emit(EventName.PROBE_REFUSED, tool=probe.tool, reason="missing, interactive or writing tool")
            return False, f"the probe {probe.tool} is not a read-only tool here, so it was not run"
        call = ToolCall(f"probe_{len(self.steps)}", probe.tool, probe.arguments_json)
        spec = self.tools[probe.tool]
        started = self.at()
        self.emit(EventName.TOOL_CALLED, tool=call.tool, subject=spec.subject_of(call.arguments), probe=True)
        result = spec.invoke(call.arguments)
        situation = self._situation_of(call, spec, result)
        self._assess(call, result, situation, subject=spec.subject_of(call.arguments), interactive=False,
                     auto_retry=False, reply=None, started=started, dispatched=True, probe=True)
        clean = result.ok and situation is None
        self.emit(EventName.PROBE_RUN, tool=probe.tool, clean=clean)
        evidence = (situation.detail if situation is not None else "") or result.content
        return clean, prompts.excerpt(evidence, 300)

    def _check_setup(self, call: ToolCall, assessment: policy.Assessment) -> str | None:
        """An inferred auth, not_installed or permission blocker just opened on a program the
        tool reaches: run the tool's read-only setup probe once, so the blocker carries the
        tool's own declaration and exact unblock; the recovery guidance as it now stands."""
        spec = self.tools.get(call.tool)
        if not self.guarded or spec is None or spec.setup_probe is None:
            return None
        for subject in assessment.opened:
            blocker = self.state.open_blockers.get(subject)
            if blocker is None or blocker.situation.is_declared or subject in self.setup_checked:
                continue
            if blocker.situation.kind not in (Kind.AUTH, Kind.NOT_INSTALLED, Kind.PERMISSION):
                continue
            probe = spec.setup_probe(subject)
            if probe is None or not self.probe_allowed(probe):
                continue
            self.setup_checked.add(subject)
            self.emit(EventName.PROBE_SETUP, tool=probe.tool, subject=subject)
            self.run_probe(probe)
            now = self.state.open_blockers.get(subject)
            if now is None:
                return None  # the setup check came back clean: the blocker closed
            return prompts.blocker_recovery(now.situation, now.remaining)
        return None

    # -- effect intents ------------------------------------------------------------------------

    def _prepare_intent(self, call: ToolCall, spec: ToolSpec | None, reply_seq: int, reuse: str | None = None) -> None:
        if self.journal is None or spec is None or spec.effect is not Effect.WRITE:
            return
        if reuse is not None:
            self.journal.resume_intent(reuse)
            ref = reuse
        else:
            if self.saved_steps < len(self.steps):
                self.checkpoint()  # probes and retries before it are on disk: step numbers and intents stay aligned
            ref = self.journal.prepare_intent(self.turn_id, len(self.steps), call.id, call.tool, call.arguments_json,
                                              reply_seq=reply_seq)
        self._intents[call.id] = ref
        self.emit(EventName.INTENT_PREPARED, tool=call.tool, effect_ref=ref)

    def _commit_intent(self, ref: str, result: ToolResult) -> None:
        # The intent was the call's synced commit; the receipt rides on the next one (a power
        # loss before it leaves the intent prepared: resume asks or holds, never repeats).
        assert self.journal is not None
        self.journal.effect_returned(ref)
        self.journal.record_receipt(ref, receipt_of(result))
        self.last_ref = ref
        self.emit(EventName.INTENT_COMMITTED, tool=result.tool, effect_ref=ref, ok=result.ok)

    # -- lessons -------------------------------------------------------------------------------

    def _check_lesson(self, call: ToolCall) -> policy.OpenBlocker | None:
        """Before a call on a subject with a lesson: probe it. Still blocked → the blocker to
        ask about at once (the call never runs); clear → the lesson is closed; no probe → a
        one-line note for the call's result."""
        if self.keeper is None or not self.guarded:
            return None
        spec = self.tools.get(call.tool)
        subject = self._subject(call, spec)
        lesson = self.keeper.lesson_for(subject)
        if lesson is None:
            return None
        note = f"{GUIDANCE_PREFIX} Known blocker on this machine: {known_blocker_note(lesson)}."
        if lesson.probe is None or not self.probe_allowed(lesson.probe):
            self.emit(EventName.LESSON_APPLIED, lesson=lesson.id, subject=subject, probe=False)
            self.noted[subject] = lesson
            self._note(call, note)
            return None
        clean, _evidence = self.run_probe(lesson.probe)
        found = self.steps[-1].situation
        if clean:
            self.keeper.close(lesson, "its probe came back clean")
            self.emit(EventName.LESSON_INVALIDATED, lesson=lesson.id, subject=subject, reason="probe clean")
            return None
        holds = found is not None and found.subject == subject and found.is_blocker and found.is_declared
        if not holds:  # the probe failed some other way (missing tool, a blip, an injected fault): it cannot tell
            self.emit(EventName.LESSON_APPLIED, lesson=lesson.id, subject=subject, probe=True, probe_told=False)
            self.noted[subject] = lesson
            self._note(call, f"{note} (Its probe could not tell whether it still holds.)")
            return None
        assert found is not None
        self.keeper.verified(lesson)
        self.emit(EventName.LESSON_APPLIED, lesson=lesson.id, subject=subject, probe=True)
        self.state = policy.open_known_blocker(self.state, found, len(self.steps) - 1)
        self._record_decision("known", subject)
        self.cited[subject] = lesson
        return self.state.open_blockers[subject]

    def _note(self, call: ToolCall, note: str) -> None:
        self._notes[call.id] = note

    def _settle_noted(self, subject: str, ok: bool) -> None:
        """A call on a subject with a probe-less (or undecided) lesson succeeded: the blocker
        is gone (DESIGN.md: a blocker closes when a call on its subject succeeds)."""
        if self.keeper is None or not ok:
            return
        lesson = self.noted.pop(subject, None)
        if lesson is not None:
            self.keeper.close(lesson, "a call on its subject succeeded")
            self.emit(EventName.LESSON_INVALIDATED, lesson=lesson.id, subject=subject, reason="call succeeded")

    def _remember(self, blocker: policy.OpenBlocker) -> None:
        """The turn asked about ``blocker``: store its lesson (see :mod:`unstuck.guard.lessons`)."""
        if self.keeper is None or blocker.subject in self.cited or blocker.reason is not EscalationReason.BLOCKED:
            return
        declaring = next((s for s in reversed(self.steps) if s.situation == blocker.situation), None)
        if declaring is None or not declaring.dispatched:
            return  # unstuck's own refusal says what this run may do, not what the machine is
        lesson = self.keeper.remember(blocker.situation, tool=declaring.call.tool, result_text=declaring.content,
                                      why="escalated")
        if lesson is not None:
            self.emit(EventName.LESSON_STORED, lesson=lesson.id, subject=lesson.signature.subject,
                      kind=lesson.signature.kind.value)

    def known_blockers_note(self) -> str | None:
        """The system prompt's section on remembered blockers (at most 3 lessons whose
        environment still matches), or ``None``; each shown lesson is an event."""
        if self.keeper is None or not self.guarded:
            return None
        known = self.keeper.known_blockers(self.tools)
        if not known:
            return None
        for lesson in known:
            self.emit(EventName.LESSON_SHOWN, lesson=lesson.id, subject=lesson.signature.subject)
        section = "\n".join(f"- {known_blocker_note(lesson)}" for lesson in known)
        return f"{prompts.KNOWN_BLOCKERS_HEADING}\n{section}"

    # -- the whole call ------------------------------------------------------------------------

    def call(self, call: ToolCall, *, settled: ToolResult | None = None, intent_ref: str | None = None) -> Decision:
        """Guard and run one call of a tool in the tool set: :meth:`before`, the tool,
        :meth:`after`, and the waits and retries the policy asks for (on the turn's clock).

        Args:
            call: the call.
            settled: a result already known (a resumed call whose effect was recorded): it
                is not run again, only assessed.
            intent_ref: a prepared effect intent to run the call under (a resumed call
                whose effect did not happen).

        Returns:
            The final :class:`Decision` (never ``retry``).
        """
        if settled is not None or intent_ref is not None:
            with self._lock:
                reply = self._reply_for(call)
                reply.begun.add(call.id)
                if settled is not None:
                    return self._after(call, settled, reply)
                spec = self.tools.get(call.tool)
                self.emit(EventName.TOOL_CALLED, tool=call.tool, subject=self._subject(call, spec), probe=False)
                self._prepare_intent(call, spec, reply.seq, reuse=intent_ref)
        else:
            decision = self.before(call)
            if decision.action is not Action.DISPATCH:
                return decision
        while True:
            spec = self.tools.get(call.tool)
            raw: object = spec.invoke(call.arguments) if spec is not None else _NO_SUCH_TOOL
            decision = self.after(call, raw)
            if decision.action is not Action.RETRY:
                return decision
            self.checkpoint()  # the attempts so far are on disk: a resumed turn counts on from them
            self.clock.sleep(decision.delay_s)
            again = self.before(call)
            if again.action is not Action.DISPATCH:  # another call latched the turn while it waited
                self._retrying.pop(call.id, None)
                return again

    # -- saving and loading --------------------------------------------------------------------

    def to_json(self) -> str:
        """The guard's state as JSON (schema :data:`STATE_VERSION`): the recovery state,
        every step, the escalation (the latch), the reply in progress, retries pending,
        lessons cited or noted (by id), and the seconds elapsed; enough for
        :meth:`from_json` to carry on with budgets neither lost nor counted twice. The tool
        set, clock, sinks and stores are not state: they are given again on load; nor is the
        policy (guarded, unattended, budgets): the state records it, but the caller of
        :meth:`from_json` gives it again, and the stricter of the two applies. With a
        ``state_key``, the state carries its HMAC-SHA256 ``signature``. Every string in it is
        redacted (:func:`unstuck.core.redact.redact_value`): a secret a tool returned or a call
        carried is never kept in saved state."""
        with self._lock:
            reply = self._reply
            saved = {
                "version": STATE_VERSION, "turn_id": self.turn_id, "task": self.task, "guarded": self.guarded,
                "elapsed_s": self.at(), "state": self.state.to_dict(), "steps": [s.to_dict() for s in self.steps],
                "escalation": None if self.escalation is None else self.escalation.to_dict(),
                "escalated_blocker": None if self.escalated_blocker is None else self.escalated_blocker.to_dict(),
                "escalated_at": None if self.escalated_at is None else list(self.escalated_at),
                "replies": self._replies,
                "reply": None if reply is None else {
                    "seq": reply.seq, "ids": reply.ids, "position": reply.position, "begun": sorted(reply.begun),
                    "fresh": sorted(reply.fresh), "declared": reply.declared,
                    "refusals": [[c.id, c.tool, c.arguments_json, situation.to_dict(), subject, interactive]
                                 for c, situation, subject, interactive in reply.refusals.values()]},
                "done": [[seq, call_id, d.action.value, d.content] for (seq, call_id), d in self._done.items()],
                "retrying": self._retrying, "waited": self._waited, "intents": self._intents,
                "runs": None if self.runs.last is None else {
                    "call": [self.runs.last.id, self.runs.last.tool, self.runs.last.arguments_json],
                    "same": self.runs.same, "streak": self.runs.streak},
                "cited": {k: v.id for k, v in self.cited.items()}, "noted": {k: v.id for k, v in self.noted.items()},
                "setup_checked": sorted(self.setup_checked), "saved_steps": self.saved_steps, "last_ref": self.last_ref,
                "lessons_checked": sorted(self.keeper.checked) if self.keeper is not None else [],
                "held_writes": dict(self.held_writes),
            }
            # saved state is stored (a checkpointer, a framework's context): no secret in it,
            # like the journal (each string redacted, unstuck.core.redact.redact_value); a call is
            # never run from saved state, and a held write is looked up masked too
            saved = redact_value(saved)
            if self.state_key is not None:
                saved["signature"] = _signature(self.state_key, saved)
            return json.dumps(saved)

    @classmethod
    def from_json(cls, text: str | bytes, tools: Toolset | Iterable[ToolSpec], *, unattended: bool,
                  guarded: bool = True, config: policy.PolicyConfig | None = None, state_key: bytes | None = None,
                  **options: Any) -> Guard:
        """A guard carrying on from :meth:`to_json`'s output.

        The policy is the caller's: saved state is data kept somewhere (a checkpointer, a
        framework's context) and cannot grant itself rights. Each setting is the stricter of
        the caller's and the state's: guarded beats unguarded, unattended beats attended, the
        smaller budget beats the larger (:meth:`unstuck.decide.policy.PolicyConfig.stricter`). Nor
        can the state's books lift a budget: every count read from it is in its range (at
        least 0: a blocker's workarounds, retries, the repetition run, the failing streak...)
        and each blocker's budget at most the caller's for its kind, declared or inferred
        (:func:`unstuck.decide.policy.bounded`); a pending retry is kept only when the state's steps
        show one (it skips the checks before dispatch), and a blocker exempts calls of the
        reply in progress only when a call of that reply opened it. What only grows within a
        turn (tainted addresses, refusals, held writes, effects held for the user) is taken as
        it is, and never removes one of the caller's own: ``held_writes`` given here stay held
        beside the state's. When the policy differs, or a value was out of range, a
        ``state.policy_differs`` event names what the state said (``out_of_range``: each
        value fixed, ``path: value``).

        Args:
            text: the saved state.
            tools: the tool set.
            unattended: the caller's: nobody can answer now (as for :class:`Guard`; required).
            guarded: the caller's (``True`` by default).
            config: the caller's budgets (the defaults when ``None``).
            state_key: the caller's key: the state must carry a signature that verifies with
                it (HMAC-SHA256, :meth:`to_json`); the loaded guard signs with it too.
            options: the other :class:`Guard` arguments (clock, events, journal, lessons,
                closer, validators, ...); ``task`` and ``turn_id`` come from the saved state.

        Raises:
            GuardStateError: naming what is wrong, for text that is not saved guard state, a
                schema version other than :data:`STATE_VERSION`, a malformed part, or, with a
                ``state_key``, a state that is unsigned or whose signature does not verify.
            TypeError: for a ``state_key`` that is not non-empty bytes.
        """
        key = _state_key(state_key)
        raw = parse_json(text, where="saved guard state", error=GuardStateError)  # depth-limited (unstuck.core.readers)
        if not isinstance(raw, dict):
            raise GuardStateError("saved guard state must be a JSON object")
        version = raw.get("version")
        if isinstance(version, bool) or version != STATE_VERSION:
            raise GuardStateError(f"saved guard state has schema version {raw.get('version')!r}; this unstuck reads "
                                  f"version {STATE_VERSION}")
        if key is not None:
            signature = raw.get("signature")
            if not isinstance(signature, str):
                raise GuardStateError("saved guard state is not signed, and this guard has a state key: a signed "
                                      "guard loads only state signed with its key")
            if not hmac.compare_digest(signature, _signature(key, raw)):
                raise GuardStateError("saved guard state's signature does not verify with this guard's state key: "
                                      "it was changed since it was saved, or signed with another key")
        try:
            _check_types(raw)
            saved = policy.RecoveryState.from_dict(raw["state"])
            saved_guarded = bool(raw.get("guarded", True))
            mine = config or policy.PolicyConfig()
            policy_now = (unattended or saved.unattended, guarded or saved_guarded, mine.stricter(saved.config))
            # every count in range, every budget at most the caller's for its kind (policy.bounded)
            state, wrong = policy.bounded(replace(saved, unattended=policy_now[0], config=policy_now[2]))
            out_of_range = list(wrong)
            guard = cls(tools, unattended=policy_now[0], task=str(raw.get("task", "")), guarded=policy_now[1],
                        config=policy_now[2], turn_id=str(raw["turn_id"]), state_key=key, **options)
            guard.state = state
            guard.started = guard.clock.now() - float(raw.get("elapsed_s", 0.0))
            guard.steps = [StepRecord.from_dict(s) for s in raw.get("steps", [])]
            if raw.get("escalation") is not None:
                guard.escalation = Escalation.from_dict(raw["escalation"])
            if raw.get("escalated_blocker") is not None:
                guard.escalated_blocker, fixed = policy.bounded_blocker(
                    policy.OpenBlocker.from_dict(raw["escalated_blocker"]), policy_now[2], "escalated_blocker")
                out_of_range.extend(fixed)
            if raw.get("escalated_at") is not None:
                at, calls = raw["escalated_at"]
                seconds = float(at) if math.isfinite(float(at)) and float(at) >= 0 else 0.0
                guard.escalated_at = (seconds, _count(out_of_range, "escalated_at.calls", int(calls)))
            guard._replies = _count(out_of_range, "replies", int(raw.get("replies", 0)))
            saved_reply = raw.get("reply")
            if saved_reply is not None:
                ids = [str(i) for i in saved_reply["ids"]]
                seq = _count(out_of_range, "reply.seq", int(saved_reply["seq"]))
                # only blockers a call of this reply opened exempt its later calls (the charging rule)
                opened_here = {subject for step in guard.steps if step.reply == seq for subject in step.opened}
                fresh = frozenset(map(str, saved_reply["fresh"]))
                out_of_range.extend(f"reply.fresh: {subject}" for subject in sorted(fresh - opened_here))
                guard._reply = _Reply(seq, ids, _count(out_of_range, "reply.position", int(saved_reply["position"]),
                                                       high=len(ids)),
                                      set(map(str, saved_reply["begun"])), fresh=fresh & opened_here,
                                      declared=bool(saved_reply.get("declared", True)))
                for cid, tool_name, arguments, situation, subject, interactive in saved_reply.get("refusals", []):
                    refusal = validate_situation("saved state", situation, allow_refusal=True)
                    if refusal is None:
                        raise GuardStateError("saved guard state: a queued refusal has no situation")
                    guard._reply.refusals[str(cid)] = (ToolCall(str(cid), str(tool_name), str(arguments)), refusal,
                                                       str(subject), bool(interactive))
            guard._done = {(int(item[0]), str(item[1])): Decision(Action(item[2]), None, str(item[3]))
                           for item in raw.get("done", [])}
            guard._retrying = guard._pending_retries(
                {str(k): _count(out_of_range, f"retrying.{k}", int(v)) for k, v in raw.get("retrying", {}).items()},
                out_of_range)
            guard._waited = {str(k): float(v) for k, v in raw.get("waited", {}).items()
                             if math.isfinite(float(v)) and float(v) >= 0}
            guard._intents = {str(k): str(v) for k, v in raw.get("intents", {}).items()}
            runs = raw.get("runs")
            if runs is not None:
                guard.runs = RunLengths(ToolCall(*map(str, runs["call"])), _count(out_of_range, "runs.same",
                                                                                  int(runs["same"])),
                                        _count(out_of_range, "runs.streak", int(runs["streak"])))
            guard.setup_checked = set(map(str, raw.get("setup_checked", [])))
            guard.saved_steps = _count(out_of_range, "saved_steps", int(raw.get("saved_steps", 0)),
                                       high=len(guard.steps))
            guard.last_ref = str(raw.get("last_ref", ""))
            # what may never run again only grows: the state's are added to the caller's own
            guard.held_writes = {**{str(k): str(v) for k, v in raw.get("held_writes", {}).items()},
                                 **guard.held_writes}
            if (saved.unattended, saved_guarded, saved.config) != (unattended, guarded, mine) or out_of_range:
                shown = out_of_range[:_OUT_OF_RANGE_SHOWN]
                more = len(out_of_range) - len(shown)
                guard.emit(EventName.STATE_POLICY_DIFFERS, saved_unattended=saved.unattended,
                           saved_guarded=saved_guarded, saved_config=json.dumps(saved.config.to_dict()),
                           unattended=policy_now[0], guarded=policy_now[1],
                           config=json.dumps(policy_now[2].to_dict()),
                           out_of_range="; ".join(shown) + (f"; and {more} more" if more else "") or None)
            if guard.keeper is not None:
                guard.keeper.checked.update(map(str, raw.get("lessons_checked", [])))
                for book, saved in ((guard.cited, raw.get("cited", {})), (guard.noted, raw.get("noted", {}))):
                    for subject, lesson_id in saved.items():
                        lesson = guard.keeper.by_id(int(lesson_id))
                        if lesson is not None:
                            book[str(subject)] = lesson
        except GuardStateError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as exc:
            raise GuardStateError(f"saved guard state is malformed: {type(exc).__name__}: {exc}") from None
        return guard
