"""The Claude Agent SDK (``claude-agent-sdk``) driving the real Claude Code 2.1.332 offline: the
SDK's ``query()`` with ``cli_path`` at the binary ``./bootstrap`` installs, ``ANTHROPIC_BASE_URL``
(in ``options.env``) at a scripted Messages API server on 127.0.0.1 playing the improviser around
the real, logged-out ``gh``, ``HOME`` a temporary folder; unguarded against guarded through
:class:`unstuck.integrations.claude_agent_sdk.SdkGuard`'s hook callbacks (issue 26, deliver 7).
Without the SDK or the CLI a test is skipped; under ``CI=true`` it fails."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.integrations.coding_agents.claude_world import HOOK_DENIAL, claude_binary, scenario

from unstuck.decide.escalation import Answer
from unstuck.evals.agents import _catalogue_calls, make_agent
from unstuck.evals.messages_api import Move, ScriptedMessagesServer
from unstuck.evals.runner import prepare_sandbox
from unstuck.evals.sandbox import Sandbox
from unstuck.guard.decision import LATCHED
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore
from unstuck.toolkit.workspace import KNOWN_CLIS

pytestmark = pytest.mark.slow

GH = KNOWN_CLIS["gh"]
assert GH.sign_in is not None and GH.sign_in_flow is not None


def _sdk() -> Any:
    try:
        import claude_agent_sdk
    except ImportError:
        message = "claude-agent-sdk is not installed (pip install 'unstuck[claude-agent-sdk]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return claude_agent_sdk


@dataclass
class SdkRun:
    """One ``query()`` session: the SDK's messages, the moves the server played, the final answer."""

    messages: list[Any]
    moves: list[Move]
    answer: str | None
    hook_outputs: list[dict[str, Any]] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)  # each request body of the session's turns, as JSON, in order

    @property
    def result(self) -> Any:
        sdk = _sdk()
        return next(m for m in reversed(self.messages) if isinstance(m, sdk.ResultMessage))

    @property
    def session_id(self) -> str:
        return str(self.result.session_id)

    def tool_results(self) -> dict[str, str]:
        """Each tool result the CLI gave the model: tool_use id → text."""
        sdk = _sdk()
        found: dict[str, str] = {}
        for message in self.messages:
            if not isinstance(message, sdk.UserMessage) or isinstance(message.content, str):
                continue
            for block in message.content:
                if isinstance(block, sdk.ToolResultBlock):
                    content = block.content
                    found[block.tool_use_id] = content if isinstance(content, str) else "\n".join(
                        str(b.get("text", "")) for b in content or [] if isinstance(b, dict))
        return found

    @property
    def ran(self) -> list[Move]:
        results = self.tool_results()
        return [m for m in self.moves if m.tool_use_id in results and not results[m.tool_use_id].startswith(HOOK_DENIAL)]


