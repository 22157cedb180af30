"""Joint labels: the deterministic analyzer's trace rules, the model analyzer against a chat
server on 127.0.0.1, and how the analyzer's label joins the verifier's."""

from __future__ import annotations

import json
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st
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
    task,
    trace,
    unchecked,
)

from unstuck.core.situations import Kind
from unstuck.core.tools import Effect, ToolCall
from unstuck.decide.retry import RETRY_RULES
from unstuck.evals.chat_server import ChatServer
from unstuck.faults.bank import load_bank
from unstuck.mining.environment import BusinessObject, MiningError, Step, Task, Verification
from unstuck.mining.labels import (
    AnalyzerLabel,
    DeterministicAnalyzer,
    LabelStats,
    ModelAnalyzer,
    identifier_arguments,
    joint_label,
)
from unstuck.mining.trace import BadPattern, Trace
from unstuck.toolkit.models import OpenAIChatModel

PASSED = Verification(True, "the note holds the comment once")
FAILED = Verification(False, "the note holds no such comment")
ANALYZER = DeterministicAnalyzer()


def label(t: Trace, analyzer: DeterministicAnalyzer = ANALYZER) -> AnalyzerLabel:
    return analyzer.label(t, task(t.task), EFFECTS)


# -- the deterministic analyzer: correct rollouts ---------------------------------------------

def test_a_careful_clean_run_is_correct() -> None:
    found = label(careful())
    assert (found.correct, found.pattern, found.first_error_turn, found.error) == (True, None, None, None)
    assert found.analyzer == "deterministic"


def test_a_recovered_noisy_success_is_a_success() -> None:
    found = label(noisy_recovered())
    assert found.correct and found.pattern is None
    assert joint_label(found, PASSED, noisy_recovered()) is not None


def test_an_identifier_the_task_prompt_gives_is_verified() -> None:
    t = trace([S("add_comment", {"note_id": "n-4e6d", "body": "Booked."}, ADDED)], task_id="offsite")
    found = DeterministicAnalyzer().label(t, Task("offsite", 'Add "Booked." to note n-4e6d.', ()), EFFECTS)
    assert found.correct


def test_asking_right_after_a_blocker_is_correct() -> None:
    t = trace([
        S("publish", {"note_id": "n-4e6d"}, "HTTP 401: Bad credentials", ok=False, kind="auth"),
        S("ask_user", {"question": "publish needs a sign-in: please run notes login"}, '{"status": "ok"}'),
    ], status="blocked", answer="Blocked: publish needs a sign-in.", task_id="publish")
    assert DeterministicAnalyzer().label(t, Task("publish", "Publish note n-4e6d.", ()), EFFECTS).correct


# -- unverified identifiers -------------------------------------------------------------------

def test_acting_on_an_identifier_no_result_showed_is_an_unverified_identifier() -> None:
    found = label(guessed())
    assert (found.correct, found.pattern, found.first_error_turn) == (False, BadPattern.UNVERIFIED_IDENTIFIER, 0)
    assert "add_comment" in found.diagnosis and "note_id" in found.diagnosis and "budget-review" in found.diagnosis


def test_a_value_inside_a_longer_token_does_not_verify_an_identifier() -> None:
    t = trace([
        S("list_notes", {}, json.dumps({"items": [{"number": 17, "title": "Budget review"}]})),
        S("get_note", {"number": 7}, UNCOMMENTED),
    ])
    found = label(t)
    assert (found.pattern, found.first_error_turn) == (BadPattern.UNVERIFIED_IDENTIFIER, 1)


def test_an_identifier_seen_only_in_a_failed_result_is_unverified() -> None:
    t = trace([
        S("get_note", {"note_id": "n-7f3a"}, "no note with id 'n-0000' (did you mean n-0000?)", ok=False,
          kind="not_found"),
        S("get_note", {"note_id": "n-0000"}, UNCOMMENTED),
    ], task_id="budget-comment")
    found = DeterministicAnalyzer().label(t, Task("budget-comment", "Read note n-7f3a.", ()), EFFECTS)
    assert (found.pattern, found.first_error_turn) == (BadPattern.UNVERIFIED_IDENTIFIER, 1)


def test_business_object_identifiers_replace_the_inferred_keys() -> None:
    objects = [BusinessObject("note", "note_key", "a note in the workspace")]
    analyzer = DeterministicAnalyzer.for_objects(objects)
    made_up = trace([S("get_note", {"note_key": "k-1", "note_id": "free-text"}, UNCOMMENTED)])
    found = label(made_up, analyzer)
    assert (found.pattern, found.first_error_turn) == (BadPattern.UNVERIFIED_IDENTIFIER, 0)
    assert "note_key" in found.diagnosis


