"""One store, one option (issue 24, deliver 5): every command that reads or writes a journal or
lessons takes the same ``--store`` with the same default (``UNSTUCK_STORE``, else the user data
folder), so a plain ``unstuck run`` and the commands that read what it kept agree; the option
names of earlier releases keep working with a one-line note. Real processes, a fresh home."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unstuck.store.journal import Journal

UNSTUCK = [sys.executable, "-m", "unstuck"]


def fresh_user(tmp_path: Path) -> dict[str, str]:
    """The environment of a user who has never run unstuck: ``HOME`` and the XDG folders new and
    empty, no ``UNSTUCK_STORE``, the checkout's code (``PYTHONPATH``) and programs (``PATH``)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "UNSTUCK_STORE" and not k.startswith("XDG_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"), COLUMNS="200",
               PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    return env


def unstuck(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*UNSTUCK, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
                          check=False)


@pytest.fixture
def user(tmp_path: Path) -> tuple[dict[str, str], Path]:
    work = tmp_path / "clone"
    work.mkdir()
    return fresh_user(tmp_path), work


def test_run_then_journal_lessons_and_report_with_no_options_all_see_the_same_turn(
        user: tuple[dict[str, str], Path], gh_path: str) -> None:
    env, work = user
    started = time.time()
    ran = unstuck(env, work, "run", "gh_logged_out")
    assert ran.returncode == 3, ran.stdout + ran.stderr  # blocked, as the scenario expects
    said = re.search(r"journaled as turn (\S+) in (\S+)", ran.stdout)
    assert said is not None, ran.stdout
    turn, where = said.group(1), Path(said.group(2))
    # the user data folder of XDG Base Directory 0.8: $XDG_DATA_HOME/unstuck
    data = Path(env["XDG_DATA_HOME"]) / "unstuck"
    assert where == data / "journal.db" and sorted(p.name for p in data.glob("*.db")) == ["journal.db", "lessons.db"]
    assert list(work.iterdir()) == []  # nothing left in the working folder

    listed = unstuck(env, work, "journal", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(t["turn"], t["status"]) for t in json.loads(listed.stdout)] == [(turn, "blocked")]
    shown = unstuck(env, work, "journal", "show", turn)
    assert shown.returncode == 0 and f"turn {turn} · blocked" in shown.stdout

    lessons = unstuck(env, work, "lessons", "list", "--json")
    assert lessons.returncode == 0, lessons.stderr
    learned = json.loads(lessons.stdout)
    assert [(x["subject"], x["kind"]) for x in learned] == [("gh", "auth")]  # the blocker the turn asked about
    assert started <= learned[0]["created_at"] <= time.time()

    report = unstuck(env, work, "report", "--json", "-")
    assert report.returncode == 0, report.stderr
    costs = json.loads(report.stdout)
    assert costs["turns_read"] == 1 and costs["journals"] == [str(where)]
    assert [(t["turn_id"], t["subject"], t["kind"]) for t in costs["turns"]] == [(turn, "gh", "auth")]
    for proc in (listed, lessons, report):
        assert "note:" not in proc.stderr and "deprecated" not in proc.stderr  # nothing old was used


def test_a_folder_given_as_store_is_read_by_every_command_that_run_wrote_it_with(
        user: tuple[dict[str, str], Path], gh_path: str) -> None:
    env, work = user
    folder = work / "stores"
    ran = unstuck(env, work, "run", "gh_logged_out", "--agent", "compliant", "--store", str(folder))
    assert ran.returncode == 3, ran.stderr
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".db") == ["journal.db", "lessons.db"]
    assert not (Path(env["XDG_DATA_HOME"]) / "unstuck").exists()  # the default was not used
    for args in (("journal", "list", "--json"), ("lessons", "list", "--json")):
        proc = unstuck(env, work, *args, "--store", str(folder))
        assert proc.returncode == 0 and len(json.loads(proc.stdout)) == 1, (args, proc.stderr)
    # one store's file is that store, for the commands that read one
    proc = unstuck(env, work, "lessons", "list", "--json", "--store", str(folder / "lessons.db"))
    assert proc.returncode == 0 and [x["subject"] for x in json.loads(proc.stdout)] == ["gh"]
    report = unstuck(env, work, "report", "--json", "-", "--store", str(folder), "--store", str(folder / "journal.db"))
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["turns_read"] == 1  # a folder and its journal are one store, read once


@pytest.mark.slow
def test_the_older_option_names_work_with_a_one_line_note(user: tuple[dict[str, str], Path], gh_path: str) -> None:
    env, work = user
    journal, lessons = work / "old-journal.db", work / "old-lessons.db"
    ran = unstuck(env, work, "run", "gh_logged_out", "--agent", "compliant", "--journal", str(journal),
                  "--lessons", str(lessons))
    assert ran.returncode == 3, ran.stderr
    notes = [line for line in ran.stderr.splitlines() if "deprecated" in line]
    assert notes == ["note: --journal is deprecated; use --store (a folder, a file or a store URL)",
                     "note: --lessons is deprecated; use --store (a folder, a file or a store URL)"]
    assert journal.is_file() and lessons.is_file() and not (Path(env["XDG_DATA_HOME"]) / "unstuck").exists()
    for args in (("journal", "list", "--json", "-j", str(journal)), ("journal", "list", "--json", "--journal",
                                                                      str(journal)),
                 ("report", "--json", "-", "-j", str(journal))):
        proc = unstuck(env, work, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert [line for line in proc.stderr.splitlines() if line] == [
            "note: --journal is deprecated; use --store (a folder, a file or a store URL)"]
    # with only one of the old per-store options, the other store is not kept, as before
    alone = work / "alone.db"
    ran = unstuck(env, work, "run", "wrong_path", "--agent", "retrier", "--journal", str(alone))
    assert ran.returncode == 0, ran.stderr
    assert alone.is_file() and not (Path(env["XDG_DATA_HOME"]) / "unstuck").exists()


def test_the_journal_of_earlier_releases_in_the_working_folder_is_read_with_a_note(
        user: tuple[dict[str, str], Path]) -> None:
    env, work = user
    with Journal(work / "unstuck-journal.db") as journal:
        journal.begin_turn("old-1", "an earlier release's turn", unattended=True, guarded=True)
        journal.end_turn("old-1", "done")
    proc = unstuck(env, work, "journal", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [t["turn"] for t in json.loads(proc.stdout)] == ["old-1"]
    note = " ".join(proc.stderr.split())
    assert note.startswith("note: reading unstuck-journal.db in this folder, the default of earlier releases")
    assert str(Path(env["XDG_DATA_HOME"]) / "unstuck" / "journal.db") in note


def test_run_refuses_one_stores_file_as_its_store_and_names_it(user: tuple[dict[str, str], Path]) -> None:
    env, work = user
    with Journal(work / "j.db"):
        pass
    proc = unstuck(env, work, "run", "wrong_path", "--store", str(work / "j.db"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"--store {work / 'j.db'}: names one store's file" in said and "give a folder" in said
