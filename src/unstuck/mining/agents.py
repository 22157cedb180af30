"""The agents that attempt an environment's tasks (seed 003: "a capability-diverse pool ...
attempts every task under the same sampling protocol").

Two sorts, both :class:`unstuck.toolkit.models.Model`, so both run through the same loop under the
same noise:

* :class:`ScriptedMiner`: works a :class:`~unstuck.mining.environment.Task`'s steps, reading
  only its conversation (the tool results, as a model reads them), with a :class:`Behaviour`
  that says what it does well: check identifiers, read writes back, retry transients, ask on
  a blocker, or give up early. It applies a mined :class:`~unstuck.mining.rules.Rule` only by
  matching the rule's stored trigger against its own trace at the rule's moment, never through
  a behaviour flag, so a rule's effect is earned.
* :func:`model_agent`: any model (an OpenAI-compatible server through
  :class:`unstuck.toolkit.models.OpenAIChatModel`), with the rules as a system-prompt section
  (:func:`unstuck.mining.rules.rules_prompt`).

The pool (:func:`default_pool`) spans the behaviours: a careful agent, one without each good
habit, one that gives up, one with none.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from unstuck.core.situations import Kind, KindClass, Situation, validate_situation
from unstuck.core.tools import Effect, ToolCall, ToolResult
from unstuck.decide.retry import waitable
from unstuck.mining.environment import ASK_TOOL, MiningError, Step, Task
from unstuck.mining.rules import ActionKind, Moment, Rule, rules_prompt
from unstuck.mining.trace import shows_identifier
from unstuck.recognise.classify import explain_result
from unstuck.toolkit.models import Message, Model, ModelReply, OpenAIChatModel, Role
from unstuck.toolkit.specs import ToolSpec

__all__ = [
    "GAVE_UP",
    "TRANSIENT_REPEATS",
    "Behaviour",
    "ModelSpec",
    "Profile",
    "RuledModel",
    "ScriptedMiner",
    "Seen",
    "build_agent",
    "default_pool",
    "judge",
    "model_agent",
    "profile",
    "shown_result",
]

#: How many times an agent that retries transients repeats a call whose failure is transient
#: (DESIGN.md "Defaults": a timeout gets 2 attempts; the pool uses the smallest ceiling).
TRANSIENT_REPEATS = 2
#: How a final answer that gives up begins.
GAVE_UP = "could not complete"


@dataclass(frozen=True, slots=True)
class Behaviour:
    """What a scripted agent does well.

    * ``checks_identifiers``: runs a step's lookup and uses the value it finds, instead of
      the step's guessed values;
    * ``reads_back``: after a write (whatever it returned) calls its read-back and checks it;
      writes again only when the write failed and its effect is absent;
    * ``retries_transients``: repeats a call whose failure is transient (timeout,
      unavailable, network, a retryable quota) up to :data:`TRANSIENT_REPEATS` times; without
      ``reads_back`` that includes a failed write, blindly;
    * ``asks``: on a blocker (auth, permission, not installed, a spent quota) asks the user,
      naming the blocked subject, and ends;
    * ``gives_up_early``: answers :data:`GAVE_UP` at the first failure it does not handle;
      otherwise goes on and answers as if done.
    """

    checks_identifiers: bool
    reads_back: bool
    retries_transients: bool
    asks: bool
    gives_up_early: bool


@dataclass(frozen=True, slots=True)
class Profile:
    """A named behaviour of the pool."""

    name: str
    behaviour: Behaviour


_POOL: tuple[Profile, ...] = (
    Profile("careful", Behaviour(True, True, True, True, False)),
    Profile("no_lookup", Behaviour(False, True, True, True, False)),
    Profile("no_readback", Behaviour(True, False, True, True, False)),
    Profile("no_retry", Behaviour(True, True, False, True, False)),
    Profile("no_ask", Behaviour(True, True, True, False, False)),
    Profile("quitter", Behaviour(True, True, False, True, True)),
    Profile("reckless", Behaviour(False, False, False, False, False)),
)


def default_pool() -> tuple[Profile, ...]:
    """The capability-diverse pool: ``careful`` (every habit), one profile without each habit
    (``no_lookup``, ``no_readback``, ``no_retry``, ``no_ask``), ``quitter`` (no retries, gives
    up at the first failure) and ``reckless`` (no habit at all)."""
    return _POOL


def profile(name: str) -> Profile:
    """The pool's profile ``name``.

    Raises:
        MiningError: for an unknown name, listing the known ones.
    """
    found = next((p for p in _POOL if p.name == name), None)
    if found is None:
        raise MiningError(f"unknown agent profile {name!r}; the profiles are {', '.join(p.name for p in _POOL)}")
    return found


# -- reading a result as a model would ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Seen:
    """One tool result as the agent read it: its text, whether it failed, and what it means
    (``None`` for a plain success)."""

    content: str
    failed: bool
    situation: Situation | None

    @property
    def transient(self) -> bool:
        """A failure that waiting fixes, as unstuck's retry table says (:func:`unstuck.decide.retry.waitable`:
        timeout, unavailable, network, a retryable quota, a lock another process holds)."""
        return self.failed and waitable(self.situation)

    @property
    def blocker(self) -> bool:
        """A failure that needs the user (auth, permission, not installed, a spent quota)."""
        return self.failed and self.situation is not None and self.situation.is_blocker

    @property
    def kind(self) -> str | None:
        """The situation's kind, if any."""
        return None if self.situation is None else self.situation.kind.value