def test_identifier_arguments_follow_the_key_shapes() -> None:
    call = ToolCall.of("c", "t", {"issue_number": 5, "repo_name": "core", "labels_id": ["a", "b"], "body": "x",
                                  "flag_id": True, "empty_id": ""})
    assert identifier_arguments(call, None) == [("issue_number", "5"), ("labels_id", "a"), ("labels_id", "b"),
                                                ("repo_name", "core")]


# -- unchecked writes -------------------------------------------------------------------------

def test_a_failed_write_written_again_without_a_read_back_is_an_unchecked_write() -> None:
    # a timeout is within its retry attempts, but the write's effect may stand: read it back first
    found = label(unchecked())
    assert (found.pattern, found.first_error_turn) == (BadPattern.UNCHECKED_WRITE, 2)
    assert "add_comment" in found.diagnosis


def test_a_failed_write_followed_by_the_answer_without_a_read_back_is_an_unchecked_write() -> None:
    t = trace([
        S("list_notes", {}, LISTING),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, "timed out", ok=False, kind="timeout"),
    ])
    found = label(t)
    assert (found.pattern, found.first_error_turn) == (BadPattern.UNCHECKED_WRITE, len(t.steps))


def test_a_read_back_of_another_object_does_not_check_the_write() -> None:
    t = trace([
        S("list_notes", {}, LISTING),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, "timed out", ok=False, kind="timeout"),
        S("get_note", {"note_id": "n-21c9"}, UNCOMMENTED),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED),
    ])
    assert (label(t).pattern, label(t).first_error_turn) == (BadPattern.UNCHECKED_WRITE, 3)


def test_a_read_back_that_does_not_show_the_write_then_done_is_a_false_final_answer() -> None:
    t = trace([
        S("list_notes", {}, LISTING),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, "timed out", ok=False, kind="timeout"),
        S("get_note", {"note_id": "n-7f3a"}, UNCOMMENTED),
    ])
    found = label(t)
    assert (found.pattern, found.first_error_turn) == (BadPattern.FALSE_FINAL_ANSWER, len(t.steps))


def test_a_read_back_then_redoing_the_write_is_correct() -> None:
    t = trace([
        S("list_notes", {}, LISTING),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, "timed out", ok=False, kind="timeout"),
        S("get_note", {"note_id": "n-7f3a"}, UNCOMMENTED),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED),
    ])
    assert label(t).correct


# -- repeated failed calls and the retry table ------------------------------------------------

@pytest.mark.parametrize("kind", [Kind.TIMEOUT, Kind.UNAVAILABLE, Kind.NETWORK])
def test_a_retry_the_retry_table_allows_is_not_a_repeated_failed_call(kind: Kind) -> None:
    attempts = RETRY_RULES[kind].attempts  # the first call included
    failing = [S("list_notes", {}, f"{kind.value} (injected)", ok=False, kind=kind.value)] * (attempts - 1)
    t = trace([*failing, S("list_notes", {}, LISTING),
               S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED)])
    assert label(t).correct


@pytest.mark.parametrize("kind", [Kind.TIMEOUT, Kind.UNAVAILABLE, Kind.NETWORK])
def test_a_retry_beyond_the_retry_table_is_a_repeated_failed_call(kind: Kind) -> None:
    attempts = RETRY_RULES[kind].attempts
    failing = [S("list_notes", {}, f"{kind.value} (injected)", ok=False, kind=kind.value)] * (attempts + 1)
    found = label(trace(failing, status="failed"))
    assert (found.pattern, found.first_error_turn) == (BadPattern.REPEATED_FAILED_CALL, attempts)
    assert "list_notes" in found.diagnosis


def test_repeating_a_call_that_failed_with_a_self_fixable_kind_is_a_repeated_failed_call() -> None:
    bad = S("list_notes", {"label": "financ"}, "invalid label 'financ'", ok=False, kind="invalid_args")
    found = label(trace([bad, bad], status="failed"))
    assert (found.pattern, found.first_error_turn) == (BadPattern.REPEATED_FAILED_CALL, 1)


def test_an_injected_rate_limit_the_bank_marks_transient_is_retried_within_its_attempts() -> None:
    bank = load_bank()
    form = bank.get("gh-rate-limited")
    assert form is not None and form.transient
    t = trace([S("list_notes", {}, form.output, ok=False, kind="quota", injected=form.id),
               S("list_notes", {}, LISTING), S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED)])
    assert DeterministicAnalyzer(bank=bank).label(t, task(), EFFECTS).correct


