"""The OpenAI Agents SDK adapter (unstuck.integrations.openai_agents), on the shared GhWorld: the
real gh, signed out, behind a plain ``run_command`` function tool, driven by a scripted
implementation of the SDK's ``Model`` interface that improvises and never asks."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import pydantic
from agents import Agent, FunctionTool, RunContextWrapper, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage
from tests.framework_world import ANSWER, TASK, TASK_COMMAND, UNBLOCK, GhWorld, improviser_commands

from unstuck.core.tools import ToolCall
from unstuck.evals.shell_world import ShellWorld
from unstuck.guard.guard import Guard
from unstuck.integrations.common import Blocked
from unstuck.integrations.openai_agents import STATE_KEY, RunBlocked, guard_agent, probe
from unstuck.store.events import EventLog, EventName

pytestmark = pytest.mark.slow

GENERIC_ERROR = "An error occurred while running the tool"
RESOLVED = "has resolved the block"


def _last_output(items: str | list[Any]) -> str:
    """The text of the latest tool output the model was given ('' when none)."""
    if isinstance(items, str):
        return ""
    for item in reversed(items):
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            return str(item.get("output", ""))
    return ""


class Improviser(Model):
    """The SDK's ``Model`` interface, scripted: the task's command, then the workarounds
    (``improviser_commands``), one ``run_command`` call per reply; it answers once a tool output
    holds the answer, and runs the task's command again once told the block is resolved."""

    def __init__(self, commands: Iterator[str] | None = None) -> None:
        self.commands = commands if commands is not None else improviser_commands()
        self.seen: list[str] = []  # every tool output the model was given, in order
        self.issued: list[tuple[str, str]] = []  # (call id, command) of every call it asked for

    def _call(self, command: str) -> ModelResponse:
        call_id = f"call_{len(self.issued) + 1}"
        self.issued.append((call_id, command))
        return ModelResponse(output=[function_call("run_command", {"command": command}, call_id=call_id)],
                             usage=Usage(), response_id=None)

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        last = _last_output(input)
        if last:
            self.seen.append(last)
        if ANSWER in last:
            return ModelResponse(output=[assistant_message(last)], usage=Usage(), response_id=None)
        if RESOLVED in last:
            return self._call(TASK_COMMAND)
        return self._call(next(self.commands))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def _agent(world: ShellWorld, model: Model) -> Agent[Any]:
    @function_tool
    def run_command(command: str) -> str:
        """Run a shell command and return its output."""
        return world.shell(command)

    return Agent(name="improviser", instructions="Do the task with the shell.", tools=[run_command], model=model)


def _gh_probe(world: ShellWorld) -> Any:
    return probe("gh", lambda: world.workspace.run("gh auth status", timeout_s=30))


async def _improvise(world: ShellWorld, guarded: bool, commands: Iterator[str] | None) -> tuple[int, str, bool, str]:
    agent = _agent(world, Improviser(commands))
    if not guarded:
        try:
            result = await Runner.run(agent, TASK)
        except MaxTurnsExceeded:
            return len(world.commands), "MaxTurnsExceeded", False, "failed"
        return len(world.commands), "finished", ANSWER in str(result.final_output), "done"
    run = guard_agent(agent, task=TASK, extra_tools=[_gh_probe(world)])
    try:
        result = await run.run(TASK)
    except Blocked as blocked:
        return len(world.commands), "Blocked", UNBLOCK in blocked.escalation.text, "blocked"
    return len(world.commands), "finished", False, "done"


def run_improviser(world: ShellWorld, guarded: bool, *, commands: Iterator[str] | None = None,
                   ) -> tuple[int, str, bool, str]:
    """One improviser run on ``world`` with the SDK's defaults (``guarded=False``) or with unstuck:
    (tool calls that ran, how it stopped, whether the exact unblock reached the user, final status).
    ``commands``: what the scripted model runs (``improviser_commands()`` by default)."""
    return asyncio.run(_improvise(world, guarded, commands))


def test_with_the_sdks_defaults_the_improviser_runs_until_max_turns() -> None:
    with GhWorld() as world:
        calls, stopped, unblock_reached, status = run_improviser(world, guarded=False)
    print(f"openai-agents defaults: {calls} tool calls, {stopped}, unblock reached: {unblock_reached}")
    assert stopped == "MaxTurnsExceeded" and status == "failed" and not unblock_reached
    assert calls >= 9  # the SDK's default max_turns is 10 model turns, each one tool call here