#: The status lines unstuck's own normaliser writes into a result's text
#: (:func:`unstuck.core.tools.normalize_result`: ``HTTP {status}`` first for an HTTP response,
#: ``(exit code N)`` last for a command, ``{ExceptionType}: {message}`` for a raised exception),
#: read back as a model reads them.
_HTTP_LINE = re2.compile(r"^HTTP (\d{3})(?:\n|$)")
_EXIT_LINE = re2.compile(r"\(exit code (-?\d+)\)$")
_EXCEPTION_LINE = re2.compile(r"^([A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt)): ")


def shown_result(tool: str, content: str) -> ToolResult:
    """The result a model reads in ``content``: its status as the text states it (an HTTP
    status line, an exit code, an exception's name), else a plain success."""
    http = _HTTP_LINE.search(content)
    if http is not None:
        status = int(http.group(1))
        return ToolResult(tool, 200 <= status < 400, content, http_status=status)
    exit_code = _EXIT_LINE.search(content.rstrip())
    if exit_code is not None:
        code = int(exit_code.group(1))
        return ToolResult(tool, code == 0, content, exit_code=code)
    raised = _EXCEPTION_LINE.search(content)
    if raised is not None:
        return ToolResult(tool, False, content, error_type=raised.group(1))
    return ToolResult(tool, True, content)


def judge(tool: ToolSpec | str, arguments: Mapping[str, Any], content: str) -> Seen:
    """Read a result's text as a capable model would: a situation the tool's own JSON states
    (its ``situation`` object, validated as the loop validates one: declared beats inferred),
    else unstuck's classifier (:func:`unstuck.recognise.classify.explain_result`) on the result the
    text shows (:func:`shown_result`). An empty or truncated result is an answer, not a
    failure."""
    name = tool if isinstance(tool, str) else tool.name
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if isinstance(data, Mapping) and data.get("situation") is not None:
        try:
            stated = validate_situation(name, data["situation"])
        except ValueError:
            stated = None
        if stated is not None:
            return Seen(content, True, stated)
    found = explain_result(tool, arguments, shown_result(name, content), thorough=False)
    situation = found.situation
    if not found.failed or situation is None or situation.kind_class is KindClass.DEGENERATE:
        return Seen(content, found.failed and situation is None, None)
    return Seen(content, True, situation)


def _informs(seen: Seen) -> bool:
    """A result an answer may come from: a success, or a program that ran and reported a
    failure of its own (``execution_error``: a test run with a failing test still says how
    many passed)."""
    return not seen.failed or (seen.situation is not None and seen.situation.kind is Kind.EXECUTION_ERROR)


