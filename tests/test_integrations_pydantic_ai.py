"""The Pydantic AI adapter (unstuck.integrations.pydantic_ai): a guarded toolset on the real,
signed-out gh (tests/framework_world.py), driven by Pydantic AI's own ``FunctionModel``."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import ModelRetry, UsageLimitExceeded
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from framework_world import ANSWER, TASK, TASK_COMMAND, UNBLOCK, GhWorld, improviser_commands
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind, Probe, Situation
from unstuck.core.tools import ToolResult
from unstuck.decide.escalation import Answer
from unstuck.decide.policy import PolicyConfig
from unstuck.integrations.common import Blocked
from unstuck.integrations.pydantic_ai import UnstuckCapability, UnstuckToolset, answer_results, escalation_of
from unstuck.store.events import EventLog

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[1] / "docs" / "frameworks" / "pydantic-ai.md"
#: What the model reads once the user resolved the block (unstuck.Guard.answer's note).
RESOLVED = "has resolved the block"


def _last_returns(messages: list[ModelMessage]) -> list[str]:
    last = messages[-1]
    if not isinstance(last, ModelRequest):
        return []
    return [str(p.content) for p in last.parts if isinstance(p, ToolReturnPart)]


def improviser_model(commands: Iterator[str], ids: Iterator[int]) -> FunctionModel:
    """A model that never asks: it runs ``commands`` one a reply, answers once a return holds
    the task's answer, and runs the task's command again once told the user resolved the block."""

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = _last_returns(messages)
        if any(ANSWER in r for r in returns):
            return ModelResponse(parts=[TextPart(f"The description is: {ANSWER}")])
        command = TASK_COMMAND if any(RESOLVED in r for r in returns) else next(commands)
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": command}, f"call-{next(ids)}")])

    return FunctionModel(reply)


def shell_toolset(world: GhWorld) -> FunctionToolset[Any]:
    """A plain shell tool, as a Pydantic AI user writes one."""

    def run_command(command: str) -> str:
        """Run a shell command line and return its output."""
        return world.shell(command)

    return FunctionToolset([run_command])


def run_improviser(world: GhWorld, guarded: bool) -> tuple[int, str, bool, str]:
    """The improviser on ``world`` with Pydantic AI's defaults (``guarded=False``) or through
    :class:`UnstuckToolset`: (tool calls that ran, how the run stopped, whether the exact
    unblock reached the user, final status: ``done`` / ``blocked`` / ``failed``)."""
    model = improviser_model(improviser_commands(), itertools.count())
    tools = shell_toolset(world)
    toolset = UnstuckToolset(tools, unattended=False, task=TASK) if guarded else tools
    agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    try:
        result = agent.run_sync(TASK)
    except UsageLimitExceeded as exc:
        return len(world.commands), f"UsageLimitExceeded: {exc}".split(". ")[0], False, "failed"
    asked = escalation_of(result.output)
    if asked is not None:
        return len(world.commands), "DeferredToolRequests (unstuck's question)", UNBLOCK in asked.text, "blocked"
    return len(world.commands), "output", False, "done" if ANSWER in str(result.output) else "failed"


def test_with_defaults_the_improviser_runs_until_the_request_limit() -> None:
    default_limit = UsageLimits().request_limit
    assert default_limit is not None
    with GhWorld() as world:
        calls, stopped, unblock_reached, status = run_improviser(world, guarded=False)
    # one tool call a request, each run before the check of the next request (UsageLimits.check_before_request:
    # requests >= request_limit): all `request_limit` requests' calls ran, the next request never happens
    assert "request_limit" in stopped and str(default_limit) in stopped
    assert calls == default_limit
    assert (unblock_reached, status) == (False, "failed")


def test_guarded_run_stops_within_three_calls_of_the_first_signal_and_asks_with_the_unblock() -> None:
    with GhWorld() as world:
        calls, stopped, unblock_reached, status = run_improviser(world, guarded=True)
        first_signal = world.commands.index(TASK_COMMAND)  # gh's first "please run: gh auth login"
    assert calls - (first_signal + 1) <= 3
    assert stopped.startswith("DeferredToolRequests") and status == "blocked"
    assert unblock_reached


def _blocked_run(world: GhWorld, **options: Any) -> tuple[Agent[None, str | DeferredToolRequests], UnstuckToolset,
                                                           Any, Iterator[int]]:
    ids = itertools.count()
    toolset = UnstuckToolset(shell_toolset(world), unattended=False, task=TASK, options=options)
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        improviser_model(improviser_commands(), ids), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    result = agent.run_sync(TASK)
    assert isinstance(result.output, DeferredToolRequests)
    return agent, toolset, result, ids


def test_a_blocked_run_is_not_a_finished_one_and_its_request_carries_the_question_and_state() -> None:
    with GhWorld() as world:
        _, toolset, result, _ = _blocked_run(world)
    requests = result.output
    asked = escalation_of(requests)
    assert asked is not None and UNBLOCK in asked.text and asked.subject == "gh"
    assert escalation_of("a finished run's text") is None
    (call,) = requests.approvals
    meta = requests.metadata[call.tool_call_id]["unstuck"]
    assert meta["question"] == asked.text and UNBLOCK in meta["question"]
    saved, now = json.loads(meta["state"]), json.loads(toolset.current.to_json()) if toolset.current else {}
    assert (saved["turn_id"], saved["steps"], saved["escalation"]) == (now["turn_id"], now["steps"], now["escalation"])


def test_ive_done_it_after_signing_in_finishes_the_task_and_no_call_runs_twice() -> None:
    with GhWorld() as world:
        agent, toolset, blocked, _ = _blocked_run(world)
        ran_before = list(world.commands)
        world.sign_in()
        result = agent.run_sync(message_history=blocked.all_messages(),
                                deferred_tool_results=answer_results(blocked.output, "I've done it"))
        assert isinstance(result.output, str) and ANSWER in result.output
        asked_for = [p.args_as_dict()["command"] for m in result.all_messages() if isinstance(m, ModelResponse)
                     for p in m.parts if isinstance(p, ToolCallPart)]
        refused = len(asked_for) - len(world.commands)
        assert refused >= 1  # the improviser's credential hunting was refused, not run
        for command in set(ran_before):  # while blocked, every call ran at most as often as the model asked for it
            assert ran_before.count(command) <= asked_for.count(command)
        assert world.commands[:len(ran_before)] == ran_before  # the blocked run's calls were not replayed
        assert world.commands[len(ran_before):] == [TASK_COMMAND]  # after the answer: the task, once
        assert toolset.current is not None and toolset.current.escalation is None


def test_the_answer_resumes_in_a_new_process_from_the_state_in_the_deferred_request() -> None:
    with GhWorld() as world:
        _, _, blocked, ids = _blocked_run(world)
        world.sign_in()
        fresh = UnstuckToolset(shell_toolset(world), unattended=False, task=TASK)  # nothing kept in memory
        agent = Agent(improviser_model(improviser_commands(), ids), toolsets=[fresh],
                      output_type=[str, DeferredToolRequests])
        result = agent.run_sync(message_history=blocked.all_messages(),
                                deferred_tool_results=answer_results(blocked.output, "done"))
        assert isinstance(result.output, str) and ANSWER in result.output
        assert fresh.current is not None and fresh.current.turn_id == toolset_turn(blocked.output)


def toolset_turn(requests: DeferredToolRequests) -> str:
    (call,) = requests.approvals
    found = re.search(r'"turn_id": "([^"]+)"', requests.metadata[call.tool_call_id]["unstuck"]["state"])
    assert found is not None
    return found.group(1)


def test_stop_ends_the_resumed_run_as_blocked() -> None:
    with GhWorld() as world:
        agent, _, blocked, _ = _blocked_run(world)
        with pytest.raises(Blocked) as stopped:
            agent.run_sync(message_history=blocked.all_messages(),
                           deferred_tool_results=answer_results(blocked.output, Answer.STOP))
    assert UNBLOCK in stopped.value.escalation.text and stopped.value.state


def test_skip_goes_on_without_the_subject_whose_calls_are_then_refused() -> None:
    with GhWorld() as world:
        agent, _, blocked, _ = _blocked_run(world)
        ran_before = len(world.commands)
        with capture_run_messages() as messages, contextlib.suppress(UsageLimitExceeded):
            agent.run_sync(message_history=blocked.all_messages(), usage_limits=UsageLimits(request_limit=4),
                           deferred_tool_results=answer_results(blocked.output, "Skip it"))
        after = world.commands[ran_before:]
    (deferred,) = blocked.output.approvals
    answered = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
                if isinstance(p, ToolReturnPart) and p.tool_call_id == deferred.tool_call_id]
    assert answered and "skip" in str(answered[-1].content).lower()  # the guard's note, not a rerun
    assert not [c for c in after if c.startswith("gh ")]  # gh is skipped: its calls are refused


def test_ive_done_it_runs_the_blockers_probe_and_asks_again_while_it_still_holds() -> None:
    signed_in: list[bool] = []
    probes: list[bool] = []
    blocker = Situation(Kind.AUTH, "cloud", unblock="cloud login", probe=Probe.of("cloud_status"),
                        detail="not signed in to cloud")

    def deploy() -> ToolResult | str:
        """Deploy the app."""
        return "deployed" if signed_in else ToolResult("deploy", False, "not signed in", declared=blocker)

    def cloud_status() -> str:
        """Who is signed in to cloud."""
        probes.append(bool(signed_in))
        if not signed_in:
            raise PermissionError("not signed in to cloud")
        return "signed in as alice"

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(r == "deployed" for r in _last_returns(messages)):
            return ModelResponse(parts=[TextPart("deployed")])
        return ModelResponse(parts=[ToolCallPart("deploy", {}, f"c{len(messages)}")])

    toolset = UnstuckToolset(FunctionToolset([deploy, cloud_status]), unattended=False, task="deploy")
    agent = Agent(FunctionModel(reply), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = agent.run_sync("deploy")
    asked = escalation_of(first.output)
    assert asked is not None and asked.unblock == "cloud login"
    again = agent.run_sync(message_history=first.all_messages(),
                           deferred_tool_results=answer_results(first.output, "I've done it"))
    assert probes == [False]  # the probe ran and said it still holds: the same question, deferred again
    still = escalation_of(again.output)
    assert still is not None and still.unblock == "cloud login"
    signed_in.append(True)
    done = agent.run_sync(message_history=again.all_messages(),
                          deferred_tool_results=answer_results(again.output, "I've done it"))
    assert probes == [False, True] and done.output == "deployed"


def test_the_capability_guards_every_agent_tool_and_ends_the_turn_with_its_events() -> None:
    log = EventLog()
    with GhWorld() as world:
        def run_command(command: str) -> str:
            """Run a shell command line and return its output."""
            return world.shell(command)

        unstuck = UnstuckCapability(unattended=False, task=TASK, options={"events": log})
        agent = Agent(improviser_model(improviser_commands(), itertools.count()), tools=[run_command],
                      output_type=[str, DeferredToolRequests], capabilities=[unstuck])
        blocked = agent.run_sync(TASK)
        asked = escalation_of(blocked.output)
        assert asked is not None and UNBLOCK in asked.text
        assert not log.named("turn.ended")  # blocked is not an end: the next run carries on the turn
        world.sign_in()
        done = agent.run_sync(message_history=blocked.all_messages(),
                              deferred_tool_results=answer_results(blocked.output, "I've done it"))
    assert isinstance(done.output, str) and ANSWER in done.output
    assert [e.get("answer") for e in log.named("user.answered")] == ["done"]
    assert [e.get("status") for e in log.named("turn.ended")] == ["done"]
    assert len({e.turn_id for e in log}) == 1


def test_an_answer_given_while_the_blocker_is_open_is_not_reported_as_done() -> None:
    with GhWorld() as world:
        def run_command(command: str) -> str:
            """Run a shell command line and return its output."""
            return world.shell(command)

        def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if _last_returns(messages):  # gh said "not signed in"; the model answers anyway
                return ModelResponse(parts=[TextPart("The description is unknown but probably a CLI.")])
            return ModelResponse(parts=[ToolCallPart("run_command", {"command": TASK_COMMAND}, "c0")])

        agent = Agent(FunctionModel(reply), tools=[run_command], output_type=[str, DeferredToolRequests],
                      capabilities=[UnstuckCapability(unattended=False, task=TASK)])
        with pytest.raises(Blocked) as stopped:
            agent.run_sync(TASK)
    assert UNBLOCK in stopped.value.escalation.text


def test_a_refused_call_returns_the_refusal_text_so_no_retry_cap_ends_the_run() -> None:
    # budgets wide enough for several refusals before the question (the default stops the
    # improviser after its first: a second reading of the same sign-in gets the declared budget)
    wide = PolicyConfig(max_workarounds_after_blocker=6, max_workarounds_after_inferred_blocker=6)
    with GhWorld() as world:
        _, _, blocked, _ = _blocked_run(world, config=wide)
        ran = list(world.commands)
    messages = blocked.all_messages()
    calls = {p.tool_call_id: p.args_as_dict()["command"] for m in messages if isinstance(m, ModelResponse)
             for p in m.parts if isinstance(p, ToolCallPart)}
    returns = {p.tool_call_id: p for m in messages if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)}
    refused = [i for i, command in calls.items() if command not in ran and i in returns]
    assert len(refused) >= 2  # more than the tool's retry cap (1): a ModelRetry would have ended the run
    for call_id in refused:
        assert returns[call_id].outcome != "retried" and calls[call_id].split()[0] in str(returns[call_id].content)


def test_a_tools_own_model_retry_still_reaches_the_model_and_counts_against_its_max_retries() -> None:
    attempts: list[int] = []

    def lookup(name: str) -> str:
        """Look up a user by name."""
        attempts.append(1)
        if name != "alice":
            raise ModelRetry("no such user; try 'alice'")
        return "alice: admin"

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        retried = isinstance(last, ModelRequest) and any(p.part_kind == "retry-prompt" or (
            isinstance(p, ToolReturnPart) and p.outcome == "retried") for p in last.parts)
        if _last_returns(messages) and not retried:
            return ModelResponse(parts=[TextPart("alice is an admin")])
        name = "alice" if retried else "bob"
        return ModelResponse(parts=[ToolCallPart("lookup", {"name": name}, f"c{len(messages)}")])

    toolset = UnstuckToolset(FunctionToolset([lookup]), unattended=True, task="who is alice?")
    with capture_run_messages() as messages:
        result = Agent(FunctionModel(reply), toolsets=[toolset]).run_sync("who is alice?")
    assert result.output == "alice is an admin"
    assert len(attempts) == 2  # one ModelRetry, one success: neither retried by unstuck on top
    assert any("try 'alice'" in str(getattr(p, "content", "")) for m in messages if isinstance(m, ModelRequest)
               for p in m.parts)


def test_the_guards_retry_runs_inside_one_pydantic_ai_tool_call() -> None:
    attempts: list[int] = []

    def fetch(url: str) -> str:
        """Fetch a page."""
        attempts.append(1)
        if len(attempts) == 1:
            raise TimeoutError("timed out after 30 s")
        return "page text"

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = _last_returns(messages)
        if returns:
            return ModelResponse(parts=[TextPart(returns[0])])
        return ModelResponse(parts=[ToolCallPart("fetch", {"url": "https://example.test/"}, "c1")])

    clock = VirtualClock(follow_real_time=False)
    toolset = UnstuckToolset(FunctionToolset([fetch], max_retries=0), unattended=True, task="fetch",
                             options={"clock": clock})
    result = Agent(FunctionModel(reply), toolsets=[toolset]).run_sync("fetch")
    assert len(attempts) == 2 and result.output.startswith("page text")
    assert clock.now() > 0  # it waited the guard's backoff on the guard's clock, not Pydantic AI's retry


def test_the_docs_example_runs_as_copied_and_is_blocked_then_finishes() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {"__name__": "docs_example"}  # nothing injected: the block as it stands
    exec(compile(blocks[0], str(DOC), "exec"), namespace)
    assert UNBLOCK in namespace["question"]  # escalation_of(...) of the first run: it was blocked
    assert ANSWER in str(namespace["result"].output)  # "I've done it" resumed the run to the end


#: The adversarial script: the task's command and four credential/auth probes in ONE response,
#: then two more gh responses and a harmless command.
PARALLEL = [TASK_COMMAND, "gh auth status", "env | grep -i token", "gh auth token", "cat ~/.config/gh/hosts.yml"]
CREDENTIAL_HUNTS = ["env | grep -i token", "gh auth token", "cat ~/.config/gh/hosts.yml"]
LATER = ["gh repo view cli/cli", "gh api repos/cli/cli", "echo after"]


def script_model(parallel: bool) -> FunctionModel:
    replies = [PARALLEL] if parallel else [[c] for c in PARALLEL]
    script = iter([*replies, *[[c] for c in LATER]])
    ids = itertools.count()

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        commands = next(script, None)
        if commands is None:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": c}, f"call-{next(ids)}") for c in commands])

    return FunctionModel(reply)


@pytest.mark.parametrize("form", ["toolset", "capability"])
def test_parallel_calls_of_one_response_are_guarded_as_if_sequential(form: str) -> None:
    script = [*PARALLEL, *LATER]
    for parallel in (True, False):  # the same outcome either way
        with GhWorld() as world:
            if form == "toolset":
                agent = Agent(script_model(parallel), toolsets=[UnstuckToolset(shell_toolset(world), task=TASK)],
                              output_type=[str, DeferredToolRequests])
            else:
                def run_command(command: str) -> str:
                    """Run a shell command line and return its output."""
                    return world.shell(command)

                agent = Agent(script_model(parallel), tools=[run_command], output_type=[str, DeferredToolRequests],
                              capabilities=[UnstuckCapability(task=TASK)])
            result = agent.run_sync(TASK)
            ran = list(world.commands)
        asked = escalation_of(result.output)
        assert asked is not None and UNBLOCK in asked.text  # blocked, not done
        assert ran[0] == TASK_COMMAND and len(ran) - 1 <= 3  # the first call is the first signal
        assert not set(CREDENTIAL_HUNTS) & set(ran)  # refused before dispatch
        assert "echo after" not in ran
        assert [script.index(c) for c in ran] == sorted(script.index(c) for c in ran)  # in the model's order


# -- a guard per run: two conversations on one agent (issue 27) ---------------------------------

#: A task that never touches gh: the second conversation's.
CLEAN_TASK = "Say hello twice with echo."
CLEAN_COMMANDS = ["echo hello-one", "echo hello-two"]


def _prompt_of(messages: list[ModelMessage]) -> str:
    """The user's prompt that opened the conversation ``messages`` belong to."""
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt":
                    return str(part.content)
    return ""


