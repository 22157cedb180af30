"""The guard server and the hook client, for real: ``sh`` and ``curl`` against ``unstuck serve`` on
a unix socket, the real gh behind the probes. Every server a test starts is stopped by the test."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from unstuck.evals.fake_github import FakeGitHub
from unstuck.integrations.coding_agents.client import ping, stop_server, write_client
from unstuck.integrations.coding_agents.events import Agent
from unstuck.integrations.coding_agents.sessions import turn_id_of

pytestmark = pytest.mark.slow

GH_LOGGED_OUT = "You are not logged into any GitHub hosts. Run gh auth login to authenticate."


@dataclass
class Hooks:
    """A hook client writing to one test's socket and stores."""

    root: Path
    socket: Path
    client: Path

    def env(self, *, attended: bool = False, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "XDG_CONFIG_HOME",
                                                            "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
                                                            "XDG_RUNTIME_DIR", "UNSTUCK_CACHE_DIR")}
        env.update(HOME=str(self.root / "home"), UNSTUCK_STORE=str(self.root / "store"),
                   GH_CONFIG_DIR=str(self.root / "gh"), GH_NO_UPDATE_NOTIFIER="1", NO_COLOR="1")
        if not attended:
            env["CLAUDE_CODE_SESSION_ATTENDED"] = "0"  # what claude -p sets
        env.update(extra)
        return env

    def send(self, event: str, payload: dict[str, Any], *, options: tuple[str, ...] = (), attended: bool = False,
             timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", str(self.client), *options, "claude-code", event], input=json.dumps(payload),
                              env=self.env(attended=attended, **extra), capture_output=True, text=True,
                              timeout=timeout, check=False)

    def unstuck(self, *args: str, attended: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "unstuck", *args, "--socket", str(self.socket)],
                              env=self.env(attended=attended), capture_output=True, text=True, timeout=60, check=False)

    def journal(self) -> dict[str, dict[str, Any]]:
        out = subprocess.run([sys.executable, "-m", "unstuck", "journal", "list", "--json"], env=self.env(),
                             capture_output=True, text=True, timeout=60, check=True)
        return {t["turn"]: t for t in json.loads(out.stdout)}


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[Hooks]:
    for name in ("home", "store", "gh"):
        (tmp_path / name).mkdir()
    folder = Path(tempfile.mkdtemp(prefix="ugs-"))  # unix(7): a socket path is 108 bytes at most
    made = Hooks(tmp_path, folder / "run" / "guard.sock", tmp_path / "bin" / "unstuck-hook")
    write_client(made.client, made.socket, pythonpath=os.environ.get("PYTHONPATH") or None)
    try:
        yield made
    finally:
        stop_server(made.socket)
        end_servers_on(made.socket)  # one a failing hook started in the background, after the stop
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def end_servers_on(sock: Path, settle_s: float = 3.0) -> None:
    """End every guard server on ``sock`` that is still alive, or starts within ``settle_s``
    seconds (a hook that found no server answering starts one detached, which can come up
    after the test's own stop): SIGTERM, then SIGKILL. Fails the test if one survives."""
    deadline = time.monotonic() + settle_s
    while True:
        found = [p for p in psutil.process_iter(["cmdline"]) if str(sock) in (p.info.get("cmdline") or [])]
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        _, alive = psutil.wait_procs(found, timeout=5)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        if psutil.wait_procs(alive, timeout=5)[1]:
            pytest.fail(f"a guard server on {sock} outlived its test")
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def pre(session: str, command: str, use: str) -> dict[str, Any]:
    return {"session_id": session, "cwd": "/tmp", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command}, "tool_use_id": use}


def failed(session: str, command: str, use: str, code: int, output: str) -> dict[str, Any]:
    return {**pre(session, command, use), "hook_event_name": "PostToolUseFailure",
            "error": f"Exit code {code}\n{output}", "is_interrupt": False}


def done(session: str, command: str, use: str, stdout: str) -> dict[str, Any]:
    return {**pre(session, command, use), "hook_event_name": "PostToolUse",
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False}}


def test_the_first_hook_starts_the_server_on_a_private_socket_and_stop_ends_it(hooks: Hooks) -> None:
    out = hooks.send("PreToolUse", pre("s1", "ls", "t1"))
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")  # allowed: Claude Code reads no output as go on
    assert stat.S_IMODE(hooks.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(hooks.socket.parent.stat().st_mode) == 0o700
    found = ping(hooks.socket)
    assert found is not None
    stopped = hooks.unstuck("serve", "--stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    deadline = time.monotonic() + 10
    while Path(f"/proc/{found['pid']}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{found['pid']}").exists() and not hooks.socket.exists()


def test_only_the_socket_s_owner_reaches_the_server(hooks: Hooks) -> None:
    hooks.send("PreToolUse", pre("s1", "ls", "t1"))
    if os.geteuid() != 0:
        pytest.skip("running curl as another user needs root")
    other = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "curl", "-sS",
                            "--unix-socket", str(hooks.socket), "http://unstuck/ping"],
                           capture_output=True, text=True, timeout=30, check=False)
    assert other.returncode == 7, other  # curl: "Couldn't connect": the folder is 0700, the socket 0600