def test_with_unstuck_the_run_stops_within_three_calls_of_the_first_signal_and_asks_for_gh_auth_login() -> None:
    with GhWorld() as world:
        calls, stopped, unblock_reached, status = run_improviser(world, guarded=True)
        first_signal = 1  # the task's command itself fails: gh is signed out
    print(f"openai-agents with unstuck: {calls} tool calls, {stopped}, unblock reached: {unblock_reached}")
    assert stopped == "Blocked" and status == "blocked" and unblock_reached
    assert calls - first_signal <= 3


def test_i_have_done_it_resumes_through_the_run_state_and_finishes_without_running_a_call_twice() -> None:
    async def scenario(world: ShellWorld) -> None:
        model = Improviser()
        sink = EventLog()
        run = guard_agent(_agent(world, model), task=TASK, events=sink, extra_tools=[_gh_probe(world)])
        with pytest.raises(RunBlocked) as stopped:
            await run.run(TASK)
        blocked = stopped.value
        before = list(world.commands)
        waiting = model.issued[-1]  # the workaround the model asked for after the question: never run
        assert len(set(before)) == len(before)  # nothing ran twice before the pause either
        assert waiting[1] not in before and len(blocked.run_state.get_interruptions()) == 1
        assert UNBLOCK in blocked.escalation.text
        saved = blocked.run_state.to_string()  # the SDK's RunState, as a host keeps it
        assert isinstance(json.loads(saved)["context"]["context"][STATE_KEY], str)

        world.sign_in()
        fresh = guard_agent(_agent(world, model), task=TASK, events=sink, extra_tools=[_gh_probe(world)])
        result = await fresh.run(await fresh.resume(saved, "I've done it"))

        assert ANSWER in str(result.final_output)
        after = world.commands[len(before):]
        assert after == [TASK_COMMAND]  # only the call made after the note; nothing before the pause ran again
        assert world.ran(waiting[1]) == before.count(waiting[1])  # the waiting workaround never ran
        probes = sink.named(EventName.PROBE_RUN)
        assert probes and dict(probes[-1].fields).get("clean") is True  # "done" ran gh auth status, clean

    with GhWorld() as world:
        asyncio.run(scenario(world))


def test_a_refused_call_gives_the_model_the_guards_refusal_text_not_the_sdks_generic_error() -> None:
    async def scenario(world: ShellWorld) -> None:
        model = Improviser(itertools.chain([UNBLOCK], improviser_commands()))
        agent = _agent(world, model)
        run = guard_agent(agent, unattended=True, task=TASK)
        tool = agent.tools[0]
        assert isinstance(tool, FunctionTool)
        expected = Guard(run.specs, unattended=True).before(
            ToolCall("call_1", tool.name, json.dumps({"command": UNBLOCK}))).content
        with pytest.raises(Blocked):
            await run.run(TASK)
        assert UNBLOCK not in world.commands  # refused before dispatch: an unattended sign-in waits for a person
        mark = re.compile(r"^\[unstuck [0-9a-f]{16}\] ")  # each turn's own mark (issue 27, deliver 5)
        assert mark.sub("", model.seen[0]) == mark.sub("", expected) and GENERIC_ERROR not in model.seen[0]
        assert mark.match(model.seen[0]) and mark.match(expected)

    with GhWorld() as world:
        asyncio.run(scenario(world))


def test_stop_keeps_the_run_blocked() -> None:
    async def scenario(world: ShellWorld) -> None:
        run = guard_agent(_agent(world, Improviser()), task=TASK, extra_tools=[_gh_probe(world)])
        with pytest.raises(RunBlocked) as stopped:
            await run.run(TASK)
        with pytest.raises(RunBlocked) as again:
            await run.resume(stopped.value, "stop")
        assert UNBLOCK in again.value.escalation.text

    with GhWorld() as world:
        asyncio.run(scenario(world))