# -- the scripted agent ------------------------------------------------------------------------------

class _Outcome(enum.Enum):
    DONE = "done"
    FAILED = "failed"
    ASKED = "asked"


class _Next(enum.Enum):
    RETRY = "retry"
    READ_BACK = "read_back"
    ASK = "ask"
    CHANGE_CALL = "change_call"
    WORK_AROUND = "work_around"
    UNHANDLED = "unhandled"


_ACTION_NEXT = {
    ActionKind.RETRY: _Next.RETRY, ActionKind.READ_BACK: _Next.READ_BACK, ActionKind.ASK: _Next.ASK,
    ActionKind.CHANGE_CALL: _Next.CHANGE_CALL, ActionKind.LOOK_UP: _Next.CHANGE_CALL,
}

#: What the script yields (a call to make), is sent (the result's text) and returns (the answer).
_Script = Generator[ToolCall, str, str]


@dataclass
class _Trace:
    """The agent's own trace: every call with what it read."""

    tools: Mapping[str, ToolSpec]
    calls: list[tuple[ToolCall, Seen]] = dataclasses.field(default_factory=list)

    def call(self, tool: str, arguments: Mapping[str, Any]) -> Generator[ToolCall, str, Seen]:
        call = ToolCall.of(f"call_{len(self.calls)}", tool, arguments)
        content = yield call
        seen = judge(self.tools.get(tool, tool), arguments, content)
        self.calls.append((call, seen))
        return seen

    def shown(self, argument: str, value: Any) -> bool:
        """Whether an earlier successful result showed ``value`` as the identifier
        ``argument`` (:func:`unstuck.mining.trace.shows_identifier`: a field of that name in a
        JSON result, a whole token in text), as the analyzer judges it."""
        text = value if isinstance(value, str) else json.dumps(value)
        return any(shows_identifier(seen.content, argument, text) for _, seen in self.calls if not seen.failed)


@dataclass
class _Write:
    """The last write step: its call, arguments, whether its return failed, whether its
    effect was confirmed by a read-back."""

    step: Step
    arguments: dict[str, Any]
    failed: bool
    confirmed: bool


