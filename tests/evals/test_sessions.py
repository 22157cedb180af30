"""The multi-session lessons scenario, each session a separate process with the real gh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import bare_env
from unstuck.evals.sessions import CITED_WITHIN_STEPS, SESSION_PLAN, run_sessions


@pytest.mark.slow
def test_a_lesson_is_stored_then_cited_within_two_steps_then_closed_when_gh_is_signed_in(gh_path: str) -> None:
    results = run_sessions("improviser")
    assert [r.scenario for r in results] == [s.scenario for s in SESSION_PLAN]
    first, second, third = results
    assert first.status == "blocked" and "lesson.stored" in first.lesson_events
    assert second.status == "blocked" and second.cited and second.steps <= CITED_WITHIN_STEPS
    assert second.tool_calls == 0  # the lesson's probe asked; the model's calls never ran
    assert third.status == "done" and third.outcome == "done" and "lesson.invalidated" in third.lesson_events
    assert all(r.passed for r in results), results


def unstuck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "unstuck", *args], capture_output=True, text=True, timeout=300,
                          check=False, env=bare_env(COLUMNS="200"))


@pytest.mark.slow
def test_lessons_cli_lists_shows_searches_and_forgets_keeping_the_row(tmp_path: Path, gh_path: str) -> None:
    store = tmp_path / "lessons.db"
    blocked = unstuck("run", "gh_logged_out", "--agent", "compliant", "--unattended", "--lessons", str(store))
    assert blocked.returncode == 3, blocked.stderr
    listed = json.loads(unstuck("lessons", "list", "--store", str(store), "--json").stdout)
    assert [(x["subject"], x["kind"], x["unblock"]) for x in listed] == [("gh", "auth", "gh auth login")]
    lesson_id = str(listed[0]["id"])
    shown = json.loads(unstuck("lessons", "show", lesson_id, "--store", str(store), "--json").stdout)
    assert shown["probe"] == {"tool": "check_cli_setup", "args": {"name": "gh"}}
    assert shown["fingerprint"].startswith("sandbox|/usr/bin/gh|gh version")  # a sandbox's: never a real session's
    found = json.loads(unstuck("lessons", "search", "logged", "--store", str(store), "--json").stdout)
    assert [x["id"] for x in found] == [int(lesson_id)]
    forgot = unstuck("lessons", "forget", lesson_id, "--store", str(store))
    assert forgot.returncode == 0 and "closed" in forgot.stdout
    assert json.loads(unstuck("lessons", "list", "--store", str(store), "--json").stdout) == []
    everything = json.loads(unstuck("lessons", "list", "--all", "--store", str(store), "--json").stdout)
    assert everything[0]["metadata"]["invalidated_because"] == "forgotten by the user"
    missing = unstuck("lessons", "show", "999", "--store", str(store))
    assert missing.returncode == 2 and "no lesson 999" in missing.stderr


def test_lessons_cli_names_a_foreign_store(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("definitely not sqlite\n" * 100, encoding="utf-8")
    proc = unstuck("lessons", "list", "--store", str(path))
    assert proc.returncode == 2 and "notes.db" in proc.stderr
