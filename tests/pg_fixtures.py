"""pytest fixtures for a real PostgreSQL server (tests/pg_cluster.py): import the ones a test
module uses, e.g. ``from pg_fixtures import pg_cluster, pg_url  # noqa: F401``.

``pg_cluster`` (one :class:`pg_cluster.PostgresCluster` per test session, stopped and removed at
its end) and ``pg_url`` (its database's ``postgresql://`` URL, with the password). A test that
uses them is skipped, with the reason, when no PostgreSQL server programs are installed
(``bootstrap`` installs Debian's ``postgresql``, so CI has them); :data:`requires_postgres`
marks a test that starts clusters of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pg_cluster import DEBIAN_BIN_GLOB, PostgresCluster, find_bin_dir

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
