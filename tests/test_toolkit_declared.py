"""The standard tools' own declarations: HTTP statuses over a real loopback server, a command
the workspace denies, and a file another live process has locked."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from conftest import PlaybackModel, bare_env
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind
from unstuck.loop.turn import TurnStatus, run_turn
from unstuck.store.events import EventLog
from unstuck.toolkit.workspace import Workspace, standard_tools

RESET_IN_S = 3600


class Api(http.server.BaseHTTPRequestHandler):
    """Answers by path, with the status codes and headers real APIs send."""

    hits: ClassVar[dict[str, int]] = {}

    def do_GET(self) -> None:
        Api.hits[self.path] = Api.hits.get(self.path, 0) + 1
        if self.path == "/private":
            self._answer(401, b'{"message": "Bad credentials"}', {"WWW-Authenticate": 'Bearer realm="api"'})
        elif self.path == "/forbidden":
            self._answer(403, b'{"message": "Resource not accessible by integration"}')
        elif self.path == "/spent":
            self._answer(403, b'{"message": "API rate limit exceeded"}',
                         {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + RESET_IN_S)})
        elif self.path == "/busy":
            first = Api.hits[self.path] == 1
            self._answer(429 if first else 200, b"slow down" if first else b"ok", {"Retry-After": "30"} if first else {})
        else:
            self._answer(200, b"hello")

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def api() -> Iterator[str]:
    Api.hits = {}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def workspace(tmp_path: Path, **options: object) -> Workspace:
    return Workspace(tmp_path, env=bare_env(home=tmp_path), **options)  # type: ignore[arg-type]


def test_fetch_url_declares_401_as_auth_on_the_host(tmp_path: Path, api: str) -> None:
    result = standard_tools(workspace(tmp_path))["fetch_url"].invoke({"url": f"{api}/private"})
    assert not result.ok and result.http_status == 401 and "Bad credentials" in result.content
    assert result.declared is not None and (result.declared.kind, result.declared.subject) == (Kind.AUTH, "127.0.0.1")


def test_fetch_url_declares_403_as_permission_and_a_spent_limit_as_quota(tmp_path: Path, api: str) -> None:
    tools = standard_tools(workspace(tmp_path))
    forbidden = tools["fetch_url"].invoke({"url": f"{api}/forbidden"})
    assert forbidden.declared is not None and forbidden.declared.kind is Kind.PERMISSION
    spent = tools["fetch_url"].invoke({"url": f"{api}/spent"})
    assert spent.declared is not None and (spent.declared.kind, spent.declared.retryable) == (Kind.QUOTA, True)
    assert spent.declared.retry_after_s is not None and RESET_IN_S - 5 <= spent.declared.retry_after_s <= RESET_IN_S


def test_a_429_with_retry_after_is_waited_out_on_the_clock_then_succeeds(tmp_path: Path, api: str) -> None:
    clock = VirtualClock()
    model = PlaybackModel([("fetch_url", {"url": f"{api}/busy"}), "done: ok"])
    result = run_turn("fetch it", model=model, tools=standard_tools(workspace(tmp_path)), unattended=True, clock=clock)
    assert result.status is TurnStatus.DONE and Api.hits["/busy"] == 2
    assert clock.now() >= 30.0  # the server's Retry-After, honoured (under the 300 s cap)


def test_a_rate_limit_reset_beyond_the_cap_is_a_blocker_at_once_saying_when(tmp_path: Path, api: str) -> None:
    clock = VirtualClock()
    model = PlaybackModel([("fetch_url", {"url": f"{api}/spent"}), "I cannot fetch it."])
    result = run_turn("fetch it", model=model, tools=standard_tools(workspace(tmp_path)), unattended=True, clock=clock)
    assert result.steps[0].opened == ("127.0.0.1",) and Api.hits["/spent"] == 1  # no retry
    assert clock.now() < 1.0  # and no sleep toward a reset an hour away
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.kind is Kind.QUOTA and "resets at" in result.escalation.text


def test_a_denied_program_is_refused_before_it_runs(tmp_path: Path) -> None:
    tools = standard_tools(workspace(tmp_path, denied_programs=frozenset({"touch"})))
    result = tools["run_command"].invoke({"command": "touch made-it"})
    assert not result.executed and not (tmp_path / "made-it").exists()
    assert result.declared is not None and (result.declared.kind, result.declared.subject) == (Kind.PERMISSION, "touch")


@pytest.mark.parametrize("command", ["echo go | touch made-it", "true && touch made-it", "x=$(touch made-it)",
                                     "bash -c 'touch made-it'"])
def test_a_denied_program_anywhere_in_the_line_is_refused_before_it_runs(tmp_path: Path, command: str) -> None:
    tools = standard_tools(workspace(tmp_path, denied_programs=frozenset({"touch"})))
    result = tools["run_command"].invoke({"command": command})
    assert not result.executed and not (tmp_path / "made-it").exists()
    assert result.declared is not None and result.declared.subject == "touch"


HOLD = "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n"


@pytest.fixture
def held(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    (tmp_path / "data").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "data" / "ledger.lock")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_a_failed_command_on_a_locked_file_declares_the_lock_and_its_holder(
    tmp_path: Path, held: subprocess.Popen[str]
) -> None:
    tools = standard_tools(workspace(tmp_path))
    result = tools["run_command"].invoke({"command": "flock -n data/ledger.lock true"})
    assert not result.ok and result.exit_code == 1
    declared = result.declared
    assert declared is not None and (declared.kind, declared.subject) == (Kind.CONFLICT, "data/ledger.lock")
    assert f"pid {held.pid}" in declared.detail and declared.probe is not None
    assert declared.probe.tool == "check_file_lock"


def test_a_failure_with_another_cause_is_not_blamed_on_a_lock_it_names(
    tmp_path: Path, held: subprocess.Popen[str]
) -> None:
    tools = standard_tools(workspace(tmp_path))
    result = tools["run_command"].invoke({"command": "grep -q needle data/ledger.lock missing.log"})
    assert not result.ok and result.declared is None  # "No such file or directory": not the lock's doing


def test_a_declared_situation_reaches_the_model_as_json_not_a_python_repr(
    tmp_path: Path, held: subprocess.Popen[str]
) -> None:
    content = standard_tools(workspace(tmp_path))["check_file_lock"].invoke({"path": "data/ledger.lock"}).content
    shown = json.loads(content)
    assert shown["situation"]["kind"] == "conflict" and "Situation(" not in content


def test_a_successful_command_on_a_locked_file_declares_nothing(tmp_path: Path, held: subprocess.Popen[str]) -> None:
    result = standard_tools(workspace(tmp_path))["run_command"].invoke({"command": "cat data/ledger.lock"})
    assert result.ok and result.declared is None


def test_check_file_lock_probes_the_lock_until_it_is_released(tmp_path: Path, held: subprocess.Popen[str]) -> None:
    check = standard_tools(workspace(tmp_path))["check_file_lock"]
    locked = check.invoke({"path": "data/ledger.lock"})
    assert not locked.ok and locked.declared is not None and locked.declared.kind is Kind.CONFLICT
    held.kill()
    held.wait()
    assert check.invoke({"path": "data/ledger.lock"}).ok


def test_the_loop_reports_the_lock_holder_in_the_question(tmp_path: Path, held: subprocess.Popen[str]) -> None:
    log = EventLog()
    model = PlaybackModel([("run_command", {"command": "flock -n data/ledger.lock true"})] * 4)
    result = run_turn("append to the ledger", model=model, tools=standard_tools(workspace(tmp_path)),
                      unattended=True, clock=VirtualClock(), events=log)
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.subject == "data/ledger.lock" and f"pid {held.pid}" in result.escalation.text
