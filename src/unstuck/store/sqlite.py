"""What the journal and the lesson store share: opening an SQLite file (read-only on
read-only media too), one write transaction, text SQLite will take, naming a file that is
not what was expected, and turning SQLite's own errors into the store's.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Both stores are SQLite files in WAL mode with a ``busy_timeout`` of 10 s, so several
processes may share one; each marks its files with its own ``PRAGMA application_id``.

No ``sqlite3.Error`` leaves a store's public method: :func:`store_errors` runs each of them
under :func:`translate_errors`, which raises the store's own error (a subclass of
:class:`unstuck.core.errors.UnstuckError`) naming the file and the operation, with the SQLite
error as its ``__cause__`` (a file damaged while open reads "database disk image is
malformed" from SQLite; the caller sees a ``JournalError`` or ``LessonStoreError``).
An instance with a ``failures`` list also keeps each such error's message there, for a
caller that must report what went wrong after the fact (the CLI, after a turn whose lesson
keeper swallowed a store error).

Integrity (issue 12): a store runs :func:`quick_check` on its file *before* it writes
anything, on a separate read-only connection (which, closing, checkpoints nothing into the
file), and refuses a damaged file. ``PRAGMA quick_check`` reads every page: measured at about
40 ms for a 64 MB journal with a warm page cache (0.6 ms per MB; cold, it costs a read of the
file), so it runs at every open. A store also notes the device and inode its path named when
it opened (:class:`FileIdentity`) and checks, before each commit, that the path still names
that file: a store deleted or replaced while open is reported, never written into a file
nobody will read again.

Schema versions (issue 12): each store keeps its layout's version in ``PRAGMA user_version``
and lists its migrations as an ordered tuple of steps, step ``i`` (from 0) turning version
``i + 1`` into ``i + 2``. :func:`migrate` keeps a copy of an older file first
(``<name>.schema<N>.bak``, :func:`backup_path`, made with SQLite's online backup API, every
text in it redacted as the store boundary writes text now, mode 0600, written where no symbolic
link can be followed: :func:`back_up`, :func:`kept_text`) and then runs every step it needs in
one write transaction: a failed step leaves the file as it was. A migrated file is rewritten
whole and its WAL emptied, so neither the copy nor the store nor its ``-wal`` keeps a byte of a
secret the migration redacts (issue 23). A layout change is one function appended to a store's
tuple.
"""

from __future__ import annotations

import functools
import inspect
import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from unstuck.core.redact import redact_document
from unstuck.core.text import valid_utf8

__all__ = [
    "STORE_KINDS",
    "FileIdentity",
    "Migration",
    "back_up",
    "backup_path",
    "clean_text",
    "connect",
    "describe",
    "engine_error",
    "kept_text",
    "migrate",
    "open_failure",
    "quick_check",
    "rebuild_full_text",
    "redact_copy",
    "store_errors",
    "translate_errors",
    "write",
]

#: The ``application_id`` of each unstuck store, with how a message names it.
STORE_KINDS = {0x756E736A: "an unstuck journal", 0x756E736C: "an unstuck lesson store"}

_Store = TypeVar("_Store", bound=type)
#: A value SQLite stores (sqlite.org, "Datatypes In SQLite": NULL, INTEGER, REAL, TEXT, BLOB).
_SQLValue: TypeAlias = "str | bytes | int | float | None"


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
def write(db: sqlite3.Connection, *, before_commit: Callable[[], None] | None = None
          ) -> Iterator[sqlite3.Connection]:
    """One write transaction (``BEGIN IMMEDIATE``: the write lock is taken at once), rolled
    back on any exception, committed otherwise. ``before_commit`` runs last inside the
    transaction (a store checks there that its path still names its file); what it raises
    rolls the transaction back and propagates."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        if before_commit is not None:
            before_commit()
    except BaseException:
        if db.in_transaction:  # SQLite may have rolled back already (a full disk, a corrupt page)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """The file a path named when a store opened it: ``st_dev`` and ``st_ino`` (stat(2)),
    taken right after SQLite opened the path, so they are those of the open descriptor."""

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        """The identity of the file ``path`` names now.

        Raises:
            OSError: when ``path`` cannot be stat'ed.
        """
        st = os.stat(path)
        return cls(path, st.st_dev, st.st_ino)

    def change(self) -> str | None:
        """How the path changed since (``"was deleted"``, ``"now names another file"``), or
        ``None`` when it still names the same file."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "was deleted"
        except OSError as exc:
            return f"can no longer be checked ({exc.strerror or exc})"
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return "now names another file"
        return None

    def require_unchanged(self, error: type[Exception], lost: str) -> None:
        """Raise ``error`` naming the path when :meth:`change` finds it deleted or replaced;
        ``lost`` says what that costs (checked before each commit of a store)."""
        change = self.change()
        if change is not None:
            raise error(f"{self.path} was replaced during the run (the path {change}); {lost}")


