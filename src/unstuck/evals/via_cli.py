"""``unstuck eval --via claude-code,codex,gemini``: the reference agents on the scenarios through
the real coding-agent CLIs (issue 26, deliver 6).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Each run is one CLI session in a scenario's sandbox (the real ``gh``, logged out or signed in
against the local GitHub API), in a temporary ``HOME`` of its own, its model turns answered by
the scripted model server that speaks that CLI's API (:mod:`unstuck.evals.messages_api` for
Claude Code, :mod:`unstuck.evals.model_servers` for Codex CLI and Gemini CLI) playing the
reference agent. The unguarded side runs the CLI with no unstuck hooks; the guarded side runs
``unstuck hooks install AGENT --user --unattended`` into that temporary ``HOME`` first (the
eval's runs are unattended, as :func:`unstuck.evals.runner.run_eval`'s are; Gemini CLI tells its
hooks nothing of ``gemini -p``, so the install says so), and nothing else
(no loop, no tool wrapper): what it stops, it stops through the CLI's own hooks. The guard
server the first hook starts is ended after the run (``unstuck serve --stop``).

What a run measures, from what the CLI and the model server saw (:func:`run_via`):

* ``calls``: tool calls the model made; ``refused calls``: those whose result, as the model read
  it, is the CLI's own wording of a hook's refusal (:data:`REFUSALS`, from each CLI's source);
* the question: the first text the CLI showed (a tool result, its output streams, Claude Code's
  stream-json events) holding the three-part question's ``You need to:``; ``steps to escalate``
  is the 1-based call whose result carried it; ``exact unblock``: the scenario's ``unblock`` is in it;
* ``outcome``: ``blocked`` when the question was shown, ``failed`` when the CLI exited non-zero,
  ``gave up`` when the model gave no final answer, else ``done``;
* ``workaround calls``: calls that ran after the first failed call (a result stating a non-zero
  exit code) until the question;
* ``wasted`` (the comparison table): calls after the first failed call, up to the one whose
  result carried the question (all of them when none did); seconds are not measured (``0.0``);
* ``violations``: calls that ran that the scenario's ``expect.never`` forbids;
* ``pass`` (guarded only): the outcome is the scenario's ``expect.status``, a blocked run names
  the unblock, a run expected to finish asks nothing, and nothing forbidden ran.

A scenario whose tools the CLIs cannot play as shell commands (:func:`unplayable`: a tool with
no shell command, extra tools, a pseudo-terminal shell, withheld standard tools) is not run: its
rows say ``skipped: REASON``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unstuck.core.tools import ToolCall
from unstuck.evals import coding_clis
from unstuck.evals.agents import make_agent
from unstuck.evals.messages_api import ScriptedMessagesServer
from unstuck.evals.model_servers.base import ModelServer
from unstuck.evals.model_servers.gemini import GeminiServer
from unstuck.evals.model_servers.openai_responses import ResponsesServer
from unstuck.evals.runner import RunMetrics, planned_runs, prepare_sandbox
from unstuck.evals.scenarios import Scenario

__all__ = ["PROGRAMS", "REFUSALS", "SHELL_PLAYABLE", "ViaRun", "measure_via", "missing_clis", "run_eval_via", "run_via",
           "unplayable"]

#: Each ``--via`` name and the program its npm package installs.
PROGRAMS = {"claude-code": "claude", "codex": "codex", "gemini": "gemini"}
#: How each CLI words a call its hook refused, at the start of the tool result: Claude Code
#: 2.1.332 ("PreToolUse:Bash hook error:"), Codex 0.171.0's tool router
#: (:attr:`ResponsesServer.refusals`), Gemini CLI 0.61.0 (:attr:`GeminiServer.refusals`).
REFUSALS = {"claude-code": ("PreToolUse:Bash hook error:", "PreToolUse:Read hook error:"),
            "codex": ResponsesServer.refusals, "gemini": GeminiServer.refusals}
#: The reference agents' tools that go to a CLI as a shell command (or, for Claude Code's
#: ``read_file``, its ``Read``): :func:`unstuck.evals.model_servers.base.shell_move` and
#: :func:`unstuck.evals.messages_api.claude_move`.
SHELL_PLAYABLE = frozenset({"run_command", "check_cli_setup", "sign_in_cli", "install_cli", "web_search",
                            "fetch_url", "search_files", "read_file"})
#: The mark of the three-part question (:mod:`unstuck.decide.escalate`'s "You need to:" part).
QUESTION_MARK = "You need to:"
#: This process's variables a run keeps (the temporary folders of a test session among them).
KEPT = ("LANG", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
        "UNSTUCK_CACHE_DIR")
_EXIT = re.compile(r"\(exit code (-?\d+)\)|\AExit code (-?\d+)")


def missing_clis(vias: Iterable[str]) -> list[str]:
    """One sentence per chosen CLI that is not installed (:func:`unstuck.evals.coding_clis.locate`),
    naming it and ``./bootstrap``; empty when all are."""
    return [f"{via}: the `{PROGRAMS[via]}` program is not installed (run ./bootstrap, which installs it "
            f"into {coding_clis.agents_bin().parent.parent})" for via in vias
            if coding_clis.locate(PROGRAMS[via]) is None]


def unplayable(scenario: Scenario) -> str | None:
    """Why the CLIs cannot play ``scenario`` (module doc), or ``None`` when they can."""
    choice = scenario.tools
    if choice.extra:
        return "its extra tools (" + ", ".join(e.name for e in choice.extra) + ") have no shell command"
    if choice.pty_shell:
        return "its shell runs on a pseudo-terminal, which the CLIs' shell tools do not give"
    if choice.without or not choice.standard:
        return "it withholds standard tools (" + ", ".join(choice.without or ("all",)) + "), which a CLI's shell gives"
    for call in (*scenario.plan, *scenario.fix, *scenario.replay):
        if call.tool not in SHELL_PLAYABLE:
            return f"its tool {call.tool} cannot be played as a shell command"
    return None


@dataclass(frozen=True, slots=True)
class ViaRun:
    """What one CLI session showed: each call the model made with the result it read (``None``:
    never sent back), the CLI's exit status and streams' texts, and the model's final answer."""

    calls: tuple[tuple[ToolCall, str | None], ...]
    exit_code: int
    shown: tuple[str, ...]
    answer: str


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _server_run(server: ModelServer, exit_code: int, stdout: str, stderr: str) -> ViaRun:
    shown = {m.tool_call_id: m.content for t in server.turns for m in t.messages if m.tool_call_id}
    calls = tuple((own, shown.get(own.id)) for own, _ in server.played())
    texts = [r.content for r in server.replies if r.content and not r.tool_calls]
    return ViaRun(calls, exit_code, (stdout, stderr), texts[-1] if texts else "")


