"""The files-and-comments workspace: documents with comment threads (seed 003, "the
illustrated file-and-comment environment connects wrong identifiers and unchecked writes with
checking identifiers and verifying writes").
Internal: not a supported import path (docs/reference/index.md lists those that are).

State (all under the session's folder, so :class:`~unstuck.mining.environment.FolderSession`
snapshots it whole):

* ``docs/<doc_id>``: each document's text, a file; ``doc_id`` is its path under ``docs/``
  (``plans/roadmap-2026-q3.md``), never its title ("Q3 Roadmap").
* ``workspace.db`` (SQLite, opened per tool call): ``documents`` (title, version, the agent's
  role, owner), ``comments`` (non-sequential integer ids), ``pending_edits`` (a co-author's
  edit that lands just after the agent first reads a document).
* ``questions.jsonl``: what the agent asked the user (:func:`~unstuck.mining.environment.ask_tool`).

The faults the tasks are about:

* **Wrong identifiers.** Comment ids are not their positions: ``1``, ``2`` and ``3`` exist
  but belong to other documents' comments, so "the first comment" acted on blindly resolves
  or deletes someone else's comment. Document ids are paths: a title's slug is either missing
  (:class:`FileNotFoundError`, ``ENOENT``, as opening the file gives) or names *another* document (the
  archived ``roadmap.md``, the superseded ``release-notes.md``).
* **Unchecked writes.** ``add_comment`` is not idempotent (each call makes a comment); when an
  injected failure replaces its return the comment exists, and a blind retry duplicates it.
  ``write_document`` takes the version it was read at (``base_version``, If-Match semantics,
  RFC 9110 section 13.1.1): a stale version is refused with HTTP 412 (RFC 9110 section
  15.5.13), so a co-author's edit is never overwritten; the document must be read again.
* **Blockers.** The agent's role on a document follows Google Drive's roles (Google Drive API
  guide "Roles and permissions", https://developers.google.com/drive/api/guides/ref-roles:
  ``reader`` reads, ``commenter`` also adds comments, ``writer`` also modifies the content;
  the Drive UI calls them viewer, commenter, editor): a write beyond its role raises
  :class:`PermissionError` (``EACCES``) as the file system would; only the user can grant
  access.

Tasks are verified on the final state exactly: every document's text and every comment (id,
document, author, text, resolved) equal the seed with the task's changes, new comments
compared without their ids; a duplicate comment, a change to another object or a lost
co-author edit fails.
"""

from __future__ import annotations

import errno
import hashlib
import sqlite3
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import re2

from unstuck.core.tools import Effect, ToolCall
from unstuck.mining.environment import (
    ASK_TOOL,
    BusinessObject,
    FolderSession,
    Lookup,
    MiningError,
    Step,
    Task,
    Verification,
    ask_tool,
    asked_questions,
)
from unstuck.toolkit.specs import Toolset, ToolSpec, tool

__all__ = ["ENVIRONMENT_NAME", "FilesCommentsEnvironment", "FilesCommentsSession", "make_environment"]

ENVIRONMENT_NAME = "files_comments"
#: The account the agent acts as (its comments' author).
AGENT_USER = "assistant"
DOCS_DIR = "docs"
DB_FILE = "workspace.db"

#: Roles, weakest first (Google Drive API guide "Roles and permissions": reader, commenter,
#: writer; named as the Drive UI names them).
VIEWER, COMMENTER, EDITOR = "viewer", "commenter", "editor"
_RANK = {VIEWER: 0, COMMENTER: 1, EDITOR: 2}


@dataclass(frozen=True, slots=True)
class _Doc:
    doc_id: str
    title: str
    role: str
    owner: str
    text: str


@dataclass(frozen=True, slots=True)
class _Comment:
    comment_id: int
    doc_id: str
    author: str
    text: str
    resolved: bool = False


Q3 = "plans/roadmap-2026-q3.md"
Q2 = "plans/roadmap-2026-q2.md"
OLD_ROADMAP = "roadmap.md"
OLD_NOTES = "release-notes.md"
NOTES = "releases/2.0/notes.md"
EXPENSES = "policies/expenses.md"
ONBOARDING = "handbook/onboarding.md"
STANDUP = "meetings/2026-06-02-standup.md"
DESIGN = "design/search-service.md"

