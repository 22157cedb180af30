"""Effect intents: a side-effecting call is journaled before it runs and its receipt after, and
a write already made is never made again in its turn.
Internal: not a supported import path (docs/reference/index.md lists those that are).

With a journal, every call of an ``effect="write"`` tool is prepared as an intent (its synced
commit) before dispatch, and its receipt recorded when it returns (seed 002, "effect journal";
DESIGN.md, "effect intent"): a resume after a crash then knows which effects happened. A write
a resumed turn reported as made (:attr:`GuardState.held_writes <unstuck.guard.state.GuardState>`)
is refused before dispatch, never run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from unstuck.core.redact import redact_document, redacted_prefix
from unstuck.core.situations import Kind, Situation, Source
from unstuck.core.tools import Effect, ToolCall, ToolResult
from unstuck.decide import policy
from unstuck.guard.state import GuardState
from unstuck.store.events import EventName
from unstuck.store.journal import Journal
from unstuck.toolkit.specs import ToolSpec

__all__ = ["HELD_WRITE_REFUSAL", "EffectIntents", "receipt_of"]

#: What the model gets for a write it asks for again after a resume reported it made already.
HELD_WRITE_REFUSAL = ("Not executed: this exact {tool} call already took effect before an interruption "
                      "(effect {ref}); unstuck does not make the same effect twice. If it must happen again, "
                      "stop and say so: a person decides.")


def receipt_of(result: ToolResult) -> str:
    """What the journal keeps of a side-effecting call's return (JSON; content cut at 4,000
    characters, after redaction: :func:`unstuck.core.redact.redacted_prefix`, so a cut never keeps
    the head of a secret)."""
    return json.dumps({"ok": result.ok, "content": redacted_prefix(result.content, 4000), "exit_code": result.exit_code,
                       "http_status": result.http_status, "injected": result.injected})


class EffectIntents:
    """The effect intents of one turn (kept in ``state.intents``, ``state.last_ref``).

    Args:
        state: the guard's state.
        journal: where intents and receipts are recorded; ``None``: none are.
        checkpoint: writes the steps not yet in the journal.
        emit: records an event (:meth:`unstuck.guard.guard.Guard.emit`).
    """

    def __init__(self, state: GuardState, journal: Journal | None, *, checkpoint: Callable[[], None],
                 emit: Callable[..., None]) -> None:
        self.state, self.journal, self.checkpoint, self.emit = state, journal, checkpoint, emit

    def held(self, call: ToolCall, subject: str, decision: policy.Dispatch | policy.Refuse
             ) -> policy.Dispatch | policy.Refuse:
        """``decision``, or a refusal when ``call`` is a write already made in this turn (keyed
        by the journal's arguments, which keep a secret as ``***``); the refusal joins the
        turn's refusals."""
        held = self.state.held_writes
        if not held or isinstance(decision, policy.Refuse):
            return decision
        stored = replace(call, arguments_json=redact_document(call.arguments_json))
        ref = held.get(policy.call_key(call)) or held.get(policy.call_key(stored))
        if ref is None:
            return decision
        made = Situation(Kind.PERMISSION, subject, source=Source.UNSTUCK,
                         detail=HELD_WRITE_REFUSAL.format(tool=call.tool, ref=ref))
        s = self.state
        if made.detail not in s.state.refusals:
            s.state = replace(s.state, refusals=(*s.state.refusals, made.detail)[:8])
        return policy.Refuse(call, made, made.detail)

    def prepare(self, call: ToolCall, spec: ToolSpec | None, reply_seq: int, reuse: str | None = None) -> None:
        """Journal the intent of a write about to run (``reuse``: run it under an intent a
        resume found prepared); nothing for a read or without a journal."""
        if self.journal is None or spec is None or spec.effect is not Effect.WRITE:
            return
        s = self.state
        if reuse is not None:
            self.journal.resume_intent(reuse)
            ref = reuse
        else:
            if s.saved_steps < len(s.steps):
                self.checkpoint()  # probes and retries before it are on disk: step numbers and intents stay aligned
            ref = self.journal.prepare_intent(s.turn_id, len(s.steps), call.id, call.tool, call.arguments_json,
                                              reply_seq=reply_seq)
        s.intents[call.id] = ref
        self.emit(EventName.INTENT_PREPARED, tool=call.tool, effect_ref=ref)

    def returned(self, call: ToolCall, result: ToolResult) -> None:
        """``call`` came back with ``result``: the receipt of its intent, if it has one."""
        ref = self.state.intents.pop(call.id, None)
        if ref is None:
            return
        # The intent was the call's synced commit; the receipt rides on the next one (a power
        # loss before it leaves the intent prepared: resume asks or holds, never repeats).
        assert self.journal is not None
        self.journal.effect_returned(ref)
        self.journal.record_receipt(ref, receipt_of(result))
        self.state.last_ref = ref
        self.emit(EventName.INTENT_COMMITTED, tool=result.tool, effect_ref=ref, ok=result.ok)

    def hold(self, made: dict[str, Any]) -> None:
        """Add writes never to run again in this turn (call key → effect_ref); none is removed."""
        self.state.held_writes = {**self.state.held_writes, **{str(k): str(v) for k, v in made.items()}}
