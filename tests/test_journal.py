"""The journal: synced intents before the call, riding commits, redaction on write, leases,
refusal of foreign or newer stores, validations, and the CLI over it.

Tests of store semantics take ``store_target`` (tests/pg_fixtures.py) and run once on a fresh
SQLite file and once on a fresh PostgreSQL database; tests of what only a file has (PRAGMAs,
WAL fsyncs, ``quick_check``, a file replaced, ``.bak`` copies of migrations, the CLI's
``--journal`` path) stay on SQLite."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PlaybackModel, bare_env, run_at_once
from pg_fixtures import StoreTarget
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind, Probe, Situation, Source
from unstuck.core.tools import Effect
from unstuck.decide.outcome import TurnStatus, Validator, Verdict
from unstuck.loop.turn import run_turn
from unstuck.store.journal import (
    APPLICATION_ID,
    IntentState,
    Journal,
    JournalError,
    situation_from_json,
    situation_to_json,
)
from unstuck.toolkit.specs import Toolset, tool


def test_a_new_journal_is_marked_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    Journal(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_another_programs_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER)")
        db.execute("INSERT INTO orders VALUES (42)")
    before = path.read_bytes()
    with pytest.raises(JournalError, match=r"app\.db is another program's database"):
        Journal(path)
    assert path.read_bytes() == before


def test_a_file_that_is_not_sqlite_is_refused_naming_it_and_never_recreated(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    path.write_bytes(b"this is not a database, but someone's notes\n" * 100)
    before = path.read_bytes()
    with pytest.raises(JournalError, match=str(path)):
        Journal(path)
    assert path.read_bytes() == before


def test_situations_round_trip_through_json() -> None:
    declared = Situation(Kind.AUTH, "gh", interactive=True, unblock="gh auth login",
                         probe=Probe.of("check_cli_setup", {"name": "gh"}), detail="logged out")
    inferred = Situation(Kind.QUOTA, "api", retryable=True, retry_after_s=60.0, source=Source.INFERRED)
    for situation in (declared, inferred):
        again = situation_from_json(situation_to_json(situation))
        assert again == situation and again is not None and again.detail == situation.detail
    with pytest.raises(JournalError, match="does not read back"):
        situation_from_json('{"kind": "gremlins", "subject": "x"}')


def test_the_intent_is_on_disk_before_the_write_call_runs(store_target: StoreTarget) -> None:
    seen: list[tuple[str, str]] = []

    @tool(effect=Effect.WRITE, subject="ledger")
    def book(order: int) -> str:
        """Book an order."""
        # another connection (as another process would) already sees the prepared intent
        seen.extend(store_target.rows("SELECT effect_ref, state FROM intents"))
        return f"booked {order}"

    @tool(subject="ledger")
    def count() -> str:
        """Count orders (a read: no intent)."""
        return "1"

    with Journal(store_target.url) as journal:
        model = PlaybackModel([("book", {"order": 1}), ("count", {}), "done"])
        result = run_turn("book", model=model, tools=Toolset([book, count]), unattended=True,
                          clock=VirtualClock(), journal=journal, turn_id="t1")
        assert result.status is TurnStatus.DONE
        assert seen == [("t1:0", "prepared")]
        intents = journal.intents("t1")
        assert [(i.effect_ref, i.state) for i in intents] == [("t1:0", IntentState.COMMITTED)]
        assert json.loads(intents[0].receipt or "{}")["content"] == "booked 1"
        assert [s.call.tool for s in journal.steps("t1")] == ["book", "count"]
        with pytest.raises(JournalError, match="already exists"):
            journal.prepare_intent("t1", 0, "c", "book", "{}")


def test_validators_decide_done_and_a_stop_is_not_required(tmp_path: Path,
                                                           store_target: StoreTarget) -> None:
    ledger = tmp_path / "ledger.txt"

    @tool(effect=Effect.WRITE, subject="ledger")
    def write(text: str) -> str:
        """Write the ledger."""
        ledger.write_text(text, encoding="utf-8")
        return "written"

    def has_order_42() -> tuple[bool, str]:
        text = ledger.read_text(encoding="utf-8") if ledger.exists() else ""
        return "order 42" in text, f"ledger holds {text!r}"

    checks = [Validator("ledger has order 42", has_order_42)]
    with Journal(store_target.url) as journal:
        wrong = run_turn("book 42", model=PlaybackModel([("write", {"text": "order 41"}), "booked"]),
                         tools=Toolset([write]), unattended=True, clock=VirtualClock(), validators=checks,
                         journal=journal, turn_id="wrong")
        assert wrong.status is TurnStatus.FAILED and "ledger holds 'order 41'" in (wrong.error or "")
        assert [v.verdict for v in wrong.validations] == [Verdict.FAILED]
        right = run_turn("book 42", model=PlaybackModel([("write", {"text": "order 42"}), "booked"]),
                         tools=Toolset([write]), unattended=True, clock=VirtualClock(), validators=checks,
                         journal=journal, turn_id="right")
        assert right.status is TurnStatus.DONE and [v.verdict for v in right.validations] == [Verdict.PASSED]
        assert journal.validations("wrong") == [("ledger has order 42", "failed", "ledger holds 'order 41'")]
        assert journal.turn("right").status == "done"


def test_a_validator_that_raises_fails_the_turn_naming_the_error() -> None:
    @tool(effect=Effect.WRITE, subject="ledger")
    def write(text: str) -> str:
        """Write the ledger."""
        return "written"

    def broken() -> bool:
        raise OSError("ledger unreadable")

    raised = run_turn("x", model=PlaybackModel(["fine"]), tools=Toolset([write]), unattended=True,
                      clock=VirtualClock(), validators=[Validator("readable", broken)])
    assert raised.status is TurnStatus.FAILED and "OSError: ledger unreadable" in (raised.error or "")


def test_a_blocked_turn_records_validators_as_not_required_never_passed() -> None:
    @tool(subject="gh")
    def check() -> dict[str, object]:
        """Check gh."""
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    result = run_turn("x", model=PlaybackModel([("check", {})] * 5), tools=Toolset([check]), unattended=True,
                      clock=VirtualClock(), validators=[Validator("anything", lambda: True)])
    assert result.status is TurnStatus.BLOCKED
    assert [v.verdict for v in result.validations] == [Verdict.NOT_REQUIRED]


def unstuck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "unstuck", *args], capture_output=True, text=True, timeout=300,
                          check=False, env=bare_env(COLUMNS="200"))


@pytest.mark.slow
def test_journal_cli_lists_shows_and_settles_a_held_turn(tmp_path: Path, store_target: StoreTarget) -> None:
    store, ledger = store_target.url, tmp_path / "ledger.db"
    with sqlite3.connect(ledger) as db:
        db.execute("CREATE TABLE ledger (order_id INTEGER NOT NULL)")
    child = Path(__file__).with_name("crash_child.py")
    crashed = subprocess.run([sys.executable, str(child), store, str(ledger), "run", "t1",
                              "effect.returned", "2"], capture_output=True, text=True, timeout=120, check=False)
    assert crashed.returncode == -9
    held = subprocess.run([sys.executable, str(child), store, str(ledger), "resume", "t1"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert json.loads(held.stdout.strip().splitlines()[-1])["status"] == "interrupted"

    listed = unstuck("journal", "list", "--journal", store, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [{"turn": "t1", "task": "book orders 1 to 3", "status": "interrupted",
                                          "steps": 1, "intents": 2, "held": 1, "owner": None}]  # it let go
    shown = json.loads(unstuck("journal", "show", "t1", "--journal", store, "--json").stdout)
    assert [(i["effect_ref"], i["state"]) for i in shown["intents"]] == [("t1:0", "committed"), ("t1:1", "held")]

    wrong = unstuck("journal", "resume", "t1", "--journal", store, "--committed", "t1:9")
    assert wrong.returncode == 2 and "t1:1" in wrong.stderr
    settled = unstuck("journal", "resume", "t1", "--journal", store, "--committed", "t1:1")
    assert settled.returncode == 0 and "every effect intent is settled" in settled.stdout
    done = subprocess.run([sys.executable, str(child), store, str(ledger), "resume", "t1"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert json.loads(done.stdout.strip().splitlines()[-1])["status"] == "done"
    with sqlite3.connect(ledger) as db:
        assert [r[0] for r in db.execute("SELECT order_id FROM ledger ORDER BY rowid")] == [1, 2, 3]


def test_journal_cli_names_a_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("not sqlite at all " * 50, encoding="utf-8")
    proc = unstuck("journal", "list", "--journal", str(path))
    assert proc.returncode == 2 and "notes.db" in proc.stderr


def test_undecodable_tool_output_is_journaled_not_fatal(store_target: StoreTarget) -> None:
    @tool(subject="files")
    def listing() -> str:
        """A directory listing with a Latin-1 file name, decoded as a filesystem does."""
        return b"caf\xe9.txt".decode("utf-8", "surrogateescape")

    with Journal(store_target.url) as journal:
        result = run_turn("x", model=PlaybackModel([("listing", {}), "done"]), tools=Toolset([listing]),
                          unattended=True, clock=VirtualClock(), journal=journal, turn_id="t1")
        assert result.status is TurnStatus.DONE and journal.turn("t1").status == "done"
        assert journal.steps("t1")[0].content == "caf\ufffd.txt"


def test_a_nul_character_in_tool_output_is_journaled_as_a_replacement_not_a_failed_turn(
        store_target: StoreTarget) -> None:
    # PostgreSQL's text type cannot hold NUL (PostgreSQL documentation, 8.3 "Character Types"); a
    # binary file printed by cat carries them
    @tool(subject="files", effect=Effect.WRITE)
    def dump(name: str) -> str:
        """Print a file that holds NUL bytes."""
        return "ELF\x00\x00header"

    with Journal(store_target.url) as journal:
        result = run_turn("x\x00y", model=PlaybackModel([("dump", {"name": "a\x00b"}), "done"]),
                          tools=Toolset([dump]), unattended=True, clock=VirtualClock(), journal=journal, turn_id="t1")
        assert result.status is TurnStatus.DONE and journal.turn("t1").status == "done"
        assert journal.steps("t1")[0].content == "ELF\ufffd\ufffdheader"
        assert journal.turn("t1").task == "x\ufffdy"
        (intent,) = journal.intents("t1")
        assert intent.state is IntentState.COMMITTED and json.loads(intent.arguments_json) == {"name": "a\x00b"}


def test_a_malformed_declaration_still_raises_but_the_journal_says_failed(
        store_target: StoreTarget) -> None:
    from unstuck.store.events import EventLog

    @tool(subject="x")
    def broken() -> dict[str, object]:
        """Declares a kind that does not exist."""
        return {"status": "error", "situation": {"kind": "gremlins", "subject": "x"}}

    log = EventLog()
    with Journal(store_target.url) as journal:
        with pytest.raises(ValueError, match="gremlins"):
            run_turn("x", model=PlaybackModel([("broken", {})]), tools=Toolset([broken]), unattended=True,
                     clock=VirtualClock(), journal=journal, turn_id="t1", events=log)
        assert journal.turn("t1").status == "failed" and "gremlins" in (journal.turn("t1").error or "")
    assert log.named("turn.ended")[-1].get("status") == "failed"


@pytest.mark.parametrize("returned", ["missing file", {"ok": False}, ["False", "why"], (False,), (False, "e", 1), None])
def test_a_validator_must_say_true_or_false(returned: object) -> None:
    verdict = Validator("odd", lambda: returned).run()  # type: ignore[arg-type,return-value]
    assert verdict.verdict is Verdict.FAILED and "not True/False" in verdict.evidence


def test_read_commands_open_the_journal_read_only_and_never_make_one(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    proc = unstuck("journal", "list", "--journal", str(empty))
    assert proc.returncode == 2 and "empty" in proc.stderr and empty.stat().st_size == 0
    with Journal(tmp_path / "j.db") as journal:
        journal.begin_turn("t1", "x", unattended=True, guarded=True)
    with Journal(tmp_path / "j.db", readonly=True) as journal:
        assert [t.turn_id for t in journal.turns()] == ["t1"]
    both = unstuck("journal", "resume", "t1", "--journal", str(tmp_path / "j.db"), "--committed", "t1:0",
                   "--absent", "t1:0")
    assert both.returncode == 2 and "both committed and absent" in both.stderr


def _journal_with_messages(path: Path) -> None:
    """A closed journal with one turn whose 200 checkpointed messages span several pages."""
    with Journal(path) as journal:
        journal.begin_turn("t1", "book orders", unattended=True, guarded=True)
        journal.checkpoint("t1", steps=[], messages=[json.dumps({"role": "user", "content": "m" * 900})] * 200,
                           first_seq=0)


def test_a_damaged_journal_is_refused_at_open_before_anything_is_written(tmp_path: Path) -> None:
    from test_sqlite_store import damage_page

    path = tmp_path / "j.db"
    _journal_with_messages(path)
    damage_page(path, "messages")
    # the damage is where a new turn's row is not: plain SQLite would still take one
    spare = tmp_path / "copy.db"
    spare.write_bytes(path.read_bytes())
    with sqlite3.connect(spare) as db:
        db.execute("INSERT INTO turns (turn_id, task, status, unattended, guarded, started_at) "
                   "VALUES ('t2', 'x', 'running', 1, 1, 0)")
    db.close()
    before = path.read_bytes()
    with pytest.raises(JournalError, match=r"is damaged \(PRAGMA quick_check: .+\); it was left untouched") as caught:
        Journal(path)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == before
    proc = unstuck("run", "gh_logged_out", "--agent", "improviser", "--unattended", "--journal", str(path))
    assert proc.returncode == 1 and "is damaged" in proc.stderr and "journaled as turn" not in proc.stdout
    assert path.read_bytes() == before


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_journal_deleted_or_replaced_during_the_run_fails_the_turn_naming_it(tmp_path: Path, how: str) -> None:

    path = tmp_path / "j.db"

    @tool(effect=Effect.READ)
    def tidy() -> str:
        """Removes or replaces the journal file under the running turn."""
        if how == "deleted":
            path.unlink()
        else:
            Journal(tmp_path / "fresh.db").close()
            os.replace(tmp_path / "fresh.db", path)
        return "tidied"

    model = PlaybackModel([("tidy", {}), "tidied up"])
    with Journal(path) as journal, pytest.raises(JournalError, match="replaced during the run") as caught:
        run_turn("tidy up", model=model, tools=Toolset([tidy]), unattended=True, clock=VirtualClock(),
                 journal=journal, turn_id="t1")
    assert str(path) in str(caught.value)
    assert ("was deleted" if how == "deleted" else "now names another file") in str(caught.value)


def test_unstuck_run_with_its_journal_replaced_mid_turn_fails_and_never_says_journaled(tmp_path: Path) -> None:
    import pwd
    import shlex

    journal, fresh, scenarios = tmp_path / "j.db", tmp_path / "fresh.db", tmp_path / "scenarios"
    Journal(fresh).close()
    scenarios.mkdir()
    move = f"mv {shlex.quote(str(fresh))} {shlex.quote(str(journal))}"  # rename(2) over the open journal
    (scenarios / "swap.yaml").write_text(  # it writes outside its sandbox, so it runs as this account
        "name: swap_journal\ntitle: a step replaces the journal under the running turn\nrole: counter\n"
        f"setup: {{run_as: {pwd.getpwuid(os.geteuid()).pw_name}}}\n"
        f"tags: [journal]\ntask: Tidy the folder.\nplan:\n  - {{tool: run_command, args: {{command: {json.dumps(move)}}}}}\n"
        "agents: [compliant]\nexpect:\n  status: done\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "unstuck", "run", "swap_journal", "--trust", "--agent", "compliant",
                           "--unattended", "--scenario-dir", str(scenarios), "--journal", str(journal)],
                          capture_output=True, text=True, timeout=300, check=False, env=bare_env(COLUMNS="200"))
    assert proc.returncode == 1
    said = " ".join(proc.stderr.split())  # however the terminal wrapped it
    assert f"{journal} was replaced during the run (the path now names another file)" in said
    assert "journaled as turn" not in proc.stdout


# -- cost: synced commits per write call (issue 12, "Cost at scale") ---------------------------

WRITES = 50


def _ledger_turn(journal: Journal, writes: int, turn_id: str = "t1") -> list[int]:
    ledger: list[int] = []

    @tool(effect=Effect.WRITE, subject="ledger")
    def book(order: int) -> str:
        """Book an order."""
        ledger.append(order)
        return f"booked {order}"

    model = PlaybackModel([*[("book", {"order": n}) for n in range(writes)], "done"])
    result = run_turn("book", model=model, tools=Toolset([book]), unattended=True, clock=VirtualClock(),
                      journal=journal, turn_id=turn_id, max_steps=writes + 5)
    assert result.status is TurnStatus.DONE, result.error
    return ledger


def test_a_write_call_costs_at_most_1_2_synced_commits_over_a_50_write_turn(
        store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        before = journal.commits  # opening a new store made the schema in one synced commit
        assert _ledger_turn(journal, WRITES) == list(range(WRITES))
        synced = journal.commits - before
        # the rule: one synced commit per intent (before its call) and one for the turn's end
        assert synced == WRITES + 1
        assert synced / WRITES <= 1.2
        # the reply checkpoint, the receipt and the step checkpoint of each call still commit
        assert journal.riding_commits >= 3 * WRITES
        assert [i.state for i in journal.intents("t1")] == [IntentState.COMMITTED] * WRITES
        assert len(journal.steps("t1")) == WRITES and journal.turn("t1").status == "done"


_STRACED_TURN = """
import sys
sys.path.insert(0, sys.argv[2])
from test_journal import _ledger_turn
from unstuck.store.journal import Journal
with Journal(sys.argv[1]) as journal:
    _ledger_turn(journal, int(sys.argv[3]))
    print(journal.commits, journal.riding_commits)