class RecordingServer(ScriptedMessagesServer):
    """The scripted server, keeping every request body it answered (what the model was sent)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bodies: list[Mapping[str, Any]] = []

    def reply(self, body: Mapping[str, Any], session: str, *, arrived_s: float | None = None) -> dict[str, Any]:
        self.bodies.append(body)
        return super().reply(body, session, arrived_s=arrived_s)


class SdkWorld:
    """A temporary home and stores for a test's SDK sessions."""

    def __init__(self, root: Path, *, guarded: bool, unattended: bool | None = None) -> None:
        self.root, self.guarded = root, guarded
        self.home, self.tmp, self.store = root / "home", root / "tmp", root / "store"
        for folder in (self.home, self.tmp, self.store):
            folder.mkdir(parents=True, exist_ok=True)
        self.claude = claude_binary()
        self.asked: list[dict[str, Any]] = []
        self._watching = False
        self.journal = Journal(self.store / "journal.sqlite3")
        self.lessons = LessonStore(self.store / "lessons.sqlite3")
        from unstuck.integrations.claude_agent_sdk import SdkGuard

        self.guard = SdkGuard(journal=self.journal, lessons=self.lessons, unattended=unattended,
                              ask_wait_s=120) if guarded else None

    def run(self, scenario_name: str, agent: str = "improviser", *,
            user: Callable[[str, Sandbox], None] | None = None) -> SdkRun:
        """One ``query()`` session; ``user(session_id, sandbox)``, when given, acts as the person
        at the program, from another thread, once a hook is asking."""
        sdk = _sdk()
        chosen = scenario(scenario_name)
        sandbox = prepare_sandbox(chosen)
        outputs: list[dict[str, Any]] = []
        try:
            def make() -> Any:
                return make_agent(agent, chosen.plan, chosen.fix, subject=chosen.expect.subject or "", task=chosen.task)

            with RecordingServer(make, cwd=str(sandbox.work)) as api:
                env = dict(sandbox.env)
                for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
                             "UNSTUCK_CACHE_DIR", "LANG"):
                    if name in os.environ:
                        env[name] = os.environ[name]
                env.update(HOME=str(self.home), TMPDIR=str(self.tmp), ANTHROPIC_BASE_URL=api.url,
                           ANTHROPIC_API_KEY="sk-ant-scripted-offline", DISABLE_AUTOUPDATER="1",
                           CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", NO_PROXY="127.0.0.1,localhost",
                           no_proxy="127.0.0.1,localhost")
                options = sdk.ClaudeAgentOptions(cli_path=self.claude, cwd=str(sandbox.work), env=env,
                                                 allowed_tools=["Bash", "Read"], model="claude-scripted",
                                                 include_hook_events=True)
                if self.guard is not None:
                    options = self.guard.options(options)

                async def go() -> list[Any]:
                    return [m async for m in sdk.query(prompt=chosen.task, options=options)]

                watcher = threading.Thread(target=self._watch, args=(user, sandbox), daemon=True) if user else None
                self._watching = watcher is not None
                if watcher is not None:
                    watcher.start()
                try:
                    messages = asyncio.run(asyncio.wait_for(go(), 300))
                finally:
                    self._watching = False
                    if watcher is not None:
                        watcher.join(30)
                session = next((str(getattr(m, "session_id", "")) for m in messages if getattr(m, "session_id", "")),
                               "")
                for m in messages:
                    data = getattr(m, "data", None)
                    if isinstance(data, dict) and data.get("subtype") == "hook_response":
                        outputs.append(data)
                return SdkRun(messages, api.moves_of(session), api.answers.get(session), outputs,
                              [json.dumps(b) for b in api.bodies if any(t.get("name") == "Bash" for t in b.get("tools") or [])])
        finally:
            sandbox.close()

    def _watch(self, user: Callable[[str, Sandbox], None] | None, sandbox: Sandbox) -> None:
        assert self.guard is not None and user is not None
        while self._watching:
            asking = [s for s in self.guard.keeper.sessions() if s["asking"]]
            if asking:
                self.asked.extend(asking)
                user(str(asking[0]["session"]), sandbox)
                return
            time.sleep(0.2)

    def close(self) -> None:
        if self.guard is not None:
            self.guard.close()


@pytest.fixture
def guarded(tmp_path: Path) -> Any:
    world = SdkWorld(tmp_path / "guarded", guarded=True)
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def unguarded(tmp_path: Path) -> Any:
    world = SdkWorld(tmp_path / "unguarded", guarded=False)
    try:
        yield world
    finally:
        world.close()


def test_unguarded_sdk_session_runs_every_workaround_around_the_logged_out_gh(unguarded: SdkWorld) -> None:
    run = unguarded.run("gh_logged_out")
    workarounds = _catalogue_calls("auth", "gh", "cli/cli")
    assert len(run.moves) == 1 + len(workarounds)  # the failed check, then the whole auth catalogue
    assert len(run.ran) == len(run.moves)
    assert run.result.subtype == "success" and not run.result.is_error


