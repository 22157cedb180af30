"""What a turn leaves: its status, each step as it happened, and the outcome.

:class:`TurnStatus` is DESIGN.md's vocabulary (``done``, ``blocked``, ``failed``,
``interrupted``; ``blocked`` is never ``done``); :class:`StepRecord` is one tool call, the
one record of a call that the guard, the loop, the journal, resume and the eval all use;
:class:`TurnResult` is the whole turn, with the measures the eval and the cost line use.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from unstuck.core.records import cheap
from unstuck.core.redact import redacted_json_each
from unstuck.core.situations import Situation, validate_situation
from unstuck.core.tools import ToolCall
from unstuck.decide.escalation import Escalation
from unstuck.decide.policy import Action
from unstuck.toolkit.models import Message

__all__ = [
    "CANONICAL_FORM", "StepRecord", "TurnResult", "TurnStatus", "Validation", "Validator", "Verdict", "saved_json_of",
]


class Verdict(enum.StrEnum):
    """A validator's verdict. ``not required`` is what a turn that stopped (blocked, failed,
    interrupted) records: never ``passed``."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_REQUIRED = "not required"


@dataclass(frozen=True, slots=True)
class Validation:
    """One validator's verdict on a turn, with its evidence."""

    name: str
    verdict: Verdict
    evidence: str = ""


@dataclass(frozen=True, slots=True)
class Validator:
    """A postcondition on the world, checked before a turn may be ``done``.

    ``check`` takes no arguments and returns ``True``/``False``, or ``(passed, evidence)``
    with ``passed`` a bool. Anything else (a string, a process result, a dict) has failed,
    saying what it returned: a check must say yes or no, not merely return something. One
    that raises has failed, with the exception as its evidence. A check that hangs is not
    cut off (the stall diagnostic notices it).
    """

    name: str
    check: Callable[[], bool | tuple[bool, str]]

    def run(self) -> Validation:
        """Run the check once and return its verdict (never raises)."""
        try:
            outcome = self.check()
        except Exception as exc:  # a broken postcondition check is a failed validation, with its evidence
            return Validation(self.name, Verdict.FAILED, f"the check raised {type(exc).__name__}: {exc}")
        if isinstance(outcome, tuple) and len(outcome) == 2 and isinstance(outcome[0], bool):
            passed, evidence = outcome
        elif isinstance(outcome, bool):
            passed, evidence = outcome, ""
        else:
            return Validation(self.name, Verdict.FAILED,
                              f"the check returned {outcome!r:.200}, not True/False or (bool, evidence)")
        return Validation(self.name, Verdict.PASSED if passed else Verdict.FAILED, str(evidence))


class TurnStatus(enum.StrEnum):
    """How a turn ended (DESIGN.md vocabulary), and ``running`` for one that has not: the
    status a journal keeps for a turn while it runs, or after its process died
    (:func:`unstuck.loop.resume.resume_turn` continues it). A :class:`TurnResult` is never
    ``running``. The journal stores the values as they are (``"done"``, ...)."""

    DONE = "done"
    BLOCKED = "blocked"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    RUNNING = "running"

    @property
    def ended(self) -> bool:
        """The turn is over (``done``, ``blocked``, ``failed``): nothing is left to resume.
        ``interrupted`` (held for a person) and ``running`` are not."""
        return self in _ENDED


_ENDED = frozenset({TurnStatus.DONE, TurnStatus.BLOCKED, TurnStatus.FAILED})


class _Derived:
    """Room on a frozen record for text derived from its fields once and kept: slots outside
    the dataclass's fields, so never compared, hashed, shown, copied by ``replace`` or pickled."""

    __slots__ = ("_saved_json", "_signed_json")
    _saved_json: str
    _signed_json: str


#: Where a step sits in saved guard state (the state, its ``steps``, the step): the depth it
#: is redacted at there (:func:`unstuck.core.redact.redact_value`).
_SAVED_DEPTH = 2

#: ``json.dumps``'s options for the canonical JSON a saved guard state's signature covers: keys
#: sorted, no spaces, non-ASCII kept (the text is then signed as UTF-8).
CANONICAL_FORM: Mapping[str, Any] = MappingProxyType(
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False})