"""


def test_the_wal_is_fsynced_at_most_1_2_times_per_write_call_seen_by_strace(tmp_path: Path) -> None:
    import shutil

    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed: the fsync count cannot be seen from outside")
    path = tmp_path / "j.db"
    Journal(path).close()  # the schema's commits are not the turn's
    proc = subprocess.run([strace, "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", sys.executable, "-c",
                           _STRACED_TURN, str(path), str(Path(__file__).parent), str(WRITES)],
                          capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0 and "ptrace" in proc.stderr:
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    wal_syncs = [line for line in proc.stderr.splitlines() if f"<{path}-wal>" in line]
    # each synced commit fsyncs the WAL once (synchronous=FULL in WAL mode); WAL checkpoints,
    # the automatic ones and the one at close, add a few more: still within the 1.2 budget
    assert len(wal_syncs) <= 1.2 * WRITES, f"{len(wal_syncs)} WAL syncs for {WRITES} write calls"
    assert len(wal_syncs) >= WRITES  # every intent was synced before its call


def test_a_zero_sync_window_syncs_every_commit(store_target: StoreTarget) -> None:
    with Journal(store_target.url, sync_window=0.0) as journal:
        before = journal.commits
        _ledger_turn(journal, 3)
        # nothing may wait: every commit is synced, four per write call as before riding
        # commits (the reply's checkpoint, the intent, the receipt, the step's checkpoint)
        assert journal.riding_commits == 0
        assert journal.commits - before >= 3 * 4


@pytest.mark.parametrize("window", [-1.0, float("nan")])
def test_a_sync_window_that_is_not_seconds_is_refused(tmp_path: Path, window: float) -> None:
    with pytest.raises(ValueError, match="sync_window"):
        Journal(tmp_path / "j.db", sync_window=window)
    assert not (tmp_path / "j.db").exists()


def test_a_riding_commit_is_seen_by_another_connection_at_once(store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        journal.begin_turn("t1", "task", unattended=True, guarded=True)
        ref = journal.prepare_intent("t1", 0, "c1", "book", "{}")
        journal.record_receipt(ref, '{"content": "booked"}')
        assert journal.riding_commits == 2
        # as another process would read it: committed, not waiting for the next synced commit
        assert store_target.rows("SELECT state, receipt FROM intents") == [("committed", '{"content": "booked"}')]


# -- schema versions (issue 12) -------------------------------------------------------------

#: A token in GitHub's documented format for a personal access token: ``ghp_`` and 36
#: characters of [A-Za-z0-9] (GitHub docs, "About authentication to GitHub", token formats).
TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"

#: The journal's tables as version 1 wrote them, written out here so the test builds the old
#: file the way the old code did, not with the current code.
_LAYOUT_1 = """
CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY, task TEXT NOT NULL, status TEXT NOT NULL, unattended INTEGER NOT NULL,
    guarded INTEGER NOT NULL, started_at REAL NOT NULL, ended_at REAL, answer TEXT, error TEXT,
    checkpoint_step INTEGER NOT NULL DEFAULT -1, config TEXT NOT NULL DEFAULT '{}',
    owner_pid INTEGER, owner_start INTEGER, owner_host TEXT
);
CREATE TABLE decisions (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), after_step INTEGER NOT NULL, action TEXT NOT NULL,
    subject TEXT NOT NULL
);
CREATE TABLE messages (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), seq INTEGER NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
CREATE TABLE steps (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), idx INTEGER NOT NULL, call_id TEXT NOT NULL,
    tool TEXT NOT NULL, arguments TEXT NOT NULL, arguments_digest TEXT NOT NULL, subject TEXT NOT NULL,
    interactive INTEGER NOT NULL, auto_retry INTEGER NOT NULL, dispatched INTEGER NOT NULL,
    probe INTEGER NOT NULL, retry INTEGER NOT NULL, ok INTEGER NOT NULL, situation TEXT, decision TEXT NOT NULL,
    exempt TEXT NOT NULL, injected TEXT, content TEXT NOT NULL, started_s REAL NOT NULL, duration_s REAL NOT NULL,
    PRIMARY KEY (turn_id, idx)
);
CREATE TABLE intents (
    effect_ref TEXT PRIMARY KEY, turn_id TEXT NOT NULL REFERENCES turns(turn_id), step INTEGER NOT NULL,
    call_id TEXT NOT NULL, reply_seq INTEGER NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
    state TEXT NOT NULL, prepared_at REAL NOT NULL, settled_at REAL, receipt TEXT, settled_by TEXT
);
CREATE TABLE validations (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), name TEXT NOT NULL, verdict TEXT NOT NULL,
    evidence TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX intents_by_turn ON intents (turn_id, step);