_DOCS: tuple[_Doc, ...] = (
    _Doc(OLD_ROADMAP, "Roadmap (2025, archived)", EDITOR, "dana",
         "# Roadmap (2025, archived)\n\nKept for reference.\n\n- Search launch: shipped November 2025\n"
         "- Budget total: 310 kEUR\n"),
    _Doc(Q2, "Q2 Roadmap", EDITOR, "dana", "# Q2 Roadmap\n\n- Billing export: May\n- Budget total: 120 kEUR\n"),
    _Doc(Q3, "Q3 Roadmap", EDITOR, "dana",
         "# Q3 Roadmap\n\n## 1. Launches\n\n- Search launch: July\n- Mobile beta: September\n\n"
         "## 2. Budget\n\n- Budget total: 180 kEUR\n"),
    _Doc(OLD_NOTES, "Release notes 1.0 (superseded)", EDITOR, "priya",
         "# Release notes 1.0 (superseded)\n\nSuperseded by the 2.0 release notes.\n\n- First public release.\n"),
    _Doc(NOTES, "Release notes", EDITOR, "priya",
         "# Release notes\n\nVersion 2.0\n\n- New search index.\n- Faster exports.\n"),
    _Doc(EXPENSES, "Expense policy", VIEWER, "finance",
         "# Expense policy\n\n- Meal limit: 45 EUR per day.\n- Hotel limit: 150 EUR per night.\n"),
    _Doc(ONBOARDING, "Onboarding guide", COMMENTER, "people-ops",
         "# Onboarding guide\n\n## VPN\n\nConnect to vpn.example.com with your SSO account.\n"),
    _Doc(STANDUP, "Standup notes 2 June", EDITOR, "mei",
         "# Standup notes 2 June\n\n- Demo: Thursday\n- Mobile beta blocked on signing keys\n"),
    _Doc(DESIGN, "Search service design", EDITOR, "mei",
         "# Search service design\n\nStatus: draft\n\n## Index\n\nOne index per tenant.\n"),
)

_COMMENTS: tuple[_Comment, ...] = (
    _Comment(1, OLD_ROADMAP, "Dana Okafor", "Budget total confirmed by finance."),
    _Comment(2, Q2, "Priya Raman", "Budget total looks right."),
    _Comment(3, Q2, "Tomás Ortega", "Can billing export slip to June?"),
    _Comment(4127, Q3, "Priya Raman", "The budget total in section 2 does not match the finance sheet."),
    _Comment(2210, Q3, "Tomás Ortega", "Can we move the search launch to August?"),
    _Comment(615, Q3, "Mei Chen", "Mobile beta date looks right to me.", resolved=True),
    _Comment(88, OLD_NOTES, "Priya Raman", "The changelog link is missing."),
    _Comment(3302, NOTES, "Priya Raman", "The changelog link is missing here too."),
    _Comment(47, NOTES, "Dana Okafor", "Please mention the export speed-up numbers."),
    _Comment(5120, ONBOARDING, "Mei Chen", "The VPN hostname changes in July."),
    _Comment(731, ONBOARDING, "Dana Okafor", "Add a section about laptops."),
    _Comment(903, ONBOARDING, "Tomás Ortega", "Fixed the SSO link.", resolved=True),
    _Comment(1999, STANDUP, AGENT_USER, "Demo moved to Thursday."),
    _Comment(266, STANDUP, "Mei Chen", "Signing keys arrive Monday."),
    _Comment(4410, STANDUP, "Mei Chen", "Who owns the demo script?"),
    _Comment(12, DESIGN, "Dana Okafor", "One index per tenant may be too many."),
    _Comment(30, EXPENSES, "Priya Raman", "Meal limit under review."),
)

_DOC_BY_ID = {d.doc_id: d for d in _DOCS}

#: The co-author's edit in the stale-version task: (document, author, line after which it
#: lands, the line it adds).
_COAUTHOR_EDIT = (DESIGN, "Mei Chen", "Status: draft\n", "Reviewers: Mei Chen\n")


@dataclass(frozen=True, slots=True)
class _Expect:
    """A task's changes to the seed state: final texts of changed documents, comments
    resolved, deleted, re-worded (id -> text), added by the agent ((doc_id, text), open), and
    whether the co-author's pending edit is seeded; for a blocker task, the blocked document."""

    texts: tuple[tuple[str, str], ...] = ()
    resolved: tuple[int, ...] = ()
    deleted: tuple[int, ...] = ()
    reworded: tuple[tuple[int, str], ...] = ()
    added: tuple[tuple[str, str], ...] = ()
    coauthor: bool = False
    blocked: str = ""


def _call(task_id: str, n: int, name: str, **arguments: Any) -> ToolCall:
    return ToolCall.of(f"{task_id}-{n}", name, arguments)