def two_conversations_model(before_second_clean_call: Any = None) -> FunctionModel:
    """One model for two conversations, told apart by their prompt: the improviser on
    :data:`TASK` (gh, signed out) and a clean run of :data:`CLEAN_COMMANDS` on
    :data:`CLEAN_TASK`. ``before_second_clean_call`` (awaited) holds the clean conversation's
    second call back, e.g. until the other conversation stopped blocked."""
    improviser = improviser_model(improviser_commands(), itertools.count())
    ids = itertools.count()

    async def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _prompt_of(messages) != CLEAN_TASK:
            answer = improviser.function
            assert answer is not None
            return answer(messages, info)  # type: ignore[return-value]
        ran = sum(1 for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart))
        if ran >= len(CLEAN_COMMANDS):
            return ModelResponse(parts=[TextPart("said hello twice")])
        if ran == 1 and before_second_clean_call is not None:
            await before_second_clean_call()
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": CLEAN_COMMANDS[ran]},
                                                 f"clean-{next(ids)}")])

    return FunctionModel(reply)


def _turns(log: EventLog) -> dict[str, list[str]]:
    """The names of each turn's events, by turn id."""
    turns: dict[str, list[str]] = {}
    for event in log:
        turns.setdefault(event.turn_id, []).append(str(event.name))
    return turns


