"""The agent loop: model ↔ tools, with the stop-and-ask policy in between.

The loop is the only place where decisions meet I/O (DESIGN.md, "Layers"). For every tool
call the model asks for, it asks :func:`unstuck.policy.before_dispatch` whether to run it,
runs it (or hands back the refusal), validates the declared situation, infers one when none
was declared (:func:`unstuck.classify.classify_result`), asks
:func:`unstuck.policy.after_result` what happens next, and does exactly that: hand the
result to the model with guidance, or stop and escalate.

A guarded turn ends ``done`` (the model answered and no blocker is open), ``blocked`` (it
escalated; the escalation is the answer), or ``failed`` (the model failed, or the step
limit was reached). ``blocked`` is never reported as ``done``. An unguarded turn is the bare
loop: every call runs, no guidance, no escalation; situations are still recorded, so its
cost can be measured against a guarded one.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from unstuck import policy
from unstuck.classify import classify_result
from unstuck.clock import Clock, RealClock
from unstuck.diagnostics import RunLengths, advance
from unstuck.escalation import Escalation, build_escalation
from unstuck.events import EventSink, Scalar, event
from unstuck.models import Message, Model, ModelError, ModelReply, Role
from unstuck.presence import Answer, Asker
from unstuck.prompts import CLOSING_CALL, GUIDANCE_PREFIX, RETRIED_NOTE
from unstuck.situations import Kind, Probe, Situation, validate_situation
from unstuck.tools import Effect, ToolCall, ToolResult, Toolset, ToolSpec

__all__ = ["DEFAULT_SYSTEM_PROMPT", "StepRecord", "TurnResult", "TurnStatus", "run_turn"]

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent that completes the user's task with the tools given. When a tool "
    "result says the environment needs the user (signed out, not installed, no permission, "
    "quota spent), do not work around it: stop and say so."
)


class TurnStatus(enum.StrEnum):
    """How a turn ended (DESIGN.md vocabulary)."""

    DONE = "done"
    BLOCKED = "blocked"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One tool call of a turn, as it happened.

    Attributes:
        index: position among the turn's calls (0-based; probes included).
        call: the call.
        subject: what it affected.
        dispatched: it ran (``False``: refused before dispatch).
        probe: the loop ran it as a probe (never charged).
        ok: it did what was asked.
        situation: the declared or inferred situation, or ``None``.
        started_s: seconds from the turn's start to the call's start, on the turn's clock.
        duration_s: seconds the call took.
        charged: subjects whose workaround count this call incremented.
        opened: subjects on which this call's result opened a blocker.
        closed: subjects whose blocker this call's result closed.
        content: the result's text (without unstuck's guidance).
        retry: the loop ran this call again after a wait (the model did not ask for it).
        injected: the failure-bank form that replaced the tool's real return (fault
            injection), else ``None``: organic and injected failures stay apart.
    """

    index: int
    call: ToolCall
    subject: str
    dispatched: bool
    probe: bool
    ok: bool
    situation: Situation | None
    started_s: float
    duration_s: float
    charged: tuple[str, ...] = ()
    opened: tuple[str, ...] = ()
    closed: tuple[str, ...] = ()
    content: str = ""
    retry: bool = False
    injected: str | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of one turn.

    Attributes:
        turn_id: unique id of the turn.
        status: done, blocked, failed or interrupted.
        answer: the model's final text; for a blocked turn, the escalation's text.
        escalation: the escalation, when the turn escalated.
        steps: every tool call, in order.
        elapsed_s: seconds the turn took on its clock.
        error: why a failed turn failed.
        guarded: the policy was enforced.
        messages: the whole conversation.
        escalated_at_s: seconds from the turn's start to its first escalation (before any
            time spent waiting for the user's answer), or ``None``.
        calls_before_escalation: calls made before the first escalation.
        open_blockers: subjects still blocked when the turn ended (a done turn may have one
            the model routed around).
        skipped_subjects: subjects the user chose to skip.
    """

    turn_id: str
    status: TurnStatus
    answer: str
    escalation: Escalation | None
    steps: tuple[StepRecord, ...]
    elapsed_s: float
    error: str | None = None
    guarded: bool = True
    messages: tuple[Message, ...] = field(default=(), repr=False)
    escalated_at_s: float | None = None
    calls_before_escalation: int | None = None
    open_blockers: tuple[str, ...] = ()
    skipped_subjects: tuple[str, ...] = ()

    @property
    def tool_calls(self) -> int:
        """Calls the model made (dispatched or refused); the loop's probes and retries excluded."""
        return sum(1 for s in self.steps if not s.probe and not s.retry)

    @property
    def refused_calls(self) -> int:
        """Calls refused before dispatch."""
        return sum(1 for s in self.steps if not s.dispatched and not s.probe)

    def first_blocker_step(self) -> StepRecord | None:
        """The call whose result first opened the blocker the turn escalated on (or, without
        an escalation, the first blocker of the turn), if any.
        """
        subject = self.escalation.subject if self.escalation is not None else None
        return next((s for s in self.steps if s.opened and (subject is None or subject in s.opened)), None)

    def first_signal_step(self) -> StepRecord | None:
        """The first call whose result showed the problem the turn asked about: the same
        subject and kind as the escalation (for a transient kind, the first failure that was
        then waited on), or :meth:`first_blocker_step` without an escalation.
        """
        if self.escalation is None:
            return self.first_blocker_step()
        subject, kind = self.escalation.subject, self.escalation.kind
        for step in self.steps:
            if step.situation is not None and (step.situation.subject, step.situation.kind) == (subject, kind):
                return step
        return self.first_blocker_step()

    def steps_since_first_signal(self) -> tuple[StepRecord, ...]:
        """The calls after :meth:`first_signal_step`, up to the first escalation (or the end),
        probes excluded and the loop's retries included (``StepRecord.retry`` tells them apart).
        """
        first = self.first_signal_step()
        if first is None:
            return ()
        window = self.steps[: self.calls_before_escalation] if self.calls_before_escalation is not None else self.steps
        return tuple(s for s in window if s.index > first.index and not s.probe)

    @property
    def cost_line(self) -> str | None:
        """``"N steps · S s after SUBJECT was blocked, before asking"`` for a turn that asked:
        the calls and seconds between the first signal of what it asked about and the first
        escalation (waits for retries included).
        """
        first = self.first_signal_step()
        if self.escalated_at_s is None or self.calls_before_escalation is None or first is None:
            return None
        later = [s for s in self.steps_since_first_signal() if not s.retry]
        seconds = self.escalated_at_s - (first.started_s + first.duration_s)
        blocked = self.escalation.subject if self.escalation is not None else first.opened[0]
        return f"{len(later)} steps · {max(seconds, 0):.0f} s after {blocked} was blocked, before asking"