def test_a_local_mcp_servers_tools_go_through_the_same_guard_and_the_run_stops_blocked(tmp_path: Path) -> None:
    from agents.mcp import MCPServerStdio, MCPServerStdioParams

    server_script = Path(__file__).resolve().parent / "mcp_servers" / "shell_server.py"
    log = tmp_path / "ran.txt"

    async def scenario(world: ShellWorld) -> None:
        env = {**world.workspace.env, "SHELL_SERVER_LOG": str(log)}
        params: MCPServerStdioParams = {"command": sys.executable, "args": [str(server_script)], "env": env, "cwd": str(world.workspace.root)}
        async with MCPServerStdio(params=params, name="shell") as server:
            agent = Agent(name="improviser", instructions="Do the task with the shell.", mcp_servers=[server],
                          model=Improviser())
            run = guard_agent(agent, task=TASK)
            await run.guard_mcp_servers()
            assert not run.agent.mcp_servers and [t.name for t in run.agent.tools] == ["run_command"]
            with pytest.raises(RunBlocked) as stopped:
                await run.run(TASK)
        ran = log.read_text(encoding="utf-8").splitlines()
        assert ran[0] == TASK_COMMAND and len(ran) - 1 <= 3  # the first signal, then at most 3 more calls
        assert UNBLOCK in stopped.value.escalation.text

    with GhWorld() as world:
        asyncio.run(scenario(world))


CREDENTIAL_HUNT = ["gh auth status", "env | grep -i token", "gh auth token", "cat ~/.config/gh/hosts.yml"]
LATER = ["gh repo view cli/cli --json name", "gh api repos/cli/cli", "echo after"]


class Script(Model):
    """The SDK's ``Model`` interface, scripted reply by reply: each reply is a list of
    ``run_command`` calls (several calls: parallel tool calls in one response); once the script
    is spent it answers in text."""

    def __init__(self, replies: list[list[str]]) -> None:
        self.replies = list(replies)
        self.count = 0
        self.seen: list[str] = []  # every latest tool output the model was given

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        self.seen.append(_last_output(input))
        if not self.replies:
            return ModelResponse(output=[assistant_message("finished")], usage=Usage(), response_id=None)
        output = []
        for command in self.replies.pop(0):
            self.count += 1
            output.append(function_call("run_command", {"command": command}, call_id=f"call_{self.count}"))
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def _scripted_run(replies: list[list[str]]) -> tuple[list[str], str]:
    async def scenario(world: ShellWorld) -> tuple[list[str], str]:
        run = guard_agent(_agent(world, Script(replies)), task=TASK, extra_tools=[_gh_probe(world)])
        try:
            await run.run(TASK)
        except RunBlocked as blocked:
            return list(world.commands), blocked.escalation.text
        return list(world.commands), ""

    with GhWorld() as world:
        return asyncio.run(scenario(world))


def test_parallel_calls_in_one_response_are_judged_in_the_models_order_as_if_sent_one_by_one() -> None:
    first = [TASK_COMMAND, *CREDENTIAL_HUNT]
    parallel_ran, parallel_question = _scripted_run([first, *([c] for c in LATER)])
    sequential_ran, sequential_question = _scripted_run([[c] for c in [*first, *LATER]])
    assert parallel_question and UNBLOCK in parallel_question  # blocked, asking for gh auth login
    assert sequential_question and UNBLOCK in sequential_question
    # the response's calls are judged as the same calls sent one by one: the same ones ran, the
    # credential hunting the guard refuses one by one is refused before dispatch
    assert [c for c in parallel_ran if c in first] == [c for c in sequential_ran if c in first]
    assert parallel_ran[0] == TASK_COMMAND and {"gh auth token", "cat ~/.config/gh/hosts.yml"}.isdisjoint(parallel_ran)
    assert "echo after" not in parallel_ran and len(parallel_ran) - 1 <= 3  # stops within 3 calls of the signal


def test_resume_names_what_is_wrong_with_a_state_that_is_not_a_run_state() -> None:
    async def scenario(world: ShellWorld) -> None:
        run = guard_agent(_agent(world, Improviser()), task=TASK)
        for text, says in [("not json", "not JSON"), ("[1, 2]", "JSON list"),
                           ('{"context": "x"}', '"context" is not an object'),
                           ('{"context": {"context": [1]}}', "not a mapping"),
                           ('{"context": {"context": {}}}', STATE_KEY)]:
            with pytest.raises(ValueError, match=re.escape(says)):
                await run.resume(text, "I've done it")

    with GhWorld() as world:
        asyncio.run(scenario(world))


