"""One interface over the two engines a store runs on: an SQLite file (the embedded default)
or a PostgreSQL database shared by a fleet (issue 16).

The journal (:mod:`unstuck.store.journal`) and the lesson store (:mod:`unstuck.store.lessons`) write
their SQL once, with ``?`` placeholders, and run it through a :class:`StoreEngine`:

* :meth:`StoreEngine.one` and :meth:`StoreEngine.all` read (each in a transaction of its
  own on PostgreSQL, on the open connection on SQLite);
* :meth:`StoreEngine.transaction` is one write transaction, *synced* (the commit waits until
  it is on disk) or *riding* (committed and visible at once, made durable by the next synced
  commit). On SQLite a riding commit is ``PRAGMA synchronous = NORMAL`` in WAL mode; on
  PostgreSQL it is ``SET LOCAL synchronous_commit TO OFF`` (PostgreSQL documentation, 30.4
  "Asynchronous Commit": a server crash may lose the latest such commits, never leaves the
  database inconsistent, and a later synchronous commit flushes them first), so both engines
  keep the journal's rule that a lost riding commit is a state a crash could leave anyway;
* :attr:`StoreEngine.now_sql` is an SQL expression for the engine's clock in epoch seconds:
  lease expiries are computed and compared by the database, so machines whose clocks differ
  still agree on when a lease ran out.

The SQL both stores write is the subset both engines read alike: ``?`` placeholders (turned
into psycopg's ``%s`` here, so SQL text never holds a literal ``?`` or ``%``), ``INSERT ...
ON CONFLICT ... DO UPDATE`` (SQLite 3.24, PostgreSQL 9.5), ``RETURNING`` (SQLite 3.35),
``CASE`` instead of the two-argument ``min``/``max`` SQLite has and PostgreSQL lacks. A
store's schema is written per engine (types, identity columns, full-text search differ).

Schema versions on PostgreSQL live in the table ``unstuck_schema (store, version)``, one row
per store kind (``journal``, ``lessons``), the role SQLite's ``PRAGMA user_version`` and
``application_id`` play in a file; :meth:`PostgresEngine.ensure_schema` makes or migrates a
store's tables under a transaction-level advisory lock (PostgreSQL documentation, 13.3.5
"Advisory Locks"), so many workers opening one new store at once make it exactly once. A
database that holds a store's tables but no ``unstuck_schema`` row for it is another
program's, and is refused, never written into.

Secrets (issue 23): the engines are the store boundary. Every string a statement is given, on
either engine, for any table, passes through :func:`clean_params`, which redacts it
(:func:`unstuck.core.redact.redact_document`: a JSON document's strings, or the text), so no journal
row, lesson, receipt or migration ever writes a secret, and a look-up by a value is redacted the
way the value was when it was written. A read-only engine also redacts every string it reads
(:func:`clean_row`): a read-only open never migrates, and an older store may hold rows written
before redaction existed (or before a format was known).

Errors: a ``psycopg.Error`` raised by an engine leaves a store's public method as the
store's own error, exactly as a ``sqlite3.Error`` does (:func:`unstuck.store.sqlite.store_errors`).
"""

from __future__ import annotations

import contextlib
import enum
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from unstuck.core.redact import redact_document
from unstuck.store.sqlite import kept_text, write
from unstuck.store.urls import Engine, StoreURL, postgres_pool

if TYPE_CHECKING:
    import psycopg_pool

_E = TypeVar("_E", bound=enum.StrEnum)

__all__ = [
    "SCHEMA_LOCK",
    "SCHEMA_TABLE",
    "Cursor",
    "PostgresEngine",
    "SQLiteEngine",
    "StoreEngine",
    "Transaction",
    "clean_params",
    "clean_row",
    "closed_value",
    "open_postgres_store",
    "postgres_sql",
    "redact_rows",
]

#: The table that keeps each store's schema version in a PostgreSQL database.
SCHEMA_TABLE = "unstuck_schema"

#: How messages name each store kind.
_STORE_NAMES = {"journal": "journal", "lessons": "lesson store"}

#: The transaction-level advisory lock (``pg_advisory_xact_lock(bigint)``) every store's schema
#: work takes, whatever the store: "unss". One key for all, since the stores share the
#: ``unstuck_schema`` table, and PostgreSQL's catalog does not serialise two
#: ``CREATE TABLE IF NOT EXISTS`` of one name (the loser fails on ``pg_type``'s unique index).
#: A person changing unstuck's tables by hand can take it too, to keep every open waiting.
SCHEMA_LOCK = 0x756E7373


