"""The cost of blockers across sessions (issue 16, item 4; seed 000, section 3.5 and slice 4:
"cross-session reporting of wasted steps"), read from journals.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Pure aggregation: the only input is what :class:`unstuck.store.journal.Journal` objects return
through their public methods (turns, steps, recorded decisions, policy settings); the output
is frozen records. Nothing here writes, and nothing reads a clock.

Per turn (:func:`turn_cost`), the numbers are the eval's (:func:`unstuck.evals.runner.measure`,
:meth:`unstuck.decide.outcome.TurnResult.cost_line`), rebuilt from the journal:

* **the blocker a turn met**: the policy (:func:`unstuck.decide.policy.before_dispatch`,
  :func:`unstuck.decide.policy.after_result`) is folded over the journaled steps with the recorded
  decisions, as :func:`unstuck.loop.resume.rebuild_state` does. The turn *asked* at its first step
  whose journaled decision is ``escalate`` (the blocker the policy escalated on there), or at a
  recorded ``known`` decision (a lesson's probe said its blocker still holds:
  ``Guard._check_lesson``), or, for a turn that ended ``blocked`` otherwise (the model answered
  with the blocker still open), after its last step. A turn that never asked is counted on the
  first blocker its steps opened (the unguarded loop, a model that routed around it).
* **wasted steps**: the calls after the first signal (the first step whose situation has the
  blocker's subject and kind, else the step that opened it) up to and including the call after
  which the turn asked; probes and the loop's own retries excluded (``measure``: ``after``).
* **wasted seconds**: from the end of the first signal's call to the end of the call after which
  the turn asked (to the end of the last call for a turn that never asked), on the turn's clock
  (``StepRecord.started_s``/``duration_s``). ``measure`` ends at the guard's reading at the
  escalation, taken right after that call: the same instant up to the closing model call.
* **stopped early by a lesson**: the turn asked on a ``known`` decision, i.e. a remembered
  blocker whose probe, run before the first call on its subject, said it still holds (seed 000,
  3.4, "Retrieval": "Still blocked means escalate immediately, citing the lesson (0 wasted
  steps)"). **Steps saved** by such a turn: the median wasted steps of the turns in the same
  report that asked about the same subject and kind *without* a lesson, minus its own wasted
  steps (at least 0); unknown (``None``) when there is no such turn to compare with.

Across turns, per (subject, kind) in the order turns started (:func:`read_costs`): a blocker
*opens* at the first signal of a turn that met it and *closes* at the first later call on its
subject that succeeded (a clean probe included) in a turn that did not meet it again (DESIGN.md,
"blocker": it "closes when a probe comes back clean, a call on the subject succeeds, or the user
answers"); ``closed_after_s`` is the time between, in wall seconds (the turns' ``started_at``
plus the steps' offsets). A day is the UTC date a turn started.
"""

from __future__ import annotations

import datetime
import enum
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from unstuck.core.output import json_text
from unstuck.core.situations import Kind
from unstuck.decide import policy
from unstuck.decide.outcome import StepRecord, TurnStatus
from unstuck.decide.policy import CloseReason
from unstuck.store.journal import Journal, JournalDecision, JournalError, JournalTurn

__all__ = [
    "BlockerTotal",
    "CostReport",
    "DayCost",
    "Episode",
    "TurnCost",
    "day_of",
    "read_costs",
    "summarise",
    "turn_cost",
]

#: The decision ``Guard._check_lesson`` records when a lesson's probe says its blocker holds.
KNOWN = JournalDecision.KNOWN


def day_of(unix_s: float) -> datetime.date:
    """The UTC date of a Unix time in seconds."""
    return datetime.datetime.fromtimestamp(unix_s, datetime.UTC).date()


@dataclass(frozen=True, slots=True)
class TurnCost:
    """What one journaled turn paid for one blocker.

    Attributes:
        journal: the journal file the turn is in (its path as given).
        turn_id: the turn.
        started_at: when the turn started, Unix seconds.
        day: the UTC date of ``started_at``.
        subject / kind: the blocker the turn asked about (or, never asking, first met).
        asked: the turn escalated on it (a question ended or paused the turn).
        status: the turn's journaled status (``done``, ``blocked``, ``failed``, ``interrupted``,
            or ``running`` for one that has not ended).
        wasted_steps: calls after the first signal until asking (see the module doc).
        wasted_seconds: seconds from the first signal to asking, on the turn's clock.
        lesson: a lesson's probe stopped the turn (a ``known`` decision).
        signal_at: when the first signal's call ended, Unix seconds.
        guarded: the turn ran with unstuck's policy (the journal's ``turns.guarded``); an
            unguarded turn (an eval's baseline, ``run_turn(guarded=False)``) never asks.
    """

    journal: str
    turn_id: str
    started_at: float
    day: datetime.date
    subject: str
    kind: Kind
    asked: bool
    status: TurnStatus
    wasted_steps: int
    wasted_seconds: float
    lesson: bool
    signal_at: float
    guarded: bool = True


