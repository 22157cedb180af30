"""What the journal and the lesson store share: opening an SQLite file (read-only on
read-only media too), one write transaction, text SQLite will take, naming a file that is
not what was expected, and turning SQLite's own errors into the store's.

Both stores are SQLite files in WAL mode with a ``busy_timeout`` of 10 s, so several
processes may share one; each marks its files with its own ``PRAGMA application_id``.

No ``sqlite3.Error`` leaves a store's public method: :func:`store_errors` runs each of them
under :func:`translate_errors`, which raises the store's own error (a subclass of
:class:`unstuck.errors.UnstuckError`) naming the file and the operation, with the SQLite
error as its ``__cause__`` (a file damaged while open reads "database disk image is
malformed" from SQLite; the caller sees a ``JournalError`` or ``LessonStoreError``).
"""

from __future__ import annotations

import functools
import inspect
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from unstuck.text import valid_utf8

__all__ = ["STORE_KINDS", "clean_text", "connect", "describe", "store_errors", "translate_errors", "write"]

#: The ``application_id`` of each unstuck store, with how a message names it.
STORE_KINDS = {0x756E736A: "an unstuck journal", 0x756E736C: "an unstuck lesson store"}

_Store = TypeVar("_Store", bound=type)


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
        if db.in_transaction:  # SQLite may have rolled back already (a full disk, a corrupt page)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextmanager
def translate_errors(error: type[Exception], path: Path, operation: str) -> Iterator[None]:
    """Run the block; a ``sqlite3.Error`` raised in it becomes ``error`` (the store's own
    class), whose message names ``path`` and ``operation`` and SQLite's words, with the
    SQLite error as its ``__cause__``. Any other exception passes through unchanged.

    Raises:
        error: ``"{operation} on {path} failed: {SQLite error class}: {its message}"``.
    """
    try:
        yield
    except sqlite3.Error as exc:
        raise error(f"{operation} on {path} failed: {type(exc).__name__}: {exc}") from exc


def store_errors(error: type[Exception]) -> Callable[[_Store], _Store]:
    """A class decorator for a store: every public instance method of the class (a plain
    function without a leading underscore, defined in the class body; static and class
    methods touch no connection and are left alone) runs under :func:`translate_errors` with
    ``error``, the instance's ``path`` attribute and ``"Class.method"`` as the operation, so
    a method added later is covered too. Methods that return lazily (generators) cannot be
    covered by wrapping the call and are refused.

    Raises:
        TypeError: when a public method of the class is a generator function.
    """
    def decorate(cls: _Store) -> _Store:
        for name, method in list(vars(cls).items()):
            if name.startswith("_") or not inspect.isfunction(method):
                continue
            if inspect.isgeneratorfunction(method):
                raise TypeError(f"{cls.__qualname__}.{name} is a generator: its SQLite errors would escape "
                                "store_errors; return a list instead")
            setattr(cls, name, _translated(method, error, f"{cls.__qualname__}.{name}"))
        return cls
    return decorate


def _translated(method: Callable[..., Any], error: type[Exception], operation: str) -> Callable[..., Any]:
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with translate_errors(error, self.path, operation):
            return method(self, *args, **kwargs)
    return run


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