class _Turn:
    """The mutable bookkeeping of one running turn (private to :func:`run_turn`)."""

    def __init__(
        self, task: str, model: Model, tools: Toolset, state: policy.RecoveryState, *, guarded: bool,
        clock: Clock, asker: Asker | None, events: EventSink | None, turn_id: str, system_prompt: str,
    ) -> None:
        self.task, self.model, self.tools, self.state = task, model, tools, state
        self.guarded, self.clock, self.asker, self.events, self.turn_id = guarded, clock, asker, events, turn_id
        self.started = clock.now()
        self.messages: list[Message] = [Message(Role.SYSTEM, system_prompt), Message(Role.USER, task)]
        self.steps: list[StepRecord] = []
        self.escalated_at: tuple[float, int] | None = None
        self.runs = RunLengths()  # repetition and streaks of the model's calls (no probes, no retries)

    # -- recording ---------------------------------------------------------------------------

    def at(self) -> float:
        return self.clock.now() - self.started

    def emit(self, name: str, **fields: Scalar) -> None:
        if self.events is not None:
            self.events.emit(event(name, self.turn_id, self.at(), **fields))

    def finish(
        self, status: TurnStatus, answer: str, escalation: Escalation | None = None, error: str | None = None
    ) -> TurnResult:
        elapsed = self.at()
        self.emit("turn.ended", status=status.value, calls=len(self.steps), elapsed_s=round(elapsed, 6), error=error)
        at, calls = self.escalated_at if self.escalated_at is not None else (None, None)
        return TurnResult(
            self.turn_id, status, answer, escalation, tuple(self.steps), elapsed, error, self.guarded,
            tuple(self.messages), at, calls, tuple(self.state.open_blockers), tuple(sorted(self.state.skipped)),
        )

    # -- one call ------------------------------------------------------------------------------

    def spec_for(self, call: ToolCall) -> ToolSpec | None:
        return self.tools.get(call.tool)

    def execute(self, call: ToolCall, spec: ToolSpec | None) -> ToolResult:
        if spec is None:
            known = ", ".join(self.tools) or "none"
            return ToolResult(
                call.tool, False, f"No tool named {call.tool!r}. Available tools: {known}.",
                error_type="UnknownTool",
                declared=Situation(Kind.INVALID_ARGS, call.tool, detail=f"unknown tool {call.tool!r}"),
            )
        return spec.invoke(call.arguments)

    def situation_of(self, call: ToolCall, spec: ToolSpec | None, result: ToolResult) -> Situation | None:
        declared = validate_situation(call.tool, result.declared)
        if declared is not None:
            self.emit("situation.declared", tool=call.tool, kind=declared.kind.value, subject=declared.subject,
                      interactive=declared.interactive, retryable=declared.retryable, unblock=declared.unblock)
            return declared
        inferred = classify_result(spec or call.tool, call.arguments, result)
        if inferred is not None:
            self.emit("situation.inferred", tool=call.tool, kind=inferred.kind.value, subject=inferred.subject,
                      interactive=inferred.interactive, retryable=inferred.retryable)
        return inferred

    def call_tool(
        self, call: ToolCall, *, probe: bool = False, exempt: frozenset[str] = frozenset(), retry: bool = False
    ) -> tuple[ToolResult, policy.Assessment]:
        spec = self.spec_for(call)
        subject = spec.subject_of(call.arguments) if spec is not None else call.tool
        started = self.at()
        decision: policy.Dispatch | policy.Refuse
        if probe or retry:
            decision = policy.Dispatch(call)
        else:
            decision, self.state = policy.before_dispatch(
                self.state, call, subject=subject, interactive=spec is not None and spec.interactive
            )
        if isinstance(decision, policy.Refuse) and self.guarded:
            self.emit("call.refused", tool=call.tool, subject=subject, reason=decision.reason)
            result = ToolResult(call.tool, False, decision.reason, executed=False, declared=decision.situation)
        else:
            self.emit("tool.called", tool=call.tool, subject=subject, probe=probe)
            result = self.execute(call, spec)
            if result.injected is not None:
                self.emit("fault.injected", tool=call.tool, subject=subject, form=result.injected)
        situation = self.situation_of(call, spec, result)
        assessment = policy.after_result(
            self.state, call, subject=subject, situation=situation, ok=result.ok,
            executed=result.executed, is_probe=probe, exempt=exempt, is_retry=retry,
            auto_retry=spec is not None and spec.effect is Effect.READ and not spec.interactive,
        )
        self.state = assessment.state
        for key in assessment.opened:
            self.emit("blocker.opened", subject=key, kind=self.state.open_blockers[key].situation.kind.value,
                      budget=self.state.open_blockers[key].budget)
        for key in assessment.charged:
            blocker = self.state.open_blockers.get(key) or self.state.skipped[key]
            self.emit("budget.charged", subject=key, workarounds=blocker.workarounds, budget=blocker.budget)
        for key in assessment.closed:
            self.emit("blocker.closed", subject=key, reason="probe clean" if probe else "call succeeded")
        self._observe(call, probe=probe, retry=retry)
        self.steps.append(StepRecord(
            len(self.steps), call, subject, result.executed, probe, result.ok, situation, started,
            self.at() - started, assessment.charged, assessment.opened, assessment.closed, result.content, retry,
            result.injected,
        ))
        return result, assessment

    def _observe(self, call: ToolCall, *, probe: bool, retry: bool) -> None:
        """Diagnostics (no authority): record repetition and same-tool streaks as events."""
        if probe or retry:
            return
        self.runs = advance(self.runs, call)
        found = self.runs.pattern
        if found is not None:
            self.emit(f"diagnostic.{found.kind}", tool=found.tool, calls=found.count)

    # -- escalation ----------------------------------------------------------------------------

    def escalation_for(self, blocker: policy.OpenBlocker) -> Escalation:
        if self.escalated_at is None:
            self.escalated_at = (self.at(), len(self.steps))
        draft = build_escalation(blocker.situation, task=self.task)
        prompt = CLOSING_CALL.format(subject=draft.subject, kind=draft.kind.value, user_action=draft.user_action)
        next_step: str | None = None
        error: str | None = None
        try:
            reply = self.model.complete([*self.messages, Message(Role.USER, prompt)], ())
            next_step = reply.content.strip() or None
            if next_step is None:
                error = "the closing model call returned no text"
        except Exception as exc:  # any failure of the closing call is shown, never hidden
            error = f"{type(exc).__name__}: {exc}"
        escalation = build_escalation(
            blocker.situation, task=self.task, next_step=next_step, closing_error=error,
            workaround_calls=blocker.workarounds,
        )
        self.emit("turn.escalated", subject=escalation.subject, kind=escalation.kind.value,
                  unblock=escalation.unblock, workaround_calls=blocker.workarounds, closing_error=error)
        return escalation

    # -- the turn ------------------------------------------------------------------------------

    def run(self, *, max_steps: int, max_asks: int) -> TurnResult:
        specs: Sequence[ToolSpec] = tuple(self.tools.values())
        for _ in range(max_steps):
            try:
                reply: ModelReply = self.model.complete(tuple(self.messages), specs)
            except ModelError as exc:
                return self.finish(TurnStatus.FAILED, "", error=str(exc))
            except Exception as exc:  # a model adapter that raises anything else is still a failed turn
                return self.finish(TurnStatus.FAILED, "", error=f"model raised {type(exc).__name__}: {exc}")
            self.messages.append(Message(Role.ASSISTANT, reply.content, reply.tool_calls))
            if reply.tool_calls:
                blocker = self.dispatch_all(reply.tool_calls)
            else:
                blocker = self.blocker_left_at_answer()
                if blocker is None:
                    return self.finish(TurnStatus.DONE, reply.content)
            if blocker is None:
                continue
            escalation = self.escalation_for(blocker)
            if self.state.unattended or self.asker is None or not self.ask_user(blocker, escalation, max_asks):
                return self.finish(TurnStatus.BLOCKED, escalation.text, escalation)
        return self.finish(TurnStatus.FAILED, "", error=f"step limit reached ({max_steps} model replies)")

    def dispatch_all(self, calls: Sequence[ToolCall]) -> policy.OpenBlocker | None:
        """Run one reply's calls; the blocker to escalate on, if the policy said so."""
        fresh: frozenset[str] = frozenset()
        for position, call in enumerate(calls):
            result, assessment = self.call_tool(call, exempt=fresh)
            waited = 0.0
            while self.guarded and isinstance(assessment.decision, policy.RetryAfter):
                wait = assessment.decision
                self.emit("retry.scheduled", tool=call.tool, attempt=wait.attempt, delay_s=wait.delay_s)
                self.clock.sleep(wait.delay_s)
                waited += wait.delay_s
                result, assessment = self.call_tool(call, retry=True)
            # Later calls of this reply were chosen before the model saw a *new* blocker's
            # guidance: they are not charged to it. A reopened blocker was seen before.
            fresh |= {key for key in assessment.opened if self.state.open_blockers[key].workarounds == 0}
            content = result.content
            decision = assessment.decision
            if waited:
                retried = sum(1 for s in self.steps if s.retry and s.call == call)
                content = f"{content}\n\n{RETRIED_NOTE.format(times=retried, seconds=f'{waited:g}')}"
            if self.guarded and isinstance(decision, policy.Continue) and decision.guidance:
                content = f"{content}\n\n{decision.guidance}"
            self.messages.append(Message(Role.TOOL, content, tool_call_id=call.id, name=call.tool))
            if self.guarded and isinstance(decision, policy.Escalate):
                for skipped in calls[position + 1 :]:
                    self.messages.append(Message(
                        Role.TOOL, "Not executed: the turn stopped to ask the user.",
                        tool_call_id=skipped.id, name=skipped.tool,
                    ))
                return decision.blocker
        return None

    def blocker_left_at_answer(self) -> policy.OpenBlocker | None:
        """The model answered. A blocker still open means the turn is blocked, unless a call
        succeeded after it opened: then the model took the first legal move (a different,
        safe approach) and its answer stands; the blocker is reported in ``open_blockers``.
        """
        if not self.guarded:
            return None
        for blocker in self.state.open_blockers.values():
            opened_at = max((s.index for s in self.steps if blocker.subject in s.opened), default=-1)
            routed_around = any(s.ok and not s.probe for s in self.steps if s.index > opened_at)
            if not routed_around:
                return blocker
        return None

    def probe_for(self, blocker: policy.OpenBlocker) -> Probe | None:
        if blocker.situation.probe is not None:
            return blocker.situation.probe
        spec = self.tools.get(blocker.subject)
        return spec.probe if spec is not None else None

    def run_probe(self, probe: Probe) -> tuple[bool, str]:
        call = ToolCall(f"probe_{len(self.steps)}", probe.tool, probe.arguments_json)
        result, _assessment = self.call_tool(call, probe=True)
        situation = self.steps[-1].situation
        clean = result.ok and situation is None
        self.emit("probe.run", tool=probe.tool, clean=clean)
        return clean, (situation.detail if situation is not None else result.content)

    def ask_user(self, blocker: policy.OpenBlocker, escalation: Escalation, max_asks: int) -> bool:
        """Attended: put the question; True when the turn may continue."""
        assert self.asker is not None
        note: str | None = None
        for _ in range(max_asks):
            answer = self.asker.ask(escalation, note=note)
            self.emit("user.answered", subject=blocker.subject, answer=answer.name.lower())
            if answer is Answer.STOP:
                return False
            if answer is Answer.SKIP:
                self.state = policy.skip_subject(self.state, blocker.subject)
                self.emit("blocker.closed", subject=blocker.subject, reason="user skipped")
                self.messages.append(Message(Role.USER, (
                    f"{GUIDANCE_PREFIX} The user chose to skip {blocker.subject}. Calls on it will be "
                    "refused. Finish what you can without it, then report what was left undone."
                )))
                return True
            probe = self.probe_for(blocker)
            if probe is None:
                clean, evidence = True, "no probe; the user's answer closes it"
            else:
                clean, evidence = self.run_probe(probe)
            if clean:
                self.state = policy.close_blocker(self.state, blocker.subject)
                self.emit("blocker.closed", subject=blocker.subject, reason="user answered")
                self.messages.append(Message(Role.USER, (
                    f"{GUIDANCE_PREFIX} The user has resolved the block on {blocker.subject} "
                    f"({evidence}). Continue the task."
                )))
                return True
            note = f"{blocker.subject} is still blocked: {evidence}"
        return False


