"""Rules from contrast pairs: recurring bad patterns become "when P, do A" (seed 003, "Why the
Extracted Rule Belongs to an Environment").

For each contrast pair the failed rollout's first erroneous turn says *where* it went wrong (a
call to some tool, or the final answer) and its bad pattern *what*; the successful rollout of
the same task says what was done instead at that point:

========================  ==========================================  =========================
bad pattern               what the success did at that point          rule
========================  ==========================================  =========================
unverified_identifier     called a read tool whose result held the    before calling T with an
                          value it then passed to T                   unseen A: look up with L
unchecked_write           after T failed, read with R before          after T fails: read back
                          writing again or answering                  with R
false_final_answer        read with R after its last write T          before answering: read
                                                                      back with R
worked_around_blocker     asked the user after T failed with K        after T fails with K: ask
repeated_failed_call      made a different call after T failed        after T fails with K: do
                                                                      not repeat it unchanged
gave_up                   called T again after it failed with a       after T fails with K:
                          kind waiting fixes                          retry
========================  ==========================================  =========================

A pair whose success did none of that gives no candidate. A candidate becomes a rule only
when it recurs: at least :data:`MIN_SUPPORT` pairs give the same trigger and action. The rule's
sentence names the environment's own tools and business objects.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from unstuck.core.situations import Kind, KindClass, class_of
from unstuck.core.tools import Effect
from unstuck.mining.environment import ASK_TOOL, BusinessObject
from unstuck.mining.rules import ActionKind, Moment, Rule, RuleAction, Trigger
from unstuck.mining.trace import BadPattern, Trace, TraceStep, shows_identifier

__all__ = ["MIN_SUPPORT", "Candidate", "PairView", "candidate_of", "extract_rules", "rule_id", "rule_text"]

#: Pairs that must give the same trigger and action before it is a rule ("recurring").
MIN_SUPPORT = 2


@dataclass(frozen=True, slots=True)
class PairView:
    """What extraction reads of a contrast pair: the task, the success, the failure, its bad
    pattern and its first erroneous turn (a step index, or ``len(failure.steps)`` for the final
    answer)."""

    task: str
    success: Trace
    failure: Trace
    pattern: BadPattern
    first_error_turn: int


@dataclass(frozen=True, slots=True)
class Candidate:
    """One pair's proposal: the bad pattern, the trigger and the action."""

    pattern: BadPattern
    trigger: Trigger
    action: RuleAction


def _failed_kind(step: TraceStep) -> str | None:
    return step.kind if not step.ok else None


def _transient(kind: str | None) -> bool:
    try:
        return kind is not None and class_of(Kind(kind)) is KindClass.TRANSIENT
    except ValueError:
        return False


def _same_call(one: TraceStep, other: TraceStep) -> bool:
    """The same tool with the same arguments (a call's id differs on every call)."""
    return (one.call.tool, one.call.arguments_json) == (other.call.tool, other.call.arguments_json)


def _first(steps: Iterable[TraceStep], tool: str) -> TraceStep | None:
    return next((s for s in steps if s.call.tool == tool), None)


def _look_up(pair: PairView, step: TraceStep, effects: Mapping[str, Effect]) -> Candidate | None:
    done = next((s for s in pair.success.steps if s.call.tool == step.call.tool and s.ok), None)
    if done is None:
        return None
    wrong, right = step.call.arguments, done.call.arguments
    for argument in sorted(right):
        if argument in wrong and wrong[argument] == right[argument]:
            continue
        value = str(right[argument])
        source = next((s for s in pair.success.steps[: done.index]  # a read: a look-up writes nothing
                       if s.ok and effects.get(s.call.tool, Effect.READ) is Effect.READ and s.call.tool != ASK_TOOL
                       and shows_identifier(s.content, argument, value)), None)
        if source is not None and source.call.tool != step.call.tool:
            return Candidate(pair.pattern, Trigger(Moment.BEFORE_CALL, step.call.tool, argument=argument),
                             RuleAction(ActionKind.LOOK_UP, source.call.tool))
    return None


def _read_after_failure(pair: PairView, tool: str, effects: Mapping[str, Effect]) -> str | None:
    """The read tool the success called after ``tool`` failed (before writing it again or
    answering), or ``None``."""
    steps = pair.success.steps
    for position, step in enumerate(steps):
        if step.call.tool == tool and not step.ok:
            for later in steps[position + 1:]:
                if later.call.tool == tool:
                    break
                if effects.get(later.call.tool) is Effect.READ and later.ok:
                    return later.call.tool
    return None


def _read_before_answer(pair: PairView, effects: Mapping[str, Effect]) -> tuple[str, str] | None:
    """(the last write tool, the read tool the success called after it), or ``None``."""
    steps = pair.success.steps
    writes = [s for s in steps if effects.get(s.call.tool) is Effect.WRITE and s.call.tool != ASK_TOOL]
    if not writes:
        return None
    last = writes[-1]
    read = next((s for s in steps[last.index + 1:] if effects.get(s.call.tool) is Effect.READ and s.ok), None)
    return (last.call.tool, read.call.tool) if read is not None else None


