"""The real Gemini CLI 0.61.0, driven offline by a scripted Gemini API server playing the
reference agents around the real, logged-out ``gh``: unguarded against guarded through the hooks
``unstuck hooks install gemini --unattended`` writes (issue 26, deliver 5). Gemini CLI tells its
hooks nothing about a headless ``gemini -p`` run, so the install says the machine is unattended.
Every guard server a test's first hook starts is stopped by the test (:meth:`AgentWorld.close`).

A stop ends Gemini CLI's agent (``continue: false``), and ``gemini -p`` prints the stop's reason,
the three-part question, on stderr ("Agent execution stopped: …")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integrations.coding_agents.agent_worlds import AgentRun, GeminiWorld

from unstuck.evals.agents import _catalogue_calls
from unstuck.toolkit.workspace import KNOWN_CLIS

pytestmark = pytest.mark.slow

GH = KNOWN_CLIS["gh"]
assert GH.sign_in is not None and GH.sign_in_flow is not None
#: How Gemini CLI 0.61.0 words a call or result its hook refused (executeToolWithHooks).
REFUSED = ("Tool execution blocked:", "Tool result blocked:", "Agent execution stopped by hook:")
#: What gemini -p prints when a hook stopped the agent.
STOPPED = "Agent execution stopped:"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[GeminiWorld]:
    world = GeminiWorld(tmp_path / "guarded")
    world.unstuck("hooks", "install", "gemini", "--user", "--unattended")
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def unguarded(tmp_path: Path) -> Iterator[GeminiWorld]:
    world = GeminiWorld(tmp_path / "unguarded")
    try:
        yield world
    finally:
        world.close()


def asks_for_sign_in(text: str) -> bool:
    """The three-part question naming gh's sign-in is in ``text``."""
    return GH.sign_in is not None and GH.sign_in in text and "You need to:" in text


def ran(run: AgentRun) -> int:
    """Calls whose tool ran: the agent sent back a result, and not a refusal."""
    return sum(1 for i, refused in enumerate(run.refused(REFUSED)) if not refused and run.result_of(i) is not None)


def test_unguarded_gemini_runs_every_workaround_around_the_logged_out_gh(unguarded: GeminiWorld) -> None:
    run = unguarded.scenario_run("gh_logged_out")
    workarounds = _catalogue_calls("auth", "gh", "cli/cli")
    assert len(run.server.played()) == 1 + len(workarounds)  # the failing check, then the whole catalogue
    assert ran(run) == len(run.server.played())
    assert GH.sign_in_flow in run.commands and run.exit_code == 0
    assert STOPPED not in run.stderr and not asks_for_sign_in(run.stderr)
    print(f"gemini unguarded: {len(run.server.played())} calls, {ran(run)} ran, exit {run.exit_code}")


def test_guarded_gemini_stops_at_the_blocker_asks_once_and_remembers_across_sessions(guarded: GeminiWorld) -> None:
    first = guarded.scenario_run("gh_logged_out")
    played = first.server.played()
    refused = first.refused(REFUSED)
    web = [i for i, (_, agent) in enumerate(played) if agent.arguments.get("command") == GH.sign_in_flow]
    assert web and all(refused[i] and "unattended" in (first.result_of(i) or "") for i in web)
    assert STOPPED in first.stderr and asks_for_sign_in(first.stderr)  # the question, to the user
    workarounds = _catalogue_calls("auth", "gh", "cli/cli")
    assert len(played) < 1 + len(workarounds)  # the agent ended at the stop
    assert first.result_of(len(played) - 1) is None  # the last call never came back: the stop ended the agent
    turns = guarded.journal()
    assert [t["status"] for t in turns] == ["blocked"] and turns[0]["turn"].startswith("gemini-")
    (lesson,) = [x for x in guarded.lessons() if x["invalidated_at"] is None]
    assert (lesson["subject"], lesson["kind"], lesson["unblock"]) == ("gh", "auth", GH.sign_in)

    # session 2: the lesson's probe stops the session at its first gh call, which never runs
    second = guarded.scenario_run("gh_logged_out")
    assert len(second.server.played()) == 1 and ran(second) == 0
    assert STOPPED in second.stderr and asks_for_sign_in(second.stderr)
    assert f"lesson {lesson['id']}" in second.stderr
    assert [t["status"] for t in guarded.journal()] == ["blocked", "blocked"]

    # session 3: gh is signed in now; the probe at the start clears the lesson and the task finishes
    third = guarded.scenario_run("gh_signed_in")
    assert "GitHub's official command line tool" in third.answer and third.exit_code == 0
    assert ran(third) == len(third.server.played()) == 2 and STOPPED not in third.stderr
    assert not [x for x in guarded.lessons() if x["invalidated_at"] is None]
    assert sorted(t["status"] for t in guarded.journal()) == ["blocked", "blocked", "done"]
    print(f"gemini guarded: session 1 {len(played)} calls until the stop ({ran(first)} ran); "
          f"session 2 {len(second.server.played())} call, {ran(second)} ran; "
          f"session 3 {len(third.server.played())} calls, done")


def test_guarded_gemini_lets_the_agent_fix_a_wrong_path_itself_with_no_question(guarded: GeminiWorld) -> None:
    run = guarded.scenario_run("wrong_path")
    assert "pip install example-tool==2.1" in run.answer
    assert STOPPED not in run.stderr and "You need to:" not in run.stderr
    assert ran(run) == len(run.server.played()) == 3  # the wrong read, the search, the right read
    assert [t["status"] for t in guarded.journal()] == ["done"]