class ScriptedMiner:
    """A scripted agent that works ``task``'s steps with ``behaviour`` and ``rules``.

    It is a :class:`unstuck.toolkit.models.Model`: each :meth:`complete` replays its script against
    the tool results in the conversation (so it knows only what it was shown), and replies
    with the next call, or with its final answer when the script ends. Calls get ids
    ``call_0``, ``call_1``, ... in order.

    Args:
        task: the task it works.
        behaviour: what it does well (:class:`Behaviour`).
        rules: mined rules; a rule acts only when its trigger matches the agent's own trace at
            its moment: ``before_call`` (the next call is to the trigger's tool, and the value
            of the trigger's argument (any guessed identifier when ``None``) appeared in no
            earlier result: a ``look_up`` runs the step's lookup when its tool is the action's
            tool); ``after_result`` (the last call was to the trigger's tool and failed with the
            trigger's kind, any failure when ``None``: ``read_back``, ``retry``, ``ask``,
            ``change_call``); ``before_answer`` (the last write was to the trigger's tool: read
            it back). Disabled rules are ignored.
        name: the agent's name (its profile's).
    """

    def __init__(self, task: Task, behaviour: Behaviour, rules: Sequence[Rule] = (), *, name: str = "scripted") -> None:
        self.name = name
        self.task = task
        self.behaviour = behaviour
        self.rules = tuple(rule for rule in rules if rule.enabled)
        self._confirmed = False  # the current step's write was read back and holds

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        """The next call, or the final answer, given the results in ``messages``."""
        results = [m.content for m in messages if m.role is Role.TOOL]
        script = self._script(_Trace({spec.name: spec for spec in tools}))
        try:
            call = next(script)
            for content in results:
                call = script.send(content)
        except StopIteration as end:
            return ModelReply(content=str(end.value))
        script.close()
        return ModelReply(tool_calls=(call,))

    # -- the script -------------------------------------------------------------------------------

    def _script(self, trace: _Trace) -> _Script:
        last_write: _Write | None = None
        for step in self.task.steps:
            outcome, arguments, seen = yield from self._step(trace, step)
            if outcome is _Outcome.ASKED:
                assert seen.situation is not None
                return (f"Blocked: {seen.situation.subject} needs you ({seen.situation.kind.value}); "
                        "I asked the user and stopped.")
            if step.effect is Effect.WRITE and step.read_back is not None:
                last_write = _Write(step, arguments, seen.failed, outcome is _Outcome.DONE and self._confirmed)
            if outcome is _Outcome.FAILED and self.behaviour.gives_up_early:
                return f"{GAVE_UP}: {step.call.tool} failed: {_excerpt(seen.content)}"
        if last_write is not None and not last_write.confirmed and self._rule_before_answer(last_write):
            yield from self._confirm(trace, last_write)
        return self._answer(trace)

    def _answer(self, trace: _Trace) -> str:
        """What the successful results showed (the task's answer when one of them holds it);
        a step that failed unhandled is not mentioned: the agent answers as if done, a false
        final answer."""
        if self.task.answer and any(self.task.answer in seen.content for _, seen in trace.calls if _informs(seen)):
            return f"Done. The results show: {self.task.answer}."
        return "Done: every step of the task is complete."

    def _step(self, trace: _Trace, step: Step) -> Generator[ToolCall, str, tuple[_Outcome, dict[str, Any], Seen]]:
        self._confirmed = False
        guessed = {**step.call.arguments, **dict(step.guess)}
        arguments = guessed
        looked_up = False
        if step.lookup is not None and (self.behaviour.checks_identifiers or self._rule_look_up(trace, step, guessed)):
            looked_up = True
            outcome, found, seen = yield from self._look_up(trace, step)
            if outcome is _Outcome.ASKED or (found is None and self.behaviour.gives_up_early):
                return (_Outcome.ASKED if outcome is _Outcome.ASKED else _Outcome.FAILED), guessed, seen
            if found is not None:
                arguments = found  # else go on with the guess: the lookup did not give it
        return (yield from self._settle(trace, step, arguments, looked_up))

    def _look_up(
        self, trace: _Trace, step: Step
    ) -> Generator[ToolCall, str, tuple[_Outcome, dict[str, Any] | None, Seen]]:
        """Run the step's lookup: the step's arguments with the value found, or ``None``."""
        lookup = step.lookup
        assert lookup is not None
        outcome, _, seen = yield from self._settle(trace, None, lookup.call.arguments, False, tool=lookup.call.tool)
        if outcome is not _Outcome.DONE:
            return outcome, None, seen
        value = lookup.resolve(seen.content)
        if value is None:
            return _Outcome.FAILED, None, seen
        return _Outcome.DONE, {**step.call.arguments, **dict(step.guess), lookup.argument: value}, seen

    def _settle(
        self, trace: _Trace, step: Step | None, arguments: dict[str, Any], looked_up: bool, *, tool: str | None = None
    ) -> Generator[ToolCall, str, tuple[_Outcome, dict[str, Any], Seen]]:
        """Make one call (a step's, or a lookup's or read-back's when ``step`` is ``None``)
        and deal with its failures until it succeeds, is handled, or is given up."""
        name = tool if tool is not None else step.call.tool if step is not None else ""
        readable = step is not None and step.effect is Effect.WRITE and step.read_back is not None
        seen = yield from trace.call(name, arguments)
        repeats = rewrites = 0
        worked_around = False
        while True:
            if not seen.failed:
                if readable and self.behaviour.reads_back and not rewrites:
                    assert step is not None  # after a write whatever it returned: read it back
                    outcome, holds, checked = yield from self._read_back(trace, step, arguments)
                    self._confirmed = holds is True
                    if outcome is _Outcome.ASKED:
                        return outcome, arguments, checked
                    return (_Outcome.DONE if holds else _Outcome.FAILED), arguments, seen
                return _Outcome.DONE, arguments, seen
            move = self._after_result(seen, name, readable=readable)
            if move is _Next.RETRY and repeats < TRANSIENT_REPEATS:
                repeats += 1
                seen = yield from trace.call(name, arguments)
                continue
            # read back before writing again; once more after a rewrite that failed in a way waiting fixes
            again = rewrites == 0 or (seen.transient and self.behaviour.retries_transients
                                      and rewrites <= TRANSIENT_REPEATS)
            if move is _Next.READ_BACK and readable and again:
                assert step is not None
                outcome, holds, checked = yield from self._read_back(trace, step, arguments)
                if outcome is _Outcome.ASKED:
                    return outcome, arguments, checked
                if holds is None:
                    return _Outcome.FAILED, arguments, seen
                if holds:
                    self._confirmed = True
                    return _Outcome.DONE, arguments, seen
                rewrites += 1  # absent and the write failed: write again
                seen = yield from trace.call(name, arguments)
                continue
            if move is _Next.ASK and seen.situation is not None:
                yield from trace.call(ASK_TOOL, {"question": _question(self.task, name, seen)})
                return _Outcome.ASKED, arguments, seen
            if move is _Next.CHANGE_CALL and step is not None and step.lookup is not None and not looked_up:
                looked_up = True
                outcome, found, checked = yield from self._look_up(trace, step)
                if outcome is _Outcome.ASKED:
                    return outcome, arguments, checked
                if found is None or found == arguments:
                    return _Outcome.FAILED, arguments, seen
                arguments = found
                seen = yield from trace.call(name, arguments)
                continue
            if move is _Next.WORK_AROUND and not worked_around:
                worked_around = True  # repeat it once unchanged, then skip it
                seen = yield from trace.call(name, arguments)
                continue
            if seen.transient and self.behaviour.asks and seen.situation is not None and (
                    repeats >= TRANSIENT_REPEATS or rewrites > TRANSIENT_REPEATS):
                # waiting did not fix it: a transient failure that outlasts its retries is a blocker
                # (DESIGN.md, "The situation taxonomy"), so an agent that asks, asks
                yield from trace.call(ASK_TOOL, {"question": _question(self.task, name, seen)})
                return _Outcome.ASKED, arguments, seen
            return _Outcome.FAILED, arguments, seen

    def _after_result(self, seen: Seen, tool: str, *, readable: bool) -> _Next:
        """What to do after a failed result: asking about a blocker when the agent asks (a
        rule never talks it out of that), then a matching rule's action, then the behaviour's."""
        if seen.blocker and self.behaviour.asks:
            return _Next.ASK
        for rule in self.rules:
            trigger = rule.trigger
            if trigger.moment is Moment.AFTER_RESULT and trigger.tool == tool and trigger.kind in (None, seen.kind):
                move = _ACTION_NEXT[rule.action.kind]
                if move is not _Next.READ_BACK or readable:
                    return move
        habits = self.behaviour
        if seen.blocker:
            return _Next.ASK if habits.asks else _Next.WORK_AROUND
        if readable and habits.reads_back:
            return _Next.READ_BACK
        if seen.transient and habits.retries_transients:
            return _Next.RETRY
        return _Next.UNHANDLED

    def _read_back(
        self, trace: _Trace, step: Step, arguments: Mapping[str, Any]
    ) -> Generator[ToolCall, str, tuple[_Outcome, bool | None, Seen]]:
        """Call the step's read-back (with the arguments the write used, for the identifier it
        shares): whether its result holds the text (``None`` when the read-back failed), and
        the outcome (``asked`` when the read-back met a blocker and the agent asked)."""
        read_back = step.read_back
        assert read_back is not None
        shared = {k: arguments[k] for k in read_back.arguments if k in arguments}
        outcome, _, seen = yield from self._settle(trace, None, {**read_back.arguments, **shared}, True,
                                                   tool=read_back.tool)
        if outcome is not _Outcome.DONE:
            return outcome, None, seen
        return outcome, step.read_back_holds in seen.content, seen

    def _confirm(self, trace: _Trace, write: _Write) -> Generator[ToolCall, str, _Outcome]:
        """Before answering (a rule): read the last write back; write again when its return
        failed and its effect is absent."""
        outcome, holds, _ = yield from self._read_back(trace, write.step, write.arguments)
        if holds is False and write.failed:
            yield from trace.call(write.step.call.tool, write.arguments)
        return outcome

    # -- rules ------------------------------------------------------------------------------------------

    def _rule_look_up(self, trace: _Trace, step: Step, arguments: Mapping[str, Any]) -> bool:
        lookup = step.lookup
        assert lookup is not None
        for rule in self.rules:
            trigger, action = rule.trigger, rule.action
            if (trigger.moment is not Moment.BEFORE_CALL or trigger.tool != step.call.tool
                    or action.kind is not ActionKind.LOOK_UP or action.tool not in (None, lookup.call.tool)):
                continue
            names = (trigger.argument,) if trigger.argument else tuple(name for name, _ in step.guess)
            if any(name in arguments and not trace.shown(name, arguments[name]) for name in names):
                return True
        return False

    def _rule_before_answer(self, write: _Write) -> bool:
        read_back = write.step.read_back
        assert read_back is not None
        return any(
            rule.trigger.moment is Moment.BEFORE_ANSWER and rule.trigger.tool == write.step.call.tool
            and rule.action.kind is ActionKind.READ_BACK and rule.action.tool in (None, read_back.tool)
            for rule in self.rules
        )



