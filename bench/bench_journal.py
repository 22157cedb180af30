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

Then, side by side in the same run, **synced commits per write call** (issue 12, "Cost at
scale"), over one turn of ``--writes`` write calls (default 50):

* a bare synced commit (one ``INSERT`` per call, ``synchronous=FULL``): 1.0 by definition;
* the journal (:attr:`unstuck.store.journal.Journal.commits`: the intent before each call is
  synced, the receipt and the checkpoints ride on the next synced commit);
* the journal with ``sync_window=0`` (every commit synced: the cost before riding commits);
* LangGraph's ``SqliteSaver`` (its ``COMMIT`` statements, seen by ``sqlite3``'s trace
  callback; each is synced, SQLite's default ``synchronous=FULL``).

The same four are then counted once more by one method for all of them, from outside:
each runs in a child process under ``strace -f -e trace=fsync,fdatasync -y`` and the
``fsync``/``fdatasync`` calls on files in the run's scratch folder are counted (the
database, its ``-wal`` or ``-journal`` file, the folder), from creating the database to
closing it. This is what reaches the disk, whatever a library calls a commit. Each case runs
at ``--writes`` and at twice as many calls: the difference over ``--writes`` is the sync
calls per added call, without the fixed cost of creating and closing the file (about nine).
Skipped when ``strace`` is missing.

LangGraph is optional: without it (``import langgraph`` fails) its columns are skipped and
the run says so.

