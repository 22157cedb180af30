"""pytest fixtures for a real PostgreSQL server (tests/pg_cluster.py). tests/conftest.py
registers this module (``pytest_plugins``), so every test asks for the fixtures by name and a
test module imports only the names it uses as values (``from pg_fixtures import StoreTarget``).

``pg_cluster`` (one :class:`pg_cluster.PostgresCluster` per test session, stopped and removed at
its end) and ``pg_url`` (its database's ``postgresql://`` URL, with the password). A test that
uses them is skipped, with the reason, when no PostgreSQL server programs are installed
(``bootstrap`` installs Debian's ``postgresql``, so CI has them); :data:`requires_postgres`
marks a test that starts clusters of its own.

``store_target`` runs a test once per store engine (ids ``sqlite`` and ``postgresql``), each
time on a fresh, empty store: an SQLite file in the test's ``tmp_path``, or a database of its
own on the session's cluster (made with ``createdb``, dropped after the test). It gives a
:class:`StoreTarget`: the store URL to open a journal or lesson store on, and
:meth:`StoreTarget.rows` / :meth:`StoreTarget.execute` to look into the database through a
connection of their own, as another process would.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from pg_cluster import DEBIAN_BIN_GLOB, PostgresCluster, find_bin_dir
from unstuck.store.engines import postgres_sql
from unstuck.store.urls import Engine, parse_store_url

NO_POSTGRES = (f"no PostgreSQL server programs (initdb, pg_ctl, postgres, createdb) on PATH or in {DEBIAN_BIN_GLOB}; "
               "./bootstrap installs Debian's postgresql package")

#: Skips a test when there is no PostgreSQL to start.
requires_postgres = pytest.mark.skipif(find_bin_dir() is None, reason=NO_POSTGRES)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """A throw-away PostgreSQL cluster shared by the session's tests."""
    if find_bin_dir() is None:
        pytest.skip(NO_POSTGRES)
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def pg_url(pg_cluster: PostgresCluster) -> str:
    """``postgresql://unstuck:<password>@127.0.0.1:<port>/unstuck`` on :func:`pg_cluster`."""
    return pg_cluster.url


@dataclass(frozen=True, slots=True)
class StoreTarget:
    """A fresh, empty store for one test: ``url`` (``sqlite:///<tmp_path>/store.db``, or
    ``postgresql://unstuck:<password>@127.0.0.1:<port>/<database>``) to open it by, its
    ``engine``, and ``path`` (the SQLite file; ``None`` on PostgreSQL)."""

    engine: Engine
    url: str
    path: Path | None = None

    @property
    def where(self) -> str:
        """The store as a journal's or lesson store's messages name it: the file's path, or
        the URL with its password masked (:attr:`unstuck.store.urls.StoreURL.shown`)."""
        return str(self.path) if self.path is not None else parse_store_url(self.url).shown

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of ``sql`` (``?`` placeholders) read through a connection of its own:
        ``sqlite3`` on the file, ``psycopg`` on the database (autocommit), closed after."""
        if self.path is not None:
            db = sqlite3.connect(self.path)
            try:
                return [tuple(row) for row in db.execute(sql, tuple(params)).fetchall()]
            finally:
                db.close()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            return [tuple(row) for row in connection.execute(postgres_sql(sql), tuple(params)).fetchall()]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement (``?`` placeholders) through a connection of its own and commit."""
        if self.path is not None:
            db = sqlite3.connect(self.path)
            try:
                with db:
                    db.execute(sql, tuple(params))
            finally:
                db.close()
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(postgres_sql(sql), tuple(params))

    def tables(self) -> set[str]:
        """The names of the tables in the store (SQLite's ``sqlite_master``; PostgreSQL's
        ``public`` schema)."""
        if self.engine is Engine.SQLITE:
            return {row[0] for row in self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {row[0] for row in self.rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}

    def schema_version(self, store: str) -> int | None:
        """The schema version the database records for ``store`` (``journal``, ``lessons``):
        SQLite's ``PRAGMA user_version`` (one store per file), PostgreSQL's ``unstuck_schema``
        row (``None`` without one)."""
        if self.engine is Engine.SQLITE:
            return int(self.rows("PRAGMA user_version")[0][0])
        if "unstuck_schema" not in self.tables():
            return None
        found = self.rows("SELECT version FROM unstuck_schema WHERE store = ?", (store,))
        return int(found[0][0]) if found else None

    def set_schema_version(self, store: str, version: int) -> None:
        """Record ``version`` for ``store`` as a later unstuck would (``PRAGMA user_version``;
        the ``unstuck_schema`` row)."""
        if self.engine is Engine.SQLITE:
            self.execute(f"PRAGMA user_version = {int(version)}")
        else:
            self.execute("UPDATE unstuck_schema SET version = ? WHERE store = ?", (version, store))


#: Names of the databases :func:`store_target` makes (the pid keeps parallel sessions apart).
_DATABASES = (f"store_{os.getpid()}_{n}" for n in itertools.count(1))


def _fresh_database(request: pytest.FixtureRequest) -> Iterator[StoreTarget]:
    cluster: PostgresCluster = request.getfixturevalue("pg_cluster")
    name = next(_DATABASES)
    yield StoreTarget(Engine.POSTGRESQL, cluster.create_database(name))
    import psycopg

    with psycopg.connect(cluster.url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=[Engine.SQLITE.value, Engine.POSTGRESQL.value])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreTarget]:
    """A fresh, empty store per test and engine (see the module doc). The ``postgresql`` case
    is skipped with :data:`NO_POSTGRES` when there are no server programs; its database is
    dropped after the test (``DROP DATABASE ... WITH (FORCE)``, PostgreSQL 13: connections a
    failed test left open are ended first)."""
    if request.param == Engine.SQLITE.value:
        path = tmp_path / "store.db"
        yield StoreTarget(Engine.SQLITE, "sqlite://" + quote(str(path)), path)
        return
    yield from _fresh_database(request)


@pytest.fixture
def pg_store(request: pytest.FixtureRequest) -> Iterator[StoreTarget]:
    """A fresh, empty PostgreSQL database of its own, as :func:`store_target` makes it, for
    a test of what only PostgreSQL has (skipped with :data:`NO_POSTGRES` without a server)."""
    yield from _fresh_database(request)
