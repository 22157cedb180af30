"""Joint labels: the verifier and an analyzer label each rollout independently (seed 003, "Why
Success and Failure Must Share a Task": "An analyzer and the environment verifier jointly
label each rollout; disagreements are discarded. A failed rollout carries an error diagnosis,
its first erroneous turn, and an environment-state snapshot taken before that turn").

An analyzer reads the trace, the task's prompt and which tools write; it never sees the
verifier's verdict. Two ship here:

* :class:`DeterministicAnalyzer` finds the *first* erroneous turn by trace rules, one per
  :class:`~unstuck.mining.trace.BadPattern`, checked call by call and then at the final answer
  (turn ``len(steps)``):

  - ``worked_around_blocker``: after a result of a blocker kind (auth, permission,
    not_installed, a quota that is not retryable: DESIGN.md, "The situation taxonomy"), a call
    other than ``ask_user``;
  - ``unchecked_write``: a write identical to an earlier write whose return failed, with no
    read in between that shows it (a successful read whose identifier arguments all name the
    write's own values); or the final answer while such a write stands;
  - ``repeated_failed_call``: a call identical to the last one that failed, unless
    :func:`unstuck.decide.retry.next_retry` allows it (transient kinds within their attempts:
    timeout 2, unavailable / network / rate-limited quota 3, DESIGN.md "Defaults");
  - ``unverified_identifier``: an identifier argument (the environment's business objects'
    identifiers, or keys named ``id``, ``*_id``, ``number``, ``*_number``, ``name``, ``*_name``)
    whose value appeared in no earlier successful result and not in the task's prompt;
  - ``false_final_answer``: the turn ended ``done`` (the agent's claim that the task is done)
    while no successful call did it: nothing succeeded, a blocker's result was its last word,
    or a failed write's read-back did not show the write and it was not redone;
  - ``gave_up``: the turn did not end ``done`` and none of the above (a turn that asked the user
    right after a blocker is finished, not given up).

* :class:`ModelAnalyzer` asks a model behind an OpenAI-compatible endpoint
  (:class:`unstuck.toolkit.models.OpenAIChatModel`) for one JSON object; a reply that is not that
  object is an *error label* (counted, the rollout discarded), never an exception.

:func:`joint_label` joins an analyzer's label with the verifier's :class:`Verification`:
``None`` when they disagree on whether the rollout is correct (or the analyzer erred);
otherwise a :class:`JointLabel` that, for a failure, carries the pattern, diagnosis, first
erroneous turn and the state before it. :class:`LabelStats` counts agreement and discards.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import re2

from unstuck.core.situations import Kind, KindClass, Situation, Source, class_of
from unstuck.core.tools import Effect, ToolCall, ToolResult
from unstuck.decide.retry import RETRY_RULES, next_retry
from unstuck.faults.bank import FailureBank
from unstuck.mining.environment import ASK_TOOL, BusinessObject, MiningError, Snapshot, Task, Verification
from unstuck.mining.trace import IDENTIFIER_KEYS, BadPattern, Trace, TraceStep, shows_identifier
from unstuck.recognise.classify import classify_result
from unstuck.toolkit.models import Message, Model, ModelError, Role

__all__ = [
    "DETERMINISTIC",
    "SHOWN_CHARS",
    "AnalyzerLabel",
    "DeterministicAnalyzer",
    "JointLabel",
    "LabelStats",
    "ModelAnalyzer",
    "RolloutAnalyzer",
    "identifier_arguments",
    "joint_label",
    "trace_text",
]

#: The deterministic analyzer's name in labels.
DETERMINISTIC = "deterministic"
#: How many characters of each result the model analyzer is shown (head and tail kept).
SHOWN_CHARS = 600
#: The turn statuses the rules read (``unstuck.decide.outcome.TurnStatus`` values).
_BLOCKED = "blocked"
_DONE = "done"
#: An answer that says the task was not done ("I could not complete the task: ...", "I was
#: unable to finish"): a turn that ends so gave up, though its status is ``done``.
_GAVE_UP_WORDS = re2.compile(r"(?i)\b(could not|couldn't|cannot|can't|unable to|was not able to|wasn't able to)\s+"
                             r"(complete|finish|do|continue|carry out)\b")


@dataclass(frozen=True, slots=True)
class AnalyzerLabel:
    """One analyzer's verdict on one rollout.

    ``first_error_turn`` is the :attr:`TraceStep.index` of the first erroneous call, or
    ``len(trace.steps)`` for the final answer; ``None`` for a correct rollout. ``diagnosis`` is
    one sentence naming the tool and argument. ``error`` is set (and ``correct`` is ``False``)
    when the analyzer could not label the rollout (a model reply that is not the asked-for
    JSON): such a label never joins the verifier's.
    """

    correct: bool
    pattern: BadPattern | None
    first_error_turn: int | None
    diagnosis: str
    analyzer: str
    error: str | None = None

    @classmethod
    def failed(cls, analyzer: str, error: str) -> AnalyzerLabel:
        """The error label of ``analyzer`` (it could not label the rollout: ``error`` says why)."""
        return cls(False, None, None, f"{analyzer} gave no label: {error}", analyzer, error)


class RolloutAnalyzer(Protocol):
    """Anything that labels a rollout from its trace, its task's prompt and which tools write."""

    name: str

    def label(self, trace: Trace, task: Task, effects: Mapping[str, Effect]) -> AnalyzerLabel:
        """The label of ``trace`` (never raises on a trace it cannot read: an error label)."""
        ...


