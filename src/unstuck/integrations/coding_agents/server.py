"""The guard server (``unstuck serve``): one long-lived process per user that keeps the
classifier warm and a guard per coding-agent session, reached by the hook client over a unix
socket (issue 26, deliver 3).
Internal: not a supported import path (docs/reference/index.md lists those that are).

A hook costs a round trip, not a Python start-up: the hook command the agents run is a small
``sh`` script (:mod:`unstuck.integrations.coding_agents.client`) that posts the hook's payload
with ``curl --unix-socket`` and prints what comes back.

The socket: :func:`socket_path` (``$UNSTUCK_GUARD_SOCKET``, else ``guard.sock`` in the user's
runtime folder, ``$XDG_RUNTIME_DIR/unstuck``), in a folder of mode 0700, the socket itself mode
0600; every request's peer must be this server's user (``SO_PEERCRED``), so only the user who
owns the socket can send hooks or answer a question. Beside it: ``guard.pid`` (the server's pid
and start time), ``guard.lock`` (held while it runs: one server per socket) and ``guard.log``
(what a detached server writes).

HTTP over the socket (``Host`` is ignored):

* ``POST /hook/AGENT/EVENT[?unattended=WHO]``: the hook's payload (JSON). The peer's
  environment (``/proc/PID/environ`` of the process at the other end of the socket: the hook
  client's ``curl``, which the agent's hook started with the agent's environment) is the
  session's: its tools' programs and its probes run with it, and it says whether anybody is at
  the console. The status is ``200 + EXIT`` (200, 201, 202: the hook's exit code) with the
  hook's stdout as the body, or ``290`` with a wait token when an attended session is asking
  its user (the client then calls ``/wait/TOKEN``); ``400`` for a payload the agent's mapping
  cannot read (the message names the field);
* ``POST /wait/TOKEN``: waits for the answer (:meth:`SessionKeeper.wait`), then as ``/hook``;
* ``POST /answer/SESSION`` ``{"answer": "done"|"skip"|"stop"}``: the user's answer;
* ``GET /events``: server-sent events, each attended session's escalation (its three parts) and
  each answer, as they happen (the open questions first);
* ``GET /sessions``, ``GET /ping``; ``POST /stop`` ends the server.

It exits after :data:`IDLE_EXIT_S` seconds with no request and no open stream, on ``POST
/stop`` (``unstuck serve --stop``), SIGTERM or SIGINT, removing its socket and pid file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.server
import json
import os
import queue
import signal
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unstuck.core.errors import UnstuckError
from unstuck.core.redact import redact, redact_value
from unstuck.integrations.coding_agents.events import Agent, HookPayloadError
from unstuck.integrations.coding_agents.sessions import SessionKeeper, event_json, hooks_for
from unstuck.integrations.common import read_answer
from unstuck.processes.identity import process_identity

__all__ = [
    "IDLE_EXIT_S",
    "MAX_PAYLOAD_BYTES",
    "SOCKET_ENV",
    "AlreadyRunning",
    "GuardServer",
    "ServerFiles",
    "peer_environment",
    "socket_path",
]

#: Names the guard server's socket (a path), overriding the runtime folder's ``guard.sock``.
SOCKET_ENV = "UNSTUCK_GUARD_SOCKET"
#: Seconds without a request or an open event stream after which the server exits.
IDLE_EXIT_S = 600.0
#: The largest hook payload read (a tool's whole output can be in it).
MAX_PAYLOAD_BYTES = 32 * 1024 * 1024
#: The longest unix socket path the kernel takes is 108 bytes with its NUL (unix(7),
#: ``sun_path``); a longer one is moved to the temporary folder.
_SUN_PATH = 100
#: Seconds between two keep-alive comments of an idle event stream.
_KEEPALIVE_S = 15.0


class AlreadyRunning(UnstuckError, RuntimeError):  # noqa: N818  a state, as FileExistsError names one
    """Another guard server holds this socket's lock (it is running or starting)."""


def socket_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the guard server listens: :data:`SOCKET_ENV` when set, else ``guard.sock`` in
    ``$XDG_RUNTIME_DIR/unstuck`` (platformdirs' user runtime folder, ``/run/user/UID/unstuck``
    when the variable is not set); a path longer than unix(7) allows goes to
    ``$TMPDIR/unstuck-UID-DIGEST/guard.sock``."""
    env = os.environ if environ is None else environ
    given = env.get(SOCKET_ENV, "").strip()
    if given:
        return Path(given)
    runtime = env.get("XDG_RUNTIME_DIR", "").strip()
    folder = Path(runtime) / "unstuck" if runtime else Path(f"/run/user/{os.getuid()}") / "unstuck"
    path = folder / "guard.sock"
    if len(os.fsencode(path)) <= _SUN_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"unstuck-{os.getuid()}-{digest}" / "guard.sock"


@dataclass(frozen=True, slots=True)
class ServerFiles:
    """The files of one server, beside its socket: ``guard.pid``, ``guard.lock``, ``guard.log``."""

    socket: Path

    @property
    def folder(self) -> Path:
        """The socket's folder (mode 0700)."""
        return self.socket.parent

    @property
    def pid(self) -> Path:
        """JSON: ``{"pid", "start", "socket"}`` of the running server."""
        return self.folder / (self.socket.stem + ".pid")

    @property
    def lock(self) -> Path:
        """Locked (flock(2)) while a server runs on the socket."""
        return self.folder / (self.socket.stem + ".lock")

    @property
    def log(self) -> Path:
        """What a detached server writes (its errors, one line per request failure)."""
        return self.folder / (self.socket.stem + ".log")

    def make_folder(self) -> None:
        """Make the socket's folder, mode 0700 (an existing one is set to 0700 when it is ours).

        Raises:
            PermissionError: the folder belongs to another user.
        """
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = self.folder.stat()
        if info.st_uid != os.getuid():
            raise PermissionError(f"{self.folder}: belongs to uid {info.st_uid}, not to this user ({os.getuid()})")
        if info.st_mode & 0o077:
            self.folder.chmod(0o700)


