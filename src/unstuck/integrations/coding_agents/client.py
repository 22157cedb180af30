"""The hook client the agents run, and the guard server's controls (start, stop, ping).
Internal: not a supported import path (docs/reference/index.md lists those that are).

The client is a POSIX ``sh`` script, ``unstuck-hook``, written by ``unstuck hooks install``
(:func:`write_client`): a hook then costs one ``curl --unix-socket`` round trip, not a Python
start-up. Its command line is ``unstuck-hook [--unattended] [--fail-closed] AGENT EVENT`` with
the hook's payload on stdin; it prints the guard's reply and exits with the guard's exit code.

When the guard server does not answer, the hook never blocks the agent by accident:

* no socket (no server has run, or the last one ended cleanly): it starts one (``python -m
  unstuck serve --detach``, which returns once the server answers) and sends the hook to it;
* a socket nobody listens on (``curl`` exit 7: a server that crashed): one line on stderr, exit 0,
  and a server started in the background for the next call (the payload, read by ``curl``
  straight from stdin, is gone: reading it into the shell first would cost a process per hook);
* a server that does not answer within ``UNSTUCK_HOOK_TIMEOUT`` seconds (default
  :data:`HOOK_TIMEOUT_S`), or that dies while answering (exit 28, 52, 56): one line on stderr,
  exit 0 (the call goes on unguarded: it *fails open*), and a restart of the server in the
  background (``serve --restart --detach``) so the next call finds a fresh one. With
  ``--fail-closed`` (``unstuck hooks install --fail-closed``) it exits 2 instead, which every
  agent reads as "refuse the call" (Claude Code: "Exit code 2: blocking error", hooks
  reference), with the same line as the reason.

An attended session that asks its user gets status 290 and a token; the client then waits
(``UNSTUCK_HOOK_ASK_WAIT``, default :data:`ASK_WAIT_CLIENT_S` seconds) for the answer at
``/wait/TOKEN`` (see :mod:`unstuck.integrations.coding_agents.server`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from unstuck.integrations.coding_agents.events import OWN_MARKER
from unstuck.integrations.coding_agents.server import ServerFiles
from unstuck.processes.identity import process_alive

__all__ = [
    "ASK_WAIT_CLIENT_S",
    "CLIENT_NAME",
    "HOOK_TIMEOUT_S",
    "START_WAIT_S",
    "hook_script",
    "ping",
    "post",
    "start_detached",
    "stop_server",
    "write_client",
]

#: The client script's name (it is also :data:`~unstuck.integrations.coding_agents.events.OWN_MARKER`).
CLIENT_NAME = OWN_MARKER
#: Seconds the client waits for the server's reply to a hook before it fails open.
HOOK_TIMEOUT_S = 10
#: Seconds the client waits for an attended user's answer (a little longer than the server's
#: own wait, :data:`unstuck.integrations.coding_agents.sessions.ASK_WAIT_S`, which answers first).
ASK_WAIT_CLIENT_S = 310
#: Seconds ``serve --detach`` waits for the new server to answer.
START_WAIT_S = 20.0

_SCRIPT = r"""#!/bin/sh
# unstuck-hook: the hook command of `unstuck hooks install` (unstuck {version}); `unstuck hooks
# uninstall` removes it. Usage: unstuck-hook [--unattended] [--fail-closed] AGENT EVENT, the hook's
# payload on stdin. It posts the payload to the guard server over its unix socket and prints the
# reply. No server: it starts one and tries again. No answer in time: one line on stderr, exit 0
# (fails open; exit 2 with --fail-closed), and the server is restarted for the next call.
SOCKET=${{UNSTUCK_GUARD_SOCKET:-{socket}}}
TIMEOUT=${{UNSTUCK_HOOK_TIMEOUT:-{timeout}}}
ASK_WAIT=${{UNSTUCK_HOOK_ASK_WAIT:-{ask_wait}}}
query=
closed=
while :; do
  case "$1" in
    --unattended) query='?unattended=install'; shift ;;
    --fail-closed) closed=1; shift ;;
    *) break ;;
  esac
done
agent=$1
event=$2
fail() {{
  if [ -n "$closed" ]; then
    printf 'unstuck: %s; the call is refused (this hook fails closed)\n' "$1" >&2
    exit 2
  fi
  printf 'unstuck: %s; this call is not guarded (the hook fails open)\n' "$1" >&2
  exit 0
}}
serve() {{
  {serve} serve "$@" --socket "$SOCKET" </dev/null >/dev/null 2>&1
}}
post() {{
  curl -sS --unix-socket "$SOCKET" --max-time "$TIMEOUT" -X POST -H 'Content-Type: application/json' \
    --data-binary @- -w '\n%{{http_code}}' "http://unstuck/hook/$agent/$event$query" 2>/dev/null
}}
if [ ! -S "$SOCKET" ]; then
  # no server yet: start one (it answers before this returns), the payload still unread on stdin
  serve --detach || fail "the guard server on $SOCKET could not be started (see its log beside the socket)"
fi
reply=$(post)
rc=$?
# A background start is redirected on its subshell: a shell running a function keeps copies of the
# descriptors it redirects, and a copy of the agent's pipe would hold the hook open until it ends.
case "$rc" in
  0) ;;
  7) (serve --detach &) </dev/null >/dev/null 2>&1
     fail "nothing answers on $SOCKET (a server that ended); one is starting for the next call" ;;
  *) (serve --restart --detach &) </dev/null >/dev/null 2>&1
     fail "the guard server on $SOCKET did not answer (curl exit $rc)" ;;