def quick_check(path: Path, *, limit: int = 5) -> tuple[str, ...]:
    """The problems ``PRAGMA quick_check`` finds in the SQLite file at ``path`` (one line
    each, e.g. ``"Page 5: btreeInitPage() returns error code 11"``, at most ``limit``), or
    ``()`` when it is sound, missing or empty. Run on a read-only connection of its own, so
    a refused file is left byte for byte as it was (a writable connection, closing, would
    checkpoint a WAL into it). Cost: about 0.6 ms per MB with a
    warm page cache (see the module doc). Source: sqlite.org, "Pragma statements",
    ``quick_check``.

    Raises:
        sqlite3.DatabaseError: when the file is not SQLite at all (``SQLITE_NOTADB``); a
            file too damaged for the check to finish (``SQLITE_CORRUPT``) is a problem
            returned, not raised.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return ()
    db = connect(path, readonly=True)
    try:
        rows = db.execute(f"PRAGMA quick_check({int(limit)})").fetchall()
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") != "SQLITE_CORRUPT":
            raise
        return (str(exc),)  # too damaged for the check to finish: "database disk image is malformed"
    finally:
        db.close()
    lines = [line.strip() for row in rows for line in str(row[0]).splitlines()]
    # one problem a line; SQLite heads a report with "*** in database main ***"
    problems = tuple(line for line in lines if line and not line.startswith("***"))[:limit]
    return () if problems == ("ok",) else problems


def engine_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a database engine's own error: ``sqlite3.Error``, or, when psycopg
    is loaded (a PostgreSQL store is open), ``psycopg.Error`` (a pool's ``PoolTimeout`` is
    one)."""
    if isinstance(exc, sqlite3.Error):
        return True
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


@contextmanager
def translate_errors(error: type[Exception], where: Path | str, operation: str) -> Iterator[None]:
    """Run the block; an engine's error (:func:`engine_error`: SQLite's, PostgreSQL's)
    raised in it becomes ``error`` (the store's own class), whose message names ``where``
    (the file, or the URL with its password masked) and ``operation`` and the engine's words,
    with the engine's error as its ``__cause__``. Any other exception passes through unchanged.

    Raises:
        error: ``"{operation} on {where} failed: {engine error class}: {its message}"``.
    """
    try:
        yield
    except Exception as exc:
        if not engine_error(exc):
            raise
        message = " ".join(str(exc).split())  # psycopg's messages run over several lines
        raise error(f"{operation} on {where} failed: {type(exc).__name__}: {message}") from exc


