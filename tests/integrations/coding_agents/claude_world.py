"""The real Claude Code driven offline: a temporary home with (or without) unstuck's hooks
installed by ``unstuck hooks install``, a scripted Messages API server on 127.0.0.1
(:class:`unstuck.evals.messages_api.ScriptedMessagesServer`) playing a reference agent, and a
scenario's sandbox (the real gh, logged out or signed in against the local GitHub API).

``claude -p TASK --output-format stream-json --verbose`` runs with ``ANTHROPIC_BASE_URL`` at the
server, ``HOME`` the temporary home (its ``.claude/settings.json`` allows ``Bash`` and ``Read``:
Claude Code refuses ``--dangerously-skip-permissions`` as root), ``TMPDIR`` inside the world,
and the guard server's socket and stores in the world too; :meth:`ClaudeWorld.close` stops the
guard server the first hook started. The CLI is the one ``./bootstrap`` installs
(``.agents/node_modules/.bin/claude``, pinned :data:`CLAUDE_VERSION`); without it a test is
skipped, and fails under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from unstuck.evals.agents import make_agent
from unstuck.evals.messages_api import Move, ScriptedMessagesServer
from unstuck.evals.runner import prepare_sandbox
from unstuck.evals.scenarios import Scenario, builtin_scenarios
from unstuck.integrations.coding_agents.client import stop_server

REPO = Path(__file__).resolve().parents[3]
#: The Claude Code release ./bootstrap installs.
CLAUDE_VERSION = "2.1.332"
#: The text Claude Code puts before a PreToolUse hook's deny reason in the tool result.
HOOK_DENIAL = "PreToolUse:Bash hook error:"


def claude_binary() -> str:
    """The pinned ``claude``: ``$UNSTUCK_CLAUDE``, ``.agents/node_modules/.bin/claude``, or on
    ``PATH``; skips the test when there is none (fails it under ``CI=true``)."""
    for candidate in (os.environ.get("UNSTUCK_CLAUDE"), str(REPO / ".agents/node_modules/.bin/claude"),
                      shutil.which("claude")):
        if candidate and os.access(candidate, os.X_OK):
            out = subprocess.run([candidate, "--version"], capture_output=True, text=True, timeout=60, check=False)
            if out.stdout.startswith(CLAUDE_VERSION):
                return candidate
    message = f"Claude Code {CLAUDE_VERSION} is not installed (./bootstrap installs it into .agents/)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def scenario(name: str) -> Scenario:
    return next(s for s in builtin_scenarios() if s.name == name)


@dataclass
class ClaudeRun:
    """One ``claude -p`` session."""

    exit_code: int
    events: list[dict[str, Any]]
    stderr: str
    moves: list[Move]
    answer: str | None

    @property
    def result(self) -> dict[str, Any]:
        """The final ``result`` event (what ``--output-format json`` prints)."""
        return next(e for e in reversed(self.events) if e.get("type") == "result")

    @property
    def session_id(self) -> str:
        return str(self.result.get("session_id"))

    def tool_results(self) -> dict[str, tuple[str, bool]]:
        """Each tool result Claude Code gave the model: tool_use id → (text, is_error)."""
        found: dict[str, tuple[str, bool]] = {}
        for event in self.events:
            message = event.get("message") if event.get("type") == "user" else None
            for block in (message or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content = block.get("content")
                    text = content if isinstance(content, str) else "\n".join(
                        str(b.get("text", "")) for b in content or [] if isinstance(b, dict))
                    found[str(block.get("tool_use_id"))] = (text, bool(block.get("is_error")))
        return found

    @property
    def denied(self) -> set[str]:
        """Tool calls a hook refused (the result's ``permission_denials``)."""
        return {str(d.get("tool_use_id")) for d in self.result.get("permission_denials") or []}

    @property
    def ran(self) -> list[Move]:
        """The moves whose tool ran: not refused, and with a result."""
        results = self.tool_results()
        return [m for m in self.moves if m.tool_use_id in results and m.tool_use_id not in self.denied
                and not results[m.tool_use_id][0].startswith(HOOK_DENIAL)]

    def commands(self, moves: list[Move] | None = None) -> list[str]:
        return [str(m.arguments.get("command", m.arguments.get("file_path", ""))) for m in (moves or self.moves)]

    def system_messages(self) -> list[str]:
        """What Claude Code showed as hook system messages (stream-json ``system`` events)."""
        return [json.dumps(e) for e in self.events if e.get("type") == "system"
                and e.get("subtype") not in ("init", "hook_started")]


@dataclass
class ClaudeWorld:
    """A home, stores and a guard server socket for a test's Claude Code sessions."""

    root: Path
    guarded: bool
    unattended_install: bool = False
    claude: str = field(default_factory=claude_binary)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.store = self.root / "store"
        self.tmp = self.root / "tmp"
        for folder in (self.home / ".claude", self.store, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        # a short path for the socket (unix(7) allows 108 bytes)
        self.socket_dir = Path(tempfile.mkdtemp(prefix="ucc-"))
        self.socket = self.socket_dir / "guard.sock"
        settings = {"permissions": {"allow": ["Bash", "Read"]}, "model": "claude-scripted"}
        self.settings = self.home / ".claude" / "settings.json"
        self.settings.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        if self.guarded:
            self.unstuck("hooks", "install", "claude-code", "--user",
                         *(["--unattended"] if self.unattended_install else []))

    def base_env(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in ("PATH", "PYTHONPATH", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                                    "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
                                                    "UNSTUCK_CACHE_DIR", "LANG") if name in os.environ}
        env.update(HOME=str(self.home), UNSTUCK_STORE=str(self.store), UNSTUCK_GUARD_SOCKET=str(self.socket),
                   TMPDIR=str(self.tmp))
        return env

    def unstuck(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([sys.executable, "-m", "unstuck", *args], env=self.base_env(), capture_output=True,
                             text=True, timeout=120, check=False)
        if check:
            assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out

    def journal(self) -> list[dict[str, Any]]:
        out = self.unstuck("journal", "list", "--json")
        found: list[dict[str, Any]] = json.loads(out.stdout)
        return found

    def lessons(self) -> list[dict[str, Any]]:
        out = self.unstuck("lessons", "list", "--all", "--json", check=False)
        if out.returncode != 0 or not out.stdout.strip().startswith("["):
            return []
        found: list[dict[str, Any]] = json.loads(out.stdout)
        return found

    def run(self, scenario_name: str, agent: str = "improviser", *, gh: str | None = None) -> ClaudeRun:
        """One ``claude -p`` session on the bundled scenario with the reference agent."""
        chosen = scenario(scenario_name)
        sandbox = prepare_sandbox(chosen)
        try:
            def make() -> Any:
                return make_agent(agent, chosen.plan, chosen.fix, subject=chosen.expect.subject or "",
                                  task=chosen.task)

            with ScriptedMessagesServer(make, cwd=str(sandbox.work)) as api:
                env = dict(sandbox.env)
                env.update(self.base_env())
                env["PATH"] = sandbox.env["PATH"]
                env.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-scripted-offline",
                           DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                           NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
                out = subprocess.run([self.claude, "-p", chosen.task, "--output-format", "stream-json", "--verbose"],
                                     cwd=sandbox.work, env=env, capture_output=True, text=True, timeout=300,
                                     check=False, stdin=subprocess.DEVNULL)
                events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
                session = next((str(e.get("session_id")) for e in events if e.get("session_id")), "")
                return ClaudeRun(out.returncode, events, out.stderr, api.moves_of(session), api.answers.get(session))
        finally:
            sandbox.close()

    def close(self) -> None:
        stop_server(self.socket)
        shutil.rmtree(self.socket_dir, ignore_errors=True)