Run: ``.venv/bin/pip install -e '.[bench]' && .venv/bin/python bench/bench_journal.py``
(options: ``--steps N --repeats R --writes W``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

try:
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
except ImportError as exc:  # optional: the LangGraph columns are skipped
    LANGGRAPH_MISSING: str | None = f"{exc}"
else:
    LANGGRAPH_MISSING = None

from unstuck.core.clock import VirtualClock
from unstuck.core.tools import Effect, ToolCall
from unstuck.loop.turn import run_turn
from unstuck.store.journal import Journal
from unstuck.toolkit.models import Message, ModelReply
from unstuck.toolkit.specs import Toolset, ToolSpec, tool


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
    return run_unstuck(steps, tool_name, journal_dir)[0]


def run_unstuck(steps: int, tool_name: str, journal_dir: Path | None, *,
                sync_window: float | None = None) -> tuple[float, int]:
    """(seconds, synced commits of the turn) for one turn of ``steps`` calls."""
    ledger: list[int] = []
    journal = (Journal(journal_dir / f"j-{time.perf_counter_ns()}.db", sync_window=sync_window)
               if journal_dir is not None else None)
    before = journal.commits if journal is not None else 0  # the new file's schema is not the turn's
    started = time.perf_counter()
    result = run_turn("fill the ledger", model=CountingModel(steps, tool_name), tools=ledger_tools(ledger),
                      unattended=True, clock=VirtualClock(), journal=journal, max_steps=steps + 5,
                      stall_after_s=None)
    elapsed = time.perf_counter() - started
    synced = 0
    if journal is not None:
        synced = journal.commits - before
        journal.close()
    assert result.status.value == "done" and len(result.steps) == steps, result.error
    return elapsed, synced


def bare_synced_commits(writes: int, db_path: Path) -> tuple[float, int]:
    """(seconds, synced commits) of ``writes`` single-row INSERTs, each its own synced commit."""
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("CREATE TABLE ledger (n INTEGER NOT NULL)")
    commits = 0
    started = time.perf_counter()
    for n in range(writes):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO ledger VALUES (?)", (n,))
        db.execute("COMMIT")
        commits += 1
    elapsed = time.perf_counter() - started
    db.close()
    return elapsed, commits


class State(TypedDict):
    """LangGraph's state for the same loop: the conversation, and the calls made so far."""

    messages: Annotated[list[Any], add_messages]
    count: int


def time_langgraph(steps: int, db_path: Path | None) -> float:
    return run_langgraph(steps, db_path)[0]


def run_langgraph(steps: int, db_path: Path | None) -> tuple[float, int]:
    """(seconds, COMMITs by SqliteSaver) for the same loop in LangGraph."""
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
    statements: list[str] = []
    if db_path is not None:
        connection = sqlite3.connect(db_path, check_same_thread=False)
        checkpointer = SqliteSaver(connection)
    app = graph.compile(checkpointer=checkpointer)
    config: dict[str, Any] = {"recursion_limit": 2 * steps + 10, "configurable": {"thread_id": "bench"}}
    if connection is not None:
        checkpointer.setup()  # type: ignore[union-attr]  # its tables, before counting
        connection.set_trace_callback(statements.append)
    started = time.perf_counter()
    final = app.invoke({"messages": [("user", "fill the ledger")], "count": 0}, config)  # type: ignore[call-overload]
    elapsed = time.perf_counter() - started
    if connection is not None:
        connection.set_trace_callback(None)
        connection.close()
    assert final["count"] == steps and len(ledger) == steps
    return elapsed, sum(1 for sql in statements if sql.strip().upper().startswith("COMMIT"))


#: The cases counted under strace, each run by a child process (``--child CASE``).
CHILD_CASES = ("bare", "journal", "journal-sync0", "journal-read", "langgraph")


def run_child(case: str, writes: int, folder: Path) -> None:
    """One case of ``writes`` calls against a new database in ``folder`` (the strace child's work)."""
    if case == "bare":
        bare_synced_commits(writes, folder / "bare.db")
    elif case == "journal":
        run_unstuck(writes, "write_ledger", folder)
    elif case == "journal-sync0":
        run_unstuck(writes, "write_ledger", folder, sync_window=0.0)
    elif case == "journal-read":
        run_unstuck(writes, "read_ledger", folder)
    elif case == "langgraph":
        run_langgraph(writes, folder / "lg.db")
    else:
        raise ValueError(f"--child {case!r}: not one of {', '.join(CHILD_CASES)}")


#: One strace line of a sync call with its descriptor's path (``-y``): ``123 fsync(5</x/y.db-wal>) = 0``.
SYNC_LINE = re.compile(r"\b(?:fsync|fdatasync)\(\d+<([^>]*)>\)")


def strace_fsyncs(case: str, writes: int, scratch: Path) -> int | None:
    """fsync + fdatasync calls on files under a new folder in ``scratch`` by one child running ``case``.

    ``None`` when strace is not installed. Raises ``RuntimeError`` when the child fails.
    """
    strace = shutil.which("strace")
    if strace is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix=f"{case}-", dir=scratch))
    log = folder.with_suffix(".strace")
    done = subprocess.run(
        [strace, "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", "-o", str(log),
         sys.executable, __file__, "--child", case, "--writes", str(writes), "--dir", str(folder)],
        capture_output=True, text=True, check=False, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"strace child {case}: exit {done.returncode}: {done.stderr[-800:]}")
    inside = str(folder.resolve())
    return sum(1 for line in log.read_text(encoding="utf-8").splitlines()
               if (m := SYNC_LINE.search(line)) is not None and m.group(1).startswith(inside))


