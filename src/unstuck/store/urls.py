"""Where a store lives and how it is reached: the store URL vocabulary (an SQLite file or a
PostgreSQL server), and the connections to a PostgreSQL one.

A store URL is one of (:func:`parse_store_url`):

* ``sqlite:///abs/path`` — an SQLite file at an absolute path (RFC 3986: scheme, an empty
  authority, an absolute path; RFC 8089 reads ``file:///…`` the same way). ``%`` escapes are
  decoded. A non-empty authority (``sqlite://host/…``), a query or a fragment is refused.
* ``sqlite:relative/path`` — an SQLite file relative to the working directory (RFC 3986's
  rootless path), kept relative.
* a plain path (``/var/lib/unstuck/journal.db``, ``journal.db``, ``~/x.db`` with ``~``
  expanded) — an SQLite file.
* ``postgresql://…`` or ``postgres://…`` — a PostgreSQL server, in libpq's URI syntax
  (PostgreSQL documentation, "Connection Strings", 34.1.1.2 "Connection URIs"):
  ``postgresql://[userspec@][hostspec][/dbname][?paramspec]`` with ``userspec`` =
  ``user[:password]``, ``hostspec`` = ``[host][:port][,...]`` (an IPv6 address in ``[ ]``),
  ``paramspec`` = ``name=value[&...]``, ``%`` escapes anywhere. The text is kept as given and
  handed to libpq, which reads the parameters; this module checks the structure (a port that is
  a number from 1 to 65535, ``=`` in every parameter, valid ``%`` escapes, no ``%00``).

The environment variable :data:`ENV_VAR` (``UNSTUCK_STORE``) names where unstuck keeps its
stores when neither the CLI nor the library is given one (:func:`store_for`): a PostgreSQL
database holds the journal and the lessons both; an SQLite location is a folder holding
``journal.db`` and ``lessons.db`` (:data:`SQLITE_FILES`).

A URL's password never appears in a message or a ``repr``: :attr:`StoreURL.shown` has it
replaced by :data:`unstuck.core.redact.MASK`.

PostgreSQL (the ``postgres`` extra: ``pip install 'unstuck[postgres]'``, psycopg 3):
:func:`connect_postgres` opens one connection and :func:`postgres_pool` a
``psycopg_pool.ConnectionPool``; a server that cannot be reached, refuses the login or does
not have the database is a :class:`StoreConnectionError` naming the hosts and ports tried and
libpq's reason (with the password masked), the psycopg error as its ``__cause__``.
"""

from __future__ import annotations

import enum
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from unstuck.core.errors import UnstuckError
from unstuck.core.redact import MASK, redact
from unstuck.processes import identity

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = [
    "CONNECT_TIMEOUT",
    "ENV_VAR",
    "HOST_ENV",
    "POOL_MAX_IDLE",
    "POOL_MAX_SIZE",
    "POOL_MIN_SIZE",
    "POOL_OPEN_TIMEOUT",
    "POOL_TIMEOUT",
    "SQLITE_FILES",
    "Engine",
    "StoreConnectionError",
    "StoreRole",
    "StoreURL",
    "StoreURLError",
    "connect_postgres",
    "default_store_folder",
    "machine_id",
    "parse_store_url",
    "postgres_pool",
    "store_for",
    "store_url_for",
    "store_url_from_env",
]

#: The environment variable naming the store (a store URL or a plain path).
ENV_VAR = "UNSTUCK_STORE"

#: The environment variable that names the machine a process runs on, as stores record it
#: (lease owners, the host that recorded a lesson), in place of what the system says
#: (``/etc/machine-id``, the boot id): containers that share a kernel, or tests that play
#: several machines, set it. Owned by :mod:`unstuck.processes.identity`.
HOST_ENV = identity.HOST_ENV

#: Seconds libpq waits for each host to answer (libpq's ``connect_timeout``, whole seconds;
#: it treats values below 2 as 2).
CONNECT_TIMEOUT = 10

