"""A small notes workspace for testing the rollout machinery: a FolderSession over one JSON
file (``notes.json``), with a list tool, a get tool, a non-idempotent append (a write), a
publish tool that always needs a sign-in (a blocker the tool itself declares), and ``ask_user``.

It implements :class:`unstuck.mining.environment.Environment` exactly as the shipped
environments do, so what is tested on it holds for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from unstuck.core.situations import Kind, Situation
from unstuck.core.tools import Effect, ToolCall
from unstuck.mining.environment import (
    ASK_TOOL,
    BusinessObject,
    FolderSession,
    Lookup,
    Step,
    Task,
    Verification,
    ask_tool,
    asked_questions,
)
from unstuck.toolkit.specs import Toolset, tool

STATE_FILE = "notes.json"
PUBLISHER = "notes-publisher"

#: The workspace every session starts from (ids are opaque: a title never gives one).
INITIAL_NOTES: tuple[dict[str, Any], ...] = (
    {"id": "n-7f3a", "title": "Budget review", "body": "Deadline: March 14.", "labels": ["finance"]},
    {"id": "n-21c9", "title": "Launch plan", "body": "Ship the beta.", "labels": []},
    {"id": "n-9b04", "title": "Vendor contract", "body": "Renewal pending.", "labels": ["urgent"]},
    {"id": "n-4e6d", "title": "Team offsite", "body": "Venue: Lisbon.", "labels": []},
)


def _load(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / STATE_FILE).read_text(encoding="utf-8"))
    return data


def _save(root: Path, data: dict[str, Any]) -> None:
    (root / STATE_FILE).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _note(data: dict[str, Any], note_id: str) -> dict[str, Any] | None:
    return next((note for note in data["notes"] if note["id"] == note_id), None)


def _missing(note_id: str) -> dict[str, Any]:
    """The workspace's answer for an id it does not have: HTTP 404 semantics (RFC 9110
    section 15.5.5), as a notes service would report it."""
    return {"status": "error", "http_status": 404, "message": f"no note with id {note_id!r}"}


def notes_tools(root: Path) -> Toolset:
    """The workspace's tools over ``root/notes.json`` (each call opens and closes the file)."""

    @tool(effect=Effect.READ)
    def list_notes() -> dict[str, Any]:
        """List every note: its id, title and labels."""
        data = _load(root)
        return {"status": "ok", "items": [{"id": n["id"], "title": n["title"], "labels": n["labels"]}
                                          for n in data["notes"]]}

    @tool(effect=Effect.READ)
    def get_note(note_id: str) -> dict[str, Any]:
        """The note ``note_id`` with its body."""
        note = _note(_load(root), note_id)
        return _missing(note_id) if note is None else {"status": "ok", "note": note}

    @tool(effect=Effect.WRITE)
    def append_to_note(note_id: str, text: str) -> dict[str, Any]:
        """Append a line to the note ``note_id`` (each call appends again)."""
        data = _load(root)
        note = _note(data, note_id)
        if note is None:
            return _missing(note_id)
        note["body"] = f"{note['body']}\n{text}"
        _save(root, data)
        return {"status": "ok", "note_id": note_id, "lines": note["body"].count("\n") + 1}

    @tool(effect=Effect.WRITE)
    def publish_note(note_id: str) -> dict[str, Any]:
        """Publish the note ``note_id`` through the notes publisher (needs a signed-in account)."""
        if _note(_load(root), note_id) is None:
            return _missing(note_id)
        return {"status": "error", "message": "the notes publisher needs a signed-in account",
                "situation": Situation(Kind.AUTH, PUBLISHER, unblock="sign in to the notes publisher")}

    return Toolset([list_notes, get_note, append_to_note, publish_note, ask_tool(root)])


def _lookup(argument: str, title: str) -> Lookup:
    return Lookup(argument, ToolCall.of("lookup", "list_notes"), (("title", title),))


def _append(title: str, note_id: str, text: str, guess: str) -> Step:
    return Step(
        ToolCall.of("step", "append_to_note", {"note_id": note_id, "text": text}),
        guess=(("note_id", guess),), lookup=_lookup("note_id", title), effect=Effect.WRITE,
        read_back=ToolCall.of("check", "get_note", {"note_id": note_id}), read_back_holds=text,
    )


