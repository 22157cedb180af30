"""Store URLs (SQLite file or PostgreSQL server) and PostgreSQL connections, against a real
throw-away PostgreSQL cluster (tests/pg_cluster.py).

Expected values come from the syntax each form follows: RFC 3986 (scheme, authority, path;
``%`` escapes) for ``sqlite:``, and libpq's URI syntax with its documented examples
(PostgreSQL documentation, 34.1.1.2 "Connection URIs") for ``postgresql://``."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from urllib.parse import quote

import psutil
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pg_cluster import PostgresCluster, free_port
from pg_fixtures import requires_postgres
from unstuck.core.errors import UnstuckError
from unstuck.core.redact import MASK
from unstuck.store.urls import (
    ENV_VAR,
    HOST_ENV,
    Engine,
    StoreConnectionError,
    StoreRole,
    StoreURL,
    StoreURLError,
    connect_postgres,
    machine_id,
    parse_store_url,
    postgres_pool,
    store_for,
    store_url_for,
    store_url_from_env,
)

# -- SQLite forms ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "path"), [
    ("sqlite:///var/lib/unstuck/journal.db", Path("/var/lib/unstuck/journal.db")),  # empty authority, absolute path
    ("sqlite:journal/lessons.db", Path("journal/lessons.db")),  # RFC 3986 path-rootless
    ("sqlite:///tmp/a%20b.db", Path("/tmp/a b.db")),  # %20 is a space
    ("/srv/unstuck/journal.db", Path("/srv/unstuck/journal.db")),  # a plain path
    ("lessons.db", Path("lessons.db")),
])
def test_sqlite_urls_and_plain_paths_name_an_sqlite_file(text: str, path: Path) -> None:
    url = parse_store_url(text)
    assert url == StoreURL(Engine.SQLITE, path=path)
    assert url.conninfo is None


def test_a_plain_path_starting_with_tilde_is_under_the_home_directory() -> None:
    assert parse_store_url("~/lessons.db").path == Path.home() / "lessons.db"


@pytest.mark.parametrize(("text", "named"), [
    ("", "empty store URL"),
    ("   ", "empty store URL"),
    ("mysql://db/unstuck", "unknown scheme 'mysql'"),
    ("file:///tmp/x.db", "unknown scheme 'file'"),
    ("PostgreSQL://db/unstuck", "in lower case"),
    ("sqlite://fileserver/x.db", "names host 'fileserver'"),
    ("sqlite:///x.db?mode=ro", "takes no query (?mode=ro)"),
    ("sqlite:///x.db#top", "takes no fragment (#top)"),
    ("sqlite:", "names no file"),
    ("sqlite:///tmp/bad%zz.db", "invalid %-escape '%zz' in the path"),
    ("/tmp/x\x00.db", "NUL character"),
])
def test_bad_sqlite_or_unknown_urls_name_the_bad_part(text: str, named: str) -> None:
    with pytest.raises(StoreURLError) as caught:
        parse_store_url(text)
    assert named in str(caught.value)
    assert isinstance(caught.value, UnstuckError) and isinstance(caught.value, ValueError)


# -- PostgreSQL forms (libpq's documented examples) ---------------------------------------------


@pytest.mark.parametrize(("text", "hosts", "ports", "database", "user"), [
    ("postgresql://", ("",), (), None, None),
    ("postgresql://localhost", ("localhost",), (), None, None),
    ("postgresql://localhost:5433", ("localhost",), (5433,), None, None),
    ("postgresql://localhost/mydb", ("localhost",), (), "mydb", None),
    ("postgresql://user@localhost", ("localhost",), (), None, "user"),
    ("postgresql://user:secret@localhost", ("localhost",), (), None, "user"),
    ("postgresql://other@localhost/otherdb?connect_timeout=10&application_name=myapp",
     ("localhost",), (), "otherdb", "other"),
    ("postgresql://host1:123,host2:456/somedb?target_session_attrs=any&application_name=myapp",
     ("host1", "host2"), (123, 456), "somedb", None),
    ("postgresql:///mydb?host=localhost&port=5433", ("localhost",), (5433,), "mydb", None),
    ("postgresql://[2001:db8::1234]/database", ("2001:db8::1234",), (), "database", None),
    ("postgresql://[::1]:5433/database", ("::1",), (5433,), "database", None),
    ("postgresql:///dbname?host=/var/lib/postgresql", ("/var/lib/postgresql",), (), "dbname", None),
    ("postgresql://%2Fvar%2Flib%2Fpostgresql/dbname", ("/var/lib/postgresql",), (), "dbname", None),
    ("postgres://u@db.internal:6432/journal", ("db.internal",), (6432,), "journal", "u"),
])
def test_libpq_uris_are_read_by_libpq_syntax(text: str, hosts: tuple[str, ...], ports: tuple[int, ...],
                                             database: str | None, user: str | None) -> None:
    url = parse_store_url(text)
    assert url.engine is Engine.POSTGRESQL
    assert url.conninfo == text  # handed to libpq as given
    assert url.path is None
    assert (url.hosts, url.ports, url.database, url.user) == (hosts, ports, database, user)


@pytest.mark.parametrize(("text", "named"), [
    ("postgresql://db:99999/x", "port '99999' is not a number from 1 to 65535"),
    ("postgresql://db:0/x", "port '0' is not a number from 1 to 65535"),
    ("postgresql://db:pg/x", "port 'pg' is not a number from 1 to 65535"),
    ("postgresql://[::1/x", "has no closing ']'"),
    ("postgresql://[::1]x/y", "unexpected 'x' after IPv6 host [::1]"),
    ("postgresql://db/x?sslmode", "query parameter 'sslmode' is not name=value"),
    ("postgresql://db/x?=1", "is not name=value"),
    ("postgresql://db/x%zz", "invalid %-escape '%zz' in the database name"),
    ("postgresql://db/x%4", "invalid %-escape '%4' in the database name"),
    ("postgresql://db/x%00", "%00 (a NUL byte) in the database name"),
    ("postgresql://a,b,c/x?port=1,2", "3 hosts but 2 ports"),
    ("postgresql://db/x#frag", "takes no fragment"),
])
def test_bad_libpq_uris_name_the_bad_part(text: str, named: str) -> None:
    with pytest.raises(StoreURLError) as caught:
        parse_store_url(text)
    assert named in str(caught.value)


def test_a_bad_escape_in_the_password_is_refused_without_quoting_the_password() -> None:
    with pytest.raises(StoreURLError) as caught:
        parse_store_url("postgresql://app:hunter%zz2@db/x")
    assert "password" in str(caught.value)
    assert "hunter" not in str(caught.value)


def test_a_bad_uri_message_masks_the_password() -> None:
    with pytest.raises(StoreURLError) as caught:
        parse_store_url("postgresql://app:hunter2secret@db:port/x")
    assert "hunter2secret" not in str(caught.value)
    assert f"app:{MASK}@db:port" in str(caught.value)


@pytest.mark.parametrize("text", [
    "postgresql://app:hunter2secret@db/x",
    "postgresql://db/x?user=app&password=hunter2secret",
])
def test_the_password_is_never_shown_in_repr_str_or_shown(text: str) -> None:
    url = parse_store_url(text)
    for rendered in (repr(url), str(url), url.shown):
        assert "hunter2secret" not in rendered
        assert MASK in rendered


@given(host=st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True),
       port=st.integers(1, 65535),
       database=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20),
       password=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=8, max_size=20))
def test_any_escaped_database_and_password_read_back_and_the_password_stays_hidden(
        host: str, port: int, database: str, password: str) -> None:
    text = f"postgresql://app:{quote(password, safe='')}@{host}:{port}/{quote(database, safe='')}"
    url = parse_store_url(text)
    assert (url.hosts, url.ports, url.database, url.user) == ((host,), (port,), database, "app")
    assert url.shown == f"postgresql://app:{MASK}@{host}:{port}/{quote(database, safe='')}"
    assert url.where() == f"{host}:{port}"


def test_where_names_each_host_with_its_port_or_the_default_5432() -> None:
    assert parse_store_url("postgresql://a:6000,b/x?").where() == "a:6000, b:5432"
    assert parse_store_url("postgresql://[::1]/x").where() == "[::1]:5432"
    assert parse_store_url("postgresql:///x").where() == "default host:5432"


# -- the environment variable -------------------------------------------------------------------


def test_the_store_comes_from_unstuck_store_when_set() -> None:
    assert ENV_VAR == "UNSTUCK_STORE"
    assert store_url_from_env({}) is None
    assert store_url_from_env({ENV_VAR: "  "}) is None
    assert store_url_from_env({ENV_VAR: "sqlite:///var/j.db"}) == StoreURL(Engine.SQLITE, path=Path("/var/j.db"))
    assert store_url_from_env({ENV_VAR: "postgresql://db/j"}) == parse_store_url("postgresql://db/j")


def test_a_bad_unstuck_store_names_the_variable() -> None:
    with pytest.raises(StoreURLError) as caught:
        store_url_from_env({ENV_VAR: "redis://cache/0"})
    assert str(caught.value).startswith("UNSTUCK_STORE: ")
    assert "unknown scheme 'redis'" in str(caught.value)


def test_the_store_is_read_from_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "sqlite:lessons.db")
    assert store_url_from_env() == StoreURL(Engine.SQLITE, path=Path("lessons.db"))


# -- a real server -----------------------------------------------------------------------------


def refusing_url(password: str = "s3cr3t-pass") -> tuple[str, int]:
    """A URL of a port on 127.0.0.1 that nothing listens on (the kernel's free port)."""
    port = free_port()
    return f"postgresql://unstuck:{password}@127.0.0.1:{port}/unstuck", port


def test_a_connection_reaches_the_clusters_database_as_its_user(pg_url: str) -> None:
    with connect_postgres(parse_store_url(pg_url)) as connection:
        row = connection.execute("select current_database(), current_user, current_setting('application_name')")
        assert row.fetchone() == ("unstuck", "unstuck", "unstuck")


def test_a_connection_over_the_unix_socket_needs_no_password(pg_cluster: PostgresCluster) -> None:
    url = parse_store_url(pg_cluster.socket_url)
    assert url.hosts == (str(pg_cluster.socket_dir),)
    with connect_postgres(url, autocommit=True) as connection:
        assert connection.autocommit
        assert connection.execute("select inet_server_addr()").fetchone() == (None,)  # NULL on a Unix socket


def test_a_pool_hands_out_separate_server_connections(pg_url: str) -> None:
    with postgres_pool(parse_store_url(pg_url), min_size=1, max_size=2) as pool:
        assert (pool.min_size, pool.max_size) == (1, 2)
        with pool.connection() as first, pool.connection() as second:
            pids = {conn.execute("select pg_backend_pid()").fetchone() for conn in (first, second)}
        assert len(pids) == 2
    assert pool.closed


def test_a_refused_connection_names_host_and_port_but_not_the_password() -> None:
    text, port = refusing_url()
    with pytest.raises(StoreConnectionError) as caught:
        connect_postgres(parse_store_url(text), connect_timeout=2)
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message
    assert "s3cr3t-pass" not in message
    assert "Connection refused" in message  # libpq quotes strerror(ECONNREFUSED)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


def test_a_pool_that_cannot_open_names_host_and_port_but_not_the_password() -> None:
    text, port = refusing_url()
    with pytest.raises(StoreConnectionError) as caught:
        postgres_pool(parse_store_url(text), connect_timeout=2, open_timeout=0.5)
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert "s3cr3t-pass" not in str(caught.value)


def test_a_pool_on_a_refused_port_fails_with_libpqs_reason_before_its_open_timeout(
        capfd: pytest.CaptureFixture[str]) -> None:
    text, _ = refusing_url()
    started = time.monotonic()
    with pytest.raises(StoreConnectionError, match="Connection refused"):
        postgres_pool(parse_store_url(text), connect_timeout=2, open_timeout=60)
    assert time.monotonic() - started < 30  # one direct attempt, not a minute of the pool's retries
    assert "error connecting" not in capfd.readouterr().err  # the pool's warnings never reach the terminal


def test_a_wrong_password_is_refused_by_the_server_and_not_repeated(pg_cluster: PostgresCluster) -> None:
    text = f"postgresql://unstuck:wrong-{pg_cluster.password}@127.0.0.1:{pg_cluster.port}/unstuck"
    with pytest.raises(StoreConnectionError) as caught:
        connect_postgres(parse_store_url(text))
    message = str(caught.value)
    # PostgreSQL's auth.c: "password authentication failed for user \"%s\""
    assert 'password authentication failed for user "unstuck"' in message
    assert f"127.0.0.1:{pg_cluster.port}" in message
    assert pg_cluster.password not in message


def test_a_missing_database_is_named(pg_cluster: PostgresCluster) -> None:
    with pytest.raises(StoreConnectionError) as caught:
        connect_postgres(parse_store_url(pg_cluster.url_for("no_such_db")))
    assert 'database "no_such_db" does not exist' in str(caught.value)  # postinit.c's FATAL message
    assert pg_cluster.password not in str(caught.value)


def test_a_parameter_libpq_does_not_know_is_a_url_error_before_any_connection() -> None:
    url = parse_store_url("postgresql://app:hunter2secret@127.0.0.1:1/x?no_such_option=1")
    with pytest.raises(StoreURLError) as caught:
        connect_postgres(url)
    assert "no_such_option" in str(caught.value)  # libpq: invalid URI query parameter: "no_such_option"
    assert "hunter2secret" not in str(caught.value)


def test_an_sqlite_url_cannot_open_a_postgres_connection(tmp_path: Path) -> None:
    with pytest.raises(StoreURLError, match="is not a PostgreSQL URL"):
        connect_postgres(parse_store_url(str(tmp_path / "j.db")))


# -- the cluster itself --------------------------------------------------------------------------


def server_processes(root: Path) -> list[psutil.Process]:
    """Processes whose command line names a path under ``root`` (the postmaster's ``-D``)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(root) in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


@requires_postgres
@pytest.mark.slow
def test_the_cluster_stops_and_leaves_no_process_or_directory() -> None:
    with PostgresCluster(database="cleanup_check") as cluster:
        root, pid = cluster.root, cluster.postmaster_pid()
        assert pid is not None and psutil.pid_exists(pid)
        assert server_processes(root)
        with connect_postgres(parse_store_url(cluster.url)) as connection:
            assert connection.execute("select current_database()").fetchone() == ("cleanup_check",)
        if os.geteuid() == 0:
            assert psutil.Process(pid).uids().real != 0  # the server does not run as root
    assert not root.exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not [p for p in server_processes(root) if p.status() != psutil.STATUS_ZOMBIE]


@requires_postgres
@pytest.mark.slow
def test_the_cluster_is_removed_when_the_test_body_fails() -> None:
    with pytest.raises(RuntimeError, match="the test failed"), PostgresCluster() as cluster:
        root, pid = cluster.root, cluster.postmaster_pid()
        raise RuntimeError("the test failed")
    assert not root.exists()
    assert pid is not None and not [p for p in server_processes(root) if p.status() != psutil.STATUS_ZOMBIE]


# -- which store a role uses: the option, else UNSTUCK_STORE, else the caller's default ----------------


def test_a_postgresql_location_holds_both_stores_and_an_sqlite_one_is_a_folder_of_two_files() -> None:
    shared = parse_store_url("postgresql://u:pw@db.internal/unstuck")
    assert store_url_for(StoreRole.JOURNAL, shared) is shared and store_url_for(StoreRole.LESSONS, shared) is shared
    folder = parse_store_url("sqlite:///var/lib/unstuck")
    assert store_url_for(StoreRole.JOURNAL, folder).path == Path("/var/lib/unstuck/journal.db")
    assert store_url_for(StoreRole.LESSONS, folder).path == Path("/var/lib/unstuck/lessons.db")


def test_the_given_store_wins_over_the_variable_which_wins_over_none() -> None:
    environ = {ENV_VAR: "/srv/unstuck"}
    assert store_for(StoreRole.JOURNAL, "mine.db", environ=environ) == StoreURL(Engine.SQLITE, path=Path("mine.db"))
    assert store_for(StoreRole.JOURNAL, Path("/x/j.db"), environ=environ).path == Path("/x/j.db")  # type: ignore[union-attr]
    assert store_for(StoreRole.LESSONS, environ=environ) == StoreURL(Engine.SQLITE, path=Path("/srv/unstuck/lessons.db"))
    assert store_for(StoreRole.LESSONS, environ={}) is None and store_for(StoreRole.LESSONS, environ={ENV_VAR: " "}) is None
    with pytest.raises(StoreURLError, match=rf"^{ENV_VAR}: .*unknown scheme 'mysql'"):
        store_for(StoreRole.JOURNAL, environ={ENV_VAR: "mysql://db/x"})


def test_the_machine_id_is_the_variable_else_the_systems_machine_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_ENV, "runner-7")
    assert machine_id() == "runner-7"
    monkeypatch.delenv(HOST_ENV)
    etc = Path("/etc/machine-id")
    expected = etc.read_text(encoding="ascii").strip() if etc.is_file() else ""
    assert machine_id() == (expected or socket.gethostname())  # machine-id(5), else the host name


@pytest.mark.parametrize("text", [
    "postgresql://u:Ab/Cd9@db.internal/unstuck",  # '/' in the password, unescaped
    "postgresql://u:12/34@127.0.0.1/unstuck",
    "postgresql://u:Ab@Cd9@db.internal/unstuck",  # '@' in the password, unescaped
])
def test_an_unescaped_slash_or_at_sign_in_the_password_is_refused_with_the_password_masked(text: str) -> None:
    password = text.split("//", 1)[1].split(":", 1)[1].rsplit("@", 1)[0]
    with pytest.raises(StoreURLError, match=r"must be written %40 or %2F") as caught:
        parse_store_url(text)
    assert password not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize("text", ["host=127.0.0.1 password=s3cr3t dbname=unstuck", "dbname=unstuck", " user=x"])
def test_a_keyword_connection_string_is_refused_not_taken_for_a_file_name(text: str) -> None:
    # libpq's keyword/value form (PostgreSQL documentation, 34.1.1.1) is not a store URL
    with pytest.raises(StoreURLError, match="write it as postgresql://") as caught:
        parse_store_url(text)
    assert "s3cr3t" not in str(caught.value)
