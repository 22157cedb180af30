"""The SQLite helpers the journal and the lesson store share."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from unstuck.journal import Journal
from unstuck.lessons import LessonStore, LessonStoreError
from unstuck.sqlite_store import (
    FileIdentity,
    Migration,
    backup_path,
    clean_text,
    connect,
    describe,
    migrate,
    quick_check,
    write,
)


def test_a_failed_write_rolls_back_and_a_good_one_commits(tmp_path: Path) -> None:
    db = connect(tmp_path / "x.db")
    db.execute("CREATE TABLE t (x)")
    with pytest.raises(ZeroDivisionError), write(db):
        db.execute("INSERT INTO t VALUES (1)")
        raise ZeroDivisionError
    with write(db):
        db.execute("INSERT INTO t VALUES (2)")
    assert [r[0] for r in connect(tmp_path / "x.db", readonly=True).execute("SELECT x FROM t")] == [2]


def test_lone_surrogates_become_replacement_characters_and_the_rest_is_kept() -> None:
    assert clean_text("caf\udce9 ok") == "caf\ufffd ok"
    assert clean_text("café ok") == "café ok"


def test_each_store_names_the_other_when_handed_it(tmp_path: Path) -> None:
    Journal(tmp_path / "j.db").close()
    LessonStore(tmp_path / "l.db").close()
    with pytest.raises(LessonStoreError, match="is an unstuck journal, not an unstuck lesson store"):
        LessonStore(tmp_path / "j.db")
    with sqlite3.connect(tmp_path / "l.db") as db:
        assert describe(db, db.execute("PRAGMA application_id").fetchone()[0]) == "an unstuck lesson store"
    empty = connect(tmp_path / "empty.db")
    assert describe(empty, 0) == "an empty database"


def damage_page(path: Path, table: str) -> None:
    """Write garbage over the root page of ``table`` in a closed SQLite file (page numbers
    from ``sqlite_master.rootpage``, counted from 1; the page size from header bytes 16-17:
    sqlite.org, "Database File Format", 1.3). Page 1, the schema, stays readable."""
    with sqlite3.connect(path) as db:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    db.close()
    raw = path.read_bytes()
    page_size = int.from_bytes(raw[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    assert root > 1 and len(raw) >= root * page_size
    with path.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)


def test_quick_check_names_a_damaged_page_and_passes_a_sound_or_new_file(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    assert quick_check(path) == ()  # missing: nothing to check
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x TEXT)")
        db.executemany("INSERT INTO t VALUES (?)", [("row " * 200,) for _ in range(200)])
    db.close()
    assert quick_check(path) == ()
    damage_page(path, "t")
    problems = quick_check(path)
    assert problems and all(isinstance(p, str) and p for p in problems)
    (tmp_path / "text.db").write_text("not a database at all, " * 100)
    with pytest.raises(sqlite3.DatabaseError):
        quick_check(tmp_path / "text.db")


def test_a_file_identity_tells_a_deleted_or_replaced_path_from_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    path.write_bytes(b"one")
    identity = FileIdentity.of(path)
    path.write_bytes(b"one, rewritten in place")  # same inode: still the same file
    assert identity.change() is None
    other = tmp_path / "other.db"
    other.write_bytes(b"two")  # made while the first exists: another inode
    os.replace(other, path)  # what `mv other x.db` does (rename(2))
    assert identity.change() == "now names another file"
    path.unlink()
    assert identity.change() == "was deleted"


def test_a_check_before_commit_rolls_the_transaction_back(tmp_path: Path) -> None:
    db = connect(tmp_path / "x.db")
    db.execute("CREATE TABLE t (x)")

    def refuse() -> None:
        raise RuntimeError("the file moved")

    with pytest.raises(RuntimeError, match="the file moved"), write(db, before_commit=refuse):
        db.execute("INSERT INTO t VALUES (1)")
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 0 and not db.in_transaction


def _versioned(path: Path, version: int) -> sqlite3.Connection:
    db = connect(path)
    with write(db):
        db.execute("CREATE TABLE t (x TEXT)")
        db.execute("INSERT INTO t VALUES ('v1 row')")
        db.execute(f"PRAGMA user_version = {version}")
    return db


def test_migrate_runs_each_missing_step_in_order_after_a_backup_of_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = _versioned(path, 1)
    ran: list[str] = []

    def step(name: str) -> Migration:
        def run(conn: sqlite3.Connection) -> None:
            ran.append(name)
            conn.execute("INSERT INTO t VALUES (?)", (name,))
        return run

    steps = (step("to 2"), step("to 3"))
    assert migrate(db, path, steps, transaction=lambda: write(db)) == 1
    assert ran == ["to 2", "to 3"]
    assert db.execute("PRAGMA user_version").fetchone()[0] == 3
    assert migrate(db, path, steps, transaction=lambda: write(db)) is None and ran == ["to 2", "to 3"]
    db.close()
    assert backup_path(path, 1) == tmp_path / "s.db.schema1.bak"
    with sqlite3.connect(backup_path(path, 1)) as old:
        assert old.execute("PRAGMA user_version").fetchone()[0] == 1
        assert old.execute("SELECT x FROM t").fetchall() == [("v1 row",)]


def test_a_failing_migration_step_leaves_the_file_at_its_old_version_and_keeps_the_backup(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = _versioned(path, 1)

    def good(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES ('migrated')")

    def bad(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        migrate(db, path, (good, bad), transaction=lambda: write(db))
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert db.execute("SELECT x FROM t").fetchall() == [("v1 row",)]
    assert backup_path(path, 1).is_file() and not [p.name for p in tmp_path.iterdir() if p.suffix == ".part"]
    db.close()


def test_migrate_refuses_a_version_it_does_not_know_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = _versioned(path, 5)
    with pytest.raises(ValueError, match=r"schema 5 cannot be migrated \(this code knows 1 to 2\)"):
        migrate(db, path, (lambda conn: None,), transaction=lambda: write(db))
    db.close()
    assert [p.name for p in tmp_path.iterdir() if ".bak" in p.name] == []


def test_an_earlier_backup_is_never_overwritten_the_new_copy_takes_the_next_name(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = _versioned(path, 1)
    precious = backup_path(path, 1)
    precious.write_bytes(b"PRECIOUS OLD BACKUP")
    assert migrate(db, path, (lambda conn: None,), transaction=lambda: write(db)) == 1
    db.close()
    assert precious.read_bytes() == b"PRECIOUS OLD BACKUP"
    second = tmp_path / "s.db.schema1.bak.2"
    with sqlite3.connect(second) as old:
        assert old.execute("PRAGMA user_version").fetchone()[0] == 1
    assert not list(tmp_path.glob("*.part"))