def store_errors(error: type[Exception]) -> Callable[[_Store], _Store]:
    """A class decorator for a store: every public instance method of the class (a plain
    function without a leading underscore, defined in the class body; static and class
    methods touch no connection and are left alone) runs under :func:`translate_errors` with
    ``error``, the instance's ``where`` (else ``path``) attribute and ``"Class.method"`` as the operation, so
    a method added later is covered too. Methods that return lazily (generators) cannot be
    covered by wrapping the call and are refused. When the instance has a ``failures`` list,
    the message of each ``error`` a public method raises is appended to it (once, however
    deeply the methods nest).

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
        try:
            with translate_errors(error, getattr(self, "where", None) or self.path, operation):
                return method(self, *args, **kwargs)
        except error as exc:
            failures = getattr(self, "failures", None)
            if isinstance(failures, list) and not getattr(exc, "_unstuck_kept", False):
                failures.append(str(exc))
                exc._unstuck_kept = True  # type: ignore[attr-defined]
            raise
    return run


def clean_text(text: str) -> str:
    """``text`` as every store engine takes it: lone surrogates (undecodable bytes a tool
    passed on as ``surrogateescape``) become U+FFFD instead of failing the write
    (:func:`unstuck.core.text.valid_utf8`), and so does NUL, which PostgreSQL's ``text`` refuses
    ("invalid byte sequence for encoding UTF8: 0x00"; PostgreSQL documentation, 8.3 "Character
    Types": "The character with code zero (sometimes called NUL) cannot be stored"), so a
    tool's output holding one never fails a turn on either engine."""
    return valid_utf8(text).replace("\x00", "\ufffd")


def kept_text(text: str) -> str:
    """``text`` as a store keeps it: as both engines take it (:func:`clean_text`) and with no
    secret in it (:func:`unstuck.core.redact.redact_document`). The one step of the store boundary:
    every statement's parameters (:func:`unstuck.store.engines.clean_params`), every migration that
    redacts old rows, and every backup a migration keeps (:func:`back_up`)."""
    return redact_document(clean_text(text))


def describe(db: sqlite3.Connection, app_id: int) -> str:
    """What a database that is not the expected store is, for an error message: empty,
    another unstuck store, or another program's database."""
    empty = (db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
             and db.execute("PRAGMA user_version").fetchone()[0] == 0)
    if empty:
        return "an empty database"
    return STORE_KINDS.get(app_id, f"another program's database (application_id {app_id})")


#: One schema step: called with the migration's write transaction (an object with
#: ``execute(sql, params)``: :class:`unstuck.store.engines.Transaction`), it turns the layout of one
#: version into that of the next (the version number is set by :func:`migrate`, not by the step).
Migration: TypeAlias = Callable[[Any], None]


def backup_path(path: Path, version: int) -> Path:
    """Where the copy of a schema-``version`` store at ``path`` is kept when it is migrated
    in place: ``<name>.schema<version>.bak`` beside it."""
    return path.with_name(f"{path.name}.schema{version}.bak")


def back_up(db: sqlite3.Connection, target: Path, *, scrub: Migration | None = None) -> Path:
    """A consistent copy of the database open on ``db`` at ``target`` holding no secret: made
    with SQLite's online backup API (:meth:`sqlite3.Connection.backup`; sqlite.org, "Using the
    SQLite Online Backup API") into memory, every text value of every table there written
    again through the store boundary (:func:`redact_copy`; ``scrub``, the store's own step,
    runs first, with an object whose ``execute(sql, params)`` redacts its parameters: a value
    derived from a text, such as a digest, is made again of the text as kept), then written out
    with ``VACUUM INTO`` (sqlite.org, "VACUUM": a fresh, compact database, no free page keeping
    an old value, no journal beside it) into an empty file of mode 0600 made with
    ``O_CREAT | O_EXCL | O_NOFOLLOW`` in a folder of mode 0700 made for it beside ``target``
    (``.<target>.<random>.part``: no other user can put a symbolic link where the copy is
    written, and two processes migrating at once never write one file), and given the
    backup's name by a hard link that follows no symbolic link, so a half-written copy never
    has it. No byte of the old rows' secrets reaches the disk; the copy keeps the file's
    ``user_version`` and ``application_id`` (its schema), and costs memory of the file's size
    while it is made. An earlier backup of that name (or a symbolic link of that name) is never
    overwritten nor followed: the copy is then ``<target>.2`` (``.3``…). Must run outside a
    write transaction of ``db`` (the backup reads through the connection). Returns the path
    written.

    Raises:
        sqlite3.Error, OSError: when the copy cannot be made (the partial file and its folder
            are removed, nothing is renamed).
    """
    private = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))
    partial = private / "copy.db"
    try:
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        copy = sqlite3.connect(":memory:")
        try:
            # an in-memory destination takes the source's pages only at the same page size
            copy.execute(f"PRAGMA page_size = {int(db.execute('PRAGMA page_size').fetchone()[0])}")
            db.backup(copy)
            redact_copy(copy, scrub=scrub)
            copy.execute("VACUUM INTO ?", (str(partial),))
        finally:
            copy.close()
        os.chmod(partial, 0o600)  # VACUUM INTO kept the file made above; said again, in a folder only we can enter
        placed = _place_without_overwriting(partial, target)
    finally:
        partial.unlink(missing_ok=True)
        private.rmdir()
    return placed


