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

import contextlib
import json
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace

from unstuck import policy, prompts
from unstuck.classify import explain_result
from unstuck.clock import Clock, RealClock
from unstuck.diagnostics import STALL_AFTER_S, RunLengths, StallWatch, advance
from unstuck.escalation import Escalation, build_escalation
from unstuck.events import EventSink, Scalar, event
from unstuck.journal import Journal, JournalStep
from unstuck.lessons import Lesson, LessonStore
from unstuck.models import Message, Model, ModelError, ModelReply, Role, message_to_json
from unstuck.outcome import StepRecord, TurnResult, TurnStatus, Validation, Validator, Verdict
from unstuck.presence import Answer, Asker
from unstuck.prompts import CLOSING_CALL, GUIDANCE_PREFIX, KNOWN_BLOCKERS_HEADING, RETRIED_NOTE
from unstuck.remember import LessonHooks, LessonKeeper, known_blocker_note
from unstuck.retry import full_jitter
from unstuck.second_opinion import SecondOpinion
from unstuck.signals import load_signal_table
from unstuck.situations import Kind, Probe, Situation, validate_situation
from unstuck.tools import Effect, ToolCall, ToolResult, Toolset, ToolSpec, unique_call_ids

__all__ = ["DEFAULT_SYSTEM_PROMPT", "StepRecord", "TurnResult", "TurnStatus", "receipt_of", "run_turn"]

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent that completes the user's task with the tools given. When a tool "
    "result says the environment needs the user (signed out, not installed, no permission, "
    "quota spent), do not work around it: stop and say so."
)


def receipt_of(result: ToolResult) -> str:
    """What the journal keeps of a side-effecting call's return (JSON; content cut at 4,000
    characters)."""
    return json.dumps({"ok": result.ok, "content": result.content[:4000], "exit_code": result.exit_code,
                       "http_status": result.http_status, "injected": result.injected})