# -- what a trace shows ---------------------------------------------------------------------

_IDENTIFIER_SUFFIXES = ("_id", "_number", "_name")


def identifier_arguments(call: ToolCall, identifiers: frozenset[str] | None) -> list[tuple[str, str]]:
    """The identifier-like arguments of ``call`` as ``(argument, value as text)`` pairs, in
    argument order: those named in ``identifiers`` or, when it is ``None``, those whose key is
    ``id``, ``number``, ``name`` or ends in ``_id``, ``_number``, ``_name``. A list value gives
    one pair per scalar; booleans, ``None`` and empty strings are not identifiers."""
    found: list[tuple[str, str]] = []
    for key, value in sorted(call.arguments.items()):
        named = key in identifiers if identifiers is not None else (
            key in IDENTIFIER_KEYS or key.endswith(_IDENTIFIER_SUFFIXES))
        if not named:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool) or not isinstance(item, (str, int, float)) or item == "":
                continue
            found.append((key, str(item)))
    return found


def _kind(step: TraceStep) -> Kind | None:
    try:
        return Kind(step.kind) if step.kind is not None else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class _Shown:
    """The facts of one step the rules read."""

    step: TraceStep
    write: bool
    failed: bool
    blocker: bool
    situation: Situation | None


class DeterministicAnalyzer:
    """The first erroneous turn by trace rules (see the module doc).

    Args:
        identifiers: the argument names of the environment's business objects (see
            :meth:`for_objects`); ``None`` infers them from the keys (``*_id``, ``number``,
            ``name``...).
        bank: the failure bank whose forms an injected step names; a form's ``transient``
            flag says whether waiting fixes it (a rate limit does, a spent quota does not).
            For a real return the classifier reads the shown content
            (:func:`unstuck.recognise.classify.classify_result`); failing both, the kind's class.
    """

    name = DETERMINISTIC

    def __init__(self, identifiers: Iterable[str] | None = None, *, bank: FailureBank | None = None) -> None:
        self._identifiers = frozenset(identifiers) if identifiers is not None else None
        self._bank = bank

    @classmethod
    def for_objects(
        cls, objects: Iterable[BusinessObject], *, bank: FailureBank | None = None
    ) -> DeterministicAnalyzer:
        """An analyzer whose identifier arguments are ``objects``' identifiers (an environment's
        ``objects``)."""
        return cls([o.identifier for o in objects], bank=bank)

    def _retryable(self, step: TraceStep, kind: Kind) -> bool:
        """Whether waiting can fix the step's result: an injected form's ``transient`` flag
        (a bank's server that is not running is ``unavailable`` yet not transient); else the
        classifier's reading of the shown content when it reads the same kind; else the kind's
        class (transient kinds are; a quota or conflict is not)."""
        if step.injected is not None and self._bank is not None:
            form = self._bank.get(step.injected)
            if form is not None:
                return form.transient
        read = classify_result(step.call.tool, step.call.arguments, ToolResult(step.call.tool, step.ok, step.content))
        if read is not None and read.kind is kind:
            return read.retryable
        return class_of(kind) is KindClass.TRANSIENT

    def _shown(self, step: TraceStep, effects: Mapping[str, Effect]) -> _Shown:
        kind = _kind(step)
        situation = None
        if kind is not None:
            situation = Situation(kind, step.call.tool, retryable=self._retryable(step, kind), source=Source.INFERRED)
        blocker = situation is not None and situation.is_blocker
        return _Shown(step, effects.get(step.call.tool) is Effect.WRITE and step.call.tool != ASK_TOOL,
                      not step.ok or blocker, blocker, situation)

    def _identifier_args(self, call: ToolCall) -> list[tuple[str, str]]:
        return identifier_arguments(call, self._identifiers)

    def _shows(self, read: _Shown, write: _Shown) -> bool:
        """``read`` reads back ``write``: it succeeded, is not a write, and names no other
        object of a kind the write names (an identifier argument of the same name with another
        value). A read of the object's container (the comments of the document, after deleting
        one comment) counts."""
        if read.write or read.failed or read.step.call.tool == ASK_TOOL:
            return False
        written = dict(self._identifier_args(write.step.call))
        return all(written.get(argument, value) == value for argument, value in self._identifier_args(read.step.call))

    def _holds(self, write: ToolCall, content: str) -> bool:
        """A read-back's ``content`` shows ``write``: it holds each text argument of the write
        that is not an identifier (a comment's body, a title), as written or JSON-escaped; a
        write with no such argument (a state change) is shown by any successful read-back of
        its object."""
        names = {argument for argument, _ in self._identifier_args(write)}
        texts = [v for k, v in write.arguments.items() if isinstance(v, str) and v and k not in names]
        return all(text in content or json.dumps(text)[1:-1] in content for text in texts)

    def label(self, trace: Trace, task: Task, effects: Mapping[str, Effect]) -> AnalyzerLabel:
        """Label ``trace`` (an attempt at ``task``: only its ``prompt`` is read) by the trace
        rules, given ``effects`` (tool name → read or write; a tool not named reads).

        Returns:
            A correct label, or the first bad pattern with its turn and a one-sentence
            diagnosis naming the tool and argument.

        Raises:
            MiningError: when ``trace`` is not an attempt at ``task``.
        """
        if trace.task != task.id:
            raise MiningError(f"trace of task {trace.task!r} labelled against task {task.id!r}")
        shown = [self._shown(step, effects) for step in trace.steps]
        found = self._first_call_error(trace, task.prompt, shown)
        if found is not None:
            return found
        return self._final_answer(trace, shown)

    def _error(self, pattern: BadPattern, turn: int, diagnosis: str) -> AnalyzerLabel:
        return AnalyzerLabel(False, pattern, turn, diagnosis, self.name)

    def _first_call_error(self, trace: Trace, prompt: str, shown: Sequence[_Shown]) -> AnalyzerLabel | None:
        seen = [prompt]
        blocker: _Shown | None = None
        for at, now in enumerate(shown):
            call = now.step.call
            earlier = shown[:at]
            if blocker is not None and call.tool != ASK_TOOL:
                return self._error(BadPattern.WORKED_AROUND_BLOCKER, now.step.index, (
                    f"After {blocker.step.call.tool} failed with {blocker.step.kind}, the agent called "
                    f"{call.tool} ({_arguments(call)}) instead of asking the user."))
            if call.tool == ASK_TOOL:
                blocker = None
            unchecked = self._unchecked_identical_write(now, earlier)
            if unchecked is not None:
                return self._error(BadPattern.UNCHECKED_WRITE, now.step.index, (
                    f"{call.tool} ({_arguments(call)}) was written again after its return at step "
                    f"{unchecked.step.index} failed, without reading back whether it took effect."))
            repeated = self._disallowed_repeat(now, earlier)
            if repeated is not None:
                return self._error(BadPattern.REPEATED_FAILED_CALL, now.step.index, (
                    f"{call.tool} ({_arguments(call)}) was repeated unchanged after it failed with "
                    f"{repeated.step.kind or 'a failure'}, beyond what the retry table allows."))
            for argument, value in self._identifier_args(call):
                if not any(shows_identifier(text, argument, value) for text in seen):
                    return self._error(BadPattern.UNVERIFIED_IDENTIFIER, now.step.index, (
                        f"{call.tool} was called with {argument}={value!r}, a value that neither an "
                        f"earlier successful result nor the task showed."))
            if not now.failed:
                seen.append(now.step.content)
            if now.blocker:
                blocker = now
        return None

    def _unchecked_identical_write(self, now: _Shown, earlier: Sequence[_Shown]) -> _Shown | None:
        if not now.write:
            return None
        for at in range(len(earlier) - 1, -1, -1):
            before = earlier[at]
            if _same_call(before, now):
                if not before.failed:
                    return None
                read_back = any(self._shows(between, before) for between in earlier[at + 1:])
                return None if read_back else before
        return None

    def _disallowed_repeat(self, now: _Shown, earlier: Sequence[_Shown]) -> _Shown | None:
        """The last identical earlier call when it failed and the retry table does not allow
        one more attempt; ``None`` otherwise."""
        same = [s for s in earlier if _same_call(s, now)]
        if not same or not same[-1].failed:
            return None
        streak = 0
        for previous in reversed(same):
            if not previous.failed:
                break
            streak += 1
        last = same[-1]
        allowed = last.situation is not None and last.situation.kind in RETRY_RULES
        if allowed and next_retry(last.situation, streak - 1) is not None:
            return None
        return last

    def _final_answer(self, trace: Trace, shown: Sequence[_Shown]) -> AnalyzerLabel:
        turn = len(trace.steps)
        for at, write in enumerate(shown):
            if not write.write or not write.failed or write.blocker:
                continue  # a blocker's write is the blocker rule's: asking is right
            later = shown[at + 1:]
            names = self._identifier_args(write.step.call)
            redone = any(s.write and not s.failed and s.step.call.tool == write.step.call.tool
                         and self._identifier_args(s.step.call) == names for s in later)
            if redone:
                continue
            reads = [s for s in later if self._shows(s, write)]
            call = write.step.call
            if not reads:
                return self._error(BadPattern.UNCHECKED_WRITE, turn, (
                    f"The agent answered after {call.tool} ({_arguments(call)}) failed, without reading back "
                    f"whether it took effect."))
            if trace.status == _DONE and not self._holds(write.step.call, reads[-1].step.content):
                return self._error(BadPattern.FALSE_FINAL_ANSWER, turn, (
                    f"The answer claims the task done, but the read-back after {call.tool} ({_arguments(call)}) "
                    f"failed does not show it and it was not redone."))
        last = shown[-1] if shown else None
        asked_after_blocker = any(
            shown[at].blocker and shown[at + 1].step.call.tool == ASK_TOOL for at in range(len(shown) - 1))
        if trace.status == _DONE and _GAVE_UP_WORDS.search(trace.answer) and not asked_after_blocker:
            where = f"after {last.step.call.tool} ({_arguments(last.step.call)})" if last is not None else ""
            return self._error(BadPattern.GAVE_UP, turn, f"The answer says the task could not be done {where}.".replace(
                " .", "."))
        if trace.status == _DONE:
            informative = [s for s in shown if s.step.call.tool != ASK_TOOL and (
                not s.failed or s.step.kind == Kind.EXECUTION_ERROR.value)]  # a program that ran and reported
            if not informative and not asked_after_blocker:
                return self._error(BadPattern.FALSE_FINAL_ANSWER, turn, (
                    "The answer claims the task done, but no call in the trace succeeded."))
            if last is not None and last.blocker:
                return self._error(BadPattern.FALSE_FINAL_ANSWER, turn, (
                    f"The answer claims the task done, but the last call, {last.step.call.tool} "
                    f"({_arguments(last.step.call)}), failed with {last.step.kind} and nobody was asked."))
            return AnalyzerLabel(True, None, None, "No bad pattern: every step is backed by a result.", self.name)
        if trace.status == _BLOCKED and asked_after_blocker:
            return AnalyzerLabel(True, None, None, "The agent asked the user right after a blocker.", self.name)
        where = f"after {last.step.call.tool} ({_arguments(last.step.call)})" if last is not None else "without a call"
        return self._error(BadPattern.GAVE_UP, turn, f"The turn ended {trace.status} {where} with the task undone.")