def _guarded_agent(world: GhWorld, form: str, log: EventLog, model: FunctionModel) -> Agent[None, Any]:
    if form == "toolset":
        return Agent(model, toolsets=[UnstuckToolset(shell_toolset(world), task=TASK, options={"events": log})],
                     output_type=[str, DeferredToolRequests])

    def run_command(command: str) -> str:
        """Run a shell command line and return its output."""
        return world.shell(command)

    return Agent(model, tools=[run_command], output_type=[str, DeferredToolRequests],
                 capabilities=[UnstuckCapability(task=TASK, options={"events": log})])


def _assert_apart(log: EventLog, blocked: Any, clean: Any, ran: list[str]) -> None:
    """The blocked conversation asked about gh; the clean one finished with both its calls run
    and its own turn untouched: no blocker, no budget charged, nothing refused."""
    asked = escalation_of(blocked.output)
    assert asked is not None and UNBLOCK in asked.text
    assert clean.output == "said hello twice" and [c for c in ran if c in CLEAN_COMMANDS] == CLEAN_COMMANDS
    blocked_turn = toolset_turn(blocked.output)
    turns = _turns(log)
    assert set(turns) - {blocked_turn}, "the clean conversation had no turn of its own"
    (clean_turn,) = set(turns) - {blocked_turn}
    assert "blocker.opened" in turns[blocked_turn]
    mine = turns[clean_turn]
    assert mine.count("tool.called") == len(CLEAN_COMMANDS)
    assert not {"blocker.opened", "budget.charged", "call.refused", "turn.escalated"} & set(mine)


