"""One guarded tool call: the per-call pipeline, from before it runs to the decision after it
returns.

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

One call, in order: :meth:`Guard.before` (the latch, the lesson step, then
:func:`unstuck.decide.policy.before_dispatch` and the writes made already; a write's effect
intent is journaled: :mod:`unstuck.store.journal`), the tool, :meth:`Guard.after` (the result
read, the intent's receipt, :func:`unstuck.decide.policy.after_result` charging budgets and
recording the step), and on ``escalate`` the question (:func:`unstuck.decide.escalation.build_escalation`).
The concerns beside that pipeline are modules of their own: the state it keeps and saves
(:mod:`unstuck.guard.state`), reply ordering (:mod:`unstuck.guard.replies`), effect intents
(:mod:`unstuck.guard.intents`), reading results (:mod:`unstuck.guard.results`), probes
(:mod:`unstuck.guard.probes`) and the lesson step (:mod:`unstuck.guard.lessons`).

What it keeps, per turn, is one :class:`~unstuck.guard.state.GuardState`: the recovery state,
one :class:`~unstuck.decide.outcome.StepRecord` per call, the escalation once the turn escalated
(the latch), the reply in progress, effect intents, lessons cited. :meth:`Guard.to_json` /
:meth:`Guard.from_json` carry it across a framework's pause and resume (schema version
:data:`STATE_VERSION`), so budgets are neither lost nor counted twice; :meth:`Guard.from_journal`
rebuilds it from a journaled turn.

Calls of one model reply are one reply (:meth:`Guard.reply`): each is charged exactly once,
in reply order, even when a framework runs them concurrently: a result that arrives before an
earlier call of its reply has been assessed waits for it (at most :data:`REPLY_WAIT_S`).
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from unstuck.commands.interactive import Waits
from unstuck.commands.waiting import non_interactive_fix
from unstuck.core.clock import Clock, RealClock
from unstuck.core.errors import UnstuckError
from unstuck.core.redact import redact_document
from unstuck.core.situations import Probe, Situation
from unstuck.core.tools import ToolCall, ToolResult
from unstuck.decide import marks, policy, prompts
from unstuck.decide.escalation import (
    Answer,
    Escalation,
    EscalationReason,
    build_escalation,
    recount_escalation,
    same_text,
)
from unstuck.decide.outcome import StepRecord, TurnStatus, Validation, Validator, Verdict
from unstuck.decide.policy import Action, CloseReason
from unstuck.decide.prompts import GUIDANCE_PREFIX, RETRIED_NOTE
from unstuck.decide.retry import full_jitter
from unstuck.guard.decision import LATCHED, Decision, Origin
from unstuck.guard.intents import EffectIntents, receipt_of
from unstuck.guard.lessons import LessonKeeper, LessonStep
from unstuck.guard.probes import Probes
from unstuck.guard.replies import REPLY_WAIT_S, QueuedRefusal, Reply, ReplyOrder
from unstuck.guard.results import NO_SUCH_TOOL, UNKNOWN_TOOL, ResultReader, credential_changes_of, reads_as_failure
from unstuck.guard.state import STATE_VERSION, GuardState, GuardStateError, admit, rebuild_state, signing_key
from unstuck.store.diagnostics import advance
from unstuck.store.events import EventName, EventSink, Scalar, event
from unstuck.store.journal import Journal, JournalDecision, JournalError
from unstuck.store.lessons import LessonStore
from unstuck.store.second_opinion import SecondOpinion
from unstuck.toolkit.specs import Toolset, ToolSpec

__all__ = ["REPLY_WAIT_S", "STATE_VERSION", "Action", "Decision", "Guard", "GuardStateError", "receipt_of"]

#: Words that take back a "yes" in the route-around check ("Yes, but I could not list them").
_HEDGES = frozenset({"but", "not", "no", "however", "although", "couldn't", "cannot", "can't", "partly", "partially"})
#: How many out-of-range values of a loaded state its warning event names, at most.
_OUT_OF_RANGE_SHOWN = 20


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
            "not repeated" (:func:`unstuck.loop.resume.resume_turn`, through :meth:`hold_writes`).
            Such a call is refused before dispatch (a refusal the policy counts like any
            other), never run.
        state_key: a secret the caller holds (bytes): :meth:`to_json` signs the saved state
            with it (HMAC-SHA256) and :meth:`from_json` given it refuses a state that is
            unsigned or whose signature does not verify (a state edited where it was kept).

    Attributes:
        held_writes: as the argument, with those :meth:`hold_writes` added.
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
        self.clock = clock or RealClock()
        self.events, self.journal = events, journal
        self.second_opinion, self.jitter, self.closer = second_opinion, jitter, closer
        self.validators = tuple(validators)
        self.state_key = signing_key(state_key)
        self.keeper: LessonKeeper | None = None
        if lessons is not None:
            self.keeper = LessonKeeper(lessons, fingerprint, on_error=lambda message: self.emit(
                EventName.LESSON_ERROR, error=message))
        self._dispatched_at: dict[str, float] = {}  # call id → seconds into the turn when it was dispatched
        self._own_notes: dict[str, str] = {}  # call id → unstuck's note on a settled call (Guard.call)
        self._shown_question: tuple[Escalation, str] | None = None  # the latched question and its text
        # the last question built, from which situation and what else
        self._built_question: tuple[Situation, tuple[object, ...], Escalation] | None = None
        self._started = False
        self._lock = threading.RLock()
        self._carry_on(GuardState(
            turn_id=turn_id or uuid.uuid4().hex[:12], task=task, guarded=guarded, held_writes=dict(held_writes or {}),
            state=policy.RecoveryState(unattended=unattended, config=config or policy.PolicyConfig())))

    def _carry_on(self, kept: GuardState) -> None:
        """Run on from ``kept`` (a new turn's, or one loaded or rebuilt): the clock from its
        ``elapsed_s``, each concern over it."""
        self._kept = kept
        self.started = self.clock.now() - kept.elapsed_s
        self.order = ReplyOrder(kept, self._lock, self._assess_queued)
        self.intents = EffectIntents(kept, self.journal, checkpoint=self.checkpoint, emit=self.emit)
        self.reader = ResultReader(self.tools, kept.task, self.second_opinion, self.emit)
        self.probes = Probes(self.tools, kept, emit=self.emit, at=self.at, step=self._probe_step)
        self.lesson_step = LessonStep(self.keeper, kept, self.tools, emit=self.emit, probes=self.probes,
                                      record_decision=self._record_decision)

    # -- the state, as attributes --------------------------------------------------------------

    @property
    def state(self) -> policy.RecoveryState:
        """The policy's recovery state (budgets, open blockers)."""
        return self._kept.state

    @property
    def steps(self) -> list[StepRecord]:
        """Every call so far, one step each."""
        return self._kept.steps

    @property
    def escalation(self) -> Escalation | None:
        """The turn's question once it escalated (the latch), else ``None``."""
        return self._kept.escalation

    @property
    def escalated_blocker(self) -> policy.OpenBlocker | None:
        """The blocker the turn escalated on, while it is latched."""
        return self._kept.escalated_blocker

    @property
    def escalated_at(self) -> tuple[float, int] | None:
        """(seconds into the turn, calls) at the first escalation."""
        return self._kept.escalated_at

    @property
    def held_writes(self) -> Mapping[str, str]:
        """Writes never to run again in this turn: call key → effect_ref."""
        return self._kept.held_writes

    @property
    def turn_id(self) -> str:
        """The turn's id (the journal's and the events')."""
        return self._kept.turn_id

    @property
    def task(self) -> str:
        """The turn's task."""
        return self._kept.task

    @property
    def guarded(self) -> bool:
        """The policy is enforced."""
        return self._kept.guarded

    @property
    def saved_steps(self) -> int:
        """Steps already in the journal."""
        return self._kept.saved_steps

    @property
    def latched(self) -> bool:
        """The turn escalated: every later call is refused until the user answers."""
        return self._kept.escalation is not None

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
            self.events.emit(event(name, self._kept.turn_id, self.at(), **clean))

    def checkpoint(self, messages: Sequence[str] = (), first_seq: int = 0) -> None:
        """Write the steps not yet in the journal, and the loop's new ``messages`` (JSON,
        numbered from ``first_seq``), in one transaction that rides on the journal's next
        synced commit (:meth:`unstuck.store.journal.Journal.checkpoint`); nothing without a journal.
        The journal redacts what it writes (its store boundary); the model saw the steps whole."""
        if self.journal is None:
            return
        kept = self._kept
        self.journal.checkpoint(kept.turn_id, steps=kept.steps[kept.saved_steps:], messages=messages,
                                first_seq=first_seq, ref=kept.last_ref)
        kept.saved_steps = len(kept.steps)

    def hold_writes(self, made: Mapping[str, str]) -> None:
        """Add writes never to run again in this turn (call key → effect_ref, as ``held_writes``);
        none is ever removed."""
        with self._lock:
            self.intents.hold(dict(made))

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
        state = self._kept.state
        if self.journal is not None:
            self.journal.begin_turn(self.turn_id, self.task, unattended=state.unattended, guarded=self.guarded,
                                    config_json=json.dumps(state.config.to_dict()))
        self.emit(EventName.TURN_STARTED, task=self.task, model=model, guarded=self.guarded,
                  unattended=state.unattended)

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
                self.journal.record_validation(self.turn_id, v.name, v.verdict, v.evidence)
            self.journal.end_turn(self.turn_id, status, answer=answer, error=error)
        return status, validations, error

    def reply(self, calls: Sequence[ToolCall], *, seq: int | None = None) -> int:
        """Declare the calls of one model reply, in the order the model gave them; returns the
        reply's number. ``seq`` is where the reply sits in the conversation (the journal
        matches effect intents to it on resume); the reply count by default. A call
        :meth:`before` sees outside a declared reply is a reply of its own.

        Raises:
            UnstuckError: when two calls share an id.
        """
        with self._lock:
            return self.order.declare(calls, seq)

    # -- before --------------------------------------------------------------------------------

    def before(self, call: ToolCall) -> Decision:
        """Decide whether ``call`` may run now (Rule 1, skipped subjects, tainted addresses,
        credential changes during a sign-in or permission blocker, the latch, a write made
        already, and a remembered blocker whose probe says it still holds).

        Returns:
            ``dispatch`` (run it, then report with :meth:`after`), ``refuse`` (``content``
            is what the model gets; do not call :meth:`after`), or ``escalate`` (a lesson's
            probe says the subject is still blocked: the turn asks at once).

        Raises:
            ValueError: naming the tool, when a probe's tool declares a malformed situation.
        """
        with self._lock:
            if not self._started:
                self.start()
            kept = self._kept
            if kept.escalation is not None:
                return Decision(Action.REFUSE, call, self.note(LATCHED), escalation=kept.escalation)
            if call.id in kept.retrying:
                self.order.of(call).begun.add(call.id)
                self._dispatched_at[call.id] = self.at()  # a tool.returned event's duration counts from here
                return Decision(Action.DISPATCH, call)
            reply = self.order.of(call, fresh=True)
            if call.id in reply.refused:  # the same refused call asked again (a framework replaying): charged once
                return reply.refused[call.id]
            known = self.lesson_step.check(call) if self.keeper is not None else None  # no lessons: none known
            if known is not None:
                escalation = self._escalate(known)
                return Decision(Action.ESCALATE, call, self.note(escalation.text), known.situation,
                                escalation=escalation)
            spec = self.tools.get(call.tool)
            arguments = call.arguments
            subject = spec.subject_of(arguments) if spec is not None else call.tool
            hand_off = spec.interactive_call(arguments) if spec is not None else None
            interactive = spec is not None and (spec.interactive or hand_off is not None)
            waits_for = None if hand_off is None else f"`{hand_off.command}` waits for a person: {hand_off.why}"
            without_wait = None
            if hand_off is not None and hand_off.waits is Waits.WITH_TERMINAL and spec is not None:
                without_wait = non_interactive_fix(hand_off.program, spec.command_line(arguments))
            decision, kept.state = policy.before_dispatch(
                kept.state, call, subject=subject, interactive=interactive, waits_for=waits_for,
                without_wait=without_wait,
                credential_changes=credential_changes_of(arguments, spec) if kept.state.open_blockers else (),
            )
            if kept.held_writes:
                decision = self.intents.held(call, subject, decision)  # an effect made already: not again
            reply.begun.add(call.id)
            if isinstance(decision, policy.Refuse) and kept.guarded:
                return self._refuse(reply, QueuedRefusal(call, decision.situation, subject, interactive),
                                    decision.reason)
            if self.events is not None:
                self.emit(EventName.TOOL_CALLED, tool=call.tool, subject=subject, probe=False)
            if self.journal is not None:
                self.intents.prepare(call, spec, reply.seq)
            # a tool.returned event's duration counts from here (self.at(), inline)
            self._dispatched_at[call.id] = self.clock.now() - self.started
            return Decision(Action.DISPATCH, call)

    def _refuse(self, reply: Reply, refusal: QueuedRefusal, reason: str) -> Decision:
        """A refusal: assessed now when it is the reply's turn, else queued until it is."""
        call, situation = refusal.call, refusal.situation
        self.emit(EventName.CALL_REFUSED, tool=call.tool, subject=refusal.subject, reason=reason)
        if self.order.my_turn(reply, call.id):
            step = self._assess_queued(reply, refusal)
            self.order.assessed(reply, call.id)
            content = self._content_of(step, None, (reason,))
            escalation = self._kept.escalation
            if escalation is not None:
                refused = Decision(Action.ESCALATE, call, self.note(f"{LATCHED}\n{escalation.text}"), situation,
                                   escalation=escalation, step=step)
            else:
                refused = Decision(Action.REFUSE, call, content, situation, step=step)
        else:
            reply.refusals[call.id] = refusal
            refused = Decision(Action.REFUSE, call, self.note(reason), situation)
        reply.refused[call.id] = refused
        return refused

    def _assess_queued(self, reply: Reply, refusal: QueuedRefusal) -> StepRecord:
        call, situation = refusal.call, refusal.situation
        result = ToolResult(call.tool, False, situation.detail, executed=False, declared=situation)
        step, _ = self._assess(call, result, situation, subject=refusal.subject, interactive=refusal.interactive,
                               auto_retry=False, reply=reply, started=self.at(), origin=Origin.REFUSED)
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
            if not self._started:
                self.start()
            reply = self.order.of(call)
            given = self.order.given(reply, call.id)
            if given is not None:
                return given
            self.order.wait_turn(reply, call.id)
            return self._after(call, result, reply)

    async def aafter(self, call: ToolCall, result: object) -> Decision:
        """:meth:`after` for asyncio: waits for earlier calls of the reply without blocking
        the event loop."""

        def assess(reply: Reply) -> Decision:
            given = self.order.given(reply, call.id)
            return given if given is not None else self._after(call, result, reply)

        return await self.order.in_turn(call, assess)

    async def abefore(self, call: ToolCall) -> Decision:
        """:meth:`before` for asyncio (it never waits on other calls)."""
        return self.before(call)

    def _after(self, call: ToolCall, raw: object, reply: Reply) -> Decision:
        try:
            return self._assess_result(call, raw, reply)
        except BaseException:
            self._kept.retrying.pop(call.id, None)
            self.order.assessed(reply, call.id)  # the reply's later calls are not held up by this one's error
            raise

    def _assess_result(self, call: ToolCall, raw: object, reply: Reply) -> Decision:
        kept = self._kept
        spec = self.tools.get(call.tool)
        retry = call.id in kept.retrying
        arguments = call.arguments
        subject = spec.subject_of(arguments) if spec is not None else call.tool
        result = self.reader.result_of(call, spec, raw)
        said = result.content  # the tool's words; a settled call's note is unstuck's (Guard.call)
        own = self._own_notes.pop(call.id, "")
        if own:
            result = replace(result, content=f"{said}\n\n{own}" if said else own)
        if kept.intents:
            self.intents.returned(call, result)
        if result.injected is not None:
            self.emit(EventName.FAULT_INJECTED, tool=call.tool, subject=subject, form=result.injected)
        situation = self.reader.situation_of(call, spec, result, arguments)
        interactive = spec is not None and (spec.interactive or (
            not retry and spec.interactive_call(arguments) is not None))
        # A call is sent again only when that cannot make its effect twice: a read or an
        # idempotent write (ToolSpec.retry_safe), or a call that never reached the tool.
        auto_retry = spec is not None and not interactive and (spec.retry_safe or not result.sent)
        started = self._dispatched_at.pop(call.id, None)
        step, assessment = self._assess(call, result, situation, subject=subject, interactive=interactive,
                                        auto_retry=auto_retry, reply=reply,
                                        started=self.at() if started is None else started,
                                        origin=Origin.RETRY if retry else Origin.MODEL)
        if self.keeper is not None:
            self.lesson_step.settle_noted(subject, result.ok and situation is None)
        decision = self._decide(call, result, step, assessment, said, own)
        if decision.action is not Action.RETRY:
            kept.retrying.pop(call.id, None)
            self.order.assessed(reply, call.id, decision)
        return decision

    def _probe_step(self, call: ToolCall, spec: ToolSpec, result: ToolResult, started: float) -> Situation | None:
        situation = self.reader.situation_of(call, spec, result)
        self._assess(call, result, situation, subject=spec.subject_of(call.arguments), interactive=False,
                     auto_retry=False, reply=None, started=started, origin=Origin.PROBE)
        return situation

    # -- assessing -----------------------------------------------------------------------------

    def _assess(
        self, call: ToolCall, result: ToolResult, situation: Situation | None, *, subject: str, interactive: bool,
        auto_retry: bool, reply: Reply | None, started: float, origin: Origin,
    ) -> tuple[StepRecord, policy.Assessment]:
        """Charge one result to the recovery state and record its step (every call's, probes'
        and refusals' alike); the turn escalates when the policy says so."""
        kept = self._kept
        probe, retry = origin is Origin.PROBE, origin is Origin.RETRY
        exempt = reply.fresh if reply is not None else frozenset()
        events = self.events is not None
        if events and origin.ran:
            self.emit(EventName.TOOL_RETURNED, tool=call.tool, subject=subject, ok=result.ok,
                      kind=situation.kind.value if situation is not None else None,
                      duration_s=round(self.at() - started, 6))
        ok = result.ok and (situation is None or not reads_as_failure(situation))
        outcome = policy.CallOutcome(subject, situation, ok, result.executed, probe, retry, auto_retry, exempt,
                                     unknown_tool=result.error_type == UNKNOWN_TOOL and call.tool not in self.tools,
                                     interactive=interactive)
        assessment = policy.after_result(kept.state, call, outcome)
        if not kept.guarded:
            assessment = replace(assessment, decision=policy.Continue(None))
        kept.state = state = assessment.state
        for key in assessment.opened if events else ():
            self.emit(EventName.BLOCKER_OPENED, subject=key, kind=state.open_blockers[key].situation.kind.value,
                      budget=state.open_blockers[key].budget)
        for key in assessment.charged if events else ():
            blocker = state.open_blockers.get(key) or state.skipped[key]
            self.emit(EventName.BUDGET_CHARGED, subject=key, workarounds=blocker.workarounds, budget=blocker.budget)
        for key in assessment.closed if events else ():
            self.emit(EventName.BLOCKER_CLOSED, subject=key, reason=CloseReason.of_call(probe=probe).value)
        if not (probe or retry):
            kept.runs = advance(kept.runs, call)
            found = kept.runs.pattern if events else None
            if found is not None:
                self.emit(found.kind, tool=found.tool, calls=found.count)
        if reply is not None and assessment.opened:
            reply.fresh |= {key for key in assessment.opened if state.open_blockers[key].workarounds == 0}
        step = StepRecord(
            len(kept.steps), call, subject, result.executed, probe, ok, situation, started,
            self.clock.now() - self.started - started, assessment.charged, assessment.opened, assessment.closed,
            result.content, retry, result.injected, interactive, auto_retry, tuple(sorted(exempt)) if exempt else (),
            assessment.decision.action, reply.seq if reply is not None else -1,
        )
        kept.steps.append(step)
        if isinstance(assessment.decision, policy.Escalate) and kept.guarded and not probe:
            self._escalate(assessment.decision.blocker)
        return step, assessment

    def _decide(self, call: ToolCall, result: ToolResult, step: StepRecord, assessment: policy.Assessment,
                said: str, own: str) -> Decision:
        """The decision on an assessed result; ``said`` is the tool's text (quoted where it imitates
        a note: :func:`unstuck.decide.marks.neutralise`), ``own`` unstuck's note on a settled call."""
        kept = self._kept
        decision = assessment.decision
        if kept.guarded and isinstance(decision, policy.RetryAfter):
            delay = decision.delay_s
            if self.jitter is not None and not decision.server_said:
                delay = full_jitter(delay, self.jitter.random())
            self.emit(EventName.RETRY_SCHEDULED, tool=call.tool, attempt=decision.attempt, delay_s=round(delay, 6))
            kept.retrying[call.id] = kept.retrying.get(call.id, 0) + 1
            kept.waited[call.id] = kept.waited.get(call.id, 0.0) + delay
            return Decision(Action.RETRY, call, marks.neutralise(said), step.situation, delay_s=delay, step=step)
        if kept.escalation is not None:
            stopped = self._content_of(step, said, (own, f"{GUIDANCE_PREFIX} The turn stopped to ask the user:\n"
                                                         f"{self._question_text(kept.escalation)}"), lesson=False)
            return Decision(Action.ESCALATE, call, stopped, step.situation, escalation=kept.escalation, step=step)
        guidance = decision.guidance if isinstance(decision, policy.Continue) else None
        checked = self.probes.check_setup(call, assessment) if assessment.opened else None  # only a new blocker
        if checked is not None:
            guidance = checked
        retried = kept.retrying.get(call.id, 0)
        waited = RETRIED_NOTE.format(times=retried, seconds=f"{kept.waited.pop(call.id, 0.0):g}") if retried else ""
        content = self._content_of(step, said, (own, waited, (guidance or "") if kept.guarded else ""))
        return Decision(Action.CONTINUE, call, content, step.situation, step=step)

    def _question_text(self, escalation: Escalation) -> str:
        """``escalation.text``, rendered once for the question the turn is latched on (every
        later call's content quotes it)."""
        shown = self._shown_question
        if shown is None or not (shown[0] is escalation or same_text(shown[0], escalation)):
            shown = self._shown_question = (escalation, escalation.text)
        return shown[1]

    def _content_of(self, step: StepRecord, said: str | None, notes: Sequence[str], *, lesson: bool = True) -> str:
        """What the model gets for ``step``: a lesson's note (when ``lesson``), the tool's text
        ``said`` (``None``: the call did not run) with every line that imitates unstuck's mark
        quoted as the tool's (:func:`unstuck.decide.marks.neutralise`), then ``notes``, each a
        paragraph marked with the turn's mark (:func:`unstuck.decide.marks.note`); empty ones
        are left out."""
        own = marks.notes(self._kept.nonce, notes)
        if said is None:
            content = own
        else:
            shown = marks.neutralise(said)
            content = f"{shown}\n\n{own}" if own else shown
        lessons = self.lesson_step.note(step.call.id) if lesson and self.keeper is not None else ""
        return f"{self.note(lessons)}\n{content}" if lessons else content

    @property
    def mark(self) -> str:
        """The turn's mark on unstuck's notes to the model (:func:`unstuck.decide.marks.mark`:
        ``[unstuck 9f3c2a1b7d4e6f80]``, a nonce drawn when the turn started and kept in its
        saved state)."""
        return marks.mark(self._kept.nonce)

    def note(self, text: str) -> str:
        """``text`` as unstuck's note to the model in this turn (:func:`unstuck.decide.marks.note`):
        its first line starts with :attr:`mark`; tool text never does (:meth:`after` quotes a
        line of it that imitates the mark). For an integration's own words beside the guard's."""
        return marks.note(self._kept.nonce, text) if text else text

    # -- escalation ----------------------------------------------------------------------------

    def _escalate(self, blocker: policy.OpenBlocker) -> Escalation:
        """Latch the turn on ``blocker`` and build its question (Rule 4)."""
        kept = self._kept
        if kept.escalated_at is None:
            kept.escalated_at = (self.at(), len(kept.steps))
        reason = blocker.reason
        next_step: str | None = None
        error: str | None = None
        if self.closer is not None:
            draft = build_escalation(blocker.situation, task=self.task, reason=reason, evidence=blocker.evidence,
                                     count=blocker.workarounds)  # what the closer is shown (nobody else reads it)
            try:
                next_step = self.closer(draft).strip() or None
                if next_step is None:
                    error = "the closing model call returned no text"
            except Exception as exc:  # any failure of the closing call is shown, never hidden
                error = f"{type(exc).__name__}: {exc}"
        refused = tuple(r for r in kept.state.refusals if r != blocker.situation.detail)
        # the question is a pure function of these and the counts: a latched turn asked again (a
        # result reported after the latch) gets the question already built, counted again
        # (the same situation object: its detail, suggestion and location take no part in its equality)
        asked = (self.task, next_step, error, reason, refused)
        built = self._built_question
        if built is not None and built[0] is blocker.situation and built[1] == asked:
            escalation = recount_escalation(built[2], blocker.situation, workaround_calls=blocker.workarounds,
                                            count=blocker.workarounds, evidence=blocker.evidence)
        else:
            escalation = build_escalation(
                blocker.situation, task=self.task, next_step=next_step, closing_error=error,
                workaround_calls=blocker.workarounds, reason=reason, evidence=blocker.evidence,
                count=blocker.workarounds, refused=refused,
            )
            self._built_question = (blocker.situation, asked, escalation)
        escalation, cited = self.lesson_step.cite(escalation, blocker.subject)
        kept.escalation, kept.escalated_blocker = escalation, blocker
        if self.events is not None:
            self.emit(EventName.TURN_ESCALATED, subject=escalation.subject, kind=escalation.kind.value,
                      reason=reason.value, blocked=escalation.blocked, user_action=escalation.user_action,
                      next_step=escalation.next_step, unblock=escalation.unblock,
                      workaround_calls=blocker.workarounds, closing_error=error,
                      lesson=cited.id if cited is not None else None)
        self.lesson_step.remember(blocker)
        return escalation

    def escalate_open_blocker(
        self, reason: EscalationReason = EscalationReason.BLOCKED, *, subject: str | None = None,
    ) -> Escalation | None:
        """Latch the turn on the open blocker on ``subject`` (by default the first real one:
        a tool's word, not unstuck's refusal), e.g. a resumed turn whose budget was already
        spent; ``None`` when no such blocker is open."""
        with self._lock:
            blockers = self._kept.state.open_blockers
            real = [b for b in blockers.values() if not b.situation.is_refusal]
            chosen = real[0] if real else next(iter(blockers.values()), None)
            if subject is not None:
                chosen = blockers.get(subject)
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
            state = self._kept.state
            open_now = list(state.open_blockers.values())
            settled = [b for b in state.settled.values() if b.situation.is_blocker]
            if not self.guarded or not (open_now or settled) or self.validators:
                return Decision(Action.CONTINUE)
            if open_now:
                blocker = next((b for b in open_now if not b.situation.is_refusal), open_now[0])
                template = prompts.ROUTE_AROUND_CHECK
            else:
                blocker, template = settled[0], prompts.ROUTE_AROUND_CHECK_SETTLED
            question = self.note(template.format(subject=blocker.subject, kind=blocker.situation.kind.value))
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
            kept = self._kept
            blocker = kept.escalated_blocker
            if kept.escalation is None or blocker is None:
                raise UnstuckError("answer() needs an escalated turn; this one has not escalated")
            self.emit(EventName.USER_ANSWERED, subject=blocker.subject, answer=answer.name.lower())
            if answer is Answer.STOP:
                return Decision(Action.ESCALATE, None, self.note(kept.escalation.text), escalation=kept.escalation)
            if answer is Answer.SKIP:
                kept.state = policy.skip_subject(kept.state, blocker.subject)
                self._record_decision(JournalDecision.SKIP, blocker.subject)
                self.emit(EventName.BLOCKER_CLOSED, subject=blocker.subject, reason=CloseReason.USER_SKIPPED.value)
                self._unlatch()
                return Decision(Action.CONTINUE, None, self.note(
                    f"{GUIDANCE_PREFIX} The user chose to skip {blocker.subject}. Calls on it will be "
                    "refused. Finish what you can without it, then report what was left undone."))
            probe = self.probes.for_blocker(blocker)
            if probe is None:
                clean, evidence = True, "no probe; the user's answer closes it"
            else:
                clean, evidence = self.probes.run(probe)
            if not clean:
                return Decision(Action.ESCALATE, None, self.note(f"{blocker.subject} is still blocked: {evidence}"),
                                escalation=kept.escalation)
            named = (blocker.situation.detail, *kept.state.refusals)  # what the question said unstuck refused
            kept.state = policy.release_unknown_effects(policy.close_blocker(kept.state, blocker.subject), named)
            self.lesson_step.resolved(blocker.subject)  # the user resolved it, and the probe (if any) agrees
            self._record_decision(JournalDecision.CLOSE, blocker.subject)
            self.emit(EventName.BLOCKER_CLOSED, subject=blocker.subject, reason=CloseReason.USER_ANSWERED.value)
            self._unlatch()
            return Decision(Action.CONTINUE, None, self.note(
                f"{GUIDANCE_PREFIX} The user has resolved the block on {blocker.subject} ({evidence}). "
                "Continue the task."))

    def _unlatch(self) -> None:
        kept = self._kept
        kept.escalation, kept.escalated_blocker = None, None
        kept.state = replace(kept.state, repeat=policy.Repeat(), unknown_tools=0)

    def _record_decision(self, action: JournalDecision, subject: str) -> None:
        if self.journal is not None:
            self.journal.record_decision(self.turn_id, len(self.steps) - 1, action, subject)

    # -- probes and lessons (unstuck.guard.probes, unstuck.guard.lessons) ----------------------

    def probe_for(self, blocker: policy.OpenBlocker) -> Probe | None:
        """The probe that re-checks ``blocker`` (:meth:`unstuck.guard.probes.Probes.for_blocker`)."""
        return self.probes.for_blocker(blocker)

    def probe_allowed(self, probe: Probe) -> bool:
        """Whether ``probe`` may run (:meth:`unstuck.guard.probes.Probes.allowed`)."""
        return self.probes.allowed(probe)

    def run_probe(self, probe: Probe) -> tuple[bool, str]:
        """Run ``probe`` as a step that is never charged; (clean, evidence)."""
        return self.probes.run(probe)

    def known_blockers_note(self) -> str | None:
        """The system prompt's section on remembered blockers, or ``None``
        (:meth:`unstuck.guard.lessons.LessonStep.known_blockers_note`)."""
        return self.lesson_step.known_blockers_note()

    # -- the whole call ------------------------------------------------------------------------

    def call(self, call: ToolCall, *, settled: ToolResult | None = None, intent_ref: str | None = None,
             note: str = "") -> Decision:
        """Guard and run one call of a tool in the tool set: :meth:`before`, the tool,
        :meth:`after`, and the waits and retries the policy asks for (on the turn's clock).

        Args:
            call: the call.
            settled: a result already known (a resumed call whose effect was recorded): it
                is not run again, only assessed.
            intent_ref: a prepared effect intent to run the call under (a resumed call
                whose effect did not happen).
            note: unstuck's own words on ``settled`` (a resumed call that was not repeated,
                written with :data:`~unstuck.decide.prompts.GUIDANCE_PREFIX`): assessed with the
                result (after its text, a paragraph), shown to the model as a note of the turn
                (:meth:`note`), never as the tool's text.

        Returns:
            The final :class:`Decision` (never ``retry``).
        """
        if settled is not None or intent_ref is not None:
            with self._lock:
                reply = self.order.of(call)
                reply.begun.add(call.id)
                if settled is not None:
                    if note:
                        self._own_notes[call.id] = note
                    return self._after(call, settled, reply)
                spec = self.tools.get(call.tool)
                subject = spec.subject_of(call.arguments) if spec is not None else call.tool
                self.emit(EventName.TOOL_CALLED, tool=call.tool, subject=subject, probe=False)
                self.intents.prepare(call, spec, reply.seq, reuse=intent_ref)
        else:
            decision = self.before(call)
            if decision.action is not Action.DISPATCH:
                return decision
        while True:
            spec = self.tools.get(call.tool)
            raw: object = spec.invoke(call.arguments) if spec is not None else NO_SUCH_TOOL
            decision = self.after(call, raw)
            if decision.action is not Action.RETRY:
                return decision
            self.checkpoint()  # the attempts so far are on disk: a resumed turn counts on from them
            self.clock.sleep(decision.delay_s)
            again = self.before(call)
            if again.action is not Action.DISPATCH:  # another call latched the turn while it waited
                self._kept.retrying.pop(call.id, None)
                return again

    # -- saving and loading (unstuck.guard.state) ----------------------------------------------

    def to_json(self) -> str:
        """The guard's state as JSON (:meth:`unstuck.guard.state.GuardState.to_json`, schema
        :data:`STATE_VERSION`): the recovery state, every step, the escalation (the latch), the
        reply in progress, retries pending, lessons cited or noted (by id), and the seconds
        elapsed; enough for :meth:`from_json` to carry on with budgets neither lost nor
        counted twice. The tool set, clock, sinks and stores are not state: they are given
        again on load; nor is the policy (guarded, unattended, budgets): the state records it,
        but the caller of :meth:`from_json` gives it again, and the stricter of the two
        applies. With a ``state_key``, the state carries its HMAC-SHA256 ``signature``. Every
        string in it is redacted (:func:`unstuck.core.redact.redact_value`): a secret a tool
        returned or a call carried is never kept in saved state."""
        with self._lock:
            return replace(self._kept, elapsed_s=self.at()).to_json(self.state_key)

    @classmethod
    def from_json(cls, text: str | bytes, tools: Toolset | Iterable[ToolSpec], *, unattended: bool,
                  guarded: bool = True, config: policy.PolicyConfig | None = None, state_key: bytes | None = None,
                  **options: Any) -> Guard:
        """A guard carrying on from :meth:`to_json`'s output.

        The policy is the caller's: saved state is data kept somewhere (a checkpointer, a
        framework's context) and cannot grant itself rights (:func:`unstuck.guard.state.admit`:
        each setting the stricter of the caller's and the state's, every count in its range,
        each budget at most the caller's, a pending retry only when the steps show one, a
        reply's exemption only from a blocker that reply opened, ``held_writes`` given here
        held beside the state's). When the policy differs, or a value was out of range, a
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
        key = signing_key(state_key)
        saved = GuardState.from_json(text, key)
        mine = config or policy.PolicyConfig()
        guard = cls(tools, unattended=unattended or saved.state.unattended, task=saved.task,
                    guarded=guarded or saved.guarded, config=mine.stricter(saved.state.config),
                    turn_id=saved.turn_id, state_key=key, **options)
        try:
            admitted, out_of_range = admit(saved, guard.tools, unattended=unattended, guarded=guarded, config=mine,
                                           held_writes=guard.held_writes)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as exc:
            raise GuardStateError(f"saved guard state is malformed: {type(exc).__name__}: {exc}") from None
        guard._carry_on(admitted)
        if (saved.state.unattended, saved.guarded, saved.state.config) != (unattended, guarded, mine) or out_of_range:
            shown = out_of_range[:_OUT_OF_RANGE_SHOWN]
            more = len(out_of_range) - len(shown)
            now = admitted.state
            guard.emit(EventName.STATE_POLICY_DIFFERS, saved_unattended=saved.state.unattended,
                       saved_guarded=saved.guarded, saved_config=json.dumps(saved.state.config.to_dict()),
                       unattended=now.unattended, guarded=admitted.guarded, config=json.dumps(now.config.to_dict()),
                       out_of_range="; ".join(shown) + (f"; and {more} more" if more else "") or None)
        guard.lesson_step.restore()
        return guard

    @classmethod
    def from_journal(cls, journal: Journal, turn_id: str, tools: Toolset | Iterable[ToolSpec], *,
                     unattended: bool | None = None, guarded: bool | None = None,
                     config: policy.PolicyConfig | None = None, **options: Any) -> Guard:
        """A guard carrying on turn ``turn_id`` of ``journal``: its steps as journaled, and the
        recovery state rebuilt by running the pure policy over them again
        (:func:`unstuck.guard.state.rebuild_state`), so retry counts and workaround budgets
        carry on where they were. The policy is the stricter of the caller's and the
        journal's: unattended or guarded when either says so, each budget the smaller
        (:meth:`unstuck.decide.policy.PolicyConfig.stricter`; the journaled one where the
        caller gives ``None``).

        Args:
            journal: the journal the turn was recorded in (the guard records into it).
            turn_id: the turn.
            tools: the tool set (the same names as when the turn was recorded).
            unattended: the caller's, or ``None``.
            guarded: the caller's, or ``None``.
            config: the caller's budgets, or ``None``.
            options: the other :class:`Guard` arguments (clock, events, lessons, ...).

        Raises:
            JournalError: for an unknown turn, or one whose journaled policy does not read back.
        """
        header = journal.turn(turn_id)
        try:
            journaled = policy.PolicyConfig.from_dict(json.loads(journal.config(turn_id) or "{}"))
        except ValueError as exc:
            raise JournalError(f"turn {turn_id}: its journaled policy configuration does not read back: {exc}"
                               ) from None
        steps = journal.steps(turn_id)
        guard = cls(tools, unattended=header.unattended or bool(unattended), task=header.task,
                    guarded=header.guarded or bool(guarded), turn_id=turn_id, journal=journal,
                    config=journaled if config is None else config.stricter(journaled), **options)
        new = guard._kept
        guard._carry_on(replace(new, steps=list(steps), saved_steps=len(steps), state=rebuild_state(
            steps, new.state, journal.decisions(turn_id), guard.tools)))
        return guard
