"""The store engines (src/unstuck/store/engines.py): one SQL interface over an SQLite file and a
PostgreSQL database, run against real ones: a fresh file, or a fresh database on a throw-away
cluster (tests/pg_fixtures.py)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from conftest import run_at_once
from pg_fixtures import StoreTarget
from unstuck.core.situations import Kind, Situation
from unstuck.store.engines import SCHEMA_LOCK, PostgresEngine, SQLiteEngine, StoreEngine, Transaction, postgres_sql
from unstuck.store.journal import Journal, JournalError
from unstuck.store.lessons import LessonStore, LessonStoreError
from unstuck.store.sqlite import connect
from unstuck.store.urls import Engine, parse_store_url


@pytest.fixture
def engine(store_target: StoreTarget) -> Iterator[StoreEngine]:
    """The fresh store of :func:`pg_fixtures.store_target` as an engine, closed after."""
    opened: StoreEngine
    if store_target.path is not None:
        opened = SQLiteEngine(connect(store_target.path), str(store_target.path))
    else:
        opened = PostgresEngine(parse_store_url(store_target.url))
    try:
        yield opened
    finally:
        opened.close()


def _make_kv(engine: StoreEngine) -> None:
    with engine.transaction() as tx:
        tx.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")


def test_question_marks_become_psycopg_placeholders_and_nothing_else_changes() -> None:
    sql = "SELECT k FROM kv WHERE v = ? AND k IN (?, ?) ORDER BY k"
    assert postgres_sql(sql) == "SELECT k FROM kv WHERE v = %s AND k IN (%s, %s) ORDER BY k"
    assert postgres_sql("SELECT 1") == "SELECT 1"


def test_the_stores_sql_dialect_runs_alike_on_both_engines(engine: StoreEngine) -> None:
    _make_kv(engine)
    with engine.transaction() as tx:
        tx.executemany("INSERT INTO kv (k, v) VALUES (?, ?)", [("a", 1), ("b", 2), ("c", 3)])
        # ON CONFLICT ... DO UPDATE (SQLite 3.24, PostgreSQL 9.5) with RETURNING (SQLite 3.35)
        returned = tx.execute("INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = kv.v + excluded.v"
                              " RETURNING k, v", ("b", 40)).fetchone()
        assert tuple(returned) == ("b", 42)
        # CASE where SQLite's two-argument min/max has no PostgreSQL equivalent
        changed = tx.execute("UPDATE kv SET v = CASE WHEN v + 10 > 12 THEN 12 ELSE v + 10 END WHERE k <> ?", ("b",))
        assert changed.rowcount == 2
    assert engine.all("SELECT k, v FROM kv WHERE v >= ? ORDER BY k", (0,)) == [("a", 11), ("b", 42), ("c", 12)]
    assert engine.one("SELECT v FROM kv WHERE k = ?", ("b",)) == (42,)
    assert engine.one("SELECT v FROM kv WHERE k = ?", ("zz",)) is None


def test_a_transaction_that_raises_is_rolled_back_and_leaves_nothing(engine: StoreEngine) -> None:
    _make_kv(engine)

    def half_done(tx: Transaction) -> None:
        tx.execute("INSERT INTO kv (k, v) VALUES (?, ?)", ("a", 1))
        tx.execute("CREATE TABLE scratch (x INTEGER)")  # DDL is transactional on both engines
        raise RuntimeError("the caller failed half-way")

    for sync in (True, False):
        with pytest.raises(RuntimeError, match="half-way"), engine.transaction(sync=sync) as tx:
            half_done(tx)
        assert engine.all("SELECT k FROM kv") == []
    with engine.transaction() as tx:  # the engine (its connection, its pooled one) is usable again
        tx.execute("CREATE TABLE scratch (x INTEGER)")
        tx.execute("INSERT INTO kv (k, v) VALUES (?, ?)", ("b", 2))
    assert engine.all("SELECT k, v FROM kv") == [("b", 2)]


def test_now_sql_is_epoch_seconds_by_the_database_clock_and_moves_within_a_transaction(engine: StoreEngine) -> None:
    before = time.time()
    row = engine.one(f"SELECT {engine.now_sql}")
    after = time.time()
    assert row is not None and isinstance(row[0], float)
    # the same machine's clock: julianday('now') has millisecond precision
    assert before - 0.01 <= row[0] <= after + 0.01
    with engine.transaction() as tx:  # a lease compared late in a long transaction sees the time then
        first = tx.execute(f"SELECT {engine.now_sql}").fetchone()[0]
        time.sleep(0.05)
        second = tx.execute(f"SELECT {engine.now_sql}").fetchone()[0]
    assert second - first >= 0.04


def test_a_riding_sqlite_commit_sets_synchronous_normal_and_a_synced_one_full(tmp_path: Path) -> None:
    engine = SQLiteEngine(connect(tmp_path / "store.db"), str(tmp_path / "store.db"))
    try:
        for sync, level in [(False, 1), (True, 2), (False, 1)]:  # sqlite.org/pragma.html#pragma_synchronous
            with engine.transaction(sync=sync):
                assert engine.db.execute("PRAGMA synchronous").fetchone()[0] == level
    finally:
        engine.close()


def test_a_riding_postgres_commit_turns_synchronous_commit_off_for_itself_only(pg_store: StoreTarget) -> None:
    # the test cluster runs with synchronous_commit off; this database gets the server's usual default
    name = urlsplit(pg_store.url).path.lstrip("/")
    pg_store.execute(f'ALTER DATABASE "{name}" SET synchronous_commit TO on')
    engine = PostgresEngine(parse_store_url(pg_store.url), max_size=1)  # one connection: it is reused
    try:
        for sync, setting in [(False, "off"), (True, "on"), (False, "off"), (True, "on")]:
            with engine.transaction(sync=sync) as tx:
                assert tx.execute("SHOW synchronous_commit").fetchone()[0] == setting
        assert engine.one("SHOW synchronous_commit") == ("on",)
    finally:
        engine.close()


def test_a_read_only_postgres_engine_refuses_a_transaction_and_reads_read_only(pg_store: StoreTarget) -> None:
    engine = PostgresEngine(parse_store_url(pg_store.url), readonly=True)
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction, match=r"unstuck:\*\*\*@.* was opened read-only"), engine.transaction():
            pass
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            engine.one("CREATE TABLE sneaked (x INTEGER)")
        assert engine.one("SELECT ?::integer + ?::integer", (2, 3)) == (5,)
    finally:
        engine.close()
    assert pg_store.tables() == set()


_ENSURER = """
import sys
from unstuck.store.engines import PostgresEngine
from unstuck.store.urls import parse_store_url
engine = PostgresEngine(parse_store_url(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
print(engine.ensure_schema("journal", 1, ["CREATE TABLE turns (turn_id TEXT PRIMARY KEY)",
                                          "INSERT INTO turns VALUES ('made once')"], ["turns"]), flush=True)
engine.close()
"""


def test_ensure_schema_from_several_processes_at_once_makes_the_tables_exactly_once(pg_store: StoreTarget) -> None:
    outputs = run_at_once([[sys.executable, "-c", _ENSURER, pg_store.url]] * 4)
    assert [code for code, _, _ in outputs] == [0] * 4, outputs
    # the first made the store (found version 0); the others, waiting on the advisory lock, found it
    assert sorted(out.strip() for _, out, _ in outputs) == ["0", "1", "1", "1"]
    assert pg_store.rows("SELECT turn_id FROM turns") == [("made once",)]
    assert pg_store.rows("SELECT store, version FROM unstuck_schema") == [("journal", 1)]


def test_every_store_kinds_schema_work_waits_for_the_one_schema_lock(pg_store: StoreTarget) -> None:
    # both kinds make the shared unstuck_schema table; CREATE TABLE IF NOT EXISTS of one name in two
    # transactions at once is not serialised by PostgreSQL's catalog (the loser fails on pg_type's
    # unique index): the schema work of every kind must take one lock
    opened: dict[str, int] = {}

    def make(kind: str) -> None:
        engine = PostgresEngine(parse_store_url(pg_store.url))
        try:
            opened[kind] = engine.ensure_schema(kind, 1, [f"CREATE TABLE made_by_{kind} (x INTEGER)"],
                                                [f"made_by_{kind}"])
        finally:
            engine.close()

    with psycopg.connect(pg_store.url) as holder:  # another unstuck in the middle of its schema work
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        threads = [threading.Thread(target=make, args=(kind,)) for kind in ("journal", "lessons")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=1.0)
        assert all(thread.is_alive() for thread in threads) and opened == {}  # both wait, whatever their kind
        holder.commit()  # the lock goes with the transaction
    for thread in threads:
        thread.join(timeout=60)
    assert opened == {"journal": 0, "lessons": 0}
    assert sorted(pg_store.rows("SELECT store FROM unstuck_schema")) == [("journal",), ("lessons",)]


def test_ensure_schema_migrates_an_older_store_in_one_transaction_and_refuses_a_newer_one(
        pg_store: StoreTarget) -> None:
    def add_b(tx: Transaction) -> None:
        tx.execute("ALTER TABLE turns ADD COLUMN b INTEGER")

    def add_c_then_fail(tx: Transaction) -> None:
        tx.execute("ALTER TABLE turns ADD COLUMN c INTEGER")
        raise RuntimeError("migration 2 -> 3 failed")

    def columns() -> list[str]:
        return [r[0] for r in pg_store.rows("SELECT column_name FROM information_schema.columns WHERE table_name = ?"
                                            " ORDER BY ordinal_position", ("turns",))]

    engine = PostgresEngine(parse_store_url(pg_store.url))
    try:
        assert engine.ensure_schema("journal", 1, ["CREATE TABLE turns (a INTEGER)"], ["turns"]) == 0
        assert engine.schema_version("journal") == 1 and engine.schema_version("lessons") is None
        assert engine.ensure_schema("journal", 2, [], ["turns"], [add_b]) == 1
        assert engine.schema_version("journal") == 2 and columns() == ["a", "b"]
        assert engine.ensure_schema("journal", 2, [], ["turns"], [add_b]) == 2  # nothing to do
        with pytest.raises(RuntimeError, match="2 -> 3"):
            engine.ensure_schema("journal", 3, [], ["turns"], [add_b, add_c_then_fail])
        assert engine.schema_version("journal") == 2 and columns() == ["a", "b"]  # rolled back whole
        with pytest.raises(ValueError, match=r"journal of schema 2; this unstuck reads schemas up to 1; it was left"):
            engine.ensure_schema("journal", 1, [], ["turns"])
    finally:
        engine.close()


def test_a_journal_and_a_lesson_store_share_one_database_each_with_its_schema_row(
        pg_store: StoreTarget) -> None:
    with Journal(pg_store.url) as journal, LessonStore(pg_store.url) as lessons:
        journal.begin_turn("t1", "log in", unattended=True, guarded=True)
        lessons.record(Situation(Kind.AUTH, "gh", unblock="gh auth login"), tool="check_cli_setup", fingerprint="",
                       content="gh was logged out", source="escalated")
        journal.end_turn("t1", "blocked")
    assert pg_store.rows("SELECT store, version FROM unstuck_schema ORDER BY store") == [("journal", 5), ("lessons", 5)]
    with Journal(pg_store.url, readonly=True) as journal, LessonStore(pg_store.url, readonly=True) as lessons:
        assert [t.status for t in journal.turns()] == ["blocked"] and len(lessons.all()) == 1


def test_a_postgres_error_leaves_a_store_method_as_the_stores_error_naming_it_with_the_password_masked(
        pg_store: StoreTarget) -> None:
    password = urlsplit(pg_store.url).password
    assert password
    with Journal(pg_store.url) as journal, LessonStore(pg_store.url) as lessons:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
        pg_store.execute("DROP TABLE validations")
        pg_store.execute("DROP TABLE knowledge")
        with pytest.raises(JournalError) as read:
            journal.validations("t1")
        with pytest.raises(JournalError) as wrote:
            journal.record_validation("t1", "ledger", "passed", "ok")
        with pytest.raises(LessonStoreError) as listed:
            lessons.all()
        assert lessons.failures == [str(listed.value)]
    for caught, operation in [(read, "Journal.validations"), (wrote, "Journal.record_validation"),
                              (listed, "LessonStore.all")]:
        message = str(caught.value)
        assert message.startswith(f"{operation} on {pg_store.where} failed: UndefinedTable: "), message
        assert "unstuck:***@127.0.0.1:" in message and password not in message
        assert isinstance(caught.value.__cause__, psycopg.errors.UndefinedTable)


def test_both_engines_name_their_kind_and_store(engine: StoreEngine, store_target: StoreTarget) -> None:
    assert engine.kind is store_target.engine
    assert engine.where == (str(store_target.path) if store_target.engine is Engine.SQLITE
                            else parse_store_url(store_target.url).shown)
    assert "***" in engine.where or store_target.engine is Engine.SQLITE


def test_another_programs_index_of_our_name_or_its_own_unstuck_schema_is_refused_untouched(
        pg_store: StoreTarget) -> None:
    pg_store.execute("CREATE TABLE orders (started_at INTEGER)")
    pg_store.execute("CREATE INDEX turns_by_start ON orders (started_at)")  # a name the journal's schema uses
    with pytest.raises(JournalError, match=r"holds turns_by_start but no unstuck journal schema; it is another "
                                           r"program's database and was left untouched"):
        Journal(pg_store.url)
    assert pg_store.tables() == {"orders"}
    pg_store.execute("CREATE TABLE unstuck_schema (name TEXT, value TEXT)")
    with pytest.raises(LessonStoreError, match=r"a table unstuck_schema that is not unstuck's \(columns name, "
                                               r"value\); it is another program's database"):
        LessonStore(pg_store.url)
    assert pg_store.tables() == {"orders", "unstuck_schema"}