def test_the_docs_example_runs_as_copied_and_the_run_is_blocked_then_finishes() -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "frameworks" / "openai-agents.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {"__name__": "docs_example"}  # nothing injected: the block as it stands
    exec(compile(blocks[0], str(page), "exec"), namespace)
    assert UNBLOCK in namespace["question"]  # set only where RunBlocked was caught
    assert ANSWER in str(namespace["result"].final_output)  # "I've done it" resumed the run to the end


# -- a guard per run: two conversations on one agent (issue 27) ---------------------------------

#: A task that never touches gh: the second conversation's.
CLEAN_TASK = "Say hello twice with echo."
CLEAN_COMMANDS = ["echo hello-one", "echo hello-two"]


def _first_user_text(items: str | list[Any]) -> str:
    if isinstance(items, str):
        return items
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            return str(item.get("content", ""))
    return ""


class TwoConversations(Model):
    """The SDK's ``Model`` interface for two conversations, told apart by their first user
    message: the improviser on :data:`TASK` (gh, signed out), :data:`CLEAN_COMMANDS` on
    :data:`CLEAN_TASK`. ``hold`` (awaited) holds the clean conversation's second call back."""

    def __init__(self, hold: Any = None) -> None:
        self.hold = hold
        self.improviser = Improviser()

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        if _first_user_text(input) != CLEAN_TASK:
            return await self.improviser.get_response(system_instructions, input, *args, **kwargs)
        ran = 0 if isinstance(input, str) else sum(
            1 for i in input if isinstance(i, dict) and i.get("type") == "function_call_output")
        if ran >= len(CLEAN_COMMANDS):
            return ModelResponse(output=[assistant_message("said hello twice")], usage=Usage(), response_id=None)
        if ran == 1 and self.hold is not None:
            await self.hold()
        call = function_call("run_command", {"command": CLEAN_COMMANDS[ran]}, call_id=f"clean_{ran}")
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def _turn_of(state: str) -> str:
    return str(json.loads(state)["turn_id"])


def _assert_apart(log: EventLog, blocked: RunBlocked, clean: Any, ran: list[str]) -> None:
    """The blocked conversation asked about gh; the clean one finished with both its calls run,
    in a turn of its own that nothing charged: no blocker, no budget, no refusal."""
    assert UNBLOCK in blocked.escalation.text
    assert str(clean.final_output) == "said hello twice"
    assert [c for c in ran if c in CLEAN_COMMANDS] == CLEAN_COMMANDS
    blocked_turn = _turn_of(blocked.state)
    others = {e.turn_id for e in log} - {blocked_turn}
    assert len(others) == 1, "the clean conversation had no turn of its own"
    names = [str(e.name) for e in log if e.turn_id in others]
    assert names.count("tool.called") == len(CLEAN_COMMANDS)
    assert not {"blocker.opened", "budget.charged", "call.refused", "turn.escalated"} & set(names)
    assert "blocker.opened" in [str(e.name) for e in log if e.turn_id == blocked_turn]


def test_a_second_conversation_on_the_same_agent_is_not_refused_after_the_first_was_blocked() -> None:
    log = EventLog()

    async def scenario(world: ShellWorld) -> tuple[RunBlocked, Any]:
        guarded = guard_agent(_agent(world, TwoConversations()), task=TASK, events=log,
                              extra_tools=[_gh_probe(world)])
        with pytest.raises(RunBlocked) as stopped:
            await guarded.run(TASK)
        clean = await guarded.run(CLEAN_TASK)
        return stopped.value, clean

    with GhWorld() as world:
        blocked, clean = asyncio.run(scenario(world))
        ran = list(world.commands)
    _assert_apart(log, blocked, clean, ran)


def test_two_runs_at_once_on_one_agent_keep_their_budgets_apart() -> None:
    log = EventLog()

    async def scenario(world: ShellWorld) -> tuple[RunBlocked, Any]:
        first_stopped = asyncio.Event()

        async def after_the_block() -> None:
            await asyncio.wait_for(first_stopped.wait(), 60)

        guarded = guard_agent(_agent(world, TwoConversations(after_the_block)), task=TASK, events=log,
                              extra_tools=[_gh_probe(world)])

        async def blocked_run() -> RunBlocked:
            try:
                await guarded.run(TASK)
            except RunBlocked as blocked:
                return blocked
            finally:
                first_stopped.set()
            raise AssertionError("the gh conversation was not blocked")

        # the clean run's first call runs while the other is going on, its second once the
        # other stopped blocked (its guard latched)
        clean, blocked = await asyncio.gather(guarded.run(CLEAN_TASK), blocked_run())
        return blocked, clean

    with GhWorld() as world:
        blocked, clean = asyncio.run(scenario(world))
        ran = list(world.commands)
    _assert_apart(log, blocked, clean, ran)


