"""The real Codex CLI and Gemini CLI driven offline: a temporary home (its ``.codex/config.toml``
naming a loopback Responses API provider, or its ``.gemini/settings.json`` with the API-key
sign-in), a scripted model server on 127.0.0.1 (:mod:`unstuck.evals.model_servers`) playing an
unstuck model (a reference agent or a list of moves), and a working folder (a scenario's
sandbox with the real gh, or a plain temporary folder).

The CLIs are the ones ``./bootstrap`` installs (``.agents/node_modules/.bin``, pinned
versions); without one a test is skipped, and fails under ``CI=true``. The environment of a run
is built from this process's ``PATH``, XDG folders, ``UNSTUCK_CACHE_DIR`` and ``LANG`` (the test
session's temporary ones), with ``HOME`` the world's own; :meth:`AgentWorld.close` stops the
guard server a hook started (its socket is the world's).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import bare_env
from unstuck.evals import coding_clis
from unstuck.evals.agents import make_agent
from unstuck.evals.model_servers.base import ModelServer
from unstuck.evals.model_servers.gemini import GeminiServer
from unstuck.evals.model_servers.openai_responses import ResponsesServer
from unstuck.evals.runner import prepare_sandbox
from unstuck.evals.scenarios import Scenario, builtin_scenarios
from unstuck.toolkit.models import Model

SRC = Path(__file__).resolve().parents[3] / "src"
#: This process's variables a run keeps (the test session's temporary folders among them).
KEPT = ("PATH", "LANG", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
        "UNSTUCK_CACHE_DIR")


def cli_binary(name: str, version: str) -> str:
    """The pinned ``name`` CLI (:func:`unstuck.evals.coding_clis.locate`) reporting ``version``;
    skips the test when there is none (fails it under ``CI=true``)."""
    found = coding_clis.locate(name)
    if found is not None:
        out = subprocess.run([str(found), "--version"], capture_output=True, text=True, timeout=60, check=False,
                             env={**os.environ, "HOME": tempfile.gettempdir()})
        if version in out.stdout:
            return str(found)
    message = f"{name} {version} is not installed (./bootstrap installs it into .agents/)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def scenario(name: str) -> Scenario:
    """The bundled scenario called ``name``."""
    return next(s for s in builtin_scenarios() if s.name == name)


@dataclass
class AgentRun:
    """One CLI session: its exit status and streams, and the model server it talked to."""

    exit_code: int
    stdout: str
    stderr: str
    server: ModelServer

    @property
    def commands(self) -> list[str]:
        """The shell command lines the model asked the agent to run, in order."""
        shell = self.server.shell
        return [str(agent.arguments.get(shell.argument, "")) for _, agent in self.server.played()
                if agent.tool == shell.name]

    def results(self) -> list[str]:
        """Each tool result the agent sent back, as the model read it, in order."""
        seen: dict[str, str] = {}
        for turn in self.server.turns:
            for message in turn.messages:
                if message.tool_call_id is not None:
                    seen.setdefault(message.tool_call_id, message.content)
        return list(seen.values())

    def refused(self, refusals: tuple[str, ...]) -> list[bool]:
        """For each call played, in order: whether the agent's result says a hook refused it
        (starts with one of ``refusals``, as the model read it, after ``Error:``)."""
        shown = {m.tool_call_id: m.content for t in self.server.turns for m in t.messages if m.tool_call_id}
        found = []
        for own, _agent in self.server.played():
            text = shown.get(own.id)
            found.append(text is not None and text.removeprefix("Error: ").startswith(refusals))
        return found

    def result_of(self, index: int) -> str | None:
        """The result of the ``index``-th call played, as the model read it (``None``: the agent
        never sent one back)."""
        own = self.server.played()[index][0]
        return next((m.content for t in self.server.turns for m in t.messages if m.tool_call_id == own.id), None)

    @property
    def answer(self) -> str:
        """The model's last text (its final answer)."""
        texts = [r.content for r in self.server.replies if r.content and not r.tool_calls]
        return texts[-1] if texts else ""

    def requests_text(self) -> str:
        """Every request body the agent sent, as JSON text (to find what the model was shown)."""
        return "\n".join(json.dumps(r.body) for r in self.server.requests)


