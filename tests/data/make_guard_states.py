"""Write tests/data/guard_state_v1*.json with the guard of the release before the split (main at c9fa87c):
``PYTHONPATH=src python tests/data/make_guard_states.py tests/data``. Kept for the record: the files are that
release's output and are not written again."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from unstuck import Action, Guard, ToolCall, tool
from unstuck.core.clock import VirtualClock
from unstuck.decide import policy
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore

AUTH = {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login",
                                         "probe": {"tool": "gh_status", "args": {}}}}


def tools() -> list[Any]:
    @tool(subject="gh")
    def gh(args: str) -> dict[str, Any]:
        """gh, signed out (it declares so)."""
        return AUTH

    @tool(subject="gh")
    def gh_status() -> dict[str, Any]:
        """gh auth status: signed out."""
        return AUTH

    @tool(subject="svc")
    def svc(n: int) -> str:
        """A service that is busy."""
        return "HTTP 503 Service Unavailable"

    @tool(subject="notes")
    def echo(text: str) -> str:
        """Say it back."""
        return text

    @tool(effect="write", subject="ledger")
    def pay(order: str) -> str:
        """Book a payment."""
        return "booked"

    @tool(interactive=True, subject="browser")
    def sign_in() -> str:
        """Sign in with a browser."""
        return "signed in"

    return [gh, gh_status, svc, echo, pay, sign_in]


def midway(folder: Path) -> str:
    journal = Journal(folder / "j.db")
    held = {policy.call_key(ToolCall.of("old", "pay", {"order": "7"})): "intent-old"}
    guard = Guard(tools(), unattended=True, clock=VirtualClock(), task="post with gh", turn_id="t-midway",
                  journal=journal, held_writes=held)
    pay0 = ToolCall.of("p0", "pay", {"order": "41"})
    guard.reply([pay0])
    guard.call(pay0)
    guard.checkpoint()
    calls = [ToolCall.of("e1", "echo", {"text": "hello"}), ToolCall.of("s1", "svc", {"n": 1}),
             ToolCall.of("p1", "pay", {"order": "42"}), ToolCall.of("i1", "sign_in", {})]
    guard.reply(calls)
    assert guard.call(calls[0]).action is Action.CONTINUE
    assert guard.before(calls[1]).action is Action.DISPATCH
    retry = guard.after(calls[1], "HTTP 503 Service Unavailable")
    assert retry.action is Action.RETRY, retry
    assert guard.before(calls[2]).action is Action.DISPATCH  # in flight: its intent is prepared
    assert guard.before(calls[3]).action is Action.REFUSE  # queued behind the calls in flight
    return guard.to_json()


def escalated(folder: Path) -> str:
    lessons = LessonStore(folder / "l.db")
    first = Guard(tools(), unattended=True, clock=VirtualClock(), task="t", lessons=lessons,
                  fingerprint=lambda subject: f"{subject} 2.0")
    for n in range(4):
        first.call(ToolCall.of(f"a{n}", "gh", {"args": str(n)}))
    assert first.latched
    guard = Guard(tools(), unattended=True, clock=VirtualClock(), task="post with gh", turn_id="t-escalated",
                  lessons=lessons, fingerprint=lambda subject: f"{subject} 2.0")
    guard.call(ToolCall.of("v0", "svc", {"n": 0}))
    guard.clock.sleep(3.5)
    decision = guard.call(ToolCall.of("g0", "gh", {"args": "repo view"}))
    assert decision.action is Action.ESCALATE and json.loads(guard.to_json())["cited"], decision
    return guard.to_json()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("guard_state_v1.json", midway), ("guard_state_v1_escalated.json", escalated)):
            text = make(Path(tmp))
            (out / name).write_text(json.dumps(json.loads(text), indent=1) + "\n", encoding="utf-8")
            print(name, sorted(k for k, v in json.loads(text).items() if v not in (None, [], {}, 0, "")))