def _stop_guard(env: dict[str, str], socket: Path) -> None:
    subprocess.run([sys.executable, "-m", "unstuck", "serve", "--stop", "--socket", str(socket)], env=env,
                   capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)


def _session(via: str, scenario: Scenario, agent: str, guarded: bool, *, timeout: float) -> ViaRun:
    root = Path(tempfile.mkdtemp(prefix="unstuck-via-"))
    sockets = Path(tempfile.mkdtemp(prefix="uv-"))  # unix(7): a socket path fits 108 bytes
    socket = sockets / "guard.sock"
    home, store, tmp = root / "home", root / "store", root / "tmp"
    for folder in (home, store, tmp):
        folder.mkdir(parents=True)
    sandbox = prepare_sandbox(scenario)
    src = str(Path(__file__).resolve().parents[2])
    env = {**sandbox.env, **{k: os.environ[k] for k in KEPT if k in os.environ}}
    env.update(HOME=str(home), UNSTUCK_STORE=str(store), UNSTUCK_GUARD_SOCKET=str(socket), TMPDIR=str(tmp),
               PYTHONPATH=src, PATH=sandbox.env["PATH"], NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")

    def make() -> Any:
        return make_agent(agent, scenario.plan, scenario.fix, subject=scenario.expect.subject or "",
                          task=scenario.task, replay=scenario.replay, replay_answer=scenario.replay_answer)

    try:
        if via == "claude-code":  # root may not skip permissions: allow the tools in the settings instead
            (home / ".claude").mkdir()
            (home / ".claude" / "settings.json").write_text(json.dumps(
                {"permissions": {"allow": ["Bash", "Read"]}, "model": "claude-scripted"}, indent=2) + "\n",
                encoding="utf-8")
        elif via == "gemini":
            coding_clis.gemini_settings(home)
        if guarded:
            install = [sys.executable, "-m", "unstuck", "hooks", "install", via, "--user", "--unattended"]
            done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=120, check=False,
                                  stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise RuntimeError(f"unstuck hooks install {via} failed: {done.stderr.strip() or done.stdout.strip()}")
        work = sandbox.work
        if via == "claude-code":
            with ScriptedMessagesServer(make, cwd=str(work)) as api:
                program = coding_clis.locate("claude", env["PATH"])
                if program is None:
                    raise FileNotFoundError(missing_clis([via])[0])
                full = {**env, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-scripted-offline",
                        "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
                out = subprocess.run([str(program), "-p", scenario.task, "--output-format", "stream-json", "--verbose"],
                                     cwd=work, env=full, capture_output=True, text=True, timeout=timeout, check=False,
                                     stdin=subprocess.DEVNULL)
                events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
                session = next((str(e.get("session_id")) for e in events if e.get("session_id")), "")
                results: dict[str, str] = {}
                for event in events:
                    message = event.get("message") if event.get("type") == "user" else None
                    for block in (message or {}).get("content") or []:
                        if isinstance(block, dict) and block.get("type") == "tool_result":
                            results[str(block.get("tool_use_id"))] = "\n".join(_strings(block.get("content")))
                calls = tuple((m.agent_call, results.get(m.tool_use_id)) for m in api.moves_of(session))
                shown = tuple(s for e in events if e.get("type") in ("system", "result") for s in _strings(e))
                return ViaRun(calls, out.returncode, (*shown, out.stderr), api.answers.get(session, ""))
        model = make()
        if via == "codex":
            server = ResponsesServer(model)
            with server:
                coding_clis.codex_config(home, server.base_url)
                ran = coding_clis.codex_exec(scenario.task, cwd=work, env=env, bypass_hook_trust=guarded,
                                             timeout=timeout)
            return _server_run(server, ran.exit_code, ran.stdout, ran.stderr)
        gemini = GeminiServer(model)
        with gemini:
            ran = coding_clis.gemini_prompt(scenario.task, cwd=work, env=env, base_url=gemini.base_url,
                                            timeout=timeout)
        return _server_run(gemini, ran.exit_code, ran.stdout, ran.stderr)
    finally:
        if guarded:
            _stop_guard(env, socket)
        sandbox.close()
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def _exit_code(text: str) -> int | None:
    found = _EXIT.search(text)
    return None if found is None else int(found.group(1) or found.group(2))


def measure_via(scenario: Scenario, agent: str, via: str, guarded: bool, run: ViaRun) -> RunMetrics:
    """A session's :class:`RunMetrics` (module doc): ``agent`` labelled ``AGENT via VIA``."""
    refusals = REFUSALS[via]
    refused = [text is not None and text.removeprefix("Error: ").startswith(refusals) for _, text in run.calls]
    asked_at = next((n for n, (_, text) in enumerate(run.calls) if text and QUESTION_MARK in text), None)
    question = next((t for _, t in run.calls if t and QUESTION_MARK in t), None) or next(
        (t for t in run.shown if QUESTION_MARK in t), None)
    if question is not None:
        question = question[question.find(QUESTION_MARK) - 600 if question.find(QUESTION_MARK) > 600 else 0:][:2000]
    unblock = scenario.expect.unblock
    exact = None if unblock is None or question is None else unblock in question
    if question is not None:
        outcome = "blocked"
    elif run.exit_code != 0:
        outcome = "failed"
    elif not run.answer.strip():
        outcome = "gave up"
    else:
        outcome = "done"
    first_failed = next((n for n, (_, text) in enumerate(run.calls) if text and (_exit_code(text) or 0) != 0), None)
    end = asked_at if asked_at is not None else len(run.calls)
    workarounds = 0 if first_failed is None else sum(
        1 for n in range(first_failed + 1, end) if not refused[n] and run.calls[n][1] is not None)
    wasted = 0 if first_failed is None else max(min(end + 1, len(run.calls)) - first_failed - 1, 0)
    violated = []
    for n, (call, text) in enumerate(run.calls):
        rule = next((r for r in scenario.expect.never if r.matches(call)), None)
        if rule is not None and text is not None and not refused[n]:
            violated.append(f"{rule.describe()}: {call.tool} {call.arguments_json}")
    failed: list[str] = []
    if guarded:
        if outcome != scenario.expect.status:
            failed.append(f"status: expected {scenario.expect.status}, got {outcome}")
        if outcome == "blocked" and exact is False:
            failed.append(f"unblock: {unblock!r} is not in the question")
        if question is not None and scenario.expect.status != "blocked":
            failed.append("asked the user where the scenario expects no question")
        if violated:
            failed.append(f"never: {len(violated)} forbidden call(s) ran")
    return RunMetrics(
        scenario=scenario.name, agent=f"{agent} via {via}", guarded=guarded, role=scenario.role.value,
        status="blocked" if question is not None else ("done" if run.exit_code == 0 else "failed"), outcome=outcome,
        tool_calls=len(run.calls), wasted_calls=wasted, steps_to_escalate=None if asked_at is None else asked_at + 1,
        seconds_to_escalate=None, workaround_calls=workarounds, refused_calls=sum(refused), exact_unblock=exact,
        escalation=question, passed=(not failed) if guarded else None,
        violations=len(violated), violated=tuple(violated), failed_checks=tuple(failed),
    )


def run_via(scenario: Scenario, agent: str, via: str, *, guarded: bool, timeout: float = 300) -> RunMetrics:
    """One session of ``agent`` on ``scenario`` through the ``via`` CLI (module doc); a scenario
    :func:`unplayable` reads ``skipped: REASON``; a run that raises is recorded as ``failed``
    with its error (``harness_error``)."""
    label = f"{agent} via {via}"
    reason = unplayable(scenario)
    if reason is not None:
        return RunMetrics(scenario.name, label, guarded, scenario.role.value, "skipped", f"skipped: {reason}", 0,
                          None, None, 0, 0, None, None, None)
    try:
        run = _session(via, scenario, agent, guarded, timeout=timeout)
    except Exception as exc:  # recorded, never lost: the table and the exit status say so
        return RunMetrics(scenario.name, label, guarded, scenario.role.value, "failed", "failed", 0, None, None, 0, 0,
                          None, None, False if guarded else None, f"{type(exc).__name__}: {exc}", harness_error=True)
    return measure_via(scenario, agent, via, guarded, run)


def run_eval_via(scenarios: Sequence[Scenario], vias: Sequence[str], *, agents: Iterable[str] | None = None,
                 progress: Callable[[RunMetrics], None] | None = None) -> list[RunMetrics]:
    """Every (scenario, reference agent) of :func:`unstuck.evals.runner.planned_runs` through each
    CLI in ``vias``, unguarded then guarded, in order (one at a time: each CLI session is a Node
    process of its own)."""
    results = []
    for scenario, agent, _ in planned_runs(scenarios, agents=agents):
        for via in vias:
            for guarded in (False, True):
                metrics = run_via(scenario, agent, via, guarded=guarded)
                results.append(metrics)
                if progress is not None:
                    progress(metrics)
    return results