#: A pool's connections kept open, at most open, seconds a caller waits for one
#: (``psycopg_pool.ConnectionPool`` ``timeout``), and seconds an idle extra connection lives.
POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 8
POOL_TIMEOUT = 30.0
POOL_MAX_IDLE = 300.0
#: Seconds :func:`postgres_pool` waits for its first connections before it gives up.
POOL_OPEN_TIMEOUT = 20.0

#: The default port libpq uses (PostgreSQL documentation, 34.1.2 "Parameter Key Words", ``port``).
DEFAULT_PORT = 5432

_POSTGRES_PREFIXES = ("postgresql://", "postgres://")

# The pool logs a warning per failed reconnection; with no handler configured Python would print
# each to standard error (logging.lastResort), into the CLI's output. A caller's handlers still get them.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
#: A libpq keyword/value connection string (PostgreSQL documentation, 34.1.1.1 "Keyword/Value
#: Connection Strings"): a store URL must be a URI, and such text is no file name either.
_KEYWORD_CONNINFO = re.compile(r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode)\s*=")
_HEX = frozenset("0123456789abcdefABCDEF")


class StoreURLError(UnstuckError, ValueError):
    """A store URL that cannot be read: the message names the text (password masked) and the
    part that is wrong."""


class StoreConnectionError(UnstuckError, RuntimeError):
    """A PostgreSQL store that could not be connected to: the message names the hosts and
    ports tried, the database and user, and libpq's reason (password masked)."""


class Engine(enum.StrEnum):
    """The database engine behind a store."""

    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True, slots=True, repr=False)
class StoreURL:
    """Where one store lives.

    ``engine`` says which; ``path`` is the SQLite file (``None`` for PostgreSQL); ``conninfo``
    is the libpq URI as given (``None`` for SQLite; it may hold a password: show
    :attr:`shown`, never ``conninfo``). ``hosts`` and ``ports`` are the URI's host list, ``%``
    escapes decoded (an empty host means libpq's default: ``PGHOST`` or its Unix socket
    directory; a port of ``None`` means ``PGPORT`` or 5432); a ``host=``/``port=`` parameter in
    the query takes their place, as libpq reads it."""

    engine: Engine
    path: Path | None = None
    conninfo: str | None = None
    hosts: tuple[str, ...] = ()
    ports: tuple[int | None, ...] = ()
    database: str | None = None
    user: str | None = None

    @property
    def shown(self) -> str:
        """The URL for messages and logs: the path, or the URI with any password masked."""
        if self.engine is Engine.SQLITE:
            return f"sqlite:///{quote(str(self.path))}" if self.path and self.path.is_absolute() \
                else f"sqlite:{quote(str(self.path))}"
        return _mask_password(self.conninfo or "")

    def where(self) -> str:
        """``host:port`` of each host tried, comma-separated (``127.0.0.1:5432``,
        ``[::1]:5433``, ``default host:5432``), for messages."""
        hosts = self.hosts or ("",)
        ports = self.ports or (None,)
        if len(ports) == 1:
            ports = ports * len(hosts)
        shown = []
        for host, port in zip(hosts, ports, strict=False):
            name = f"[{host}]" if ":" in host else host or "default host"
            shown.append(f"{name}:{port or DEFAULT_PORT}")
        return ", ".join(shown)

    def __repr__(self) -> str:
        return f"StoreURL({self.shown!r})"

    def __str__(self) -> str:
        return self.shown