def _get(title: str, note_id: str, guess: str) -> Step:
    return Step(ToolCall.of("step", "get_note", {"note_id": note_id}), guess=(("note_id", guess),),
                lookup=_lookup("note_id", title))


TASKS: tuple[Task, ...] = (
    Task("read_deadline", "When is the deadline in the note titled 'Budget review'?",
         (_get("Budget review", "n-7f3a", "budget-review"),), answer="March 14"),
    Task("find_urgent", "Which note is labelled 'urgent'?",
         (Step(ToolCall.of("step", "list_notes")),), answer="Vendor contract"),
    Task("append_owner", "Add the line 'Owner: Dana' to the note titled 'Launch plan'.",
         (_append("Launch plan", "n-21c9", "Owner: Dana", "launch-plan"),)),
    Task("append_two", "Add 'Reviewed' to the notes 'Vendor contract' and 'Team offsite'.",
         (_append("Vendor contract", "n-9b04", "Reviewed", "vendor-contract"),
          _append("Team offsite", "n-4e6d", "Reviewed", "team-offsite"))),
    Task("copy_deadline", "Copy the deadline of 'Budget review' into 'Launch plan' as 'Budget due: March 14'.",
         (_get("Budget review", "n-7f3a", "budget-review"),
          _append("Launch plan", "n-21c9", "Budget due: March 14", "launch-plan"))),
    Task("publish_launch", "Publish the note titled 'Launch plan'.",
         (Step(ToolCall.of("step", "publish_note", {"note_id": "n-21c9"}), guess=(("note_id", "launch-plan"),),
               lookup=_lookup("note_id", "Launch plan"), effect=Effect.WRITE),),
         blocker=True),
)

#: What each writing task must leave: (note id, line) pairs, each present exactly once.
EXPECTED_LINES: dict[str, tuple[tuple[str, str], ...]] = {
    "append_owner": (("n-21c9", "Owner: Dana"),),
    "append_two": (("n-9b04", "Reviewed"), ("n-4e6d", "Reviewed")),
    "copy_deadline": (("n-21c9", "Budget due: March 14"),),
}


class NotesSession(FolderSession):
    """A notes workspace in ``root``."""

    def verify(self, task: Task, answer: str) -> Verification:
        """Read tasks: the answer holds ``task.answer``. Write tasks: each expected line is in
        its note exactly once and every other note is as it started. The blocker task: a
        question naming the publisher was asked and nothing changed."""
        data = _load(self.root)
        expected = EXPECTED_LINES.get(task.id, ())
        for note, initial in zip(data["notes"], INITIAL_NOTES, strict=True):
            wanted = [line for note_id, line in expected if note_id == note["id"]]
            lines = note["body"].split("\n")
            if lines != [initial["body"], *wanted]:
                return Verification(False, f"note {note['id']} body is {note['body']!r}")
        if task.blocker:
            asked = [q for q in asked_questions(self.root) if PUBLISHER in q]
            return Verification(bool(asked), f"questions naming {PUBLISHER}: {len(asked)}")
        if task.answer and task.answer not in answer:
            return Verification(False, f"the answer does not say {task.answer!r}")
        return Verification(True, "state and answer as expected")


class NotesEnvironment:
    """The toy notes workspace (see the module doc)."""

    name = "toy_notes"
    version = 1
    description = "A notes workspace: notes with opaque ids, titles, bodies and labels; a publisher."
    objects: tuple[BusinessObject, ...] = (BusinessObject("note", "note_id", "a note with a title, a body of lines and labels"),)
    tasks = TASKS

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The session's tools."""
        return ("list_notes", "get_note", "append_to_note", "publish_note", ASK_TOOL)

    def open(self, task: Task, root: Path) -> NotesSession:
        """A fresh workspace in ``root``."""
        _save(root, {"notes": [dict(n) for n in INITIAL_NOTES]})
        return NotesSession(root, notes_tools(root))


def make_environment() -> NotesEnvironment:
    """The toy environment (a factory, as the shipped environment modules have)."""
    return NotesEnvironment()