@cheap
@dataclass(frozen=True, slots=True)
class StepRecord(_Derived):
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
        interactive: the policy saw the call as a hand-off to a person (the tool, or its
            command line).
        auto_retry: the guard could retry it by itself (a read-only, non-interactive tool).
        exempt: subjects of blockers opened earlier in the same reply (not charged by it).
        decision: what the policy decided after it (:class:`unstuck.decide.policy.Action`).
        reply: the model reply the call came in (0-based), ``-1`` for the guard's own
            probes.

    The policy's inputs (``subject``, ``situation``, ``ok``, ``dispatched``, ``probe``,
    ``retry``, ``interactive``, ``auto_retry``, ``exempt``) are all here, so folding the pure
    policy over a turn's records rebuilds its recovery state (:func:`unstuck.loop.resume.rebuild_state`).
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
    interactive: bool = False
    auto_retry: bool = False
    exempt: tuple[str, ...] = ()
    decision: Action = Action.CONTINUE
    reply: int = -1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (:meth:`from_dict` reads it back)."""
        return {
            "index": self.index, "call": {"id": self.call.id, "tool": self.call.tool,
                                          "arguments": self.call.arguments_json},
            "subject": self.subject, "dispatched": self.dispatched, "probe": self.probe, "ok": self.ok,
            "situation": None if self.situation is None else self.situation.to_dict(),
            "started_s": self.started_s, "duration_s": self.duration_s, "charged": list(self.charged),
            "opened": list(self.opened), "closed": list(self.closed), "content": self.content, "retry": self.retry,
            "injected": self.injected, "interactive": self.interactive, "auto_retry": self.auto_retry,
            "exempt": list(self.exempt), "decision": self.decision.value, "reply": self.reply,
        }

    def saved_json(self) -> str:
        """The record as saved guard state holds it: :meth:`to_dict` with every string redacted
        (:func:`unstuck.core.redact.redacted_json`, as at its place in the state), written as
        ``json.dumps`` writes it by default. Computed on the first call and kept: the record is
        frozen, so a state saved again after each call writes each step once
        (:func:`saved_json_of` writes many at once)."""
        return saved_json_of((self,))[0]

    def signed_json(self) -> str:
        """:meth:`saved_json`'s record in the canonical form a saved state's signature covers
        (:data:`CANONICAL_FORM`); computed on the first call and kept."""
        return saved_json_of((self,), signed=True)[0]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StepRecord:
        """Read :meth:`to_dict`'s output.

        Raises:
            ValueError: naming what is malformed.
        """
        try:
            call, get = raw["call"], raw.get
            return cls(
                int(raw["index"]), ToolCall(str(call["id"]), str(call["tool"]), str(call["arguments"])),
                str(raw["subject"]), bool(raw["dispatched"]), bool(raw["probe"]), bool(raw["ok"]),
                None if (situation := get("situation")) is None else validate_situation(
                    "saved step", situation, allow_refusal=True),
                float(raw["started_s"]), float(raw["duration_s"]), tuple(get("charged", ())),
                tuple(get("opened", ())), tuple(get("closed", ())), str(get("content", "")),
                bool(get("retry", False)), get("injected"), bool(get("interactive", False)),
                bool(get("auto_retry", False)), tuple(get("exempt", ())),
                _action(get("decision", "continue")), int(get("reply", -1)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a saved step is malformed: {type(exc).__name__}: {exc}") from None


def saved_json_of(steps: Sequence[StepRecord], *, signed: bool = False) -> list[str]:
    """Each step's :meth:`StepRecord.saved_json` (with ``signed``, :meth:`StepRecord.signed_json`),
    in order: the texts already written as they were kept, the others written together
    (:func:`unstuck.core.redact.redacted_json_each`: one scan for a hint of a secret over all of
    them) and kept on their steps."""
    slot = "_signed_json" if signed else "_saved_json"
    texts: list[str | None] = [getattr(step, slot, None) for step in steps]
    missing = [i for i, text in enumerate(texts) if text is None]
    if missing:
        form = CANONICAL_FORM if signed else {}
        made = redacted_json_each([steps[i].to_dict() for i in missing], depth=_SAVED_DEPTH, **form)
        for i, text in zip(missing, made, strict=True):
            object.__setattr__(steps[i], slot, text)  # a frozen record's kept text (_Derived), never a field
            texts[i] = text
    return [text for text in texts if text is not None]


#: Each :class:`~unstuck.decide.policy.Action` by its value: a saved step's decision looked up
#: without the enum's call (a thousand steps read back in a saved state).
_ACTIONS: Mapping[str, Action] = MappingProxyType({action.value: action for action in Action})


def _action(value: Any) -> Action:
    """The action named ``value`` (``Action(value)``, its errors included)."""
    try:
        return _ACTIONS[value]
    except (KeyError, TypeError):
        return Action(value)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of one turn.

    Attributes:
        turn_id: unique id of the turn.
        status: done, blocked, failed or interrupted (never ``running``).
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
        validations: each validator's verdict (``not required`` unless the model answered).
        held_intents: effect intents a resumed turn held (``interrupted``): their effect_refs.
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
    validations: tuple[Validation, ...] = ()
    held_intents: tuple[str, ...] = ()

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