class _KeptTransaction:
    """A transaction on a copy whose parameters are kept as the store boundary keeps text
    (:func:`kept_text`): what a ``scrub`` step of :func:`back_up` is given."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, tuple(_kept_value(value) for value in params))


def redact_copy(db: sqlite3.Connection, *, scrub: Migration | None = None) -> None:
    """Every text value of every table of the database on ``db`` (a copy: nothing else has it
    open) written again as the store boundary keeps text now (:func:`kept_text`, registered as
    an SQL function with :meth:`sqlite3.Connection.create_function`), in one transaction, with
    ``PRAGMA secure_delete`` on (sqlite.org, "Pragma statements": deleted content is
    overwritten with zeros). ``scrub`` (a store's own step, given a transaction whose
    parameters are redacted) runs first in it. Triggers fire as for any update, so an
    external-content full-text index follows its table; each FTS5/FTS4 table is then rebuilt
    (:func:`rebuild_full_text`). A virtual table's own shadow tables are left to it, and
    hidden or generated columns (``PRAGMA table_xinfo``) to SQLite."""
    db.create_function("unstuck_kept_text", 1, _kept_value, deterministic=True)
    db.execute("PRAGMA secure_delete = ON")
    tables = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                        ).fetchall()
    virtual = {name for name, sql in tables if (sql or "").upper().startswith("CREATE VIRTUAL TABLE")}
    with db:
        if scrub is not None:
            scrub(_KeptTransaction(db))
        for name, _sql in tables:
            if name in virtual or any(name.startswith(f"{owner}_") for owner in virtual):
                continue
            columns = [row[1] for row in db.execute(f'PRAGMA table_xinfo("{_quoted(name)}")') if row[6] == 0]
            if columns:
                assigned = ", ".join(f'"{_quoted(c)}" = unstuck_kept_text("{_quoted(c)}")' for c in columns)
                db.execute(f'UPDATE "{_quoted(name)}" SET {assigned}')
        rebuild_full_text(db, own_content=True)


def rebuild_full_text(db: Any, *, own_content: bool = False) -> None:
    """Rebuild every FTS5/FTS4 table of the database on ``db`` (a connection or a store's
    transaction) from its content (sqlite.org, "SQLite FTS5 Extension", the ``rebuild``
    command; FTS3/4 alike): an update leaves the old terms in the index's older segments,
    marked deleted, until they are merged; a rebuild keeps none. ``own_content``: a table
    that keeps its own copy of the text (no ``content=`` option) has its columns redacted
    first (:func:`kept_text`, registered on ``db`` by :func:`redact_copy`); otherwise such a
    table is only rebuilt. A contentless table (``content=''``) cannot be rebuilt and is left."""
    rows = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
                      ).fetchall()
    for name, sql in rows:
        options = (sql or "").upper().replace(" ", "")
        if not options.split("USING", 1)[-1].startswith(("FTS5", "FTS4")):
            continue
        if "CONTENT=''" in options or 'CONTENT=""' in options:
            continue
        if own_content and "CONTENT=" not in options:
            columns = [row[1] for row in db.execute(f'PRAGMA table_info("{_quoted(name)}")').fetchall()]
            assigned = ", ".join(f'"{_quoted(c)}" = unstuck_kept_text("{_quoted(c)}")' for c in columns)
            db.execute(f'UPDATE "{_quoted(name)}" SET {assigned}')
        db.execute(f'INSERT INTO "{_quoted(name)}" ("{_quoted(name)}") VALUES (\'rebuild\')')


def _kept_value(value: _SQLValue) -> _SQLValue:
    """A value read from or bound to SQLite, a text as :func:`kept_text` keeps it."""
    return kept_text(value) if isinstance(value, str) else value


def _quoted(name: str) -> str:
    """An SQL identifier's text inside double quotes (a quote doubled)."""
    return name.replace('"', '""')


def _place_without_overwriting(partial: Path, target: Path) -> Path:
    """Give ``partial`` the name ``target``, or, when a file has that name already (an earlier
    backup: never overwritten), ``<target>.2``, ``<target>.3``…; the name it got. A hard link
    then an unlink, so an existing name is never replaced nor followed (link(2) fails with
    EEXIST, for a symbolic link of that name too, dangling or not)."""
    for attempt in range(1, 1000):
        candidate = target if attempt == 1 else target.with_name(f"{target.name}.{attempt}")
        try:
            os.link(partial, candidate, follow_symlinks=False)
        except FileExistsError:
            continue
        partial.unlink()
        return candidate
    raise FileExistsError(f"{target}: a thousand backups of this schema already exist beside it")


