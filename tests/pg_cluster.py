"""A throw-away PostgreSQL cluster for tests: ``initdb`` into a temporary directory, the server
started with ``pg_ctl`` on 127.0.0.1 at a free port and on a Unix socket inside that directory,
one database created; everything stopped and removed on exit, also when the test failed.

    with PostgresCluster() as cluster:
        url = cluster.url            # postgresql://unstuck:<password>@127.0.0.1:<port>/unstuck
        other = cluster.create_database("journal_a")

The programs (``initdb``, ``pg_ctl``, ``postgres``, ``createdb``) are found on ``PATH`` (a
symbolic link is followed to the directory holding the rest) or in Debian's
``/usr/lib/postgresql/<major>/bin`` (the newest major first): :func:`find_bin_dir`.

``initdb``, ``pg_ctl`` and ``postgres`` refuse to run as root (initdb(1): "initdb must not be
run as root"; postgres(1) likewise), so as root the cluster's programs run as ``nobody``
(``setpriv --reuid --regid --clear-groups``, util-linux; ``runuser -u`` when there is no
setpriv), and the temporary directory is handed to that user. As anyone else they run
directly.

Authentication (pg_hba.conf as initdb writes it with ``--auth-local``/``--auth-host``): the Unix
socket trusts every local user; TCP asks for the superuser's password (SCRAM-SHA-256), which
is random per cluster and part of :attr:`PostgresCluster.url`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

#: Where Debian installs each major version's server programs (postgresql-common's layout).
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"

#: The programs a cluster needs, all from one directory.
PROGRAMS = ("initdb", "pg_ctl", "postgres", "createdb")

#: The unprivileged user the server runs as when the tests run as root.
SERVER_USER = "nobody"

#: Seconds ``pg_ctl`` waits for the server to start or stop (``pg_ctl -t``).
START_TIMEOUT = 60


class ClusterError(RuntimeError):
    """The cluster could not be made, started or stopped; the message carries the program's
    output and the server log's tail."""


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and the rest of :data:`PROGRAMS`: ``initdb`` on PATH
    (its real location, links followed), else the newest ``/usr/lib/postgresql/<major>/bin``;
    ``None`` when there is none."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)

    def major(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.parent.name)) or (0,)

    candidates.extend(sorted((Path(p) for p in glob.glob(DEBIAN_BIN_GLOB)), key=major, reverse=True))
    for directory in candidates:
        if all(os.access(directory / program, os.X_OK) for program in PROGRAMS):
            return directory
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _traversable_by(path: Path, uid: int, gid: int) -> bool:
    """Whether every directory from ``/`` down to ``path`` lets ``uid`` (group ``gid``) pass."""
    for directory in (path, *path.parents):
        info = directory.stat()
        bit = stat.S_IXUSR if info.st_uid == uid else stat.S_IXGRP if info.st_gid == gid else stat.S_IXOTH
        if not info.st_mode & bit:
            return False
    return True