def _doc_lookup(task_id: str, title: str) -> Lookup:
    return Lookup("doc_id", _call(task_id, 0, "list_documents"), (("title", title),), "doc_id")


def _comment_lookup(task_id: str, doc_id: str, *match: tuple[str, Any]) -> Lookup:
    return Lookup("comment_id", _call(task_id, 0, "list_comments", doc_id=doc_id), tuple(match), "comment_id")


def _resolve_step(task_id: str, n: int, comment_id: int, guess: int, doc_id: str, *match: tuple[str, Any]) -> Step:
    return Step(_call(task_id, n, "resolve_comment", comment_id=comment_id), (("comment_id", guess),),
                _comment_lookup(task_id, doc_id, *match), Effect.WRITE,
                _call(task_id, n + 100, "get_comment", comment_id=comment_id), '"resolved": true')


def _add_step(task_id: str, n: int, doc_id: str, text: str, guess: str, title: str) -> Step:
    return Step(_call(task_id, n, "add_comment", doc_id=doc_id, text=text), (("doc_id", guess),),
                _doc_lookup(task_id, title), Effect.WRITE,
                _call(task_id, n + 100, "list_comments", doc_id=doc_id), text)


def _read_step(task_id: str, n: int, doc_id: str, guess: str, title: str) -> Step:
    return Step(_call(task_id, n, "read_document", doc_id=doc_id), (("doc_id", guess),), _doc_lookup(task_id, title))


def _write_step(task_id: str, n: int, doc_id: str, text: str, base_version: int, guess: tuple[tuple[str, Any], ...],
                lookup: Lookup, holds: str) -> Step:
    return Step(_call(task_id, n, "write_document", doc_id=doc_id, text=text, base_version=base_version), guess,
                lookup, Effect.WRITE, _call(task_id, n + 100, "read_document", doc_id=doc_id), holds)


def _text(doc_id: str) -> str:
    return _DOC_BY_ID[doc_id].text