def peer_environment(pid: int) -> dict[str, str]:
    """The environment process ``pid`` was started with (``/proc/PID/environ``: proc(5)); empty
    when it cannot be read (another user's process, one that ended, not Linux)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def _peer(request: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a unix socket (``SO_PEERCRED``: unix(7))."""
    raw = request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False


class GuardServer:
    """The guard server on ``files.socket`` (see the module doc).

    Args:
        files: its socket and the files beside it.
        keeper: the sessions (and their stores).
        idle_s: seconds without a request or an event stream before it exits.
    """

    def __init__(self, files: ServerFiles, keeper: SessionKeeper, *, idle_s: float = IDLE_EXIT_S) -> None:
        self.files, self.keeper, self.idle_s = files, keeper, idle_s
        self._last = time.monotonic()
        self._active = 0
        self._count_lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _UnixHTTPServer | None = None
        self._lock_fd: int | None = None
        self.started = time.time()

    # -- activity ------------------------------------------------------------------------------

    def _begin(self) -> None:
        with self._count_lock:
            self._active += 1
            self._last = time.monotonic()

    def _done(self) -> None:
        with self._count_lock:
            self._active -= 1
            self._last = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last request ended, or 0 while one runs or a stream is open."""
        with self._count_lock:
            if self._active or self.keeper.watchers:
                return 0.0
            return time.monotonic() - self._last

    # -- lifecycle -----------------------------------------------------------------------------

    def bind(self) -> None:
        """Take the socket's lock, remove a stale socket, listen (mode 0600) and write the pid file.

        Raises:
            AlreadyRunning: another server holds the lock.
            PermissionError: the socket's folder belongs to another user.
        """
        files = self.files
        files.make_folder()
        fd = os.open(files.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(f"a guard server already runs on {files.socket}") from None
        self._lock_fd = fd
        with contextlib.suppress(FileNotFoundError):
            if files.socket.is_socket() or files.socket.is_symlink():
                files.socket.unlink()  # the lock is ours: whatever listened there is gone
        old = os.umask(0o177)
        try:
            self._httpd = _UnixHTTPServer(os.fspath(files.socket), _handler(self), bind_and_activate=True)
        finally:
            os.umask(old)
        files.socket.chmod(0o600)
        pid, start = process_identity()
        files.pid.write_text(json.dumps({"pid": pid, "start": start, "socket": str(files.socket)}) + "\n",
                             encoding="utf-8")
        files.pid.chmod(0o600)

    def serve(self) -> None:
        """Serve until idle, stopped or signalled, then clean up (:meth:`close`)."""
        if self._httpd is None:
            self.bind()
        assert self._httpd is not None
        httpd = self._httpd
        watcher = threading.Thread(target=self._watch_idle, name="unstuck-serve-idle", daemon=True)
        watcher.start()
        try:
            httpd.serve_forever(poll_interval=0.2)
        finally:
            self._stopping.set()
            self.close()

    def _watch_idle(self) -> None:
        step = max(0.05, min(1.0, self.idle_s / 10))
        while not self._stopping.wait(step):
            if self.idle_for() >= self.idle_s:
                self.stop()
                return

    def stop(self) -> None:
        """End :meth:`serve` (from any thread but the serving one's request handler: it returns
        at once and the server stops right after)."""
        self._stopping.set()
        httpd = self._httpd
        if httpd is not None:
            threading.Thread(target=httpd.shutdown, name="unstuck-serve-stop", daemon=True).start()

    def install_signals(self) -> None:
        """SIGTERM and SIGINT stop the server (call from the main thread)."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop())

    def close(self) -> None:
        """Wake waiting hooks, close the socket, remove it and the pid file, let go of the lock."""
        self.keeper.close()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.server_close()
        for path in (self.files.socket, self.files.pid):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- requests ------------------------------------------------------------------------------

    def ping(self) -> dict[str, Any]:
        """Who is serving: pid, socket, sessions, seconds up."""
        from unstuck import __version__

        return {"pid": os.getpid(), "socket": str(self.files.socket), "version": __version__,
                "sessions": len(list(self.keeper)), "uptime_s": round(time.time() - self.started, 3)}