@dataclass
class AgentWorld:
    """A home, a store and a guard-server socket for one test's sessions of one agent."""

    root: Path
    home: Path = field(init=False)
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.work = self.root / "work"
        self.store = self.root / "store"
        self.tmp = self.root / "tmp"
        for folder in (self.home, self.work, self.store, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        self.socket_dir = Path(tempfile.mkdtemp(prefix="uag-"))  # unix(7): a socket path fits 108 bytes
        self.socket = self.socket_dir / "guard.sock"

    def base_env(self) -> dict[str, str]:
        """The environment of this world's processes (module doc)."""
        env = {name: os.environ[name] for name in KEPT if name in os.environ}
        env.update(HOME=str(self.home), UNSTUCK_STORE=str(self.store), UNSTUCK_GUARD_SOCKET=str(self.socket),
                   TMPDIR=str(self.tmp), PYTHONPATH=str(SRC))
        return env

    def unstuck(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``python -m unstuck ARGS`` in this world."""
        out = subprocess.run([sys.executable, "-m", "unstuck", *args], env=self.base_env(), capture_output=True,
                             text=True, timeout=120, check=False)
        if check:
            assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out

    def journal(self) -> list[dict[str, Any]]:
        """``unstuck journal list --json`` in this world."""
        out = self.unstuck("journal", "list", "--json", check=False)
        if out.returncode != 0 and "no journal" in out.stderr:
            return []  # no hook ever reached the guard server
        assert out.returncode == 0, (out.stdout, out.stderr)
        found: list[dict[str, Any]] = json.loads(out.stdout)
        return found

    def lessons(self) -> list[dict[str, Any]]:
        """``unstuck lessons list --all --json`` in this world (``[]`` when there is no store yet)."""
        out = self.unstuck("lessons", "list", "--all", "--json", check=False)
        if out.returncode != 0 or not out.stdout.strip().startswith("["):
            return []
        found: list[dict[str, Any]] = json.loads(out.stdout)
        return found

    def run(self, model: Model, task: str, *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None) -> AgentRun:
        """One session of the agent playing ``model`` (each world defines it)."""
        raise NotImplementedError

    def scenario_run(self, name: str, agent: str = "improviser", **options: Any) -> AgentRun:
        """One session on the bundled scenario ``name`` (its sandbox: the real gh, logged out or
        signed in against the local GitHub API) with the reference agent ``agent``."""
        chosen = scenario(name)
        sandbox = prepare_sandbox(chosen)
        try:
            model = make_agent(agent, chosen.plan, chosen.fix, subject=chosen.expect.subject or "", task=chosen.task)
            env = bare_env(**{**sandbox.env, **self.base_env()})
            env.update({"PATH": sandbox.env["PATH"], "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
            return self.run(model, chosen.task, cwd=sandbox.work, env=env, **options)
        finally:
            sandbox.close()

    def close(self) -> None:
        """Stop the guard server this world's hooks started, if any."""
        try:
            from unstuck.integrations.coding_agents.client import stop_server
        except ImportError:  # before the guard server exists
            stop_server = None
        if stop_server is not None:
            stop_server(self.socket)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


@dataclass
class CodexWorld(AgentWorld):
    """Codex CLI's world."""

    codex: str = field(default_factory=lambda: cli_binary("codex", coding_clis.CODEX_VERSION))

    def run(self, model: Model, task: str, *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
            bypass_hook_trust: bool = True, extra_config: str = "", faults: tuple[int, ...] = ()) -> AgentRun:
        """One ``codex exec`` session playing ``model`` (module doc)."""
        with ResponsesServer(model, faults=faults) as server:
            coding_clis.codex_config(self.home, server.base_url, extra=extra_config)
            full = {**self.base_env(), **(env or {})}
            out = coding_clis.codex_exec(task, cwd=cwd or self.work, env=full, bypass_hook_trust=bypass_hook_trust)
        return AgentRun(out.exit_code, out.stdout, out.stderr, server)


    def terminal(self, model: Model, prompt: str | None = None, *, wait_for: str = "", timeout: float = 60) -> list[str]:
        """Codex's interactive terminal in ``tmux`` (160x50), in this world's folder: trust every
        hook it asks about ("Hooks need review" → "Trust all and continue"), then, with
        ``prompt``, type it and wait until ``wait_for`` shows; quit. Returns the screens seen:
        before trusting, after, and after the prompt."""
        if shutil.which("tmux") is None:
            message = "tmux is not installed (./bootstrap installs it)"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        screens: list[str] = []
        session = f"unstuck-codex-{os.getpid()}-{time.monotonic_ns()}"
        with ResponsesServer(model) as server:
            # the folder trusted already, so the terminal asks about the hooks alone
            coding_clis.codex_config(self.home, server.base_url,
                                     extra=f'[projects.{json.dumps(str(self.work))}]\ntrust_level = "trusted"')
            env = {**self.base_env(), coding_clis.CODEX_KEY_VARIABLE: "scripted", "TERM": "xterm-256color"}
            argv = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), self.codex]
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50", "-c", str(self.work),
                            subprocess.list2cmdline(argv)], check=True, timeout=30)
            try:
                screens.append(self._screen_until(session, "Hooks need review", timeout))
                subprocess.run(["tmux", "send-keys", "-t", session, "2"], check=True, timeout=10)
                subprocess.run(["tmux", "send-keys", "-t", session, "Enter"], check=True, timeout=10)
                screens.append(self._screen_until(session, "Ask Codex", timeout))
                if prompt is not None:
                    # typed, then Enter on its own a moment later: keys that come in one burst
                    # read to the terminal as a paste, whose Enter is a new line, not a submit
                    time.sleep(1.5)
                    subprocess.run(["tmux", "send-keys", "-t", session, "-l", prompt], check=True, timeout=10)
                    time.sleep(1.0)
                    subprocess.run(["tmux", "send-keys", "-t", session, "Enter"], check=True, timeout=10)
                    screens.append(self._screen_until(session, wait_for, timeout))
            finally:
                subprocess.run(["tmux", "kill-session", "-t", session], check=False, timeout=30)
                left = end_processes_under(self.home)
        assert not left, f"processes under the test's home outlived their session: {left}"
        return screens

    @staticmethod
    def _screen_until(session: str, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                                   timeout=10, check=False).stdout
            if (text and text in shown) or time.monotonic() > deadline:
                return shown
            time.sleep(0.3)