def _tasks() -> tuple[tuple[Task, _Expect], ...]:
    q3_moved = _text(Q3).replace("Search launch: July", "Search launch: August")
    q2_owner = _text(Q2) + "- Owner: Dana Okafor\n"
    design_coauthored = _text(DESIGN).replace(_COAUTHOR_EDIT[2], _COAUTHOR_EDIT[2] + _COAUTHOR_EDIT[3])
    design_review = design_coauthored.replace("Status: draft", "Status: in review")
    return (
        (Task("fc-01", "On the Q3 Roadmap, resolve Priya's comment about the budget total.",
              (_resolve_step("fc-01", 1, 4127, 1, Q3, ("author", "Priya Raman"), ("resolved", False)),)),
         _Expect(resolved=(4127,))),
        (Task("fc-02", "Delete Tomás's comment about moving the search launch from the Q3 Roadmap.",
              (Step(_call("fc-02", 1, "delete_comment", comment_id=2210), (("comment_id", 2),),
                    _comment_lookup("fc-02", Q3, ("author", "Tomás Ortega")), Effect.WRITE,
                    _call("fc-02", 101, "list_comments", doc_id=Q3), '"count": 2'),)),
         _Expect(deleted=(2210,))),
        (Task("fc-03", "Comment on the Release notes: \"Please add the migration steps for the search index.\"",
              (_add_step("fc-03", 1, NOTES, "Please add the migration steps for the search index.", OLD_NOTES,
                         "Release notes"),)),
         _Expect(added=((NOTES, "Please add the migration steps for the search index."),))),
        (Task("fc-04", "Leave a comment on the Q3 Roadmap saying \"Finance signed off on the budget total.\"",
              (_add_step("fc-04", 1, Q3, "Finance signed off on the budget total.", OLD_ROADMAP, "Q3 Roadmap"),)),
         _Expect(added=((Q3, "Finance signed off on the budget total."),))),
        (Task("fc-05", "My comment on the Standup notes of 2 June says the demo moved to Thursday; change it to "
                       "\"Demo moved to Friday.\"",
              (Step(_call("fc-05", 1, "update_comment", comment_id=1999, text="Demo moved to Friday."),
                    (("comment_id", 1),), _comment_lookup("fc-05", STANDUP, ("author", AGENT_USER)), Effect.WRITE,
                    _call("fc-05", 101, "get_comment", comment_id=1999), "Demo moved to Friday."),)),
         _Expect(reworded=((1999, "Demo moved to Friday."),))),
        (Task("fc-06", "In the Search service design, change the line \"Status: draft\" to \"Status: in review\". "
                       "Keep everything else as it is.",
              (_read_step("fc-06", 1, DESIGN, "search-service.md", "Search service design"),
               _write_step("fc-06", 2, DESIGN, design_review, 2, (("base_version", 1),),
                           Lookup("base_version", _call("fc-06", 0, "list_documents"), (("doc_id", DESIGN),),
                                  "version"),
                           "Status: in review"))),
         _Expect(texts=((DESIGN, design_review),), coauthor=True)),
        (Task("fc-07", "Add the line \"- Owner: Dana Okafor\" at the end of the Q2 Roadmap.",
              (_read_step("fc-07", 1, Q2, "q2-roadmap.md", "Q2 Roadmap"),
               _write_step("fc-07", 2, Q2, q2_owner, 1, (("doc_id", OLD_ROADMAP),), _doc_lookup("fc-07", "Q2 Roadmap"),
                           "Owner: Dana Okafor"))),
         _Expect(texts=((Q2, q2_owner),))),
        (Task("fc-08", "How many open (unresolved) comments are there on the Onboarding guide?",
              (Step(_call("fc-08", 1, "list_comments", doc_id=ONBOARDING), (("doc_id", "onboarding.md"),),
                    _doc_lookup("fc-08", "Onboarding guide")),),
              answer="2"),
         _Expect()),
        (Task("fc-09", "Priya says the changelog link is missing from the Release notes; resolve her comment.",
              (_resolve_step("fc-09", 1, 3302, 88, NOTES, ("author", "Priya Raman")),)),
         _Expect(resolved=(3302,))),
        (Task("fc-10", "Comment on the Onboarding guide: \"The VPN section needs the new hostname.\"",
              (_add_step("fc-10", 1, ONBOARDING, "The VPN section needs the new hostname.", "onboarding-guide.md",
                         "Onboarding guide"),)),
         _Expect(added=((ONBOARDING, "The VPN section needs the new hostname."),))),
        (Task("fc-11", "Tomás asked to move the search launch to August: change it to August in the Q3 Roadmap, "
                       "then resolve his comment.",
              (_read_step("fc-11", 1, Q3, "q3-roadmap.md", "Q3 Roadmap"),
               _write_step("fc-11", 2, Q3, q3_moved, 1, (("doc_id", OLD_ROADMAP),), _doc_lookup("fc-11", "Q3 Roadmap"),
                           "Search launch: August"),
               _resolve_step("fc-11", 3, 2210, 2, Q3, ("author", "Tomás Ortega")))),
         _Expect(texts=((Q3, q3_moved),), resolved=(2210,))),
        (Task("fc-12", "Resolve both of Mei's open comments on the Standup notes of 2 June.",
              (_resolve_step("fc-12", 1, 266, 1, STANDUP, ("text", "Signing keys arrive Monday.")),
               _resolve_step("fc-12", 2, 4410, 2, STANDUP, ("text", "Who owns the demo script?")))),
         _Expect(resolved=(266, 4410))),
        (Task("fc-13", "Update the Expense policy: the meal limit is now 60 EUR per day instead of 45 EUR.",
              (_read_step("fc-13", 1, EXPENSES, "expense-policy.md", "Expense policy"),
               _write_step("fc-13", 2, EXPENSES, _text(EXPENSES).replace("45 EUR", "60 EUR"), 1,
                           (("doc_id", "expense-policy.md"),), _doc_lookup("fc-13", "Expense policy"), "60 EUR")),
              blocker=True),
         _Expect(blocked=EXPENSES)),
        (Task("fc-14", "In the Onboarding guide, replace the VPN hostname vpn.example.com with vpn2.example.com.",
              (_read_step("fc-14", 1, ONBOARDING, "onboarding.md", "Onboarding guide"),
               _write_step("fc-14", 2, ONBOARDING, _text(ONBOARDING).replace("vpn.example.com", "vpn2.example.com"), 1,
                           (("doc_id", "onboarding.md"),), _doc_lookup("fc-14", "Onboarding guide"),
                           "vpn2.example.com")),
              blocker=True),
         _Expect(blocked=ONBOARDING)),
        (Task("fc-15", "On the Q3 Roadmap, who asked to move the search launch?",
              (Step(_call("fc-15", 1, "list_comments", doc_id=Q3), (("doc_id", "q3-roadmap.md"),),
                    _doc_lookup("fc-15", "Q3 Roadmap")),),
              answer="Tomás Ortega"),
         _Expect()),
    )