@dataclass(frozen=True, slots=True)
class Episode:
    """A blocker on one subject and kind, from the first turn that met it to the first later
    call on its subject that succeeded in a turn that did not meet it again.

    Attributes:
        subject / kind: the blocker.
        opened_at: end of the first signal's call in the first turn, Unix seconds.
        opened_turn: that turn's id.
        turns: turns that met it while it was open.
        closed_at: end of the call that closed it, Unix seconds; ``None`` while open.
        closed_turn: the turn of that call, or ``None``.
        closed_by: :class:`~unstuck.decide.policy.CloseReason` ``probe clean`` or ``call succeeded``,
            or ``None``.
    """

    subject: str
    kind: Kind
    opened_at: float
    opened_turn: str
    turns: int
    closed_at: float | None = None
    closed_turn: str | None = None
    closed_by: CloseReason | None = None

    @property
    def closed_after_s(self) -> float | None:
        """Seconds from opening to closing; ``None`` while open."""
        return None if self.closed_at is None else max(self.closed_at - self.opened_at, 0.0)


@dataclass(frozen=True, slots=True)
class DayCost:
    """One row of the report: one UTC day, one subject and kind.

    Attributes:
        blocked_turns: turns that met the blocker that day.
        asked_turns: of them, turns that asked.
        wasted_steps / wasted_seconds: summed over those turns (seconds on the turns' clocks).
        lesson_turns: turns a lesson stopped early.
        steps_saved: summed over the lesson turns whose saving is known, ``None`` when none is.
        closed_after_s: median time to close of the episodes that opened that day and closed
            (seconds), ``None`` when none did.
        still_open: episodes that opened that day and had not closed by the last turn read.
    """

    day: datetime.date
    subject: str
    kind: Kind
    blocked_turns: int
    asked_turns: int
    wasted_steps: int
    wasted_seconds: float
    lesson_turns: int
    steps_saved: float | None
    closed_after_s: float | None
    still_open: int


@dataclass(frozen=True, slots=True)
class BlockerTotal:
    """One subject and kind over the whole report (the top blockers), with the baseline that
    lesson savings are measured against (``None`` without a lesson-free turn that asked)."""

    subject: str
    kind: Kind
    blocked_turns: int
    wasted_steps: int
    wasted_seconds: float
    lesson_turns: int
    steps_saved: float | None
    baseline_steps: float | None


@dataclass(frozen=True, slots=True)
class CostReport:
    """The whole report: rows by day, subject and kind; totals, most wasted steps first; the
    turns and episodes they came from; the journals read and how many turns they held."""

    days: tuple[DayCost, ...]
    totals: tuple[BlockerTotal, ...]
    turns: tuple[TurnCost, ...]
    episodes: tuple[Episode, ...]
    journals: tuple[str, ...]
    turns_read: int
    since: datetime.date | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (dates as ISO strings, kinds, statuses and close reasons as their words,
        seconds as floats)."""
        def plain(record: object) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name in record.__slots__:  # type: ignore[attr-defined]
                value = getattr(record, name)
                out[name] = value.isoformat() if isinstance(value, datetime.date) else (
                    value.value if isinstance(value, enum.Enum) else value)
            return out

        return {
            "journals": list(self.journals), "turns_read": self.turns_read,
            "since": None if self.since is None else self.since.isoformat(),
            "days": [plain(d) for d in self.days], "totals": [plain(t) for t in self.totals],
            "turns": [plain(t) for t in self.turns],
            "episodes": [{**plain(e), "closed_after_s": e.closed_after_s} for e in self.episodes],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text, every string redacted
        (:func:`unstuck.core.output.json_text`)."""
        return json_text(self.to_dict(), indent=2)


@dataclass(frozen=True, slots=True)
class _Asked:
    blocker: policy.OpenBlocker
    last: int  # index of the last step before asking (inclusive); -1: before any step
    lesson: bool


def _outcome(step: StepRecord) -> policy.CallOutcome:
    return policy.CallOutcome(step.subject, step.situation, step.ok, step.dispatched, step.probe, step.retry,
                              step.auto_retry, frozenset(step.exempt))