def _same_call(one: _Shown, other: _Shown) -> bool:
    return one.step.call.tool == other.step.call.tool and one.step.call.arguments_json == other.step.call.arguments_json


def _arguments(call: ToolCall) -> str:
    """The call's arguments, bounded, for a diagnosis."""
    text = ", ".join(f"{k}={v!r}" for k, v in sorted(call.arguments.items()))
    return text if len(text) <= 120 else text[:117] + "..."


# -- the model analyzer ------------------------------------------------------------------------

_PATTERNS_TEXT = "\n".join(
    f"- {p.value}: {line}" for p, line in (
        (BadPattern.UNVERIFIED_IDENTIFIER, "a call acted on an identifier no earlier result showed and the task "
                                           "did not give"),
        (BadPattern.UNCHECKED_WRITE, "after a write whose return was a failure, the agent wrote again or answered "
                                     "without reading back whether the write took effect"),
        (BadPattern.REPEATED_FAILED_CALL, "the same call again, unchanged, after it failed, beyond the retry table "
                                          "(only timeout 2 attempts, unavailable/network/rate limit 3 attempts)"),
        (BadPattern.WORKED_AROUND_BLOCKER, "after auth, permission, a missing program or a spent quota, other calls "
                                           "instead of asking the user (ask_user)"),
        (BadPattern.FALSE_FINAL_ANSWER, "the final answer claims what no successful call in the trace did"),
        (BadPattern.GAVE_UP, "the rollout ended with the task undone and none of the above"),
    ))