def end_processes_under(home: Path, grace_s: float = 5.0) -> list[str]:
    """End every process whose program lies under ``home`` (the interactive Codex starts a
    detached ``codex app-server`` daemon from ``~/.codex/packages``, which outlives its
    terminal): SIGTERM, then SIGKILL after ``grace_s`` seconds. Returns the command lines of
    any still alive after that (none, normally)."""
    root = str(home.resolve()) + os.sep
    found: list[psutil.Process] = []
    for process in psutil.process_iter(["exe", "cmdline"]):
        program = process.info.get("exe") or next(iter(process.info.get("cmdline") or []), "")
        if program.startswith(root):
            found.append(process)
    for process in found:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(found, timeout=grace_s)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    return [" ".join(process.info.get("cmdline") or []) for process in alive]


@dataclass
class GeminiWorld(AgentWorld):
    """Gemini CLI's world; :attr:`settings` is merged into ``~/.gemini/settings.json`` before
    each run (hooks that ``unstuck hooks install`` wrote stay)."""

    gemini: str = field(default_factory=lambda: cli_binary("gemini", coding_clis.GEMINI_VERSION))
    settings: dict[str, Any] = field(default_factory=dict)

    def run(self, model: Model, task: str, *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
            faults: tuple[int, ...] = ()) -> AgentRun:
        """One ``gemini -p`` session playing ``model`` (module doc)."""
        path = self.home / ".gemini" / "settings.json"
        current: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        current.setdefault("security", {"auth": {"selectedType": "gemini-api-key"}})
        current.update(self.settings)
        coding_clis.gemini_settings(self.home, current)
        with GeminiServer(model, faults=faults) as server:
            full = {**self.base_env(), **(env or {})}
            out = coding_clis.gemini_prompt(task, cwd=cwd or self.work, env=full, base_url=server.base_url)
        return AgentRun(out.exit_code, out.stdout, out.stderr, server)


def probe_hook(root: Path, agent: str) -> Callable[[list[dict[str, Any]]], str]:
    """A hook command that reads each payload with unstuck's mapping for ``agent``
    (``codex``/``gemini``), records the parsed event, and answers with the reply the test's plan
    names for it, rendered by the mapping: ``plan(rules)`` writes the rules (each ``{"event",
    "match", "action", "reason", "context", "user_message"}``; ``match`` a text of the tool
    input) and returns the command. The records are ``root/records.jsonl``."""
    script = root / "probe_hook.py"
    records, rules_file = root / "records.jsonl", root / "rules.json"
    script.write_text(PROBE.format(src=str(SRC), agent=agent, records=str(records), rules=str(rules_file)),
                      encoding="utf-8")

    def plan(rules: list[dict[str, Any]]) -> str:
        rules_file.write_text(json.dumps(rules), encoding="utf-8")
        return f"{sys.executable} {script}"

    return plan


def probe_records(root: Path) -> list[dict[str, Any]]:
    """What :func:`probe_hook`'s hook recorded, in order."""
    path = root / "records.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


PROBE = '''\
import json, os, sys
sys.path.insert(0, {src!r})
from unstuck.core.tools import CommandOutput
from unstuck.integrations.coding_agents import {agent} as mapping
from unstuck.integrations.coding_agents.events import HookAction, HookReply
event_name = sys.argv[1]
payload = json.load(sys.stdin)
event = mapping.HOOKS.parse(event_name, payload, dict(os.environ))
output = event.output
record = {{"event": event_name, "kind": event.kind.value, "hint": event.unattended_hint,
           "tool": event.call.tool if event.call else None, "arguments": event.call.arguments if event.call else None,
           "exit_code": output.exit_code if isinstance(output, CommandOutput) else None,
           "stdout": output.stdout if isinstance(output, CommandOutput) else None}}
reply = HookReply()
for rule in json.load(open({rules!r})):
    if rule["event"] == event_name and rule.get("match", "") in json.dumps(payload.get("tool_input") or {{}}):
        reply = HookReply(HookAction(rule["action"]), reason=rule.get("reason", ""), context=rule.get("context"),
                          user_message=rule.get("user_message"))
        break
text, code = mapping.HOOKS.render(event, reply)
record["reply"] = text
with open({records!r}, "a") as out:
    out.write(json.dumps(record) + "\\n")
sys.stdout.write(text)
sys.exit(code)
'''