class _Turn(LessonHooks):
    """The mutable bookkeeping of one running turn (private to this module and
    :mod:`unstuck.resume`, which rebuilds one from a journal)."""

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
        self.journal: Journal | None = None
        self.validators: tuple[Validator, ...] = ()
        self.policy_inputs: list[tuple[bool, bool, tuple[str, ...], str]] = []  # per step, for the journal
        self.saved = (0, 0)  # steps and messages already in the journal
        self.last_ref = ""  # the effect_ref of the last side-effecting call
        self.jitter: random.Random | None = None  # full jitter of computed backoff, when asked for
        self.keeper: LessonKeeper | None = None
        self.cited: dict[str, Lesson] = {}  # subjects escalated on a lesson's word
        self.noted: dict[str, Lesson] = {}  # subjects whose lesson only added a note (no probe could tell)
        self.setup_checked: set[str] = set()  # subjects whose setup probe already ran this turn
        self.second_opinion: SecondOpinion | None = None  # the user's model, asked about unrecognised failures

    # -- recording ---------------------------------------------------------------------------

    def at(self) -> float:
        return self.clock.now() - self.started

    def emit(self, name: str, **fields: Scalar) -> None:
        if self.events is not None:
            self.events.emit(event(name, self.turn_id, self.at(), **fields))

    def finish(
        self, status: TurnStatus, answer: str, escalation: Escalation | None = None, error: str | None = None,
        held: tuple[str, ...] = (),
    ) -> TurnResult:
        validations: tuple[Validation, ...] = ()
        if status is TurnStatus.DONE and self.validators:
            validations = tuple(v.run() for v in self.validators)
            failed = [v for v in validations if v.verdict is not Verdict.PASSED]
            if failed:
                status = TurnStatus.FAILED
                error = "validation failed: " + "; ".join(f"{v.name}: {v.evidence or 'false'}" for v in failed)
        elif self.validators:  # a stop means "not required", never "passed"
            validations = tuple(Validation(v.name, Verdict.NOT_REQUIRED, f"the turn ended {status.value}")
                                for v in self.validators)
        for v in validations:
            self.emit("validation.checked", validator=v.name, verdict=v.verdict.value, evidence=v.evidence)
        elapsed = self.at()
        self.emit("turn.ended", status=status.value, calls=len(self.steps), elapsed_s=round(elapsed, 6), error=error)
        if self.journal is not None:
            self.save()
            for v in validations:
                self.journal.record_validation(self.turn_id, v.name, v.verdict.value, v.evidence)
            self.journal.end_turn(self.turn_id, status.value, answer=answer, error=error)
        at, calls = self.escalated_at if self.escalated_at is not None else (None, None)
        return TurnResult(
            self.turn_id, status, answer, escalation, tuple(self.steps), elapsed, error, self.guarded,
            tuple(self.messages), at, calls, tuple(self.state.open_blockers), tuple(sorted(self.state.skipped)),
            validations, held,
        )

    def save(self) -> None:
        """Checkpoint the steps and messages not yet in the journal (one synced transaction)."""
        if self.journal is None:
            return
        steps, messages = self.saved
        self.journal.checkpoint(
            self.turn_id, steps=[self.journal_step(i) for i in range(steps, len(self.steps))],
            messages=[message_to_json(m) for m in self.messages[messages:]], first_seq=messages, ref=self.last_ref,
        )
        self.saved = (len(self.steps), len(self.messages))

    def journal_step(self, index: int) -> JournalStep:
        s = self.steps[index]
        interactive, auto_retry, exempt, decision = self.policy_inputs[index]
        return JournalStep(
            s.index, s.call.id, s.call.tool, s.call.arguments_json, s.subject, interactive, auto_retry, s.dispatched,
            s.probe, s.retry, s.ok, s.situation, decision, exempt, s.injected, s.content[:4000], s.started_s,
            s.duration_s,
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
        found = explain_result(spec or call.tool, call.arguments, result, thorough=False)
        inferred = found.situation
        if inferred is not None and not found.recognised and self.second_opinion is not None:
            opinion = self.second_opinion.review(call.tool, result.content, inferred)
            self.emit("situation.second_opinion", tool=call.tool, kind=(
                opinion.situation.kind.value if opinion.situation is not None else None),
                cached=opinion.cached, problem=opinion.problem)
            inferred = opinion.situation or inferred
        if inferred is not None:
            self.emit("situation.inferred", tool=call.tool, kind=inferred.kind.value, subject=inferred.subject,
                      interactive=inferred.interactive, retryable=inferred.retryable)
        return inferred

    def prepare_intent(self, call: ToolCall, spec: ToolSpec | None, reuse: str | None) -> str | None:
        """Before a side-effecting call: its intent, synced to the journal (or the resumed one)."""
        if self.journal is None or spec is None or spec.effect is not Effect.WRITE:
            return None
        if reuse is not None:
            self.journal.resume_intent(reuse)
            ref = reuse
        else:
            if self.saved[0] < len(self.steps):
                self.save()  # probes and retries before it are on disk: step numbers and intents stay aligned
            reply = max((i for i, m in enumerate(self.messages) if m.role is Role.ASSISTANT), default=-1)
            ref = self.journal.prepare_intent(self.turn_id, len(self.steps), call.id, call.tool, call.arguments_json,
                                              reply_seq=reply)
        self.emit("intent.prepared", tool=call.tool, effect_ref=ref)
        return ref

    def commit_intent(self, ref: str, result: ToolResult) -> None:
        """After a side-effecting call returned: its receipt."""
        assert self.journal is not None
        self.journal.effect_returned(ref)
        self.journal.record_receipt(ref, receipt_of(result))
        self.last_ref = ref
        self.emit("intent.committed", tool=result.tool, effect_ref=ref, ok=result.ok)

    def call_tool(
        self, call: ToolCall, *, probe: bool = False, exempt: frozenset[str] = frozenset(), retry: bool = False,
        intent_ref: str | None = None, settled: ToolResult | None = None,
    ) -> tuple[ToolResult, policy.Assessment]:
        """Run one call through the policy and record it as a step. ``intent_ref`` resumes a
        prepared effect intent; ``settled`` is a result already known (a resumed call whose
        effect was recorded): it is not run again, only recorded."""
        spec = self.spec_for(call)
        subject = spec.subject_of(call.arguments) if spec is not None else call.tool
        started = self.at()
        decision: policy.Dispatch | policy.Refuse
        hand_off = spec.interactive_call(call.arguments) if spec is not None and not (probe or retry) else None
        interactive = spec is not None and (spec.interactive or hand_off is not None)
        if probe or retry:
            decision = policy.Dispatch(call)
        else:
            waits_for = None if hand_off is None else f"`{hand_off.command}` waits for a person: {hand_off.why}"
            decision, self.state = policy.before_dispatch(
                self.state, call, subject=subject, interactive=interactive, waits_for=waits_for
            )
        dispatched = settled is None and not (isinstance(decision, policy.Refuse) and self.guarded)
        if settled is not None:
            result = settled
        elif isinstance(decision, policy.Refuse) and self.guarded:
            self.emit("call.refused", tool=call.tool, subject=subject, reason=decision.reason)
            result = ToolResult(call.tool, False, decision.reason, executed=False, declared=decision.situation)
        else:
            self.emit("tool.called", tool=call.tool, subject=subject, probe=probe)
            ref = self.prepare_intent(call, spec, intent_ref)
            result = self.execute(call, spec)
            if ref is not None:
                self.commit_intent(ref, result)
            if result.injected is not None:
                self.emit("fault.injected", tool=call.tool, subject=subject, form=result.injected)
        situation = self.situation_of(call, spec, result)
        if dispatched:
            self.emit("tool.returned", tool=call.tool, subject=subject, ok=result.ok,
                      kind=situation.kind.value if situation is not None else None,
                      duration_s=round(self.at() - started, 6))
        assessment = policy.after_result(
            self.state, call, subject=subject, situation=situation, ok=result.ok,
            executed=result.executed, is_probe=probe, exempt=exempt, is_retry=retry,
            auto_retry=spec is not None and spec.effect is Effect.READ and not interactive,
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
        auto_retry = spec is not None and spec.effect is Effect.READ and not interactive
        self.policy_inputs.append((interactive, auto_retry, tuple(sorted(exempt)), type(assessment.decision).__name__))
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
        cited = self.cited.get(blocker.subject)
        if cited is not None:
            known = f"Known blocker: {known_blocker_note(cited)}; its probe says it still holds."
            escalation = replace(escalation, blocked=f"{escalation.blocked} {known}")
        self.emit("turn.escalated", subject=escalation.subject, kind=escalation.kind.value,
                  unblock=escalation.unblock, workaround_calls=blocker.workarounds, closing_error=error,
                  lesson=cited.id if cited is not None else None)
        self.remember(blocker)
        return escalation

    # -- the turn ------------------------------------------------------------------------------

    def run(self, *, max_steps: int, max_asks: int, pending: policy.OpenBlocker | None = None) -> TurnResult:
        """Ask the model, dispatch its calls, escalate when told; ``pending`` is a blocker a
        resumed turn's settled calls already escalated on."""
        specs: Sequence[ToolSpec] = tuple(self.tools.values())
        if pending is not None:
            escalation = self.escalation_for(pending)
            if self.state.unattended or self.asker is None or not self.ask_user(pending, escalation, max_asks):
                return self.finish(TurnStatus.BLOCKED, escalation.text, escalation)
        for _ in range(max_steps):
            try:
                reply: ModelReply = self.model.complete(tuple(self.messages), specs)
            except ModelError as exc:
                return self.finish(TurnStatus.FAILED, "", error=str(exc))
            except Exception as exc:  # a model adapter that raises anything else is still a failed turn
                return self.finish(TurnStatus.FAILED, "", error=f"model raised {type(exc).__name__}: {exc}")
            calls = unique_call_ids(reply.tool_calls)
            self.messages.append(Message(Role.ASSISTANT, reply.content, calls))
            self.save()
            if calls:
                blocker = self.dispatch_all(calls)
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

    def dispatch_all(
        self, calls: Sequence[ToolCall], overrides: Mapping[str, tuple[ToolResult | None, str | None]] | None = None,
    ) -> policy.OpenBlocker | None:
        """Run one reply's calls; the blocker to escalate on, if the policy said so.
        ``overrides`` (resume) maps a call id to a result already known (not run again) or
        to the effect intent it runs under."""
        fresh: frozenset[str] = frozenset()
        for position, call in enumerate(calls):
            settled, intent_ref = (overrides or {}).get(call.id, (None, None))
            known, note = self.check_lesson(call) if settled is None and intent_ref is None else (None, "")
            if known is not None:
                for skipped in calls[position:]:
                    self.messages.append(Message(
                        Role.TOOL, f"Not executed: {known.subject} is a known blocker on this machine, and its probe "
                        "says it still holds; the turn stopped to ask the user.", tool_call_id=skipped.id,
                        name=skipped.tool,
                    ))
                self.save()
                return known
            result, assessment = self.call_tool(call, exempt=fresh, settled=settled, intent_ref=intent_ref)
            self.settle_noted(call, result.ok and self.steps[-1].situation is None)
            waited, retried = 0.0, 0
            while self.guarded and isinstance(assessment.decision, policy.RetryAfter):
                wait = assessment.decision
                delay = wait.delay_s
                if self.jitter is not None and not wait.server_said:
                    delay = full_jitter(delay, self.jitter.random())
                self.emit("retry.scheduled", tool=call.tool, attempt=wait.attempt, delay_s=round(delay, 6))
                self.clock.sleep(delay)
                waited += delay
                self.save()  # the attempts so far are on disk: a resumed turn counts on from them
                result, assessment = self.call_tool(call, retry=True)
                retried += 1
            # Later calls of this reply were chosen before the model saw a *new* blocker's
            # guidance: they are not charged to it. A reopened blocker was seen before.
            fresh |= {key for key in assessment.opened if self.state.open_blockers[key].workarounds == 0}
            content = result.content
            decision = assessment.decision
            checked = self.check_setup(call, assessment)
            if checked is not None and isinstance(decision, policy.Continue):
                decision = policy.Continue(checked)
            if waited:
                content = f"{content}\n\n{RETRIED_NOTE.format(times=retried, seconds=f'{waited:g}')}"
            if self.guarded and isinstance(decision, policy.Continue) and decision.guidance:
                content = f"{content}\n\n{decision.guidance}"
            if note:
                content = f"{note}\n{content}"
            self.messages.append(Message(Role.TOOL, content, tool_call_id=call.id, name=call.tool))
            if self.guarded and isinstance(decision, policy.Escalate):
                for skipped in calls[position + 1 :]:
                    self.messages.append(Message(
                        Role.TOOL, "Not executed: the turn stopped to ask the user.",
                        tool_call_id=skipped.id, name=skipped.tool,
                    ))
                self.save()  # with the stopped calls' answers, in one commit: a resume never runs them
                return decision.blocker
            self.save()
        return None

    def check_setup(self, call: ToolCall, assessment: policy.Assessment) -> str | None:
        """An inferred auth, not_installed or permission blocker just opened on a program the
        tool reaches: run that program's read-only setup probe (``check_cli_setup``) once, so
        the blocker carries the tool's own declaration and exact unblock. Returns the
        recovery guidance for the blocker as it now stands, or ``None`` when no probe ran."""
        spec = self.spec_for(call)
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
            self.emit("probe.setup", tool=probe.tool, subject=subject)
            self.run_probe(probe)
            now = self.state.open_blockers.get(subject)
            if now is None:
                return None  # the setup check came back clean: the blocker closed
            return prompts.blocker_recovery(now.situation, now.remaining)
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

    def probe_allowed(self, probe: Probe) -> bool:
        """A probe is a cheap read-only call (DESIGN.md): one naming a missing, interactive or
        writing tool is never run, whoever declared it."""
        spec = self.tools.get(probe.tool)
        return spec is not None and not spec.interactive and spec.effect is Effect.READ

    def run_probe(self, probe: Probe) -> tuple[bool, str]:
        if not self.probe_allowed(probe):
            self.emit("probe.refused", tool=probe.tool, reason="missing, interactive or writing tool")
            return False, f"the probe {probe.tool} is not a read-only tool here, so it was not run"
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
                if self.journal is not None:
                    self.journal.record_decision(self.turn_id, len(self.steps) - 1, "skip", blocker.subject)
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
                if self.keeper is not None:  # the user resolved it, and the probe (if any) agrees
                    for lesson in self.keeper.on_subject(blocker.subject):
                        self.keeper.close(lesson, "the user resolved it")
                        self.emit("lesson.invalidated", lesson=lesson.id, subject=blocker.subject,
                                  reason="user resolved")
                if self.journal is not None:
                    self.journal.record_decision(self.turn_id, len(self.steps) - 1, "close", blocker.subject)
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
    journal: Journal | None = None,
    validators: Sequence[Validator] = (),
    stall_after_s: float | None = STALL_AFTER_S,
    jitter: random.Random | None = None,
    lessons: LessonStore | None = None,
    fingerprint: Callable[[str], str] | None = None,
    second_opinion: SecondOpinion | None = None,
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
        journal: where the turn is recorded durably (steps, effect intents before every
            ``effect="write"`` call and receipts after, checkpoints, validations, status),
            so :func:`unstuck.resume.resume_turn` can continue it after a crash.
        validators: postconditions checked when the model answers; the turn is ``done``
            only if all pass, else ``failed`` with their evidence.
        stall_after_s: seconds of silence after which ``events`` gets a ``diagnostic.stall``
            event (watched from a daemon thread on a real clock); ``None`` turns it off.
        lessons: remembered blockers (:mod:`unstuck.lessons`): shown at turn start, probed
            before the first call on their subject, and stored after the turn asked.
        fingerprint: the environment fingerprint of a subject, for lessons
            (:func:`unstuck.toolkit.cli_fingerprint` for CLIs); none by default.
        second_opinion: the user's own model, asked which kind a failure is when no signal
            recognises it (:class:`unstuck.second_opinion.SecondOpinion`); never asked about
            anything else, and never able to turn a failure into a success.
        jitter: a random source for full jitter of the computed backoff
            (:func:`unstuck.retry.full_jitter`); ``None`` (the default) waits the exact
            backoff. A server's Retry-After is honoured as given either way.

    Returns:
        The :class:`TurnResult`.

    Raises:
        ValueError: naming the tool, when a tool declares a malformed situation (a bug in that
            tool, never guessed around). Events recorded before it are kept.
        unstuck.signals.SignalTableError: when a signal file named by ``UNSTUCK_SIGNALS`` is
            malformed; raised before the turn starts, so no call runs.
    """
    if fingerprint is not None and not callable(fingerprint):
        raise TypeError(f"fingerprint must be a function of a subject returning a string, got {fingerprint!r}")
    toolset = tools if isinstance(tools, Toolset) else Toolset(tools)
    load_signal_table()  # a user's malformed signal file (UNSTUCK_SIGNALS) fails here, before any call runs
    state = policy.RecoveryState(unattended=unattended, config=config or policy.PolicyConfig())
    clock = clock or RealClock()
    watch = StallWatch(events, clock, stall_after_s) if events is not None and stall_after_s is not None else None
    turn = _Turn(
        task, model, toolset, state, guarded=guarded, clock=clock, asker=asker, events=watch or events,
        turn_id=turn_id or uuid.uuid4().hex[:12], system_prompt=system_prompt,
    )
    turn.jitter = jitter
    turn.second_opinion = second_opinion
    if lessons is not None:
        turn.keeper = LessonKeeper(lessons, fingerprint, on_error=lambda message: turn.emit("lesson.error",
                                                                                             error=message))
    stop = None
    if watch is not None and isinstance(clock, RealClock):
        stop = watch.watch(min(max(watch.after_s, 0.01) / 10, 30.0))
    try:
        return _start(turn, task, model, guarded, unattended, journal, validators, max_steps, max_asks)
    finally:
        if stop is not None:
            stop()


def _start(
    turn: _Turn, task: str, model: Model, guarded: bool, unattended: bool, journal: Journal | None,
    validators: Sequence[Validator], max_steps: int, max_asks: int,
) -> TurnResult:
    turn.validators = tuple(validators)
    if journal is not None:
        turn.journal = journal
        journal.begin_turn(turn.turn_id, task, unattended=unattended, guarded=guarded,
                           config_json=json.dumps(asdict(turn.state.config)))
    turn.emit("turn.started", task=task, model=getattr(model, "name", type(model).__name__),
              guarded=guarded, unattended=unattended)
    if turn.keeper is not None and guarded:
        known = turn.keeper.known_blockers(turn.tools)
        if known:
            section = "\n".join(f"- {known_blocker_note(lesson)}" for lesson in known)
            prompt = f"{turn.messages[0].content}\n\n{KNOWN_BLOCKERS_HEADING}\n{section}"
            turn.messages[0] = Message(Role.SYSTEM, prompt)
            for lesson in known:
                turn.emit("lesson.shown", lesson=lesson.id, subject=lesson.signature.subject)
    turn.save()  # the system prompt and the task: a turn that dies on its first model call resumes with them
    return _guarded_run(turn, max_steps=max_steps, max_asks=max_asks)


def _guarded_run(
    turn: _Turn, *, max_steps: int, max_asks: int, pending: policy.OpenBlocker | None = None,
    first: Callable[[], policy.OpenBlocker | None] | None = None,
) -> TurnResult:
    """Run the turn; an interrupt ends it ``interrupted``. An error from a tool's malformed
    declaration (or the journal) still propagates, loudly, after the turn is recorded as
    ``failed`` (the journal's status, the ``turn.ended`` event), so nothing is left running."""
    try:
        if first is not None:
            pending = first()
        return turn.run(max_steps=max_steps, max_asks=max_asks, pending=pending)
    except KeyboardInterrupt:
        return turn.finish(TurnStatus.INTERRUPTED, "", error="interrupted (KeyboardInterrupt)")
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        turn.emit("turn.ended", status=TurnStatus.FAILED.value, calls=len(turn.steps), elapsed_s=round(turn.at(), 6),
                  error=error)
        if turn.journal is not None:
            with contextlib.suppress(Exception):  # the original error matters more than a second one
                turn.journal.end_turn(turn.turn_id, TurnStatus.FAILED.value, error=error)
        raise