def parse_store_url(text: str) -> StoreURL:
    """Read a store URL or a plain path (see the module doc for the forms).

    Raises:
        StoreURLError: empty text, an unknown scheme (``mysql://…``), an SQLite URL with a host,
            query or fragment or no path, or a PostgreSQL URI that breaks libpq's syntax (a
            port that is not a number from 1 to 65535, an unclosed ``[``, a parameter without
            ``=``, a bad ``%`` escape); the message names the part.
    """
    if not text or not text.strip():
        raise StoreURLError("empty store URL: give sqlite:///path, postgresql://… or a file path")
    if "\x00" in text:
        raise StoreURLError(f"store URL {_mask_password(text)!r} holds a NUL character")
    if text.startswith(_POSTGRES_PREFIXES):
        return _parse_postgres(text)
    scheme, sep, rest = text.partition(":")
    if sep and rest.startswith("//") and scheme and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        lowered = scheme.lower()
        if lowered in ("postgresql", "postgres"):
            raise StoreURLError(f"store URL {_mask_password(text)!r}: write the scheme {lowered}:// in lower case "
                                "(libpq reads the prefix case-sensitively)")
        if lowered != "sqlite":
            raise StoreURLError(f"store URL {_mask_password(text)!r}: unknown scheme {scheme!r} "
                                "(sqlite or postgresql)")
    if scheme.lower() == "sqlite" and sep:
        return _parse_sqlite(text, rest)
    if _KEYWORD_CONNINFO.match(text):
        raise StoreURLError("store URL given as libpq keyword=value pairs (host=… dbname=…); write it as "
                            "postgresql://user@host:port/dbname (its password, if any, %-encoded)")
    return StoreURL(Engine.SQLITE, path=Path(text).expanduser())


def machine_id() -> str:
    """The machine this process runs on, as stores record it (the host of a lesson):
    :data:`HOST_ENV` when set, else ``/etc/machine-id`` (machine-id(5): a machine's unique
    id, set at installation, stable across reboots), else the host name."""
    override = os.environ.get(HOST_ENV, "").strip()
    if override:
        return override
    try:
        found = Path("/etc/machine-id").read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        found = ""
    return found or socket.gethostname()


class StoreRole(enum.StrEnum):
    """Which of unstuck's stores a URL is for."""

    JOURNAL = "journal"
    LESSONS = "lessons"


#: The file of each store in the folder that a shared SQLite location names (``--store``,
#: :data:`ENV_VAR`): one SQLite file holds one store.
SQLITE_FILES = {StoreRole.JOURNAL: "journal.db", StoreRole.LESSONS: "lessons.db"}


def store_url_for(role: StoreRole, shared: StoreURL) -> StoreURL:
    """The ``role`` store within a shared store location: a PostgreSQL database holds both
    stores (their tables do not overlap); an SQLite location is a folder holding one file per
    store (:data:`SQLITE_FILES`)."""
    if shared.engine is Engine.POSTGRESQL:
        return shared
    assert shared.path is not None
    return StoreURL(Engine.SQLITE, path=shared.path / SQLITE_FILES[role])


def default_store_folder() -> Path:
    """Where unstuck keeps its stores when nothing names a place (no option, no :data:`ENV_VAR`):
    the user data folder (platformdirs' ``user_data_path("unstuck")``: ``$XDG_DATA_HOME/unstuck``,
    else ``~/.local/share/unstuck`` on Linux), holding :data:`SQLITE_FILES`."""
    import platformdirs

    return platformdirs.user_data_path("unstuck")


def store_for(role: StoreRole, given: str | Path | StoreURL | None = None, *,
              environ: Mapping[str, str] | None = None) -> StoreURL | None:
    """Where the ``role`` store is: ``given`` (a CLI option or a library argument: a URL, a
    path or a :class:`StoreURL`) when there is one, else :data:`ENV_VAR` read as a shared
    location (:func:`store_url_for`), else ``None`` (the caller's default).

    Raises:
        StoreURLError: ``given`` or the variable is not a store URL (the variable is named).
    """
    if isinstance(given, StoreURL):
        return given
    if isinstance(given, Path):
        return StoreURL(Engine.SQLITE, path=given)
    if given is not None:
        return parse_store_url(given)
    shared = store_url_from_env(environ)
    return None if shared is None else store_url_for(role, shared)


