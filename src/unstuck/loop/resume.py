"""Resume a journaled turn after a crash, repeating no side effect silently.

:func:`resume_turn` reads the turn back from its :class:`~unstuck.store.journal.Journal`: the
conversation as last checkpointed, the steps (the recovery state is rebuilt by running the
pure policy over them again, so retry counts and workaround budgets carry on where they
were), and the effect intents. The calls of the last model reply that have no result yet are
then settled in order (seed 002, "effect journal"; DESIGN.md, "effect intent"):

* a call whose intent has a receipt (the crash came after it): its recorded result is handed
  to the model; it is not run again;
* a call whose intent has no receipt: its tool's *resolver* is asked whether the effect
  happened. ``committed`` → a receipt is recorded and the call is not repeated; ``absent`` →
  the same intent is executed now, but only when the process that ran the call is known not
  to be running it any more (:func:`unstuck.store.journal.runner_gone`: this resumer holds the
  lease, so that process is fenced, *and* it is dead on this machine: its pid gone or reused;
  or it is this very process). A process still alive here (stopped, cut off: woken, it would
  finish its call) or one on another machine (whose pids mean nothing here) may still make
  the effect, so "absent" then holds the intent like ``unknown``; ``unknown``, a resolver
  that raises, or no resolver → the turn is *held*: it ends ``interrupted`` with the held
  intents listed, and no later effect runs;
* a call with no intent (a read, or a write the crash came before): it runs as usual.

A call whose arguments held a secret is journaled with ``***`` in its place (the journal never
stores a secret, :mod:`unstuck.store.journal`), so it cannot be run again as the model asked: where it
would run (no intent, or its effect did not happen), it is not run, and the model is told so
and may ask for it again.

A person can settle held intents instead of a resolver (``unstuck journal resume TURN
--committed REF --absent REF``); a resume then follows their word.

A write the model is told was "not repeated" (a receipt it never saw, a resolver's or a
person's ``committed``) is never run again in the turn: when the model asks for the
identical call (same tool, same canonical arguments: :func:`unstuck.decide.policy.call_key`), the
guard refuses it (:meth:`unstuck.guard.guard.Guard.hold_writes`) instead of making the effect twice.

Then the loop carries on from there. Peers re-run a step whose outcome is unknown
(at-least-once); unstuck holds it for a person instead.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from unstuck.core.clock import Clock
from unstuck.core.redact import MASK
from unstuck.core.tools import ToolCall, ToolResult
from unstuck.decide import policy
from unstuck.decide.escalation import EscalationReason
from unstuck.decide.outcome import TurnResult, TurnStatus, Validator
from unstuck.decide.prompts import GUIDANCE_PREFIX
from unstuck.guard.guard import Decision, Guard
from unstuck.guard.state import rebuild_state
from unstuck.loop.presence import Asker
from unstuck.loop.turn import DEFAULT_SYSTEM_PROMPT, Conversation
from unstuck.store.events import EventName, EventSink
from unstuck.store.journal import (
    IntentState,
    Journal,
    JournalDecision,
    JournalIntent,
    SettledBy,
    runner_gone,
)
from unstuck.store.lessons import LessonStore
from unstuck.toolkit.models import Message, Model, Role, message_from_json
from unstuck.toolkit.specs import Toolset, ToolSpec

__all__ = ["Resolution", "Resolver", "rebuild_state", "resume_turn"]


class Resolution(enum.StrEnum):
    """A resolver's answer about one effect intent after a crash."""

    COMMITTED = "committed"  # the effect happened: record it, never repeat it
    ABSENT = "absent"  # it did not happen: run the same intent now
    UNKNOWN = "unknown"  # nobody can tell: hold the turn for a person


#: Asked with an intent's arguments whether its effect happened (a read of the world, e.g. is
#: order 42 in the ledger?). Keyed by tool name in :func:`resume_turn`.
Resolver = Callable[[Mapping[str, Any]], Resolution]