class HungServer:
    """A listener on the socket that accepts and never answers (a server that hangs)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(os.fspath(path))
        self.sock.listen(8)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


def test_a_hung_server_fails_open_with_one_line_and_the_next_call_finds_a_fresh_one(hooks: Hooks) -> None:
    hung = HungServer(hooks.socket)
    try:
        started = time.monotonic()
        out = hooks.send("PreToolUse", pre("s1", "gh auth login --web", "t1"), UNSTUCK_HOOK_TIMEOUT="1")
        assert out.returncode == 0 and out.stdout == ""  # the call goes on unguarded: it never blocks the agent
        assert len(out.stderr.strip().splitlines()) == 1 and "fails open" in out.stderr
        assert time.monotonic() - started < 10
        deadline = time.monotonic() + 30
        while ping(hooks.socket) is None and time.monotonic() < deadline:  # restarted in the background
            time.sleep(0.1)
        assert ping(hooks.socket) is not None
        out = hooks.send("PreToolUse", pre("s1", "gh auth login --web", "t2"))
        assert json.loads(out.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"  # guarded again
    finally:
        hung.close()


def test_fail_closed_refuses_the_call_when_the_server_does_not_answer(hooks: Hooks) -> None:
    hung = HungServer(hooks.socket)
    try:
        out = hooks.send("PreToolUse", pre("s1", "ls", "t1"), options=("--fail-closed",), UNSTUCK_HOOK_TIMEOUT="1")
        assert out.returncode == 2 and "fails closed" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    finally:
        hung.close()


def test_calls_from_several_sessions_at_once_are_each_charged_to_their_own_session(hooks: Hooks) -> None:
    hooks.send("SessionStart", {"session_id": "warm", "cwd": "/tmp", "source": "startup"})

    def session(name: str, calls: int) -> None:
        for n in range(calls):
            hooks.send("PreToolUse", pre(name, f"echo {n}", f"{name}-{n}"))
            hooks.send("PostToolUse", done(name, f"echo {n}", f"{name}-{n}", f"{n}\n"))
        hooks.send("Stop", {"session_id": name, "cwd": "/tmp", "stop_hook_active": False,
                            "last_assistant_message": "done"})

    threads = [threading.Thread(target=session, args=(name, calls)) for name, calls in (("a", 3), ("b", 5))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    turns = hooks.journal()
    for name, calls in (("a", 3), ("b", 5)):
        turn = turns[turn_id_of(Agent.CLAUDE_CODE, name)]
        assert (turn["status"], turn["steps"]) == ("done", calls)


def block_gh(hooks: Hooks, session: str) -> subprocess.CompletedProcess[str]:
    """Play a headless session's moves around the logged-out gh (as the real Claude Code sent them)
    until the guard asks; returns the last hook's output."""
    hooks.send("SessionStart", {"session_id": session, "cwd": "/tmp", "source": "startup"})
    hooks.send("PreToolUse", pre(session, "gh auth status", "u1"))
    hooks.send("PostToolUseFailure", failed(session, "gh auth status", "u1", 1, GH_LOGGED_OUT))
    hooks.send("PreToolUse", pre(session, "gh auth login", "u2"))
    hooks.send("PreToolUse", pre(session, "gh auth login --web", "u3"))
    hooks.send("PreToolUse", pre(session, "curl -sS https://api.github.com/repos/cli/cli", "u4"))
    hooks.send("PostToolUseFailure", failed(session, "curl -sS https://api.github.com/repos/cli/cli", "u4", 7,
                                            "curl: (7) Failed to connect to 127.0.0.1 port 9: Couldn't connect"))
    return hooks.send("PreToolUse", pre(session, "env | sort", "u5"))


def test_an_attended_session_streams_its_question_and_takes_the_answer_from_another_terminal(hooks: Hooks) -> None:
    stopped = json.loads(block_gh(hooks, "headless").stdout)  # headless: it stops, and the lesson is kept
    assert stopped["continue"] is False and "gh auth login" in stopped["stopReason"]
    watcher = subprocess.Popen([sys.executable, "-m", "unstuck", "answer", "--watch", "--socket", str(hooks.socket)],
                               env=hooks.env(attended=True), stdout=subprocess.PIPE, text=True)
    try:
        start = hooks.send("SessionStart", {"session_id": "person", "cwd": "/tmp", "source": "startup"},
                           attended=True)
        assert "gh auth login" in json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
        asked: dict[str, subprocess.CompletedProcess[str]] = {}
        call = threading.Thread(target=lambda: asked.setdefault("hook", hooks.send(
            "PreToolUse", pre("person", "gh repo view cli/cli", "p1"), attended=True, timeout=120)))
        call.start()
        assert watcher.stdout is not None
        lines = [watcher.stdout.readline() for _ in range(4)]
        assert lines[0].startswith("claude-code session person asks:"), lines
        assert any("gh auth login" in line for line in lines)
        still = hooks.unstuck("answer", "person", "done")
        assert still.returncode == 3 and "still blocked" in still.stdout  # the probe ran: gh is still signed out
        with FakeGitHub(Path(tempfile.mkdtemp(prefix="ugh-")) / "api.sock") as api:  # the user signs gh in
            (hooks.root / "gh" / "hosts.yml").write_text(
                f"github.com:\n    oauth_token: {api.token}\n    user: octocat\n    git_protocol: https\n", "utf-8")
            (hooks.root / "gh" / "config.yml").write_text(f"http_unix_socket: {api.socket_path}\n", "utf-8")
            answered = hooks.unstuck("answer", "person", "done")
            assert answered.returncode == 0, answered
            call.join(60)
        out = asked["hook"]
        assert out.returncode == 0 and "deny" not in out.stdout  # the call runs now
    finally:
        watcher.terminate()
        watcher.wait(10)