def store_url_from_env(environ: Mapping[str, str] | None = None) -> StoreURL | None:
    """The store named by :data:`ENV_VAR` in ``environ`` (``os.environ`` by default), or
    ``None`` when it is unset or empty.

    Raises:
        StoreURLError: the variable holds a bad URL; the message names the variable.
    """
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    if not value.strip():
        return None
    try:
        return parse_store_url(value)
    except StoreURLError as error:
        raise StoreURLError(f"{ENV_VAR}: {error}") from error


def _parse_sqlite(text: str, rest: str) -> StoreURL:
    shown = _mask_password(text)
    for mark, part in (("#", "fragment"), ("?", "query")):
        if mark in rest:
            raise StoreURLError(f"store URL {shown!r}: an SQLite URL takes no {part} ({mark}{rest.split(mark, 1)[1]})")
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if authority:
            raise StoreURLError(f"store URL {shown!r}: an SQLite file is local, but the URL names host "
                                f"{authority!r} (write sqlite:///absolute/path)")
        path = slash + path
    else:
        path = rest
    _check_escapes(text, path, "path")
    decoded = unquote(path)
    if not decoded:
        raise StoreURLError(f"store URL {shown!r} names no file")
    return StoreURL(Engine.SQLITE, path=Path(decoded))


def _parse_postgres(text: str) -> StoreURL:
    shown = _mask_password(text)
    rest = text.split("://", 1)[1]
    if "#" in rest:
        raise StoreURLError(f"store URL {shown!r}: a PostgreSQL URI takes no fragment (#…); "
                            "write a '#' in a password as %23")
    # libpq looks for the userinfo's '@' before the first '/' (fe-connect.c, conninfo_uri_parse_options).
    head = rest.split("/", 1)[0]
    ats = rest.split("?", 1)[0].count("@")
    if ats > 1 or (ats == 1 and "@" not in head):
        raise StoreURLError(f"store URL {shown!r}: an '@' or '/' inside the user name or password must be written "
                            "%40 or %2F (RFC 3986 percent-encoding), or the URL names another host")
    user: str | None = None
    if "@" in head:
        userinfo, rest = rest.split("@", 1)
        name, _, password = userinfo.partition(":")
        _check_escapes(shown, name, "user")
        user = unquote(name) or None
        try:
            _check_escapes(shown, password, "password")
        except StoreURLError:  # the message would quote a piece of the password
            raise StoreURLError(f"store URL {shown!r}: invalid %-escape in the password "
                                "(write '%' itself as %25)") from None
    authority_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, rest = rest[:authority_end], rest[authority_end:]
    hosts, ports = _parse_hosts(shown, authority)
    database: str | None = None
    if rest.startswith("/"):
        path, question, query = rest[1:].partition("?")
        _check_escapes(shown, path, "database name")
        database = unquote(path) or None
        rest = question + query
    if rest.startswith("?"):
        for parameter in filter(None, rest[1:].split("&")):
            key, equals, value = parameter.partition("=")
            if not equals or not key:
                raise StoreURLError(f"store URL {shown!r}: query parameter {_mask_password(parameter)!r} "
                                    "is not name=value")
            _check_escapes(shown, key, "parameter name")
            _check_escapes(shown, value, f"parameter {key!r}")
            name, value = unquote(key), unquote(value)
            if name == "host":
                hosts = tuple(value.split(","))
            elif name == "port":
                ports = tuple(_port(shown, part) for part in value.split(","))
            elif name == "dbname":
                database = value or None
            elif name == "user":
                user = value or None
    if len(ports) > 1 and len(ports) != len(hosts):
        raise StoreURLError(f"store URL {shown!r}: {len(hosts)} hosts but {len(ports)} ports "
                            "(libpq wants one port, or one per host)")
    return StoreURL(Engine.POSTGRESQL, conninfo=text, hosts=hosts, ports=ports, database=database, user=user)


