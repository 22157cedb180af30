"""The guard's state of one turn, as plain data that saves and loads itself.
Internal: not a supported import path (docs/reference/index.md lists those that are).

:class:`GuardState` lists every field of the saved state once, each with how it is written
as JSON and read back; :meth:`GuardState.to_json` and :meth:`GuardState.from_json` are derived
from that list (schema :data:`STATE_VERSION`). The tool set, clock, sinks and stores are not
state: the guard is given them again when it loads one.

Loading is in two steps. :meth:`GuardState.from_json` reads what was saved (types checked,
the signature verified); :func:`admit` then applies the rules that keep saved state from
granting itself rights (issue 23, "do no harm"): the caller's policy or the state's,
whichever is stricter; every count in its range; a pending retry only when the steps show it.
:func:`rebuild_state` gives the recovery state of a journaled turn instead (a resume).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from unstuck.core.errors import UnstuckError
from unstuck.core.readers import parse_json
from unstuck.core.redact import redact_value
from unstuck.core.tools import ToolCall
from unstuck.decide import policy
from unstuck.decide.escalation import Escalation
from unstuck.decide.marks import NONCE_HEX, is_nonce
from unstuck.decide.outcome import CANONICAL_FORM, StepRecord, saved_json_of
from unstuck.decide.policy import Action
from unstuck.guard.decision import Decision
from unstuck.guard.replies import Reply
from unstuck.store.diagnostics import RunLengths
from unstuck.store.journal import JournalDecision
from unstuck.toolkit.specs import Toolset

__all__ = ["STATE_VERSION", "GuardState", "GuardStateError", "admit", "new_nonce", "rebuild_state", "signing_key"]

#: Version of the saved state's schema; :meth:`GuardState.from_json` refuses another.
STATE_VERSION = 1


class GuardStateError(UnstuckError, ValueError):
    """Saved guard state that cannot be read back (named: what and where)."""


@dataclass(frozen=True, slots=True)
class _Saved:
    """How one field is saved: the JSON type it must have, and the two conversions."""

    json_type: type | tuple[type, ...]
    dump: Callable[[Any], Any]
    load: Callable[[Any], Any]
    required: bool


def _same(value: Any) -> Any:
    return value


def _saved(json_type: type | tuple[type, ...], dump: Callable[[Any], Any] = _same,
           load: Callable[[Any], Any] = _same, *, required: bool = False) -> dict[str, _Saved]:
    """A field's metadata: how it is saved."""
    return {"saved": _Saved(json_type, dump, load, required)}


def _optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


