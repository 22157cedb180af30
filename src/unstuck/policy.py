"""Pure decisions of the loop: before a call is dispatched, and after its result.

Seed 000 section 3.3 is the source of the four rules; DESIGN.md of the defaults.

* **Rule 1.** A call to an interactive tool is refused before dispatch when the run is
  unattended. The refusal is an ordinary result (not executed, kind ``permission``) and
  counts against the budget of every open blocker.
* **Rule 2.** After a blocker opened on subject S, each further call that fails, is refused,
  or returns the same kind increments S's workaround count; successes and probes do not.
  When the count passes the budget (2 after a declared blocker, 4 after an inferred one) the
  loop stops dispatching tools and escalates. A blocker closes on a clean probe, a success
  on S, or the user's answer; closing resets its count.
* **Rule 3.** A result carrying a blocker gets the blocker recovery prompt (see
  :mod:`unstuck.prompts`); self-fixable errors keep the generic "correct your plan" prompt.
* **Rule 4** (the escalation's three parts) lives in :mod:`unstuck.escalation`.
* **Retries** (DESIGN.md): a retryable transient result is retried by the loop after the
  wait :func:`unstuck.retry.next_retry` gives; once a kind's retries are used up, or the
  server's wait is beyond the cap, it becomes a blocker on its subject.

Nothing here sleeps, writes, reads a clock or calls a tool: each function takes a
:class:`RecoveryState` and returns a decision with the next state.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from unstuck import prompts
from unstuck.retry import next_retry, waitable
from unstuck.situations import Kind, KindClass, Situation, Source
from unstuck.tools import ToolCall

__all__ = [
    "Assessment",
    "Continue",
    "Dispatch",
    "Escalate",
    "OpenBlocker",
    "PolicyConfig",
    "RecoveryState",
    "Refuse",
    "RetryAfter",
    "after_result",
    "before_dispatch",
    "close_blocker",
    "open_known_blocker",
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
    """

    max_workarounds_after_blocker: int = 2
    max_workarounds_after_inferred_blocker: int = 4

    def __post_init__(self) -> None:
        for name in ("max_workarounds_after_blocker", "max_workarounds_after_inferred_blocker"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"PolicyConfig.{name} must be a whole number of calls, 0 or more; got {value!r}")

    def budget_for(self, situation: Situation) -> int:
        """The workaround budget for a blocker opened by ``situation``."""
        if situation.source is Source.DECLARED:
            return self.max_workarounds_after_blocker
        return self.max_workarounds_after_inferred_blocker


@dataclass(frozen=True, slots=True)
class OpenBlocker:
    """A blocker open on one subject during a turn.

    Attributes:
        situation: the situation that opened it (upgraded when a declared one arrives later).
        opened_at_call: index (0-based) of the call whose result opened it.
        workarounds: failing or refused calls charged since it opened.
        budget: the workaround budget that applies (from :class:`PolicyConfig`).
    """

    situation: Situation
    opened_at_call: int
    workarounds: int = 0
    budget: int = 2

    @property
    def subject(self) -> str:
        """The subject the blocker is on."""
        return self.situation.subject

    @property
    def remaining(self) -> int:
        """Further failing or refused calls allowed before escalation (never negative)."""
        return max(self.budget - self.workarounds, 0)

    @property
    def exhausted(self) -> bool:
        """True when the count has passed the budget: the turn must escalate."""
        return self.workarounds > self.budget


_EMPTY: Mapping[str, OpenBlocker] = types.MappingProxyType({})
#: Addresses an injected instruction may send the agent to: URLs and e-mail addresses.
_ADDRESS = re.compile(r"https?://[^\s'\"<>|)\]]+|[\w.+-]+@[\w-]+\.[\w.-]+")


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
    """

    unattended: bool
    config: PolicyConfig = field(default_factory=PolicyConfig)
    open_blockers: Mapping[str, OpenBlocker] = field(default_factory=lambda: _EMPTY)
    skipped: Mapping[str, OpenBlocker] = field(default_factory=lambda: _EMPTY)
    settled: Mapping[str, OpenBlocker] = field(default_factory=lambda: _EMPTY)
    retries: Mapping[tuple[str, Kind], int] = field(default_factory=lambda: types.MappingProxyType({}))
    tainted: frozenset[str] = frozenset()
    calls: int = 0

    @property
    def skipped_subjects(self) -> frozenset[str]:
        """Subjects the user chose to skip."""
        return frozenset(self.skipped)


# ----------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Run the call."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not run the call; hand the model ``situation`` as an ordinary not-executed result."""

    call: ToolCall
    situation: Situation
    reason: str


