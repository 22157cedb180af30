"""The real Codex CLI 0.171.0, driven offline by a scripted Responses API server playing the
reference agents around the real, logged-out ``gh``: unguarded against guarded through the hooks
``unstuck hooks install codex`` writes (issue 26, deliver 5). ``codex exec`` runs them with
``--dangerously-bypass-hook-trust`` (Codex's way for automation whose hooks were vetted; a user
trusts them once in the terminal), and it is unattended by its own word (its transcript's
``session_meta.source`` is ``exec``). Every guard server a test's first hook starts is stopped by
the test (:meth:`AgentWorld.close`).

Codex lets no hook end a ``codex exec`` turn (a ``PreToolUse`` hook cannot stop; ``continue:
false`` after a call does not end the turn in 0.171.0), so "stopped" reads here as: every call
after the escalation is refused before it runs (the latch), and the model is told why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integrations.coding_agents.agent_worlds import AgentRun, CodexWorld

from unstuck.evals.agents import _catalogue_calls
from unstuck.guard.decision import LATCHED
from unstuck.toolkit.workspace import KNOWN_CLIS

pytestmark = pytest.mark.slow

GH = KNOWN_CLIS["gh"]
assert GH.sign_in is not None and GH.sign_in_flow is not None
#: How Codex 0.171.0 words a call its PreToolUse hook refused (its tool router's error).
REFUSED = ("Command blocked by PreToolUse hook:",)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[CodexWorld]:
    world = CodexWorld(tmp_path / "guarded")
    world.unstuck("hooks", "install", "codex", "--user")
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def unguarded(tmp_path: Path) -> Iterator[CodexWorld]:
    world = CodexWorld(tmp_path / "unguarded")
    try:
        yield world
    finally:
        world.close()


def asks_for_sign_in(text: str) -> bool:
    """The three-part question naming gh's sign-in is in ``text``."""
    return GH.sign_in is not None and GH.sign_in in text and "You need to:" in text


def ran(run: AgentRun) -> int:
    return run.refused(REFUSED).count(False)


def test_unguarded_codex_runs_every_workaround_around_the_logged_out_gh(unguarded: CodexWorld) -> None:
    run = unguarded.scenario_run("gh_logged_out")
    workarounds = _catalogue_calls("auth", "gh", "cli/cli")
    assert len(run.server.played()) == 1 + len(workarounds)  # the failing check, then the whole catalogue
    assert ran(run) == len(run.server.played())  # nothing refused them
    assert GH.sign_in_flow in run.commands  # `gh auth login --web` ran
    assert run.exit_code == 0
    assert not asks_for_sign_in("\n".join(r or "" for r in run.results()) + run.stdout + run.stderr)
    print(f"codex unguarded: {len(run.server.played())} calls, {ran(run)} ran, exit {run.exit_code}")


def test_guarded_codex_refuses_the_workarounds_asks_once_and_remembers_across_sessions(guarded: CodexWorld) -> None:
    first = guarded.scenario_run("gh_logged_out")
    played = first.server.played()
    refused = first.refused(REFUSED)
    results = [first.result_of(i) or "" for i in range(len(played))]
    web = [i for i, (_, agent) in enumerate(played) if agent.arguments.get("cmd") == GH.sign_in_flow]
    asked = [i for i, text in enumerate(results) if asks_for_sign_in(text)]
    assert asked, results  # the model read the question (in place of the escalating call's output)
    before = [i for i in web if i < asked[0]]
    assert before and all(refused[i] and "unattended" in results[i] for i in before)  # refused unattended
    after = range(asked[0] + 1, len(played))
    assert after and all(refused[i] and LATCHED.rstrip(".") in results[i] for i in after)  # the latch
    turns = guarded.journal()
    assert [t["status"] for t in turns] == ["blocked"] and turns[0]["turn"].startswith("codex-")
    (lesson,) = [x for x in guarded.lessons() if x["invalidated_at"] is None]
    assert (lesson["subject"], lesson["kind"], lesson["unblock"]) == ("gh", "auth", GH.sign_in)

    # session 2: the lesson is the session's context, and its probe refuses the first gh call:
    # nothing runs, and the model reads the question at once
    second = guarded.scenario_run("gh_logged_out")
    opening = str(second.server.requests[0].body["input"])
    assert f"lesson {lesson['id']}" in opening and GH.sign_in in opening
    assert ran(second) == 0 and asks_for_sign_in(second.result_of(0) or "")
    assert [t["status"] for t in guarded.journal()] == ["blocked", "blocked"]

    # session 3: gh is signed in now; the probe at the start clears the lesson and the task finishes
    third = guarded.scenario_run("gh_signed_in")
    assert "GitHub's official command line tool" in third.answer and third.exit_code == 0
    assert ran(third) == len(third.server.played()) == 2
    assert not any(asks_for_sign_in(r or "") for r in third.results())
    assert not [x for x in guarded.lessons() if x["invalidated_at"] is None]
    assert sorted(t["status"] for t in guarded.journal()) == ["blocked", "blocked", "done"]
    print(f"codex guarded: session 1 {len(played)} calls, {ran(first)} ran, question at call {asked[0] + 1}, "
          f"{len(after)} refused by the latch; session 2 {len(second.server.played())} calls, {ran(second)} ran; "
          f"session 3 {len(third.server.played())} calls, done")


def test_guarded_codex_lets_the_agent_fix_a_wrong_path_itself_with_no_question(guarded: CodexWorld) -> None:
    run = guarded.scenario_run("wrong_path")
    assert "pip install example-tool==2.1" in run.answer
    assert not any("You need to:" in (r or "") for r in run.results())
    assert ran(run) == len(run.server.played()) == 3  # the wrong read, the search, the right read
    assert [t["status"] for t in guarded.journal()] == ["done"]