def test_guarded_sdk_session_stops_asks_once_latches_and_remembers_across_sessions(
        guarded: SdkWorld) -> None:
    assert guarded.guard is not None
    first = guarded.run("gh_logged_out")
    question = guarded.guard.question(first.session_id)
    assert question is not None and GH.sign_in in question.text and "You need to:" in question.text
    results = first.tool_results()
    web = [m for m in first.moves if m.arguments.get("command") == GH.sign_in_flow]
    assert web and all(results[m.tool_use_id].startswith(HOOK_DENIAL) and "unattended" in results[m.tool_use_id]
                       for m in web)  # gh auth login --web refused unattended, never run
    latch = rf"{re.escape(HOOK_DENIAL)} \[unstuck [0-9a-f]{{16}}\] {re.escape(LATCHED)}"  # the latch, marked
    assert re.fullmatch(latch, results[first.moves[-1].tool_use_id])
    assert len(first.moves) < 1 + len(_catalogue_calls("auth", "gh", "cli/cli"))
    assert first.result.terminal_reason == "hook_stopped", first.result
    turn = guarded.journal.turn(guarded.guard.turn_id(first.session_id))
    assert turn.status.value == "blocked"
    (lesson,) = guarded.lessons.active()
    assert (lesson.signature.subject, lesson.signature.kind.value, lesson.unblock) == ("gh", "auth", GH.sign_in)

    assert f"lesson {lesson.id}" not in first.sent[0]  # nothing known yet at session 1's start

    # session 2: the lesson reaches the model at the start (the first prompt's hook), its probe
    # runs before the first gh call, which never runs: the session stops with the same question
    second = guarded.run("gh_logged_out")
    assert f"lesson {lesson.id}" in second.sent[0] and GH.sign_in in second.sent[0]  # before any call
    assert len(second.moves) == 1 and second.ran == []  # its first gh call never ran
    assert second.result.terminal_reason == "hook_stopped", second.result
    again = guarded.guard.question(second.session_id)
    assert again is not None and GH.sign_in in again.text
    assert guarded.journal.turn(guarded.guard.turn_id(second.session_id)).status.value == "blocked"

    # session 3: gh is signed in now; the probe at the start clears the lesson and the task finishes
    third = guarded.run("gh_signed_in")
    assert third.result.terminal_reason == "completed", third.result
    assert "GitHub's official command line tool" in (third.answer or "")
    assert guarded.guard.question(third.session_id) is None and len(third.ran) == len(third.moves)
    assert guarded.lessons.active() == []
    assert guarded.journal.turn(guarded.guard.turn_id(third.session_id)).status.value == "done"
    print(f"claude-agent-sdk guarded: session 1 {len(first.moves)} calls until the stop ({len(first.ran)} ran); "
          f"session 2 {len(second.moves)} call, {len(second.ran)} ran; session 3 {len(third.moves)} calls, done")


def test_guarded_sdk_session_lets_the_agent_fix_a_wrong_path_itself_with_no_question(guarded: SdkWorld) -> None:
    assert guarded.guard is not None
    run = guarded.run("wrong_path")
    assert run.result.terminal_reason == "completed", run.result
    assert "pip install example-tool==2.1" in (run.answer or "")
    assert guarded.guard.question(run.session_id) is None
    assert len(run.ran) == len(run.moves) == 3
    assert guarded.journal.turn(guarded.guard.turn_id(run.session_id)).status.value == "done"


def test_attended_sdk_session_waits_for_the_program_s_answer_then_finishes(tmp_path: Path) -> None:
    world = SdkWorld(tmp_path / "attended", guarded=True, unattended=False)
    answered: list[dict[str, Any]] = []
    try:
        guard = world.guard
        assert guard is not None

        def user(session: str, sandbox: Sandbox) -> None:
            answered.append(guard.answer(session, Answer.DONE))  # still signed out: the probe says so
            sandbox.sign_in_gh()
            answered.append(guard.answer(session, Answer.DONE))

        run = world.run("gh_logged_out", user=user)
    finally:
        world.close()
    (question,) = world.asked
    assert question["attended"] is True and GH.sign_in in str(question["question"])
    assert answered[0]["still_blocked"] is True and answered[1]["still_blocked"] is False
    assert run.result.terminal_reason == "completed", run.result
    assert "GitHub's official command line tool" in (run.answer or "")
    assert world.journal.turn(guard.turn_id(run.session_id)).status.value == "done"
