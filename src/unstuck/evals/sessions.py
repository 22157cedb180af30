"""The multi-session scenario: the same blocker across sessions, each a separate process
sharing one lesson store (issue 6; seed 000, section 3.4).
Internal: not a supported import path (docs/reference/index.md lists those that are).

1. gh is signed out: the turn escalates and stores a lesson;
2. gh is still signed out: the turn escalates within 2 steps, citing the lesson (its probe
   says the blocker still holds, so no call is wasted on it);
3. gh is signed in (the real gh against the local GitHub API with a valid token): the
   lesson's probe comes back clean, the lesson is closed, and the task is finished.

Each session is ``python -m unstuck run SCENARIO --lessons STORE``, so nothing but the store
carries over: no process state, no cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from unstuck.core.trees import temporary_tree
from unstuck.store.events import EventName, read_events
from unstuck.store.urls import ENV_VAR as STORE_VARIABLE

__all__ = ["CITED_WITHIN_STEPS", "SESSION_PLAN", "SessionResult", "SessionStep", "run_sessions"]


@dataclass(frozen=True, slots=True)
class SessionStep:
    """One session: the scenario it runs and what must happen."""

    scenario: str
    expect: str  # "stored", "cited", "invalidated"


#: The three sessions of the scenario.
SESSION_PLAN: tuple[SessionStep, ...] = (
    SessionStep("gh_logged_out", "stored"),
    SessionStep("gh_logged_out", "cited"),
    SessionStep("gh_signed_in", "invalidated"),
)

#: A cited lesson must let the turn ask within this many steps after it starts.
CITED_WITHIN_STEPS = 2


@dataclass(frozen=True, slots=True)
class SessionResult:
    """What one session did, and whether it did what its step expects."""

    session: int
    scenario: str
    expect: str
    status: str
    outcome: str
    tool_calls: int
    steps: int
    lesson_events: tuple[str, ...]
    cited: bool
    passed: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def _judge(step: SessionStep, status: str, outcome: str, names: Sequence[str], steps: int, cited: bool) -> bool:
    if step.expect == "stored":
        return status == "blocked" and EventName.LESSON_STORED in names
    if step.expect == "cited":
        return status == "blocked" and cited and steps <= CITED_WITHIN_STEPS and EventName.LESSON_APPLIED in names
    return status == "done" and outcome == "done" and EventName.LESSON_INVALIDATED in names


def run_sessions(
    agent: str = "improviser", plan: Sequence[SessionStep] = SESSION_PLAN, *, timeout_s: float = 300.0,
) -> list[SessionResult]:
    """Run ``plan``'s sessions in order, each as its own ``unstuck run`` process with one
    shared, fresh lesson store; the results in order. A session that cannot run is
    recorded with its error (and fails); the next ones still run."""
    results: list[SessionResult] = []
    with temporary_tree("unstuck-sessions-") as folder:
        store = folder / "stores"  # journal.db and lessons.db, shared by the sessions
        # the sessions keep their turns and lessons in the scratch folder, never in the user's
        # own stores (UNSTUCK_STORE, or the user data folder, where a plain `unstuck run` keeps them)
        env = {name: value for name, value in os.environ.items() if name != STORE_VARIABLE}
        for number, step in enumerate(plan, 1):
            events, metrics = folder / f"events-{number}.jsonl", folder / f"metrics-{number}.json"
            argv = [sys.executable, "-m", "unstuck", "run", step.scenario, "--agent", agent, "--unattended",
                    "--store", str(store), "--events", str(events), "--json", str(metrics)]
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False, env=env)
                run = json.loads(metrics.read_text(encoding="utf-8"))["runs"][0]
            except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, IndexError) as exc:
                results.append(SessionResult(number, step.scenario, step.expect, "failed", "failed", 0, 0, (), False,
                                             False, f"{type(exc).__name__}: {exc}"))
                continue
            recorded = read_events(events)[0] if events.exists() else []
            names = tuple(e.name for e in recorded if e.name.startswith("lesson."))
            escalated = next((e for e in recorded if e.name == EventName.TURN_ESCALATED), None)
            cited = escalated is not None and escalated.get("lesson") is not None
            steps = sum(1 for e in recorded if e.name in (EventName.TOOL_CALLED, EventName.CALL_REFUSED))
            status, outcome = str(run["status"]), str(run["outcome"])
            error = done.stderr.strip()[-500:] or None if done.returncode not in (0, 3) else None
            results.append(SessionResult(
                number, step.scenario, step.expect, status, outcome, int(run["tool_calls"]), steps, names, cited,
                _judge(step, status, outcome, [*names], steps, cited), error,
            ))
    return results
