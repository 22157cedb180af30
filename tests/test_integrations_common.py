"""What the framework adapters share (unstuck.integrations.common)."""

from __future__ import annotations

import pytest

from unstuck.core.situations import Kind, Situation, Source
from unstuck.core.tools import Effect
from unstuck.decide.escalation import Answer, build_escalation
from unstuck.integrations.common import Blocked, command_argument_of, read_answer, spec_for


def test_a_string_parameter_named_command_makes_a_command_line_tool_whose_subject_is_its_program() -> None:
    spec = spec_for("shell", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
    assert spec.command_argument == "command"
    assert spec.subject_of({"command": "gh issue list --repo o/r"}) == "gh"
    assert spec.interactive_call({"command": "gh auth login"}) is not None  # checked before dispatch


def test_langchains_list_of_commands_is_a_command_argument_too() -> None:
    schema = {"type": "object", "properties": {"commands": {"type": "array", "items": {"type": "string"}}}}
    assert command_argument_of(schema) == "commands"


def test_a_tool_without_a_command_parameter_keeps_its_name_as_subject() -> None:
    spec = spec_for("weather", parameters={"type": "object", "properties": {"command": {"type": "integer"},
                                                                             "city": {"type": "string"}}})
    assert spec.command_argument is None and spec.subject_of({"city": "Oslo"}) == "weather"


def test_given_fields_override_what_is_inferred() -> None:
    spec = spec_for("deploy", parameters={"type": "object", "properties": {"command": {"type": "string"}}},
                    command_argument="", subject="deployer", effect="write")
    assert spec.command_argument == "" and spec.subject_of({"command": "kubectl apply"}) == "deployer"
    assert spec.effect is Effect.WRITE


def test_the_default_callable_says_the_framework_runs_the_tool() -> None:
    with pytest.raises(RuntimeError, match="run by its framework"):
        spec_for("x").fn()


@pytest.mark.parametrize("bad", [{"name": ""}, {"name": "x", "effect": "delete"}])
def test_a_malformed_description_is_refused(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        spec_for(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("said", "answer"), [
    ("I've done it", Answer.DONE), ("I’ve done it.", Answer.DONE), ("done", Answer.DONE), ("DONE", Answer.DONE),
    ("Skip it", Answer.SKIP), ("skip", Answer.SKIP), ("Stop", Answer.STOP), (Answer.STOP, Answer.STOP),
    ({"answer": "done"}, Answer.DONE), ({"action": "Skip it"}, Answer.SKIP),
])
def test_the_users_answer_is_read_from_what_a_framework_resumes_with(said: object, answer: Answer) -> None:
    assert read_answer(said) is answer


@pytest.mark.parametrize("said", ["maybe later", "", 3, {"other": "done"}, None])
def test_anything_else_is_no_answer_and_says_what_was_expected(said: object) -> None:
    with pytest.raises(ValueError, match="not an answer"):
        read_answer(said)


def test_blocked_carries_the_question_and_the_state_and_reads_as_the_question() -> None:
    escalation = build_escalation(Situation(Kind.AUTH, "gh", source=Source.DECLARED, unblock="gh auth login"),
                                  task="list issues")
    blocked = Blocked(escalation, state='{"version": 1}')
    assert str(blocked) == escalation.text and "gh auth login" in str(blocked)
    assert blocked.escalation.unblock == "gh auth login" and blocked.state == '{"version": 1}'