esac
code=${{reply##*
}}
body=${{reply%
*}}
if [ "$code" = 290 ]; then
  reply=$(curl -sS --unix-socket "$SOCKET" --max-time "$ASK_WAIT" -X POST -d '' -w '\n%{{http_code}}' \
    "http://unstuck/wait/$body" 2>/dev/null)
  rc=$?
  [ "$rc" = 0 ] || fail "the guard server on $SOCKET did not give the user's answer (curl exit $rc)"
  code=${{reply##*
}}
  body=${{reply%
*}}
fi
case "$code" in
  200) printf '%s' "$body"; exit 0 ;;
  201) printf '%s' "$body"; exit 1 ;;
  202) printf '%s' "$body"; exit 2 ;;
  *) fail "the guard server refused the hook (HTTP $code: $body)" ;;
esac
"""


def hook_script(socket: Path, *, python: str | None = None, pythonpath: str | None = None) -> str:
    """The client script's text: the socket it posts to (``$UNSTUCK_GUARD_SOCKET`` overrides it),
    and how it starts the server (``python -m unstuck serve``, this interpreter by default;
    ``pythonpath`` set in that command's environment when given, for an unstuck that is not
    installed in that interpreter)."""
    from unstuck import __version__

    serve = shlex.quote(python or sys.executable) + " -m unstuck"
    if pythonpath:
        serve = f"PYTHONPATH={shlex.quote(pythonpath)} {serve}"
    return _SCRIPT.format(version=__version__, socket=shlex.quote(str(socket)), timeout=HOOK_TIMEOUT_S,
                          ask_wait=ASK_WAIT_CLIENT_S, serve=serve.replace('"$@"', ""))


def write_client(path: Path, socket: Path, *, python: str | None = None, pythonpath: str | None = None) -> bool:
    """Write the client script at ``path`` (mode 0755, replaced atomically: a running hook keeps
    reading the old one); ``False`` when it was already exactly that."""
    text = hook_script(socket, python=python, pythonpath=pythonpath)
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o755)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return True


def _client(socket: Path, timeout_s: float) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=os.fspath(socket)), base_url="http://unstuck",
                        timeout=timeout_s)


def post(socket: Path, path: str, document: object, *, timeout_s: float = 10.0) -> tuple[int, Any]:
    """``POST path`` with ``document`` as JSON to the server on ``socket``: (status, the reply's
    JSON, or its text when it is not JSON).

    Raises:
        httpx.HTTPError: the server cannot be reached or did not answer in time.
    """
    with _client(socket, timeout_s) as client:
        reply = client.post(path, json=document)
    try:
        return reply.status_code, reply.json()
    except ValueError:
        return reply.status_code, reply.text


def ping(socket: Path, *, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The server's ``/ping`` (pid, socket, version, sessions, seconds up), or ``None`` when
    nothing answers on ``socket``."""
    if not socket.exists():
        return None
    try:
        with _client(socket, timeout_s) as client:
            reply = client.get("/ping")
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    found: dict[str, Any] = reply.json()
    return found


def start_detached(socket: Path, options: Sequence[str] = (), *, wait_s: float = START_WAIT_S) -> dict[str, Any]:
    """Start ``python -m unstuck serve`` on ``socket`` in a session of its own (it outlives this
    process; its output goes to the log beside the socket) and wait until it answers. A server
    already answering there is left as it is.

    Returns:
        The server's ``/ping``.

    Raises:
        RuntimeError: it did not answer within ``wait_s`` seconds (the log's last line named).
    """
    found = ping(socket)
    if found is not None:
        return found
    files = ServerFiles(socket)
    files.make_folder()
    command = [sys.executable, "-m", "unstuck", "serve", "--socket", str(socket), *options]
    with open(files.log, "ab") as log:
        os.chmod(files.log, 0o600)
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                 close_fds=True)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        found = ping(socket, timeout_s=1.0)
        if found is not None:
            return found
        if child.poll() is not None and ping(socket, timeout_s=1.0) is None:
            break  # it exited: another server won the lock and is still starting, or it failed
        time.sleep(0.05)
    found = ping(socket, timeout_s=2.0)
    if found is not None:
        return found
    last = ""
    with contextlib.suppress(OSError):
        lines = files.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        last = lines[-1] if lines else ""
    raise RuntimeError(f"the guard server on {socket} did not start within {wait_s:g} s"
                       + (f"; its log says: {last}" if last else ""))


def _recorded(files: ServerFiles) -> tuple[int, int] | None:
    try:
        record = json.loads(files.pid.read_text(encoding="utf-8"))
        return int(record["pid"]), int(record.get("start") or 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stop_server(socket: Path, *, timeout_s: float = 10.0) -> bool:
    """End the server on ``socket``: ``POST /stop``, and when it does not answer or does not end,
    SIGTERM then SIGKILL to the pid its pid file records (only when that process is still the one
    that wrote it: same pid and start time). ``False`` when no server was running.
    """
    files = ServerFiles(socket)
    recorded = _recorded(files)
    asked = False
    if socket.exists():
        with contextlib.suppress(httpx.HTTPError):
            status, _ = post(socket, "/stop", {}, timeout_s=2.0)
            asked = status == 200
    if recorded is None:
        return asked
    pid, start = recorded
    deadline = time.monotonic() + timeout_s
    for signum in (None, signal.SIGTERM, signal.SIGKILL):
        if signum is not None and process_alive(pid, start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
            deadline = time.monotonic() + timeout_s / 2
        while process_alive(pid, start) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not process_alive(pid, start):
            break
    for path in (files.socket, files.pid):  # a server killed with SIGKILL left them
        if not process_alive(pid, start):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return True