def _excerpt(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _question(task: Task, tool: str, seen: Seen) -> str:
    """What is blocked, what the tool said (quoted), what the user must do."""
    assert seen.situation is not None
    subject, kind = seen.situation.subject, seen.situation.kind.value
    return (f"{subject} is blocked ({kind}) when I call {tool} for the task {task.prompt!r}; {tool} said: "
            f"{_excerpt(seen.content)!r}. Please fix it on {subject} and tell me when it is done.")


# -- model agents ------------------------------------------------------------------------------------

class RuledModel:
    """A model with rules: the rules in force reach it as a section appended to the system
    message (:func:`unstuck.mining.rules.rules_prompt`); everything else passes through."""

    def __init__(self, model: Model, rules: Sequence[Rule] = (), *, environment: str = "this") -> None:
        self.name = model.name
        self.model = model
        self.section = rules_prompt(rules, environment)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        """The wrapped model's reply to the conversation with the rules section added."""
        if self.section and messages and messages[0].role is Role.SYSTEM:
            first = messages[0]
            messages = (dataclasses.replace(first, content=f"{first.content}\n\n{self.section}"), *messages[1:])
        return self.model.complete(messages, tools)


def model_agent(model: Model, rules: Sequence[Rule] = (), *, environment: str = "this") -> Model:
    """``model`` as a pool agent, given ``rules`` as a system-prompt section (none: the model
    unchanged in behaviour)."""
    return RuledModel(model, rules, environment=environment)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """An OpenAI-compatible model of the pool, by name (``--model NAME --base-url URL``):
    picklable, so a worker process builds the client itself. ``seed`` is sent with every
    request (servers that honour it repeat their output)."""

    name: str
    base_url: str | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise MiningError("a model spec needs a model name (--model NAME)")

    def build(self) -> OpenAIChatModel:
        """The client (:class:`unstuck.toolkit.models.OpenAIChatModel`)."""
        return OpenAIChatModel(self.name, base_url=self.base_url, seed=self.seed)


def build_agent(agent: str | ModelSpec, task: Task, rules: Sequence[Rule] = (), *, environment: str = "this") -> Model:
    """The agent for one rollout: a pool profile's :class:`ScriptedMiner` by name, or the
    model of a :class:`ModelSpec` with the rules as a prompt section.

    Raises:
        MiningError: for an unknown profile name.
    """
    if isinstance(agent, ModelSpec):
        return model_agent(agent.build(), rules, environment=environment)
    chosen = profile(agent)
    return ScriptedMiner(task, chosen.behaviour, rules, name=chosen.name)