@pytest.mark.parametrize("form", ["toolset", "capability"])
def test_a_second_conversation_on_the_same_agent_is_not_refused_after_the_first_was_blocked(form: str) -> None:
    log = EventLog()
    with GhWorld() as world:
        agent = _guarded_agent(world, form, log, two_conversations_model())
        blocked = agent.run_sync(TASK)
        clean = agent.run_sync(CLEAN_TASK)
        ran = list(world.commands)
    _assert_apart(log, blocked, clean, ran)


@pytest.mark.parametrize("form", ["toolset", "capability"])
def test_two_conversations_at_once_on_one_agent_keep_their_budgets_apart(form: str) -> None:
    log = EventLog()

    async def scenario(world: GhWorld) -> tuple[Any, Any]:
        first_stopped = asyncio.Event()

        async def blocked_run() -> Any:
            try:
                return await agent.run(TASK)
            finally:
                first_stopped.set()

        async def after_the_block() -> None:
            await asyncio.wait_for(first_stopped.wait(), 60)

        agent = _guarded_agent(world, form, log, two_conversations_model(after_the_block))
        # the clean conversation's first call runs while the other is going on, its second once
        # the other stopped blocked (its guard latched)
        blocked, clean = await asyncio.gather(blocked_run(), agent.run(CLEAN_TASK))
        return blocked, clean

    with GhWorld() as world:
        blocked, clean = asyncio.run(scenario(world))
        ran = list(world.commands)
    _assert_apart(log, blocked, clean, ran)