def candidate_of(pair: PairView, effects: Mapping[str, Effect]) -> Candidate | None:
    """The rule a pair proposes (see the module doc's table), or ``None`` when its success did
    nothing different at the failure's first erroneous turn. ``effects`` says which tools
    write."""
    steps = pair.failure.steps
    at = steps[pair.first_error_turn] if pair.first_error_turn < len(steps) else None
    previous = steps[pair.first_error_turn - 1] if 0 < pair.first_error_turn <= len(steps) else None
    pattern = pair.pattern
    if pattern is BadPattern.UNVERIFIED_IDENTIFIER and at is not None:
        return _look_up(pair, at, effects)
    if pattern is BadPattern.UNCHECKED_WRITE:
        write = next((s for s in reversed(steps[: pair.first_error_turn + 1])
                      if effects.get(s.call.tool) is Effect.WRITE and not s.ok), None)
        if write is not None and (read := _read_after_failure(pair, write.call.tool, effects)) is not None:
            return Candidate(pattern, Trigger(Moment.AFTER_RESULT, write.call.tool),
                             RuleAction(ActionKind.READ_BACK, read))
        return None
    if pattern is BadPattern.FALSE_FINAL_ANSWER:
        found = _read_before_answer(pair, effects)
        if found is not None:
            return Candidate(pattern, Trigger(Moment.BEFORE_ANSWER, found[0]), RuleAction(ActionKind.READ_BACK,
                                                                                          found[1]))
        return None
    failed = previous
    if pattern is BadPattern.REPEATED_FAILED_CALL and at is not None:
        # the earlier identical call that failed (the repeat itself may have succeeded): its kind
        failed = next((s for s in reversed(steps[: pair.first_error_turn]) if not s.ok and _same_call(s, at)), at)
    if pattern is BadPattern.WORKED_AROUND_BLOCKER and previous is not None:
        blocked = next((s for s in reversed(steps[: pair.first_error_turn]) if not s.ok), None)
        if blocked is not None and _first(pair.success.steps, ASK_TOOL) is not None:
            return Candidate(pattern, Trigger(Moment.AFTER_RESULT, blocked.call.tool, kind=blocked.kind),
                             RuleAction(ActionKind.ASK, ASK_TOOL))
        return None
    if pattern is BadPattern.REPEATED_FAILED_CALL and failed is not None:
        succeeded = pair.success.steps
        if not any(s.call.tool == failed.call.tool and not s.ok and not _same_call(s, after)
                   for s, after in itertools.pairwise(succeeded)):
            return None  # the success never changed its call after the tool failed
        return Candidate(pattern, Trigger(Moment.AFTER_RESULT, failed.call.tool, kind=_failed_kind(failed)),
                         RuleAction(ActionKind.CHANGE_CALL))
    if pattern is BadPattern.GAVE_UP and previous is not None and not previous.ok and _transient(previous.kind):
        tool = previous.call.tool
        retried = any(s.call.tool == tool and not s.ok and _transient(s.kind) and any(
            _same_call(t, s) for t in pair.success.steps[s.index + 1:]) for s in pair.success.steps)
        if retried:
            return Candidate(pattern, Trigger(Moment.AFTER_RESULT, tool, kind=previous.kind),
                             RuleAction(ActionKind.RETRY))
    return None


def _object_of(argument: str | None, objects: Sequence[BusinessObject]) -> str:
    found = next((o for o in objects if o.identifier == argument), None)
    return found.name if found is not None else (argument or "object")


def rule_text(candidate: Candidate, objects: Sequence[BusinessObject]) -> str:
    """The sentence a model reads: when P, do A, naming the tools and the business object."""
    trigger, action = candidate.trigger, candidate.action
    kind = f" with {trigger.kind}" if trigger.kind else ""
    if action.kind is ActionKind.LOOK_UP:
        thing = _object_of(trigger.argument, objects)
        return (f"When you are about to call {trigger.tool} with a {trigger.argument} that no earlier result showed, "
                f"call {action.tool} first and take the {thing}'s {trigger.argument} from its result.")
    if action.kind is ActionKind.READ_BACK and trigger.moment is Moment.BEFORE_ANSWER:
        return (f"Before you answer after calling {trigger.tool}, call {action.tool} and check that the change "
                "is really there; redo it if it is not.")
    if action.kind is ActionKind.READ_BACK:
        return (f"When {trigger.tool} reports a failure, call {action.tool} to see whether the change took effect "
                f"before calling {trigger.tool} again or answering.")
    if action.kind is ActionKind.ASK:
        return (f"When {trigger.tool} fails{kind}, ask the user with {ASK_TOOL}, naming what is blocked, "
                "instead of working around it.")
    if action.kind is ActionKind.RETRY:
        return f"When {trigger.tool} fails{kind}, wait and call it again: that failure passes."
    return f"When {trigger.tool} fails{kind}, do not repeat the same call unchanged; change what you send."


def extract_rules(pairs: Sequence[PairView], *, effects: Mapping[str, Effect], objects: Sequence[BusinessObject],
                  min_support: int = MIN_SUPPORT) -> tuple[Rule, ...]:
    """The rules the pairs support: each distinct (pattern, trigger, action) proposed by at
    least ``min_support`` pairs, most supported first (ties in trigger order), each with its
    stable :func:`rule_id`."""
    counted = Counter(c for pair in pairs if (c := candidate_of(pair, effects)) is not None)
    ranked = sorted((item for item in counted.items() if item[1] >= min_support),
                    key=lambda item: (-item[1], item[0].trigger.tool, item[0].action.kind.value,
                                      item[0].trigger.argument or "", item[0].trigger.kind or ""))
    return tuple(
        Rule(id=rule_id(candidate), pattern=candidate.pattern, trigger=candidate.trigger, action=candidate.action,
             text=rule_text(candidate, objects), support=support)
        for candidate, support in ranked
    )


def rule_id(candidate: Candidate) -> str:
    """A rule's id: ``r`` and six hex digits of a SHA-256 of its pattern, trigger and action,
    so the same rule mined again keeps its id (and a user's ``unstuck rules disable`` sticks)."""
    import hashlib

    trigger, action = candidate.trigger, candidate.action
    key = "|".join((candidate.pattern.value, trigger.moment.value, trigger.tool, trigger.kind or "",
                    trigger.argument or "", action.kind.value, action.tool or ""))
    return "r" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:6]
