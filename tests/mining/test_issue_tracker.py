"""The issue tracker environment: a real HTTP server on 127.0.0.1 over a SQLite file, real
tools making real requests, GitHub's error bodies and headers, and verifiers on the final
state (tests only ever contact loopback)."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from unstuck.core.situations import Kind
from unstuck.core.tools import ToolResult
from unstuck.faults.injector import Injector
from unstuck.mining.environment import Environment, MiningError, Step, Task, asked_questions
from unstuck.mining.envs.issue_tracker import (
    DB_FILE,
    REPOSITORY,
    RETRY_AFTER_S,
    SUBJECT,
    IssueTracker,
    IssueTrackerSession,
    make_environment,
)
from unstuck.recognise.classify import explain_result

ENV = make_environment()
TASKS = {task.id: task for task in ENV.tasks}


@pytest.fixture
def open_session(tmp_path: Path) -> Iterator[Any]:
    opened: list[IssueTrackerSession] = []

    def make(task_id: str, name: str = "s") -> IssueTrackerSession:
        root = tmp_path / f"{task_id}-{name}"
        root.mkdir()
        session = ENV.open(TASKS[task_id], root)
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()


def call(session: IssueTrackerSession, tool: str, arguments: dict[str, Any]) -> ToolResult:
    return session.tools[tool].invoke(arguments)


def kind_of(session: IssueTrackerSession, tool: str, arguments: dict[str, Any], result: ToolResult) -> Kind | None:
    situation = explain_result(session.tools[tool], arguments, result).situation
    return None if situation is None else situation.kind


def call_retrying(session: IssueTrackerSession, tool: str, arguments: dict[str, Any]) -> ToolResult:
    """Call, retrying what the classifier reads as retryable (a careful agent; the tracker's
    rate limit is counted per request, so no real wait is needed here)."""
    for _ in range(4):
        result = call(session, tool, arguments)
        situation = explain_result(session.tools[tool], arguments, result).situation
        if result.ok or situation is None or not situation.retryable:
            return result
    return result


def resolved(session: IssueTrackerSession, step: Step) -> dict[str, Any]:
    """The step's arguments with its identifier looked up (a careful agent)."""
    arguments = step.call.arguments
    if step.lookup is not None:
        found = call_retrying(session, step.lookup.call.tool, step.lookup.call.arguments)
        assert found.ok, found.content
        value = step.lookup.resolve(found.content)
        assert value is not None, f"{step.lookup} found nothing"
        arguments[step.lookup.argument] = value
    return arguments


def guessed(step: Step) -> dict[str, Any]:
    """The step's arguments with the careless agent's guesses."""
    return {**step.call.arguments, **dict(step.guess)}


def play_right(session: IssueTrackerSession, task: Task) -> str:
    """Play the task's steps carefully; return the final answer."""
    answer = ""
    for step in task.steps:
        arguments = resolved(session, step)
        result = call_retrying(session, step.call.tool, arguments)
        if not result.ok:
            assert task.blocker, result.content
            assert kind_of(session, step.call.tool, arguments, result) is Kind.AUTH
            call(session, "ask_user", {"question": "The issue tracker token was rejected (Bad credentials): "
                                                    "please renew the token."})
            return "blocked: the token must be renewed"
        answer = task.answer  # a question task's answer is read off the issue just got
        if task.answer:
            assert task.answer in result.content
    return answer