def test_runner_run_on_the_guarded_agent_directly_still_works_and_warns() -> None:
    async def scenario(world: ShellWorld) -> None:
        guarded = guard_agent(_agent(world, TwoConversations()), task=CLEAN_TASK)
        with pytest.warns(DeprecationWarning, match="shares one guard"):
            result = await Runner.run(guarded.agent, CLEAN_TASK)
        assert str(result.final_output) == "said hello twice"

    with GhWorld() as world:
        asyncio.run(scenario(world))
        assert world.commands == CLEAN_COMMANDS


# -- any run context (issue 27) -----------------------------------------------------------------


@dataclasses.dataclass
class Deps:
    """The SDK docs' dataclass context."""

    user: str
    notes: list[str] = dataclasses.field(default_factory=list)


class PydanticDeps(pydantic.BaseModel):
    user: str


class Client:
    """A dependency that is not JSON (a database client, say): a mapping context holding one
    cannot be serialized, so an in-process resume carries on with the run state as it is."""

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return id(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Client:
        return self


def _context_agent(world: ShellWorld, model: Model, seen: list[Any]) -> Agent[Any]:
    @function_tool
    def run_command(ctx: RunContextWrapper[Any], command: str) -> str:
        """Run a shell command and return its output."""
        seen.append(ctx.context)
        return world.shell(command)

    return Agent(name="improviser", instructions="Do the task with the shell.", tools=[run_command], model=model)


@pytest.mark.parametrize("kind", ["dataclass", "pydantic", "dict", "dict-with-a-client", "none"])
def test_a_run_with_any_context_is_guarded_resumed_and_its_context_left_alone(kind: str) -> None:
    made: dict[str, Any] = {"dataclass": lambda: Deps("alice"), "pydantic": lambda: PydanticDeps(user="alice"),
                            "dict": lambda: {"user": "alice"}, "dict-with-a-client": lambda: {"db": Client()},
                            "none": lambda: None}
    context = made[kind]()
    before = copy.deepcopy(context)
    seen: list[Any] = []

    async def scenario(world: ShellWorld) -> Any:
        guarded = guard_agent(_context_agent(world, Improviser(), seen), task=TASK, extra_tools=[_gh_probe(world)])
        with pytest.raises(RunBlocked) as stopped:
            await guarded.run(TASK, context=context)
        world.sign_in()
        return await guarded.run(await guarded.resume(stopped.value, "I've done it"))

    with GhWorld() as world:
        result = asyncio.run(scenario(world))
    assert ANSWER in str(result.final_output)  # blocked, answered, finished
    assert seen and len(seen) == len(world.commands)
    if context is None:
        assert all(isinstance(c, dict) and set(c) == {STATE_KEY} for c in seen)  # unstuck's own, nobody's else
    else:
        assert all(c is context for c in seen)  # the tools got the caller's very object, before and after resuming
        assert context == before  # and nothing was written into it
        assert STATE_KEY not in (context if isinstance(context, dict) else vars(context))


def test_a_dataclass_context_run_resumes_in_a_fresh_agent_from_run_blocked_to_string() -> None:
    seen: list[Any] = []

    async def scenario(world: ShellWorld) -> Any:
        model = Improviser()  # one conversation: its call ids go on in the fresh agent
        guarded = guard_agent(_context_agent(world, model, seen), task=TASK, extra_tools=[_gh_probe(world)])
        with pytest.raises(RunBlocked) as stopped:
            await guarded.run(TASK, context=Deps("alice"))
        saved = stopped.value.to_string()  # what a host keeps: the SDK's RunState and the guard's state
        world.sign_in()
        fresh = guard_agent(_context_agent(world, model, seen), task=TASK, extra_tools=[_gh_probe(world)])
        state = await fresh.resume(saved, "I've done it", context_deserializer=lambda data: Deps(**data))
        return await fresh.run(state)

    with GhWorld() as world:
        result = asyncio.run(scenario(world))
    assert ANSWER in str(result.final_output)
    assert isinstance(seen[-1], Deps) and seen[-1] == Deps("alice")  # rebuilt by the caller's deserializer