def _oriented(task: Task) -> Task:
    """``task`` with a first step that lists the documents: every ``doc_id`` a later call or
    lookup uses has then been shown by a result, as a user's agent sees the workspace first
    (an identifier no result showed is what the analyzer calls unverified)."""
    return replace(task, steps=(Step(_call(task.id, 0, "list_documents")), *task.steps))


_TASKS = tuple((_oriented(task), expect) for task, expect in _tasks())
_EXPECT = {task.id: expect for task, expect in _TASKS}


# --- state -------------------------------------------------------------------------------


@contextmanager
def _db(root: Path) -> Iterator[sqlite3.Connection]:
    """The workspace database, opened for one call and committed when the call succeeds."""
    with closing(sqlite3.connect(root / DB_FILE)) as conn:
        conn.row_factory = sqlite3.Row
        with conn:
            yield conn


def _seed(root: Path, coauthor: bool) -> None:
    if any(root.iterdir()):
        raise MiningError(f"files_comments: the session folder {root} must be empty")
    for doc in _DOCS:
        path = root / DOCS_DIR / doc.doc_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc.text, encoding="utf-8")
    with _db(root) as conn:
        conn.executescript(
            "CREATE TABLE documents (doc_id TEXT PRIMARY KEY, title TEXT NOT NULL, version INTEGER NOT NULL,"
            " role TEXT NOT NULL, owner TEXT NOT NULL);"
            "CREATE TABLE comments (comment_id INTEGER PRIMARY KEY, doc_id TEXT NOT NULL, author TEXT NOT NULL,"
            " text TEXT NOT NULL, resolved INTEGER NOT NULL, seq INTEGER NOT NULL);"
            "CREATE TABLE pending_edits (doc_id TEXT PRIMARY KEY, author TEXT NOT NULL, after TEXT NOT NULL,"
            " line TEXT NOT NULL);")
        conn.executemany("INSERT INTO documents VALUES (?, ?, 1, ?, ?)",
                         [(d.doc_id, d.title, d.role, d.owner) for d in _DOCS])
        conn.executemany("INSERT INTO comments VALUES (?, ?, ?, ?, ?, ?)",
                         [(c.comment_id, c.doc_id, c.author, c.text, int(c.resolved), i)
                          for i, c in enumerate(_COMMENTS)])
        if coauthor:
            conn.execute("INSERT INTO pending_edits VALUES (?, ?, ?, ?)", _COAUTHOR_EDIT)


def _doc_path(root: Path, doc_id: str) -> Path:
    """The file of ``doc_id``; a path that leaves the workspace is a bad argument."""
    if not isinstance(doc_id, str) or not doc_id or doc_id.startswith("/") or ".." in Path(doc_id).parts:
        raise ValueError(f"doc_id must be a relative path inside the workspace, got {doc_id!r}")
    return root / DOCS_DIR / doc_id