def test_an_injected_spent_quota_is_a_blocker_and_a_call_after_it_works_around_it() -> None:
    bank = load_bank()
    form = bank.get("case-c059")
    assert form is not None and not form.transient
    t = trace([S("list_notes", {}, form.output, ok=False, kind="quota", injected=form.id),
               S("list_notes", {}, LISTING)])
    found = DeterministicAnalyzer(bank=bank).label(t, task(), EFFECTS)
    assert (found.pattern, found.first_error_turn) == (BadPattern.WORKED_AROUND_BLOCKER, 1)


@pytest.mark.parametrize(("content", "pattern"), [
    # RFC 6585 section 4: 429 Too Many Requests, with a wait the server names: retry
    ('{"status": "error", "http_status": 429, "message": "rate limit exceeded, retry after 30 seconds"}', None),
    # OpenAI's insufficient_quota error: a spent balance waiting does not fix
    ("You exceeded your current quota, please check your plan and billing details.",
     BadPattern.WORKED_AROUND_BLOCKER),
])
def test_a_real_quota_result_is_read_by_the_classifier(content: str, pattern: BadPattern | None) -> None:
    t = trace([S("list_notes", {}, content, ok=False, kind="quota"), S("list_notes", {}, LISTING),
               S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED)])
    assert label(t).pattern == pattern


# -- blockers, false answers, giving up -------------------------------------------------------

def test_calls_after_an_auth_blocker_instead_of_asking_work_around_it() -> None:
    t = trace([
        S("publish", {"note_id": "n-4e6d"}, "HTTP 401: Bad credentials", ok=False, kind="auth"),
        S("list_notes", {}, LISTING),
    ], task_id="publish")
    found = DeterministicAnalyzer().label(t, Task("publish", "Publish note n-4e6d.", ()), EFFECTS)
    assert (found.pattern, found.first_error_turn) == (BadPattern.WORKED_AROUND_BLOCKER, 1)
    assert "publish" in found.diagnosis and "list_notes" in found.diagnosis


def test_a_done_answer_right_after_a_blocker_is_a_false_final_answer() -> None:
    t = trace([S("list_notes", {}, LISTING),
               S("publish", {"note_id": "n-7f3a"}, "HTTP 401: Bad credentials", ok=False, kind="auth")])
    found = label(t)
    assert (found.pattern, found.first_error_turn) == (BadPattern.FALSE_FINAL_ANSWER, 2)


def test_a_done_answer_when_nothing_succeeded_is_a_false_final_answer() -> None:
    t = trace([S("list_notes", {}, "503 Service Unavailable", ok=False, kind="unavailable")])
    found = label(t)
    assert (found.pattern, found.first_error_turn) == (BadPattern.FALSE_FINAL_ANSWER, 1)


def test_a_turn_that_ended_undone_without_a_bad_call_gave_up() -> None:
    t = trace([S("list_notes", {}, LISTING)], status="failed", answer="I could not finish.")
    found = label(t)
    assert (found.pattern, found.first_error_turn) == (BadPattern.GAVE_UP, 1)
    assert "list_notes" in found.diagnosis


def test_the_analyzer_reads_only_the_prompt_of_the_task() -> None:
    solved = Task("budget-comment", task().prompt,
                  (Step(ToolCall.of("s", "add_comment", {"note_id": "budget-review", "body": BODY})),),
                  answer="budget-review")
    assert ANALYZER.label(guessed(), solved, EFFECTS) == ANALYZER.label(guessed(), task(), EFFECTS)


def test_labelling_a_trace_against_another_task_is_refused() -> None:
    with pytest.raises(MiningError, match="budget-comment"):
        ANALYZER.label(careful(), task("other"), EFFECTS)


# -- joint labels -----------------------------------------------------------------------------

def test_disagreement_discards_the_rollout() -> None:
    analyzed = label(careful())
    assert analyzed.correct
    assert joint_label(analyzed, FAILED, careful()) is None
    assert LabelStats().counted(analyzed, FAILED) == LabelStats(disagreed=1)


def test_an_agreed_failure_carries_the_state_before_its_first_erroneous_turn() -> None:
    t = unchecked()
    joined = joint_label(label(t), FAILED, t)
    assert joined is not None and not joined.correct
    assert (joined.pattern, joined.first_error_turn) == (BadPattern.UNCHECKED_WRITE, 2)
    assert joined.pre_error_state == t.steps[2].before
    assert joined.evidence == FAILED.evidence and joined.task == "budget-comment"