def _seconds(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise GuardStateError(f"saved guard state: elapsed_s must be a finite number of seconds, got {value!r}")
    return float(value)


def _escalated_at(value: Sequence[Any]) -> tuple[float, int]:
    at, calls = value
    return (float(at) if math.isfinite(float(at)) and float(at) >= 0 else 0.0), int(calls)


def _runs_dump(runs: RunLengths) -> dict[str, Any] | None:
    if runs.last is None:
        return None
    return {"call": [runs.last.id, runs.last.tool, runs.last.arguments_json], "same": runs.same, "streak": runs.streak}


def _runs_load(raw: Mapping[str, Any] | None) -> RunLengths:
    if raw is None:
        return RunLengths()
    return RunLengths(ToolCall(*map(str, raw["call"])), int(raw["same"]), int(raw["streak"]))


def _to_dict(record: Any) -> Any:
    return record.to_dict()


def _steps_dump(steps: Sequence[StepRecord]) -> list[dict[str, Any]]:
    return [step.to_dict() for step in steps]


def _steps_load(raw: Sequence[Mapping[str, Any]]) -> list[StepRecord]:
    return [StepRecord.from_dict(step) for step in raw]


def _done_dump(done: Mapping[tuple[int, str], Decision]) -> list[list[Any]]:
    return [[seq, call_id, d.action.value, d.content] for (seq, call_id), d in done.items()]


def _done_load(raw: Sequence[Sequence[Any]]) -> dict[tuple[int, str], Decision]:
    return {(int(item[0]), str(item[1])): Decision(Action(item[2]), None, str(item[3])) for item in raw}


def _str_map(raw: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in raw.items()}


def _int_map(raw: Mapping[str, Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in raw.items()}


def _seconds_map(raw: Mapping[str, Any]) -> dict[str, float]:
    """Seconds by call id; a value that is not a finite number of seconds is dropped."""
    return {str(k): float(v) for k, v in raw.items() if math.isfinite(float(v)) and float(v) >= 0}


def _str_set(raw: Iterable[Any]) -> set[str]:
    return set(map(str, raw))


def new_nonce() -> str:
    """A fresh nonce for a turn's mark (:mod:`unstuck.decide.marks`): :data:`~unstuck.decide.marks.NONCE_HEX`
    hex digits from :func:`secrets.token_hex` (the operating system's random source), which no
    tool can guess."""
    return secrets.token_hex(NONCE_HEX // 2)


def _nonce(value: str) -> str:
    if not is_nonce(value):
        raise GuardStateError(f"saved guard state: nonce must be {NONCE_HEX} lower-case hex digits, got {value!r}")
    return value


_NONE = type(None)


@dataclass(kw_only=True, slots=True)
class GuardState:
    """What a :class:`~unstuck.guard.guard.Guard` keeps of its turn between calls: exactly what
    it saves. Its parts own their rules; this record owns none but how it is written.

    Attributes:
        turn_id: the turn's id.
        task: the turn's task.
        guarded: the policy is enforced.
        elapsed_s: seconds into the turn when it was saved (the guard's clock runs on from it).
        state: the policy's :class:`~unstuck.decide.policy.RecoveryState`.
        steps: one :class:`~unstuck.decide.outcome.StepRecord` per call so far.
        escalation: the question once the turn escalated (the latch), else ``None``.
        escalated_blocker: the blocker it escalated on.
        escalated_at: (seconds into the turn, calls) at the first escalation.
        replies: replies declared so far; ``reply``: the one in progress
            (:class:`~unstuck.guard.replies.Reply`); ``done``: its calls assessed, by
            (reply, call id).
        retrying: call id → retries so far, while a retry is pending; ``waited``: seconds
            waited for them.
        intents: call id → effect_ref of an effect intent prepared and not yet returned.
        runs: the repetition and streak runs the calls end with.
        cited: subject → id of the lesson the turn escalated on; ``noted``: of a lesson that
            only added a note; ``lessons_checked``: subjects whose lessons were looked up.
        setup_checked: subjects whose tool's setup probe ran.
        saved_steps: steps already in the journal; ``last_ref``: the effect_ref of the last
            side-effecting call.
        held_writes: call key → effect_ref of a write never to make again in this turn.
        nonce: the nonce of the turn's mark on unstuck's notes to the model
            (:mod:`unstuck.decide.marks`); a state saved before it was kept (none saved) gets a
            fresh one when it is loaded.
    """

    turn_id: str = field(metadata=_saved(str, load=str, required=True))
    task: str = field(default="", metadata=_saved(str, load=str))
    guarded: bool = field(default=True, metadata=_saved(bool, load=bool))
    elapsed_s: float = field(default=0.0, metadata=_saved((int, float), load=_seconds))
    state: policy.RecoveryState = field(metadata=_saved(dict, _to_dict, policy.RecoveryState.from_dict, required=True))
    steps: list[StepRecord] = field(default_factory=list, metadata=_saved(list, _steps_dump, _steps_load))
    escalation: Escalation | None = field(default=None, metadata=_saved(
        (dict, _NONE), _optional(_to_dict), _optional(Escalation.from_dict)))
    escalated_blocker: policy.OpenBlocker | None = field(default=None, metadata=_saved(
        (dict, _NONE), _optional(_to_dict), _optional(policy.OpenBlocker.from_dict)))
    escalated_at: tuple[float, int] | None = field(default=None, metadata=_saved(
        (list, _NONE), _optional(list), _optional(_escalated_at)))
    replies: int = field(default=0, metadata=_saved(int, load=int))
    reply: Reply | None = field(default=None, metadata=_saved(
        (dict, _NONE), _optional(_to_dict), _optional(Reply.from_dict)))
    done: dict[tuple[int, str], Decision] = field(default_factory=dict, metadata=_saved(list, _done_dump, _done_load))
    retrying: dict[str, int] = field(default_factory=dict, metadata=_saved(dict, load=_int_map))
    waited: dict[str, float] = field(default_factory=dict, metadata=_saved(dict, load=_seconds_map))
    intents: dict[str, str] = field(default_factory=dict, metadata=_saved(dict, load=_str_map))
    runs: RunLengths = field(default_factory=RunLengths, metadata=_saved((dict, _NONE), _runs_dump, _runs_load))
    cited: dict[str, int] = field(default_factory=dict, metadata=_saved(dict, load=_int_map))
    noted: dict[str, int] = field(default_factory=dict, metadata=_saved(dict, load=_int_map))
    setup_checked: set[str] = field(default_factory=set, metadata=_saved(list, sorted, _str_set))
    saved_steps: int = field(default=0, metadata=_saved(int, load=int))
    last_ref: str = field(default="", metadata=_saved(str, load=str))
    lessons_checked: set[str] = field(default_factory=set, metadata=_saved(list, sorted, _str_set))
    held_writes: dict[str, str] = field(default_factory=dict, metadata=_saved(dict, dict, _str_map))
    nonce: str = field(default_factory=new_nonce, metadata=_saved(str, load=_nonce))

    def to_dict(self) -> dict[str, Any]:
        """Every field in its JSON form, after ``version``."""
        return {"version": STATE_VERSION,
                **{f.name: f.metadata["saved"].dump(getattr(self, f.name)) for f in fields(self)}}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> GuardState:
        """Read :meth:`to_dict`'s output (the version already checked); a field missing from
        ``raw`` takes its default (``turn_id`` and ``state`` are required).

        Raises:
            GuardStateError: naming the field, for one of the wrong JSON type, a missing
                required one, or one that does not read back.
        """
        read: list[tuple[str, _Saved, Any]] = []
        for f in fields(cls):
            saved: _Saved = f.metadata["saved"]
            if f.name not in raw:
                if saved.required:
                    raise GuardStateError(f"saved guard state has no {f.name}")
                continue
            value = raw[f.name]
            if not isinstance(value, saved.json_type) or (saved.json_type is int and isinstance(value, bool)):
                raise GuardStateError(f"saved guard state: {f.name} has the wrong type ({type(value).__name__})")
            read.append((f.name, saved, value))
        try:
            return cls(**{name: saved.load(value) for name, saved, value in read})
        except GuardStateError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as exc:
            raise GuardStateError(f"saved guard state is malformed: {type(exc).__name__}: {exc}") from None

    def to_json(self, key: bytes | None = None) -> str:
        """:meth:`to_dict` as JSON, every string redacted (:func:`unstuck.core.redact.redact_value`:
        saved state is stored, like the journal, so it keeps no secret; a call is never run
        from saved state, and a held write is looked up masked too); with ``key``, signed
        (``signature``: HMAC-SHA256 of the rest). The same text as ``json.dumps`` of the
        redacted whole, each step's part taken from the step (:meth:`StepRecord.saved_json
        <unstuck.decide.outcome.StepRecord.saved_json>`: a step is redacted and written once,
        however often the state is saved)."""
        rest = redact_value({"version": STATE_VERSION, **{f.name: f.metadata["saved"].dump(getattr(self, f.name))
                                                          for f in fields(self) if f.name != "steps"}})
        if key is not None:
            signed = "[" + ",".join(saved_json_of(self.steps, signed=True)) + "]"
            rest["signature"] = _signature(key, rest, signed)
        steps = "[" + ", ".join(saved_json_of(self.steps)) + "]"
        return _with_steps(rest, steps, after=_BEFORE_STEPS)

    @classmethod
    def from_json(cls, text: str | bytes, key: bytes | None = None) -> GuardState:
        """Read :meth:`to_json`'s output (depth-limited: :func:`unstuck.core.readers.parse_json`).

        Raises:
            GuardStateError: for text that is not saved guard state, a schema version other
                than :data:`STATE_VERSION`, a malformed part, or, with ``key``, a state that is
                unsigned or whose signature does not verify with it.
        """
        raw = parse_json(text, where="saved guard state", error=GuardStateError)
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
        elif "signature" in raw and not isinstance(raw["signature"], str):
            wrong = type(raw["signature"]).__name__
            raise GuardStateError(f"saved guard state: signature has the wrong type ({wrong})")
        return cls.from_dict(raw)


def _signature(key: bytes, saved: Mapping[str, Any], steps: str | None = None) -> str:
    """HMAC-SHA256 (RFC 2104, the standard library's :mod:`hmac`) of a saved state's canonical
    JSON (keys sorted, no spaces, UTF-8, a lone surrogate as ``surrogatepass`` writes it), every
    field but ``signature``; hex. ``steps``: the
    ``steps`` field's canonical text, when ``saved`` holds the other fields only."""
    rest = {k: v for k, v in saved.items() if k != "signature"}
    if steps is None:
        body = json.dumps(rest, **CANONICAL_FORM)
    else:
        body = _with_steps({k: rest[k] for k in sorted(rest)}, steps, after=sum(k < "steps" for k in rest),
                           **CANONICAL_FORM)
    # a lone surrogate (undecodable bytes a tool passed on) as its UTF-8 form (what Python's
    # "surrogatepass" writes), so such a state is signed too; any other text encodes as before
    return hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


#: Fields written before ``steps`` (``version`` first, then the fields in order).
_BEFORE_STEPS = 1 + [f.name for f in fields(GuardState)].index("steps")


def _with_steps(saved: Mapping[str, Any], steps: str, *, after: int, sort_keys: bool = False,
                separators: tuple[str, str] = (", ", ": "), ensure_ascii: bool = True) -> str:
    """``json.dumps`` of ``saved`` with a ``steps`` field (its JSON text ``steps``) after its
    first ``after`` fields: the same text as the whole written at once (with ``sort_keys``,
    ``after`` is the number of keys sorting before ``"steps"``)."""
    items = list(saved.items())
    item, colon = separators
    form: dict[str, Any] = {"sort_keys": sort_keys, "separators": separators, "ensure_ascii": ensure_ascii}
    parts = (json.dumps(dict(items[:after]), **form)[1:-1], f'"steps"{colon}{steps}',
             json.dumps(dict(items[after:]), **form)[1:-1])
    return "{" + item.join(part for part in parts if part) + "}"


def signing_key(key: object) -> bytes | None:
    """``key`` as the bytes a guard signs saved state with (``None``: unsigned).

    Raises:
        TypeError: when it is not non-empty bytes.
    """
    if key is None:
        return None
    if not isinstance(key, bytes | bytearray) or not key:
        raise TypeError(f"state_key must be non-empty bytes (the key the caller signs saved state with), "
                        f"got {type(key).__name__}")
    return bytes(key)


def _count(out_of_range: list[str], name: str, value: int, *, high: int | None = None) -> int:
    """A count read from saved state, in its range (``0`` to ``high``); one outside it is
    noted in ``out_of_range`` (``name: value``)."""
    fixed = max(value, 0) if high is None else min(max(value, 0), high)
    if fixed != value:
        out_of_range.append(f"{name}: {value}")
    return fixed


def admit(saved: GuardState, tools: Toolset, *, unattended: bool, guarded: bool, config: policy.PolicyConfig,
          held_writes: Mapping[str, str]) -> tuple[GuardState, list[str]]:
    """``saved`` as a guard built with the caller's policy may carry it on, and each value it
    fixed (``path: value``).

    Saved state is data kept somewhere and cannot grant itself rights. Each setting is the
    stricter of the caller's and the state's: guarded beats unguarded, unattended beats
    attended, the smaller budget beats the larger
    (:meth:`unstuck.decide.policy.PolicyConfig.stricter`). Every count is in its range (at
    least 0: a blocker's workarounds, retries, the repetition run, the failing streak...) and
    each blocker's budget at most the caller's for its kind (:func:`unstuck.decide.policy.bounded`);
    a pending retry is kept only when the steps show one (it skips the checks before
    dispatch), and a blocker exempts calls of the reply in progress only when a call of that
    reply opened it. What only grows within a turn (tainted addresses, refusals, held writes,
    effects held for the user) is taken as it is, and never removes one of the caller's own:
    ``held_writes`` stay held beside the state's.
    """
    rules = config.stricter(saved.state.config)
    state, wrong = policy.bounded(replace(saved.state, unattended=unattended or saved.state.unattended, config=rules))
    out_of_range = list(wrong)
    blocker = saved.escalated_blocker
    if blocker is not None:
        blocker, fixed = policy.bounded_blocker(blocker, rules, "escalated_blocker")
        out_of_range.extend(fixed)
    escalated_at = saved.escalated_at
    if escalated_at is not None:
        escalated_at = (escalated_at[0], _count(out_of_range, "escalated_at.calls", escalated_at[1]))
    replies = _count(out_of_range, "replies", saved.replies)
    reply = saved.reply
    if reply is not None:
        seq = _count(out_of_range, "reply.seq", reply.seq)
        # only blockers a call of this reply opened exempt its later calls (the charging rule)
        opened_here = {subject for step in saved.steps if step.reply == seq for subject in step.opened}
        out_of_range.extend(f"reply.fresh: {subject}" for subject in sorted(reply.fresh - opened_here))
        reply = replace(reply, seq=seq, position=_count(out_of_range, "reply.position", reply.position,
                                                        high=len(reply.ids)), fresh=reply.fresh & opened_here)
    counts = {k: _count(out_of_range, f"retrying.{k}", v) for k, v in saved.retrying.items()}
    retrying = _pending_retries(counts, saved.steps, tools, out_of_range)
    runs = RunLengths(saved.runs.last, _count(out_of_range, "runs.same", saved.runs.same),
                      _count(out_of_range, "runs.streak", saved.runs.streak))
    saved_steps = _count(out_of_range, "saved_steps", saved.saved_steps, high=len(saved.steps))
    return replace(saved, guarded=guarded or saved.guarded, state=state, escalated_blocker=blocker,
                   escalated_at=escalated_at, replies=replies, reply=reply, retrying=retrying, runs=runs,
                   saved_steps=saved_steps, held_writes={**saved.held_writes, **held_writes}), out_of_range


def _pending_retries(saved: Mapping[str, int], steps: Sequence[StepRecord], tools: Toolset,
                     out_of_range: list[str]) -> dict[str, int]:
    """Of a saved state's pending retries (call id → retries so far), the ones its steps
    show: the call's last step decided ``retry`` and the guard could retry it by itself
    (``auto_retry``), for a tool of this tool set that is no hand-off to a person. A
    pending retry is dispatched without the checks before dispatch (it was checked when
    the model asked for it), so saved state naming another call id would let that call
    skip them; such an id is dropped and noted in ``out_of_range``."""
    last: dict[str, StepRecord] = {step.call.id: step for step in steps}
    kept: dict[str, int] = {}
    for call_id, retries in saved.items():
        step = last.get(call_id)
        spec = tools.get(step.call.tool) if step is not None else None
        if (step is not None and spec is not None and step.decision is Action.RETRY and step.auto_retry
                and not step.interactive and not spec.interactive):
            kept[call_id] = retries
        else:
            out_of_range.append(f"retrying.{call_id}: no retry of it is pending")
    return kept


def rebuild_state(
    steps: Sequence[StepRecord], state: policy.RecoveryState,
    decisions: Sequence[tuple[int, JournalDecision, str]] = (), tools: Iterable[str] | None = None,
) -> policy.RecoveryState:
    """Run the pure policy over journaled steps again, from ``state``, with the recorded
    decisions (:class:`unstuck.store.journal.JournalDecision`: a user's ``close`` or ``skip``
    of a subject, a lesson's ``known`` blocker whose probe said it still holds) after the
    steps they followed: the recovery state as it stood after the last step (the decisions
    are pure functions of the same inputs). ``tools`` names the tool set, so calls to tools
    outside it count as such.

    Raises:
        ValueError: a decision whose action is not a ``JournalDecision`` value (never read as
            a ``close``: nothing is rebuilt on a word nobody recorded).
    """
    known_tools = None if tools is None else frozenset(tools)
    answers: dict[int, list[tuple[JournalDecision, str]]] = {}
    for after, action, subject in decisions:
        try:
            decision = JournalDecision(action)
        except ValueError:
            raise ValueError(f"a recorded decision after step {after} on {subject!r} has the action {action!r}, "
                             f"not one of {', '.join(repr(d.value) for d in JournalDecision)}") from None
        answers.setdefault(after, []).append((decision, subject))
    for action, subject in answers.get(-1, []):
        state = _answer_state(state, action, subject)
    for step in steps:
        call = step.call
        if not (step.probe or step.retry):
            _, state = policy.before_dispatch(state, call, subject=step.subject, interactive=step.interactive)
            if not step.dispatched and step.situation is not None and step.situation.is_refusal:
                kept = state.refusals if step.situation.detail in state.refusals else (
                    *state.refusals, step.situation.detail)
                state = replace(state, refusals=kept[:8])
        unknown = known_tools is not None and call.tool not in known_tools
        state = policy.after_result(state, call, policy.CallOutcome(
            step.subject, step.situation, step.ok, step.dispatched, step.probe, step.retry, step.auto_retry,
            frozenset(step.exempt), unknown_tool=unknown, interactive=step.interactive,
        )).state
        for action, subject in answers.get(step.index, []):
            if action is JournalDecision.KNOWN and step.situation is not None:  # its probe said it still holds
                state = policy.open_known_blocker(state, step.situation, step.index)
            else:
                state = _answer_state(state, action, subject)
    return state


def _answer_state(state: policy.RecoveryState, action: JournalDecision, subject: str) -> policy.RecoveryState:
    """A recorded answer, as :meth:`unstuck.Guard.answer` applied it: ``skip`` skips the
    subject; ``close`` closes its blocker and lets the calls held because their effect was
    unknown run again when the question named their refusal (the blocker's detail or the
    refusals beside it, :func:`unstuck.decide.policy.release_unknown_effects`); ``known``
    before any step (no situation to open it on) changes nothing, as the guard, which
    records it only after its probe's step, never does."""
    if action is JournalDecision.SKIP:
        return policy.skip_subject(state, subject)
    if action is JournalDecision.KNOWN:
        return state
    blocker = state.open_blockers.get(subject)
    named = (*((blocker.situation.detail,) if blocker is not None else ()), *state.refusals)
    return policy.release_unknown_effects(policy.close_blocker(state, subject), named)