_SYSTEM = (
    "You analyse one attempt of a tool-using agent at a task. You see the task, every call with "
    "the result the agent was shown (failures may be injected; a failure the agent recovered from "
    "is not an error), the turn status and the final answer. Decide whether the attempt is correct "
    "and, if not, the FIRST erroneous turn (a step number, or the number of steps for the final "
    "answer) and its bad pattern, one of:\n" + _PATTERNS_TEXT + "\n"
    "Reply with exactly one JSON object and nothing else: "
    '{"correct": true|false, "pattern": "<one of the patterns>"|null, "first_error_turn": <int>|null, '
    '"diagnosis": "<one sentence naming the tool and argument>"}'
)


def _bounded(text: str, limit: int = SHOWN_CHARS) -> str:
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]} [... {len(text) - 2 * keep} characters omitted ...] {text[-keep:]}"


def trace_text(trace: Trace, task: Task, effects: Mapping[str, Effect]) -> str:
    """The trace as the model analyzer reads it: the task, each call (its effect, arguments
    and bounded shown result), the status and the answer."""
    lines = [f"Task: {task.prompt}", "Steps:"]
    for step in trace.steps:
        effect = effects.get(step.call.tool, Effect.READ).value
        outcome = "ok" if step.ok else f"failed ({step.kind or 'unclassified'})"
        lines.append(f"[{step.index}] {step.call.tool} ({effect}) {step.call.arguments_json} -> {outcome}: "
                     f"{_bounded(step.content)}")
    lines.append(f"[{len(trace.steps)}] final answer (turn status {trace.status}): {_bounded(trace.answer)}")
    return "\n".join(lines)