"""
_LEAKY_ARGS = json.dumps({"repo": "o/r", "token": TOKEN})
_LEAKY_DETAIL = f"GH_TOKEN={TOKEN} was refused: HTTP 401"
_LEAKY_MESSAGE = json.dumps({"role": "assistant", "content": f"I will export GH_TOKEN={TOKEN}",
                             "tool_calls": [["c1", "gh_api", _LEAKY_ARGS]], "tool_call_id": None, "name": None})


def _journal_1(path: Path, *, stamped: bool) -> None:
    """A version-1 journal written before redaction: a turn whose step, message and receipt
    hold a token; ``stamped=False``: no ``application_id`` nor ``user_version`` either."""
    db = sqlite3.connect(path)
    if stamped:
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute("PRAGMA user_version = 1")
    db.executescript(_LAYOUT_1)
    db.execute("INSERT INTO turns (turn_id, task, status, unattended, guarded, started_at, answer, error) VALUES"
               " ('t1', ?, 'interrupted', 1, 1, 1.0, ?, ?)",
               (f"list issues with GH_TOKEN={TOKEN}", f"gh said: token {TOKEN} is invalid", f"Bearer {TOKEN}"))
    db.execute("INSERT INTO steps VALUES ('t1', 0, 'c1', 'gh_api', ?, 'digest-of-old', 'gh', 0, 0, 1, 0, 0, 0, ?,"
               " 'escalate', '[]', NULL, ?, 1.0, 0.5)",
               (_LEAKY_ARGS, situation_to_json(Situation(Kind.AUTH, "gh", detail=_LEAKY_DETAIL)),
                f"gh: Bad credentials for GH_TOKEN={TOKEN}"))
    db.execute("INSERT INTO messages VALUES ('t1', 0, ?)", (_LEAKY_MESSAGE,))
    db.execute("INSERT INTO intents VALUES ('t1:0', 't1', 0, 'c1', 0, 'gh_api', ?, 'committed', 1.0, 2.0, ?, 'call')",
               (_LEAKY_ARGS, json.dumps({"ok": False, "content": f"token {TOKEN} rejected", "exit_code": 1})))
    db.commit()
    db.close()


def _rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(path)
    try:
        return {t: db.execute(f"SELECT * FROM {t}").fetchall() for t in ("turns", "steps", "messages", "intents")}
    finally:
        db.close()


def _assert_redacted_as_written_now(journal: Journal) -> None:
    turn = journal.turn("t1")
    assert (turn.task, turn.answer, turn.error) == ("list issues with GH_TOKEN=***", "gh said: token *** is invalid",
                                                    "Bearer ***")
    (step,) = journal.steps("t1")
    assert step.content == "gh: Bad credentials for GH_TOKEN=***"
    assert json.loads(step.call.arguments_json) == {"repo": "o/r", "token": "***"}
    assert step.situation is not None and step.situation.detail == "GH_TOKEN=*** was refused: HTTP 401"
    (message,) = journal.messages("t1")
    assert json.loads(message)["content"] == "I will export GH_TOKEN=***"
    ((call_id, tool, arguments),) = json.loads(message)["tool_calls"]  # a call's arguments keep no secret either
    assert (call_id, tool, json.loads(arguments)) == ("c1", "gh_api", {"repo": "o/r", "token": "***"})
    (intent,) = journal.intents("t1")
    assert json.loads(intent.arguments_json) == {"repo": "o/r", "token": "***"}
    assert intent.receipt is not None and json.loads(intent.receipt)["content"] == "token *** rejected"


def _as_kept(rows: dict[str, list[tuple[object, ...]]]) -> dict[str, list[tuple[object, ...]]]:
    """``rows`` with every string redacted as the store boundary keeps it (unstuck.core.redact owns
    the rule) and each step's ``arguments_digest`` (column 5) made of its arguments (column 4)
    as kept: what a backup a migration keeps must hold (issue 23)."""
    from unstuck.core.redact import redact_document

    kept = {table: [tuple(redact_document(v) if isinstance(v, str) else v for v in row) for row in found]
            for table, found in rows.items()}
    kept["steps"] = [(*row[:5], hashlib.sha256(str(row[4]).encode("utf-8")).hexdigest()[:16], *row[6:])
                     for row in kept["steps"]]
    return kept


@pytest.mark.parametrize("stamped", [True, False], ids=["version-1", "unstamped"])
def test_a_version_1_journal_is_redacted_in_place_after_a_backup_of_its_layout_that_keeps_no_secret(
        tmp_path: Path, stamped: bool) -> None:
    path = tmp_path / "j.db"
    _journal_1(path, stamped=stamped)
    original = _rows(path)
    assert TOKEN in str(original["steps"]) and TOKEN in str(original["messages"])
    with Journal(path) as journal:
        assert journal.schema == 5
        _assert_redacted_as_written_now(journal)
        backup = journal.backup_path(1)
    assert backup == tmp_path / "j.db.schema1.bak"
    assert _rows(backup) == _as_kept(original)  # every row, in the old layout, as the migration keeps it
    assert TOKEN.encode() not in backup.read_bytes() and backup.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(backup) as old:
        assert old.execute("PRAGMA user_version").fetchone()[0] == (1 if stamped else 0)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    (args, digest), = db.execute("SELECT arguments, arguments_digest FROM steps").fetchall()
    db.close()
    assert digest == hashlib.sha256(args.encode("utf-8")).hexdigest()[:16]  # of the arguments as kept
    # a second open finds nothing to do
    before, copy = path.read_bytes(), backup.stat()
    Journal(path).close()
    assert path.read_bytes() == before and backup.stat().st_mtime_ns == copy.st_mtime_ns
    assert not (tmp_path / "j.db.schema2.bak").exists()


def test_a_journal_of_a_newer_version_is_refused_naming_both_and_left_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    Journal(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 6")
    db.close()
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(JournalError, match=rf"{path} is a journal of schema 6; this unstuck reads schemas 1 to 5;"
                                               r" it was left untouched"):
            Journal(path, readonly=readonly)
    assert path.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if ".bak" in p.name]


@pytest.mark.parametrize("stamped", [True, False], ids=["version-1", "unstamped"])
def test_a_read_only_open_of_a_version_1_journal_reads_it_redacted_and_writes_nothing(
        tmp_path: Path, stamped: bool) -> None:
    path = tmp_path / "j.db"
    _journal_1(path, stamped=stamped)
    before = path.read_bytes()
    with Journal(path, readonly=True) as journal:
        assert journal.schema == 1
        _assert_redacted_as_written_now(journal)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["j.db"]


def test_an_intent_and_its_receipt_are_journaled_redacted(store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        journal.begin_turn("t1", "task", unattended=True, guarded=True)
        ref = journal.prepare_intent("t1", 0, "c1", "gh_api", _LEAKY_ARGS)
        journal.record_receipt(ref, json.dumps({"ok": True, "content": f"created with GH_TOKEN={TOKEN}"}))
        (intent,) = journal.intents("t1")
    assert intent.receipt is not None and json.loads(intent.receipt)["content"] == "created with GH_TOKEN=***"
    assert json.loads(intent.arguments_json) == {"repo": "o/r", "token": "***"}  # the key named token: masked whole
    assert store_target.rows("SELECT arguments, receipt FROM intents") == [(intent.arguments_json, intent.receipt)]
    assert TOKEN not in str(store_target.rows("SELECT * FROM intents"))


def test_a_turns_task_answer_and_error_are_journaled_redacted(store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        journal.begin_turn("t1", f"deploy with GH_TOKEN={TOKEN}", unattended=True, guarded=True)
        journal.end_turn("t1", "failed", answer=f"I used {TOKEN}", error=f"Authorization: Bearer {TOKEN}")
        turn = journal.turn("t1")
    assert TOKEN not in f"{turn.task} {turn.answer} {turn.error}"
    assert turn.task == "deploy with GH_TOKEN=***" and turn.error == "Authorization: Bearer ***"
    assert TOKEN not in str(store_target.rows("SELECT * FROM turns"))  # as another connection reads it
    if store_target.path is not None:
        assert TOKEN.encode() not in store_target.path.read_bytes()


def test_a_database_with_other_tables_and_no_version_is_not_taken_for_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    db = sqlite3.connect(path)
    db.executescript(_LAYOUT_1 + "CREATE TABLE extra (x);")
    db.close()
    before = path.read_bytes()
    with pytest.raises(JournalError, match="another program's database"):
        Journal(path)
    assert path.read_bytes() == before


# -- both engines: schema, foreign tables, read-only opens (issue 16) --------------------------


def test_a_new_journal_records_its_schema_version_and_makes_its_tables(store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        assert journal.schema == 5 and journal.engine is store_target.engine
        assert journal.where == store_target.where
    assert store_target.schema_version("journal") == 5
    assert {"turns", "decisions", "messages", "steps", "intents", "validations"} <= store_target.tables()


def test_a_store_holding_another_programs_turns_table_is_refused_and_left_untouched(
        store_target: StoreTarget) -> None:
    store_target.execute("CREATE TABLE turns (id INTEGER, who TEXT)")
    store_target.execute("INSERT INTO turns VALUES (7, 'someone else')")
    with pytest.raises(JournalError, match=r"another program's .*left untouched") as caught:
        Journal(store_target.url)
    assert store_target.where in str(caught.value)
    assert store_target.tables() == {"turns"}  # no journal table, no unstuck_schema
    assert store_target.rows("SELECT id, who FROM turns") == [(7, "someone else")]


def test_a_read_only_open_reads_the_journal_another_open_wrote(store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
        ref = journal.prepare_intent("t1", 0, "c1", "book", '{"order": 1}')
        journal.record_receipt(ref, '{"content": "booked"}')
        journal.end_turn("t1", "done", answer="booked")
    with Journal(store_target.url, readonly=True) as journal:
        assert journal.schema == 5
        assert [(t.turn_id, t.status, t.answer) for t in journal.turns()] == [("t1", "done", "booked")]
        assert [(i.effect_ref, i.state) for i in journal.intents("t1")] == [("t1:0", IntentState.COMMITTED)]


def test_a_write_through_a_read_only_journal_fails_with_the_journals_error_and_writes_nothing(
        store_target: StoreTarget) -> None:
    Journal(store_target.url).close()
    with Journal(store_target.url, readonly=True) as journal, pytest.raises(JournalError) as caught:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
    assert str(caught.value).startswith(f"Journal.begin_turn on {store_target.where} failed")
    assert store_target.rows("SELECT count(*) FROM turns") == [(0,)]


def test_an_unknown_turn_is_named_on_read_and_on_write(store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        for call in (lambda: journal.turn("nope"), lambda: journal.lease("nope"), lambda: journal.claim("nope"),
                     lambda: journal.settle("nope", absent=["nope:0"])):
            with pytest.raises(JournalError, match=re.escape(f"no turn 'nope' in {store_target.where}")):
                call()
        with pytest.raises(JournalError, match="no effect intent 'nope:0'"):
            journal.mark_absent("nope:0")
        assert journal.steps("nope") == [] and journal.intents("nope") == [] and journal.messages("nope") == []


def test_steps_messages_decisions_and_validations_read_back_in_order(store_target: StoreTarget) -> None:
    @tool(subject="ledger")
    def count() -> str:
        """Count orders."""
        return "3"

    with Journal(store_target.url) as journal:
        result = run_turn("count", model=PlaybackModel([("count", {}), ("count", {}), "three"]),
                          tools=Toolset([count]), unattended=True, clock=VirtualClock(), journal=journal,
                          turn_id="t1", validators=[Validator("counted", lambda: (True, "3 orders"))])
        assert result.status is TurnStatus.DONE
        steps = journal.steps("t1")
        assert [(s.index, s.call.tool, s.content) for s in steps] == [(0, "count", "3"), (1, "count", "3")]
        assert [json.loads(m)["role"] for m in journal.messages("t1")][:2] == ["system", "user"]
        assert journal.validations("t1") == [("counted", "passed", "3 orders")]
        assert journal.turn("t1").checkpoint_step == 1
        journal.begin_turn("t2", "ask", unattended=False, guarded=True, config_json='{"max_steps": 4}')
        answers = [(2, "skip", "gh"), (0, "close", "npm"), (1, "close", "gh")]  # kept as given, not sorted
        for after, action, subject in answers:
            journal.record_decision("t2", after, action, subject)
        for name, verdict in [("b", "failed"), ("a", "passed")]:
            journal.record_validation("t2", name, verdict, f"{name} said so")
        assert journal.decisions("t2") == answers
        assert journal.validations("t2") == [("b", "failed", "b said so"), ("a", "passed", "a said so")]
        assert journal.config("t2") == '{"max_steps": 4}'


# -- both engines: concurrent claims (issue 16; leases in full: tests/test_journal_leases.py) ----


_CLAIMER = """
import os, sys
os.environ["UNSTUCK_HOST_ID"] = sys.argv[3]
from unstuck.store.journal import Journal, JournalError
with Journal(sys.argv[1]) as journal:
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        journal.claim(sys.argv[2])
        print("won", flush=True)
    except JournalError as exc:
        print("lost", exc, flush=True)
