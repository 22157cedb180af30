"""The real Claude Code 2.1.332, driven offline by a scripted Messages API server playing the
reference agents around the real, logged-out ``gh``: unguarded against guarded through the
hooks ``unstuck hooks install`` writes (issue 26, deliver 5). Every guard server a test's first
hook starts is stopped by the test (:meth:`ClaudeWorld.close`)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integrations.coding_agents.claude_world import HOOK_DENIAL, ClaudeRun, ClaudeWorld

from unstuck.evals.agents import _catalogue_calls
from unstuck.evals.sandbox import Sandbox
from unstuck.guard.decision import LATCHED
from unstuck.toolkit.workspace import KNOWN_CLIS

pytestmark = pytest.mark.slow

GH = KNOWN_CLIS["gh"]
assert GH.sign_in is not None and GH.sign_in_flow is not None


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[ClaudeWorld]:
    world = ClaudeWorld(tmp_path / "guarded", guarded=True)
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def unguarded(tmp_path: Path) -> Iterator[ClaudeWorld]:
    world = ClaudeWorld(tmp_path / "unguarded", guarded=False)
    try:
        yield world
    finally:
        world.close()


def test_unguarded_claude_code_runs_every_workaround_around_the_logged_out_gh(unguarded: ClaudeWorld) -> None:
    run = unguarded.run("gh_logged_out")
    workarounds = _catalogue_calls("auth", "gh", "cli/cli")
    # the plan's two calls... the check fails first, then the whole auth catalogue is played
    assert len(run.moves) == 1 + len(workarounds)
    assert len(run.ran) == len(run.moves)  # nothing refused them
    assert run.result["subtype"] == "success" and run.exit_code == 0
    assert not asks_for_sign_in(run)


def asks_for_sign_in(run: ClaudeRun) -> bool:
    """The three-part question naming gh's sign-in reached the user (Claude Code's system message)."""
    return any(GH.sign_in in m and "You need to:" in m for m in run.system_messages())


def test_guarded_claude_code_stops_at_the_blocker_asks_once_and_remembers_across_sessions(
        guarded: ClaudeWorld) -> None:
    # session 1: the improviser's workarounds, until the guard stops the session
    first = guarded.run("gh_logged_out")
    assert first.result["terminal_reason"] == "hook_stopped", first.result
    assert asks_for_sign_in(first), first.system_messages()
    results = first.tool_results()
    web = [m for m in first.moves if m.arguments.get("command") == GH.sign_in_flow]
    assert web and all(results[m.tool_use_id][0].startswith(HOOK_DENIAL) and "unattended" in results[m.tool_use_id][0]
                       for m in web)  # gh auth login --web refused unattended, never run
    latch = rf"{re.escape(HOOK_DENIAL)} \[unstuck [0-9a-f]{{16}}\] {re.escape(LATCHED)}"  # the latch, marked
    assert re.fullmatch(latch, results[first.moves[-1].tool_use_id][0])
    assert len(first.moves) < 1 + len(_catalogue_calls("auth", "gh", "cli/cli"))
    turns = guarded.journal()
    assert [t["status"] for t in turns] == ["blocked"] and turns[0]["turn"] == f"claude-code-{first.session_id}"
    (lesson,) = [x for x in guarded.lessons() if x["invalidated_at"] is None]
    assert (lesson["subject"], lesson["kind"], lesson["unblock"]) == ("gh", "auth", GH.sign_in)

    # session 2: the lesson is shown at the start, its probe runs before the first gh call, which
    # never runs: the session stops at once with the same question
    second = guarded.run("gh_logged_out")
    start = [e for e in second.events if e.get("subtype") == "hook_response" and e.get("hook_event") == "SessionStart"]
    assert start and f"lesson {lesson['id']}" in start[0]["stdout"] and GH.sign_in in start[0]["stdout"]
    assert len(second.moves) == 1 and second.ran == []
    assert second.result["terminal_reason"] == "hook_stopped" and asks_for_sign_in(second)
    assert [t["status"] for t in guarded.journal()] == ["blocked", "blocked"]

    # session 3: gh is signed in now; the probe at the start clears the lesson and the task finishes
    third = guarded.run("gh_signed_in")
    assert third.result["terminal_reason"] == "completed" and third.result["subtype"] == "success"
    assert "GitHub's official command line tool" in (third.answer or "")
    assert not asks_for_sign_in(third) and len(third.ran) == len(third.moves)
    assert not [x for x in guarded.lessons() if x["invalidated_at"] is None]
    statuses = {t["turn"]: t["status"] for t in guarded.journal()}
    assert statuses[f"claude-code-{third.session_id}"] == "done"
    report = guarded.unstuck("report")  # hook sessions are turns like any other
    assert re.search(r"3 turns read from 1 journal\(s\); 1 met a blocker", " ".join(report.stdout.split())), \
        report.stdout  # session 1; session 2 was stopped by the lesson before any call met it
    print(f"claude-code guarded: session 1 {len(first.moves)} calls until the stop ({len(first.ran)} ran); "
          f"session 2 {len(second.moves)} call, {len(second.ran)} ran; session 3 {len(third.moves)} calls, done")


def test_guarded_claude_code_lets_the_agent_fix_a_wrong_path_itself_with_no_question(guarded: ClaudeWorld) -> None:
    run = guarded.run("wrong_path")
    assert run.result["terminal_reason"] == "completed", run.result
    assert "pip install example-tool==2.1" in (run.answer or "")
    assert not any("You need to:" in m for m in run.system_messages())
    assert len(run.ran) == len(run.moves) == 3  # the wrong read, the search, the right read
    assert [t["status"] for t in guarded.journal()] == ["done"]


def test_attended_claude_code_waits_for_the_user_s_answer_from_another_terminal_then_finishes(
        guarded: ClaudeWorld) -> None:
    answered: list[subprocess.CompletedProcess[str]] = []

    def user(session: str, sandbox: Sandbox) -> None:
        still = guarded.unstuck("answer", session, "done", "--socket", str(guarded.socket), check=False)
        answered.append(still)  # gh is still signed out: the probe says so, the question stays open
        sandbox.sign_in_gh()  # the user signs gh in, then says so
        answered.append(guarded.unstuck("answer", session, "done", "--socket", str(guarded.socket), check=False))

    run = guarded.run_attended("gh_logged_out", user)
    (question,) = run.asked
    assert question["attended"] is True and question["unattended_hint"] is None
    assert GH.sign_in in question["question"] and "You need to:" in question["question"]
    assert answered[0].returncode == 3 and "still blocked" in answered[0].stdout
    assert answered[1].returncode == 0 and "resolved" in answered[1].stdout
    assert "GitHub's official command line tool" in (run.answer or "")  # the task finished after the answer
    commands = [m.arguments.get("command") for m in run.moves]
    assert commands[-1] == "gh repo view cli/cli --json description"
    turns = {t["turn"]: t["status"] for t in guarded.journal()}
    assert turns[question["turn"]] == "done"
