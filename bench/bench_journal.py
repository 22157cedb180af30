"""Benchmark: what the durable journal costs per step, beside LangGraph's SQLite checkpointer.

One tool loop of N steps (default 1,000): a scripted model asks for one tool call per reply,
the tool appends to an in-memory ledger, and the model answers after N results. Measured in
one run, each as the best of R repeats, per step:

* unstuck, no journal (the baseline);
* unstuck with a journal, a write tool: an effect intent synced before each call, a receipt
  after it, and a checkpoint of the step and its messages (each a synced SQLite commit, WAL,
  ``synchronous=FULL``);
* unstuck with a journal, a read tool: the checkpoint only;
* LangGraph (``StateGraph``: an agent node and a tools node over a messages state), without
  a checkpointer and with ``SqliteSaver`` (langgraph-checkpoint-sqlite), on the same loop.

Printed: microseconds per step, the journal's added cost per step (journal minus no journal)
beside the checkpointer's (SqliteSaver minus none), and their ratio. Both write to a file on
the same disk, with each commit synced.

Run: ``.venv/bin/pip install -e '.[bench]' && .venv/bin/python bench/bench_journal.py``
(options: ``--steps N --repeats R``).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from unstuck.clock import VirtualClock
from unstuck.journal import Journal
from unstuck.loop import run_turn
from unstuck.models import Message, ModelReply
from unstuck.tools import Effect, ToolCall, Toolset, ToolSpec, tool


class CountingModel:
    """One call per reply to ``tool_name`` until ``steps`` calls were made (constant time per reply)."""

    name = "counting"

    def __init__(self, steps: int, tool_name: str) -> None:
        self.steps, self.tool_name, self.made = steps, tool_name, 0

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        if self.made >= self.steps or not tools:
            return ModelReply("done")
        self.made += 1
        return ModelReply("", (ToolCall.of(f"c{self.made}", self.tool_name, {"n": self.made}),))


def ledger_tools(ledger: list[int]) -> Toolset:
    @tool(effect=Effect.WRITE, subject="ledger")
    def write_ledger(n: int) -> str:
        """Append to the ledger."""
        ledger.append(n)
        return f"wrote {n}"

    @tool(subject="ledger")
    def read_ledger(n: int) -> str:
        """Read the ledger."""
        return f"{len(ledger)} entries"

    return Toolset([write_ledger, read_ledger])


def time_unstuck(steps: int, tool_name: str, journal_dir: Path | None) -> float:
    ledger: list[int] = []
    journal = Journal(journal_dir / f"j-{time.perf_counter_ns()}.db") if journal_dir is not None else None
    started = time.perf_counter()
    result = run_turn("fill the ledger", model=CountingModel(steps, tool_name), tools=ledger_tools(ledger),
                      unattended=True, clock=VirtualClock(), journal=journal, max_steps=steps + 5,
                      stall_after_s=None)
    elapsed = time.perf_counter() - started
    if journal is not None:
        journal.close()
    assert result.status.value == "done" and len(result.steps) == steps, result.error
    return elapsed


class State(TypedDict):
    """LangGraph's state for the same loop: the conversation, and the calls made so far."""

    messages: Annotated[list[Any], add_messages]
    count: int


def time_langgraph(steps: int, db_path: Path | None) -> float:
    ledger: list[int] = []

    def agent(state: State) -> dict[str, Any]:
        n = state["count"]
        if n >= steps:
            return {"messages": [AIMessage("done")]}
        call = {"id": f"c{n + 1}", "name": "write_ledger", "args": {"n": n + 1}}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    def tools(state: State) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        ledger.append(call["args"]["n"])
        return {"messages": [ToolMessage(f"wrote {call['args']['n']}", tool_call_id=call["id"])],
                "count": state["count"] + 1}

    def route(state: State) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    checkpointer = None
    connection = None
    if db_path is not None:
        connection = sqlite3.connect(db_path, check_same_thread=False)
        checkpointer = SqliteSaver(connection)
    app = graph.compile(checkpointer=checkpointer)
    config: dict[str, Any] = {"recursion_limit": 2 * steps + 10, "configurable": {"thread_id": "bench"}}
    started = time.perf_counter()
    final = app.invoke({"messages": [("user", "fill the ledger")], "count": 0}, config)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    if connection is not None:
        connection.close()
    assert final["count"] == steps and len(ledger) == steps
    return elapsed


def best(repeats: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, r = args.steps, args.repeats
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as scratch:
        folder = Path(scratch)
        bare = best(r, lambda: time_unstuck(n, "write_ledger", None))
        write = best(r, lambda: time_unstuck(n, "write_ledger", folder))
        read = best(r, lambda: time_unstuck(n, "read_ledger", folder))
        graph = best(r, lambda: time_langgraph(n, None))
        saved = best(r, lambda: time_langgraph(n, folder / f"lg-{time.perf_counter_ns()}.db"))

    def us(seconds: float) -> float:
        return seconds / n * 1e6

    print(f"{n}-step tool loop, best of {r}, microseconds per step")
    print(f"unstuck: no journal {us(bare):.0f}; journal, write tool {us(write):.0f} "
          f"(ratio {write / bare:.1f}); journal, read tool {us(read):.0f} (ratio {read / bare:.1f})")
    print(f"langgraph: no checkpointer {us(graph):.0f}; SqliteSaver {us(saved):.0f} (ratio {saved / graph:.1f})")
    ours, theirs = us(write - bare), us(saved - graph)
    print(f"added per step: unstuck journal (write: intent + receipt + checkpoint) {ours:.0f} µs; "
          f"unstuck journal (read: checkpoint) {us(read - bare):.0f} µs; "
          f"LangGraph SqliteSaver {theirs:.0f} µs; ratio unstuck write / LangGraph {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