def _fold(steps: Sequence[StepRecord], state: policy.RecoveryState,
          decisions: Sequence[tuple[int, JournalDecision, str]],
          ) -> tuple[_Asked | None, policy.OpenBlocker | None, int]:
    """The policy folded over ``steps`` (as :func:`unstuck.loop.resume.rebuild_state`): where the
    turn first asked and on what, the first blocker opened and at which step, and, when the
    turn never asked, the blocker still open at the end.

    Raises:
        ValueError: a decision whose action is not a :class:`JournalDecision` value (never
            counted as a ``close``).
    """
    answers: dict[int, list[tuple[JournalDecision, str]]] = {}
    for after, action, subject in decisions:
        answers.setdefault(after, []).append((JournalDecision(action), subject))
    asked: _Asked | None = None
    first: policy.OpenBlocker | None = None
    first_at = -1
    for step in steps:
        if not (step.probe or step.retry):
            _, state = policy.before_dispatch(state, step.call, subject=step.subject, interactive=step.interactive)
        assessment = policy.after_result(state, step.call, _outcome(step))
        state = assessment.state
        if first is None and assessment.opened:
            first, first_at = state.open_blockers[assessment.opened[0]], step.index
        if asked is None and step.decision is policy.Action.ESCALATE and not step.probe:
            chosen = assessment.decision.blocker if isinstance(assessment.decision, policy.Escalate) else None
            if chosen is None and step.situation is not None and step.situation.subject in state.open_blockers:
                chosen = state.open_blockers[step.situation.subject]
            if chosen is not None:
                asked = _Asked(chosen, step.index, lesson=False)
        for action, subject in answers.get(step.index, []):
            if action is JournalDecision.KNOWN:
                if step.situation is None:
                    continue
                state = policy.open_known_blocker(state, step.situation, step.index)
                if asked is None and subject in state.open_blockers:
                    asked = _Asked(state.open_blockers[subject], step.index, lesson=True)
                    if first is None:
                        first, first_at = asked.blocker, step.index
            elif action is JournalDecision.SKIP:
                state = policy.skip_subject(state, subject)
            else:
                state = policy.close_blocker(state, subject)
    return asked, first, first_at


def turn_cost(turn: JournalTurn, steps: Sequence[StepRecord], decisions: Sequence[tuple[int, JournalDecision, str]],
              config: policy.PolicyConfig | None = None, *, journal: str = "") -> TurnCost | None:
    """What ``turn`` paid for the blocker it met (see the module doc), or ``None`` for a turn
    that met none. ``steps`` and ``decisions`` are :meth:`Journal.steps` and
    :meth:`Journal.decisions` of the turn; ``config`` its settings (:meth:`Journal.config`)."""
    state = policy.RecoveryState(unattended=turn.unattended, config=config or policy.PolicyConfig())
    asked, first, first_at = _fold(steps, state, decisions)
    if asked is None and turn.status is TurnStatus.BLOCKED and first is not None:
        asked = _Asked(first, steps[-1].index if steps else -1, lesson=False)  # asked when the model answered
    blocker = asked.blocker if asked is not None else first
    if blocker is None:
        return None
    subject, kind = blocker.subject, blocker.situation.kind
    signal = next((s for s in steps if s.situation is not None and (s.situation.subject, s.situation.kind)
                   == (subject, kind)), None)
    if signal is None:
        signal = next((s for s in steps if s.index == (blocker.opened_at_call if asked is not None else first_at)),
                      None)
    if signal is None:
        return None
    last = asked.last if asked is not None else (steps[-1].index if steps else -1)
    wasted = [s for s in steps if signal.index < s.index <= last and not s.probe and not s.retry]
    opened_at = signal.started_s + signal.duration_s
    end_step = next((s for s in steps if s.index == last), None)
    end = end_step.started_s + end_step.duration_s if end_step is not None else opened_at
    return TurnCost(
        journal=journal, turn_id=turn.turn_id, started_at=turn.started_at, day=day_of(turn.started_at),
        subject=subject, kind=kind, asked=asked is not None, status=turn.status, wasted_steps=len(wasted),
        wasted_seconds=max(end - opened_at, 0.0), lesson=asked is not None and asked.lesson,
        signal_at=turn.started_at + opened_at, guarded=turn.guarded,
    )


def _closing_step(steps: Sequence[StepRecord], subject: str) -> StepRecord | None:
    """The first call on ``subject`` that succeeded (a clean probe included)."""
    return next((s for s in steps if s.subject == subject and s.ok and s.dispatched and s.situation is None), None)


def _config(journal: Journal, turn_id: str) -> policy.PolicyConfig:
    text = journal.config(turn_id)
    try:
        raw = json.loads(text or "{}")
        return policy.PolicyConfig.from_dict(raw if isinstance(raw, Mapping) else {})
    except ValueError as exc:
        raise JournalError(f"turn {turn_id} in {journal.where} has unreadable policy settings: {exc}") from None