def migrate(db: sqlite3.Connection, path: Path, steps: Sequence[Migration], *,
            transaction: Callable[[], AbstractContextManager[Any]],
            unversioned: int | None = None, application_id: int | None = None,
            scrub: Migration | None = None) -> int | None:
    """Bring the store open on ``db`` (the file ``path``) to the newest version,
    ``len(steps) + 1``: when its ``user_version`` is older, first copy it to
    :func:`backup_path` of that version (:func:`back_up`, redacted, ``scrub`` the store's own
    step for the copy), then, in one ``transaction()`` (the store's write transaction), with
    ``PRAGMA secure_delete`` on (an old value a step rewrites is overwritten with zeros), read
    the version again (another process may have migrated it meanwhile), run ``steps[v - 1]``
    for each version ``v`` from it up to the newest, rebuild every full-text index
    (:func:`rebuild_full_text`: no old segment keeps a term a step redacted), and set
    ``user_version`` (and ``application_id`` when given: a file that lacked its mark gets it).
    Then the file is rewritten whole (``VACUUM``: no free page nor free space in a page keeps
    a row that old code deleted, or an old value; sqlite.org, "VACUUM") and its WAL emptied
    (``PRAGMA wal_checkpoint(TRUNCATE)``: no frame of an old page is left in ``-wal``).
    ``VACUUM`` may number the rows of a table without an ``INTEGER PRIMARY KEY`` anew, in
    their order (the journal reads its decisions ``ORDER BY rowid``: the order is kept).
    ``unversioned``: the version a file whose ``user_version`` is 0 has (a store that did not
    stamp one); ``None``: such a file is refused. Returns the version migrated from, or
    ``None`` when the store was current (nothing is copied or written).

    Raises:
        ValueError: when the store's version is not one of 1 to ``len(steps) + 1``
            (callers refuse a newer store with their own error before calling).
        sqlite3.Error, OSError: when the copy or a step fails (the transaction rolls back:
            the file is as it was, the copy stays), or the rewrite does (the file is migrated;
            SQLite's ``VACUUM`` is all or nothing).
    """
    newest = len(steps) + 1

    def version_of(conn: sqlite3.Connection) -> tuple[int, int]:
        stored = int(conn.execute("PRAGMA user_version").fetchone()[0])
        version = unversioned if stored == 0 and unversioned is not None else stored
        if not 1 <= version <= newest:
            raise ValueError(f"{path}: schema {stored} cannot be migrated (this code knows 1 to {newest})")
        return stored, version

    stored, version = version_of(db)
    if stored == newest:
        return None
    back_up(db, backup_path(path, version), scrub=scrub)
    secure = int(db.execute("PRAGMA secure_delete").fetchone()[0])
    db.execute("PRAGMA secure_delete = ON")
    try:
        with transaction() as w:
            stored, now = version_of(w)
            if stored == newest:
                return None
            for step in steps[now - 1:]:
                step(w)
            rebuild_full_text(w)
            w.execute(f"PRAGMA user_version = {newest}")
            if application_id is not None:
                w.execute(f"PRAGMA application_id = {int(application_id)}")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.execute(f"PRAGMA secure_delete = {secure}")
    return version


def open_failure(path: Path, exc: BaseException | None, what: str) -> str:
    """One line saying why the store ``what`` ("journal", "lesson store") at ``path`` could
    not be opened: a full or read-only file system is named as such (SQLite reports either
    as a "disk I/O error" when it cannot make its journal files, which reads like damage), else
    the store is not readable, with SQLite's or the system's reason."""
    try:
        stats = os.statvfs(path.parent if not path.is_dir() else path)
    except OSError:
        stats = None
    if stats is not None and stats.f_flag & os.ST_RDONLY:
        return f"{path}: cannot open the {what}: its file system is read-only ({exc})"
    if stats is not None and stats.f_blocks > 0 and stats.f_bavail == 0:  # /proc and the like have no blocks at all
        return f"{path}: cannot open the {what}: its file system is full ({exc}); free some space and run again"
    return f"{path} is not a readable unstuck {what}: {exc}"