def test_an_agreed_failure_at_the_final_answer_carries_the_final_state() -> None:
    t = trace([S("list_notes", {}, LISTING)], status="failed")
    joined = joint_label(label(t), FAILED, t)
    assert joined is not None and joined.first_error_turn == 1 and joined.pre_error_state == t.final


def test_an_agreed_success_carries_no_error() -> None:
    joined = joint_label(label(careful()), PASSED, careful())
    assert joined is not None and joined.correct
    assert (joined.pattern, joined.first_error_turn, joined.pre_error_state) == (None, None, None)


def test_a_failure_label_whose_turn_is_no_step_is_refused() -> None:
    wrong = AnalyzerLabel(False, BadPattern.GAVE_UP, 9, "gave up", "model:x")
    with pytest.raises(MiningError, match="turn 9"):
        joint_label(wrong, FAILED, careful())


def test_label_stats_count_agreement_and_discards() -> None:
    error = AnalyzerLabel.failed("model:x", "not JSON")
    stats = LabelStats()
    for analyzed, verdict in [(label(careful()), PASSED), (label(guessed()), FAILED), (label(unchecked()), FAILED),
                              (label(careful()), FAILED), (error, PASSED)]:
        stats = stats.counted(analyzed, verdict)
    assert stats == LabelStats(agreed=3, disagreed=1, errors=1)
    assert stats.agreement_rate == 3 / 4 and stats.discard_rate == 2 / 5
    assert "3 of 5" in stats.summary()
    assert stats + stats == LabelStats(6, 2, 2)


def test_empty_label_stats_have_zero_rates() -> None:
    assert (LabelStats().agreement_rate, LabelStats().discard_rate) == (0.0, 0.0)


# -- the model analyzer, against a chat server on 127.0.0.1 -----------------------------------

def model_label(reply: str, t: Trace | None = None) -> tuple[AnalyzerLabel, list[dict[str, object]]]:
    with ChatServer([], closing=reply) as server:
        model = OpenAIChatModel("judge", base_url=server.base_url, max_retries=0, timeout_s=10)
        found = ModelAnalyzer(model).label(t or unchecked(), task(), EFFECTS)
        return found, server.requests


def test_model_analyzer_reads_its_json_verdict_and_is_shown_the_trace() -> None:
    verdict = {"correct": False, "pattern": "unchecked_write", "first_error_turn": 2,
               "diagnosis": "add_comment was written again after it timed out, without get_note."}
    found, requests = model_label(json.dumps(verdict))
    assert found == AnalyzerLabel(False, BadPattern.UNCHECKED_WRITE, 2, verdict["diagnosis"], "model:judge")
    (request,) = requests
    assert "tools" not in request
    shown = json.dumps(request["messages"])
    assert all(p.value in shown for p in BadPattern)
    assert "add_comment" in shown and "timed out after 30 s" in shown and "final answer" in shown


def test_model_analyzer_reads_a_json_object_in_a_code_fence() -> None:
    found, _ = model_label('```json\n{"correct": true, "pattern": null, "first_error_turn": null, '
                           '"diagnosis": "read back and recovered"}\n```', noisy_recovered())
    assert found.correct and found.error is None


def test_model_analyzer_bounds_each_shown_result() -> None:
    long = trace([S("list_notes", {}, "x" * 50_000), S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED)])
    _, requests = model_label('{"correct": true, "pattern": null, "first_error_turn": null, "diagnosis": "ok"}', long)
    assert len(json.dumps(requests[0]["messages"])) < 5_000


def test_model_analyzer_garbage_reply_is_an_error_label() -> None:
    found, _ = model_label("The agent did fine, I think.")
    assert found.error is not None and "not JSON" in found.error and not found.correct
    assert joint_label(found, PASSED, unchecked()) is None and joint_label(found, FAILED, unchecked()) is None
    assert LabelStats().counted(found, FAILED) == LabelStats(errors=1)


@pytest.mark.parametrize(("reply", "complaint"), [
    ('["correct", false]', "not a JSON object"),
    ('{"pattern": "gave_up", "first_error_turn": 1, "diagnosis": "x"}', "'correct'"),
    ('{"correct": false, "pattern": "wandered_off", "first_error_turn": 1, "diagnosis": "x"}', "'pattern'"),
    ('{"correct": false, "pattern": null, "first_error_turn": 1, "diagnosis": "x"}', "'pattern'"),
    ('{"correct": false, "pattern": "gave_up", "first_error_turn": 4, "diagnosis": "x"}', "'first_error_turn'"),
    ('{"correct": false, "pattern": "gave_up", "first_error_turn": "2", "diagnosis": "x"}', "'first_error_turn'"),
    ('{"correct": true, "pattern": null, "first_error_turn": null}', "'diagnosis'"),
])
def test_model_analyzer_reply_that_is_not_the_asked_object_is_an_error_label(reply: str, complaint: str) -> None:
    found, _ = model_label(reply)  # the unchecked trace has 3 steps: turns 0..3
    assert found.error is not None and complaint in found.error