def _strip_fence(text: str) -> str:
    body = text.strip()
    if body.startswith("```") and body.endswith("```"):
        body = body[3:-3]
        first, _, rest = body.partition("\n")
        body = rest if first.strip().lower() in ("", "json") else body
    return body.strip()


class ModelAnalyzer:
    """An analyzer behind a chat model (any :class:`unstuck.toolkit.models.Model`, in practice an
    :class:`unstuck.toolkit.models.OpenAIChatModel`). It sends the trace (:func:`trace_text`) and the
    bad-pattern vocabulary, without tools, and reads one JSON object
    ``{correct, pattern, first_error_turn, diagnosis}``. A model error or a reply that is not
    exactly that object (not JSON, a pattern outside :class:`BadPattern`, a turn outside
    ``0..len(steps)``, a failure without a pattern and turn) is an error label."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self.name = f"model:{model.name}"

    def label(self, trace: Trace, task: Task, effects: Mapping[str, Effect]) -> AnalyzerLabel:
        """Ask the model; see the class doc. Never raises for the model's doing."""
        messages = [Message(Role.SYSTEM, _SYSTEM), Message(Role.USER, trace_text(trace, task, effects))]
        try:
            reply = self._model.complete(messages, ())
        except ModelError as exc:
            return AnalyzerLabel.failed(self.name, f"the model could not be asked: {exc}")
        return self.parse(reply.content, len(trace.steps))

    def parse(self, reply: str, steps: int) -> AnalyzerLabel:
        """The label a model ``reply`` gives for a trace of ``steps`` calls (an error label when
        it is not the asked-for object; the error quotes at most 80 characters of it)."""
        try:
            data: Any = json.loads(_strip_fence(reply))
        except ValueError:
            return AnalyzerLabel.failed(self.name, f"the reply is not JSON: {reply[:80]!r}")
        if not isinstance(data, dict):
            return AnalyzerLabel.failed(self.name, f"the reply is not a JSON object: {reply[:80]!r}")
        correct, pattern, turn = data.get("correct"), data.get("pattern"), data.get("first_error_turn")
        diagnosis = data.get("diagnosis")
        if not isinstance(correct, bool):
            return AnalyzerLabel.failed(self.name, f"'correct' is not true or false: {correct!r}")
        if not isinstance(diagnosis, str):
            return AnalyzerLabel.failed(self.name, f"'diagnosis' is not a string: {diagnosis!r}")
        if correct:
            return AnalyzerLabel(True, None, None, diagnosis, self.name)
        try:
            found = BadPattern(str(pattern))
        except ValueError:
            return AnalyzerLabel.failed(self.name, f"'pattern' is not a bad pattern: {pattern!r}")
        if isinstance(turn, bool) or not isinstance(turn, int) or not 0 <= turn <= steps:
            return AnalyzerLabel.failed(self.name, f"'first_error_turn' is not a turn 0..{steps}: {turn!r}")
        return AnalyzerLabel(False, found, turn, diagnosis, self.name)


