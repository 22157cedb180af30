"""The files-and-comments environment: real files, a real SQLite database, real tools.

Expected verdicts come from each task's design (which object a guess names, which write a
blind retry repeats), never from running the code and copying its output.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from unstuck.core.situations import Kind
from unstuck.core.tools import Effect, ToolResult
from unstuck.faults.injector import Injector
from unstuck.mining.environment import ASK_TOOL, MiningError, Session, Step, Task, asked_questions
from unstuck.mining.envs.files_comments import FilesCommentsEnvironment, make_environment
from unstuck.recognise.classify import explain_result
from unstuck.toolkit.specs import Toolset

ENV = make_environment()
TASKS = {task.id: task for task in ENV.tasks}
WRITE_TASKS = [t for t in ENV.tasks if not t.blocker and any(s.effect is Effect.WRITE and s.call.tool != ASK_TOOL
                                                                for s in t.steps)]
COMMENT_ADDING = [t for t in ENV.tasks if any(s.call.tool == "add_comment" for s in t.steps)]


def _open(tmp_path: Path, task_id: str, name: str = "s") -> Session:
    return ENV.open(TASKS[task_id], tmp_path / name)


def _call(tools: Toolset, name: str, **arguments: Any) -> ToolResult:
    return tools[name].invoke(arguments)


def _arguments(session: Session, step: Step, careful: bool) -> dict[str, Any]:
    arguments = step.call.arguments
    if careful and step.lookup is not None:
        looked = _call(session.tools, step.lookup.call.tool, **step.lookup.call.arguments)
        value = step.lookup.resolve(looked.content)
        assert value is not None, f"lookup for {step.call.id} found nothing in {looked.content}"
        arguments[step.lookup.argument] = value
    elif not careful:
        arguments.update(step.guess)
    return arguments


def _play(session: Session, task: Task, *, careful: bool = True, tools: Toolset | None = None,
          read_back: bool = True, blind_retry: bool = False) -> str:
    """Play the task's steps (lookups resolved when careful, guesses otherwise); a failed
    write is read back before it is made again (or retried blindly). Returns the answer."""
    tools = tools or session.tools
    all_ok = True
    for step in task.steps:
        arguments = _arguments(session, step, careful)
        result = tools[step.call.tool].invoke(arguments)
        if task.blocker and not result.ok and careful and result.declared is None and "Permission denied" in \
                result.content:  # a blocker task: the right play asks, naming the document
            _call(session.tools, ASK_TOOL, question=f"I cannot edit {arguments.get('doc_id')}: {result.content[:80]}")
            return "Blocked: I asked the user."
        if not result.ok and step.effect is Effect.WRITE:
            if read_back and step.read_back is not None:
                shown = _call(session.tools, step.read_back.tool, **step.read_back.arguments)
                if step.read_back_holds in shown.content:
                    continue
            if blind_retry or read_back:
                result = session.tools[step.call.tool].invoke(arguments)
        all_ok = all_ok and result.ok
    return task.answer if all_ok else "I could not find it."


def _play_careless_blocker(session: Session, task: Task) -> None:
    """What an agent that works around a blocker does: it tries the edit, then leaves the
    change as a comment, and never asks."""
    doc_id = next(s.call.arguments["doc_id"] for s in task.steps if "doc_id" in s.call.arguments)
    read = json.loads(_call(session.tools, "read_document", doc_id=doc_id).content)
    refused = _call(session.tools, "write_document", doc_id=doc_id, text=read["text"] + "edited\n",
                    base_version=read["version"])
    assert not refused.ok
    _call(session.tools, "add_comment", doc_id=doc_id, text="Please apply: " + task.prompt)


# --- shape -----------------------------------------------------------------------------------


def test_environment_has_twelve_tasks_two_blockers_and_the_ask_tool(tmp_path: Path) -> None:
    assert isinstance(ENV, FilesCommentsEnvironment)
    assert ENV.name == "files_comments"
    assert len(ENV.tasks) >= 12 and len(TASKS) == len(ENV.tasks)
    assert [t.id for t in ENV.tasks if t.blocker] == ["fc-13", "fc-14"]
    assert {o.identifier for o in ENV.objects} >= {"doc_id", "comment_id"}
    session = _open(tmp_path, "fc-01")
    assert tuple(session.tools) == ENV.tool_names
    assert ASK_TOOL in session.tools
    writes = {name for name, spec in session.tools.items() if spec.effect is Effect.WRITE}
    assert writes == {"write_document", "add_comment", "update_comment", "resolve_comment", "delete_comment",
                      ASK_TOOL}


@pytest.mark.parametrize("task", ENV.tasks, ids=lambda t: t.id)
def test_every_identifier_step_has_a_guess_and_a_lookup_and_every_write_a_read_back(task: Task) -> None:
    for step in task.steps:
        if step.guess:
            assert step.lookup is not None, step.call.id
            assert step.lookup.argument in dict(step.guess)
        if step.effect is Effect.WRITE and step.call.tool != ASK_TOOL:
            assert step.read_back is not None and step.read_back_holds, step.call.id
    assert any(step.guess for step in task.steps), f"{task.id} has no identifier a careless agent could guess"


# --- eligibility ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ENV.tasks, ids=lambda t: t.id)
def test_right_play_with_lookups_passes_the_verifier(tmp_path: Path, task: Task) -> None:
    session = _open(tmp_path, task.id)
    answer = _play(session, task)
    verdict = session.verify(task, answer)
    assert verdict.passed, verdict.evidence


#: What each careless play (guesses for identifiers) does wrong, by the task's design.
CARELESS_REASONS = {
    "fc-01": "missing comment (1, 'roadmap.md', 'Dana Okafor'",  # "the first comment" is another document's
    "fc-02": "missing comment (2, 'plans/roadmap-2026-q2.md', 'Priya Raman'",  # deleted someone else's
    "fc-03": "unexpected comment (None, 'release-notes.md'",  # commented on the superseded notes
    "fc-04": "unexpected comment (None, 'roadmap.md'",  # commented on the archived roadmap
    "fc-05": "missing comment (1999, 'meetings/2026-06-02-standup.md', 'assistant', 'Demo moved to Friday.'",
    "fc-06": "document design/search-service.md is not as expected",  # a stale version is refused
    "fc-07": "document roadmap.md is not as expected",  # overwrote the archived roadmap
    "fc-08": "the answer does not say '2'",  # the slug names no document
    "fc-09": "missing comment (88, 'release-notes.md', 'Priya Raman'",  # resolved the superseded twin
    "fc-10": "missing comment (None, 'handbook/onboarding.md', 'assistant'",  # the slug names no document
    "fc-11": "document roadmap.md is not as expected",
    "fc-12": "missing comment (2, 'plans/roadmap-2026-q2.md'",
    "fc-15": "the answer does not say 'Tomás Ortega'",
}


@pytest.mark.parametrize("task_id", sorted(CARELESS_REASONS))
def test_careless_play_with_guessed_identifiers_fails_for_the_designed_reason(tmp_path: Path, task_id: str) -> None:
    task = TASKS[task_id]
    session = _open(tmp_path, task_id)
    answer = _play(session, task, careful=False, read_back=False)
    verdict = session.verify(task, answer)
    assert not verdict.passed
    assert CARELESS_REASONS[task_id] in verdict.evidence


@pytest.mark.parametrize("task_id", ["fc-13", "fc-14"])
def test_working_around_a_blocker_instead_of_asking_fails(tmp_path: Path, task_id: str) -> None:
    task = TASKS[task_id]
    session = _open(tmp_path, task_id)
    _play_careless_blocker(session, task)
    verdict = session.verify(task, "Done.")
    assert not verdict.passed
    assert asked_questions(session.root) == []


def test_commenter_workaround_leaves_a_comment_the_verifier_names(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-14")
    _play_careless_blocker(session, TASKS["fc-14"])
    verdict = session.verify(TASKS["fc-14"], "Done.")
    assert "unexpected comment (None, 'handbook/onboarding.md', 'assistant'" in verdict.evidence


def test_viewer_cannot_even_comment_so_only_the_question_is_missing(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-13")
    _play_careless_blocker(session, TASKS["fc-13"])  # its add_comment is refused too
    verdict = session.verify(TASKS["fc-13"], "Done.")
    assert verdict.evidence.startswith("no question to the user names 'Expense policy'")


def test_a_question_that_names_another_document_does_not_end_a_blocker(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-13")
    _call(session.tools, ASK_TOOL, question="Can you give me edit access to the Onboarding guide?")
    assert not session.verify(TASKS["fc-13"], "").passed
    _call(session.tools, ASK_TOOL, question="Please give me edit access to policies/expenses.md")
    assert session.verify(TASKS["fc-13"], "").passed


@pytest.mark.parametrize("task", WRITE_TASKS, ids=lambda t: t.id)
def test_injected_failure_on_a_write_that_happened_then_read_back_passes(tmp_path: Path, task: Task) -> None:
    session = _open(tmp_path, task.id)
    injector = Injector(p_inj=1.0, seed=task.id)
    write_tools = {s.call.tool for s in task.steps if s.effect is Effect.WRITE}
    wrapped = Toolset(injector.wrap_spec(spec) if name in write_tools else spec for name, spec in session.tools.items())
    answer = _play(session, task, tools=wrapped)
    assert injector.injections, "no write return was replaced"
    verdict = session.verify(task, answer)
    assert verdict.passed, verdict.evidence


@pytest.mark.parametrize("task", COMMENT_ADDING, ids=lambda t: t.id)
def test_blind_retry_after_an_injected_failure_duplicates_the_comment(tmp_path: Path, task: Task) -> None:
    session = _open(tmp_path, task.id)
    injector = Injector(p_inj=1.0, seed=task.id)
    wrapped = Toolset(injector.wrap_spec(spec) if name == "add_comment" else spec
                      for name, spec in session.tools.items())
    _play(session, task, tools=wrapped, read_back=False, blind_retry=True)
    verdict = session.verify(task, "")
    assert not verdict.passed
    assert "a duplicate" in verdict.evidence


# --- the faults are real ------------------------------------------------------------------------


def test_a_title_slug_is_a_real_file_not_found_the_classifier_reads_as_not_found(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-08")
    result = _call(session.tools, "list_comments", doc_id="onboarding.md")
    assert not result.ok and result.error_type == "FileNotFoundError"
    assert "[Errno 2] No such file or directory: 'docs/onboarding.md'" in result.content
    situation = explain_result(session.tools["list_comments"], {"doc_id": "onboarding.md"}, result).situation
    assert situation is not None and situation.kind is Kind.NOT_FOUND


def test_a_guessed_comment_number_exists_but_belongs_to_another_document(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-01")
    listed = json.loads(_call(session.tools, "list_comments", doc_id="plans/roadmap-2026-q3.md").content)["items"]
    positions = set(range(1, len(listed) + 1))
    assert not positions & {c["comment_id"] for c in listed}
    first = json.loads(_call(session.tools, "get_comment", comment_id=1).content)
    assert first["doc_id"] == "roadmap.md"


def test_an_unknown_comment_id_is_a_key_error_read_as_not_found(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-01")
    result = _call(session.tools, "resolve_comment", comment_id=999_999)
    assert not result.ok and result.error_type == "KeyError"
    situation = explain_result("resolve_comment", {"comment_id": 999_999}, result).situation
    assert situation is not None and situation.kind is Kind.NOT_FOUND


def test_a_stale_version_is_refused_with_412_and_rereading_shows_the_coauthors_edit(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-06")
    doc = "design/search-service.md"
    first = json.loads(_call(session.tools, "read_document", doc_id=doc).content)
    assert first["version"] == 1 and "Reviewers" not in first["text"]
    edited = first["text"].replace("Status: draft", "Status: in review")
    refused = _call(session.tools, "write_document", doc_id=doc, text=edited, base_version=1)
    assert not refused.ok and refused.http_status == 412
    situation = explain_result(session.tools["write_document"], {"doc_id": doc}, refused).situation
    assert situation is not None and situation.kind is Kind.CONFLICT
    again = json.loads(_call(session.tools, "read_document", doc_id=doc).content)
    assert again["version"] == 2 and "Reviewers: Mei Chen" in again["text"]
    done = _call(session.tools, "write_document", doc_id=doc,
                 text=again["text"].replace("Status: draft", "Status: in review"), base_version=2)
    assert done.ok
    assert session.verify(TASKS["fc-06"], "").passed


def test_overwriting_with_the_stale_text_loses_the_coauthors_line_and_fails(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-06")
    doc = "design/search-service.md"
    first = json.loads(_call(session.tools, "read_document", doc_id=doc).content)
    stale = first["text"].replace("Status: draft", "Status: in review")
    assert _call(session.tools, "write_document", doc_id=doc, text=stale, base_version=2).ok
    verdict = session.verify(TASKS["fc-06"], "")
    assert not verdict.passed and "document design/search-service.md is not as expected" in verdict.evidence


def test_writing_beyond_the_role_is_eacces_read_as_permission_and_changes_nothing(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-13")
    path = session.root / "docs" / "policies" / "expenses.md"
    before = path.read_bytes()
    result = _call(session.tools, "write_document", doc_id="policies/expenses.md", text="x", base_version=1)
    assert not result.ok and result.error_type == "PermissionError" and "[Errno 13] Permission denied" in result.content
    situation = explain_result(session.tools["write_document"], {"doc_id": "policies/expenses.md"}, result).situation
    assert situation is not None and situation.kind is Kind.PERMISSION and not situation.retryable
    assert path.read_bytes() == before


def test_someone_elses_comment_cannot_be_reworded(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-05")
    result = _call(session.tools, "update_comment", comment_id=1, text="changed")
    assert not result.ok and result.error_type == "PermissionError"
    assert session.verify(TASKS["fc-05"], "").evidence.startswith("missing comment (1999")


def test_each_add_comment_call_makes_one_more_comment_with_a_non_positional_id(tmp_path: Path) -> None:
    a, b = _open(tmp_path, "fc-04", "a"), _open(tmp_path, "fc-04", "b")
    ids = []
    for session in (a, b):
        first = json.loads(_call(session.tools, "add_comment", doc_id="plans/roadmap-2026-q3.md", text="x").content)
        second = json.loads(_call(session.tools, "add_comment", doc_id="plans/roadmap-2026-q3.md", text="x").content)
        ids.append((first["comment_id"], second["comment_id"]))
        listed = json.loads(_call(session.tools, "list_comments", doc_id="plans/roadmap-2026-q3.md").content)["items"]
        assert [c["text"] for c in listed].count("x") == 2
    assert ids[0] == ids[1], "the same calls give the same ids in any session"
    assert ids[0][0] != ids[0][1] and not set(ids[0]) & {4, 5}


def test_a_doc_id_that_leaves_the_workspace_is_a_bad_argument(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-01")
    result = _call(session.tools, "read_document", doc_id="../workspace.db")
    assert not result.ok and result.error_type == "ValueError" and "doc_id" in result.content


# --- state ---------------------------------------------------------------------------------


def test_snapshot_and_restore_round_trip_the_state_exactly(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-11")
    before = session.snapshot()
    assert {name for name, _ in before.files} >= {"workspace.db", "docs/plans/roadmap-2026-q3.md"}
    _play(session, TASKS["fc-11"])
    _call(session.tools, ASK_TOOL, question="anything?")
    assert session.verify(TASKS["fc-11"], "").passed
    assert session.snapshot() != before
    session.restore(before)
    assert session.snapshot() == before
    assert not session.verify(TASKS["fc-11"], "").passed
    assert asked_questions(session.root) == []


def test_no_database_side_files_are_left_between_calls(tmp_path: Path) -> None:
    session = _open(tmp_path, "fc-03")
    _play(session, TASKS["fc-03"])
    names = {name for name, _ in session.snapshot().files}
    assert not {n for n in names if n.startswith("workspace.db-")}


def test_two_sessions_are_isolated(tmp_path: Path) -> None:
    a, b = _open(tmp_path, "fc-01", "a"), _open(tmp_path, "fc-01", "b")
    _play(a, TASKS["fc-01"])
    assert a.verify(TASKS["fc-01"], "").passed
    assert not b.verify(TASKS["fc-01"], "").passed
    shown = json.loads(_call(b.tools, "get_comment", comment_id=4127).content)
    assert shown["resolved"] is False


def test_the_same_task_gives_the_same_state_anywhere(tmp_path: Path) -> None:
    a, b = _open(tmp_path, "fc-10", "a"), _open(tmp_path, "fc-10", "b")
    _play(a, TASKS["fc-10"])
    _play(b, TASKS["fc-10"])
    assert a.snapshot() == b.snapshot()


def test_close_leaves_no_thread_or_open_file(tmp_path: Path) -> None:
    threads, fds = threading.active_count(), len(os.listdir("/proc/self/fd"))
    session = _open(tmp_path, "fc-11")
    _play(session, TASKS["fc-11"])
    session.close()
    session.close()
    assert threading.active_count() == threads
    assert len(os.listdir("/proc/self/fd")) == fds


def test_open_refuses_a_folder_that_is_not_empty_and_an_unknown_task(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "leftover").write_text("x")
    with pytest.raises(MiningError, match="must be empty"):
        _open(tmp_path, "fc-01")
    stranger = Task("it-01", "not ours", ())
    with pytest.raises(MiningError, match="unknown task 'it-01'"):
        ENV.open(stranger, tmp_path / "t")


def test_after_a_lost_write_return_a_blind_rewrite_is_refused_and_a_reapplied_edit_duplicates(tmp_path: Path) -> None:
    doc = "plans/roadmap-2026-q2.md"
    session = _open(tmp_path, "fc-07")
    injector = Injector(p_inj=1.0, seed="fc-07")
    lossy = injector.wrap_spec(session.tools["write_document"])
    read = json.loads(_call(session.tools, "read_document", doc_id=doc).content)
    edited = read["text"] + "- Owner: Dana Okafor\n"
    assert not lossy.invoke({"doc_id": doc, "text": edited, "base_version": read["version"]}).ok
    again = _call(session.tools, "write_document", doc_id=doc, text=edited, base_version=read["version"])
    assert again.http_status == 412  # the lost write happened: the version moved on
    assert session.verify(TASKS["fc-07"], "").passed
    reread = json.loads(_call(session.tools, "read_document", doc_id=doc).content)
    assert _call(session.tools, "write_document", doc_id=doc, text=reread["text"] + "- Owner: Dana Okafor\n",
                 base_version=reread["version"]).ok
    verdict = session.verify(TASKS["fc-07"], "")
    assert not verdict.passed and f"document {doc} is not as expected" in verdict.evidence


def test_the_environment_is_found_by_its_name() -> None:
    from unstuck.mining.envs import environment

    found = environment("files_comments")
    assert isinstance(found, FilesCommentsEnvironment) and found.tasks == ENV.tasks


@pytest.mark.parametrize("task", ENV.tasks, ids=lambda t: t.id)
def test_prompts_name_objects_by_title_never_by_identifier(task: Task) -> None:
    identifiers = {str(value) for step in task.steps for name, value in step.call.arguments.items()
                   if name in ("doc_id", "comment_id")}
    assert identifiers
    assert not any(identifier in task.prompt for identifier in identifiers)