class PostgresCluster:
    """A PostgreSQL server of its own in a temporary directory (a context manager).

    Attributes, valid inside ``with``: :attr:`root` (the temporary directory: ``data/``,
    ``socket/``, ``server.log``), :attr:`port`, :attr:`host` (``127.0.0.1``),
    :attr:`socket_dir`, :attr:`user` and :attr:`password` (the superuser), :attr:`database`,
    :attr:`url` (TCP, with the password) and :attr:`socket_url` (the Unix socket, no password).

    ``durable``: run with PostgreSQL's defaults (``fsync``, ``synchronous_commit`` and
    ``full_page_writes`` on), as a real store would, for benchmarks; tests turn them off
    (the default), since a test's data need not survive a power loss.

    Raises:
        ClusterError: no PostgreSQL programs, or initdb/pg_ctl/createdb failed (with their
            output and the server log's tail).
    """

    host = "127.0.0.1"

    def __init__(self, *, database: str = "unstuck", user: str = "unstuck", bin_dir: Path | None = None,
                 durable: bool = False) -> None:
        found = bin_dir or find_bin_dir()
        if found is None:
            raise ClusterError(f"no PostgreSQL server programs ({', '.join(PROGRAMS)}) on PATH or in {DEBIAN_BIN_GLOB}")
        self.bin_dir = found
        self.database = database
        self.user = user
        self.durable = durable
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self.root = Path()
        self._started = False
        self._as_root = os.geteuid() == 0
        self._uid, self._gid = os.geteuid(), os.getegid()
        if self._as_root:
            entry = pwd.getpwnam(SERVER_USER)
            self._uid, self._gid = entry.pw_uid, entry.pw_gid

    # -- paths and URLs ---------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @property
    def url(self) -> str:
        """``postgresql://user:password@127.0.0.1:port/database`` (libpq's URI form)."""
        return self.url_for(self.database)

    @property
    def socket_url(self) -> str:
        """The Unix socket: ``postgresql://user@/database?host=<socket dir, %-encoded>&port=<port>``."""
        return f"postgresql://{quote(self.user, safe='')}@/{quote(self.database, safe='')}" \
               f"?host={quote(str(self.socket_dir), safe='')}&port={self.port}"

    def url_for(self, database: str) -> str:
        """The TCP URL of ``database`` on this cluster."""
        return (f"postgresql://{quote(self.user, safe='')}:{quote(self.password, safe='')}@{self.host}:{self.port}/"
                f"{quote(database, safe='')}")

    # -- running programs -------------------------------------------------------------------

    def _as_server_user(self, argv: Sequence[str]) -> list[str]:
        if not self._as_root:
            return list(argv)
        setpriv = shutil.which("setpriv")
        if setpriv:
            return [setpriv, f"--reuid={self._uid}", f"--regid={self._gid}", "--clear-groups", "--", *argv]
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", SERVER_USER, "--", *argv]
        raise ClusterError("running as root, and neither setpriv nor runuser is installed to run PostgreSQL as "
                           f"{SERVER_USER!r} (initdb and postgres refuse root)")

    def _env(self) -> dict[str, str]:
        # The caller's PG* variables (PGDATA, PGHOST, PGPORT...) would redirect the programs.
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        env["LC_ALL"] = "C"
        return env

    def _run(self, argv: Sequence[str], *, as_server: bool = True, timeout: float = 120) -> str:
        command = self._as_server_user(argv) if as_server else list(argv)
        try:
            done = subprocess.run(command, cwd=self.root, env=self._env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as error:
            raise ClusterError(f"{shlex.join(command)} did not finish in {timeout} s{self._log_tail()}") from error
        if done.returncode != 0:
            raise ClusterError(f"{shlex.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
                               f"{self._log_tail()}")
        return done.stdout

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\nserver log (last lines):\n" + "\n".join(text.splitlines()[-lines:])

    # -- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> PostgresCluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        """Make the directory, ``initdb``, start the server and create :attr:`database`."""
        base = Path(tempfile.gettempdir())
        if self._as_root and not _traversable_by(base, self._uid, self._gid):
            base = Path("/tmp")  # a private TMPDIR would keep the server user out
        self.root = Path(tempfile.mkdtemp(prefix="unstuck-pg-", dir=base))
        self.socket_dir.mkdir(mode=0o700)
        password_file = self.root / "password"
        password_file.write_text(self.password + "\n", encoding="utf-8")
        if self._as_root:
            for path in (self.root, self.socket_dir, password_file):
                os.chown(path, self._uid, self._gid)
        self._run([str(self.bin_dir / "initdb"), "--pgdata", str(self.data_dir), "--username", self.user,
                   f"--pwfile={password_file}", "--auth-local=trust", "--auth-host=scram-sha-256",
                   "--encoding=UTF8", "--locale=C", "--no-sync"])
        password_file.unlink()
        for attempt in range(3):  # the free port may be taken between the probe and the bind
            self.port = free_port()
            options = [f"-c listen_addresses={self.host}", f"-c port={self.port}",
                       f"-c unix_socket_directories={shlex.quote(str(self.socket_dir))}"]
            if not self.durable:  # a test's data need not survive a power loss: no fsync, faster tests
                options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
            try:
                self._run([str(self.bin_dir / "pg_ctl"), "start", "--pgdata", str(self.data_dir), "--wait",
                           f"--timeout={START_TIMEOUT}", f"--log={self.log_file}", "-o", " ".join(options)],
                          timeout=START_TIMEOUT + 10)
                break
            except ClusterError:
                if attempt == 2 or "Address already in use" not in self._log_tail(5):
                    raise
        self._started = True
        self._run([str(self.bin_dir / "createdb"), "--host", str(self.socket_dir), "--port", str(self.port),
                   "--username", self.user, self.database], as_server=False)

    def create_database(self, name: str) -> str:
        """Create another database ``name`` on this cluster; returns its TCP URL.

        Raises:
            ClusterError: createdb failed (a name taken, an invalid name)."""
        self._run([str(self.bin_dir / "createdb"), "--host", str(self.socket_dir), "--port", str(self.port),
                   "--username", self.user, name], as_server=False)
        return self.url_for(name)

    def postmaster_pid(self) -> int | None:
        """The server's pid from ``data/postmaster.pid`` (its first line), or ``None``."""
        try:
            return int((self.data_dir / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``; SIGKILL to the postmaster when that fails)
        and remove the temporary directory. Safe to call twice."""
        if not self.root.parts or not self.root.is_absolute():
            return
        try:
            if self._started or (self.data_dir / "postmaster.pid").exists():
                pid = self.postmaster_pid()
                try:
                    self._run([str(self.bin_dir / "pg_ctl"), "stop", "--pgdata", str(self.data_dir), "--mode=fast",
                               "--wait", f"--timeout={START_TIMEOUT}"], timeout=START_TIMEOUT + 10)
                except ClusterError:
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                        _wait_gone(pid, 10.0)
                self._started = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = Path()


def _wait_gone(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