class Cursor(Protocol):
    """What a statement run in a transaction gives back (``sqlite3.Cursor``, ``psycopg.Cursor``)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Transaction(Protocol):
    """One open write transaction: statements with ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


class StoreEngine(Protocol):
    """What a store needs of its database (see the module doc)."""

    #: Which engine.
    kind: Engine
    #: The store for messages: the SQLite path, or the PostgreSQL URL with its password masked.
    where: str
    #: An SQL expression for the database's clock, epoch seconds as a float.
    now_sql: str

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None: ...

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def transaction(self, *, sync: bool = True) -> Any: ...

    def close(self) -> None: ...


class SQLiteEngine:
    """A store's open SQLite connection (:func:`unstuck.store.sqlite.connect`) as a
    :class:`StoreEngine`. ``before_commit`` runs last in every write transaction (a store
    checks there that its path still names its file). A lock serialises the connection's use
    by the store's threads (the turn and its lease keeper), a transaction at a time. A
    ``readonly`` engine (the connection was opened read-only) redacts what it reads
    (:func:`clean_row`)."""

    kind = Engine.SQLITE
    #: ``julianday('now')`` has millisecond precision; 2440587.5 is the Julian day of 1970-01-01.
    now_sql = "((julianday('now') - 2440587.5) * 86400.0)"

    def __init__(self, db: sqlite3.Connection, where: str, *,
                 before_commit: Callable[[], None] | None = None, readonly: bool = False) -> None:
        self.db = db
        self.where = where
        self.readonly = readonly
        self._before_commit = before_commit
        self._synchronous = "FULL"
        self.lock = threading.RLock()

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a read, or ``None``."""
        with self.lock:
            row = self.db.execute(sql, clean_params(params)).fetchone()
        return None if row is None else clean_row(row) if self.readonly else tuple(row)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of a read."""
        with self.lock:
            rows = self.db.execute(sql, clean_params(params)).fetchall()
        return [clean_row(row) if self.readonly else tuple(row) for row in rows]

    @contextmanager
    def transaction(self, *, sync: bool = True) -> Iterator[_SQLiteTransaction]:
        """One write transaction (``BEGIN IMMEDIATE``), committed with ``synchronous = FULL``
        when ``sync``, ``NORMAL`` otherwise (set between transactions: SQLite reads it at
        each commit)."""
        with self.lock:
            mode = "FULL" if sync else "NORMAL"
            if mode != self._synchronous:
                self.db.execute(f"PRAGMA synchronous = {mode}")
                self._synchronous = mode
            with write(self.db, before_commit=self._before_commit) as db:
                yield _SQLiteTransaction(db)

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.db.close()


def clean_params(params: Sequence[Any]) -> tuple[Any, ...]:
    """``params`` with every string as a store may keep it: as both engines take it
    (:func:`unstuck.store.sqlite.kept_text`: lone surrogates and NUL become U+FFFD, so no
    text a tool or a person supplied fails a write, or a look-up, with an encoding error, and
    no secret is in it, :func:`unstuck.core.redact.redact_document`: the store boundary, see the
    module doc). Every statement of both engines runs with its parameters made so."""
    return tuple(kept_text(value) if isinstance(value, str) else value for value in params)


def clean_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """A row read by a read-only engine: every string redacted
    (:func:`unstuck.core.redact.redact_document`), as a writable open's migration would store it."""
    return tuple(redact_document(value) if isinstance(value, str) else value for value in row)


def closed_value(vocabulary: type[_E], value: object, *, store: str, table: str, row: str, column: str,
                 error: type[Exception]) -> _E:
    """``value`` as read from ``column`` of a store's ``table``, as a member of its closed
    ``vocabulary`` (a ``StrEnum``: the member whose value it is).

    A store never turns a value it does not know into a default (DESIGN.md: "every vocabulary
    has one owner"; issue 24): an unknown one is an error naming where it is, so a person can
    look at the row, which is left as it is.

    Raises:
        error: ``"{store}: table {table}, row {row}: {column} {value!r} is not one of
            {vocabulary}'s values ({a, b, ...})"`` (``row`` names the row's key, e.g.
            ``turn_id='t1'``; the value shown at most 80 characters).
    """
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return vocabulary(value)
    known = ", ".join(repr(member.value) for member in vocabulary)
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise error(f"{store}: table {table}, row {row}: {column} {shown} is not one of {vocabulary.__name__}'s "
                f"values ({known})")