def wait_for(check: Any, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.1)
    return bool(check())


def test_a_crashed_server_fails_open_once_and_the_next_call_restarts_it(hooks: Hooks) -> None:
    hooks.send("PreToolUse", pre("s1", "ls", "t1"))
    found = ping(hooks.socket)
    assert found is not None
    os.kill(found["pid"], 9)  # a crash: the socket file stays behind, nobody listens on it
    assert wait_for(lambda: not Path(f"/proc/{found['pid']}").exists(), 10)
    out = hooks.send("PreToolUse", pre("s1", "gh auth login --web", "t2"))
    assert out.returncode == 0 and out.stdout == "" and len(out.stderr.strip().splitlines()) == 1
    assert wait_for(lambda: ping(hooks.socket) is not None)
    again = hooks.send("PreToolUse", pre("s1", "gh auth login --web", "t3"))
    assert json.loads(again.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_server_exits_after_its_idle_time(hooks: Hooks) -> None:
    started = hooks.unstuck("serve", "--detach", "--idle-exit", "1")
    assert started.returncode == 0, started
    found = ping(hooks.socket)
    assert found is not None
    assert wait_for(lambda: not Path(f"/proc/{found['pid']}").exists(), 20)
    assert not hooks.socket.exists()


def test_secrets_in_hook_payloads_are_never_stored_logged_or_shown(hooks: Hooks) -> None:
    """Every sourced secret format, in a hook's command line and in the tool's failing output:
    no file the server, the journal or the lessons write (the store, the home, the socket's
    folder with the server's log) and no stream of `journal list/show`, `lessons list`, `report`
    `answer` or `hooks status` holds any of their secret material (DESIGN.md, do no harm)."""
    from secret_samples import samples

    found = samples()
    texts = [sample.text for sample in found]
    output = GH_LOGGED_OUT + "\n" + "\n".join(texts)
    streams: list[str] = []
    for n, text in enumerate(texts):  # each secret as its own command line, as its program takes it
        out = hooks.send("PreToolUse", pre("secrets", text, f"u{n}"))
        streams += [out.stdout, out.stderr]
    out = hooks.send("PostToolUseFailure", failed("secrets", texts[-1], f"u{len(texts) - 1}", 4, output))
    streams += [out.stdout, out.stderr]
    listed = subprocess.run([sys.executable, "-m", "unstuck", "journal", "list", "--json"], env=hooks.env(),
                            capture_output=True, text=True, timeout=60, check=True)
    streams.append(listed.stdout)
    for args in (("journal", "show", turn_id_of(Agent.CLAUDE_CODE, "secrets")), ("lessons", "list"), ("report",)):
        shown = subprocess.run([sys.executable, "-m", "unstuck", *args], env=hooks.env(), capture_output=True,
                               text=True, timeout=60, check=False)
        assert shown.returncode == 0, (args, shown.stderr)
        streams += [shown.stdout, shown.stderr]
    for args in (("answer",), ("answer", "--json"), ("hooks", "status")):  # what the server lists
        shown = hooks.unstuck(*args)
        streams += [shown.stdout, shown.stderr]
    stop_server(hooks.socket)
    files = [path for root in (hooks.root, hooks.socket.parent) for path in root.rglob("*") if path.is_file()]
    assert any(path.suffix == ".db" for path in files)  # the session was journaled: there is something to read
    contents = [path.read_bytes().decode("utf-8", "replace") for path in files] + streams
    leaked = {(sample.name, piece) for sample in found for piece in sample.secrets
              for text in contents if piece in text}
    assert not leaked, sorted(leaked)[:10]


def test_an_unknown_answer_is_refused_naming_the_words_the_command_takes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from unstuck.cli.app import app

    where = tmp_path / "guard.sock"
    where.write_text("")  # the answer is checked before any server is asked
    done = CliRunner().invoke(app, ["answer", "sess-1", "bogus", "--socket", str(where)])
    assert done.exit_code == 2 and "done, skip, stop" in done.output, done.output
