"""Lessons: remembered blockers that survive sessions, expire when the world changes, and are
re-checked rather than believed (seed 000, section 3.4).

A lesson is a blocker the loop met and asked about: its *signature* (tool, subject, kind,
environment fingerprint), the unblock the tool declared, its probe, and a line of content.
The rules the store and the loop keep between them:

* **Only the loop writes**, only from a *declared* situation of a blocker kind (auth,
  permission, not_installed, a spent quota), and only after the turn escalated or the user
  answered. Network kinds are never stored (the store refuses them), nor inferred
  situations, nor anything whose result text reads as an injected instruction. No tool
  output and no model output can write or change a lesson: they never reach this module.
* **A changed environment stops a match.** For a CLI the fingerprint is its resolved binary
  path and its ``--version`` line (:func:`unstuck.toolkit.workspace.cli_fingerprint`): gh upgraded or
  moved, and the old lesson no longer applies.
* **Close, never delete.** An invalidated or forgotten lesson keeps its row with
  ``invalidated_at`` set; a replaced one points at its successor (``superseded_by``).

Storage: SQLite (WAL, ``busy_timeout`` 10 s, so several processes may write at once), path
configurable, by default ``lessons.db`` in the user data directory (platformdirs); the
``knowledge`` table with FTS5 over its content. A file that is not SQLite, or another
program's database, is refused with :class:`LessonStoreError` naming the path, and is never
recreated over. A damaged file (``PRAGMA quick_check``) is refused at open, before anything
is written; a file deleted or replaced while open fails the next write ("replaced during
the run"). Every :class:`LessonStoreError` a public method raised is also kept in
:attr:`LessonStore.failures`, so a caller can report it after a turn whose lesson keeper
carried on without lessons (:mod:`unstuck.store.sqlite`).

Secrets (issues 12 and 23): every string the store writes, in every column, passes the store
boundary (:func:`unstuck.store.engines.clean_params`, :func:`unstuck.core.redact.redact_document`): no
lesson keeps a secret a tool declared or printed, whether in its content, unblock, probe,
metadata, subject or tool.

Schema: ``PRAGMA user_version`` is the schema (5). A store of an older schema opened for
writing is migrated in place (:func:`unstuck.store.sqlite.migrate`): a copy of it is kept
first as ``<name>.schema<N>.bak`` (:meth:`LessonStore.backup_path`; mode 0600, every text in
it redacted as the migration redacts it, its full-text index rebuilt: the copy keeps no secret
either), then every step runs in one write transaction, the full-text index is rebuilt and the
file rewritten whole, its WAL emptied (no old segment or page keeps a secret). Schema 2 added
the partial indexes that serve the turn-start query
(:meth:`LessonStore.active`; ``bench/bench_lessons.py``); schema 3 is the redacted store:
lessons recorded before redaction existed are redacted, the FTS rows of the changed lessons
rebuilt by the update trigger; schema 4 names the host; schema 5 redacts every text column
again as the store boundary writes it now (subjects and tools too, and formats unknown
before). A store of a newer schema is refused, naming the file and both versions. A read-only
open never migrates and never writes: an older store is read as it is, every string redacted
as it is read (:func:`unstuck.store.engines.clean_row`; its :attr:`LessonStore.schema` tells it is
older; any writable open migrates it).

Errors::

    LessonStoreError (UnstuckError, RuntimeError)   unreadable, corrupt or foreign store file; a
                                                    failed SQLite operation (path and operation
                                                    named, the sqlite3.Error as __cause__)
"""

from __future__ import annotations

import heapq
import itertools
import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from unstuck.core.errors import UnstuckError
from unstuck.core.redact import redacted_prefix
from unstuck.core.situations import Kind, KindClass, Probe, Situation, Source
from unstuck.core.text import for_terminal
from unstuck.store.engines import SQLiteEngine, StoreEngine, Transaction, clean_params, open_postgres_store, redact_rows
from unstuck.store.sqlite import (
    FileIdentity,
    Migration,
    backup_path,
    clean_text,
    connect,
    describe,
    engine_error,
    migrate,
    open_failure,
    quick_check,
    store_errors,
)
from unstuck.store.urls import SQLITE_FILES, Engine, StoreRole, StoreURL, default_store_folder, machine_id, store_for