def _handler(server: GuardServer) -> type[http.server.BaseHTTPRequestHandler]:
    keeper = server.keeper

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "unstuck-guard"

        def address_string(self) -> str:
            return "unix"

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: errors go to _fail

        def _send(self, status: int, body: str, content_type: str = "application/json") -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", f"{content_type}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, json.dumps({"error": message}))

        def _allowed(self) -> tuple[int, bool]:
            pid, uid = _peer(self.connection)
            if uid != os.getuid():
                self._error(403, f"only uid {os.getuid()} may use this guard server")
                return pid, False
            return pid, True

        def _body(self) -> bytes | None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_PAYLOAD_BYTES:
                self._error(413, f"a payload must be 0 to {MAX_PAYLOAD_BYTES} bytes")
                return None
            return self.rfile.read(length) if length else b""

        def do_GET(self) -> None:
            server._begin()
            try:
                _pid, ok = self._allowed()
                if not ok:
                    return
                path = urllib.parse.urlsplit(self.path).path
                if path == "/ping":
                    self._send(200, json.dumps(server.ping()))
                elif path == "/sessions":
                    self._send(200, json.dumps(redact_value(keeper.sessions())))
                elif path == "/events":
                    self._stream()
                else:
                    self._error(404, f"no such path: {path}")
            finally:
                server._done()

        def _stream(self) -> None:
            box = keeper.subscribe()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(b": unstuck guard server events\n\n")
                self.wfile.flush()
                while not server._stopping.is_set():
                    try:
                        item = box.get(timeout=min(_KEEPALIVE_S, 0.5))
                    except queue.Empty:
                        if time.monotonic() % _KEEPALIVE_S < 0.5:
                            self.wfile.write(b": keep-alive\n\n")
                            self.wfile.flush()
                        continue
                    self.wfile.write(event_json(redact_value(item)).encode("utf-8"))  # no secret leaves
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                keeper.unsubscribe(box)
                self.close_connection = True

        def do_POST(self) -> None:
            server._begin()
            try:
                pid, ok = self._allowed()
                if not ok:
                    return
                body = self._body()
                if body is None:
                    return
                parts = urllib.parse.urlsplit(self.path)
                words = [urllib.parse.unquote(w) for w in parts.path.strip("/").split("/")]
                query = urllib.parse.parse_qs(parts.query)
                if words[:1] == ["hook"] and len(words) == 3:
                    self._hook(words[1], words[2], body, pid, query)
                elif words[:1] == ["wait"] and len(words) == 2:
                    try:
                        outcome = keeper.wait(words[1])
                    except KeyError:
                        self._error(404, "no question is waiting under that token")
                        return
                    self._send(200 + outcome.exit_code, outcome.stdout, "text/plain")
                elif words[:1] == ["answer"] and len(words) == 2:
                    self._answer(words[1], body)
                elif words == ["stop"]:
                    self._send(200, json.dumps({"stopping": os.getpid()}))
                    server.stop()
                else:
                    self._error(404, f"no such path: {parts.path}")
            except Exception as exc:  # one request's failure never ends the server
                self._fail(exc)
            finally:
                server._done()

        def _fail(self, exc: BaseException) -> None:
            line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.command} {self.path}: {type(exc).__name__}: {exc}"
            print(redact(line), file=sys.stderr, flush=True)  # the log keeps no secret
            with contextlib.suppress(OSError):
                self._error(500, f"{type(exc).__name__}: {exc}")

        def _hook(self, agent_name: str, event_name: str, body: bytes, pid: int,
                  query: Mapping[str, list[str]]) -> None:
            try:
                agent = Agent(agent_name)
                hooks = hooks_for(agent)
            except (ValueError, LookupError) as exc:
                self._error(400, str(exc))
                return
            try:
                payload = json.loads(body.decode("utf-8") or "null")
            except (UnicodeDecodeError, ValueError) as exc:
                self._error(400, f"{agent.value} {event_name} hook payload: not JSON: {exc}")
                return
            env = peer_environment(pid)
            try:
                event = hooks.parse(event_name, payload, env)
            except HookPayloadError as exc:
                self._error(400, str(exc))
                return
            who = next(iter(query.get("unattended") or ()), None)
            flag = f"install --unattended ({who})" if who else None
            outcome = keeper.handle(hooks, event, env, unattended_flag=flag)
            if outcome.wait is not None:
                self._send(290, outcome.wait, "text/plain")
                return
            self._send(200 + outcome.exit_code, outcome.stdout, "text/plain")

        def _answer(self, session_id: str, body: bytes) -> None:
            try:
                said = json.loads(body.decode("utf-8") or "{}")
                answer = read_answer(said)
            except (UnicodeDecodeError, ValueError) as exc:
                self._error(400, str(exc))
                return
            try:
                shown = keeper.answer(session_id, answer)
            except KeyError:
                self._error(404, f"no live session {session_id!r} (see `unstuck answer` for the open questions)")
                return
            except ValueError as exc:
                self._error(409, str(exc))
                return
            self._send(200, json.dumps(shown))

    return Handler
