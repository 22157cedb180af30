"""Rollout traces built by hand for the labelling and contrast tests: a small notes workspace
(list, get, a comment write, ask_user), each step with a small real snapshot of the state
before it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from unstuck.core.tools import Effect, ToolCall
from unstuck.mining.environment import Snapshot, Task
from unstuck.mining.trace import Trace, TraceStep

ENVIRONMENT = "notes"
EFFECTS = {"list_notes": Effect.READ, "get_note": Effect.READ, "add_comment": Effect.WRITE,
           "publish": Effect.WRITE, "ask_user": Effect.WRITE}
BODY = "Approved by finance."
PROMPT = f'Add the comment "{BODY}" to the note titled "Budget review".'
LISTING = json.dumps({"items": [{"id": "n-7f3a", "title": "Budget review"}, {"id": "n-21c9", "title": "Launch plan"}]})
COMMENTED = json.dumps({"id": "n-7f3a", "title": "Budget review", "comments": [BODY]})
UNCOMMENTED = json.dumps({"id": "n-7f3a", "title": "Budget review", "comments": []})
ADDED = json.dumps({"status": "ok", "note_id": "n-7f3a", "comments": 1})


def task(task_id: str = "budget-comment", prompt: str = PROMPT) -> Task:
    """A task of the workspace (its steps are not what an analyzer reads)."""
    return Task(task_id, prompt, steps=())


def state(text: str) -> Snapshot:
    """A one-file state."""
    return Snapshot((("notes.json", text.encode()),))


@dataclass(frozen=True, slots=True)
class S:
    """One step to build: the call, what was shown, and how."""

    tool: str
    arguments: dict[str, Any]
    content: str
    ok: bool = True
    kind: str | None = None
    injected: str | None = None


def trace(steps: list[S], *, status: str = "done", answer: str = "Done: the comment is on the note.",
          task_id: str = "budget-comment", agent: str = "careful", seed: str = "0",
          environment: str = ENVIRONMENT, p_inj: float = 0.1) -> Trace:
    """A trace whose step ``i`` has index ``i`` and the state ``before i`` before it."""
    built = tuple(
        TraceStep(i, ToolCall.of(f"call_{i}", s.tool, s.arguments), s.content, s.ok, s.kind, s.injected,
                  state(f"before {i}"))
        for i, s in enumerate(steps))
    return Trace(environment, task_id, agent, seed, p_inj, built, answer, status, state("final"))


def careful(**kwargs: Any) -> Trace:
    """A clean careful success: look the note up, comment, read it back."""
    return trace([
        S("list_notes", {}, LISTING),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED),
        S("get_note", {"note_id": "n-7f3a"}, COMMENTED),
    ], **kwargs)


def noisy_recovered(**kwargs: Any) -> Trace:
    """A noisy success: the comment's return was replaced by an injected 503 (the write stood),
    the agent read it back, saw the comment, and answered."""
    return trace([
        S("list_notes", {}, LISTING),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, "503 Service Unavailable", ok=False,
          kind="unavailable", injected="github-api-502"),
        S("get_note", {"note_id": "n-7f3a"}, COMMENTED),
    ], **kwargs)


def guessed(**kwargs: Any) -> Trace:
    """A careless failure: comments on an id made up from the title."""
    return trace([
        S("add_comment", {"note_id": "budget-review", "body": BODY},
          json.dumps({"status": "error", "message": "no note with id 'budget-review'"}), ok=False, kind="not_found"),
    ], **kwargs)


def unchecked(**kwargs: Any) -> Trace:
    """A failure: the comment's return was a timeout and the agent wrote it again unseen."""
    return trace([
        S("list_notes", {}, LISTING),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, "timed out after 30 s", ok=False, kind="timeout",
          injected="python-timeout-error"),
        S("add_comment", {"note_id": "n-7f3a", "body": BODY}, ADDED),
    ], **kwargs)
