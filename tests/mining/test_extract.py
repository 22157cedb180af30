"""Rule extraction from contrast pairs: what the success did at the failure's first erroneous
turn gives the rule (the table in :mod:`unstuck.mining.extract`'s doc); a pair whose success did
nothing different gives none; a candidate becomes a rule only when pairs recur."""

from __future__ import annotations

import json
import re

import pytest
from tests.mining.hand_traces import (
    ADDED,
    BODY,
    EFFECTS,
    LISTING,
    UNCOMMENTED,
    S,
    careful,
    guessed,
    noisy_recovered,
    trace,
    unchecked,
)

from unstuck.mining.environment import ASK_TOOL, BusinessObject
from unstuck.mining.extract import MIN_SUPPORT, Candidate, PairView, candidate_of, extract_rules, rule_id, rule_text
from unstuck.mining.rules import ActionKind, Moment, RuleAction, Trigger
from unstuck.mining.trace import BadPattern, Trace

NOTE = BusinessObject("note", "note_id", "a note with a title, a body and comments")
COMMENT = {"note_id": "n-7f3a", "body": BODY}
DEADLINE = json.dumps({"id": "n-7f3a", "title": "Budget review", "body": "Deadline: March 14."})
SIGN_IN = json.dumps({"status": "error", "message": "the publisher needs a signed-in account"})
ASKED = json.dumps({"status": "ok", "recorded": True})


def pair(success: Trace, failure: Trace, pattern: BadPattern, turn: int, task: str = "budget-comment") -> PairView:
    return PairView(task, success, failure, pattern, turn)


# -- the failures, each with its first erroneous turn as the analyzer reports it ----------------

def look_up_pair(**kwargs: str) -> PairView:
    """The failure comments on an id made up from the title (turn 0); the success listed the
    notes, whose result held the id it then passed."""
    return pair(careful(**kwargs), guessed(**kwargs), BadPattern.UNVERIFIED_IDENTIFIER, 0)


def unchecked_pair(**kwargs: str) -> PairView:
    """The failure wrote the comment again after a timed-out write (turn 2); the success read
    the note back after its write failed."""
    return pair(noisy_recovered(**kwargs), unchecked(**kwargs), BadPattern.UNCHECKED_WRITE, 2)


def false_answer() -> Trace:
    """The write's return failed, the read-back shows no comment, and the answer says done
    (the error is the final answer: turn 3, the number of steps)."""
    return trace([
        S("list_notes", {}, LISTING),
        S("add_comment", COMMENT, "503 Service Unavailable", ok=False, kind="unavailable", injected="github-api-502"),
        S("get_note", {"note_id": "n-7f3a"}, UNCOMMENTED),
    ])


def blocked_failure() -> Trace:
    """Publishing needs a sign-in; the agent commented instead of asking (turn 2)."""
    return trace([
        S("list_notes", {}, LISTING),
        S("publish", {"note_id": "n-7f3a"}, SIGN_IN, ok=False, kind="auth"),
        S("add_comment", {"note_id": "n-7f3a", "body": "published"}, ADDED),
    ])


def blocked_success() -> Trace:
    return trace([
        S("list_notes", {}, LISTING),
        S("publish", {"note_id": "n-7f3a"}, SIGN_IN, ok=False, kind="auth"),
        S(ASK_TOOL, {"question": "Please sign in to the publisher."}, ASKED),
    ], status="blocked", answer="I asked you to sign in to the publisher.")


def read_failed(kind: str) -> Trace:
    """Reading the note failed with ``kind`` and the agent stopped (the error is the final
    answer: turn 2)."""
    return trace([
        S("list_notes", {}, LISTING),
        S("get_note", {"note_id": "n-7f3a"}, "failed", ok=False, kind=kind),
    ], status="failed", answer="I could not read the note.")


def read_retried(kind: str) -> Trace:
    """Reading the note failed with ``kind``; the same call again succeeded."""
    return trace([
        S("list_notes", {}, LISTING),
        S("get_note", {"note_id": "n-7f3a"}, "failed", ok=False, kind=kind),
        S("get_note", {"note_id": "n-7f3a"}, DEADLINE),
    ], answer="March 14")


def repeated_failure() -> Trace:
    """The comment was refused as invalid and sent again unchanged (turn 2)."""
    refused = json.dumps({"status": "error", "message": "body too long"})
    return trace([
        S("list_notes", {}, LISTING),
        S("add_comment", COMMENT, refused, ok=False, kind="invalid_args"),
        S("add_comment", COMMENT, refused, ok=False, kind="invalid_args"),
    ], status="failed", answer="It keeps failing.")


def changed_success() -> Trace:
    """The comment was refused as invalid; the success sent a changed one."""
    return trace([
        S("list_notes", {}, LISTING),
        S("add_comment", COMMENT, json.dumps({"status": "error"}), ok=False, kind="invalid_args"),
        S("add_comment", {"note_id": "n-7f3a", "body": "Approved."}, ADDED),
    ])


# -- one candidate per row of the table ---------------------------------------------------------

