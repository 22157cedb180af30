"""The agent loop: model ↔ tools, every call through the :class:`~unstuck.guard.guard.Guard`.

The loop owns the conversation; the guard owns each call (DESIGN.md, "Layers"). Per model
reply, the loop declares the reply's calls to the guard, runs each through
:meth:`Guard.call <unstuck.guard.guard.Guard.call>` (refusal, the tool, retries, the decision),
hands the model what the guard says, and stops when the guard escalates. When the model
answers with a blocker still open, :meth:`Guard.check_answer <unstuck.guard.guard.Guard.check_answer>`
asks it, with tools withheld, whether it finished without the blocked subject.

A guarded turn ends ``done`` (the model answered and no blocker stands in its way),
``blocked`` (it escalated; the escalation is the answer), ``failed`` (the model failed, a
validator failed, or the step limit was reached) or ``interrupted``. ``blocked`` is never
reported as ``done``. An unguarded turn is the bare loop: every call runs, no guidance, no
escalation; situations are still recorded, so its cost can be measured against a guarded one.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from unstuck.core.clock import Clock, RealClock
from unstuck.core.tools import ToolCall, unique_call_ids
from unstuck.decide import policy
from unstuck.decide.escalation import Answer, Escalation
from unstuck.decide.outcome import StepRecord, TurnResult, TurnStatus, Validator
from unstuck.decide.prompts import CLOSING_CALL
from unstuck.guard.guard import Action, Decision, Guard, receipt_of
from unstuck.loop.presence import Asker
from unstuck.recognise.signals import load_signal_table
from unstuck.store.diagnostics import STALL_AFTER_S, StallWatch
from unstuck.store.events import EventName, EventSink
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore
from unstuck.store.second_opinion import SecondOpinion
from unstuck.toolkit.models import Message, Model, ModelError, ModelReply, Role, message_to_json
from unstuck.toolkit.specs import Toolset, ToolSpec

__all__ = [
    "DEFAULT_SYSTEM_PROMPT", "Conversation", "StepRecord", "TurnResult", "TurnStatus", "receipt_of", "run_turn",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent that completes the user's task with the tools given. When a tool "
    "result says the environment needs the user (signed out, not installed, no permission, "
    "quota spent), do not work around it: stop and say so."
)
#: What a call of a reply gets when an earlier call of the same reply stopped the turn (as
#: unstuck's note: :meth:`unstuck.Guard.note`).
NOT_EXECUTED = "Not executed: the turn stopped to ask the user."


class Conversation:
    """A turn's conversation around its :class:`~unstuck.guard.guard.Guard`: the messages, the
    model, who answers, and the journal checkpoints of both (public so that
    :func:`unstuck.loop.resume.resume_turn` can rebuild one from a journal).

    Args:
        guard: the turn's guard.
        model: the model that chooses tool calls.
        messages: the conversation so far (system prompt and task at least).
        asker: who answers an escalation in an attended run, if anyone.
        saved_messages: messages already in the journal.
    """

    def __init__(self, guard: Guard, model: Model, messages: Sequence[Message], *, asker: Asker | None = None,
                 saved_messages: int = 0) -> None:
        self.guard, self.model, self.asker = guard, model, asker
        self.messages: list[Message] = list(messages)
        self.saved_messages = saved_messages
        guard.closer = self.closing_sentence

    def save(self) -> None:
        """Checkpoint the guard's new steps and the new messages (one transaction, riding on
        the journal's next synced commit)."""
        if self.guard.journal is None:
            return
        new = [message_to_json(_stored(m)) for m in self.messages[self.saved_messages:]]
        self.guard.checkpoint(new, self.saved_messages)
        self.saved_messages = len(self.messages)

    def closing_sentence(self, draft: Escalation) -> str:
        """Part 3 of the escalation: one model call with tools withheld."""
        prompt = CLOSING_CALL.format(subject=draft.subject, kind=draft.kind.value, user_action=draft.user_action)
        return self.model.complete([*self.messages, Message(Role.USER, prompt)], ()).content

    def confirm(self, question: str) -> str:
        """The route-around check (:meth:`unstuck.guard.guard.Guard.check_answer`): the model's
        answer to ``question``, tools withheld."""
        return self.model.complete([*self.messages, Message(Role.USER, question)], ()).content

    def finish(self, status: TurnStatus, answer: str, escalation: Escalation | None = None,
               error: str | None = None, held: tuple[str, ...] = ()) -> TurnResult:
        """End the turn (validators, journal, ``turn.ended``) and build its result."""
        guard = self.guard
        new = ([message_to_json(_stored(m)) for m in self.messages[self.saved_messages:]]
               if guard.journal is not None else [])
        status, validations, error = guard.end(status, answer=answer, error=error, messages=new,
                                               first_seq=self.saved_messages)
        self.saved_messages = len(self.messages)
        at, calls = guard.escalated_at if guard.escalated_at is not None else (None, None)
        return TurnResult(
            guard.turn_id, status, answer, escalation, tuple(guard.steps), guard.at(), error, guard.guarded,
            tuple(self.messages), at, calls, tuple(guard.state.open_blockers), tuple(sorted(guard.state.skipped)),
            validations, held,
        )

    def dispatch(self, calls: Sequence[ToolCall], settle: Callable[[ToolCall], Decision | None] | None = None) -> bool:
        """Run one reply's calls through the guard and append their results; ``True`` when
        the turn escalated. ``settle`` (resume) may decide a call itself (a recorded result,
        a held intent); ``None`` from it runs the call as usual."""
        for position, call in enumerate(calls):
            decision = settle(call) if settle is not None else None
            if decision is None:
                decision = self.guard.call(call)
            self.messages.append(Message(Role.TOOL, decision.content, tool_call_id=call.id, name=call.tool))
            if decision.stop:
                for skipped in calls[position + 1:]:
                    self.messages.append(Message(Role.TOOL, self.guard.note(NOT_EXECUTED), tool_call_id=skipped.id,
                                                 name=skipped.tool))
                self.save()  # with the stopped calls' answers, in one commit: a resume never runs them
                return True
            self.save()
        return False

    def ask(self, max_asks: int) -> bool:
        """The turn escalated: ask the user when someone can answer; ``True`` when the turn
        may go on."""
        guard = self.guard
        if guard.state.unattended or self.asker is None or guard.escalation is None:
            return False
        note: str | None = None
        for _ in range(max_asks):
            assert guard.escalation is not None
            answer = self.asker.ask(guard.escalation, note=note)
            decision = guard.answer(answer)
            if answer is Answer.STOP:
                return False
            if decision.action is Action.CONTINUE:
                self.messages.append(Message(Role.USER, decision.content))
                return True
            note = decision.content
        return False

    def run(self, *, max_steps: int, max_asks: int) -> TurnResult:
        """Ask the model, dispatch its calls, escalate when the guard says so."""
        guard = self.guard
        specs: Sequence[ToolSpec] = tuple(guard.tools.values())
        if guard.escalation is not None and not self.ask(max_asks):
            return self.finish(TurnStatus.BLOCKED, guard.escalation.text, guard.escalation)
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
                guard.reply(calls, seq=len(self.messages) - 1)
                escalated = self.dispatch(calls)
            else:
                checked = guard.check_answer(self.confirm if guard.guarded else None)
                if checked.action is not Action.ESCALATE:
                    return self.finish(TurnStatus.DONE, reply.content)
                escalated = True
            if not escalated:
                continue
            assert guard.escalation is not None
            escalation = guard.escalation
            if not self.ask(max_asks):
                return self.finish(TurnStatus.BLOCKED, escalation.text, escalation)
        return self.finish(TurnStatus.FAILED, "", error=f"step limit reached ({max_steps} model replies)")

    def run_safely(self, *, max_steps: int, max_asks: int, first: Callable[[], bool] | None = None) -> TurnResult:
        """:meth:`run`; an interrupt ends the turn ``interrupted``. An error from a tool's
        malformed declaration (or the journal) still propagates, loudly, after the turn is
        recorded as ``failed`` (the journal's status, the ``turn.ended`` event), so nothing
        is left running. ``first`` runs before the loop (resume: the reply left unanswered)."""
        guard = self.guard
        try:
            if first is not None and first() and guard.escalation is not None and not self.ask(max_asks):
                return self.finish(TurnStatus.BLOCKED, guard.escalation.text, guard.escalation)
            return self.run(max_steps=max_steps, max_asks=max_asks)
        except KeyboardInterrupt:
            return self.finish(TurnStatus.INTERRUPTED, "", error="interrupted (KeyboardInterrupt)")
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            guard.emit(EventName.TURN_ENDED, status=TurnStatus.FAILED.value, calls=len(guard.steps),
                       elapsed_s=round(guard.at(), 6), error=error)
            if guard.journal is not None:
                with contextlib.suppress(Exception):  # the original error matters more than a second one
                    guard.journal.end_turn(guard.turn_id, TurnStatus.FAILED, error=error)
            raise