def redact_rows(tx: Transaction, table: str, keys: Sequence[str], columns: Sequence[str], *,
                also: Callable[[tuple[Any, ...]], dict[str, Any]] | None = None) -> int:
    """In a migration's transaction: every row of ``table`` whose text ``columns`` hold a
    secret written again through the store boundary (the UPDATE's parameters are redacted by
    :func:`clean_params`), found by its ``keys``; rows without one are not touched (a trigger
    on the table fires only for changed rows). ``also``, given the row's ``columns`` values as
    read, names more columns to set with it (a digest of the value as kept). Returns the
    number of rows written. Table and column names are the store's own, never input."""
    written = 0
    for row in tx.execute(f"SELECT {', '.join((*keys, *columns))} FROM {table}").fetchall():
        key, values = tuple(row[:len(keys)]), tuple(row[len(keys):])
        if all(not isinstance(v, str) or kept_text(v) == v for v in values):
            continue
        extra = also(values) if also is not None else {}
        assigned = ", ".join(f"{name} = ?" for name in (*columns, *extra))
        tx.execute(f"UPDATE {table} SET {assigned} WHERE {' AND '.join(f'{k} = ?' for k in keys)}",
                   (*values, *extra.values(), *key))
        written += 1
    return written


def postgres_sql(sql: str) -> str:
    """``sql`` with its ``?`` placeholders as psycopg's ``%s`` (the stores' SQL never holds a
    literal ``?`` or ``%``)."""
    return sql.replace("?", "%s")


class _SQLiteTransaction:
    """An open SQLite write transaction whose parameters are cleaned (:func:`clean_params`)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, clean_params(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._db.executemany(sql, [clean_params(row) for row in rows])


class _PostgresTransaction:
    """An open psycopg transaction taking ``?`` placeholders."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        cursor: Cursor = self._connection.execute(postgres_sql(sql), clean_params(params))
        return cursor

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._connection.cursor() as cursor:
            cursor.executemany(postgres_sql(sql), [clean_params(row) for row in rows])