# -- joining the analyzer and the verifier ----------------------------------------------------

@dataclass(frozen=True, slots=True)
class JointLabel:
    """A rollout the analyzer and the verifier agree on.

    For a failure: ``pattern``, ``diagnosis``, ``first_error_turn`` (a step index, or
    ``len(trace.steps)`` for the final answer) and ``pre_error_state`` (the state before that
    turn: the step's ``before``, or the trace's ``final`` for the answer). For a success all
    four are ``None`` (``diagnosis`` the analyzer's sentence). ``evidence`` is the verifier's.
    """

    trace: Trace
    correct: bool
    pattern: BadPattern | None
    diagnosis: str
    first_error_turn: int | None
    pre_error_state: Snapshot | None
    analyzer: str
    evidence: str

    @property
    def task(self) -> str:
        """The task's id."""
        return self.trace.task


def joint_label(analyzer_label: AnalyzerLabel, verification: Verification, trace: Trace) -> JointLabel | None:
    """The joint label of ``trace``, or ``None`` when the analyzer erred or it and the verifier
    disagree on whether the rollout is correct (the rollout is discarded).

    Raises:
        MiningError: when a failure label's turn is not a step of ``trace`` nor its answer.
    """
    if analyzer_label.error is not None or analyzer_label.correct != verification.passed:
        return None
    if analyzer_label.correct:
        return JointLabel(trace, True, None, analyzer_label.diagnosis, None, None, analyzer_label.analyzer,
                          verification.evidence)
    turn = analyzer_label.first_error_turn
    if analyzer_label.pattern is None or turn is None:
        raise MiningError(f"{analyzer_label.analyzer}: a failure label without a pattern and turn "
                          f"(task {trace.task!r}, agent {trace.agent!r})")
    if turn == len(trace.steps):
        state = trace.final
    else:
        step = next((s for s in trace.steps if s.index == turn), None)
        if step is None:
            raise MiningError(f"{analyzer_label.analyzer}: first erroneous turn {turn} is no step of the trace "
                              f"of task {trace.task!r} by {trace.agent!r} ({len(trace.steps)} steps)")
        state = step.before
    return JointLabel(trace, False, analyzer_label.pattern, analyzer_label.diagnosis, turn, state,
                      analyzer_label.analyzer, verification.evidence)


