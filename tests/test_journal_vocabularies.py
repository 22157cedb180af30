"""The journal's closed vocabularies (issue 24, item 4): every word a journal stores for a turn's
status, a step's decision, an intent's state and ``settled_by``, a recorded decision and a
verdict is written from its enum and read back as that enum, stored as the same string earlier
releases stored; a word outside its vocabulary (written with raw SQL, as another program or a
damaged copy could) is an error naming the store, the table and the row, on every read path,
and the row is left as it is.

Round trips run on SQLite and on PostgreSQL (tests/pg_fixtures.py; the PostgreSQL cases are
``slow``); the command line (``unstuck journal list`` / ``show``) runs on an SQLite file."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pg_fixtures import StoreTarget
from unstuck.core.tools import ToolCall
from unstuck.decide.outcome import StepRecord, TurnStatus, Verdict
from unstuck.decide.policy import Action
from unstuck.store.journal import IntentState, Journal, JournalDecision, JournalError, SettledBy
from unstuck.store.urls import Engine

#: Both engines; the PostgreSQL case starts a server, so it is slow.
BOTH_ENGINES = pytest.mark.parametrize(
    "store_target", [Engine.SQLITE.value, pytest.param(Engine.POSTGRESQL.value, marks=pytest.mark.slow)],
    indirect=True)

#: The strings earlier releases stored (DESIGN.md's turn statuses, the journal's schema): a
#: journal written before the enums must read back, and one written now must read in them.
STORED_STATUS = {TurnStatus.DONE: "done", TurnStatus.BLOCKED: "blocked", TurnStatus.FAILED: "failed",
                 TurnStatus.INTERRUPTED: "interrupted", TurnStatus.RUNNING: "running"}
STORED_ACTION = {Action.DISPATCH: "dispatch", Action.REFUSE: "refuse", Action.CONTINUE: "continue",
                 Action.RETRY: "retry", Action.ESCALATE: "escalate"}
STORED_DECISION = {JournalDecision.CLOSE: "close", JournalDecision.SKIP: "skip", JournalDecision.KNOWN: "known"}
STORED_VERDICT = {Verdict.PASSED: "passed", Verdict.FAILED: "failed", Verdict.NOT_REQUIRED: "not required"}
STORED_SETTLED_BY = {SettledBy.CALL: "call", SettledBy.RESOLVER: "resolver", SettledBy.USER: "user",
                     SettledBy.USER_ABSENT: "user:absent"}


def test_every_member_of_each_vocabulary_has_its_stored_string() -> None:
    """No member is missing from the tables above (a new one needs its test), none added."""
    for vocabulary, stored in ((TurnStatus, STORED_STATUS), (Action, STORED_ACTION),
                               (JournalDecision, STORED_DECISION), (Verdict, STORED_VERDICT),
                               (SettledBy, STORED_SETTLED_BY)):
        assert {member: member.value for member in vocabulary} == stored


def step(index: int, decision: Action = Action.CONTINUE) -> StepRecord:
    return StepRecord(index, ToolCall(f"c{index}", "book", "{}"), "ledger", dispatched=True, probe=False, ok=True,
                      situation=None, started_s=float(index), duration_s=0.5, decision=decision)


def fill(journal: Journal) -> None:
    """Every vocabulary's every member written through the journal's own methods."""
    for status in TurnStatus:
        turn = f"s-{status.name}"
        journal.begin_turn(turn, "t", unattended=True, guarded=True)
        if status is not TurnStatus.RUNNING:
            journal.end_turn(turn, status)
    journal.begin_turn("t1", "book", unattended=True, guarded=True)
    journal.checkpoint("t1", steps=[step(i, action) for i, action in enumerate(Action)], messages=[], first_seq=0)
    for i, decision in enumerate(JournalDecision):
        journal.record_decision("t1", i, decision, f"subject-{i}")
    for verdict in Verdict:
        journal.record_validation("t1", verdict.name, verdict, "")
    by_call = journal.prepare_intent("t1", 0, "c0", "book", "{}")
    journal.record_receipt(by_call, "{}")
    by_resolver = journal.prepare_intent("t1", 1, "c1", "book", "{}")
    journal.record_receipt(by_resolver, "{}", settled_by=SettledBy.RESOLVER)
    held = journal.prepare_intent("t1", 2, "c2", "book", "{}")
    journal.hold([held], "no resolver for book")
    journal.prepare_intent("t1", 3, "c3", "book", "{}")
    for i in (4, 5):
        journal.prepare_intent("t1", i, f"c{i}", "book", "{}")
    journal.settle("t1", committed=["t1:4"], absent=["t1:5"])  # a person's word: lets the lease go


def read_everything(journal: Journal) -> dict[str, Any]:
    return {
        "statuses": {t.turn_id: t.status for t in journal.turns()},
        "actions": [s.decision for s in journal.steps("t1")],
        "decisions": journal.decisions("t1"),
        "verdicts": [(name, verdict) for name, verdict, _ in journal.validations("t1")],
        "intents": [(i.effect_ref, i.state, i.settler, i.settled_by) for i in journal.intents("t1")],
    }


@BOTH_ENGINES
def test_each_vocabulary_round_trips_as_its_enum_and_is_stored_as_the_same_string(
        store_target: StoreTarget) -> None:
    with Journal(store_target.url) as journal:
        fill(journal)
    expected_intents = [
        ("t1:0", IntentState.COMMITTED, SettledBy.CALL, "call"),
        ("t1:1", IntentState.COMMITTED, SettledBy.RESOLVER, "resolver"),
        ("t1:2", IntentState.HELD, None, "no resolver for book"),  # a held intent keeps why, not who
        ("t1:3", IntentState.PREPARED, None, None),
        ("t1:4", IntentState.COMMITTED, SettledBy.USER, "user"),
        ("t1:5", IntentState.PREPARED, SettledBy.USER_ABSENT, "user:absent"),
    ]
    for readonly in (False, True):
        with Journal(store_target.url, readonly=readonly) as journal:
            seen = read_everything(journal)
        for status in TurnStatus:
            assert seen["statuses"][f"s-{status.name}"] is status
        assert seen["actions"] == list(Action) and all(type(a) is Action for a in seen["actions"])
        assert seen["decisions"] == [(i, d, f"subject-{i}") for i, d in enumerate(JournalDecision)]
        assert all(type(action) is JournalDecision for _, action, _ in seen["decisions"])
        assert seen["verdicts"] == [(v.name, v) for v in Verdict] and all(
            type(v) is Verdict for _, v in seen["verdicts"])
        assert seen["intents"] == expected_intents
    # stored as the plain strings earlier releases wrote and read
    assert dict(store_target.rows("SELECT turn_id, status FROM turns WHERE turn_id LIKE ?", ("s-%",))) == {
        f"s-{status.name}": text for status, text in STORED_STATUS.items()}
    assert [r[0] for r in store_target.rows("SELECT decision FROM steps ORDER BY idx")] == list(
        STORED_ACTION.values())
    assert [r[0] for r in store_target.rows("SELECT action FROM decisions ORDER BY rowid")] == list(
        STORED_DECISION.values())
    assert [r[0] for r in store_target.rows("SELECT verdict FROM validations ORDER BY rowid")] == list(
        STORED_VERDICT.values())
    assert [r[0] for r in store_target.rows("SELECT settled_by FROM intents WHERE state != 'held' AND settled_by"
                                            " IS NOT NULL ORDER BY step")] == ["call", "resolver", "user",
                                                                               "user:absent"]


def test_a_word_outside_its_vocabulary_is_refused_on_write_and_nothing_is_written(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as journal:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
        ref = journal.prepare_intent("t1", 0, "c0", "book", "{}")
        for write in (lambda: journal.record_decision("t1", 0, "reopen", "gh"),  # type: ignore[arg-type]
                      lambda: journal.record_validation("t1", "v", "ok", ""),  # type: ignore[arg-type]
                      lambda: journal.record_receipt(ref, "{}", settled_by="robot"),  # type: ignore[arg-type]
                      lambda: journal.end_turn("t1", "finished"),  # type: ignore[arg-type]
                      lambda: journal.end_turn("t1", TurnStatus.RUNNING)):
            with pytest.raises(ValueError):
                write()
        assert journal.decisions("t1") == [] and journal.validations("t1") == []
        assert journal.turn("t1").status is TurnStatus.RUNNING
        assert journal.intents("t1")[0].state is IntentState.PREPARED


# -- an unknown word read back: an error naming the store, the table and the row -----------------


def one_turn(journal: Journal) -> None:
    journal.begin_turn("t1", "book", unattended=True, guarded=True)
    journal.checkpoint("t1", steps=[step(0)], messages=[], first_seq=0)
    ref = journal.prepare_intent("t1", 0, "c0", "book", "{}")
    journal.record_receipt(ref, "{}")
    journal.record_decision("t1", 0, JournalDecision.CLOSE, "ledger")
    journal.record_validation("t1", "booked", Verdict.PASSED, "")
    journal.end_turn("t1", TurnStatus.DONE)


#: (table, column, the unknown word, the row's key column(s) as the message names them, readers)
UNKNOWN: list[tuple[str, str, str, Callable[[StoreTarget], str], list[Callable[[Journal], object]]]] = [
    ("turns", "status", "paused", lambda s: "turn_id='t1'", [lambda j: j.turns(), lambda j: j.turn("t1")]),
    ("steps", "decision", "wait", lambda s: "turn_id='t1', idx=0", [lambda j: j.steps("t1")]),
    ("intents", "state", "maybe", lambda s: "effect_ref='t1:0'", [lambda j: j.intents("t1")]),
    ("intents", "settled_by", "robot", lambda s: "effect_ref='t1:0'", [lambda j: j.intents("t1")]),
    ("decisions", "action", "dismiss", lambda s: f"rowid={s.rows('SELECT rowid FROM decisions')[0][0]}",
     [lambda j: j.decisions("t1")]),
    ("validations", "verdict", "skipped", lambda s: f"rowid={s.rows('SELECT rowid FROM validations')[0][0]}",
     [lambda j: j.validations("t1")]),
]


def snapshot(store: StoreTarget) -> dict[str, list[tuple[Any, ...]]]:
    return {table: sorted(store.rows(f"SELECT * FROM {table}"), key=repr)
            for table in ("turns", "steps", "intents", "decisions", "validations", "messages")}


@BOTH_ENGINES
@pytest.mark.parametrize(("table", "column", "word", "row", "readers"), UNKNOWN,
                         ids=[f"{t}.{c}" for t, c, *_ in UNKNOWN])
def test_an_unknown_word_read_back_names_the_store_the_table_and_the_row_and_is_left_as_it_is(
        store_target: StoreTarget, table: str, column: str, word: str, row: Callable[[StoreTarget], str],
        readers: list[Callable[[Journal], object]]) -> None:
    with Journal(store_target.url) as journal:
        one_turn(journal)
    store_target.execute(f"UPDATE {table} SET {column} = ?", (word,))
    before = snapshot(store_target)
    expected = (f"{store_target.where}: table {table}, row {row(store_target)}: {column} {word!r} is not one of")
    for readonly in (False, True):
        with Journal(store_target.url, readonly=readonly) as journal:
            for read in readers:
                with pytest.raises(JournalError, match=re.escape(expected)):
                    read(journal)
    assert snapshot(store_target) == before


# -- the command line: journal list and show ------------------------------------------------------


def unstuck(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "unstuck", *args], capture_output=True, text=True, timeout=120,
                          env=env, check=False)


def written(tmp_path: Path, sql: str) -> Path:
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        one_turn(journal)
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(sql)
    finally:
        db.close()
    return path


@pytest.mark.parametrize(("command", "sql", "named"), [
    (("journal", "list"), "UPDATE turns SET status = 'paused'", "table turns, row turn_id='t1': status 'paused'"),
    (("journal", "list", "--json"), "UPDATE intents SET state = 'maybe'",
     "table intents, row effect_ref='t1:0': state 'maybe'"),
    (("journal", "show", "t1"), "UPDATE turns SET status = 'paused'", "table turns, row turn_id='t1': status"),
    (("journal", "show", "t1"), "UPDATE steps SET decision = 'wait'", "table steps, row turn_id='t1', idx=0"),
    (("journal", "show", "t1"), "UPDATE intents SET settled_by = 'robot'",
     "table intents, row effect_ref='t1:0': settled_by 'robot'"),
    (("journal", "show", "t1", "--json"), "UPDATE validations SET verdict = 'skipped'",
     "table validations, row rowid=1: verdict 'skipped'"),
], ids=["list-status", "list-intent-state", "show-status", "show-step-decision", "show-settled-by",
        "show-verdict"])
def test_journal_list_and_show_fail_naming_the_file_table_and_row_of_an_unknown_word(
        tmp_path: Path, command: tuple[str, ...], sql: str, named: str) -> None:
    path = written(tmp_path, sql)
    before = path.read_bytes()
    proc = unstuck(*command, "--journal", str(path))
    said = proc.stderr.replace("\n", "")
    assert proc.returncode == 2 and str(path) in said and named in said, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout and proc.stdout == ""
    assert path.read_bytes() == before
