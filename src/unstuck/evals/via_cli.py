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

What a run measures (:func:`measure_via`), from what the CLI and its model server saw
(:class:`ViaRun`), each metric as :mod:`unstuck.evals.runner`'s module doc defines it for the
in-process eval, read off a CLI session instead of a journal of steps:

* ``calls``: tool calls the model made; ``refused calls``: those whose result, as the model read
  it, is the CLI's own wording of a hook's refusal (:data:`REFUSALS`, from each CLI's source);
* the question: the first text the CLI showed (a tool result, its output streams, Claude Code's
  stream-json events) holding the three-part question's ``You need to:``;
  ``exact unblock``: the scenario's ``unblock`` is in it;
* the first signal (runner's ``first_signal_step``): the first call that ran (a refused call's
  result is unstuck's word, never the machine's) whose result, classified as the guard classifies
  it, opens a blocker: :func:`unstuck.recognise.classify.classify_result` on the call as the CLI
  made it (the shell command line :func:`~unstuck.evals.model_servers.base.shell_move` or
  :func:`~unstuck.evals.messages_api.claude_move` gives it, whose program is the subject; Claude
  Code's ``Read`` as a file tool on its path) and the output the CLI reported (the exit code
  where the CLI states it, read by the model server as ``(exit code N)``; a result the CLI marks
  as an error without one as failed; else the text decides; unstuck's own guidance added to a
  result, a ``<hook_context>`` block or an ``[unstuck]`` note, is left out), a blocker being a
  blocker kind or an interactive result (:mod:`unstuck.decide.policy`'s ``_opens``). The CLIs'
  transcripts carry the question's text, not its subject and kind, so the first blocker stands
  for "the first result with the escalation's subject and kind" (what runner falls back to
  without an escalation, ``first_blocker_step``); the two differ only when a session meets two
  blockers before asking. A session that meets no blocker (``wrong_path``: the agent fixes its
  own wrong path) has no first signal and wastes nothing;
* the escalating call, "the call that ended the turn with an escalation": the call whose result
  carried the question (Codex, whose hooks cannot end ``codex exec``); else the call whose own
  hook showed it in the CLI's ordered event stream (Claude Code's stream-json:
  :attr:`ViaRun.question_call`); else, the question shown by a hook that stopped the session
  (Gemini CLI's stderr, a ``Stop`` hook), the last call made;
* ``steps to escalate``: calls after the first signal up to and including the escalating call
  (``-`` when the session never asked, or asked with no blocker seen before: a turn stopped for
  repeating a failure, whose first signal only the question's kind would name);
* ``s to escalate``: seconds from the end of the first-signal call (the arrival of its result at
  the model server: :class:`unstuck.evals.model_servers.base.Arrivals`) to the question: the
  arrival of the escalating call's result when the question was shown with it or before it went
  back, else (a session stopped with it) the CLI's exit (:attr:`ViaRun.ended_s`), all on this
  process's monotonic clock;
* ``workaround calls``: calls after the first signal, up to the escalating call (or the end),
  charged to the blocker as :mod:`unstuck.decide.policy` charges (Rule 2): refused, failed (the
  CLI stated a failure, or the result classifies as one: :func:`unstuck.guard.results.reads_as_failure`),
  or of the signal's kind;
* ``wasted`` calls and seconds (the comparison table): every call after the first signal up to
  the escalating call (or, never asking, the last call), and the seconds from the first signal's
  end to the question (or, never asking, to the CLI's exit);
* ``outcome``: ``blocked`` when the question was shown, ``failed`` when the CLI exited non-zero,
  ``gave up`` when the model gave no final answer, else ``done``;
* ``violations``: calls that ran that the scenario's ``expect.never`` forbids;
* ``pass`` (guarded only): the outcome is the scenario's ``expect.status``, a blocked run names
  the unblock, a run expected to finish asks nothing, and nothing forbidden ran.

Why classification and not the guard's journal: the guarded side's hook sessions are journaled
in the run's ``UNSTUCK_STORE`` (the escalation's step, subject and kind), but the unguarded side
runs no guard and has no journal; classifying the transcript is the one method that reads both
sides, and all three CLIs, the same way, so the comparison compares like with like.

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
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unstuck.core.situations import Situation
from unstuck.core.tools import Effect, ToolCall, ToolResult
from unstuck.evals import coding_clis
from unstuck.evals.agents import make_agent
from unstuck.evals.messages_api import ScriptedMessagesServer, as_agent_reads, claude_move
from unstuck.evals.model_servers.base import SHELL_ALIAS, SHELL_ARGUMENT, ModelServer, shell_move
from unstuck.evals.model_servers.gemini import GeminiServer
from unstuck.evals.model_servers.openai_responses import ResponsesServer
from unstuck.evals.runner import RunMetrics, planned_runs, prepare_sandbox
from unstuck.evals.scenarios import Scenario
from unstuck.guard.results import reads_as_failure
from unstuck.recognise.classify import classify_result
from unstuck.toolkit.specs import ToolSpec, run_elsewhere

__all__ = ["PROGRAMS", "REFUSALS", "SHELL_PLAYABLE", "ViaCall", "ViaRun", "measure_via", "missing_clis", "reported",
           "run_eval_via", "run_via", "unplayable"]

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
#: How Claude Code 2.1.332's stream-json words a tool hook's ``systemMessage`` (a ``system``
#: event's ``content``: ``PostToolUseFailure:Bash says: TEXT``), apart from a ``Stop`` hook's.
_TOOL_HOOK_SAYS = re.compile(r"\A(?:PreToolUse|PostToolUse|PostToolUseFailure):\S+ says: ")
#: The mark of the three-part question (:mod:`unstuck.decide.escalate`'s "You need to:" part).
QUESTION_MARK = "You need to:"
#: This process's variables a run keeps (the temporary folders of a test session among them).
KEPT = ("LANG", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
        "UNSTUCK_CACHE_DIR")
#: The exit code the CLI stated, as the model server (or unstuck's hook) wrote it after the output.
_EXIT_MARK = re.compile(r"\(exit code (-?\d+)\)\s*\Z")
#: Gemini CLI's wrapper of a hook's added context (unstuck's guidance), in a tool result.
_HOOK_CONTEXT = re.compile(r"\s*<hook_context>.*?(?:</hook_context>|\Z)", re.DOTALL)
#: unstuck's own note after a tool's output (``[unstuck] …``, the hooks' guidance), to the end.
_UNSTUCK_NOTE = re.compile(r"^\[unstuck\] ", re.MULTILINE)
#: How the guard reads the CLIs' calls (module doc): a shell tool whose program is the subject,
#: and Claude Code's ``Read`` as a file tool on its path.
_SHELL = ToolSpec(SHELL_ALIAS, run_elsewhere, effect=Effect.WRITE, command_argument=SHELL_ARGUMENT)
_FILE = ToolSpec("Read", run_elsewhere, subject=lambda arguments: str(arguments.get("file_path") or "") or None,
                 document_output=True)


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
class ViaCall:
    """One tool call of a CLI session.

    Attributes:
        call: the model's own call (a reference agent's scenario tool).
        result: its result as the model read it (:meth:`ModelServer.tool_result
            <unstuck.evals.model_servers.base.ModelServer.tool_result>`,
            :func:`unstuck.evals.messages_api.as_agent_reads`); ``None``: never sent back.
        returned_s: when that result reached the model server, in seconds of this process's
            monotonic clock (:class:`unstuck.evals.model_servers.base.Arrivals`); ``None``: it
            never did.
    """

    call: ToolCall
    result: str | None
    returned_s: float | None = None


@dataclass(frozen=True, slots=True)
class ViaRun:
    """What one CLI session showed.

    Attributes:
        calls: each call the model made, in order.
        exit_code: the CLI's exit status.
        shown: the texts of the CLI's streams (and Claude Code's stream-json events).
        answer: the model's final answer ("" when it gave none).
        ended_s: when the CLI exited, on the monotonic clock of :attr:`ViaCall.returned_s`.
        question_call: where the CLI's ordered event stream first showed the question from a
            tool call's own hook (Claude Code's stream-json: a ``system`` event
            ``PostToolUseFailure:Bash says: …`` after that call's ``tool_use``): that call,
            1-based; ``None`` when no ordered stream showed it so (module doc).
    """

    calls: tuple[ViaCall, ...]
    exit_code: int
    shown: tuple[str, ...]
    answer: str
    ended_s: float = 0.0
    question_call: int | None = None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _server_run(server: ModelServer, exit_code: int, stdout: str, stderr: str, ended_s: float) -> ViaRun:
    shown = {m.tool_call_id: m.content for t in server.turns for m in t.messages if m.tool_call_id}
    calls = tuple(ViaCall(own, shown.get(own.id), server.arrivals.result_at(own.id)) for own, _ in server.played())
    texts = [r.content for r in server.replies if r.content and not r.tool_calls]
    return ViaRun(calls, exit_code, (stdout, stderr), texts[-1] if texts else "", ended_s)


def _claude_run(api: ScriptedMessagesServer, exit_code: int, stdout: str, stderr: str, ended_s: float) -> ViaRun:
    """A Claude Code session from its stream-json events (in order) and the server's moves."""
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    session = next((str(e.get("session_id")) for e in events if e.get("session_id")), "")
    results: dict[str, str] = {}
    used: list[str] = []  # tool_use ids in the order the events show them (each call's hooks follow its tool_use)
    question_call: int | None = None
    asked = False
    for event in events:
        message = event.get("message") if event.get("type") in ("user", "assistant") else None
        for block in (message or {}).get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and str(block.get("id")) not in used:
                used.append(str(block.get("id")))
            elif block.get("type") == "tool_result":
                results[str(block.get("tool_use_id"))] = as_agent_reads(block)
        if not asked and event.get("type") in ("system", "result") and any(
                QUESTION_MARK in text for text in _strings(event)):
            asked = True
            if used and event.get("type") == "system" and _TOOL_HOOK_SAYS.match(str(event.get("content") or "")):
                question_call = len(used)  # the latest call's own hook showed it
    moves = api.moves_of(session)
    calls = tuple(ViaCall(m.agent_call, results.get(m.tool_use_id), api.arrivals.result_at(m.tool_use_id))
                  for m in moves)
    if question_call is not None:  # the stream's count of calls, as the server's moves number them
        ids = [m.tool_use_id for m in moves]
        question_call = ids.index(used[question_call - 1]) + 1 if used[question_call - 1] in ids else None
    shown = tuple(text for e in events if e.get("type") in ("system", "result") for text in _strings(e))
    return ViaRun(calls, exit_code, (*shown, stderr), api.answers.get(session, ""), ended_s, question_call)


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
                ended = time.monotonic()
                return _claude_run(api, out.returncode, out.stdout, out.stderr, ended)
        model = make()
        if via == "codex":
            server = ResponsesServer(model)
            with server:
                coding_clis.codex_config(home, server.base_url)
                ran = coding_clis.codex_exec(scenario.task, cwd=work, env=env, bypass_hook_trust=guarded,
                                             timeout=timeout)
                ended = time.monotonic()
            return _server_run(server, ran.exit_code, ran.stdout, ran.stderr, ended)
        gemini = GeminiServer(model)
        with gemini:
            ran = coding_clis.gemini_prompt(scenario.task, cwd=work, env=env, base_url=gemini.base_url,
                                            timeout=timeout)
            ended = time.monotonic()
        return _server_run(gemini, ran.exit_code, ran.stdout, ran.stderr, ended)
    finally:
        if guarded:
            _stop_guard(env, socket)
        sandbox.close()
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def reported(text: str) -> tuple[str, int | None, bool]:
    """A result as the model read it (:attr:`ViaCall.result`) back to what the CLI reported:
    ``(output, exit code, failed)``. The exit code is the one the CLI stated, as the model
    server (or unstuck's hook) wrote it, ``(exit code N)``, after the output; a result marked
    ``Error:`` without one failed with no code; any other result is a success whose text
    decides. unstuck's own additions (a ``<hook_context>`` block, Gemini CLI's wrapper of a
    hook's added context; an ``[unstuck]`` note and what follows it) are left out: the guard
    classified the tool's output before adding them."""
    output = _HOOK_CONTEXT.sub("", text)
    note = _UNSTUCK_NOTE.search(output)
    if note is not None:
        output = output[:note.start()]
    output = output.rstrip()
    marked = _EXIT_MARK.search(output)
    if marked is not None:
        code = int(marked.group(1))
        return output[:marked.start()].rstrip("\n"), code, code != 0
    if output.startswith("Error: "):
        return output.removeprefix("Error: "), None, True
    return output, None, False


def _situation(via: str, call: ToolCall, text: str) -> tuple[Situation | None, bool]:
    """The call's result classified as the guard classifies it (module doc), and whether the
    call failed (the CLI said so, or the result reads as a failure)."""
    output, code, failed = reported(text)
    if via == "claude-code":
        tool, arguments = claude_move(call, ".")
    else:
        tool, arguments = SHELL_ALIAS, {SHELL_ARGUMENT: shell_move(call) or ""}
    spec = _FILE if tool == "Read" else _SHELL
    situation = classify_result(spec, arguments, ToolResult(spec.name, not failed, output, exit_code=code))
    return situation, failed or reads_as_failure(situation)


def _opens(situation: Situation | None) -> bool:
    """Whether a result that ran opens a blocker (:func:`unstuck.decide.policy`'s ``_opens``: a
    blocker kind, or a result that needs a person at a keyboard)."""
    return situation is not None and (situation.is_blocker or situation.interactive)


def _returned(run: ViaRun, index: int) -> float:
    """When call ``index``'s result reached the model server, else the CLI's exit."""
    at = run.calls[index].returned_s
    return run.ended_s if at is None else at


def _charged(read: tuple[Situation | None, bool], signal: Situation) -> bool:
    """Whether a call that ran is charged to the blocker ``signal`` opened (Rule 2 of
    :mod:`unstuck.decide.policy`): it failed, or its result is of the blocker's kind."""
    situation, failed = read
    return failed or (situation is not None and situation.kind is signal.kind)


def measure_via(scenario: Scenario, agent: str, via: str, guarded: bool, run: ViaRun) -> RunMetrics:
    """A session's :class:`RunMetrics` (module doc: each metric's definition), ``agent``
    labelled ``AGENT via VIA``; ``via`` names the CLI (:data:`PROGRAMS`).

    Raises:
        KeyError: for a ``via`` that is not one of :data:`PROGRAMS`.
    """
    refusals = REFUSALS[via]
    texts = [c.result for c in run.calls]
    refused = [text is not None and text.removeprefix("Error: ").startswith(refusals) for text in texts]
    in_result = next((n for n, text in enumerate(texts) if text and QUESTION_MARK in text), None)
    question = texts[in_result] if in_result is not None else next((t for t in run.shown if QUESTION_MARK in t), None)
    if question is not None:
        question = question[question.find(QUESTION_MARK) - 600 if question.find(QUESTION_MARK) > 600 else 0:][:2000]
    asked_at: int | None = None  # the escalating call, 0-based
    asked_s = run.ended_s  # when the question was shown
    if in_result is not None:
        asked_at = in_result
    elif question is not None and run.question_call is not None and 0 < run.question_call <= len(run.calls):
        asked_at = run.question_call - 1
    elif question is not None and run.calls:
        asked_at = len(run.calls) - 1  # a hook that stopped the session showed it: after the last call
    if asked_at is not None and (in_result is not None or run.question_call is not None):
        asked_s = _returned(run, asked_at)  # shown with that call's result, or before it went back
    read = [(None, True) if refused[n] else (None, False) if text is None else _situation(via, c.call, text)
            for n, (c, text) in enumerate(zip(run.calls, texts, strict=True))]
    last = asked_at if asked_at is not None else len(run.calls) - 1
    first = next((n for n in range(last + 1) if not refused[n] and _opens(read[n][0])), None)
    steps: int | None = None
    seconds: float | None = None
    wasted, wasted_s, workarounds = 0, 0.0, 0
    signal = read[first][0] if first is not None else None
    if first is not None and signal is not None:
        wasted = last - first
        wasted_s = max(asked_s - _returned(run, first), 0.0)
        workarounds = sum(1 for n in range(first + 1, last + 1) if refused[n] or _charged(read[n], signal))
        if asked_at is not None:
            steps, seconds = wasted, wasted_s
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
    violated = []
    for n, (c, text) in enumerate(zip(run.calls, texts, strict=True)):
        rule = next((r for r in scenario.expect.never if r.matches(c.call)), None)
        if rule is not None and text is not None and not refused[n]:
            violated.append(f"{rule.describe()}: {c.call.tool} {c.call.arguments_json}")
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
        tool_calls=len(run.calls), wasted_calls=wasted, wasted_seconds=wasted_s, steps_to_escalate=steps,
        seconds_to_escalate=seconds, workaround_calls=workarounds, refused_calls=sum(refused), exact_unblock=exact,
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