@dataclass(frozen=True, slots=True)
class LabelStats:
    """Counts of joint labelling: ``agreed`` (kept), ``disagreed`` (the analyzer and the
    verifier differ: discarded), ``errors`` (the analyzer gave no label: discarded)."""

    agreed: int = 0
    disagreed: int = 0
    errors: int = 0

    @property
    def total(self) -> int:
        """Rollouts labelled."""
        return self.agreed + self.disagreed + self.errors

    @property
    def agreement_rate(self) -> float:
        """Agreed over the rollouts both labelled (errors excluded); 0.0 when there are none."""
        judged = self.agreed + self.disagreed
        return self.agreed / judged if judged else 0.0

    @property
    def discard_rate(self) -> float:
        """Discarded (disagreed and errors) over all rollouts; 0.0 when there are none."""
        return (self.disagreed + self.errors) / self.total if self.total else 0.0

    def counted(self, analyzer_label: AnalyzerLabel, verification: Verification) -> LabelStats:
        """These counts with one more rollout."""
        if analyzer_label.error is not None:
            return replace(self, errors=self.errors + 1)
        if analyzer_label.correct != verification.passed:
            return replace(self, disagreed=self.disagreed + 1)
        return replace(self, agreed=self.agreed + 1)

    def __add__(self, other: LabelStats) -> LabelStats:
        return LabelStats(self.agreed + other.agreed, self.disagreed + other.disagreed, self.errors + other.errors)

    def summary(self) -> str:
        """One line, e.g. ``18 of 20 rollouts agreed (90%); 2 discarded (1 disagreed, 1 analyzer error)``."""
        return (f"{self.agreed} of {self.total} rollouts agreed ({self.agreement_rate:.0%}); "
                f"{self.disagreed + self.errors} discarded ({self.disagreed} disagreed, {self.errors} analyzer error"
                f"{'' if self.errors == 1 else 's'})")