def test_an_unverified_identifier_pair_whose_success_looked_it_up_gives_a_look_up_rule() -> None:
    found = candidate_of(look_up_pair(), EFFECTS)
    # the id the success passed (note_id n-7f3a) was in list_notes' result; the body it shares
    # with the failure is not an identifier the failure got wrong
    assert found == Candidate(BadPattern.UNVERIFIED_IDENTIFIER,
                              Trigger(Moment.BEFORE_CALL, "add_comment", argument="note_id"),
                              RuleAction(ActionKind.LOOK_UP, "list_notes"))


def test_unchecked_write_gives_read_back_after_result() -> None:
    found = candidate_of(unchecked_pair(), EFFECTS)
    assert found == Candidate(BadPattern.UNCHECKED_WRITE, Trigger(Moment.AFTER_RESULT, "add_comment"),
                              RuleAction(ActionKind.READ_BACK, "get_note"))


def test_false_final_answer_gives_read_back_before_answer() -> None:
    failure = false_answer()
    found = candidate_of(pair(careful(), failure, BadPattern.FALSE_FINAL_ANSWER, len(failure.steps)), EFFECTS)
    assert found == Candidate(BadPattern.FALSE_FINAL_ANSWER, Trigger(Moment.BEFORE_ANSWER, "add_comment"),
                              RuleAction(ActionKind.READ_BACK, "get_note"))


def test_worked_around_blocker_gives_ask_with_the_kind() -> None:
    found = candidate_of(pair(blocked_success(), blocked_failure(), BadPattern.WORKED_AROUND_BLOCKER, 2), EFFECTS)
    assert found == Candidate(BadPattern.WORKED_AROUND_BLOCKER, Trigger(Moment.AFTER_RESULT, "publish", kind="auth"),
                              RuleAction(ActionKind.ASK, ASK_TOOL))


def test_gave_up_on_a_transient_failure_the_success_retried_gives_retry() -> None:
    failure = read_failed("timeout")
    found = candidate_of(pair(read_retried("timeout"), failure, BadPattern.GAVE_UP, len(failure.steps)), EFFECTS)
    assert found == Candidate(BadPattern.GAVE_UP, Trigger(Moment.AFTER_RESULT, "get_note", kind="timeout"),
                              RuleAction(ActionKind.RETRY))


def test_repeated_failed_call_whose_success_changed_the_call_gives_change_call() -> None:
    found = candidate_of(pair(changed_success(), repeated_failure(), BadPattern.REPEATED_FAILED_CALL, 2), EFFECTS)
    assert found == Candidate(BadPattern.REPEATED_FAILED_CALL,
                              Trigger(Moment.AFTER_RESULT, "add_comment", kind="invalid_args"),
                              RuleAction(ActionKind.CHANGE_CALL))


def test_a_repeat_that_went_through_takes_its_triggers_kind_from_the_failure_before_it() -> None:
    refused = json.dumps({"status": "error", "message": "body too long"})
    repeated_then_ok = trace([
        S("list_notes", {}, LISTING),
        S("add_comment", COMMENT, refused, ok=False, kind="invalid_args"),
        S("add_comment", COMMENT, ADDED),  # the analyzer flags the repeat; this one happened to go through
    ], status="done")
    found = candidate_of(pair(changed_success(), repeated_then_ok, BadPattern.REPEATED_FAILED_CALL, 2), EFFECTS)
    assert found is not None and found.trigger == Trigger(Moment.AFTER_RESULT, "add_comment", kind="invalid_args")


# -- successes that did nothing different: no candidate -----------------------------------------

def straight_comment() -> Trace:
    """A success that commented on the right id with no earlier result showing it, and never
    read anything back."""
    return trace([S("add_comment", COMMENT, ADDED)])


@pytest.mark.parametrize(("success", "failure", "pattern", "turn"), [
    pytest.param(straight_comment(), guessed(), BadPattern.UNVERIFIED_IDENTIFIER, 0, id="no-look-up"),
    pytest.param(careful(), unchecked(), BadPattern.UNCHECKED_WRITE, 2, id="its-write-never-failed"),
    pytest.param(straight_comment(), false_answer(), BadPattern.FALSE_FINAL_ANSWER, 3, id="no-read-after-write"),
    pytest.param(careful(), blocked_failure(), BadPattern.WORKED_AROUND_BLOCKER, 2, id="never-asked"),
    pytest.param(careful(), read_failed("timeout"), BadPattern.GAVE_UP, 2, id="never-retried"),
    pytest.param(careful(), repeated_failure(), BadPattern.REPEATED_FAILED_CALL, 2, id="its-call-never-failed"),
])
def test_a_pair_whose_success_did_nothing_different_gives_no_candidate(
        success: Trace, failure: Trace, pattern: BadPattern, turn: int) -> None:
    assert candidate_of(pair(success, failure, pattern, turn), EFFECTS) is None


def test_gave_up_on_a_failure_waiting_does_not_fix_gives_no_retry() -> None:
    # not_found is not transient (DESIGN.md's taxonomy): calling again cannot fix it
    failure = read_failed("not_found")
    assert candidate_of(pair(read_retried("not_found"), failure, BadPattern.GAVE_UP, 2), EFFECTS) is None