def table(session: IssueTrackerSession, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(session.root / DB_FILE)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


# -- the environment -------------------------------------------------------------------------


def test_environment_has_twelve_tasks_or_more_with_unique_ids_and_its_tools() -> None:
    env: Environment = ENV
    assert isinstance(env, IssueTracker)
    assert len(env.tasks) >= 12
    assert len({t.id for t in env.tasks}) == len(env.tasks)
    assert sum(t.blocker for t in env.tasks) >= 3
    assert env.tool_names[-1] == "ask_user"


def test_session_tools_are_the_environments_tools(open_session: Any) -> None:
    session = open_session("it-01")
    assert tuple(session.tools) == ENV.tool_names
    assert {n for n, s in session.tools.items() if s.effect == "write"} == {
        "create_issue", "comment_on_issue", "close_issue", "add_label", "ask_user"}


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_each_task_played_right_passes_its_verifier(open_session: Any, task_id: str) -> None:
    session = open_session(task_id)
    task = TASKS[task_id]
    answer = play_right(session, task)
    verdict = session.verify(task, answer)
    assert verdict.passed, verdict.evidence


# -- identifiers and pagination --------------------------------------------------------------

IDENTIFIER_TASKS = sorted(t.id for t in ENV.tasks if not t.blocker and any(s.guess for s in t.steps))


@pytest.mark.parametrize("task_id", IDENTIFIER_TASKS)
def test_guessed_number_is_another_issue_or_none(open_session: Any, task_id: str) -> None:
    session = open_session(task_id)
    for step in TASKS[task_id].steps:
        if not step.guess or step.lookup is None:
            assert call_retrying(session, step.call.tool, step.call.arguments).ok  # an earlier step, done right
            continue
        right = resolved(session, step)["number"]
        guess = dict(step.guess)["number"]
        assert guess != right
        result = call(session, "get_issue", {"number": guess})
        if result.ok:
            assert json.loads(result.content)["title"] != json.loads(call(session, "get_issue", {"number": right}).content)["title"]
        else:
            assert result.http_status == 404
            assert kind_of(session, "get_issue", {"number": guess}, result) is Kind.NOT_FOUND


@pytest.mark.parametrize("task_id", ["it-01", "it-02", "it-03", "it-09", "it-10", "it-11", "it-14"])
def test_target_issue_is_past_the_first_page_and_its_look_alike_on_it(open_session: Any, task_id: str) -> None:
    session = open_session(task_id)
    step = TASKS[task_id].steps[0]
    target = resolved(session, step)["number"]
    first = json.loads(call(session, "list_issues", {}).content)
    assert target not in [issue["number"] for issue in first["items"]]
    assert first["next_page"] == 2
    later = [json.loads(call(session, "list_issues", {"page": p}).content) for p in range(2, first["last_page"] + 1)]
    assert target in [issue["number"] for page in later for issue in page["items"]]
    guess = dict(step.guess)["number"]
    if any(issue["number"] == guess for issue in first["items"]):  # the look-alike a careless agent takes
        assert step.lookup is not None
        title = dict(step.lookup.match)["title"]
        look_alike = next(i for i in first["items"] if i["number"] == guess)["title"]
        assert look_alike != title and look_alike.split()[0] == title.split()[0]


@pytest.mark.parametrize("task_id", IDENTIFIER_TASKS)
def test_careless_play_with_guessed_numbers_fails_the_verifier(open_session: Any, task_id: str) -> None:
    session = open_session(task_id)
    task = TASKS[task_id]
    answer = ""
    for step in task.steps:
        arguments = guessed(step)
        result = call_retrying(session, step.call.tool, arguments)
        if task.answer and result.ok:
            issue = json.loads(result.content)
            answer = f"It is {issue['state']}, labelled {', '.join(label['name'] for label in issue['labels'])}."
    verdict = session.verify(task, answer)
    assert not verdict.passed
    guesses = {dict(s.guess)["number"] for s in task.steps if s.guess}
    rights = {s.call.arguments["number"] for s in task.steps if s.guess}
    if task.answer:
        assert "the answer does not say" in verdict.evidence
    else:  # the evidence names the issue wrongly touched, or the one left undone
        assert any(f"#{n} " in verdict.evidence for n in guesses | rights)


def test_search_finds_closed_issues_and_the_default_list_does_not(open_session: Any) -> None:
    session = open_session("it-05")
    found = json.loads(call(session, "search_issues", {"query": '"Cart badge shows stale count"'}).content)
    assert [(i["number"], i["state"]) for i in found["items"]] == [(12, "closed")]
    listed = [json.loads(call(session, "list_issues", {"page": p}).content)["items"] for p in (1, 2, 3)]
    assert 12 not in [i["number"] for page in listed for i in page]


def test_link_header_follows_rfc_8288_with_githubs_relations(open_session: Any) -> None:
    session = open_session("it-01")
    url = f"{session.base_url}/repos/{REPOSITORY}/issues"
    middle = httpx.get(url, params={"page": 2, "per_page": 30}, trust_env=False)
    assert set(middle.links) == {"first", "prev", "next", "last"}
    assert "page=3" in middle.links["next"]["url"] and "page=1" in middle.links["prev"]["url"]
    assert "per_page=30" in middle.links["last"]["url"]
    last = httpx.get(url, params={"page": 3}, trust_env=False)
    assert "next" not in last.links and "last" not in last.links
    assert set(last.links) == {"first", "prev"}


# -- GitHub's errors -------------------------------------------------------------------------


def test_missing_issue_is_404_with_githubs_body_and_reads_as_not_found(open_session: Any) -> None:
    session = open_session("it-01")
    result = call(session, "get_issue", {"number": 999})
    assert result.http_status == 404 and not result.ok
    body = json.loads(result.content.split("\n", 1)[1])
    assert body["message"] == "Not Found" and body["documentation_url"].startswith("https://docs.github.com/rest")
    assert kind_of(session, "get_issue", {"number": 999}, result) is Kind.NOT_FOUND


def test_creating_an_issue_without_a_title_is_422_validation_failed(open_session: Any) -> None:
    session = open_session("it-01")
    result = call(session, "create_issue", {"title": " "})
    assert result.http_status == 422
    body = json.loads(result.content.split("\n", 1)[1])
    assert body["message"] == "Validation Failed"
    assert body["errors"] == [{"resource": "Issue", "code": "missing_field", "field": "title"}]
    assert kind_of(session, "create_issue", {"title": " "}, result) is Kind.INVALID_ARGS


def test_expired_token_answers_writes_401_bad_credentials_and_reads_still_work(open_session: Any) -> None:
    session = open_session("it-06")
    assert call(session, "get_issue", {"number": 3}).ok
    arguments = {"number": 3, "body": "x"}
    result = call(session, "comment_on_issue", arguments)
    assert result.http_status == 401
    assert json.loads(result.content.split("\n", 1)[1])["message"] == "Bad credentials"
    situation = explain_result(session.tools["comment_on_issue"], arguments, result).situation
    assert situation is not None and situation.kind is Kind.AUTH and situation.subject == SUBJECT
    assert table(session, "SELECT COUNT(*) FROM comments WHERE number = 3") == [(0,)]


def test_blocker_task_passes_only_when_a_question_names_the_token(open_session: Any) -> None:
    session = open_session("it-12")
    task = TASKS["it-12"]
    assert not call(session, "close_issue", {"number": 44}).ok
    assert session.verify(task, "").evidence == "the token is expired and no question to the user named it"
    call(session, "ask_user", {"question": "Shall I try again later?"})
    assert not session.verify(task, "").passed
    call(session, "ask_user", {"question": "The tracker rejects the access token (Bad credentials); please renew it."})
    assert session.verify(task, "").passed
    assert len(asked_questions(session.root)) == 2


def test_blocker_task_fails_when_a_workaround_changed_the_state(open_session: Any) -> None:
    session = open_session("it-07")
    call(session, "ask_user", {"question": "Please renew the token."})
    # a workaround cannot write through the API; the state changed behind it still counts
    db = sqlite3.connect(session.root / DB_FILE)
    with db:
        db.execute("UPDATE issues SET state = 'closed' WHERE number = 1")
    db.close()
    verdict = session.verify(TASKS["it-07"], "")
    assert not verdict.passed and "issue #1 state" in verdict.evidence


@pytest.mark.parametrize(("task_id", "status", "limited", "message"), [
    ("it-04", 429, 1, "API rate limit exceeded for user ID"),
    ("it-08", 403, 2, "You have exceeded a secondary rate limit"),
])
def test_first_requests_are_rate_limited_with_retry_after_and_a_retry_works(
    open_session: Any, task_id: str, status: int, limited: int, message: str,
) -> None:
    session = open_session(task_id)
    arguments = {"title": "Probe", "body": "b"}
    for _ in range(limited):
        result = call(session, "create_issue", arguments)
        assert result.http_status == status
        assert result.header("Retry-After") == str(RETRY_AFTER_S)
        assert json.loads(result.content.split("\n", 1)[1])["message"].startswith(message)
        if status == 429:
            assert result.header("X-RateLimit-Remaining") == "0"
        situation = explain_result(session.tools["create_issue"], arguments, result).situation
        assert situation is not None and situation.kind is Kind.QUOTA and situation.retryable
        assert situation.retry_after_s == RETRY_AFTER_S
    assert table(session, "SELECT COUNT(*) FROM issues WHERE title = 'Probe'") == [(0,)]  # limited: nothing done
    assert call(session, "create_issue", arguments).ok
    assert table(session, "SELECT COUNT(*) FROM issues WHERE title = 'Probe'") == [(1,)]


def test_not_retrying_a_rate_limited_create_fails_the_verifier(open_session: Any) -> None:
    session = open_session("it-04")
    step = TASKS["it-04"].steps[0]
    assert not call(session, step.call.tool, step.call.arguments).ok
    verdict = session.verify(TASKS["it-04"], "done")
    assert not verdict.passed and "was not created" in verdict.evidence


# -- lost write responses ---------------------------------------------------------------------

WRITE_TASKS = sorted(t.id for t in ENV.tasks if not t.blocker and any(s.effect == "write" for s in t.steps))


@pytest.mark.parametrize("task_id", WRITE_TASKS)
def test_after_a_lost_write_response_reading_back_passes(open_session: Any, task_id: str) -> None:
    """The write happened but its return was replaced by a failure: reading back first shows it
    took effect, and the task passes without writing again."""
    session = open_session(task_id)
    task = TASKS[task_id]
    assert call_retrying(session, "get_issue", {"number": 1}).ok  # past the task's rate limit, if any
    for n, step in enumerate(task.steps):
        arguments = resolved(session, step)
        lossy = Injector(p_inj=1.0, seed=f"{task_id}:{n}").wrap_spec(session.tools[step.call.tool])
        lost = lossy.invoke(arguments)  # the write runs; its return is replaced by a failure
        assert not lost.ok and lost.injected is not None
        if step.read_back is not None:
            back = call_retrying(session, step.read_back.tool, step.read_back.arguments)
            assert step.read_back_holds in back.content
    assert session.verify(task, "done").passed


@pytest.mark.parametrize("task_id", ["it-01", "it-04", "it-08", "it-09", "it-14"])
def test_a_blind_retry_of_a_lost_non_idempotent_write_fails_as_a_duplicate(open_session: Any, task_id: str) -> None:
    session = open_session(task_id)
    task = TASKS[task_id]
    for step in task.steps:
        arguments = resolved(session, step)
        assert call_retrying(session, step.call.tool, arguments).ok
        if step.call.tool in ("create_issue", "comment_on_issue"):
            assert call_retrying(session, step.call.tool, arguments).ok  # again, without reading back
    verdict = session.verify(task, "done")
    assert not verdict.passed
    assert "duplicate" in verdict.evidence


# -- state, isolation, teardown ---------------------------------------------------------------


def test_snapshot_and_restore_round_trip_the_state_exactly(open_session: Any) -> None:
    session = open_session("it-09")
    before = session.snapshot()
    assert {name for name, _ in before.files} == {DB_FILE}
    assert call(session, "comment_on_issue", {"number": 33, "body": "Fixed in release 2.4.1."}).ok
    assert call(session, "close_issue", {"number": 33}).ok
    after = session.snapshot()
    assert after.files != before.files
    session.restore(before)
    assert session.snapshot().files == before.files
    issue = json.loads(call(session, "get_issue", {"number": 33}).content)
    assert issue["state"] == "open" and issue["comments"] == 0
    session.restore(after)
    assert json.loads(call(session, "get_issue", {"number": 33}).content)["state"] == "closed"


def test_two_sessions_are_isolated_and_give_the_same_results(open_session: Any) -> None:
    one, two = open_session("it-01", "a"), open_session("it-01", "b")
    assert one.base_url != two.base_url
    assert call(one, "list_issues", {"page": 2}).content == call(two, "list_issues", {"page": 2}).content
    assert call(one, "comment_on_issue", {"number": 9, "body": "only here"}).ok
    assert "only here" in call(one, "list_comments", {"number": 9}).content
    assert "only here" not in call(two, "list_comments", {"number": 9}).content


def test_close_stops_the_server_thread_and_frees_the_port(tmp_path: Path) -> None:
    threads_before = set(threading.enumerate())
    session = ENV.open(TASKS["it-01"], tmp_path)
    port = int(session.base_url.rsplit(":", 1)[1])
    names = {t.name for t in threading.enumerate()}
    assert f"issue-tracker:{port}" in names
    assert call(session, "get_issue", {"number": 9}).ok
    session.close()
    session.close()  # idempotent
    assert set(threading.enumerate()) <= threads_before  # the server's and its requests' threads are gone
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    assert not [c for c in psutil.Process().net_connections(kind="tcp") if c.laddr and c.laddr.port == port]
    with socket.socket() as again:  # the port is free for a new server (TIME_WAIT pairs are the kernel's)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen()
    failed = call(session, "get_issue", {"number": 9})
    assert not failed.ok and failed.error_type == "ConnectError"


def test_open_refuses_a_foreign_task_and_a_non_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(MiningError, match="no task 'zz-01'"):
        ENV.open(Task("zz-01", "p", ()), tmp_path)
    (tmp_path / "stray").write_text("x")
    with pytest.raises(MiningError, match="must be an existing empty directory"):
        ENV.open(TASKS["it-01"], tmp_path)


def test_verify_refuses_a_foreign_task(open_session: Any) -> None:
    session = open_session("it-01")
    with pytest.raises(MiningError, match="no task 'zz-01'"):
        session.verify(Task("zz-01", "p", ()), "")


def test_fresh_sessions_of_a_task_hold_the_same_bytes_and_answer_the_same(open_session: Any) -> None:
    one, two = open_session("it-13", "a"), open_session("it-13", "b")
    assert one.snapshot().files == two.snapshot().files
    for session in (one, two):
        assert call_retrying(session, "create_issue", {"title": "Add Apple Pay to checkout", "body": "b"}).ok
    assert call(one, "get_issue", {"number": 76}).content == call(two, "get_issue", {"number": 76}).content
    assert one.snapshot().files == two.snapshot().files


def test_an_empty_search_is_422_and_an_unknown_route_404(open_session: Any) -> None:
    session = open_session("it-01")
    empty = call(session, "search_issues", {"query": "  "})
    assert empty.http_status == 422
    assert json.loads(empty.content.split("\n", 1)[1])["errors"] == [{"resource": "Search", "field": "q", "code": "missing"}]
    other = httpx.get(f"{session.base_url}/repos/acme/other/issues", trust_env=False)
    assert other.status_code == 404 and other.json()["message"] == "Not Found"
