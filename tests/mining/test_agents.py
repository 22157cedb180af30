"""The scripted pool agents: each behaviour flag changes the calls made exactly as specified,
and a rule acts only when its stored trigger matches the agent's own trace."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from mining.toy_env import PUBLISHER, make_environment
from unstuck.core.clock import VirtualClock
from unstuck.core.tools import ToolResult
from unstuck.evals.chat_server import ChatServer
from unstuck.faults.bank import load_bank
from unstuck.loop.turn import run_turn
from unstuck.mining.agents import (
    GAVE_UP,
    TRANSIENT_REPEATS,
    Behaviour,
    ModelSpec,
    ScriptedMiner,
    build_agent,
    default_pool,
    judge,
    model_agent,
    profile,
    shown_result,
)
from unstuck.mining.environment import MiningError, asked_questions
from unstuck.mining.rollout import find_task
from unstuck.mining.rules import ActionKind, Moment, Rule, RuleAction, Trigger, rules_prompt
from unstuck.mining.trace import BadPattern
from unstuck.toolkit.models import Message, OpenAIChatModel, Role
from unstuck.toolkit.specs import Toolset, ToolSpec

# bundled failure forms (src/unstuck/data: observed Python exceptions)
TIMEOUT = "python-timeout-error"        # transient: timeout
REFUSED = "python-connection-refused"   # transient: unavailable
DENIED = "python-permission-error"      # blocker: permission

CAREFUL = profile("careful").behaviour
NONE = Behaviour(False, False, False, False, False)
LOOKS_UP = Behaviour(True, False, False, False, False)


@dataclass(frozen=True)
class Fault:
    """Replace the return of call ``index`` with the bank form ``form``; ``ran``: the real
    tool ran first (a lost response), else the request never reached it (nothing changed)."""

    form: str
    ran: bool = True


@dataclass
class Attempt:
    calls: list[tuple[str, dict[str, Any]]]
    answer: str
    passed: bool
    root: Path

    @property
    def tools(self) -> list[str]:
        return [name for name, _ in self.calls]


def attempt(root: Path, task_id: str, behaviour: Behaviour, *, faults: Mapping[int, Fault] | None = None,
            rules: Sequence[Rule] = ()) -> Attempt:
    """Run a scripted agent on a toy task through the bare loop, with failures at chosen calls."""
    env = make_environment()
    task = find_task(env, task_id)
    session = env.open(task, root)
    bank = load_bank()
    calls: list[tuple[str, dict[str, Any]]] = []
    faults = faults or {}

    def wrap(spec: ToolSpec) -> ToolSpec:
        def fn(**arguments: Any) -> ToolResult:
            fault = faults.get(len(calls))
            calls.append((spec.name, arguments))
            real = spec.invoke(arguments) if fault is None or fault.ran else None
            if fault is None:
                assert real is not None
                return real
            form = bank.get(fault.form)
            assert form is not None
            return form.to_result(spec.name)
        return replace(spec, fn=fn)

    result = run_turn(task.prompt, model=ScriptedMiner(task, behaviour, rules),
                      tools=Toolset(wrap(spec) for spec in session.tools.values()), unattended=True, guarded=False,
                      clock=VirtualClock(follow_real_time=False), stall_after_s=None)
    verdict = session.verify(task, result.answer)
    session.close()
    return Attempt(calls, result.answer, verdict.passed, root)


def body(root: Path, note_id: str) -> str:
    notes = json.loads((root / "notes.json").read_text())["notes"]
    return str(next(n["body"] for n in notes if n["id"] == note_id))


def rule(moment: Moment, tool: str, action: ActionKind, action_tool: str | None = None, *, kind: str | None = None,
         argument: str | None = None, enabled: bool = True) -> Rule:
    return Rule("r1", BadPattern.UNVERIFIED_IDENTIFIER, Trigger(moment, tool, kind, argument),
                RuleAction(action, action_tool), "a rule", support=2, enabled=enabled)


# -- the pool ---------------------------------------------------------------------------------------

def test_default_pool_is_capability_diverse_with_named_profiles() -> None:
    pool = default_pool()
    assert len(pool) >= 6
    assert len({p.name for p in pool}) == len(pool)
    assert len({p.behaviour for p in pool}) == len(pool)
    for flag in ("checks_identifiers", "reads_back", "retries_transients", "asks", "gives_up_early"):
        assert {getattr(p.behaviour, flag) for p in pool} == {True, False}, flag


def test_unknown_profile_is_a_mining_error_listing_the_profiles() -> None:
    with pytest.raises(MiningError, match="careful"):
        profile("genius")


# -- reading results --------------------------------------------------------------------------------

def test_judge_reads_a_tool_stated_blocker_from_its_json() -> None:
    content = json.dumps({"status": "error", "situation": {"kind": "auth", "subject": "notes-publisher"}})
    seen = judge("publish_note", {}, content)
    assert seen.blocker and seen.kind == "auth" and seen.situation is not None
    assert seen.situation.subject == "notes-publisher"


def test_judge_reads_a_timeout_exception_as_transient_and_a_plain_listing_as_success() -> None:
    assert judge("get_note", {}, "TimeoutError: timed out").transient
    listing = judge("list_notes", {}, json.dumps({"status": "ok", "items": [{"id": "n-1", "title": "A"}]}))
    assert not listing.failed and listing.situation is None


def test_judge_reads_the_status_line_unstucks_normaliser_writes() -> None:
    # tools.normalize_result renders an HTTP response as "HTTP {status}\n{body}" and a failed
    # command with a trailing "(exit code N)": a model reads them, so the agent does too
    assert shown_result("t", "HTTP 401\n{\"message\": \"Bad credentials\"}").http_status == 401
    unauthorised = judge("t", {}, "HTTP 401\n{\"message\": \"Bad credentials\"}")
    assert unauthorised.blocker and unauthorised.kind == "auth"
    assert judge("t", {}, "HTTP 429\n{\"message\": \"API rate limit exceeded\"}").transient
    missing = judge("run_command", {}, "/bin/bash: line 1: jq: command not found\n(exit code 127)")
    assert missing.blocker and missing.kind == "not_installed"
    assert shown_result("t", "ValueError: bad").ok is False


def test_judge_reads_an_empty_listing_as_an_answer_not_a_failure() -> None:
    assert not judge("t", {}, "[]").failed


# -- checks_identifiers ----------------------------------------------------------------------------

def test_checking_identifiers_runs_the_lookup_and_uses_the_found_id(tmp_path: Path) -> None:
    run = attempt(tmp_path, "read_deadline", CAREFUL)
    assert run.calls == [("list_notes", {}), ("get_note", {"note_id": "n-7f3a"})]
    assert "March 14" in run.answer and run.passed


def test_without_checking_identifiers_the_agent_acts_on_its_guess(tmp_path: Path) -> None:
    run = attempt(tmp_path, "read_deadline", replace(CAREFUL, checks_identifiers=False))
    assert run.calls == [("get_note", {"note_id": "budget-review"})]
    assert not run.passed


# -- reads_back -------------------------------------------------------------------------------------

def test_reading_back_after_a_successful_write_checks_it_and_moves_on(tmp_path: Path) -> None:
    run = attempt(tmp_path, "append_owner", CAREFUL)
    assert run.tools == ["list_notes", "append_to_note", "get_note"]
    assert run.calls[2] == ("get_note", {"note_id": "n-21c9"})
    assert run.passed


def test_a_failed_write_whose_effect_is_present_is_not_written_again(tmp_path: Path) -> None:
    run = attempt(tmp_path, "append_owner", CAREFUL, faults={1: Fault(TIMEOUT, ran=True)})
    assert run.tools == ["list_notes", "append_to_note", "get_note"]
    assert body(tmp_path, "n-21c9").count("Owner: Dana") == 1 and run.passed


def test_a_failed_write_whose_effect_is_absent_is_written_again(tmp_path: Path) -> None:
    run = attempt(tmp_path, "append_owner", CAREFUL, faults={1: Fault(TIMEOUT, ran=False)})
    assert run.tools == ["list_notes", "append_to_note", "get_note", "append_to_note"]
    assert body(tmp_path, "n-21c9").count("Owner: Dana") == 1 and run.passed


def test_without_reading_back_a_failed_write_is_retried_blindly_when_retrying_transients(tmp_path: Path) -> None:
    run = attempt(tmp_path, "append_owner", replace(CAREFUL, reads_back=False), faults={1: Fault(TIMEOUT)})
    assert run.tools == ["list_notes", "append_to_note", "append_to_note"]
    assert body(tmp_path, "n-21c9").count("Owner: Dana") == 2  # non-idempotent: the retry duplicated it
    assert not run.passed


def test_without_reading_back_or_retrying_a_failed_write_is_treated_as_failed(tmp_path: Path) -> None:
    run = attempt(tmp_path, "append_owner", LOOKS_UP, faults={1: Fault(TIMEOUT, ran=False)})
    assert run.tools == ["list_notes", "append_to_note"]
    assert run.answer.startswith("Done") and not run.passed  # went on: a false final answer


# -- retries_transients -----------------------------------------------------------------------------

def test_a_transient_failure_is_repeated_until_it_succeeds(tmp_path: Path) -> None:
    run = attempt(tmp_path, "read_deadline", CAREFUL, faults={1: Fault(TIMEOUT), 2: Fault(REFUSED)})
    assert run.calls[1:] == [("get_note", {"note_id": "n-7f3a"})] * 3
    assert run.passed


def test_transient_repeats_stop_at_the_ceiling(tmp_path: Path) -> None:
    faults = {i: Fault(TIMEOUT) for i in range(1, 1 + TRANSIENT_REPEATS + 2)}
    run = attempt(tmp_path, "read_deadline", CAREFUL, faults=faults)
    # a transient failure that outlasts its retries is a blocker (DESIGN.md): the asking agent asks
    assert run.tools == ["list_notes"] + ["get_note"] * (1 + TRANSIENT_REPEATS) + ["ask_user"]
    (tmp_path / "silent").mkdir()
    silent = attempt(tmp_path / "silent", "read_deadline", replace(CAREFUL, asks=False), faults=faults)
    assert silent.tools == ["list_notes"] + ["get_note"] * (1 + TRANSIENT_REPEATS)


def test_without_retrying_a_transient_failure_is_not_repeated(tmp_path: Path) -> None:
    run = attempt(tmp_path, "read_deadline", replace(CAREFUL, retries_transients=False), faults={1: Fault(TIMEOUT)})
    assert run.tools == ["list_notes", "get_note"]
    assert not run.passed


# -- asks ---------------------------------------------------------------------------------------------

def test_on_a_blocker_the_asking_agent_asks_naming_the_subject_then_answers(tmp_path: Path) -> None:
    run = attempt(tmp_path, "publish_launch", CAREFUL)
    assert run.tools == ["list_notes", "publish_note", "ask_user"]
    questions = asked_questions(tmp_path)
    assert len(questions) == 1 and PUBLISHER in questions[0]
    assert "needs a signed-in account" in questions[0]  # the tool's own words, quoted
    assert PUBLISHER in run.answer and run.passed


def test_without_asking_the_agent_works_around_the_blocker(tmp_path: Path) -> None:
    run = attempt(tmp_path, "publish_launch", replace(CAREFUL, asks=False))
    assert run.tools == ["list_notes", "publish_note", "publish_note"]
    assert asked_questions(tmp_path) == []
    assert run.answer.startswith("Done") and not run.passed


def test_an_injected_permission_failure_is_a_blocker_the_asking_agent_asks_about(tmp_path: Path) -> None:
    run = attempt(tmp_path, "find_urgent", CAREFUL, faults={0: Fault(DENIED)})
    assert run.tools == ["list_notes", "ask_user"]


# -- gives_up_early -----------------------------------------------------------------------------------

def test_giving_up_early_answers_could_not_complete_at_the_first_unhandled_failure(tmp_path: Path) -> None:
    quitter = Behaviour(True, True, False, True, True)
    run = attempt(tmp_path, "copy_deadline", quitter, faults={1: Fault(TIMEOUT)})
    assert run.tools == ["list_notes", "get_note"]
    assert run.answer.startswith(GAVE_UP)


def test_without_giving_up_the_agent_goes_on_and_answers_as_if_done(tmp_path: Path) -> None:
    goes_on = Behaviour(True, True, False, True, False)
    run = attempt(tmp_path, "copy_deadline", goes_on, faults={1: Fault(TIMEOUT)})
    assert run.tools == ["list_notes", "get_note", "list_notes", "append_to_note", "get_note"]
    assert run.answer.startswith("Done")


def test_the_final_answer_states_what_the_results_showed(tmp_path: Path) -> None:
    run = attempt(tmp_path, "find_urgent", NONE)
    assert "Vendor contract" in run.answer and run.passed


# -- rules ------------------------------------------------------------------------------------------

def test_a_before_call_look_up_rule_makes_a_flagless_agent_look_the_identifier_up(tmp_path: Path) -> None:
    lookup = rule(Moment.BEFORE_CALL, "get_note", ActionKind.LOOK_UP, "list_notes", argument="note_id")
    run = attempt(tmp_path, "read_deadline", NONE, rules=[lookup])
    assert run.calls == [("list_notes", {}), ("get_note", {"note_id": "n-7f3a"})]
    assert run.passed


@pytest.mark.parametrize("other", [
    rule(Moment.BEFORE_CALL, "append_to_note", ActionKind.LOOK_UP, "list_notes"),      # another tool
    rule(Moment.BEFORE_CALL, "get_note", ActionKind.LOOK_UP, "get_note"),              # not the step's lookup
    rule(Moment.BEFORE_CALL, "get_note", ActionKind.LOOK_UP, "list_notes", argument="text"),  # no such argument
    rule(Moment.BEFORE_CALL, "get_note", ActionKind.LOOK_UP, "list_notes", enabled=False),
])
def test_a_look_up_rule_whose_trigger_does_not_match_changes_nothing(tmp_path: Path, other: Rule) -> None:
    run = attempt(tmp_path, "read_deadline", NONE, rules=[other])
    assert run.calls == [("get_note", {"note_id": "budget-review"})]


def test_a_look_up_rule_does_not_fire_when_an_earlier_result_showed_the_value(tmp_path: Path) -> None:
    # copy_deadline: the first step looks up (flag); the second step's guess was never shown,
    # so the rule fires there only
    lookup = rule(Moment.BEFORE_CALL, "append_to_note", ActionKind.LOOK_UP, "list_notes", argument="note_id")
    run = attempt(tmp_path, "copy_deadline", NONE, rules=[lookup])
    assert run.calls[0] == ("get_note", {"note_id": "budget-review"})
    assert run.calls[1:] == [("list_notes", {}), ("append_to_note", {"note_id": "n-21c9", "text": "Budget due: March 14"})]


def test_an_after_result_retry_rule_repeats_the_matching_failure_only(tmp_path: Path) -> None:
    retry = rule(Moment.AFTER_RESULT, "list_notes", ActionKind.RETRY, kind="timeout")
    run = attempt(tmp_path, "find_urgent", NONE, rules=[retry], faults={0: Fault(TIMEOUT)})
    assert run.tools == ["list_notes", "list_notes"] and run.passed
    other = rule(Moment.AFTER_RESULT, "list_notes", ActionKind.RETRY, kind="unavailable")
    (tmp_path / "b").mkdir()
    run = attempt(tmp_path / "b", "find_urgent", NONE, rules=[other], faults={0: Fault(TIMEOUT)})
    assert run.tools == ["list_notes"] and not run.passed


def test_an_after_result_ask_rule_makes_a_non_asking_agent_ask(tmp_path: Path) -> None:
    ask = rule(Moment.AFTER_RESULT, "publish_note", ActionKind.ASK, "ask_user", kind="auth")
    run = attempt(tmp_path, "publish_launch", LOOKS_UP, rules=[ask])
    assert run.tools == ["list_notes", "publish_note", "ask_user"] and run.passed


def test_an_after_result_read_back_rule_reads_the_write_back_instead_of_failing(tmp_path: Path) -> None:
    read_back = rule(Moment.AFTER_RESULT, "append_to_note", ActionKind.READ_BACK, "get_note")
    run = attempt(tmp_path, "append_owner", LOOKS_UP, rules=[read_back], faults={1: Fault(TIMEOUT, ran=False)})
    assert run.tools == ["list_notes", "append_to_note", "get_note", "append_to_note"]
    assert run.passed


def test_a_before_answer_read_back_rule_checks_the_last_write(tmp_path: Path) -> None:
    check = rule(Moment.BEFORE_ANSWER, "append_to_note", ActionKind.READ_BACK, "get_note")
    run = attempt(tmp_path, "append_owner", LOOKS_UP, rules=[check], faults={1: Fault(TIMEOUT, ran=False)})
    assert run.tools == ["list_notes", "append_to_note", "get_note", "append_to_note"]
    assert run.passed
    (tmp_path / "w").mkdir()
    without = attempt(tmp_path / "w", "append_owner", LOOKS_UP, faults={1: Fault(TIMEOUT, ran=False)})
    assert without.tools == ["list_notes", "append_to_note"]


def test_a_change_call_rule_looks_the_identifier_up_instead_of_repeating(tmp_path: Path) -> None:
    change = rule(Moment.AFTER_RESULT, "get_note", ActionKind.CHANGE_CALL, kind="not_found")
    run = attempt(tmp_path, "read_deadline", NONE, rules=[change])
    assert run.calls == [("get_note", {"note_id": "budget-review"}), ("list_notes", {}),
                         ("get_note", {"note_id": "n-7f3a"})]
    assert run.passed


# -- model agents ----------------------------------------------------------------------------------

def test_a_model_agent_gets_the_rules_as_a_system_prompt_section() -> None:
    check = rule(Moment.BEFORE_ANSWER, "append_to_note", ActionKind.READ_BACK, "get_note")
    check = replace(check, text="Before answering, read the note back with get_note.")
    server = ChatServer([], closing="ok")  # no tools offered: the server answers with its closing text
    with server:
        agent = model_agent(OpenAIChatModel("m", base_url=server.base_url), [check], environment="toy_notes")
        reply = agent.complete([Message(Role.SYSTEM, "Be useful."), Message(Role.USER, "hi")], [])
    assert reply.content == "ok" and agent.name == "m"
    system = server.requests[0]["messages"][0]["content"]
    assert system == "Be useful.\n\n" + rules_prompt([check], "toy_notes")
    assert "read the note back with get_note" in system


def test_build_agent_makes_a_profile_scripted_and_a_model_spec_a_model() -> None:
    task = make_environment().tasks[0]
    scripted = build_agent("careful", task)
    assert isinstance(scripted, ScriptedMiner) and scripted.name == "careful"
    assert build_agent(ModelSpec("m", "http://127.0.0.1:9/v1"), task).name == "m"
    with pytest.raises(MiningError):
        ModelSpec(" ")
