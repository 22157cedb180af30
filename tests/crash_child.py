"""A turn that makes three write effects against a ledger (an SQLite file), run in its own
process so a test can SIGKILL it at a journal crash point and resume it later.

Usage: python crash_child.py JOURNAL LEDGER run TURN_ID [POINT EFFECT]
       python crash_child.py JOURNAL LEDGER resume TURN_ID [--resolvers]

Prints the turn's result as JSON on its last line. With POINT and EFFECT (1-3), the process
kills itself with SIGKILL when the journal reaches that crash point for that effect.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from unstuck.core.clock import VirtualClock
from unstuck.core.tools import Effect, ToolCall
from unstuck.loop.resume import Resolution, resume_turn
from unstuck.loop.turn import run_turn
from unstuck.store.journal import Journal
from unstuck.toolkit.models import Message, ModelReply, Role
from unstuck.toolkit.specs import Toolset, ToolSpec, tool

ORDERS = 3


class LedgerModel:
    """Books orders 1..3, one call per reply, deciding from the conversation alone (so a
    fresh process resuming the turn continues where the checkpoint left off)."""

    name = "ledger-model"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        done = sum(1 for m in messages if m.role is Role.TOOL)
        if done >= ORDERS or not tools:
            return ModelReply("booked orders 1, 2 and 3")
        n = done + 1
        return ModelReply("", (ToolCall.of(f"call_{n}", "book_order", {"order": n}),))


def ledger_tools(ledger: str) -> Toolset:
    @tool(effect=Effect.WRITE, subject="ledger")
    def book_order(order: int) -> str:
        """Append one order to the ledger (after BOOK_DELAY seconds, when set: a slow effect;
        with BOOK_STARTED set, a file named after the order is made in that folder first:
        the call is under way)."""
        started = os.environ.get("BOOK_STARTED")
        if started:
            (Path(started) / str(order)).touch()
        time.sleep(float(os.environ.get("BOOK_DELAY", "0")))
        with sqlite3.connect(ledger) as db:
            db.execute("INSERT INTO ledger (order_id) VALUES (?)", (order,))
        return f"booked order {order}"

    return Toolset([book_order])


def resolvers(ledger: str) -> Mapping[str, Any]:
    def booked(arguments: Mapping[str, Any]) -> Resolution:
        with sqlite3.connect(ledger) as db:
            found = db.execute("SELECT count(*) FROM ledger WHERE order_id = ?", (arguments["order"],)).fetchone()[0]
        return Resolution.COMMITTED if found else Resolution.ABSENT

    return {"book_order": booked}


def main(argv: list[str]) -> None:
    journal_path, ledger, mode, turn_id = argv[:4]
    hook = None
    if mode == "run" and len(argv) >= 6:
        point, effect = argv[4], f"{turn_id}:{int(argv[5]) - 1}"

        def hook(name: str, ref: str) -> None:
            if name == point and ref == effect:
                os.kill(os.getpid(), signal.SIGKILL)

    with Journal(journal_path, on_point=hook) as journal:
        if mode == "run":
            result = run_turn("book orders 1 to 3", model=LedgerModel(), tools=ledger_tools(ledger),
                              unattended=True, clock=VirtualClock(), journal=journal, turn_id=turn_id)
        else:
            result = resume_turn(journal, turn_id, model=LedgerModel(), tools=ledger_tools(ledger),
                                 resolvers=resolvers(ledger) if "--resolvers" in argv else None, clock=VirtualClock())
    print(json.dumps({"status": result.status.value, "held": list(result.held_intents), "error": result.error,
                      "answer": result.answer}))


if __name__ == "__main__":
    main(sys.argv[1:])