def _meta(conn: sqlite3.Connection, root: Path, doc_id: str) -> sqlite3.Row:
    """The document's row; its file missing raises the file system's own error."""
    path = _doc_path(root, doc_id)
    row = conn.execute("SELECT * FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
    if row is None or not path.is_file():
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", f"{DOCS_DIR}/{doc_id}")
    found: sqlite3.Row = row
    return found


def _require(row: sqlite3.Row, needed: str, doing: str) -> None:
    """Refuse ``doing`` beyond the agent's role with the file system's ``EACCES``."""
    if _RANK[row["role"]] < _RANK[needed]:
        raise PermissionError(errno.EACCES, f"Permission denied ({AGENT_USER} is a {row['role']} of "
                              f"{row['title']!r}, owned by {row['owner']}; {doing} needs {needed})",
                              f"{DOCS_DIR}/{row['doc_id']}")


def _comment_row(conn: sqlite3.Connection, comment_id: int) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM comments WHERE comment_id = ?", (comment_id,)).fetchone()
    if row is None:
        raise KeyError(f"comment_id {comment_id} does not exist")
    found: sqlite3.Row = row
    return found


def _comment_json(row: sqlite3.Row, with_doc: bool = False) -> dict[str, Any]:
    found: dict[str, Any] = {"comment_id": row["comment_id"]}
    if with_doc:
        found["doc_id"] = row["doc_id"]
    found.update(author=row["author"], text=row["text"], resolved=bool(row["resolved"]))
    return found


def _new_comment_id(conn: sqlite3.Connection, doc_id: str, text: str) -> int:
    """A deterministic id that is not a position: from a hash of the document, the text and
    how many comments exist, moved on past ids taken."""
    count = conn.execute("SELECT COUNT(*) FROM comments").fetchone()[0]
    digest = hashlib.sha256(f"{doc_id}\n{text}\n{count}".encode()).hexdigest()
    candidate = 100 + int(digest[:8], 16) % 9000
    while conn.execute("SELECT 1 FROM comments WHERE comment_id = ?", (candidate,)).fetchone():
        candidate += 1
    return candidate


def _land_pending(conn: sqlite3.Connection, root: Path, doc_id: str) -> None:
    """Apply a co-author's pending edit to ``doc_id`` (once), bumping its version."""
    edit = conn.execute("SELECT * FROM pending_edits WHERE doc_id = ?", (doc_id,)).fetchone()
    if edit is None:
        return
    path = _doc_path(root, doc_id)
    text = path.read_text(encoding="utf-8")
    if edit["after"] in text:
        path.write_text(text.replace(edit["after"], edit["after"] + edit["line"], 1), encoding="utf-8")
        conn.execute("UPDATE documents SET version = version + 1 WHERE doc_id = ?", (doc_id,))
    conn.execute("DELETE FROM pending_edits WHERE doc_id = ?", (doc_id,))


def _doc_subject(arguments: Mapping[str, Any]) -> str | None:
    doc_id = arguments.get("doc_id")
    return f"document {doc_id}" if isinstance(doc_id, str) and doc_id else None


def _comment_subject(arguments: Mapping[str, Any]) -> str | None:
    comment_id = arguments.get("comment_id")
    return f"comment {comment_id}" if comment_id is not None else None


def _tools(root: Path) -> Toolset:
    @tool(document_output=True)
    def list_documents() -> dict[str, Any]:
        """List every document: items of {doc_id, title, version, role}. doc_id is the document's
        path in the workspace (not its title); role is what you may do: viewer (read),
        commenter (read, comment), editor (read, comment, write)."""
        with _db(root) as conn:
            rows = conn.execute("SELECT doc_id, title, version, role FROM documents ORDER BY doc_id").fetchall()
        return {"items": [dict(row) for row in rows]}

    @tool(document_output=True)
    def search_documents(query: str) -> dict[str, Any]:
        """Find documents whose title or text contains query (case-insensitive): items of
        {doc_id, title, line} (the first matching line)."""
        needle = query.casefold()
        items = []
        with _db(root) as conn:
            rows = conn.execute("SELECT doc_id, title FROM documents ORDER BY doc_id").fetchall()
        for row in rows:
            path = _doc_path(root, row["doc_id"])
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
            lines = [row["title"], *text.splitlines()]
            hit = next((line for line in lines if needle in line.casefold()), None)
            if hit is not None:
                items.append({"doc_id": row["doc_id"], "title": row["title"], "line": hit})
        return {"items": items}

    @tool(document_output=True, subject=_doc_subject)
    def read_document(doc_id: str) -> dict[str, Any]:
        """Read a document by its doc_id (its path, from list_documents): {doc_id, title, version,
        role, text}. Pass the version you read to write_document."""
        with _db(root) as conn:
            row = _meta(conn, root, doc_id)
            shown = {"doc_id": doc_id, "title": row["title"], "version": row["version"], "role": row["role"],
                     "text": _doc_path(root, doc_id).read_text(encoding="utf-8")}
            _land_pending(conn, root, doc_id)  # a co-author saves right after you read
        return shown

    @tool(effect=Effect.WRITE, subject=_doc_subject)
    def write_document(doc_id: str, text: str, base_version: int) -> dict[str, Any]:
        """Replace a document's whole text. base_version is the version you read it at; if the
        document changed since, the write is refused (HTTP 412) and you must read it again.
        Needs the editor role. Returns {status, doc_id, version} (the new version)."""
        with _db(root) as conn:
            row = _meta(conn, root, doc_id)
            _require(row, EDITOR, "editing")
            _land_pending(conn, root, doc_id)
            current = conn.execute("SELECT version FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()[0]
            if base_version != current:
                return {"status": "error", "http_status": 412, "error": "precondition_failed",
                        "message": f"{doc_id} is at version {current}, not {base_version}: it changed since you "
                                   "read it; read it again and reapply your change"}
            _doc_path(root, doc_id).write_text(text, encoding="utf-8")
            conn.execute("UPDATE documents SET version = ? WHERE doc_id = ?", (current + 1, doc_id))
        return {"status": "ok", "doc_id": doc_id, "version": current + 1}

    @tool(document_output=True, subject=_doc_subject)
    def list_comments(doc_id: str) -> dict[str, Any]:
        """The comments on a document, oldest first: {items: [{comment_id, author, text, resolved}],
        count}. comment_id is not a position: look it up here before acting on a comment."""
        with _db(root) as conn:
            _meta(conn, root, doc_id)
            rows = conn.execute("SELECT * FROM comments WHERE doc_id = ? ORDER BY seq", (doc_id,)).fetchall()
        return {"items": [_comment_json(row) for row in rows], "count": len(rows)}

    @tool(document_output=True, subject=_comment_subject)
    def get_comment(comment_id: int) -> dict[str, Any]:
        """One comment: {comment_id, doc_id, author, text, resolved}."""
        with _db(root) as conn:
            return _comment_json(_comment_row(conn, comment_id), with_doc=True)

    @tool(effect=Effect.WRITE, subject=_doc_subject)
    def add_comment(doc_id: str, text: str) -> dict[str, Any]:
        """Add a new comment to a document (needs the commenter or editor role). Each call adds
        one more comment. Returns {status, comment_id}."""
        with _db(root) as conn:
            _require(_meta(conn, root, doc_id), COMMENTER, "commenting")
            comment_id = _new_comment_id(conn, doc_id, text)
            seq = conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM comments").fetchone()[0]
            conn.execute("INSERT INTO comments VALUES (?, ?, ?, ?, 0, ?)", (comment_id, doc_id, AGENT_USER, text, seq))
        return {"status": "ok", "comment_id": comment_id}

    @tool(effect=Effect.WRITE, subject=_comment_subject)
    def update_comment(comment_id: int, text: str) -> dict[str, Any]:
        """Change the text of one of your own comments. Returns {status, comment_id}."""
        with _db(root) as conn:
            row = _comment_row(conn, comment_id)
            if row["author"] != AGENT_USER:
                raise PermissionError(errno.EACCES, f"Permission denied (comment {comment_id} is by "
                                      f"{row['author']}; you can only edit your own comments)")
            conn.execute("UPDATE comments SET text = ? WHERE comment_id = ?", (text, comment_id))
        return {"status": "ok", "comment_id": comment_id}

    @tool(effect=Effect.WRITE, subject=_comment_subject)
    def resolve_comment(comment_id: int) -> dict[str, Any]:
        """Mark a comment resolved (needs the commenter or editor role on its document)."""
        with _db(root) as conn:
            row = _comment_row(conn, comment_id)
            _require(_meta(conn, root, row["doc_id"]), COMMENTER, "resolving a comment")
            conn.execute("UPDATE comments SET resolved = 1 WHERE comment_id = ?", (comment_id,))
        return {"status": "ok", "comment_id": comment_id, "resolved": True}

    @tool(effect=Effect.WRITE, subject=_comment_subject)
    def delete_comment(comment_id: int) -> dict[str, Any]:
        """Delete a comment for good (your own, or any comment on a document you can edit)."""
        with _db(root) as conn:
            row = _comment_row(conn, comment_id)
            if row["author"] != AGENT_USER:
                _require(_meta(conn, root, row["doc_id"]), EDITOR, "deleting another person's comment")
            conn.execute("DELETE FROM comments WHERE comment_id = ?", (comment_id,))
        return {"status": "ok", "comment_id": comment_id, "deleted": True}

    specs: tuple[ToolSpec, ...] = (list_documents, search_documents, read_document, write_document, list_comments,
                                   get_comment, add_comment, update_comment, resolve_comment, delete_comment)
    return Toolset((*specs, ask_tool(root)))


# --- verification ----------------------------------------------------------------------------

_CommentKey = tuple[int | None, str, str, str, bool]


def _read_state(root: Path) -> tuple[dict[str, str], list[_CommentKey]]:
    """Every document's text, and every comment as (seeded id or ``None`` for a new one,
    document, author, text, resolved)."""
    seeded = {c.comment_id for c in _COMMENTS}
    texts = {}
    for doc in _DOCS:
        path = root / DOCS_DIR / doc.doc_id
        texts[doc.doc_id] = path.read_text(encoding="utf-8") if path.is_file() else "<missing>"
    with _db(root) as conn:
        rows = conn.execute("SELECT * FROM comments").fetchall()
    comments = [(row["comment_id"] if row["comment_id"] in seeded else None, row["doc_id"], row["author"],
                 row["text"], bool(row["resolved"])) for row in rows]
    return texts, comments


def _expected_state(expect: _Expect) -> tuple[dict[str, str], list[_CommentKey]]:
    texts = {doc.doc_id: doc.text for doc in _DOCS}
    texts.update(expect.texts)
    reworded = dict(expect.reworded)
    comments: list[_CommentKey] = [
        (c.comment_id, c.doc_id, c.author, reworded.get(c.comment_id, c.text),
         c.resolved or c.comment_id in expect.resolved)
        for c in _COMMENTS if c.comment_id not in expect.deleted]
    comments += [(None, doc_id, AGENT_USER, text, False) for doc_id, text in expect.added]
    return texts, comments


def _state_difference(root: Path, expect: _Expect) -> str | None:
    """Every way the final state differs from the expected one (``; ``-joined, documents
    first), or ``None``."""
    texts, comments = _read_state(root)
    want_texts, want_comments = _expected_state(expect)
    found = [f"document {doc_id} is not as expected (has {texts[doc_id]!r}, expected {want!r})"
             for doc_id, want in want_texts.items() if texts[doc_id] != want]
    have, want_count = Counter(comments), Counter(want_comments)
    found += [f"missing comment {key} (expected {want_count[key]}, found {have[key]})"
              for key in sorted(want_count - have, key=repr)]
    found += [f"unexpected comment {key} (found {have[key]}, expected {want_count[key]}"
              f"{'; a duplicate' if want_count[key] else ''})" for key in sorted(have - want_count, key=repr)]
    return "; ".join(found) or None


def _word_pattern(text: str) -> Any:
    return re2.compile(r"(?i)(^|\W)" + re2.escape(text) + r"($|\W)")


class FilesCommentsSession(FolderSession):
    """One rollout of the workspace: its documents and database under ``root``."""

    def verify(self, task: Task, answer: str) -> Verification:
        """The final state equals the seed with the task's changes (exactly: documents, and
        comments with duplicates counted); a question task's answer holds ``Task.answer`` as
        a whole word (case-insensitive); a blocker task has a question naming the blocked
        document (its title or doc_id).

        Raises:
            MiningError: for a task that is not this environment's.
        """
        expect = _EXPECT.get(task.id)
        if expect is None:
            raise MiningError(f"files_comments: unknown task {task.id!r}")
        difference = _state_difference(self.root, expect)
        if difference is not None:
            return Verification(False, difference)
        if task.blocker:
            blocked = _DOC_BY_ID[expect.blocked]
            names = [blocked.title, blocked.doc_id]
            asked = asked_questions(self.root)
            if not any(name.casefold() in question.casefold() for question in asked for name in names):
                return Verification(False, f"no question to the user names {' or '.join(map(repr, names))} "
                                           f"(asked: {asked!r})")
            return Verification(True, f"state unchanged and the user was asked about {names[0]!r}")
        if task.answer and not _word_pattern(task.answer).search(answer):
            return Verification(False, f"the answer does not say {task.answer!r}: {answer[:200]!r}")
        held = f"; answer holds {task.answer!r}" if task.answer else ""
        return Verification(True, "final state as expected" + held)


class FilesCommentsEnvironment:
    """The files-and-comments environment (see the module doc)."""

    name = ENVIRONMENT_NAME
    version = 1
    description = (
        "A shared workspace of documents with comment threads. Documents are files named by their "
        "path (doc_id), not their title; comments have ids that are not their positions; other people "
        "edit documents too, so a write names the version it was read at; your role on a document "
        "(viewer, commenter, editor) limits what you may do, and only the user can change it.")
    objects = (
        BusinessObject("document", "doc_id", "a file in the workspace, named by its path; has a title, a "
                       "version and your role on it"),
        BusinessObject("comment", "comment_id", "a comment on a document: author, text, resolved; its id is "
                       "not its position"),
        BusinessObject("user", "author", "a person who writes comments; you are 'assistant'"),
    )
    tasks = tuple(task for task, _ in _TASKS)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools every session has, ``ask_user`` included."""
        return ("list_documents", "search_documents", "read_document", "write_document", "list_comments",
                "get_comment", "add_comment", "update_comment", "resolve_comment", "delete_comment", ASK_TOOL)

    def open(self, task: Task, root: Path) -> FilesCommentsSession:
        """A fresh session for ``task`` in the empty folder ``root`` (created if absent).

        Raises:
            MiningError: for a task that is not this environment's, or a folder that is not empty.
        """
        expect = _EXPECT.get(task.id)
        if expect is None:
            raise MiningError(f"files_comments: unknown task {task.id!r}")
        root.mkdir(parents=True, exist_ok=True)
        _seed(root, expect.coauthor)
        return FilesCommentsSession(root, _tools(root))


def make_environment() -> FilesCommentsEnvironment:
    """The files-and-comments environment."""
    return FilesCommentsEnvironment()