def read_costs(journals: Iterable[Journal], *, since: datetime.date | None = None) -> CostReport:
    """Read every turn of ``journals`` (through :class:`Journal`'s public methods) and build the
    report; ``since`` keeps the turns that started on that UTC day or later.

    Raises:
        JournalError: naming the file, when a journal cannot be read (damaged, removed) or a
            turn's steps or settings do not read back.
    """
    entries: list[tuple[JournalTurn, list[StepRecord], TurnCost | None]] = []
    names: list[str] = []
    for journal in journals:
        name = journal.where
        names.append(name)
        for turn in journal.turns():
            if since is not None and day_of(turn.started_at) < since:
                continue
            steps = journal.steps(turn.turn_id)
            cost = turn_cost(turn, steps, journal.decisions(turn.turn_id), _config(journal, turn.turn_id),
                             journal=name)
            entries.append((turn, steps, cost))
    entries.sort(key=lambda e: (e[0].started_at, e[0].turn_id))
    return summarise([(turn, steps, cost) for turn, steps, cost in entries], journals=tuple(names), since=since)


def _episodes(entries: Sequence[tuple[JournalTurn, Sequence[StepRecord], TurnCost | None]]) -> list[Episode]:
    open_now: dict[tuple[str, Kind], Episode] = {}
    done: list[Episode] = []
    for turn, steps, cost in entries:
        key = None if cost is None else (cost.subject, cost.kind)
        for other, episode in list(open_now.items()):
            if other == key or other[0] == (cost.subject if cost is not None else None):
                continue
            step = _closing_step(steps, other[0])
            if step is not None:
                closed = replace(episode, closed_at=turn.started_at + step.started_s + step.duration_s,
                                 closed_turn=turn.turn_id, closed_by=CloseReason.of_call(probe=step.probe))
                done.append(closed)
                del open_now[other]
        if cost is not None and key is not None:
            if key in open_now:
                open_now[key] = replace(open_now[key], turns=open_now[key].turns + 1)
            else:
                open_now[key] = Episode(cost.subject, cost.kind, cost.signal_at, cost.turn_id, 1)
    return sorted([*done, *open_now.values()], key=lambda e: (e.opened_at, e.subject))


def summarise(entries: Sequence[tuple[JournalTurn, Sequence[StepRecord], TurnCost | None]], *,
              journals: tuple[str, ...] = (), since: datetime.date | None = None) -> CostReport:
    """The report from turns already read, in the order they started: each turn's header,
    steps and cost (:func:`turn_cost`; ``None`` for a turn without a blocker)."""
    costs = [c for _, _, c in entries if c is not None]
    baselines: dict[tuple[str, Kind], float] = {}
    for key in {(c.subject, c.kind) for c in costs}:
        plain = [c.wasted_steps for c in costs if (c.subject, c.kind) == key and c.asked and not c.lesson]
        if plain:
            baselines[key] = float(statistics.median(plain))

    def saved(c: TurnCost) -> float | None:
        base = baselines.get((c.subject, c.kind))
        return None if base is None else max(base - c.wasted_steps, 0.0)

    def saved_sum(group: Sequence[TurnCost]) -> float | None:
        known = [s for c in group if c.lesson and (s := saved(c)) is not None]
        return sum(known) if known else None

    episodes = _episodes(entries)
    groups: dict[tuple[datetime.date, str, Kind], list[TurnCost]] = {}
    for c in costs:
        groups.setdefault((c.day, c.subject, c.kind), []).append(c)
    days = []
    for (day, subject, kind), group in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1], g[0][2].value)):
        opened = [e for e in episodes if (e.subject, e.kind) == (subject, kind) and day_of(e.opened_at) == day]
        closed = [e.closed_after_s for e in opened if e.closed_after_s is not None]
        days.append(DayCost(
            day, subject, kind, len(group), sum(1 for c in group if c.asked), sum(c.wasted_steps for c in group),
            sum(c.wasted_seconds for c in group), sum(1 for c in group if c.lesson), saved_sum(group),
            statistics.median(closed) if closed else None, sum(1 for e in opened if e.closed_at is None),
        ))
    by_key: dict[tuple[str, Kind], list[TurnCost]] = {}
    for c in costs:
        by_key.setdefault((c.subject, c.kind), []).append(c)
    totals = sorted(
        (BlockerTotal(subject, kind, len(group), sum(c.wasted_steps for c in group),
                      sum(c.wasted_seconds for c in group), sum(1 for c in group if c.lesson), saved_sum(group),
                      baselines.get((subject, kind)))
         for (subject, kind), group in by_key.items()),
        key=lambda t: (-t.wasted_steps, -t.wasted_seconds, t.subject, t.kind.value),
    )
    return CostReport(tuple(days), tuple(totals), tuple(costs), tuple(episodes), journals, len(entries), since)