def run_turn(
    task: str,
    *,
    model: Model,
    tools: Toolset | Iterable[ToolSpec],
    unattended: bool,
    guarded: bool = True,
    config: policy.PolicyConfig | None = None,
    clock: Clock | None = None,
    asker: Asker | None = None,
    events: EventSink | None = None,
    max_steps: int = 60,
    max_asks: int = 3,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    turn_id: str | None = None,
) -> TurnResult:
    """Run one agent turn on ``task``.

    Args:
        task: the user's request.
        model: the model that chooses tool calls.
        tools: the tools it may call.
        unattended: nobody can answer now; required, never guessed. Interactive tools are
            refused and an escalation ends the turn. When false and ``asker`` is given, an
            escalation becomes a question ("I've done it" / "Skip it" / "Stop").
        guarded: enforce the policy (``False`` runs the bare loop, for comparison).
        config: workaround budgets (:class:`unstuck.policy.PolicyConfig` defaults).
        clock: time source; :class:`unstuck.clock.RealClock` by default.
        asker: who answers an escalation in an attended run.
        events: where decisions are recorded.
        max_steps: model replies allowed before the turn fails (a safety cap, default 60).
        max_asks: times the same blocker is put to the user while its probe stays dirty.
        system_prompt: the system message.
        turn_id: an id for the turn; a random one by default.

    Returns:
        The :class:`TurnResult`.

    Raises:
        ValueError: naming the tool, when a tool declares a malformed situation (a bug in that
            tool, never guessed around). Events recorded before it are kept.
    """
    toolset = tools if isinstance(tools, Toolset) else Toolset(tools)
    state = policy.RecoveryState(unattended=unattended, config=config or policy.PolicyConfig())
    turn = _Turn(
        task, model, toolset, state, guarded=guarded, clock=clock or RealClock(), asker=asker, events=events,
        turn_id=turn_id or uuid.uuid4().hex[:12], system_prompt=system_prompt,
    )
    turn.emit("turn.started", task=task, model=getattr(model, "name", type(model).__name__),
              guarded=guarded, unattended=unattended)
    try:
        return turn.run(max_steps=max_steps, max_asks=max_asks)
    except KeyboardInterrupt:
        return turn.finish(TurnStatus.INTERRUPTED, "", error="interrupted (KeyboardInterrupt)")