def _parse_hosts(shown: str, authority: str) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    hosts: list[str] = []
    ports: list[int | None] = []
    for spec in authority.split(","):
        if spec.startswith("["):
            close = spec.find("]")
            if close < 0:
                raise StoreURLError(f"store URL {shown!r}: IPv6 host {spec!r} has no closing ']'")
            host, after = spec[1:close], spec[close + 1:]
            if after and not after.startswith(":"):
                raise StoreURLError(f"store URL {shown!r}: unexpected {after!r} after IPv6 host [{host}]")
            port_text = after[1:] if after else ""
        else:
            host, _, port_text = spec.partition(":")
            _check_escapes(shown, host, "host")
            host = unquote(host)
        hosts.append(host)
        ports.append(_port(shown, port_text) if port_text else None)
    if all(port is None for port in ports):
        return tuple(hosts), ()
    return tuple(hosts), tuple(ports)


def _port(shown: str, text: str) -> int | None:
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise StoreURLError(f"store URL {shown!r}: port {text!r} is not a number from 1 to 65535")
    return int(text)


def _check_escapes(shown: str, part: str, what: str) -> None:
    """libpq's rule for ``%`` escapes (fe-connect.c, conninfo_uri_decode): ``%`` and two hex
    digits, never ``%00``."""
    index = part.find("%")
    while index >= 0:
        token = part[index + 1:index + 3]
        if len(token) < 2 or not set(token) <= _HEX:
            raise StoreURLError(f"store URL {shown!r}: invalid %-escape {part[index:index + 3]!r} in the {what}")
        if token == "00":
            raise StoreURLError(f"store URL {shown!r}: %00 (a NUL byte) in the {what}")
        index = part.find("%", index + 3)


def _mask_password(text: str) -> str:
    """``text`` with a URI's password (``scheme://user:PASSWORD@…``) and a ``password=``
    parameter replaced by :data:`MASK`; other secrets masked by :func:`unstuck.core.redact.redact`."""
    scheme, sep, rest = text.partition("://")
    if sep:
        before_query = rest.split("?", 1)[0]
        if "@" in before_query:  # up to the last '@': a password holding an unescaped '/' or '@' is hidden whole
            at = before_query.rindex("@")
            userinfo, after = rest[:at], rest[at + 1:]
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":" + MASK
            rest = userinfo + "@" + after
        if "?" in rest:
            path, query = rest.split("?", 1)
            query = "&".join(f"{part.partition('=')[0]}={MASK}" if part.partition("=")[0] == "password" else part
                             for part in query.split("&"))
            rest = path + "?" + query
        text = scheme + sep + rest
    return redact(text)


def _require_postgres(url: StoreURL) -> str:
    if url.engine is not Engine.POSTGRESQL or url.conninfo is None:
        raise StoreURLError(f"store URL {url.shown!r} is not a PostgreSQL URL")
    return url.conninfo


def _scrub(url: StoreURL, text: str) -> str:
    """``text`` (a libpq or psycopg message) with ``url``'s password masked, as written and
    decoded, and any URI password or other secret masked too."""
    text = _mask_password(text)
    raw = _password_of(url)
    for password in filter(None, {raw, unquote(raw or "")}):
        text = text.replace(password, MASK)
    return text


def _connection_error(url: StoreURL, error: BaseException) -> StoreConnectionError:
    reason = _scrub(url, str(error).strip() or type(error).__name__)
    who = f"database {url.database or '(default)'} as user {url.user or '(default)'}"
    return StoreConnectionError(f"cannot connect to PostgreSQL at {url.where()} ({who}; {url.shown}): {reason}")


def _password_of(url: StoreURL) -> str | None:
    text = url.conninfo or ""
    head = text.split("://", 1)[-1].split("/", 1)[0]
    if "@" in head and ":" in head.split("@", 1)[0]:
        return head.split("@", 1)[0].split(":", 1)[1] or None
    return None


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as error:
        raise StoreConnectionError("a PostgreSQL store needs psycopg 3: pip install 'unstuck[postgres]'") from error
    return psycopg


