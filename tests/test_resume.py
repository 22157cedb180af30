"""Crash tests with real processes: SIGKILL at each journal crash point of each of three
write effects, then resume without and with resolvers. The ledger (an SQLite file) fails
the test if any effect commits twice."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from unstuck.journal import IntentState, Journal

CHILD = Path(__file__).with_name("crash_child.py")
POINTS = ("intent.prepared", "effect.returned", "receipt.recorded", "checkpoint.saved")
#: Points where the crash leaves an intent without a receipt: nobody can say whether it happened.
UNSETTLED = ("intent.prepared", "effect.returned")


def child(journal: Path, ledger: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), str(journal), str(ledger), *args],
                          capture_output=True, text=True, timeout=120, check=False)


def booked(ledger: Path) -> list[int]:
    with sqlite3.connect(ledger) as db:
        return [row[0] for row in db.execute("SELECT order_id FROM ledger ORDER BY rowid")]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE ledger (order_id INTEGER NOT NULL)")
    return path


def last_json(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_an_uninterrupted_turn_books_each_order_once_with_an_intent_and_receipt_each(
    tmp_path: Path, ledger: Path
) -> None:
    result = last_json(child(tmp_path / "j.db", ledger, "run", "t1"))
    assert result["status"] == "done" and booked(ledger) == [1, 2, 3]
    with Journal(tmp_path / "j.db") as journal:
        intents = journal.intents("t1")
        assert [(i.effect_ref, i.state) for i in intents] == [(f"t1:{n}", IntentState.COMMITTED) for n in range(3)]
        assert [s.tool for s in journal.steps("t1")] == ["book_order"] * 3
        assert journal.turn("t1").status == "done"


@pytest.mark.parametrize("effect", [1, 2, 3])
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_then_resume_holds_without_resolvers_and_commits_exactly_once_with_them(
    tmp_path: Path, ledger: Path, point: str, effect: int
) -> None:
    journal = tmp_path / "j.db"
    crashed = child(journal, ledger, "run", "t1", point, str(effect))
    assert crashed.returncode == -9, crashed.stderr[-2000:]  # killed by SIGKILL at the point
    effect_happened = point != "intent.prepared"
    before = booked(ledger)
    assert before == list(range(1, effect + (1 if effect_happened else 0)))

    plain = last_json(child(journal, ledger, "resume", "t1"))
    if point in UNSETTLED:
        # nobody can say whether the effect happened: held, the intent untouched, nothing run
        assert plain["status"] == "interrupted" and plain["held"] == [f"t1:{effect - 1}"]
        assert booked(ledger) == before
        with Journal(journal) as j:
            held = [i for i in j.intents("t1") if i.state is IntentState.HELD]
            assert [i.effect_ref for i in held] == [f"t1:{effect - 1}"]
            assert j.turn("t1").status == "interrupted"
        resumed = last_json(child(journal, ledger, "resume", "t1", "--resolvers"))
    else:
        resumed = plain  # the receipt settled it: resuming needs no resolver
    assert resumed["status"] == "done", resumed
    assert booked(ledger) == [1, 2, 3]  # every effect exactly once
    with Journal(journal) as j:
        assert all(i.state is IntentState.COMMITTED for i in j.intents("t1"))
        assert len(j.intents("t1")) == 3


def test_a_resolver_that_cannot_read_the_world_holds_the_turn(tmp_path: Path, ledger: Path) -> None:
    journal = tmp_path / "j.db"
    assert child(journal, ledger, "run", "t1", "effect.returned", "2").returncode == -9
    ledger.rename(tmp_path / "moved.db")  # the resolver's query now fails: no such table
    sqlite3.connect(ledger).close()
    result = last_json(child(journal, ledger, "resume", "t1", "--resolvers"))
    assert result["status"] == "interrupted" and "resolver raised" in str(result["error"])
    assert booked(tmp_path / "moved.db") == [1, 2]


def test_resuming_a_finished_turn_is_refused(tmp_path: Path, ledger: Path) -> None:
    journal = tmp_path / "j.db"
    last_json(child(journal, ledger, "run", "t1"))
    proc = child(journal, ledger, "resume", "t1")
    assert proc.returncode != 0 and "already ended done" in proc.stderr


class Crash(BaseException):
    """Stands in for the process dying at a journal point (what is on disk stays)."""


def test_retry_attempts_are_counted_from_the_journal_across_a_crash(tmp_path: Path) -> None:
    from conftest import PlaybackModel
    from unstuck.clock import VirtualClock
    from unstuck.events import EventLog
    from unstuck.loop import run_turn
    from unstuck.resume import resume_turn
    from unstuck.tools import Toolset, tool

    runs: list[str] = []

    @tool(subject="api")
    def fetch() -> str:
        """A read that always times out."""
        runs.append("fetch")
        raise TimeoutError("read timed out")

    saves = {"n": 0}

    def crash_after_the_first_retry_wait(point: str, ref: str) -> None:
        if point == "checkpoint.saved":
            saves["n"] += 1
            if saves["n"] == 2:  # the reply asking for the call; then the first attempt, before its retry
                raise Crash

    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("fetch", model=PlaybackModel([("fetch", {})]), tools=Toolset([fetch]), unattended=True,
                 clock=VirtualClock(), journal=Journal(path, on_point=crash_after_the_first_retry_wait), turn_id="t1")
    assert runs == ["fetch"]  # one attempt made, the retry's wait was on its way
    with Journal(path) as journal:
        assert [(s.tool, s.retry) for s in journal.steps("t1")] == [("fetch", False)]
        log = EventLog()
        result = resume_turn(journal, "t1", model=PlaybackModel(["gave up"]), tools=Toolset([fetch]),
                             clock=VirtualClock(), events=log)
    # timeout allows 2 attempts: the one before the crash counts, so the resumed call is the last
    assert runs == ["fetch", "fetch"] and log.named("retry.scheduled") == []
    assert result.status.value in ("blocked", "done", "failed")
