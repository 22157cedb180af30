"""The SQLite helpers the journal and the lesson store share."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from unstuck.journal import Journal
from unstuck.lessons import LessonStore, LessonStoreError
from unstuck.sqlite_store import clean_text, connect, describe, write


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