def connect_postgres(url: StoreURL, *, autocommit: bool = False,
                     connect_timeout: int = CONNECT_TIMEOUT) -> psycopg.Connection[tuple[Any, ...]]:
    """One psycopg connection to ``url`` (``application_name`` ``unstuck``, libpq's
    ``connect_timeout`` in seconds). The caller closes it (``with`` does).

    Raises:
        StoreURLError: ``url`` is not PostgreSQL, or libpq cannot read it (an unknown
            parameter).
        StoreConnectionError: psycopg is not installed, or the server cannot be reached,
            refuses the login or lacks the database (hosts, ports and libpq's reason named,
            the password masked; the psycopg error is the ``__cause__``).
    """
    conninfo = _require_postgres(url)
    pg = _import_psycopg()
    try:
        pg.conninfo.conninfo_to_dict(conninfo)
    except pg.ProgrammingError as error:
        raise StoreURLError(f"store URL {url.shown!r}: {_scrub(url, str(error))}") from error
    try:
        connection: psycopg.Connection[tuple[Any, ...]] = pg.connect(
            conninfo, autocommit=autocommit, connect_timeout=connect_timeout, application_name="unstuck")
    except pg.Error as error:
        raise _connection_error(url, error) from error
    return connection


def postgres_pool(url: StoreURL, *, min_size: int = POOL_MIN_SIZE, max_size: int = POOL_MAX_SIZE,
                  timeout: float = POOL_TIMEOUT, max_idle: float = POOL_MAX_IDLE,
                  connect_timeout: int = CONNECT_TIMEOUT, open_timeout: float = POOL_OPEN_TIMEOUT,
                  name: str = "unstuck") -> psycopg_pool.ConnectionPool:
    """An open ``psycopg_pool.ConnectionPool`` on ``url`` holding ``min_size`` connections
    (up to ``max_size``); a caller waits at most ``timeout`` seconds for a connection
    (``pool.connection()`` raises ``psycopg_pool.PoolTimeout`` after that), an extra idle
    connection closes after ``max_idle`` seconds, and each connection is checked before it is
    handed out (``ConnectionPool.check_connection``). The caller closes the pool (``with``
    does).

    One direct connection is tried first, so a server that refuses the connection or the login
    fails at once with libpq's reason; then the pool is opened waiting up to ``open_timeout``
    seconds for its first ``min_size`` connections. The pool's own warnings (``psycopg.pool``
    logger: each failed reconnection) reach a caller's logging configuration only, never
    standard error by Python's last-resort handler.

    Raises:
        StoreURLError: as :func:`connect_postgres`.
        StoreConnectionError: psycopg_pool is not installed, or the pool could not open its
            connections (the reason found by one direct connection attempt).
    """
    conninfo = _require_postgres(url)
    pg = _import_psycopg()
    try:
        import psycopg_pool
    except ImportError as error:
        raise StoreConnectionError("a PostgreSQL store needs psycopg_pool: pip install 'unstuck[postgres]'") from error
    try:
        pg.conninfo.conninfo_to_dict(conninfo)
    except pg.ProgrammingError as error:
        raise StoreURLError(f"store URL {url.shown!r}: {_scrub(url, str(error))}") from error
    # one direct attempt first: a refused port or a wrong password fails now, with libpq's reason,
    # rather than after the pool's open_timeout of retries
    connect_postgres(url, connect_timeout=connect_timeout).close()
    pool = psycopg_pool.ConnectionPool(
        conninfo, open=False, min_size=min_size, max_size=max_size, timeout=timeout, max_idle=max_idle,
        name=name, check=psycopg_pool.ConnectionPool.check_connection,
        kwargs={"connect_timeout": connect_timeout, "application_name": "unstuck"})
    try:
        pool.open(wait=True, timeout=open_timeout)
    except psycopg_pool.PoolTimeout as error:
        pool.close()
        try:  # the pool only says it timed out: one direct attempt says why
            connect_postgres(url, connect_timeout=connect_timeout).close()
        except StoreConnectionError as reason:
            raise reason from error
        raise _connection_error(url, error) from error
    return pool
