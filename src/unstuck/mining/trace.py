"""Rollout traces: what one agent did in one attempt at a task, in the words an analyzer reads it
with (its bad patterns; seed 003, "Why Success and Failure Must Share a Task").

A :class:`Trace` is one agent's attempt at one task: every call with the return the agent was
shown (perhaps an injected failure: replacing a return never rolls back the tool's state),
the situation kind unstuck's guard recorded for it (rollouts run unguarded: the guard only
observes), the state snapshot taken *before* the call, the final answer and the final state.

:class:`BadPattern` is the vocabulary of what goes wrong first in a failed rollout; the
analyzer diagnoses it and a mined rule's trigger names it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass

from unstuck.core.tools import ToolCall
from unstuck.mining.environment import Snapshot, Verification

__all__ = ["IDENTIFIER_KEYS", "BadPattern", "Trace", "TraceStep", "mentions", "shows_identifier"]


class BadPattern(enum.StrEnum):
    """What a failed rollout did wrong first (the deterministic analyzer's trace rules).

    * ``unverified_identifier``: a call acted on an identifier no earlier result showed (and
      the task did not give);
    * ``unchecked_write``: after a write whose return was a failure, the agent wrote again, or
      answered, without reading back whether the first write took effect;
    * ``repeated_failed_call``: the same call again, unchanged, after it failed, beyond what
      the retry table allows (:mod:`unstuck.decide.retry`: transient kinds only, within their
      attempts);
    * ``worked_around_blocker``: after a blocker's situation (auth, permission, not installed,
      a spent quota), other calls instead of asking the user;
    * ``false_final_answer``: the final answer claims what no successful call in the trace did;
    * ``gave_up``: the rollout ended with the task undone and none of the above.
    """

    UNVERIFIED_IDENTIFIER = "unverified_identifier"
    UNCHECKED_WRITE = "unchecked_write"
    REPEATED_FAILED_CALL = "repeated_failed_call"
    WORKED_AROUND_BLOCKER = "worked_around_blocker"
    FALSE_FINAL_ANSWER = "false_final_answer"
    GAVE_UP = "gave_up"


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One call of a rollout.

    ``content`` and ``ok`` are what the agent was shown; ``injected`` names the failure form
    that replaced the real return (``None``: the real one); ``kind`` is the situation kind the
    guard recorded (``None``: no situation); ``before`` is the state before the call ran.
    """

    index: int
    call: ToolCall
    content: str
    ok: bool
    kind: str | None
    injected: str | None
    before: Snapshot


@dataclass(frozen=True, slots=True)
class Trace:
    """One rollout: who attempted which task under which noise, every step, and how it ended.

    ``seed`` is the rollout's injection seed; ``status`` the turn's status (``done``,
    ``blocked``, ``failed``); ``final`` the state after the last step. ``verdict`` is the
    environment's verifier on the live session at the end (a session's processes, such as a
    lock holder, are state a snapshot does not hold); it is the verifier's side of the joint
    label, and an analyzer never reads it (seed 003: the two label independently).
    """

    environment: str
    task: str
    agent: str
    seed: str
    p_inj: float
    steps: tuple[TraceStep, ...]
    answer: str
    status: str
    final: Snapshot
    verdict: Verification | None = None

    @property
    def injected(self) -> int:
        """Returns replaced by an injected failure."""
        return sum(1 for step in self.steps if step.injected is not None)


#: Field names that name an identifier of any kind.
IDENTIFIER_KEYS = frozenset({"id", "number", "name"})


def _word_char(text: str, at: int) -> bool:
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def mentions(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as a whole token (not inside a longer word or number)."""
    start = text.find(value)
    while start >= 0:
        end = start + len(value)
        if not (_word_char(text, start - 1) and _word_char(value, 0)) and not (
                _word_char(text, end) and _word_char(value, len(value) - 1)):
            return True
        start = text.find(value, start + 1)
    return False


def _same_field(key: str, argument: str) -> bool:
    """Whether a result's field ``key`` names what the argument ``argument`` does: the same
    name, a bare ``id``/``number``/``name``, or one the other's name ends with
    (``comment_id`` and ``id``, ``issue_number`` and ``number``)."""
    return key == argument or key in IDENTIFIER_KEYS or argument.endswith(key) or key.endswith(argument)


def shows_identifier(text: str, argument: str, value: str) -> bool:
    """Whether ``text`` shows ``value`` as the identifier ``argument``: in a JSON result, as
    the value of a field that names that kind of identifier (a version ``1`` or a count ``1``
    is not comment ``1``); in plain text (a task's words, a command's output), as a whole
    token."""
    try:
        data = json.loads(text)
    except ValueError:
        return mentions(text, value)
    stack: list[object] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, inner in item.items():
                if isinstance(inner, Mapping | list):
                    stack.append(inner)
                elif not isinstance(inner, bool) and inner is not None and str(inner) == value and _same_field(
                        str(key), argument):
                    return True
        elif isinstance(item, list):
            stack.extend(item)
    return False