def test_model_analyzer_unreachable_server_is_an_error_label() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel("judge", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout_s=5)
    found = ModelAnalyzer(model).label(careful(), task(), {"add_comment": Effect.WRITE})
    assert found.error is not None and "could not be asked" in found.error



# -- any trace --------------------------------------------------------------------------------

POOL = [
    S("list_notes", {}, LISTING),
    S("list_notes", {}, "timed out", ok=False, kind="timeout"),
    S("get_note", {"note_id": "n-7f3a"}, UNCOMMENTED),
    S("get_note", {"note_id": "n-9999"}, "no such note", ok=False, kind="not_found"),
    S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED),
    S("add_comment", {"note_id": "n-7f3a", "body": BODY}, "503 Service Unavailable", ok=False, kind="unavailable"),
    S("publish", {"note_id": "n-7f3a"}, "HTTP 401: Bad credentials", ok=False, kind="auth"),
    S("ask_user", {"question": "please sign in to publish"}, '{"status": "ok"}'),
]


@given(st.lists(st.sampled_from(POOL), max_size=8), st.sampled_from(["done", "blocked", "failed"]))
def test_any_trace_gets_a_label_whose_turn_has_a_pre_error_state(steps: list[S], status: str) -> None:
    t = trace(steps, status=status)
    found = label(t)
    assert found.error is None
    if found.correct:
        assert (found.pattern, found.first_error_turn) == (None, None)
        return
    assert found.pattern is not None and found.first_error_turn is not None
    assert 0 <= found.first_error_turn <= len(t.steps)
    joined = joint_label(found, FAILED, t)
    assert joined is not None and joined.pre_error_state is not None
    expected = t.final if found.first_error_turn == len(t.steps) else t.steps[found.first_error_turn].before
    assert joined.pre_error_state == expected


# -- review: what the analyzer reads, and three readings that were wrong ------------------------

@pytest.mark.parametrize("make", [careful, guessed, unchecked, noisy_recovered])
def test_the_analyzer_never_reads_the_verifiers_verdict_in_the_trace(make: object) -> None:
    import dataclasses

    assert callable(make)
    base = make()
    said_yes, said_no = dataclasses.replace(base, verdict=PASSED), dataclasses.replace(base, verdict=FAILED)
    assert label(said_yes) == label(said_no) == label(base)


def test_an_answer_that_says_it_could_not_complete_is_gave_up_though_done() -> None:
    failed = json.dumps({"status": "error", "message": "not found"})
    quit_early = trace([S("list_notes", {}, LISTING), S("get_note", {"note_id": "n-7f3a"}, failed, ok=False,
                                                         kind="not_found")],
                       status="done", answer="I could not complete the task: get_note failed.")
    found = label(quit_early)
    assert (found.correct, found.pattern, found.first_error_turn) == (False, BadPattern.GAVE_UP, 2)


def test_a_program_that_ran_and_reported_a_failure_informs_the_answer() -> None:
    report = "tests/test_a.py::test_one PASSED\nFAILED tests/test_b.py::test_two\n1 failed, 11 passed\n(exit code 1)"
    ran = trace([S("run_tests", {}, report, ok=False, kind="execution_error")], status="done", answer="11 pass.")
    assert label(ran).correct


def test_reading_the_container_after_a_failed_delete_is_a_read_back() -> None:
    # delete_comment(comment_id) failed (an injected timeout); listing the note's comments shows it gone
    before = json.dumps({"items": [{"comment_id": "c-9", "body": "old"}]})
    after = json.dumps({"items": []})
    deleted = trace([
        S("list_notes", {}, LISTING),
        S("list_comments", {"note_id": "n-7f3a"}, before),
        S("delete_comment", {"comment_id": "c-9"}, "timed out", ok=False, kind="timeout", injected="x"),
        S("list_comments", {"note_id": "n-7f3a"}, after),
    ], status="done")
    effects = {**EFFECTS, "delete_comment": Effect.WRITE, "list_comments": Effect.READ}
    assert ANALYZER.label(deleted, task(deleted.task), effects).correct
