"""What the journal and the lesson store share: opening an SQLite file (read-only on
read-only media too), one write transaction, text SQLite will take, and naming a file that
is not what was expected.

Both stores are SQLite files in WAL mode with a ``busy_timeout`` of 10 s, so several
processes may share one; each marks its files with its own ``PRAGMA application_id``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from unstuck.text import valid_utf8

__all__ = ["STORE_KINDS", "clean_text", "connect", "describe", "write"]

#: The ``application_id`` of each unstuck store, with how a message names it.
STORE_KINDS = {0x756E736A: "an unstuck journal", 0x756E736C: "an unstuck lesson store"}


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode (transactions are explicit: :func:`write`).

    Read-only opens use ``mode=ro``, falling back to ``immutable=1`` on read-only media,
    where SQLite cannot make the WAL's ``-shm`` file.

    Raises:
        sqlite3.DatabaseError: when the file cannot be opened as SQLite.
    """
    if not readonly:
        db = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    else:
        uri = path.resolve().as_uri()
        try:
            db = sqlite3.connect(f"{uri}?mode=ro", timeout=10.0, isolation_level=None, check_same_thread=False,
                                 uri=True)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            db = sqlite3.connect(f"{uri}?mode=ro&immutable=1", timeout=10.0, isolation_level=None,
                                 check_same_thread=False, uri=True)
    db.execute("PRAGMA busy_timeout = 10000")
    return db


@contextmanager
def write(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (``BEGIN IMMEDIATE``: the write lock is taken at once), rolled
    back on any exception, committed otherwise."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def clean_text(text: str) -> str:
    """``text`` as valid UTF-8 for SQLite: lone surrogates (undecodable bytes a tool passed
    on as ``surrogateescape``) become U+FFFD instead of failing the write
    (:func:`unstuck.text.valid_utf8`)."""
    return valid_utf8(text)


def describe(db: sqlite3.Connection, app_id: int) -> str:
    """What a database that is not the expected store is, for an error message: empty,
    another unstuck store, or another program's database."""
    empty = (db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
             and db.execute("PRAGMA user_version").fetchone()[0] == 0)
    if empty:
        return "an empty database"
    return STORE_KINDS.get(app_id, f"another program's database (application_id {app_id})")