#: Characters of one message's text the journal keeps (head and tail, half each); the rest is
#: named by its length and SHA-256 digest, so a 100 MB tool output costs the journal 256 k.
STORED_TEXT_CAP = 256_000


def _stored(message: Message) -> Message:
    """A message as the journal keeps it: bounded (:data:`STORED_TEXT_CAP`; the journal's
    store boundary then redacts it, its tool calls' arguments too, so a resumed model sees the
    bounded, redacted text)."""
    text = message.content
    if len(text) > STORED_TEXT_CAP:
        half = STORED_TEXT_CAP // 2
        dropped = text[half:-half]
        digest = hashlib.sha256(dropped.encode("utf-8", "surrogatepass")).hexdigest()
        text = (f"{text[:half]}\n[… {len(dropped)} characters not journaled, sha256 {digest} …]\n"
                f"{text[-half:]}")
    return message if text == message.content else replace(message, content=text)


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
        config: workaround budgets (:class:`unstuck.decide.policy.PolicyConfig` defaults).
        clock: time source; :class:`unstuck.core.clock.RealClock` by default.
        asker: who answers an escalation in an attended run.
        events: where decisions are recorded.
        max_steps: model replies allowed before the turn fails (a safety cap, default 60).
        max_asks: times the same blocker is put to the user while its probe stays dirty.
        system_prompt: the system message.
        turn_id: an id for the turn; a random one by default.
        journal: where the turn is recorded durably (steps, effect intents before every
            ``effect="write"`` call and receipts after, checkpoints, validations, status),
            so :func:`unstuck.loop.resume.resume_turn` can continue it after a crash.
        validators: postconditions checked when the model answers; the turn is ``done``
            only if all pass, else ``failed`` with their evidence. A turn with validators
            answering while a blocker is open is judged by them alone.
        stall_after_s: seconds of silence after which ``events`` gets a ``diagnostic.stall``
            event (watched from a daemon thread on a real clock); ``None`` turns it off.
        lessons: remembered blockers (:mod:`unstuck.store.lessons`): shown at turn start, probed
            before the first call on their subject, and stored after the turn asked.
        fingerprint: the environment fingerprint of a subject, for lessons
            (:func:`unstuck.toolkit.workspace.cli_fingerprint` for CLIs); none by default.
        second_opinion: the user's own model, asked which kind a failure is when no signal
            recognises it (:class:`unstuck.store.second_opinion.SecondOpinion`); never asked about
            anything else, and never able to turn a failure into a success.
        jitter: a random source for full jitter of the computed backoff
            (:func:`unstuck.decide.retry.full_jitter`); ``None`` (the default) waits the exact
            backoff. A server's Retry-After is honoured as given either way.

    Returns:
        The :class:`TurnResult`.

    Raises:
        TypeError: when ``fingerprint`` is not callable.
        ValueError: naming the tool, when a tool declares a malformed situation (a bug in that
            tool, never guessed around). Events recorded before it are kept.
        unstuck.recognise.signals.SignalTableError: when a signal file named by ``UNSTUCK_SIGNALS`` is
            malformed; raised before the turn starts, so no call runs.
    """
    load_signal_table()  # a user's malformed signal file (UNSTUCK_SIGNALS) fails here, before any call runs
    clock = clock or RealClock()
    watch = StallWatch(events, clock, stall_after_s) if events is not None and stall_after_s is not None else None
    guard = Guard(
        tools, unattended=unattended, task=task, guarded=guarded, config=config, clock=clock, events=watch or events,
        turn_id=turn_id, journal=journal, lessons=lessons, fingerprint=fingerprint, second_opinion=second_opinion,
        jitter=jitter, validators=validators,
    )
    guard.start(model=getattr(model, "name", type(model).__name__))
    known = guard.known_blockers_note()
    prompt = system_prompt if known is None else f"{system_prompt}\n\n{known}"
    conversation = Conversation(guard, model, [Message(Role.SYSTEM, prompt), Message(Role.USER, task)], asker=asker)
    conversation.save()  # the system prompt and the task: a turn that dies on its first model call resumes with them
    stop = None
    if watch is not None and isinstance(clock, RealClock):
        stop = watch.watch(min(max(watch.after_s, 0.01) / 10, 30.0))
    try:
        return conversation.run_safely(max_steps=max_steps, max_asks=max_asks)
    finally:
        if stop is not None:
            stop()

