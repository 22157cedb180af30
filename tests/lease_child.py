"""A turn on one "machine" of a fleet, run in its own process so a test can SIGKILL or
SIGSTOP it while it holds the turn's lease, and resume the turn from another "machine".

Usage: python lease_child.py STORE_URL LEDGER run|resume TURN_ID

Environment: ``UNSTUCK_HOST_ID`` (the machine: :data:`unstuck.store.urls.HOST_ENV`),
``LEASE_TTL`` (seconds), ``READY_FILE`` (made when the turn waits in its read call) and
``GO_FILE`` (the read call returns once it exists).

The turn books order 1 (a write: intent, call, receipt), then calls ``check_stock`` (a read
that waits for ``GO_FILE``), then books orders 2 and 3 and answers. The model decides from
the conversation alone, so a process resuming the turn continues where the checkpoint left
off. The last line printed is JSON: the turn's result, or ``{"error", "type"}`` when the
journal refused a write (exit status 3).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from crash_child import ledger_tools, resolvers
from unstuck.core.clock import VirtualClock
from unstuck.core.tools import ToolCall
from unstuck.loop.resume import resume_turn
from unstuck.loop.turn import run_turn
from unstuck.store.journal import Journal, JournalError
from unstuck.toolkit.models import Message, ModelReply, Role
from unstuck.toolkit.specs import Toolset, ToolSpec, tool

#: The calls of the turn, in order, by how many tool results the conversation holds.
PLAN: tuple[tuple[str, dict[str, int]], ...] = (("book_order", {"order": 1}), ("check_stock", {}), ("book_order", {"order": 2}), ("book_order", {"order": 3}))


class FleetModel:
    """Plays :data:`PLAN` one call per reply, then answers."""

    name = "fleet-model"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        done = sum(1 for m in messages if m.role is Role.TOOL)
        if done >= len(PLAN) or not tools:
            return ModelReply("booked orders 1, 2 and 3")
        name, arguments = PLAN[done]
        return ModelReply("", (ToolCall.of(f"call_{done + 1}", name, arguments),))


def fleet_tools(ledger: str) -> Toolset:
    """crash_child's ``book_order`` on the ledger, and a read that waits for the warehouse."""
    @tool(subject="stock")
    def check_stock() -> str:
        """Wait until the warehouse answers (GO_FILE exists), then say the stock is there."""
        Path(os.environ["READY_FILE"]).touch()
        go = Path(os.environ["GO_FILE"])
        while not go.exists():
            time.sleep(0.02)
        return "in stock"

    booking = ledger_tools(ledger)
    return Toolset([booking["book_order"], check_stock])


def main(argv: list[str]) -> int:
    url, ledger, mode, turn_id = argv[:4]
    try:
        with Journal(url, lease_ttl=float(os.environ.get("LEASE_TTL", "30"))) as journal:
            if mode == "run":
                result = run_turn("book orders 1 to 3", model=FleetModel(), tools=fleet_tools(ledger),
                                  unattended=True, clock=VirtualClock(), journal=journal, turn_id=turn_id)
            else:
                result = resume_turn(journal, turn_id, model=FleetModel(), tools=fleet_tools(ledger),
                                     resolvers=resolvers(ledger), clock=VirtualClock())
    except JournalError as exc:
        print(json.dumps({"error": str(exc), "type": type(exc).__name__}))
        return 3
    print(json.dumps({"status": result.status.value, "error": result.error, "answer": result.answer}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