"""


def test_of_processes_on_several_machines_claiming_one_turn_at_once_exactly_one_wins(
        store_target: StoreTarget) -> None:
    with Journal(store_target.url) as owner:
        owner.begin_turn("t1", "book", unattended=True, guarded=True)
        owner.end_turn("t1", "interrupted")  # held for a person: the lease is let go
    outputs = run_at_once([[sys.executable, "-c", _CLAIMER, store_target.url, "t1", f"machine-{n}"] for n in range(4)])
    said = [out.strip().split(" ", 1)[0] for _, out, _ in outputs]
    assert sorted(said) == ["lost", "lost", "lost", "won"], outputs
    assert store_target.rows("SELECT lease_token, status FROM turns") == [(2, "running")]


# -- PostgreSQL only ------------------------------------------------------------------------------


def test_a_postgres_journal_of_a_newer_schema_is_refused_naming_it_and_left_as_it_is(
        pg_store: StoreTarget) -> None:
    with Journal(pg_store.url) as journal:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
        journal.end_turn("t1", "done")
    pg_store.set_schema_version("journal", 6)
    before = pg_store.rows("SELECT * FROM turns")
    for readonly in (False, True):
        with pytest.raises(JournalError, match=r" of schema 6; this unstuck reads schemas up to 5") as caught:
            Journal(pg_store.url, readonly=readonly)
        assert pg_store.where in str(caught.value) and "unstuck:***@" in str(caught.value)
    assert pg_store.rows("SELECT * FROM turns") == before and before[0][0] == "t1"
    assert pg_store.schema_version("journal") == 6


def test_a_postgres_database_without_a_journal_is_not_read_as_one_and_nothing_is_made(
        pg_store: StoreTarget) -> None:
    with pytest.raises(JournalError, match=re.escape(f"no journal in {pg_store.where}")):
        Journal(pg_store.url, readonly=True)
    assert pg_store.tables() == set()


def test_a_hold_reason_with_undecodable_bytes_and_nul_is_kept_with_replacement_characters(
        store_target: StoreTarget) -> None:
    # resume holds an intent with its resolver's error, which may quote a file name that is not UTF-8
    reason = "resolver failed: " + b"/srv/caf\xe9".decode("utf-8", "surrogateescape") + " \x00"
    with Journal(store_target.url) as journal:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
        ref = journal.prepare_intent("t1", 0, "c1", "book", "{}")
        journal.hold([ref], reason)
        (intent,) = journal.intents("t1")
    assert intent.state is IntentState.HELD and intent.settled_by == "resolver failed: /srv/caf\ufffd \ufffd"


def test_a_store_location_that_is_a_file_is_a_journal_error_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file, not a folder")
    monkeypatch.setenv("UNSTUCK_STORE", str(taken))  # a folder of stores is expected there
    with pytest.raises(JournalError, match=rf"{taken}/journal.db: cannot make its folder {taken}"):
        Journal(None)


def test_an_intent_names_the_process_that_ran_it_and_a_version_3_journal_gains_the_columns(tmp_path: Path) -> None:
    from unstuck.processes.identity import host_identity, process_identity
    from unstuck.store.journal import Runner

    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
        journal.prepare_intent("t1", 0, "c1", "book", '{"order": 1}')
        (intent,) = journal.intents("t1")
    assert intent.runner == Runner(host_identity(), *process_identity())
    with sqlite3.connect(path) as db:  # the layout of version 3: intents without their runner
        for column in ("runner_host", "runner_pid", "runner_start"):
            db.execute(f"ALTER TABLE intents DROP COLUMN {column}")
        db.execute("PRAGMA user_version = 3")
    with Journal(path) as journal:
        assert journal.schema == 5
        (old,) = journal.intents("t1")
    assert old.runner is None and old.effect_ref == "t1:0"  # not known: a resolver's "absent" holds it
    assert (tmp_path / "j.db.schema3.bak").exists()