def best(repeats: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--child", choices=CHILD_CASES, help=argparse.SUPPRESS)  # the strace child
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        run_child(args.child, args.writes, args.dir)
        return
    n: int = args.steps
    r: int = args.repeats
    w: int = args.writes
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as scratch:
        folder = Path(scratch)
        bare = best(r, lambda: time_unstuck(n, "write_ledger", None))
        write = best(r, lambda: time_unstuck(n, "write_ledger", folder))
        read = best(r, lambda: time_unstuck(n, "read_ledger", folder))
        graph = saved = None
        if LANGGRAPH_MISSING is None:
            graph = best(r, lambda: time_langgraph(n, None))
            saved = best(r, lambda: time_langgraph(n, folder / f"lg-{time.perf_counter_ns()}.db"))
        commit_s, bare_commits = bare_synced_commits(w, folder / "bare.db")
        riding_s, riding = run_unstuck(w, "write_ledger", folder)
        every_s, every = run_unstuck(w, "write_ledger", folder, sync_window=0.0)
        reading_s, reading = run_unstuck(w, "read_ledger", folder)
        lg = run_langgraph(w, folder / "lg-commits.db") if LANGGRAPH_MISSING is None else None
        fsyncs = {case: (strace_fsyncs(case, w, folder), strace_fsyncs(case, 2 * w, folder))
                  for case in CHILD_CASES if case != "langgraph" or LANGGRAPH_MISSING is None}

    def us(seconds: float) -> float:
        return seconds / n * 1e6

    print(f"{n}-step tool loop, best of {r}, microseconds per step")
    print(f"unstuck: no journal {us(bare):.0f}; journal, write tool {us(write):.0f} "
          f"(ratio {write / bare:.1f}); journal, read tool {us(read):.0f} (ratio {read / bare:.1f})")
    if graph is not None and saved is not None:
        print(f"langgraph: no checkpointer {us(graph):.0f}; SqliteSaver {us(saved):.0f} (ratio {saved / graph:.1f})")
        ours, theirs = us(write - bare), us(saved - graph)
        print(f"added per step: unstuck journal (write: intent + receipt + checkpoint) {ours:.0f} µs; "
              f"unstuck journal (read: checkpoint) {us(read - bare):.0f} µs; "
              f"LangGraph SqliteSaver {theirs:.0f} µs; ratio unstuck write / LangGraph {ours / theirs:.2f}")
    else:
        print(f"langgraph: not installed ({LANGGRAPH_MISSING}); its columns are skipped")

    def per_call(seconds: float) -> str:
        return f"{seconds / w * 1e6:.0f} µs/call"

    print(f"synced commits per write call, one turn of {w} calls (the turn's start and end included):")
    print(f"  bare synced commit      {bare_commits / w:.2f}  ({per_call(commit_s)})")
    print(f"  unstuck journal         {riding / w:.2f}  ({per_call(riding_s)}; target <= 1.2: "
          f"{'met' if riding / w <= 1.2 else 'NOT met'})")
    print(f"  journal, sync_window=0  {every / w:.2f}  ({per_call(every_s)}; every commit synced, as before)")
    print(f"  journal, read calls     {reading / w:.2f}  ({per_call(reading_s)}; no intent: only the turn's end)")
    if lg is not None:
        print(f"  LangGraph SqliteSaver   {lg[1] / w:.2f}  ({per_call(lg[0])})")
    else:
        print("  LangGraph SqliteSaver   skipped (langgraph not installed)")
    if any(None in counts for counts in fsyncs.values()):
        print("fsyncs under strace: skipped (strace not installed)")
        return
    labels = {"bare": "bare synced commit    ", "journal": "unstuck journal       ",
              "journal-sync0": "journal, sync_window=0", "journal-read": "journal, read calls   ",
              "langgraph": "LangGraph SqliteSaver "}
    marginal = {case: ((twice or 0) - (once or 0)) / w for case, (once, twice) in fsyncs.items()}
    base = marginal["bare"] or 1.0
    print(f"fsync + fdatasync under strace -f (same method for all; the run's files only): "
          f"per added write call ({w} -> {2 * w} calls), and whole runs")
    for case, (once, twice) in fsyncs.items():
        print(f"  {labels[case]}  {marginal[case]:.2f}  (ratio to bare {marginal[case] / base:.2f}; "
              f"{once} at {w} calls, {twice} at {2 * w})")
    if LANGGRAPH_MISSING is not None:
        print("  LangGraph SqliteSaver   skipped (langgraph not installed)")


if __name__ == "__main__":
    main()
