"""A guarded LangGraph agent paused on the real, signed-out gh, with a SQLite checkpointer, that
a test drives one step per process: the first run, then each answer in a fresh process resuming
from the same checkpoint file (issue 27: one probe per answer, across processes).

Usage: python langgraph_child.py DB LOG FORM start
       python langgraph_child.py DB LOG FORM answer TEXT [--signed-in]

FORM is ``middleware`` (``create_agent`` with :class:`UnstuckMiddleware`) or ``tool-node`` (a
hand-built graph with :class:`UnstuckToolNode` and its gate). Every real invocation of the shell
tool appends a line ``CALL_ID<TAB>COMMAND`` to LOG (the guard's probe runs the tool as
``unstuck-probe``). Prints ``{"paused", "status", "last"}`` as JSON on its last line.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, RetryPolicy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from framework_world import TASK, TASK_COMMAND, GhWorld, improviser_commands
from unstuck.integrations.langgraph import GuardedState, UnstuckMiddleware, UnstuckToolNode, outcome

THREAD: Any = {"configurable": {"thread_id": "probe-per-answer"}}


class ToolCallingFakeModel(GenericFakeChatModel):
    """langchain_core's fake chat model, accepting the tools ``create_agent`` binds."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self


def call(command: str, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "run_command", "args": {"command": command}, "id": call_id,
                                      "type": "tool_call"}])


def replies(outputs: list[str], signed_in: Callable[[], bool]) -> Iterator[AIMessage]:
    """The improviser's replies, one call each; once ``signed_in()`` (the user signed in and
    said so), the task's command again, then its output as the answer."""
    for number, command in enumerate(improviser_commands(), start=1):
        if signed_in():
            break
        yield call(command, f"call_{number}")
    yield call(TASK_COMMAND, "call_after")
    yield AIMessage(outputs[-1] if outputs else "")


def logging_shell(world: GhWorld, log: Path, outputs: list[str]) -> Any:
    @tool
    def run_command(command: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Run a shell command line and return its output."""
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{tool_call_id}\t{command}\n")
        text = world.shell(command)
        outputs.append(text)
        return text

    return run_command


def build(form: str, world: GhWorld, log: Path, saver: Any, replies: Iterator[AIMessage], outputs: list[str]) -> Any:
    """The guarded agent of ``form`` (see the module doc), paused on a question (``pause=True``)."""
    run_command = logging_shell(world, log, outputs)
    model = ToolCallingFakeModel(messages=replies)
    if form == "middleware":
        return create_agent(model, [run_command], middleware=[UnstuckMiddleware([run_command], task=TASK, pause=True)],
                            checkpointer=saver)
    node = UnstuckToolNode([run_command], then="agent", task=TASK, pause=True)

    def agent(state: GuardedState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    return hand_built_graph(node, agent).compile(checkpointer=saver)


def hand_built_graph(node: UnstuckToolNode, agent: Any, *, retry: RetryPolicy | None = None) -> StateGraph[Any]:
    """The hand-built graph the LangGraph docs draw around unstuck's tool node: ``agent``, then
    the tools while the model calls them, the gate after each (uncompiled)."""
    builder: StateGraph[Any] = StateGraph(GuardedState)
    builder.add_node("agent", agent)
    builder.add_node("tools", node.node, retry_policy=retry)
    builder.add_node("unstuck", node.gate, destinations=("agent", END))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "unstuck"})
    builder.add_edge("tools", "unstuck")
    return builder


def report(result: dict[str, Any]) -> dict[str, Any]:
    last = result["messages"][-1] if result.get("messages") else None
    return {"paused": bool(result.get("__interrupt__")), "status": outcome(result).status.value,
            "last": str(getattr(last, "content", ""))}


def main(argv: list[str]) -> int:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db, log, form, action = Path(argv[0]), Path(argv[1]), argv[2], argv[3]
    outputs: list[str] = []
    with contextlib.ExitStack() as stack:
        world = stack.enter_context(GhWorld())
        saver = stack.enter_context(SqliteSaver.from_conn_string(str(db)))
        if action == "start":
            graph = build(form, world, log, saver, replies(outputs, lambda: False), outputs)
            result = graph.invoke({"messages": [("user", TASK)]}, THREAD)
        else:
            if "--signed-in" in argv[5:]:
                world.sign_in()
            graph = build(form, world, log, saver, replies(outputs, lambda: True), outputs)
            result = graph.invoke(Command(resume=argv[4]), THREAD)
    print(json.dumps(report(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