__all__ = [
    "ACTIVE_BY_TOOL_SQL",
    "ACTIVE_SQL",
    "APPLICATION_ID",
    "CONTENT_LIMIT",
    "Lesson",
    "LessonStore",
    "LessonStoreError",
    "Signature",
    "default_store_path",
    "storable",
]

#: ``PRAGMA application_id`` of an unstuck lesson store ("unsl").
APPLICATION_ID = 0x756E736C
_SCHEMA_VERSION = 5

_ACTIVE = "invalidated_at IS NULL AND superseded_by IS NULL"

#: Characters of a lesson's content kept (a line of evidence, as a journaled step keeps 4,000):
#: PostgreSQL's ``tsvector`` of a lesson must stay under its 1 MB limit (PostgreSQL
#: documentation, 8.11.1 "tsvector"), and a lesson shown in a prompt is short.
CONTENT_LIMIT = 4000
#: Indexes added by schema 2: the turn-start query (:meth:`LessonStore.active`) seeks the
#: active lessons of one tool, most recently verified first, and stops after ``limit`` rows
#: (a partial index: closed lessons are not in it, so their number costs nothing).
_INDEXES_2 = (
    f"CREATE INDEX IF NOT EXISTS knowledge_active_tool ON knowledge (tool, last_verified_at, id) WHERE {_ACTIVE}",
    f"CREATE INDEX IF NOT EXISTS knowledge_active_recent ON knowledge (last_verified_at, id) WHERE {_ACTIVE}",
)