@dataclass(frozen=True, slots=True)
class Continue:
    """Hand the result to the model, with ``guidance`` appended when it is not ``None``."""

    guidance: str | None = None


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Wait ``delay_s`` seconds on the turn's clock, then run the same call again.
    ``server_said`` is true when the wait is the server's own (Retry-After): it is never
    jittered below what the server asked."""

    delay_s: float
    attempt: int
    server_said: bool = False


@dataclass(frozen=True, slots=True)
class Escalate:
    """Stop dispatching tools; end the turn with the escalation for ``blocker``."""

    blocker: OpenBlocker


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


def before_dispatch(
    state: RecoveryState, call: ToolCall, *, subject: str, interactive: bool, waits_for: str | None = None
) -> tuple[Dispatch | Refuse, RecoveryState]:
    """Rule 1 and skipped subjects: decide whether ``call`` may run.

    Args:
        state: the turn's state.
        call: the call the model asked for.
        subject: what the call affects (from the tool spec).
        interactive: the tool's whole job is a hand-off to a person, or this call's command
            line would wait for one (the interactive-call catalogue, :mod:`unstuck.shell`).
        waits_for: what in the call waits for a person and why (``gh auth login --web``:
            "..."), named in the refusal; ``None`` when the whole tool is interactive.

    Returns:
        ``Dispatch`` or ``Refuse`` (with a not-executed ``permission`` situation), and the
        state with the call counted.
    """
    counted = replace(state, calls=state.calls + 1)
    carried = sorted(t for t in state.tainted if t in call.arguments_json)
    if carried:
        refusal = Situation(
            Kind.INJECTED_INSTRUCTION, subject, detail=prompts.INJECTED_REFUSAL.format(what=", ".join(carried))
        )
        return Refuse(call, refusal, refusal.detail), counted
    if subject in state.skipped:
        refusal = Situation(
            Kind.PERMISSION, subject, detail=prompts.SKIPPED_REFUSAL.format(subject=subject)
        )
        return Refuse(call, refusal, refusal.detail), counted
    if interactive and state.unattended:
        detail = (
            prompts.UNATTENDED_REFUSAL.format(tool=call.tool, subject=subject) if waits_for is None
            else prompts.UNATTENDED_CALL_REFUSAL.format(waits_for=waits_for)
        )
        refusal = Situation(Kind.PERMISSION, subject, interactive=True, detail=detail)
        return Refuse(call, refusal, refusal.detail), counted
    return Dispatch(call), counted


def _guidance(situation: Situation | None, blockers: Mapping[str, OpenBlocker], charged: list[str]) -> str | None:
    focus = None
    if situation is not None and situation.subject in blockers:
        opened_by_kind = blockers[situation.subject].situation.kind is situation.kind
        focus = blockers[situation.subject] if situation.is_blocker or opened_by_kind else None
    if focus is not None:
        return prompts.blocker_recovery(focus.situation, focus.remaining)
    parts = [prompts.guidance_for(situation)] if situation is not None else []
    if charged:
        reminded = blockers[charged[0]]
        parts.append(prompts.blocker_recovery(reminded.situation, reminded.remaining))
    return "\n".join(parts) or None


def after_result(
    state: RecoveryState,
    call: ToolCall,
    *,
    subject: str,
    situation: Situation | None,
    ok: bool,
    executed: bool = True,
    is_probe: bool = False,
    exempt: frozenset[str] = frozenset(),
    is_retry: bool = False,
    auto_retry: bool = False,
) -> Assessment:
    """Rules 2 and 3: book the result against open blockers and choose what happens next.

    Args:
        state: the turn's state (the call already counted by :func:`before_dispatch`).
        call: the call whose result this is.
        subject: what the call affects.
        situation: the declared situation if the tool gave one, else the inferred one, else
            ``None``.
        ok: the call did what was asked.
        executed: ``False`` for a refused call.
        is_probe: the loop ran this call as a probe; probes are never charged.
        exempt: subjects of blockers that first opened earlier in the same model reply: the
            model chose this call before it could see their guidance, so it is not charged to
            them (it is still charged to every other open blocker, and a refusal is always
            charged: Rule 1).
        is_retry: the loop ran this call again after a wait; retries are never charged.
        auto_retry: the loop may run this call again by itself (a read-only, non-interactive
            tool: repeating it cannot repeat a side effect). Otherwise a retryable failure is
            handed to the model with the transient guidance, and only its own repeats of the
            same call count as retries.

    Returns:
        An :class:`Assessment`: ``Escalate`` when a blocker's count passed its budget;
        ``RetryAfter`` when waiting may fix the result; otherwise ``Continue`` with the
        recovery or generic guidance for the model.
    """
    blockers = dict(state.open_blockers)
    skipped = dict(state.skipped)
    settled = dict(state.settled)
    opened: list[str] = []
    closed: list[str] = []
    charged: list[str] = []
    failed = not ok or not executed
    clean = ok and executed and situation is None

    if clean and subject in blockers:
        settled[subject] = blockers.pop(subject)
        closed.append(subject)

    retries = dict(state.retries)
    if clean:
        retries = {key: n for key, n in retries.items() if key[0] != subject}
    transient = waitable(situation) and not is_probe
    retry_key = (situation.subject, situation.kind) if situation is not None else None
    closed_before = settled.get(situation.subject) if situation is not None else None
    # Waited out before a mere success closed it: the same kind again means no new waiting.
    waited_out = closed_before is not None and retry_key is not None and closed_before.situation.kind is retry_key[1]
    wait = None
    if transient and not waited_out and retry_key is not None:
        wait = next_retry(situation, retries.get(retry_key, 0))
    # A transient kind that waiting will not fix (retries used up, a wait past the cap, or not
    # retryable at all: "is the docker daemon running?") blocks its subject.
    exhausted_transient = not is_probe and situation is not None and wait is None and (
        transient or situation.kind_class is KindClass.TRANSIENT
    )
    if wait is not None and retry_key is not None:
        retries[retry_key] = retries.get(retry_key, 0) + 1

    if not is_probe and not is_retry:
        for book in (blockers, skipped):
            for key, blocker in list(book.items()):
                same_kind = situation is not None and situation.kind is blocker.situation.kind
                if (executed and key in exempt) or (book is skipped and key != subject):
                    continue  # a skipped subject is charged only by calls on it
                if failed or same_kind:
                    book[key] = replace(blocker, workarounds=blocker.workarounds + 1)
                    charged.append(key)

    # While a blocker is open, an *inferred* blocker on another subject is a failed workaround
    # (brew, snap, curl tried in place of a missing gh), charged above, not a new question.
    # A declared one on another subject is the tool's own word and opens (seed 000 §8: budgets
    # count per subject).
    # A subject still being waited on (retries counted, not yet a blocker), or whose blocker a
    # mere success closed (``select 1`` works while writes stay locked), counts as open too.
    others_open = situation is not None and (
        any(key != situation.subject for key in (*blockers, *settled))
        or any(key[0] != situation.subject for key in retries)
    )
    opens_blocker = (
        situation is not None
        and (situation.is_blocker or exhausted_transient)
        and situation.subject not in skipped
        and not (is_probe and situation.subject not in blockers)
        and (situation.is_declared or not others_open)
    )
    if situation is not None and opens_blocker:
        current = blockers.get(situation.subject)
        if current is None:
            earlier = settled.pop(situation.subject, None)
            if earlier is not None and earlier.situation.kind is situation.kind:
                # The same blocker again after a mere success: resume its count, and keep the
                # tool's own declaration (and budget) over a vaguer inferred one.
                keep = earlier.situation.is_declared and not situation.is_declared
                blockers[situation.subject] = replace(
                    earlier,
                    situation=earlier.situation if keep else situation,
                    workarounds=earlier.workarounds + 1,
                    budget=earlier.budget if keep else state.config.budget_for(situation),
                )
            else:
                blockers[situation.subject] = OpenBlocker(
                    situation, state.calls - 1, 0, state.config.budget_for(situation)
                )
            opened.append(situation.subject)
        elif situation.is_declared and (
            not current.situation.is_declared or (situation.unblock and not current.situation.unblock)
        ):
            # Declared beats inferred, and a declaration with the exact unblock beats one
            # without (a policy refusal): adopt the tool's own words and its budget.
            blockers[situation.subject] = replace(
                current, situation=situation, budget=state.config.budget_for(situation)
            )

    tainted = state.tainted
    if situation is not None and situation.kind is Kind.INJECTED_INSTRUCTION and executed:
        tainted = tainted | frozenset(found.rstrip(".,;:") for found in _ADDRESS.findall(situation.detail))
    new_state = replace(
        state,
        retries=types.MappingProxyType(retries),
        tainted=tainted,
        open_blockers=types.MappingProxyType(blockers),
        skipped=types.MappingProxyType(skipped),
        settled=types.MappingProxyType(settled),
    )
    exhausted = [b for b in (*blockers.values(), *skipped.values()) if b.exhausted]
    if exhausted:
        return Assessment(Escalate(exhausted[0]), new_state, tuple(opened), tuple(closed), tuple(charged))
    if wait is not None and retry_key is not None and auto_retry and not blockers:  # no waiting on workarounds
        attempt = retries[retry_key]
        server_said = situation is not None and situation.retry_after_s is not None
        return Assessment(RetryAfter(wait, attempt, server_said), new_state, tuple(opened), tuple(closed),
                          tuple(charged))
    guidance = _guidance(situation, {**skipped, **blockers}, charged)
    return Assessment(Continue(guidance), new_state, tuple(opened), tuple(closed), tuple(charged))


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
    )


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

