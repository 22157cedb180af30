"""Pure decisions of the loop: before a call is dispatched, and after its result.

Seed 000 section 3.3 is the source of the four rules; DESIGN.md of the defaults.

* **Rule 1.** A call to an interactive tool is refused before dispatch when the run is
  unattended. The refusal is an ordinary result (not executed, kind ``permission``) and
  counts against the budget of every open blocker.
* **Rule 2.** After a blocker opened on subject S, each further call that fails, is refused,
  or returns the same kind increments S's workaround count; successes and probes do not.
  When the count passes the budget (2 after a declared blocker, 4 after an inferred one; the
  declared budget once another call meets the same inferred kind on S: :func:`_corroborate`)
  the loop stops dispatching tools and escalates. A blocker closes on a clean probe, a success
  that exercises what was refused (:func:`_exercises`: never ``--version`` or help), or the
  user's answer; closing resets its count.
* **Rule 3.** A result carrying a blocker gets the blocker recovery prompt (see
  :mod:`unstuck.decide.prompts`); self-fixable errors keep the generic "correct your plan" prompt.
* **Rule 4** (the escalation's three parts) lives in :mod:`unstuck.decide.escalation`.
* **Retries** (DESIGN.md): a retryable transient result is retried by the loop after the
  wait :func:`unstuck.decide.retry.next_retry` gives; once a kind's retries are used up, or the
  server's wait is beyond the cap, it becomes a blocker on its subject.
* **Repetition has authority** (DESIGN.md, "Defaults": 3 consecutive identical calls;
  identical *failing* calls escalate as stuck): the same call (tool and arguments) failing
  :attr:`PolicyConfig.repetition` times in a row escalates, quoting the failure; a call to a
  tool that is not in the tool set fails with the tool set listed, and the second such call
  escalates.
* **A refusal is unstuck's word, not the machine's**: it never replaces a blocker a tool
  reported, and the question is about the first real blocker, with unstuck's refusals listed
  beside it.
* **No credential tricks around a sign-in or permission blocker**: while a blocker of kind
  ``auth`` or ``permission`` is open, a call that changes credentials, scopes, identities or
  permissions (:mod:`unstuck.commands.credentials`) is refused and named in the question, unless
  :attr:`PolicyConfig.allowed_credential_changes` names it.
* **A failure beside a blocker is charged to it, a sign-in failure never**: while a blocker is
  open (or a subject is waited on), an inferred blocker on another subject is the fallout of
  working around it and opens no question of its own; but a sign-in failure (``auth``) opens
  its own blocker whatever else fails beside it, in one reply or across replies, and so does
  any blocker beside one first opened earlier in the same reply (the model had not seen it).
  The question is about a blocker that needs the user before one that waiting ran out on
  (a 503): :func:`_worked_around`, :func:`_first_real`.
* **An interactive result is a blocker**: a result that needs a person at a keyboard (a
  pager or prompt that waited until the deadline included) opens a blocker on its subject,
  whatever its kind; it is never retried as transient.
* **An effect whose outcome is unknown is held** (DESIGN.md: "retry only what waiting can
  fix", "an effect runs at most once"): a call the loop may not send again by itself (a write
  that is not idempotent) that timed out may have taken effect. It is never retried, its
  guidance says so and invites no resend, and the identical call is refused for the rest of
  the turn until the user answers a question that named it (:attr:`CallOutcome.effect_unknown`,
  :func:`release_unknown_effects`).

:func:`after_result` applies the rules in order, each its own function: close on success,
schedule a retry, charge workarounds, open a blocker, taint addresses, hold an effect whose
outcome is unknown, count repetition, then decide.

Nothing here sleeps, writes, reads a clock or calls a tool: each function takes a
:class:`RecoveryState` and returns a decision with the next state.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from unstuck.core.records import cheap
from unstuck.core.redact import redact_document, redact_value
from unstuck.core.situations import Kind, KindClass, Situation, Source, validate_situation
from unstuck.core.tools import ToolCall
from unstuck.decide import prompts
from unstuck.decide.escalation import EscalationReason
from unstuck.decide.retry import next_retry, waitable

if TYPE_CHECKING:
    from unstuck.commands.credentials import CredentialChange
    from unstuck.commands.waiting import NonInteractiveFix

__all__ = [
    "Action",
    "Assessment",
    "CallOutcome",
    "CloseReason",
    "Continue",
    "Dispatch",
    "Escalate",
    "EscalationReason",
    "OpenBlocker",
    "PolicyConfig",
    "RecoveryState",
    "Refuse",
    "Repeat",
    "RetryAfter",
    "after_result",
    "before_dispatch",
    "bounded",
    "bounded_blocker",
    "call_key",
    "close_blocker",
    "open_known_blocker",
    "release_unknown_effects",
    "skip_subject",
]


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Budgets of the stop-and-ask policy (DESIGN.md, "Defaults").

    Attributes:
        max_workarounds_after_blocker: failing or refused calls allowed after a *declared*
            blocker opened, before the turn escalates (default 2).
        max_workarounds_after_inferred_blocker: the same after an *inferred* blocker
            (default 4: a regex is less sure than a tool).
        repetition: identical failing calls in a row that escalate as stuck (default 3,
            DESIGN.md "Defaults").
        unknown_tool_calls: calls to tools that are not in the tool set that escalate
            (default 2: the first fails with the tool set listed).
        failures_in_a_row: model calls in a row that failed, whatever they were (``false``,
            then ``exit 1``, then ``false # again``), that escalate as stuck (default 8: twice
            the budget after an inferred blocker; no success in between).
        allowed_credential_changes: names of :mod:`unstuck.commands.credentials` catalogue rows that
            are *not* refused while a sign-in or permission blocker is open (a team that lets
            its agent run ``sudo``, say); empty by default.
    """

    max_workarounds_after_blocker: int = 2
    max_workarounds_after_inferred_blocker: int = 4
    repetition: int = 3
    unknown_tool_calls: int = 2
    failures_in_a_row: int = 8
    allowed_credential_changes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for name in ("max_workarounds_after_blocker", "max_workarounds_after_inferred_blocker"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"PolicyConfig.{name} must be a whole number of calls, 0 or more; got {value!r}")
        for name in ("repetition", "unknown_tool_calls", "failures_in_a_row"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PolicyConfig.{name} must be a whole number of calls, 1 or more; got {value!r}")
        allowed = self.allowed_credential_changes
        if isinstance(allowed, str) or not all(isinstance(name, str) for name in allowed):
            raise ValueError("PolicyConfig.allowed_credential_changes must be a set of catalogue row names "
                             f"(unstuck.commands.credentials), got {allowed!r}")
        object.__setattr__(self, "allowed_credential_changes", frozenset(allowed))

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (:meth:`from_dict` reads it back)."""
        return {"max_workarounds_after_blocker": self.max_workarounds_after_blocker,
                "max_workarounds_after_inferred_blocker": self.max_workarounds_after_inferred_blocker,
                "repetition": self.repetition, "unknown_tool_calls": self.unknown_tool_calls,
                "failures_in_a_row": self.failures_in_a_row,
                "allowed_credential_changes": sorted(self.allowed_credential_changes)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> PolicyConfig:
        """Read :meth:`to_dict`'s output (missing fields take their defaults).

        Raises:
            ValueError: naming the field, for an unknown field or a bad value.
        """
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"PolicyConfig: unknown field(s) {', '.join(unknown)}")
        values = dict(raw)
        if "allowed_credential_changes" in values:
            allowed = values["allowed_credential_changes"]
            if not isinstance(allowed, list | tuple | set | frozenset):
                raise ValueError(f"PolicyConfig.allowed_credential_changes must be a list, got {allowed!r}")
            values["allowed_credential_changes"] = frozenset(allowed)
        return cls(**values)  # type: ignore[arg-type]

    def stricter(self, other: PolicyConfig) -> PolicyConfig:
        """The stricter of two configurations, field by field: the smaller budget or limit
        (fewer workarounds, fewer identical failures, fewer unknown tools, a shorter failing
        streak), and only the credential changes both allow. What a guard loaded from saved
        state runs with, so that a saved state can never widen what its caller allows."""
        return PolicyConfig(
            min(self.max_workarounds_after_blocker, other.max_workarounds_after_blocker),
            min(self.max_workarounds_after_inferred_blocker, other.max_workarounds_after_inferred_blocker),
            min(self.repetition, other.repetition), min(self.unknown_tool_calls, other.unknown_tool_calls),
            min(self.failures_in_a_row, other.failures_in_a_row),
            self.allowed_credential_changes & other.allowed_credential_changes,
        )

    def budget_for(self, situation: Situation) -> int:
        """The workaround budget for a blocker opened by ``situation``."""
        if situation.source is Source.DECLARED:
            return self.max_workarounds_after_blocker
        return self.max_workarounds_after_inferred_blocker


@cheap
@dataclass(frozen=True, slots=True)
class OpenBlocker:
    """A blocker open on one subject during a turn.

    Attributes:
        situation: the situation that opened it (upgraded when a declared one arrives later).
        opened_at_call: index (0-based) of the call whose result opened it.
        workarounds: failing or refused calls charged since it opened.
        budget: the workaround budget that applies (from :class:`PolicyConfig`).
        reason: why the turn escalates on it: a blocker, or the agent is stuck (the same
            call failing again and again, or calls to tools that do not exist).
        evidence: for a stuck escalation, the call and its failure, quoted (bounded).
        opened_by: the :func:`call_key` of the call whose result opened it ("" when not known:
            a state saved before it was kept): the same evidence from another call confirms it.
        reach: what the opening call exercised on the blocked program: the first operand of
            its run of that program (``pr`` of ``gh pr create``), "" when it ran none or gave
            none, ``None`` when not known. A success closes the blocker only when it reaches
            the same (:func:`_exercises`).
    """

    situation: Situation
    opened_at_call: int
    workarounds: int = 0
    budget: int = 2
    reason: EscalationReason = field(default_factory=lambda: EscalationReason.BLOCKED)
    evidence: str = ""
    opened_by: str = ""
    reach: str | None = None

    @property
    def subject(self) -> str:
        """The subject the blocker is on."""
        return self.situation.subject

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (:meth:`from_dict` reads it back)."""
        return {"situation": self.situation.to_dict(), "opened_at_call": self.opened_at_call,
                "workarounds": self.workarounds, "budget": self.budget, "reason": self.reason.value,
                "evidence": self.evidence, "opened_by": self.opened_by, "reach": self.reach}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> OpenBlocker:
        """Read :meth:`to_dict`'s output.

        Raises:
            ValueError: naming the field, for a missing or malformed one.
        """
        situation = validate_situation("saved state", raw.get("situation"), allow_refusal=True)
        if situation is None:
            raise ValueError("a saved blocker has no situation")
        try:
            reach = raw.get("reach")
            return cls(situation, int(raw["opened_at_call"]), int(raw["workarounds"]), int(raw["budget"]),
                       EscalationReason(raw.get("reason", "blocked")), str(raw.get("evidence", "")),
                       str(raw.get("opened_by", "")), None if reach is None else str(reach))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a saved blocker is malformed: {type(exc).__name__}: {exc}") from None

    @property
    def remaining(self) -> int:
        """Further failing or refused calls allowed before escalation (never negative)."""
        return max(self.budget - self.workarounds, 0)

    @property
    def exhausted(self) -> bool:
        """True when the count has passed the budget: the turn must escalate."""
        return self.workarounds > self.budget


class Action(enum.StrEnum):
    """What a decision tells the caller to do with one call (the name a step records)."""

    DISPATCH = "dispatch"  # run the call
    REFUSE = "refuse"  # do not run it; hand the model the refusal
    CONTINUE = "continue"  # hand the model the result, with guidance
    RETRY = "retry"  # wait, then run the same call again
    ESCALATE = "escalate"  # stop dispatching; end the turn with the question


class CloseReason(enum.StrEnum):
    """Why a blocker closed (DESIGN.md, "blocker": a probe comes back clean, a call that
    exercises what was refused succeeds, or the user answers), as the ``blocker.closed`` and
    ``lesson.invalidated`` events and the cost report (``Episode.closed_by``) name it."""

    PROBE_CLEAN = "probe clean"  # a probe (the guard's, or a lesson's) came back clean
    CALL_SUCCEEDED = "call succeeded"  # a call on the subject succeeded
    USER_ANSWERED = "user answered"  # "I've done it", and the probe (if any) agrees: the blocker
    USER_RESOLVED = "user resolved"  # the same answer, as a lesson on the subject hears it
    USER_SKIPPED = "user skipped"  # "Skip it": the subject is skipped, calls on it are refused

    @classmethod
    def of_call(cls, *, probe: bool) -> CloseReason:
        """A clean result closed it: :attr:`PROBE_CLEAN` for a probe, else :attr:`CALL_SUCCEEDED`."""
        return cls.PROBE_CLEAN if probe else cls.CALL_SUCCEEDED


@cheap
@dataclass(frozen=True, slots=True)
class Repeat:
    """The run of identical failing calls the turn's calls end with: the call's key (tool
    and canonical arguments: sorted keys, whitespace in strings collapsed) and how many times
    in a row it failed; and how many model calls in a row failed, whatever they were."""

    key: str = ""
    failures: int = 0
    streak: int = 0


_EMPTY: Mapping[str, OpenBlocker] = types.MappingProxyType({})
#: The empty book every state without entries shares (a mapping proxy is read-only).
_NO_ENTRIES: Mapping[Any, Any] = types.MappingProxyType({})
_K = TypeVar("_K")
_V = TypeVar("_V")
#: The run a success leaves (no identical failing calls, no failing streak): one value, shared.
_NO_RUN = Repeat()
#: A subject unstuck may name in its own words: one plain token (a program, a path, a host).
_PLAIN_SUBJECT = re.compile(r"[A-Za-z0-9_./:@+-]{1,200}")
#: Addresses an injected instruction may send the agent to: URLs and e-mail addresses.
_ADDRESS = re.compile(r"https?://[^\s'\"<>|)\]]+|[\w.+-]+@[\w-]+\.[\w.-]+")


@cheap
@dataclass(frozen=True, slots=True)
class RecoveryState:
    """Per-turn bookkeeping of the policy.

    Attributes:
        unattended: nobody can answer now (CI, API server, eval); set explicitly.
        config: the budgets.
        open_blockers: the open blockers, keyed by subject.
        skipped: blockers the user chose to skip, keyed by subject: calls on them are refused,
            and the refusals are charged here, so an agent that keeps trying still stops.
        settled: blockers closed by a mere success on their subject, keyed by subject; if the
            same kind reopens in this turn it resumes this count instead of a fresh budget
            (a flapping subject, e.g. ``gh --version`` succeeding between auth failures).
        retries: retryable failures so far in this turn, keyed by (subject, kind) (whichever
            call met them: the loop's retries and the model's own repeats alike); a success on
            the subject clears its counts. Past the kind's ceiling the subject is blocked.
        tainted: addresses (URLs, e-mail addresses) named by results flagged
            ``injected_instruction``; a later call carrying one is refused, so an instruction
            planted in data is never executed (seed 000 section 3.4).
        calls: how many calls (dispatched or refused) the turn has made.
        repeat: the run of identical failing calls the turn's calls end with.
        unknown_tools: calls so far to tools that are not in the tool set.
        refusals: unstuck's own refusals this turn, in order, each once (bounded to 8): they
            are listed beside the blocker in the question, never instead of it.
        unknown_effects: calls that may have taken effect although no result came back (a
            write that timed out: :attr:`CallOutcome.effect_unknown`), by
            :func:`call_key`, each with the refusal an identical resend gets: it is held (refused
            before dispatch) for the rest of the turn, until the user answers a question that
            named it (:func:`release_unknown_effects`). DESIGN.md: an effect runs at most once.
    """

    unattended: bool
    config: PolicyConfig = field(default_factory=PolicyConfig)
    open_blockers: Mapping[str, OpenBlocker] = field(default_factory=lambda: _EMPTY)
    skipped: Mapping[str, OpenBlocker] = field(default_factory=lambda: _EMPTY)
    settled: Mapping[str, OpenBlocker] = field(default_factory=lambda: _EMPTY)
    retries: Mapping[tuple[str, Kind], int] = field(default_factory=lambda: types.MappingProxyType({}))
    tainted: frozenset[str] = frozenset()
    calls: int = 0
    repeat: Repeat = field(default_factory=Repeat)
    unknown_tools: int = 0
    refusals: tuple[str, ...] = ()
    unknown_effects: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))

    @property
    def skipped_subjects(self) -> frozenset[str]:
        """Subjects the user chose to skip."""
        return frozenset(self.skipped)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (:meth:`from_dict` reads it back)."""
        def book(items: Mapping[str, OpenBlocker]) -> dict[str, Any]:
            return {key: blocker.to_dict() for key, blocker in items.items()}

        return {
            "unattended": self.unattended, "config": self.config.to_dict(),
            "open_blockers": book(self.open_blockers), "skipped": book(self.skipped), "settled": book(self.settled),
            "retries": [[subject, kind.value, n] for (subject, kind), n in self.retries.items()],
            "tainted": sorted(self.tainted), "calls": self.calls,
            "repeat": {"key": self.repeat.key, "failures": self.repeat.failures, "streak": self.repeat.streak},
            "unknown_tools": self.unknown_tools, "refusals": list(self.refusals),
            "unknown_effects": [[key, refusal] for key, refusal in self.unknown_effects.items()],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RecoveryState:
        """Read :meth:`to_dict`'s output.

        Raises:
            ValueError: naming what is malformed.
        """
        def book(name: str) -> Mapping[str, OpenBlocker]:
            items = raw.get(name, {})
            if not isinstance(items, Mapping):
                raise ValueError(f"saved state: {name} must be an object")
            return types.MappingProxyType({str(k): OpenBlocker.from_dict(v) for k, v in items.items()})

        try:
            retries = {(str(subject), Kind(kind)): int(n) for subject, kind, n in raw.get("retries", [])}
            repeat = raw.get("repeat") or {}
            return cls(
                unattended=bool(raw["unattended"]), config=PolicyConfig.from_dict(raw.get("config", {})),
                open_blockers=book("open_blockers"), skipped=book("skipped"), settled=book("settled"),
                retries=types.MappingProxyType(retries), tainted=frozenset(map(str, raw.get("tainted", []))),
                calls=int(raw.get("calls", 0)),
                repeat=Repeat(str(repeat.get("key", "")), int(repeat.get("failures", 0)), int(repeat.get("streak", 0))),
                unknown_tools=int(raw.get("unknown_tools", 0)), refusals=tuple(map(str, raw.get("refusals", []))),
                unknown_effects=types.MappingProxyType(
                    {str(key): str(refusal) for key, refusal in raw.get("unknown_effects", [])}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"saved state is malformed: {type(exc).__name__}: {exc}") from None


def _budget_cap(blocker: OpenBlocker, config: PolicyConfig, *, skipped: bool = False) -> int:
    """The largest workaround budget ``config`` gives ``blocker``: a skipped subject's is the
    declared budget (:func:`skip_subject`); a stuck escalation's is its limit less one (the
    count that escalates: :func:`_count_repetition`); a blocker's is the budget for its kind,
    declared or inferred (:meth:`PolicyConfig.budget_for`)."""
    if skipped:
        return config.max_workarounds_after_blocker
    stuck = {EscalationReason.REPEATED_FAILURE: config.repetition - 1,
             EscalationReason.FAILING_STREAK: config.failures_in_a_row - 1,
             EscalationReason.UNKNOWN_TOOL: config.unknown_tool_calls - 1}
    return stuck.get(blocker.reason, config.budget_for(blocker.situation))


def bounded_blocker(blocker: OpenBlocker, config: PolicyConfig, where: str, *,
                    skipped: bool = False) -> tuple[OpenBlocker, list[str]]:
    """``blocker`` with its counts at least 0 and its budget at most :func:`_budget_cap`'s,
    and what was out of range (``where.field: value``)."""
    cap = _budget_cap(blocker, config, skipped=skipped)
    fixed = replace(blocker, opened_at_call=max(blocker.opened_at_call, 0), workarounds=max(blocker.workarounds, 0),
                    budget=min(max(blocker.budget, 0), cap))
    found = [f"{where}.{name}: {getattr(blocker, name)}" for name in ("opened_at_call", "workarounds", "budget")
             if getattr(fixed, name) != getattr(blocker, name)]
    return fixed, found


def bounded(state: RecoveryState) -> tuple[RecoveryState, tuple[str, ...]]:
    """``state`` as read from saved state (:meth:`RecoveryState.from_dict`) with every count
    in its valid range, and what was out of range (``"open_blockers.gh.workarounds: -5"``
    each; empty when nothing was).

    Saved state is data kept somewhere else (a checkpointer, a framework's context), and an
    unsigned one may have been edited: it cannot lift a budget (issue 23, "Guard state cannot
    grant itself rights"). Every count read from it is at least 0 (a blocker's workarounds and
    the call that opened it, the retries met per subject and kind, the calls, the repetition
    run and the failing streak, the calls to unknown tools), and each blocker's budget is at
    most what ``state.config`` (the caller's, or stricter) gives its kind
    (:func:`_budget_cap`). What only grows within a turn (tainted addresses, refusals, effects
    held for the user) is taken as it is: more of it only refuses more."""
    config = state.config
    found: list[str] = []

    def book(name: str, items: Mapping[str, OpenBlocker]) -> Mapping[str, OpenBlocker]:
        kept: dict[str, OpenBlocker] = {}
        for key, blocker in items.items():
            kept[key], wrong = bounded_blocker(blocker, config, f"{name}.{key}", skipped=name == "skipped")
            found.extend(wrong)
        return types.MappingProxyType(kept)

    open_blockers = book("open_blockers", state.open_blockers)
    skipped = book("skipped", state.skipped)
    settled = book("settled", state.settled)
    retries: dict[tuple[str, Kind], int] = {}
    for (subject, kind), n in state.retries.items():
        retries[(subject, kind)] = max(n, 0)
        if n < 0:
            found.append(f"retries.{subject}.{kind.value}: {n}")
    counts = {"calls": state.calls, "repeat.failures": state.repeat.failures, "repeat.streak": state.repeat.streak,
              "unknown_tools": state.unknown_tools}
    found.extend(f"{name}: {value}" for name, value in counts.items() if value < 0)
    fixed = replace(state, open_blockers=open_blockers, skipped=skipped, settled=settled,
                    retries=types.MappingProxyType(retries), calls=max(state.calls, 0),
                    repeat=Repeat(state.repeat.key, max(state.repeat.failures, 0), max(state.repeat.streak, 0)),
                    unknown_tools=max(state.unknown_tools, 0))
    return fixed, tuple(found)


# ----------------------------------------------------------------------------- decisions


@cheap
@dataclass(frozen=True, slots=True)
class Dispatch:
    """Run the call."""

    call: ToolCall
    action = Action.DISPATCH


@cheap
@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not run the call; hand the model ``situation`` as an ordinary not-executed result."""

    call: ToolCall
    situation: Situation
    reason: str
    action = Action.REFUSE


@cheap
@dataclass(frozen=True, slots=True)
class Continue:
    """Hand the result to the model, with ``guidance`` appended when it is not ``None``."""

    guidance: str | None = None
    action = Action.CONTINUE


@cheap
@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Wait ``delay_s`` seconds on the turn's clock, then run the same call again.
    ``server_said`` is true when the wait is the server's own (Retry-After): it is never
    jittered below what the server asked."""

    delay_s: float
    attempt: int
    server_said: bool = False
    action = Action.RETRY


@cheap
@dataclass(frozen=True, slots=True)
class Escalate:
    """Stop dispatching tools; end the turn with the escalation for ``blocker``."""

    blocker: OpenBlocker
    action = Action.ESCALATE


@cheap
@dataclass(frozen=True, slots=True)
class Assessment:
    """What :func:`after_result` decided, the next state, and what changed (for events).

    ``opened``, ``closed`` and ``charged`` list subjects whose blocker opened, closed, or had
    its workaround count incremented by this result.
    """

    decision: Continue | Escalate | RetryAfter
    state: RecoveryState
    opened: tuple[str, ...] = ()
    closed: tuple[str, ...] = ()
    charged: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- rules

#: Kinds of open blocker during which credential-changing calls are refused.
_CREDENTIAL_BLOCKERS = frozenset({Kind.AUTH, Kind.PERMISSION})
#: unstuck's own refusals kept for the question, at most.
_REFUSALS_KEPT = 8
#: Kinds of a result that came with no answer from the tool: the call may have run
#: (:attr:`CallOutcome.effect_unknown`).
_NO_ANSWER = frozenset({Kind.TIMEOUT})


def _refuse(call: ToolCall, state: RecoveryState, situation: Situation) -> tuple[Refuse, RecoveryState]:
    refusals = state.refusals
    if situation.detail not in refusals and len(refusals) < _REFUSALS_KEPT:
        refusals = (*refusals, situation.detail)
    return Refuse(call, situation, situation.detail), replace(state, refusals=refusals)



#: The fields of :class:`RecoveryState`, in order (every one an init field), for :func:`_evolved`.
_STATE_FIELDS = tuple(f.name for f in fields(RecoveryState) if f.init)


def _evolved(state: RecoveryState, **changes: Any) -> RecoveryState:
    """``dataclasses.replace(state, **changes)`` without ``replace``'s per-field bookkeeping
    (``RecoveryState`` has no ``__post_init__`` and every field is an init field, so nothing
    else ``replace`` does applies); the two states made on every call are built directly
    (:func:`_counted`, :func:`after_result`)."""
    values = {name: getattr(state, name) for name in _STATE_FIELDS}
    values.update(changes)
    return RecoveryState(**values)


def _counted(state: RecoveryState) -> RecoveryState:
    """``state`` with one more call (``dataclasses.replace(state, calls=state.calls + 1)``,
    without ``replace``'s per-field bookkeeping: ``RecoveryState`` has no ``__post_init__``
    and every field is an init field, so nothing else ``replace`` does applies)."""
    return RecoveryState(
        unattended=state.unattended, config=state.config, open_blockers=state.open_blockers, skipped=state.skipped,
        settled=state.settled, retries=state.retries, tainted=state.tainted, calls=state.calls + 1,
        repeat=state.repeat, unknown_tools=state.unknown_tools, refusals=state.refusals,
        unknown_effects=state.unknown_effects)


def _editable(book: Mapping[_K, _V]) -> dict[_K, _V]:
    """A working copy of one of a state's books (a dict's or a mapping proxy's own copy, made
    in C; an empty book is a new empty dict)."""
    if not book:
        return {}
    if type(book) is types.MappingProxyType or type(book) is dict:
        return book.copy()
    return dict(book)


def _kept(book: dict[_K, _V]) -> Mapping[_K, _V]:
    """A working copy frozen again for the next state (an empty one is the shared empty book)."""
    return types.MappingProxyType(book) if book else _NO_ENTRIES


def before_dispatch(
    state: RecoveryState, call: ToolCall, *, subject: str, interactive: bool, waits_for: str | None = None,
    credential_changes: tuple[CredentialChange, ...] = (), without_wait: NonInteractiveFix | str | None = None,
) -> tuple[Dispatch | Refuse, RecoveryState]:
    """Rule 1, skipped subjects, tainted addresses, effects held for the user and credential
    changes: decide whether ``call`` may run.

    Args:
        state: the turn's state.
        call: the call the model asked for.
        subject: what the call affects (from the tool spec).
        interactive: the tool's whole job is a hand-off to a person, or this call's command
            line would wait for one (the interactive-call catalogue, :mod:`unstuck.commands.interactive`).
        waits_for: what in the call waits for a person and why (``gh auth login --web``:
            "..."), named in the refusal; ``None`` when the whole tool is interactive.
        without_wait: for a call that waits only because it has a terminal (a pager, a
            prompt), the same call made so it does not wait (``git --no-pager log``, with
            where that is documented), named in the refusal
            (:func:`unstuck.commands.waiting.non_interactive_fix`); a fix given as a
            :class:`~unstuck.commands.waiting.NonInteractiveFix` is also the refusal's
            ``unblock``, so the question quotes it (:func:`unstuck.decide.prompts.user_action`).
        credential_changes: what the call would change in credentials, scopes, identities
            or permissions (:func:`unstuck.commands.credentials.credential_changes`); refused while an
            ``auth`` or ``permission`` blocker is open, unless the configuration allows the
            row by name.

    Returns:
        ``Dispatch`` or ``Refuse`` (with a not-executed situation whose source is
        ``unstuck``), and the state with the call counted (and the refusal kept for the
        question).
    """
    counted = _counted(state)
    carried = sorted(t for t in state.tainted if t in call.arguments_json) if state.tainted else ()
    if carried:
        refusal = Situation(Kind.INJECTED_INSTRUCTION, subject, source=Source.UNSTUCK,
                            detail=prompts.INJECTED_REFUSAL.format(what=", ".join(carried)))
        return _refuse(call, counted, refusal)
    if subject in state.skipped:
        refusal = Situation(Kind.PERMISSION, subject, source=Source.UNSTUCK,
                            detail=prompts.SKIPPED_REFUSAL.format(subject=subject))
        return _refuse(call, counted, refusal)
    held = state.unknown_effects.get(call_key(call)) if state.unknown_effects else None
    if held is not None:  # it may have taken effect already: the user decides, never a resend
        return _refuse(call, counted, Situation(Kind.PERMISSION, subject, source=Source.UNSTUCK, detail=held))
    if interactive and state.unattended:
        fix = None if without_wait is None or isinstance(without_wait, str) else without_wait.command
        if waits_for is None:
            detail = prompts.UNATTENDED_REFUSAL.format(tool=call.tool, subject=subject)
        elif without_wait is not None:
            shown = without_wait if isinstance(without_wait, str) else f"{without_wait.command} ({without_wait.source})"
            detail = prompts.UNATTENDED_TERMINAL_REFUSAL.format(waits_for=waits_for, fix=shown)
        else:
            detail = prompts.UNATTENDED_CALL_REFUSAL.format(waits_for=waits_for)
            fix = None
        refusal = Situation(Kind.PERMISSION, subject, interactive=True, source=Source.UNSTUCK, detail=detail,
                            unblock=fix)
        return _refuse(call, counted, refusal)
    guarding = next((b for b in state.open_blockers.values() if b.situation.kind in _CREDENTIAL_BLOCKERS
                     and not b.situation.is_refusal), None) if state.open_blockers and credential_changes else None
    changes = [c for c in credential_changes if c.name not in state.config.allowed_credential_changes
               ] if guarding is not None else []
    if guarding is not None and changes:
        change = changes[0]
        refusal = Situation(Kind.PERMISSION, subject, source=Source.UNSTUCK, detail=prompts.CREDENTIAL_REFUSAL.format(
            command=prompts.excerpt(change.command, 120), why=change.why, name=change.name,
            subject=guarding.subject, kind=guarding.situation.kind.value))
        return _refuse(call, counted, refusal)
    return Dispatch(call), counted


@cheap
@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What happened to one call, as :func:`after_result` reads it.

    Attributes:
        subject: what the call affected (from the tool spec; the tool's name otherwise).
        situation: the declared situation if the tool gave one, else the inferred one, else
            ``None`` (a refusal's own situation for a refused call).
        ok: the call did what was asked.
        executed: ``False`` for a refused call.
        probe: the loop ran this call as a probe; probes are never charged.
        retry: the loop ran this call again after a wait; retries are never charged.
        auto_retry: the loop may run this call again by itself (a read-only, non-interactive
            tool: repeating it cannot repeat a side effect). Otherwise a retryable failure is
            handed to the model with the transient guidance, and only its own repeats of the
            same call count as retries.
        exempt: subjects of blockers that first opened earlier in the same model reply: the
            model chose this call before it could see their guidance, so it is not charged to
            them (it is still charged to every other open blocker, and a refusal is always
            charged: Rule 1).
        unknown_tool: the call named a tool that is not in the tool set.
        interactive: the policy saw the call as a hand-off to a person (the tool, or its
            command line).
    """

    subject: str
    situation: Situation | None
    ok: bool
    executed: bool = True
    probe: bool = False
    retry: bool = False
    auto_retry: bool = False
    exempt: frozenset[str] = frozenset()
    unknown_tool: bool = False
    interactive: bool = False

    @property
    def failed(self) -> bool:
        """The call failed or was refused."""
        return not self.ok or not self.executed

    @property
    def clean(self) -> bool:
        """The call ran, did what was asked, and its result carries no situation."""
        return self.ok and self.executed and self.situation is None

    @property
    def model_call(self) -> bool:
        """The model asked for this call (not the loop's probe or retry)."""
        return not self.probe and not self.retry

    @property
    def effect_unknown(self) -> bool:
        """The call may have taken effect although no result came back: it was sent to a tool
        the guard may not send it to again by itself (not ``auto_retry``: a write that is not
        idempotent, :attr:`unstuck.toolkit.specs.ToolSpec.retry_safe`), it is no hand-off to a person,
        and it ran out of time (``timeout``: the lost response of DESIGN.md, "effect intent").
        A tool's own failing answer (an exit status, an error body) is an outcome, not this."""
        situation = self.situation
        return (self.executed and not self.probe and not self.auto_retry and not self.interactive
                and situation is not None and situation.kind in _NO_ANSWER and not situation.interactive)


@dataclass(slots=True)
class _Books:
    """The working copy of a state's books while one result is assessed (private to this
    module; :func:`after_result` returns it frozen again)."""

    blockers: dict[str, OpenBlocker]
    skipped: dict[str, OpenBlocker]
    settled: dict[str, OpenBlocker]
    retries: dict[tuple[str, Kind], int]
    tainted: frozenset[str]
    repeat: Repeat
    unknown_tools: int
    unknown_effects: dict[str, str] = field(default_factory=dict)
    opened: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    charged: list[str] = field(default_factory=list)
    stuck: OpenBlocker | None = None


#: Options that ask a program for its help or its version: it prints them and exits without
#: doing anything else (GNU Coding Standards 4.8, "Standards for Command Line Interfaces":
#: ``--version`` and ``--help``; the single-dash forms of Java-era tools and Go's flag package).
_HELP_OR_VERSION = frozenset({"--help", "--version", "-help", "-version", "--usage", "-?"})
#: The same as a program's first operand (``gh help``, ``git help``, ``kubectl version``: the
#: help and version subcommands of cobra, click and git) or as its only argument (``-h``, ``-V``:
#: elsewhere these may mean "human-readable" or "verbose").
_HELP_OR_VERSION_WORDS = frozenset({"help", "version"})
_HELP_OR_VERSION_ALONE = frozenset({"-h", "-V", "-v"})
#: The longest argument read as a command line when looking for the blocked program's runs.
_COMMAND_CHARS = 4096


def _runs_of(call: ToolCall, program: str) -> list[tuple[str, ...]]:
    """The arguments of every run of ``program`` (a base name) in the command lines among
    ``call``'s string arguments (``gh pr list`` in ``cd repo && gh pr list``)."""
    from unstuck.commands.parse import parse_command_line  # a command-line reader, loaded when needed

    try:
        arguments = call.arguments  # the call's arguments, parsed once for all who read them
    except (ValueError, RecursionError):
        return []
    runs: list[tuple[str, ...]] = []
    for value in arguments.values() if isinstance(arguments, dict) else ():
        if isinstance(value, str) and 0 < len(value) <= _COMMAND_CHARS and program in value:
            runs.extend(c.args for c in parse_command_line(value).commands if c.program == program)
    return runs


def _operand(args: tuple[str, ...]) -> str:
    """The first word of ``args`` that is not an option ("" when none)."""
    return next((word for word in args if not word.startswith("-")), "")


def _asks_help_or_version(args: tuple[str, ...]) -> bool:
    return (any(word in _HELP_OR_VERSION for word in args) or _operand(args) in _HELP_OR_VERSION_WORDS
            or (len(args) == 1 and args[0] in _HELP_OR_VERSION_ALONE))


def _reach(call: ToolCall, subject: str) -> str:
    """What ``call`` exercises on ``subject``: the first operand of its first run of it ("" when
    it runs it with none, or does not run it)."""
    runs = _runs_of(call, subject)
    return _operand(runs[0]) if runs else ""


def _exercises(call: ToolCall, blocker: OpenBlocker) -> bool:
    """Whether a success of ``call`` on ``blocker``'s subject exercises what was refused, so that
    it may close it (DESIGN.md, "blocker": a call that exercises what was refused succeeds, not
    ``--version`` or help):

    * its probe (the declared probe's tool and arguments) does;
    * a run of the blocked program that asks for its help or its version never does, nor a run
      of it on another operand than the call that opened the blocker (``gh config list`` after
      ``gh pr create``; an agent's own ``acme login`` that merely exits 0 after ``acme deploy``);
    * a call that does not run the blocked program (a tool whose subject is the path or host
      itself) does: the subject is what it touched.
    """
    probe = blocker.situation.probe
    if probe is not None and probe.tool == call.tool and call_key(ToolCall("", probe.tool, probe.arguments_json)) \
            == call_key(call):
        return True
    runs = _runs_of(call, blocker.subject)
    if any(_asks_help_or_version(args) for args in runs):
        return False
    if not runs or not blocker.reach:
        return True
    return any(_operand(args) == blocker.reach for args in runs)


def _close_on_success(books: _Books, call: ToolCall, outcome: CallOutcome) -> None:
    """A clean result on a blocker's subject that exercises what was refused
    (:func:`_exercises`) closes it (its count is kept in ``settled``, in case the same kind
    reopens) and clears the subject's retry counts. A clean help or version call, or one that
    touches something else of the blocked program, leaves it open and is not charged."""
    if not outcome.clean:
        return
    blocker = books.blockers.get(outcome.subject)
    if blocker is not None and blocker.reach is not None and not _exercises(call, blocker):
        return
    if blocker is not None:
        books.settled[outcome.subject] = books.blockers.pop(outcome.subject)
        books.closed.append(outcome.subject)
    if books.retries:
        books.retries = {key: n for key, n in books.retries.items() if key[0] != outcome.subject}


def _schedule_retry(books: _Books, outcome: CallOutcome) -> tuple[float | None, bool]:
    """The wait before retrying a retryable transient result (:func:`unstuck.decide.retry.next_retry`),
    counted per (subject, kind); and whether the result is a transient kind that waiting will
    not fix (retries used up, a wait past the cap, or not retryable at all: "is the docker
    daemon running?"), which then blocks its subject.

    A subject whose blocker a mere success closed, failing the same way again, is not waited
    on again (it was waited out before)."""
    situation = outcome.situation
    if situation is None or outcome.probe:
        return None, False
    key = (situation.subject, situation.kind)
    closed_before = books.settled.get(situation.subject)
    waited_out = closed_before is not None and closed_before.situation.kind is situation.kind
    wait = None
    transient = waitable(situation) and not situation.interactive
    if transient and not waited_out:
        wait = next_retry(situation, books.retries.get(key, 0))
    if wait is not None:
        books.retries[key] = books.retries.get(key, 0) + 1
    exhausted = wait is None and (transient or situation.kind_class is KindClass.TRANSIENT)
    return wait, exhausted


def _charge_workarounds(books: _Books, outcome: CallOutcome) -> None:
    """Rule 2: a failing or refused model call, or one returning a blocker's kind, is charged
    to every open blocker (except those it is exempt from) and to a skipped subject it is on."""
    if not outcome.model_call:
        return
    situation = outcome.situation
    for book in (books.blockers, books.skipped):
        for key, blocker in list(book.items()) if book else ():
            same_kind = situation is not None and situation.kind is blocker.situation.kind
            if (outcome.executed and key in outcome.exempt) or (book is books.skipped and key != outcome.subject):
                continue  # a skipped subject is charged only by calls on it
            if outcome.failed or same_kind:
                book[key] = _charged(blocker)
                books.charged.append(key)


def _charged(blocker: OpenBlocker) -> OpenBlocker:
    """``replace(blocker, workarounds=blocker.workarounds + 1)``, built directly (every
    failing call beside an open blocker makes one)."""
    return OpenBlocker(blocker.situation, blocker.opened_at_call, blocker.workarounds + 1, blocker.budget,
                       blocker.reason, blocker.evidence, blocker.opened_by, blocker.reach)


def _opens(situation: Situation, books: _Books, outcome: CallOutcome, exhausted_transient: bool) -> bool:
    if situation.subject in books.skipped:
        return False
    if outcome.probe and situation.subject not in books.blockers:
        return False  # a probe only confirms or clears a blocker already open
    blocking = situation.is_blocker or exhausted_transient or (situation.interactive and outcome.executed)
    if not blocking:
        return False
    if situation.is_refusal:
        # unstuck's own refusal opens a blocker only when nothing real is open: it says what
        # this run may do, never what the machine is
        return not any(not b.situation.is_refusal for b in books.blockers.values())
    # While a blocker is open, an *inferred* blocker on another subject is a failed workaround
    # (brew, snap, curl tried in place of a missing gh), charged already, not a new question.
    # A declared one on another subject is the tool's own word and opens (seed 000 §8: budgets
    # count per subject). What counts as worked around is :func:`_worked_around`'s.
    return situation.is_declared or not _worked_around(situation, books, outcome)


def _worked_around(situation: Situation, books: _Books, outcome: CallOutcome) -> bool:
    """Whether an inferred blocker may be the fallout of working around something else, so
    that it is charged there and opens no question of its own.

    Something is worked around when it stops the agent and the agent, having seen it, tries
    another way: an open blocker on another subject (``ping`` missing while the network is
    down, ``brew`` refused while gh is missing), one a mere success closed (``select 1``
    works while writes stay locked), or another subject still being waited on (``pkill``
    refused while a lock's holder lives). Two things never are:

    * a sign-in failure (``auth``): that a program is not signed in is a fact of the user's
      setup, whatever else fails beside it, and the one a person must act on; it opens its
      own blocker beside a 503 as beside anything else, in one reply or across replies;
    * a blocker first opened by an earlier call of the *same* reply (``outcome.exempt``): the
      model chose this call before it saw that result (as the charging rule says).
    """
    if situation.kind is Kind.AUTH:
        return False
    subject = situation.subject
    return (
        any(key != subject and key not in outcome.exempt and not b.situation.is_refusal
            for key, b in books.blockers.items())
        or any(key != subject for key in books.settled)
        or any(key[0] != subject for key in books.retries)
    )


def _outranks(new: Situation, current: Situation) -> bool:
    """Declared beats inferred beats unstuck's refusal; a declaration with the exact unblock
    beats one without."""
    rank = {Source.UNSTUCK: 0, Source.INFERRED: 1, Source.DECLARED: 2}
    if rank[new.source] != rank[current.source]:
        return rank[new.source] > rank[current.source]
    return new.is_declared and bool(new.unblock) and not current.unblock


def _open_blocker(
    books: _Books, state: RecoveryState, call: ToolCall, outcome: CallOutcome, exhausted_transient: bool
) -> None:
    """Open a blocker on the result's subject, or upgrade the one open there (declared beats
    inferred beats refusal). The same blocker again after a mere success resumes its count."""
    situation = outcome.situation
    if situation is None or not _opens(situation, books, outcome, exhausted_transient):
        return
    current = books.blockers.get(situation.subject)
    if current is None:
        earlier = books.settled.pop(situation.subject, None)
        if earlier is not None and earlier.situation.kind is situation.kind:
            keep = _outranks(earlier.situation, situation)
            books.blockers[situation.subject] = replace(
                earlier,
                situation=earlier.situation if keep else situation,
                workarounds=earlier.workarounds + 1,
                budget=earlier.budget if keep else state.config.budget_for(situation),
            )
            _corroborate(books, state, call, outcome)
        else:
            books.blockers[situation.subject] = OpenBlocker(
                situation, state.calls - 1, 0, state.config.budget_for(situation),
                opened_by=call_key(call), reach=_reach(call, situation.subject),
            )
        books.opened.append(situation.subject)
    elif _outranks(situation, current.situation):
        books.blockers[situation.subject] = replace(
            current, situation=situation, budget=state.config.budget_for(situation)
        )
    else:
        _corroborate(books, state, call, outcome)


def _corroborate(books: _Books, state: RecoveryState, call: ToolCall, outcome: CallOutcome) -> None:
    """Repeated inferred evidence is as sure as a declaration: an inferred blocker whose kind
    another model call (not the one that opened it, nor a probe or a retry of it) meets again on
    the same subject gets the declared budget (:attr:`PolicyConfig.max_workarounds_after_blocker`).
    The inferred budget is larger only because one reading of generic text may be wrong
    (DESIGN.md, "Defaults"); two calls that fail the same way on the same subject are not one
    reading (five different ways of writing into a place that refused the first)."""
    situation = outcome.situation
    if situation is None or not outcome.model_call or situation.source is not Source.INFERRED:
        return
    current = books.blockers.get(situation.subject)
    if (current is None or current.situation.source is not Source.INFERRED or current.situation.kind
            is not situation.kind or not current.opened_by or current.opened_by == call_key(call)):
        return
    declared = state.config.max_workarounds_after_blocker
    if current.budget > declared:
        books.blockers[situation.subject] = replace(current, budget=declared)


def _taint_addresses(books: _Books, outcome: CallOutcome) -> None:
    """An executed result flagged ``injected_instruction``: the addresses it names are tainted
    (seed 000 section 3.4), so a later call carrying one is refused."""
    situation = outcome.situation
    if situation is not None and situation.kind is Kind.INJECTED_INSTRUCTION and outcome.executed:
        books.tainted = books.tainted | frozenset(
            found.rstrip(".,;:") for found in _ADDRESS.findall(situation.detail))


def _count_repetition(books: _Books, state: RecoveryState, call: ToolCall, outcome: CallOutcome) -> None:
    """Repetition has authority (DESIGN.md, "Defaults"): the same model call failing
    ``config.repetition`` times in a row, or ``config.unknown_tool_calls`` calls to tools
    that are not in the tool set, make the turn stuck. A retryable transient failure is the
    retry rule's to count; any success ends the run."""
    if not outcome.model_call:
        return
    situation = outcome.situation
    config = state.config
    if outcome.unknown_tool:
        books.unknown_tools += 1
        if books.unknown_tools >= config.unknown_tool_calls and situation is not None:
            books.stuck = OpenBlocker(situation, state.calls - 1, books.unknown_tools, config.unknown_tool_calls - 1,
                                      EscalationReason.UNKNOWN_TOOL, situation.detail)
    waiting = situation is not None and waitable(situation) and not situation.interactive
    if not outcome.failed or waiting:
        books.repeat = _NO_RUN
        return
    key = call_key(call)
    failures = books.repeat.failures + 1 if books.repeat.key == key else 1
    streak = books.repeat.streak + 1
    books.repeat = Repeat(key, failures, streak)
    failure = situation or Situation(Kind.EXECUTION_ERROR, outcome.subject, source=Source.INFERRED)
    if not _PLAIN_SUBJECT.fullmatch(failure.subject):
        failure = replace(failure, subject=call.tool)  # a model-chosen name is evidence, never unstuck's words
    if failures >= config.repetition and books.stuck is None:
        books.stuck = OpenBlocker(failure, state.calls - 1, failures, config.repetition - 1,
                                  EscalationReason.REPEATED_FAILURE, failure.detail)
    elif streak >= config.failures_in_a_row and books.stuck is None:
        books.stuck = OpenBlocker(failure, state.calls - 1, streak, config.failures_in_a_row - 1,
                                  EscalationReason.FAILING_STREAK, failure.detail)


def _hold_unknown_effect(books: _Books, call: ToolCall, outcome: CallOutcome) -> None:
    """A call that may have taken effect although no result came back
    (:attr:`CallOutcome.effect_unknown`) is held: the identical call is refused for the rest of
    the turn (:func:`before_dispatch`), as a write made before an interruption is; the user
    lifts it (:func:`release_unknown_effects`). An effect runs at most once (DESIGN.md)."""
    situation = outcome.situation
    if situation is None or not outcome.effect_unknown:
        return
    tool = call.tool if _PLAIN_SUBJECT.fullmatch(call.tool) else "tool"  # a model-chosen name is never unstuck's words
    books.unknown_effects[call_key(call)] = prompts.UNKNOWN_EFFECT_REFUSAL.format(tool=tool, kind=situation.kind.value)


def _canonical(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)  # 1, 1.0 and 1e0 are one JSON number (RFC 8259 section 6: no int/float split)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def call_key(call: ToolCall) -> str:
    """What makes two calls "the same call" for the repetition rule and the held-write check:
    the tool and its arguments with keys sorted, whitespace runs in strings collapsed
    (``false`` and `` false  `` are one call) and integral numbers written one way (``1``,
    ``1.0`` and ``1e0`` are one call). A string and a number stay different calls, as a
    tool's schema tells them apart. A secret in the arguments is masked
    (:func:`unstuck.core.redact.redact_value`), so a key is the same in memory, in saved guard
    state and in the journal, which keep no secret.

    A key depends on the tool and the arguments text alone, so short ones are remembered
    (:data:`_KEYS_KEPT` of them, tool and arguments up to :data:`_KEY_CHARS` characters): the rules ask
    for the key of one call several times."""
    if len(call.arguments_json) + len(call.tool) > _KEY_CHARS:
        return _call_key(call.tool, call.arguments_json)
    return _remembered_key(call.tool, call.arguments_json)


#: Calls whose keys are remembered (:func:`call_key`), at most.
_KEYS_KEPT = 512
#: Longer arguments texts have their key computed each time.
_KEY_CHARS = 4096


def _call_key(tool: str, arguments_json: str) -> str:
    try:
        arguments = json.loads(arguments_json)
    except (ValueError, RecursionError):
        return f"{tool}\x00{redact_document(arguments_json)}"
    return f"{tool}\x00{json.dumps(redact_value(_canonical(arguments)), sort_keys=True)}"


_remembered_key = functools.lru_cache(maxsize=_KEYS_KEPT)(_call_key)


@functools.lru_cache(maxsize=1024)
def _plain_name(name: str) -> bool:
    """Whether a tool's ``name`` is one plain token (:data:`_PLAIN_SUBJECT`) unstuck may say in
    its own words (remembered: a turn names few tools, and every call asks)."""
    return _PLAIN_SUBJECT.fullmatch(name) is not None


#: The decision for a result with no guidance: one value, shared.
_NO_GUIDANCE = Continue(None)


def _first_real(blockers: list[OpenBlocker], open_now: Mapping[str, OpenBlocker]) -> OpenBlocker:
    """The blocker to ask about: the first real one (a tool's word, not unstuck's refusal) by
    when it opened, among ``blockers`` when one of them is real, else the first given. One
    that needs the user goes before one that waiting ran out on (a transient kind: a 503 the
    user can only report), so a sign-in failure beside a failing server is what is asked."""
    real = sorted((b for b in open_now.values() if not b.situation.is_refusal),
                  key=lambda b: (b.situation.kind_class is KindClass.TRANSIENT, b.opened_at_call))
    if real:
        named = {b.subject for b in blockers}
        needs_user = [b for b in real if b.situation.kind_class is not KindClass.TRANSIENT]
        among = needs_user or real
        return next((b for b in among if b.subject in named), among[0])
    return blockers[0]


def _guidance(situation: Situation | None, blockers: Mapping[str, OpenBlocker], charged: list[str],
              unknown_effect: str | None = None, write: str | None = None) -> str | None:
    """The guidance for the model: the recovery prompt of the blocker the result is on, else
    the generic one for its kind and a reminder of a blocker it was charged to. For a call that
    may have taken effect (``unknown_effect``: the tool's name), that is said first, and the
    transient "waiting may fix it" is not: no resend is invited. A transient failure of a call
    the guard may not resend itself (``write``: the tool's name) gets
    :func:`unstuck.decide.prompts.transient_write` instead of the plain "retry later"."""
    focus = None
    if situation is not None and situation.subject in blockers:
        opened_by_kind = blockers[situation.subject].situation.kind is situation.kind
        focus = blockers[situation.subject] if situation.is_blocker or opened_by_kind else None
    parts = [prompts.unknown_effect(situation, unknown_effect)] if situation is not None and unknown_effect else []
    if focus is not None:
        return "\n".join([*parts, prompts.blocker_recovery(focus.situation, focus.remaining)])
    if situation is not None and not parts:
        transient = situation.retryable or situation.kind_class is KindClass.TRANSIENT
        parts.append(prompts.transient_write(situation, write) if write and transient
                     else prompts.guidance_for(situation))
    if charged:
        reminded = blockers[charged[0]]
        parts.append(prompts.blocker_recovery(reminded.situation, reminded.remaining))
    return "\n".join(parts) or None


def after_result(state: RecoveryState, call: ToolCall, outcome: CallOutcome) -> Assessment:
    """Rules 2 and 3, retries and repetition: book one result and choose what happens next.

    Args:
        state: the turn's state (the call already counted by :func:`before_dispatch` when
            the model asked for it).
        call: the call whose result this is.
        outcome: what happened (:class:`CallOutcome`).

    Returns:
        An :class:`Assessment`: ``Escalate`` when a blocker's count passed its budget or the
        turn is stuck (asking about the first real blocker when one is open); ``RetryAfter``
        when waiting may fix the result; otherwise ``Continue`` with the recovery or generic
        guidance for the model.
    """
    books = _Books(_editable(state.open_blockers), _editable(state.skipped), _editable(state.settled),
                   _editable(state.retries), state.tainted, state.repeat, state.unknown_tools,
                   _editable(state.unknown_effects))
    _close_on_success(books, call, outcome)
    wait, exhausted_transient = _schedule_retry(books, outcome)
    _charge_workarounds(books, outcome)
    _open_blocker(books, state, call, outcome, exhausted_transient)
    _taint_addresses(books, outcome)
    _hold_unknown_effect(books, call, outcome)
    _count_repetition(books, state, call, outcome)
    new_state = RecoveryState(
        unattended=state.unattended, config=state.config, open_blockers=_kept(books.blockers),
        skipped=_kept(books.skipped), settled=_kept(books.settled), retries=_kept(books.retries),
        tainted=books.tainted, calls=state.calls, repeat=books.repeat, unknown_tools=books.unknown_tools,
        refusals=state.refusals, unknown_effects=_kept(books.unknown_effects),
    )
    changed = (tuple(books.opened), tuple(books.closed), tuple(books.charged))
    exhausted = [b for b in (*books.blockers.values(), *books.skipped.values()) if b.exhausted
                 ] if books.blockers or books.skipped else []
    if exhausted:
        return Assessment(Escalate(_first_real(exhausted, books.blockers)), new_state, *changed)
    if books.stuck is not None:
        real = [b for b in books.blockers.values() if not b.situation.is_refusal]
        chosen = _first_real(real, books.blockers) if real else books.stuck
        return Assessment(Escalate(chosen), new_state, *changed)
    situation = outcome.situation
    unknown = outcome.effect_unknown
    if wait is not None and situation is not None and outcome.auto_retry and not books.blockers:
        attempt = books.retries[(situation.subject, situation.kind)]
        return Assessment(RetryAfter(wait, attempt, situation.retry_after_s is not None), new_state, *changed)
    # a model-chosen name is never unstuck's words
    named = call.tool if _plain_name(call.tool) else "the tool"
    tool = named if unknown else None
    write = named if (outcome.executed and outcome.model_call and not outcome.auto_retry
                      and not outcome.interactive) else None
    guidance = _guidance(situation, {**books.skipped, **books.blockers}, books.charged, tool, write)
    if outcome.model_call and books.repeat.failures == state.config.repetition - 1 and books.repeat.failures >= 1:
        warning = prompts.REPEAT_WARNING.format(failures=books.repeat.failures)
        guidance = f"{guidance}\n{warning}" if guidance else warning
    return Assessment(Continue(guidance) if guidance is not None else _NO_GUIDANCE, new_state, *changed)


def open_known_blocker(state: RecoveryState, situation: Situation, at_call: int) -> RecoveryState:
    """A remembered blocker whose probe says it still holds: open it with its budget spent,
    so the turn asks at once and no call is wasted on it (lessons, seed 000 section 3.4)."""
    config = state.config
    budget = config.max_workarounds_after_blocker if situation.is_declared else (
        config.max_workarounds_after_inferred_blocker)
    blocker = OpenBlocker(situation, at_call, workarounds=budget, budget=budget)
    return replace(state, open_blockers=types.MappingProxyType({**state.open_blockers, situation.subject: blocker}))


def close_blocker(state: RecoveryState, subject: str) -> RecoveryState:
    """Close the blocker on ``subject`` on real evidence (a clean probe, or the user answered):
    its count is reset, nothing is carried over, and a skip of ``subject`` is lifted.
    """

    def without(book: Mapping[str, OpenBlocker]) -> Mapping[str, OpenBlocker]:
        return types.MappingProxyType({k: v for k, v in book.items() if k != subject})

    return replace(
        state,
        open_blockers=without(state.open_blockers),
        settled=without(state.settled),
        skipped=without(state.skipped),
        repeat=Repeat(),
    )


def release_unknown_effects(state: RecoveryState, named: Iterable[str]) -> RecoveryState:
    """The user answered a question that named these refusals (``named``: the blocker's
    detail and the refusals listed beside it, :data:`RecoveryState.refusals`): the calls held
    because their effect is unknown (:attr:`RecoveryState.unknown_effects`) whose refusal was
    named may run again. A held call the question did not name stays held: the user decided
    nothing about it."""
    seen = frozenset(named)
    kept = {key: refusal for key, refusal in state.unknown_effects.items() if refusal not in seen}
    return replace(state, unknown_effects=types.MappingProxyType(kept))


def skip_subject(state: RecoveryState, subject: str) -> RecoveryState:
    """The user chose "Skip it": close the blocker and refuse further calls on ``subject``.

    Refusals of calls on a skipped subject are charged to it with the declared budget; past
    it, the turn escalates again rather than loop on refusals.
    """
    blocker = state.open_blockers.get(subject) or state.skipped.get(subject)
    closed = close_blocker(state, subject)
    if blocker is None:
        return closed
    record = replace(blocker, workarounds=0, budget=state.config.max_workarounds_after_blocker)
    return replace(closed, skipped=types.MappingProxyType({**closed.skipped, subject: record}))