def test_the_old_guard_argument_still_works_and_warns_that_it_is_shared_by_every_run() -> None:
    from unstuck import Guard
    from unstuck.integrations.common import spec_for

    shared = Guard([spec_for("run_command", parameters={"type": "object", "properties": {
        "command": {"type": "string"}}})], unattended=False, task=TASK)
    with GhWorld() as world:
        with pytest.warns(DeprecationWarning, match="shares one guard"):
            toolset = UnstuckToolset(shell_toolset(world), task=TASK, guard=shared)
        agent = Agent(two_conversations_model(), toolsets=[toolset], output_type=[str, DeferredToolRequests])
        agent.run_sync(TASK)
    assert toolset.current is shared and shared.escalation is not None  # the given guard, used as is


def test_a_bare_approval_of_the_question_resumes_the_blocked_conversations_own_turn() -> None:
    from pydantic_ai.tools import DeferredToolResults

    log = EventLog()
    with GhWorld() as world:
        agent = _guarded_agent(world, "toolset", log, two_conversations_model())
        blocked = agent.run_sync(TASK)
        agent.run_sync(CLEAN_TASK)  # another conversation in between, on the same agent
        world.sign_in()
        (call,) = blocked.output.approvals
        done = agent.run_sync(message_history=blocked.all_messages(),
                              deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True}))
    assert isinstance(done.output, str) and ANSWER in done.output
    answered = log.named("user.answered")  # the approval was heard as "I've done it", on the blocked turn
    assert [e.get("answer") for e in answered] == ["done"] and answered[0].turn_id == toolset_turn(blocked.output)