_SCHEMA = (
    """CREATE TABLE knowledge (
        id INTEGER PRIMARY KEY, domain TEXT NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL,
        kind TEXT NOT NULL, fingerprint TEXT NOT NULL, unblock TEXT, probe TEXT, content TEXT NOT NULL,
        confidence REAL NOT NULL, created_at REAL NOT NULL, last_verified_at REAL NOT NULL, invalidated_at REAL,
        superseded_by INTEGER REFERENCES knowledge(id), source TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
        host TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX knowledge_active ON knowledge (subject, fingerprint) "
    "WHERE invalidated_at IS NULL AND superseded_by IS NULL",
    "CREATE VIRTUAL TABLE knowledge_fts USING fts5(content, subject, tool, content='knowledge', content_rowid='id')",
    """CREATE TRIGGER knowledge_ai AFTER INSERT ON knowledge BEGIN
        INSERT INTO knowledge_fts (rowid, content, subject, tool) VALUES (new.id, new.content, new.subject, new.tool);
    END""",
    """CREATE TRIGGER knowledge_au AFTER UPDATE OF content, subject, tool ON knowledge BEGIN
        INSERT INTO knowledge_fts (knowledge_fts, rowid, content, subject, tool)
            VALUES ('delete', old.id, old.content, old.subject, old.tool);
        INSERT INTO knowledge_fts (rowid, content, subject, tool) VALUES (new.id, new.content, new.subject, new.tool);
    END""",
    *_INDEXES_2,
)

_COLUMNS = ("id, domain, tool, subject, kind, fingerprint, unblock, probe, content, confidence, created_at, "
            "last_verified_at, invalidated_at, superseded_by, source, metadata, host")

#: The same layout on PostgreSQL (schema 4's, which schema 5 keeps, from the start): 8-byte
#: floats, an identity id, and full-text search over content, subject and tool as a generated ``tsvector`` with a GIN
#: index (PostgreSQL documentation, 12.2.2 "Creating Indexes"), where SQLite has FTS5.
_POSTGRES_SCHEMA = (
    """CREATE TABLE knowledge (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, domain TEXT NOT NULL, tool TEXT NOT NULL,
        subject TEXT NOT NULL, kind TEXT NOT NULL, fingerprint TEXT NOT NULL, unblock TEXT, probe TEXT,
        content TEXT NOT NULL, confidence DOUBLE PRECISION NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        last_verified_at DOUBLE PRECISION NOT NULL, invalidated_at DOUBLE PRECISION,
        superseded_by BIGINT REFERENCES knowledge(id), source TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
        host TEXT NOT NULL DEFAULT '',
        search tsvector GENERATED ALWAYS AS (to_tsvector('simple', content || ' ' || subject || ' ' || tool)) STORED
    )""",
    "CREATE INDEX knowledge_active ON knowledge (subject, fingerprint) "
    "WHERE invalidated_at IS NULL AND superseded_by IS NULL",
    "CREATE INDEX knowledge_search ON knowledge USING GIN (search)",
    *_INDEXES_2,
)
#: What :data:`_POSTGRES_SCHEMA` makes: a database holding any of them without the lesson
#: store's schema row is another program's.
_POSTGRES_RELATIONS = ("knowledge", "knowledge_active", "knowledge_search", "knowledge_active_tool",
                       "knowledge_active_recent")

#: The turn-start query for one tool (:meth:`LessonStore.active` runs it once per tool and
#: merges): served by the ``knowledge_active_tool`` index, in its order, no sort, no scan.
ACTIVE_BY_TOOL_SQL = (f"SELECT {_COLUMNS} FROM knowledge WHERE {_ACTIVE} AND tool = ?"
                      " ORDER BY last_verified_at DESC, id DESC LIMIT ?")
#: Every active lesson, most recently verified first (``knowledge_active_recent``).
ACTIVE_SQL = f"SELECT {_COLUMNS} FROM knowledge WHERE {_ACTIVE} ORDER BY last_verified_at DESC, id DESC LIMIT ?"


class LessonStoreError(UnstuckError, RuntimeError):
    """A store file that cannot be used; the message names the path."""


def default_store_path() -> Path:
    """``lessons.db`` in the user data directory (:func:`unstuck.store.urls.default_store_folder`,
    platformdirs' ``user_data_path("unstuck")``)."""
    return default_store_folder() / SQLITE_FILES[StoreRole.LESSONS]


@dataclass(frozen=True, slots=True)
class Signature:
    """What a lesson is about: the tool that declared it, the subject, the kind, and the
    environment fingerprint at the time (a changed fingerprint stops a match)."""

    tool: str
    subject: str
    kind: Kind
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Lesson:
    """One remembered blocker (see the module doc). Timestamps are epoch seconds."""

    id: int
    domain: str
    signature: Signature
    unblock: str | None
    probe: Probe | None
    content: str
    confidence: float
    created_at: float
    last_verified_at: float
    invalidated_at: float | None
    superseded_by: int | None
    source: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    host: str = ""  # the machine that recorded it (unstuck.store.urls.machine_id); "" before schema 4

    @property
    def active(self) -> bool:
        """Neither invalidated nor superseded."""
        return self.invalidated_at is None and self.superseded_by is None

    def situation(self) -> Situation:
        """The declared situation the lesson remembers (for an escalation that cites it)."""
        return Situation(self.signature.kind, self.signature.subject, unblock=self.unblock, probe=self.probe,
                         detail=self.content)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the CLI's ``--json``)."""
        return {
            "id": self.id, "domain": self.domain, "tool": self.signature.tool, "subject": self.signature.subject,
            "kind": self.signature.kind.value, "fingerprint": self.signature.fingerprint, "unblock": self.unblock,
            "probe": {"tool": self.probe.tool, "args": self.probe.arguments} if self.probe else None,
            "content": self.content, "confidence": self.confidence, "created_at": self.created_at,
            "last_verified_at": self.last_verified_at, "invalidated_at": self.invalidated_at,
            "superseded_by": self.superseded_by, "source": self.source, "metadata": dict(self.metadata),
            "host": self.host,
        }


def storable(situation: Situation) -> str | None:
    """Why ``situation`` may not become a lesson, or ``None`` when it may: it must be
    declared, of a blocker kind, and not a network kind."""
    if situation.source is not Source.DECLARED:
        return "only declared situations are stored"
    if situation.kind is Kind.NETWORK:
        return "network kinds are never stored"
    if situation.kind_class is not KindClass.BLOCKER:
        return f"{situation.kind.value} is not a blocker kind"
    return None


@store_errors(LessonStoreError)
class LessonStore:
    """An open lesson store: an SQLite file, or a PostgreSQL database a fleet shares. Use as
    a context manager, or call :meth:`close`.

    Args:
        path: where the store lives: a :class:`~unstuck.store.urls.StoreURL`, a store URL
            (``sqlite:///path``, ``postgresql://…``: :func:`unstuck.store.urls.parse_store_url`),
            a path of an SQLite file, or ``None``: the lesson store of ``UNSTUCK_STORE``
            (:func:`unstuck.store.urls.store_for`), else :func:`default_store_path` (folders made).
        readonly: open for reading only (nothing is made or migrated).

    Attributes:
        path: the SQLite file, ``None`` for PostgreSQL.
        where: the store for messages (the path, or the URL with its password masked).
        failures: the message of every :class:`LessonStoreError` a public method raised
            since the store opened, in order (a damaged, unwritable or replaced store, a lost
            server), for the caller to show: the loop's lesson keeper swallows them and
            carries on.
        schema: the store's schema (SQLite's ``PRAGMA user_version``; PostgreSQL's
            ``unstuck_schema`` row): 5 once a writable open migrated it; an older one only in
            a read-only open, which reads its lessons redacted.

    Raises:
        LessonStoreError: when the file is not SQLite, is another program's database, is
            damaged (``PRAGMA quick_check``; refused before anything is written), has no
            FTS5, or is of a newer schema; when a PostgreSQL database cannot be reached,
            holds another program's ``knowledge`` table or a newer store; from any public
            method, when the engine fails (an SQLite file damaged or removed while open, a
            full disk, a lost server): the message names the store and the method, the
            ``sqlite3.Error`` or ``psycopg.Error`` is its ``__cause__``
            (:func:`unstuck.store.sqlite.store_errors`); from a write, when the SQLite path no
            longer names the file opened ("replaced during the run").
    """

    def __init__(self, path: Path | str | StoreURL | None = None, *, readonly: bool = False) -> None:
        url = _store_url(path)
        self.path: Path | None = url.path
        self.where = url.shown if url.path is None else str(url.path)
        self.engine = url.engine
        self.readonly = readonly
        self.failures: list[str] = []
        self._host = machine_id()
        self._db: StoreEngine
        if url.path is None:
            self._open_postgres(url)
        else:
            self._open_sqlite(url.path)
        self._columns = _COLUMNS if self.schema >= 4 else _COLUMNS.replace(", host", ", '' AS host")

    def _open_sqlite(self, path: Path) -> None:
        if self.readonly and not path.is_file():
            raise LessonStoreError(f"no lesson store at {path}")
        if not self.readonly:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LessonStoreError(f"{path}: cannot make its folder {path.parent}: {exc.strerror or exc}") \
                    from exc
        last: sqlite3.Error | None = None
        for attempt in range(5):  # several processes making one new store at once: the losers wait and retry
            try:
                problems = quick_check(path)
                if problems:
                    raise LessonStoreError(f"{path} is damaged (PRAGMA quick_check: {'; '.join(problems)}); "
                                           "it was left untouched")
                connection = connect(path, readonly=self.readonly)
                try:
                    self._identity = FileIdentity.of(path)
                    self._db = self._sqlite = SQLiteEngine(connection, str(path), before_commit=self._still_in_place,
                                                           readonly=self.readonly)
                    self._open(connection, path)
                except BaseException:
                    connection.close()
                    raise
                return
            except sqlite3.OperationalError as exc:
                last = exc
                if "locked" not in str(exc) and "busy" not in str(exc):
                    break
                time.sleep(0.05 * (attempt + 1))
            except sqlite3.Error as exc:
                last = exc
                break
            except OSError as exc:
                raise LessonStoreError(open_failure(path, exc, "lesson store")) from exc
        raise LessonStoreError(open_failure(path, last, "lesson store")) from last

    def _open(self, db: sqlite3.Connection, path: Path) -> None:
        if not self.readonly:
            with self._write() as tx:  # the check and the making under one write lock: no race to make it twice
                app_id = tx.execute("PRAGMA application_id").fetchone()[0]
                tables = tx.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                version = tx.execute("PRAGMA user_version").fetchone()[0]
                if app_id == 0 and tables == 0 and version == 0:
                    tx.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    tx.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                    for statement in _SCHEMA:
                        tx.execute(statement)
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        if app_id != APPLICATION_ID:
            what = describe(db, app_id)
            raise LessonStoreError(f"{path} is {what}, not an unstuck lesson store; it was left untouched")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION or version < 1:
            raise LessonStoreError(f"{path} is a lesson store of schema {version}; this unstuck reads schemas "
                                   f"1 to {_SCHEMA_VERSION}; it was left untouched")
        has_table = db.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'knowledge'").fetchone()[0]
        if not has_table:
            raise LessonStoreError(f"{path} is marked as a lesson store but has no knowledge table")
        if not self.readonly:
            migrate(db, path, _MIGRATIONS, transaction=self._sqlite.transaction)
            db.execute("PRAGMA journal_mode = WAL")
        self.schema: int = db.execute("PRAGMA user_version").fetchone()[0]

    def _open_postgres(self, url: StoreURL) -> None:
        try:
            self._db, self.schema = open_postgres_store(url, "lessons", _SCHEMA_VERSION, _POSTGRES_SCHEMA,
                                                        _POSTGRES_RELATIONS, _MIGRATIONS, readonly=self.readonly)
        except UnstuckError as exc:  # it names the server and the URL (password masked) already
            raise LessonStoreError(f"cannot open the lesson store: {exc}") from exc
        except ValueError as exc:
            raise LessonStoreError(str(exc)) from None
        except Exception as exc:
            if not engine_error(exc):
                raise
            raise LessonStoreError(f"cannot open the lesson store at {url.shown}: {type(exc).__name__}: {exc}") from exc

    def backup_path(self, version: int) -> Path:
        """Where the copy of a schema-``version`` store is kept when it is migrated in place:
        ``<name>.schema<version>.bak`` beside it (:func:`unstuck.store.sqlite.backup_path`).

        Raises:
            LessonStoreError: for a store on PostgreSQL (no file copy is kept there).
        """
        if self.path is None:
            raise LessonStoreError(f"{self.where} is on PostgreSQL: migrations keep no file copy")
        return backup_path(self.path, version)

    def _lesson(self, row: Sequence[Any]) -> Lesson:
        """A row as a lesson (a read-only engine redacted it as it read it)."""
        return _lesson(row)

    def _write(self) -> AbstractContextManager[Transaction]:
        return cast("AbstractContextManager[Transaction]", self._db.transaction())

    def _still_in_place(self) -> None:
        self._identity.require_unchanged(LessonStoreError, "the lessons this process stored since are not in it")

    def close(self) -> None:
        """Close the store."""
        self._db.close()

    def __enter__(self) -> LessonStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing (the loop only) ---------------------------------------------------------------

    def record(
        self, situation: Situation, *, tool: str, fingerprint: str, content: str, source: str,
        domain: str = "", metadata: Mapping[str, Any] | None = None, now_s: float | None = None,
    ) -> Lesson:
        """Store (or re-verify) the lesson of a declared blocker, as recorded by this machine
        (:func:`unstuck.store.urls.machine_id`, the lesson's ``host``).

        ``content`` (its first :data:`CONTENT_LIMIT` characters, cut after redaction) and the
        unblock are stored cleaned (no escape sequence, one line); every value is redacted at
        the store boundary (a token or a value named secret becomes ``***``): no secret in a
        tool's declared detail, unblock or probe is ever stored.

        An active lesson with the same signature and unblock is re-verified (its
        ``last_verified_at`` moves, its confidence rises); one with another unblock is
        superseded by a new row; otherwise a new lesson is made. The look-up and the write are
        one transaction (on PostgreSQL the matching row is locked, ``FOR UPDATE``), so two
        machines recording the same lesson at once make one row.

        Raises:
            ValueError: when ``situation`` may not be stored (see :func:`storable`).
        """
        refused = storable(situation)
        if refused is not None:
            raise ValueError(f"not storing a lesson on {situation.subject}: {refused}")
        now = time.time() if now_s is None else now_s
        unblock = _clean(situation.unblock) if situation.unblock else None
        stored_unblock = clean_params((unblock,))[0]  # as the store boundary keeps it, so as compared
        probe = None
        if situation.probe is not None:
            probe = json.dumps({"tool": situation.probe.tool, "args": situation.probe.arguments})
        with self._write() as tx:
            if self.engine is Engine.POSTGRESQL:  # serialise recorders of one signature (SQLite's write lock does)
                tx.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                           ("\x1f".join((tool, situation.subject, situation.kind.value, fingerprint)),))
            row = tx.execute(
                f"SELECT {_COLUMNS} FROM knowledge WHERE tool = ? AND subject = ? AND kind = ? AND fingerprint = ?"
                " AND invalidated_at IS NULL AND superseded_by IS NULL ORDER BY id DESC LIMIT 1",
                (tool, situation.subject, situation.kind.value, fingerprint),
            ).fetchone()
            if row is not None and row[6] == stored_unblock:
                tx.execute("UPDATE knowledge SET last_verified_at = ?, confidence = CASE WHEN confidence + 0.1 > 1.0"
                           " THEN 1.0 ELSE confidence + 0.1 END WHERE id = ?", (now, row[0]))
                lesson_id = int(row[0])
            else:
                inserted = tx.execute(
                    "INSERT INTO knowledge (domain, tool, subject, kind, fingerprint, unblock, probe, content,"
                    " confidence, created_at, last_verified_at, source, metadata, host)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                    (domain, tool, situation.subject, situation.kind.value, fingerprint, unblock, probe,
                     redacted_prefix(_clean(content), CONTENT_LIMIT), 0.5, now, now, source,
                     json.dumps(dict(metadata or {})),
                     self._host),
                ).fetchone()
                lesson_id = int(inserted[0])
                if row is not None:
                    tx.execute("UPDATE knowledge SET superseded_by = ? WHERE id = ?", (lesson_id, row[0]))
        found = self.get(lesson_id)
        assert found is not None
        return found

    def invalidate(self, lesson_id: int, reason: str, *, now_s: float | None = None) -> bool:
        """Close a lesson (its row stays, with ``invalidated_at`` and the reason in its
        metadata). True when an active lesson was closed."""
        now = time.time() if now_s is None else now_s
        with self._write() as tx:
            row = tx.execute("SELECT metadata FROM knowledge WHERE id = ? AND invalidated_at IS NULL",
                             (lesson_id,)).fetchone()
            if row is None:
                return False
            metadata = {**json.loads(row[0] or "{}"), "invalidated_because": reason}
            tx.execute("UPDATE knowledge SET invalidated_at = ?, metadata = ? WHERE id = ?",
                       (now, json.dumps(metadata), lesson_id))
        return True

    def verified(self, lesson_id: int, *, now_s: float | None = None) -> None:
        """A probe confirmed the lesson still holds: move ``last_verified_at``."""
        with self._write() as tx:
            tx.execute("UPDATE knowledge SET last_verified_at = ? WHERE id = ?",
                       (time.time() if now_s is None else now_s, lesson_id))

    # -- reading -------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """This machine as the lessons it records name it (:func:`unstuck.store.urls.machine_id`)."""
        return self._host

    def get(self, lesson_id: int) -> Lesson | None:
        """One lesson by id (active or not), or ``None``."""
        row = self._db.one(f"SELECT {self._columns} FROM knowledge WHERE id = ?", (lesson_id,))
        return self._lesson(row) if row is not None else None

    def on_subject(self, subject: str) -> list[Lesson]:
        """Active lessons on ``subject``, newest first (an index serves it)."""
        rows = self._db.all(
            f"SELECT {self._columns} FROM knowledge WHERE subject = ? AND invalidated_at IS NULL"
            " AND superseded_by IS NULL ORDER BY id DESC", (subject,),
        )
        return [self._lesson(r) for r in rows]

    def match(self, subject: str, fingerprint: str) -> Lesson | None:
        """The newest active lesson on ``subject`` recorded under ``fingerprint`` (an index
        serves it), or ``None``. The loop itself uses :meth:`on_subject`, so that it takes a
        fingerprint only when a lesson on the subject exists."""
        row = self._db.one(
            f"SELECT {self._columns} FROM knowledge WHERE subject = ? AND fingerprint = ? AND invalidated_at IS NULL"
            " AND superseded_by IS NULL ORDER BY id DESC LIMIT 1", (subject, fingerprint),
        )
        return self._lesson(row) if row is not None else None

    def active(self, *, tools: Iterable[str] | None = None, limit: int | None = None) -> list[Lesson]:
        """Active lessons, most recently verified first (then newest id); only those declared
        by ``tools`` when given; at most ``limit`` (all when ``None``).

        The turn-start query (:meth:`unstuck.guard.lessons.LessonKeeper.known_blockers`). With
        ``tools``, on SQLite one indexed seek per tool (:data:`ACTIVE_BY_TOOL_SQL`, at most
        ``limit`` rows each) and a merge: its cost grows with ``len(tools) * limit``, not with
        the number of lessons stored; on PostgreSQL one query (``tool = ANY(…)``), so one round
        trip to the server.

        Raises:
            ValueError: when ``limit`` is negative.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"LessonStore.active: limit must be 0 or more, got {limit}")
        bound = _NO_LIMIT if limit is None else limit
        columns = f"SELECT {self._columns} "
        if tools is None:
            return [self._lesson(r) for r in self._db.all(ACTIVE_SQL.replace(f"SELECT {_COLUMNS} ", columns),
                                                          (bound,))]
        names = sorted(set(tools))
        if self.engine is Engine.POSTGRESQL:  # one round trip: the server merges the index seeks
            return [self._lesson(r) for r in self._db.all(
                f"{columns}FROM knowledge WHERE {_ACTIVE} AND tool = ANY(?)"
                " ORDER BY last_verified_at DESC, id DESC LIMIT ?", (names, bound))]
        by_tool = ACTIVE_BY_TOOL_SQL.replace(f"SELECT {_COLUMNS} ", columns)
        rows = [self._db.all(by_tool, (name, bound)) for name in names]
        merged = heapq.merge(*rows, key=lambda row: (-row[11], -row[0]))
        return [self._lesson(r) for r in itertools.islice(merged, limit)]

    def all(self) -> list[Lesson]:
        """Every lesson, closed ones included, newest first."""
        return [self._lesson(r) for r in self._db.all(f"SELECT {self._columns} FROM knowledge ORDER BY id DESC")]

    def search(self, text: str, *, limit: int = 20) -> list[Lesson]:
        """Lessons whose content, subject or tool match ``text``, best first: every word as
        given, no query syntax (SQLite: FTS5 with each word quoted, ranked by bm25;
        PostgreSQL: ``plainto_tsquery('simple', …)`` over the lesson's ``search`` vector,
        ranked by ``ts_rank``)."""
        words = [w for w in "".join(c if c.isprintable() else " " for c in text).split() if w]
        if not words:
            return []
        columns = ", ".join(c if c.startswith("'") else "k." + c for c in map(str.strip, self._columns.split(",")))
        if self.engine is Engine.POSTGRESQL:
            rows = self._db.all(
                f"SELECT {columns} FROM knowledge k, plainto_tsquery('simple', ?) q WHERE k.search @@ q"
                " ORDER BY ts_rank(k.search, q) DESC, k.id DESC LIMIT ?", (" ".join(words), limit))
            return [self._lesson(r) for r in rows]
        query = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self._db.all(
            f"SELECT {columns} FROM knowledge_fts f"
            " JOIN knowledge k ON k.id = f.rowid WHERE knowledge_fts MATCH ? ORDER BY rank LIMIT ?",
            (query, limit),
        )
        return [self._lesson(r) for r in rows]


#: A ``LIMIT`` no store reaches (SQLite reads a negative one as none; PostgreSQL does not).
_NO_LIMIT = 2**62


def _store_url(target: Path | str | StoreURL | None) -> StoreURL:
    try:
        url = store_for(StoreRole.LESSONS, target)
    except UnstuckError as exc:
        raise LessonStoreError(f"lesson store {exc}") from None
    return url if url is not None else StoreURL(Engine.SQLITE, path=default_store_path())


def _clean(text: str) -> str:
    """Valid UTF-8 for SQLite (lone surrogates become U+FFFD), no control or escape sequence
    (:func:`unstuck.core.text.for_terminal`: a lesson is shown on terminals and in prompts), one
    line; the store boundary then redacts it, after the escapes are gone, so a token split by
    an escape sequence is whole again when it is looked for."""
    return for_terminal(clean_text(text)).replace("\n", " ").replace("\t", " ")


def _lesson(row: Sequence[Any]) -> Lesson:
    probe_raw = json.loads(row[7]) if row[7] else None
    probe = Probe.of(probe_raw["tool"], probe_raw.get("args") or {}) if probe_raw else None
    return Lesson(
        id=row[0], domain=row[1], signature=Signature(row[2], row[3], Kind(row[4]), row[5]), unblock=row[6],
        probe=probe, content=row[8], confidence=row[9], created_at=row[10], last_verified_at=row[11],
        invalidated_at=row[12], superseded_by=row[13], source=row[14], metadata=json.loads(row[15] or "{}"),
        host=row[16] if len(row) > 16 else "",
    )


#: The text columns of ``knowledge`` before schema 4 added ``host``: what the redacting
#: migrations write again.
_TEXT_COLUMNS = ("domain", "tool", "subject", "kind", "fingerprint", "unblock", "probe", "content", "source",
                 "metadata")


def _indexes_2(db: Transaction) -> None:
    """Schema 1 -> 2: the indexes of :data:`_INDEXES_2`. The rows stay as they are."""
    for statement in _INDEXES_2:
        db.execute(statement)


def _redact_3(db: Transaction) -> None:
    """Schema 2 -> 3: every lesson recorded before redaction, redacted
    (:func:`unstuck.store.engines.redact_rows`). Only changed rows are updated; the ``knowledge_au``
    trigger (``AFTER UPDATE OF content``) deletes each changed lesson's old FTS row, with its
    old values as an external-content FTS5 table needs, and indexes the new content
    (sqlite.org, "SQLite FTS5 Extension", section 4.4.3, external content tables)."""
    redact_rows(db, "knowledge", ("id",), _TEXT_COLUMNS)


def _host_4(db: Transaction) -> None:
    """Schema 3 -> 4: each lesson names the machine that recorded it (``host``; ``""`` for
    the lessons already there, which were recorded on the machine the file is on). A file
    that has the column already (written by a later layout, then stamped older) keeps it."""
    if "host" not in {row[1] for row in db.execute("PRAGMA table_info(knowledge)").fetchall()}:
        db.execute("ALTER TABLE knowledge ADD COLUMN host TEXT NOT NULL DEFAULT ''")


def _redact_5(db: Transaction) -> None:
    """Schema 4 -> 5 (issue 23): every text column of every lesson redacted as the store
    boundary writes it now (:func:`unstuck.store.engines.redact_rows`): subjects, tools and hosts,
    which schema 3 kept as they were, and tokens of formats added since."""
    redact_rows(db, "knowledge", ("id",), (*_TEXT_COLUMNS, "host"))


#: The schema steps, in order: step ``i`` turns schema ``i + 1`` into ``i + 2``
#: (:func:`unstuck.store.sqlite.migrate`); the last gives :data:`_SCHEMA_VERSION`.
_MIGRATIONS: tuple[Migration, ...] = (_indexes_2, _redact_3, _host_4, _redact_5)