class PostgresEngine:
    """A PostgreSQL database as a :class:`StoreEngine`, through a connection pool
    (:func:`unstuck.store.urls.postgres_pool`, at most ``max_size`` connections). Reads and write
    transactions each take a connection from the pool for their duration; a read-only engine
    refuses :meth:`transaction`, runs its reads in read-only transactions and redacts what
    they read (:func:`clean_row`).

    Raises:
        unstuck.store.urls.StoreURLError, unstuck.store.urls.StoreConnectionError: as
            :func:`unstuck.store.urls.postgres_pool` (a server that cannot be reached is named
            with its hosts and ports, the password masked).
    """

    kind = Engine.POSTGRESQL
    now_sql = "extract(epoch FROM clock_timestamp())::double precision"

    def __init__(self, url: StoreURL, *, readonly: bool = False, max_size: int = 4) -> None:
        self.url = url
        self.where = url.shown
        self.readonly = readonly
        self.pool: psycopg_pool.ConnectionPool = postgres_pool(url, min_size=1, max_size=max_size)

    @contextmanager
    def _read(self, sql: str, params: Sequence[Any]) -> Iterator[Cursor]:
        """A read's cursor, on a pooled connection (a read-only transaction on a read-only engine)."""
        with self.pool.connection() as connection:
            if self.readonly:
                connection.execute("SET TRANSACTION READ ONLY")
            yield connection.execute(postgres_sql(sql), clean_params(params))

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a read, or ``None``."""
        with self._read(sql, params) as cursor:
            row = cursor.fetchone()
        return None if row is None else clean_row(row) if self.readonly else tuple(row)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of a read."""
        with self._read(sql, params) as cursor:
            rows = cursor.fetchall()
        return [clean_row(row) if self.readonly else tuple(row) for row in rows]

    @contextmanager
    def transaction(self, *, sync: bool = True) -> Iterator[_PostgresTransaction]:
        """One write transaction on a pooled connection, committed when the block ends
        without an exception and rolled back otherwise; a riding one (``sync`` false) sets
        ``synchronous_commit`` off for itself only (``SET LOCAL``).

        Raises:
            psycopg.errors.ReadOnlySqlTransaction: on a read-only engine (SQLSTATE 25006, the
                error PostgreSQL gives a write in a read-only transaction), so a store reports
                it as any engine error.
        """
        if self.readonly:
            import psycopg

            raise psycopg.errors.ReadOnlySqlTransaction(f"{self.where} was opened read-only")
        with self.pool.connection() as connection, connection.transaction():
            if not sync:
                connection.execute("SET LOCAL synchronous_commit TO OFF")
            yield _PostgresTransaction(connection)

    def schema_version(self, store: str) -> int | None:
        """The schema version recorded for ``store`` (``journal``, ``lessons``), or ``None``
        when the database has none (no :data:`SCHEMA_TABLE`, or no row for it)."""
        row = self.one("SELECT to_regclass(?) IS NOT NULL", (SCHEMA_TABLE,))
        if row is None or not row[0]:
            return None
        found = self.one(f"SELECT version FROM {SCHEMA_TABLE} WHERE store = ?", (store,))
        return None if found is None else int(found[0])

    def _check_version(self, store: str, found: int, version: int) -> None:
        """Refuse a ``store`` of a schema newer than ``version`` (the newest this code reads).

        Raises:
            ValueError: ``"{where} holds a {journal|lesson store} of schema N; this unstuck
                reads schemas up to M; it was left untouched"``.
        """
        if found > version:
            raise ValueError(f"{self.where} holds a {_STORE_NAMES[store]} of schema {found}; this unstuck reads "
                             f"schemas up to {version}; it was left untouched")

    def ensure_schema(self, store: str, version: int, statements: Sequence[str], relations: Sequence[str],
                      migrations: Sequence[Callable[[Any], None]] = ()) -> int:
        """Make ``store``'s tables and indexes (``statements``, which make ``relations``) and
        record ``version``, or migrate an older one (``migrations[i]`` turns version ``i + 1``
        into ``i + 2``), all in one transaction under the schema advisory lock (one for every
        store kind); returns the version found before (0 for a new store).

        Raises:
            ValueError: the database is of a newer version of the store, holds one of
                ``relations`` (a table or an index) without a schema row for ``store``, or holds
                an ``unstuck_schema`` that is not unstuck's (another program's objects: nothing
                is written).
        """
        with self.transaction() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            columns = {row[0] for row in tx.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND table_name = ?", (SCHEMA_TABLE,)).fetchall()}
            if columns and columns != {"store", "version"}:
                raise ValueError(f"{self.where} holds a table {SCHEMA_TABLE} that is not unstuck's (columns "
                                 f"{', '.join(sorted(columns))}); it is another program's database and was left "
                                 "untouched")
            tx.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (store TEXT PRIMARY KEY, version INTEGER NOT NULL)")
            row = tx.execute(f"SELECT version FROM {SCHEMA_TABLE} WHERE store = ?", (store,)).fetchone()
            if row is None:
                present = [name for name in relations
                           if tx.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchone()[0]]
                if present:
                    raise ValueError(f"{self.where} holds {', '.join(present)} but no unstuck "
                                     f"{_STORE_NAMES[store]} schema; it is another program's database and was left "
                                     "untouched")
                for statement in statements:
                    tx.execute(statement)
                tx.execute(f"INSERT INTO {SCHEMA_TABLE} (store, version) VALUES (?, ?)", (store, version))
                return 0
            found = int(row[0])
            self._check_version(store, found, version)
            for step in migrations[found - 1:version - 1]:
                step(tx)
            if found != version:
                tx.execute(f"UPDATE {SCHEMA_TABLE} SET version = ? WHERE store = ?", (version, store))
            return found

    def close(self) -> None:
        """Close the pool and its connections."""
        self.pool.close()


def open_postgres_store(url: StoreURL, store: str, version: int, statements: Sequence[str],
                        relations: Sequence[str], migrations: Sequence[Callable[[Any], None]] = (), *,
                        readonly: bool = False) -> tuple[PostgresEngine, int]:
    """A store's engine on the PostgreSQL database at ``url`` and the schema version it has:
    read-only, the version recorded (refused when there is none or it is newer than
    ``version``); otherwise made or migrated to ``version`` (:meth:`PostgresEngine.ensure_schema`).
    The engine is closed again when anything fails.

    Raises:
        unstuck.store.urls.StoreURLError, unstuck.store.urls.StoreConnectionError: the server (as
            :func:`unstuck.store.urls.postgres_pool`).
        ValueError: no such store in a read-only open, a newer schema, another program's objects.
        psycopg.Error: the server failed a statement.
    """
    engine = PostgresEngine(url, readonly=readonly)
    try:
        if not readonly:
            engine.ensure_schema(store, version, statements, relations, migrations)
            return engine, version
        found = engine.schema_version(store)
        if found is None:
            raise ValueError(f"no {_STORE_NAMES[store]} in {engine.where}")
        engine._check_version(store, found, version)
        return engine, found
    except BaseException:
        engine.close()
        raise
