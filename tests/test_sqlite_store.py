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


# -- backups keep no secret (issue 23) ---------------------------------------------------------------

#: A GitHub personal access token's documented shape (``ghp_`` and 36 of [A-Za-z0-9]; GitHub docs,
#: "About authentication to GitHub"), and its 36 characters: one FTS5 term.
_TOKEN_TERM = "Q1w2E3r4T5" * 3 + "y6U7i8"
_TOKEN = "ghp_" + _TOKEN_TERM


def _holding_a_token(path: Path) -> sqlite3.Connection:
    """A schema-1 database of no store: a plain table, a generated column, an FTS5 table keeping
    its own copy of the text, every text holding the token, written with ``secure_delete`` off."""
    db = connect(path)
    db.execute("PRAGMA secure_delete = OFF")
    with write(db):
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, size INTEGER GENERATED ALWAYS AS "
                   "(length(body)) STORED, raw BLOB)")
        db.execute("CREATE VIRTUAL TABLE notes_index USING fts5(body)")
        db.execute("INSERT INTO notes (body, raw) VALUES (?, x'00ff')", (f"GH_TOKEN={_TOKEN} was refused",))
        db.execute("INSERT INTO notes_index (body) VALUES (?)", (f"export GH_TOKEN={_TOKEN}",))
        db.execute("PRAGMA user_version = 1")
    return db


def test_the_backup_a_migration_keeps_holds_every_row_redacted_and_no_byte_of_the_secret(tmp_path: Path) -> None:
    from unstuck.redact import redact

    path = tmp_path / "s.db"
    db = _holding_a_token(path)
    assert migrate(db, path, (lambda conn: None,), transaction=lambda: write(db)) == 1
    db.close()
    backup = backup_path(path, 1)
    assert _TOKEN_TERM.encode() not in backup.read_bytes()
    with sqlite3.connect(backup) as old:
        kept = redact(f"GH_TOKEN={_TOKEN} was refused")
        assert old.execute("SELECT id, body, size, raw FROM notes").fetchall() == [(1, kept, len(kept), b"\x00\xff")]
        assert old.execute("SELECT body FROM notes_index").fetchall() == [(redact(f"export GH_TOKEN={_TOKEN}"),)]
        assert old.execute("SELECT count(*) FROM notes_index WHERE notes_index MATCH ?",
                           (f'"{_TOKEN_TERM}"',)).fetchone()[0] == 0
        old.execute("INSERT INTO notes_index (notes_index) VALUES ('integrity-check')")  # raises when off
        assert old.execute("PRAGMA user_version").fetchone()[0] == 1


def test_a_backup_follows_no_symbolic_link_of_its_name_and_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("not the store's", encoding="utf-8")
    backup_path(path, 1).symlink_to(victim)
    (tmp_path / "s.db.schema1.bak.2").symlink_to(tmp_path / "dangling")
    db = _versioned(path, 1)
    umask = os.umask(0)  # the copy's mode is its own, not what the umask leaves
    try:
        assert migrate(db, path, (lambda conn: None,), transaction=lambda: write(db)) == 1
    finally:
        os.umask(umask)
        db.close()
    assert victim.read_text(encoding="utf-8") == "not the store's" and not (tmp_path / "dangling").exists()
    assert backup_path(path, 1).is_symlink() and (tmp_path / "s.db.schema1.bak.2").is_symlink()
    third = tmp_path / "s.db.schema1.bak.3"
    assert not third.is_symlink() and third.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(third) as old:
        assert old.execute("SELECT x FROM t").fetchall() == [("v1 row",)]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_a_migrated_file_and_its_wal_keep_no_byte_of_a_value_a_step_redacted_or_a_row_deleted_before(
        tmp_path: Path) -> None:
    """The store's own file: a step rewrites a value, old code had deleted a row; the migrated
    file is rewritten whole and its WAL emptied while another connection keeps it open."""
    path = tmp_path / "s.db"
    db = _holding_a_token(path)
    db.execute("PRAGMA journal_mode = WAL")
    with write(db):
        db.execute("INSERT INTO notes (body) VALUES (?)", (f"deleted later: {_TOKEN} " * 50,))
        db.execute("DELETE FROM notes WHERE id = 2")
    other = connect(path)
    other.execute("SELECT count(*) FROM notes").fetchone()

    def redact_step(conn: sqlite3.Connection) -> None:
        from unstuck.redact import redact_document

        for key, body in conn.execute("SELECT id, body FROM notes").fetchall():
            conn.execute("UPDATE notes SET body = ? WHERE id = ?", (redact_document(body), key))
        for key, body in conn.execute("SELECT rowid, body FROM notes_index").fetchall():
            conn.execute("UPDATE notes_index SET body = ? WHERE rowid = ?", (redact_document(body), key))

    try:
        assert migrate(db, path, (redact_step,), transaction=lambda: write(db)) == 1
        found = {p.name: _TOKEN_TERM.encode() in p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        assert {"s.db", "s.db-wal", "s.db-shm", "s.db.schema1.bak"} <= found.keys()
        assert not any(found.values()), found
        assert db.execute("SELECT count(*) FROM notes_index WHERE notes_index MATCH 'export'").fetchone()[0] == 1
    finally:
        other.close()
        db.close()