# -- recurrence, order and ids -------------------------------------------------------------------

def test_a_candidate_needs_min_support_pairs_to_become_a_rule() -> None:
    assert MIN_SUPPORT == 2
    assert extract_rules([look_up_pair()], effects=EFFECTS, objects=(NOTE,)) == ()
    (rule,) = extract_rules([look_up_pair(seed="0"), look_up_pair(seed="1")], effects=EFFECTS, objects=(NOTE,))
    assert (rule.id, rule.support, rule.enabled, rule.effect) == (rule_id(Candidate(
        rule.pattern, rule.trigger, rule.action)), 2, True, None)
    assert (rule.pattern, rule.trigger, rule.action) == (
        BadPattern.UNVERIFIED_IDENTIFIER, Trigger(Moment.BEFORE_CALL, "add_comment", argument="note_id"),
        RuleAction(ActionKind.LOOK_UP, "list_notes"))
    raised = extract_rules([look_up_pair(seed="0"), look_up_pair(seed="1")], effects=EFFECTS, objects=(NOTE,),
                           min_support=3)
    assert raised == ()


def test_pairs_that_propose_nothing_count_toward_no_rule() -> None:
    nothing = pair(straight_comment(), guessed(), BadPattern.UNVERIFIED_IDENTIFIER, 0)
    assert extract_rules([nothing, nothing, nothing], effects=EFFECTS, objects=(NOTE,)) == ()


def test_rules_come_in_order_of_support_each_with_a_stable_id() -> None:
    pairs = [unchecked_pair(seed="0"), unchecked_pair(seed="1"),
             look_up_pair(seed="0"), look_up_pair(seed="1"), look_up_pair(seed="2")]
    rules = extract_rules(pairs, effects=EFFECTS, objects=(NOTE,))
    assert [(r.action.kind, r.support) for r in rules] == [(ActionKind.LOOK_UP, 3), (ActionKind.READ_BACK, 2)]
    # the id depends on the rule alone: mined again from other pairs, it is the same id
    again = extract_rules(pairs[2:] + pairs[:1] * 2, effects=EFFECTS, objects=(NOTE,))
    assert {r.id for r in again} == {r.id for r in rules} and all(re.fullmatch(r"r[0-9a-f]{6}", r.id) for r in rules)
    assert len({r.id for r in rules}) == len(rules)


def test_rule_text_names_the_tools_and_the_business_object() -> None:
    (rule,) = extract_rules([look_up_pair(seed="0"), look_up_pair(seed="1")], effects=EFFECTS, objects=(NOTE,))
    assert "add_comment" in rule.text and "list_notes" in rule.text
    assert "note's note_id" in rule.text  # the business object owning the identifier, by its name
    assert rule.text == rule_text(Candidate(rule.pattern, rule.trigger, rule.action), (NOTE,))


@pytest.mark.parametrize(("candidate", "names"), [
    (Candidate(BadPattern.UNCHECKED_WRITE, Trigger(Moment.AFTER_RESULT, "add_comment"),
               RuleAction(ActionKind.READ_BACK, "get_note")), ("add_comment", "get_note")),
    (Candidate(BadPattern.FALSE_FINAL_ANSWER, Trigger(Moment.BEFORE_ANSWER, "add_comment"),
               RuleAction(ActionKind.READ_BACK, "get_note")), ("add_comment", "get_note")),
    (Candidate(BadPattern.WORKED_AROUND_BLOCKER, Trigger(Moment.AFTER_RESULT, "publish", kind="auth"),
               RuleAction(ActionKind.ASK, ASK_TOOL)), ("publish", "auth", ASK_TOOL)),
    (Candidate(BadPattern.GAVE_UP, Trigger(Moment.AFTER_RESULT, "get_note", kind="timeout"),
               RuleAction(ActionKind.RETRY)), ("get_note", "timeout")),
    (Candidate(BadPattern.REPEATED_FAILED_CALL, Trigger(Moment.AFTER_RESULT, "add_comment", kind="invalid_args"),
               RuleAction(ActionKind.CHANGE_CALL)), ("add_comment", "invalid_args")),
])
def test_every_rule_sentence_names_its_trigger_tool_kind_and_action_tool(
        candidate: Candidate, names: tuple[str, ...]) -> None:
    text = rule_text(candidate, (NOTE,))
    assert all(name in text for name in names), text


def test_the_same_pairs_in_any_order_give_the_same_rules() -> None:
    pairs = [unchecked_pair(seed="0"), look_up_pair(seed="0"), unchecked_pair(seed="1"), look_up_pair(seed="1")]
    forward = extract_rules(pairs, effects=EFFECTS, objects=(NOTE,))
    assert forward == extract_rules(pairs[::-1], effects=EFFECTS, objects=(NOTE,))
    # equal support: in trigger order (the same tool here, then the action's kind)
    assert [(r.action.kind, r.support) for r in forward] == [(ActionKind.LOOK_UP, 2), (ActionKind.READ_BACK, 2)]