def _unanswered(messages: Sequence[Message]) -> tuple[int, list[ToolCall]]:
    """The last model reply's position and its calls that have no result message yet (a
    call id repeated in the reply is answered in order)."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role is Role.ASSISTANT), None)
    if last is None:
        return -1, []
    answered = [m.tool_call_id for m in messages[last + 1:] if m.role is Role.TOOL]
    waiting: list[ToolCall] = []
    for call in messages[last].tool_calls:
        if call.id in answered:
            answered.remove(call.id)
        else:
            waiting.append(call)
    return last, waiting


def _resolve(intent: JournalIntent, resolvers: Mapping[str, Resolver]) -> tuple[Resolution, str]:
    if intent.settler is SettledBy.USER_ABSENT:
        return Resolution.ABSENT, "a person said it did not happen"
    resolver = resolvers.get(intent.tool)
    if resolver is None:
        return Resolution.UNKNOWN, f"no resolver for {intent.tool}"
    try:
        answer = resolver(json.loads(intent.arguments_json))
    except Exception as exc:  # an unreadable world is an unknown outcome: hold, never guess
        return Resolution.UNKNOWN, f"the resolver raised {type(exc).__name__}: {exc}"
    if not isinstance(answer, Resolution):
        return Resolution.UNKNOWN, f"the resolver answered {answer!r}, not a Resolution"
    return answer, f"resolver: {answer.value}"


def resume_turn(
    journal: Journal,
    turn_id: str,
    *,
    model: Model,
    tools: Toolset | Iterable[ToolSpec],
    resolvers: Mapping[str, Resolver] | None = None,
    clock: Clock | None = None,
    asker: Asker | None = None,
    events: EventSink | None = None,
    config: policy.PolicyConfig | None = None,
    unattended: bool | None = None,
    guarded: bool | None = None,
    validators: Sequence[Validator] = (),
    max_steps: int = 60,
    max_asks: int = 3,
    force: bool = False,
    lessons: LessonStore | None = None,
    fingerprint: Callable[[str], str] | None = None,
) -> TurnResult:
    """Continue turn ``turn_id`` from its journal (see the module doc).

    Args:
        journal: the journal the turn was recorded in.
        turn_id: the turn to continue (``running`` when its process died, or ``interrupted``).
        model: the model, as for :func:`unstuck.loop.turn.run_turn`.
        tools: the tools, as for ``run_turn`` (the same names as when the turn was recorded).
        clock: the clock, as for ``run_turn``.
        asker: who answers an escalation, as for ``run_turn``.
        events: where events go, as for ``run_turn``.
        validators: what checks the answer, as for ``run_turn``.
        max_steps: the turn's step limit, as for ``run_turn``.
        max_asks: the questions the turn may ask, as for ``run_turn``.
        resolvers: by tool name, who says whether an intent without a receipt took effect.
        config: the caller's budgets: the turn runs with the stricter of these and the turn's
            own, as journaled (:meth:`unstuck.decide.policy.PolicyConfig.stricter`); the journaled
            ones when ``None``.
        unattended: the caller's: the turn is unattended when the caller or the journal says
            so (a journal cannot make a turn attended that its caller runs unattended); the
            journaled value when ``None``.
        guarded: the caller's, in the same way: guarded when either says so.
        force: take the turn over from an owner that cannot be checked from here (another
            machine or pid namespace); only once a person knows it is gone.
        lessons: the lesson store, as for :func:`unstuck.loop.turn.run_turn`: the resumed turn
            checks and stores lessons too.
        fingerprint: the subjects' fingerprints, as for ``run_turn``.

    Returns:
        The turn's result: ``interrupted`` with ``held_intents`` when an intent was held.

    Raises:
        JournalError: for an unknown turn, one that already ended (done, blocked, failed),
            one whose process still runs, or one another process is resuming; for a turn
            with a row holding a value outside its vocabulary (an unknown status, decision,
            intent state, ``settled_by`` or verdict: the journal, table and row named), checked
            before the turn is claimed, so the journal is left exactly as it was.
    """
    journal.check_turn(turn_id)  # a row that does not read back: refused before anything is written
    journal.claim(turn_id, force=force)  # one owner at a time: a live turn, or a second resumer, is refused
    guard = Guard.from_journal(journal, turn_id, tools, unattended=unattended, guarded=guarded, config=config,
                               clock=clock, events=events, lessons=lessons, fingerprint=fingerprint,
                               validators=validators)
    saved = journal.messages(turn_id)
    messages = [message_from_json(m) for m in saved] or [
        Message(Role.SYSTEM, DEFAULT_SYSTEM_PROMPT), Message(Role.USER, guard.task)]
    conversation = Conversation(guard, model, messages, asker=asker, saved_messages=len(saved))
    guard.start(resumed=True, steps=len(guard.steps), messages=len(messages))
    reply, calls = _unanswered(messages)
    # intents of this reply only: a call id may recur in another reply
    intents = {i.call_id: i for i in journal.intents(turn_id) if i.reply_seq in (reply, -1)}
    overrides, held = _settle(guard, calls, intents, resolvers or {})
    # what the model is told was made (a receipt): never again; a call not run (a secret lost) may be asked again
    reported = {intents[cid].effect_ref for cid, (result, _, _) in overrides.items()
                if result is not None and cid in intents and intents[cid].state is IntentState.COMMITTED}
    guard.hold_writes(_made_already(journal.intents(turn_id), reported | {ref for ref, _ in held}))
    if held:
        journal.hold([ref for ref, _ in held], "; ".join(reason for _, reason in held))
        for ref, reason in held:
            guard.emit(EventName.INTENT_HELD, effect_ref=ref, reason=reason)
        listed = "; ".join(f"{ref} ({reason})" for ref, reason in held)
        return conversation.finish(TurnStatus.INTERRUPTED, "", error=f"held effect intents: {listed}",
                                   held=tuple(ref for ref, _ in held))
    if calls:
        guard.reply(calls, seq=reply)

        def settle(call: ToolCall) -> Decision | None:
            result, ref, note = overrides.get(call.id, (None, None, ""))
            if result is None and ref is None:
                return None
            return guard.call(call, settled=result, intent_ref=ref, note=note)

        return conversation.run_safely(max_steps=max_steps, max_asks=max_asks,
                                       first=lambda: conversation.dispatch(calls, settle))
    # With nothing left to settle, a blocker whose budget was already spent is asked about at once.
    known = [subject for _, action, subject in journal.decisions(turn_id) if action is JournalDecision.KNOWN]
    spent = next((b for b in guard.state.open_blockers.values() if b.exhausted or b.subject in known), None)
    if spent is not None:
        guard.escalate_open_blocker(EscalationReason.BLOCKED, subject=spent.subject)
    return conversation.run_safely(max_steps=max_steps, max_asks=max_asks)


def _made_already(intents: Sequence[JournalIntent], refs: set[str]) -> dict[str, str]:
    """The writes never to run again, by call key, with the effect_ref that made each: every
    committed intent settled after an interruption (by a resolver or a person), and every one
    whose recorded result this resume hands the model instead of running it, and held
    (unknown) ones, should the turn be continued without settling them (``refs``: those this
    resume reported or held)."""
    made: dict[str, str] = {}
    for intent in intents:
        settled_later = intent.state is IntentState.COMMITTED and intent.settler not in (None, SettledBy.CALL)
        if settled_later or intent.effect_ref in refs or intent.state is IntentState.HELD:
            made[policy.call_key(ToolCall(intent.call_id, intent.tool, intent.arguments_json))] = intent.effect_ref
    return made


def _settle(
    guard: Guard, calls: Sequence[ToolCall], intents: Mapping[str, JournalIntent], resolvers: Mapping[str, Resolver]
) -> tuple[dict[str, tuple[ToolResult | None, str | None, str]], list[tuple[str, str]]]:
    """Decide, in order, how each unanswered call is settled: a known result (not run
    again) with unstuck's note on it (the model reads it as unstuck's: ``Guard.call``'s
    ``note``), or its intent to run under; or the held intents (ref, reason), if any."""
    journal = guard.journal
    assert journal is not None
    overrides: dict[str, tuple[ToolResult | None, str | None, str]] = {}
    for position, call in enumerate(calls):
        intent = intents.get(call.id)
        if intent is None:
            if MASK in call.arguments_json:  # a secret the journal did not keep: never run with *** in it
                overrides[call.id] = _not_rerun(call)
            continue  # a read, or a write the crash came before: it runs as usual
        if intent.state is IntentState.COMMITTED:
            receipt = json.loads(intent.receipt or "{}")
            content = str(receipt.get("content", ""))  # the tool's words, as recorded
            note = f"{GUIDANCE_PREFIX} This call's effect was recorded before an interruption; it was not repeated." \
                if "content" in receipt else (f"{GUIDANCE_PREFIX} Its effect was confirmed before an interruption; it "
                                              "was not repeated.")
            overrides[call.id] = (ToolResult(
                call.tool, bool(receipt.get("ok", True)), content, exit_code=receipt.get("exit_code"),
                http_status=receipt.get("http_status"), injected=receipt.get("injected"),
            ), None, note)
            continue
        resolution, reason = _resolve(intent, resolvers)
        if resolution is Resolution.ABSENT and intent.settler is not SettledBy.USER_ABSENT:
            gone, why = runner_gone(intent.runner)
            if not gone:  # its call may still be under way: running it now could make the effect twice
                resolution, reason = Resolution.UNKNOWN, f"the resolver says it did not happen, but {why}"
        if resolution is Resolution.UNKNOWN:
            later = [intents[c.id] for c in calls[position + 1:] if c.id in intents]
            return overrides, [(intent.effect_ref, reason)] + [
                (i.effect_ref, "after a held intent") for i in later if i.state is not IntentState.COMMITTED
            ]
        if resolution is Resolution.COMMITTED:
            journal.record_receipt(intent.effect_ref, json.dumps({"resolved": "committed"}),
                                   settled_by=SettledBy.RESOLVER)
            guard.emit(EventName.INTENT_COMMITTED, tool=call.tool, effect_ref=intent.effect_ref, ok=True)
            overrides[call.id] = (ToolResult(call.tool, True, ""), None, (
                f"{GUIDANCE_PREFIX} This call's effect had already happened before an interruption "
                "(its resolver confirmed it); it was not repeated."))
        elif MASK in call.arguments_json:  # it did not happen, but its arguments held a secret not kept
            overrides[call.id] = _not_rerun(call)
        else:
            overrides[call.id] = (None, intent.effect_ref, "")
    return overrides, []


def _not_rerun(call: ToolCall) -> tuple[ToolResult, None, str]:
    """How a call a resume cannot run as asked is settled (an empty result, no intent, and
    unstuck's note, what the model is told): its journaled arguments hold ``***`` where a
    secret was (the journal never keeps one)."""
    return ToolResult(call.tool, True, ""), None, (
        f"{GUIDANCE_PREFIX} This call was not run after an interruption: its arguments held a secret, which the "
        "journal never keeps. Ask for it again if it is still needed.")
