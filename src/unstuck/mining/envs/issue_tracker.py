"""An issue tracker served over HTTP on 127.0.0.1: the mining environment ``issue_tracker``.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Each session serves one repository's issues (``acme/storefront``) from a SQLite file in its
folder (``tracker.db``, opened per request, never held open) with a GitHub-REST-like API on
an ephemeral loopback port, from a thread its :meth:`IssueTrackerSession.close` stops. The
tools are Python functions that make real HTTP requests to it (httpx) and return the parsed
JSON on success, or the server's :class:`unstuck.core.tools.HttpResponse` (status, GitHub's error
body, headers) on failure.

What the server answers, and where each shape comes from:

* errors are GitHub's REST error bodies ``{"message": ..., "documentation_url": ...}``
  (GitHub REST API docs, "Troubleshooting the REST API"): 404 ``Not Found`` for an issue
  that does not exist, 401 ``Bad credentials`` for an expired or revoked token, 422
  ``Validation Failed`` with an ``errors`` list for a missing field (``missing_field``;
  "Creating an issue" needs a ``title``; a search needs ``q``);
* rate limits (GitHub REST API docs, "Rate limits for the REST API"): a spent primary limit
  is 429 ``API rate limit exceeded for user ID …`` with ``x-ratelimit-remaining: 0``; a
  secondary limit is 403 ``You have exceeded a secondary rate limit. Please wait a few
  minutes before you try again.``; both carry ``retry-after`` (seconds). A rate-limited
  request does nothing. Which requests are limited is fixed per task by the session's
  request counter (the first N), so it is deterministic and waiting and retrying works;
* pagination (GitHub REST API docs, "Using pagination in the REST API"; RFC 8288 for the
  ``Link`` header): ``list_issues`` answers one page (``per_page`` default 30, at most 100)
  of open issues, newest first, with ``Link`` relations ``first``, ``prev``, ``next``,
  ``last``; the tool reports them as page numbers;
* reads are anonymous (the repository is public: GitHub REST API docs, "Rate limits for the
  REST API": "You can make unauthenticated requests if you are only fetching public data");
  writes carry the session's token (``Authorization: Bearer``), which some tasks have
  expired: only the user can renew it.

Issue numbers are not guessable from titles: a careless agent that takes the first page's
look-alike, or a number it assumed, acts on another issue or on none (404).
"""

from __future__ import annotations

import enum
import http.server
import json
import shlex
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from unstuck.core.tools import Effect, HttpResponse, ToolCall
from unstuck.mining.environment import (
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

__all__ = [
    "DB_FILE",
    "REPOSITORY",
    "RETRY_AFTER_S",
    "SUBJECT",
    "TASKS",
    "Expected",
    "Fault",
    "IssueTracker",
    "IssueTrackerSession",
    "NewIssue",
    "RateLimit",
    "TokenState",
    "make_environment",
]

#: The session's state file.
DB_FILE = "tracker.db"
#: The one repository the tracker serves (``owner/name``).
REPOSITORY = "acme/storefront"
#: What the tools report as the subject of every call: one API, one token.
SUBJECT = "issue tracker API"
#: The login of the token's owner (the author of what the tools create).
LOGIN = "mara-dev"
#: The token the session's tools send on writes (a fixed, fake personal access token).
TOKEN = "ghp_storefrontMaraDev000000000000000001"
#: Seconds a rate-limited request is told to wait (``retry-after``).
RETRY_AFTER_S = 1
#: GitHub's page size default and maximum ("Using pagination in the REST API").
PER_PAGE_DEFAULT = 30
PER_PAGE_MAX = 100

_DOCS = "https://docs.github.com/rest"
_DOC_ISSUE = "https://docs.github.com/rest/issues/issues"
_DOC_COMMENTS = "https://docs.github.com/rest/issues/comments"
_DOC_LABELS = "https://docs.github.com/rest/issues/labels"
_DOC_SEARCH = "https://docs.github.com/rest/search/search#search-issues-and-pull-requests"
_DOC_RATE = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
_TIMEOUT_S = 10.0
#: How often the server thread checks for shutdown (seconds): close() waits at most this long.
_POLL_S = 0.05


class RateLimit(enum.StrEnum):
    """The rate limit a task's first requests meet (GitHub REST API docs, "Rate limits for the
    REST API"): none, a spent primary limit (429, ``x-ratelimit-remaining: 0``), or a
    secondary limit (403, "You have exceeded a secondary rate limit")."""

    NONE = "none"
    PRIMARY = "primary"
    SECONDARY = "secondary"


class TokenState(enum.StrEnum):
    """The state of the token the write tools send: ``expired`` (or revoked) answers every
    write 401 ``Bad credentials`` (GitHub REST API docs, "Troubleshooting the REST API")."""

    ACTIVE = "active"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Fault:
    """A task's natural faults: the token's state, and the rate limit its first ``limited``
    requests (counted per session, reads and writes alike) meet."""

    token: TokenState = TokenState.ACTIVE
    rate_limit: RateLimit = RateLimit.NONE
    limited: int = 0


@dataclass(frozen=True, slots=True)
class NewIssue:
    """An issue a task creates: title, body, labels."""

    title: str
    body: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Expected:
    """What a task changes, applied to the seeded state: issues closed, comments added
    ``(number, body)``, labels added ``(number, label)``, issues created (numbered after the
    last, in order)."""

    closed: tuple[int, ...] = ()
    comments: tuple[tuple[int, str], ...] = ()
    labels: tuple[tuple[int, str], ...] = ()
    created: tuple[NewIssue, ...] = ()


@dataclass(frozen=True, slots=True)
class _Seed:
    number: int
    title: str
    body: str
    state: str = "open"
    labels: tuple[str, ...] = ()
    comments: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# the seeded repository

#: Issues the tasks name, and their first-page look-alikes.
_NAMED: tuple[_Seed, ...] = (
    _Seed(3, "Login button misaligned on Safari", "The sign-in button sits 4px lower than the field on Safari 17.",
          labels=("bug", "ui")),
    _Seed(5, "Coupon code field accepts expired codes", "Code SPRING22 still applies a discount.",
          labels=("bug", "needs-triage")),
    _Seed(9, "Password reset email never arrives", "Users with Gmail addresses get no reset email.",
          labels=("bug",), comments=("Happens with Outlook addresses too.",)),
    _Seed(12, "Cart badge shows stale count", "After removing an item the badge still shows the old count.",
          state="closed", labels=("bug",)),
    _Seed(15, "Profile photo upload fails for PNG files", "JPEG works, PNG gives a blank avatar."),
    _Seed(17, "Newsletter preferences page is blank", "The preferences page renders an empty card."),
    _Seed(18, "Search results include archived products", "Archived products appear in search results."),
    _Seed(24, "Order confirmation page shows the wrong currency", "Orders paid in EUR are shown in USD.",
          labels=("bug",)),
    _Seed(27, "Dark mode toggle resets after reload", "The theme falls back to light after a reload."),
    _Seed(33, "Invoice PDF has the wrong tax rate", "Invoices for Germany use 16% instead of 19%.",
          labels=("bug", "billing")),
    _Seed(40, "Export to CSV drops non-ASCII characters", "Names like Zoë lose their diaeresis in the export."),
    _Seed(44, "Shipping estimate missing for Canada", "No estimate is shown for Canadian postcodes."),
    _Seed(55, "Coupon banner hides the checkout button", "On small screens the banner covers the button.",
          labels=("ui",)),
    _Seed(58, "Search results ignore the category filter", "Filtering by category has no effect."),
    _Seed(61, "Password reset link expires too fast", "The link expires after five minutes.",
          labels=("bug",)),
    _Seed(62, "Export to PDF cuts off long tables", "Tables longer than a page are truncated."),
    _Seed(63, "Invoice PDF missing the company logo", "The logo is absent from generated invoices.",
          labels=("billing",)),
    _Seed(66, "Cart badge overlaps the menu icon", "On narrow screens the badge covers the menu icon.",
          labels=("ui",)),
    _Seed(70, "Dark mode colours wrong in the settings menu", "Settings menu text is dark on dark."),
    _Seed(71, "Newsletter signup double-submits", "Clicking subscribe twice sends two confirmation emails."),
)

_COMPONENTS = ("Checkout", "Product page", "Wishlist", "Order history", "Admin dashboard",
               "Gift cards", "Reviews", "Store locator", "Mobile menu", "Footer")
_PROBLEMS = ("loads slowly on first visit", "shifts layout on tablets", "logs a console warning",
             "misses a German translation", "breaks with ad blockers enabled",
             "ignores the reduced-motion setting", "links to a retired help page")

#: How many issues the repository has (numbers 1 to this).
ISSUE_COUNT = 75


def _seed_issues() -> tuple[_Seed, ...]:
    """Every seeded issue: the named ones, and fillers (a component and a problem, unique)
    at the other numbers; every seventh filler is closed, every third is labelled ``ui``."""
    named = {seed.number: seed for seed in _NAMED}
    issues: list[_Seed] = []
    filler = 0
    for number in range(1, ISSUE_COUNT + 1):
        if number in named:
            issues.append(named[number])
            continue
        title = f"{_COMPONENTS[filler % len(_COMPONENTS)]} {_PROBLEMS[(filler // len(_COMPONENTS)) % len(_PROBLEMS)]}"
        issues.append(_Seed(number, title, f"Seen on the storefront: {title.lower()}.",
                            state="closed" if filler % 7 == 6 else "open",
                            labels=("ui",) if filler % 3 == 0 else ()))
        filler += 1
    return tuple(issues)


SEED_ISSUES = _seed_issues()


# ---------------------------------------------------------------------------------------------
# state (SQLite, opened per request)

_SCHEMA = """
CREATE TABLE issues (number INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL,
                     state TEXT NOT NULL, state_reason TEXT, author TEXT NOT NULL);
CREATE TABLE labels (number INTEGER NOT NULL, name TEXT NOT NULL, PRIMARY KEY (number, name));
CREATE TABLE comments (id INTEGER PRIMARY KEY, number INTEGER NOT NULL, body TEXT NOT NULL,
                       author TEXT NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_FIRST_COMMENT_ID = 1_000_001


def _build_db(path: Path, fault: Fault) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(_SCHEMA)
        comment_id = _FIRST_COMMENT_ID
        for seed in SEED_ISSUES:
            db.execute("INSERT INTO issues VALUES (?, ?, ?, ?, ?, ?)",
                       (seed.number, seed.title, seed.body, seed.state,
                        "completed" if seed.state == "closed" else None, "octo-reporter"))
            db.executemany("INSERT INTO labels VALUES (?, ?)", [(seed.number, name) for name in seed.labels])
            for body in seed.comments:
                db.execute("INSERT INTO comments VALUES (?, ?, ?, ?)", (comment_id, seed.number, body, "octo-reporter"))
                comment_id += 1
        db.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("token", TOKEN), ("token_state", fault.token.value), ("rate_limit", fault.rate_limit.value),
            ("limited", str(fault.limited)), ("requests", "0"),
        ])
    db.close()


def _issue_json(db: sqlite3.Connection, number: int) -> dict[str, Any] | None:
    row = db.execute("SELECT number, title, body, state, state_reason, author FROM issues WHERE number = ?",
                     (number,)).fetchone()
    if row is None:
        return None
    labels = [name for (name,) in db.execute("SELECT name FROM labels WHERE number = ? ORDER BY name", (number,))]
    (count,) = db.execute("SELECT COUNT(*) FROM comments WHERE number = ?", (number,)).fetchone()
    return {
        "number": row[0], "title": row[1], "body": row[2], "state": row[3], "state_reason": row[4],
        "user": {"login": row[5]}, "labels": [{"name": name} for name in labels], "comments": count,
        "html_url": f"https://github.com/{REPOSITORY}/issues/{row[0]}",
    }


def _comment_json(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": row[0], "issue_number": row[1], "body": row[2], "user": {"login": row[3]},
            "html_url": f"https://github.com/{REPOSITORY}/issues/{row[1]}#issuecomment-{row[0]}"}


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = ()


def _error(status: int, message: str, doc: str = _DOCS, **extra: Any) -> _Reply:
    return _Reply(status, {"message": message, "documentation_url": doc, **extra})


def _not_found(doc: str = _DOCS) -> _Reply:
    return _error(404, "Not Found", doc)


def _missing_field(resource: str, name: str, doc: str) -> _Reply:
    return _error(422, "Validation Failed", doc,
                  errors=[{"resource": resource, "code": "missing_field", "field": name}])


# ---------------------------------------------------------------------------------------------
# the API


def _rate_limited(meta: Mapping[str, str], used: int) -> _Reply | None:
    """The rate-limit reply for request number ``used`` (1-based), or ``None``."""
    kind = meta.get("rate_limit", RateLimit.NONE)
    if kind == RateLimit.NONE or used > int(meta.get("limited", "0")):
        return None
    retry = (("Retry-After", str(RETRY_AFTER_S)),)
    if kind == RateLimit.PRIMARY:
        headers = (*retry, ("X-RateLimit-Limit", "5000"), ("X-RateLimit-Remaining", "0"),
                   ("X-RateLimit-Used", "5000"), ("X-RateLimit-Resource", "core"),
                   # the one wall-clock value (UTC epoch seconds, as GitHub sends it): a header only,
                   # never in a result's content or the state; retry-after says when to retry
                   ("X-RateLimit-Reset", str(int(time.time()) + RETRY_AFTER_S)))
        return _Reply(429, {"message": "API rate limit exceeded for user ID 4242.",
                            "documentation_url": _DOC_RATE + "#about-primary-rate-limits"}, headers)
    return _Reply(403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes "
                                   "before you try again.",
                        "documentation_url": _DOC_RATE + "#about-secondary-rate-limits"}, retry)


def _page_links(base: str, path: str, query: Mapping[str, str], page: int, last: int) -> str:
    """An RFC 8288 ``Link`` value with GitHub's relations for ``page`` of ``last``."""
    def url(n: int) -> str:
        return f"{base}{path}?{urlencode({**query, 'page': str(n)})}"
    rels: list[tuple[str, int]] = []
    if page > 1:
        rels += [("prev", min(page - 1, last)), ("first", 1)]
    if page < last:
        rels += [("next", page + 1), ("last", last)]
    return ", ".join(f'<{url(n)}>; rel="{rel}"' for rel, n in rels)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _list_issues(db: sqlite3.Connection, base: str, path: str, query: Mapping[str, str]) -> _Reply:
    state = query.get("state", "open")
    states = ("open", "closed") if state == "all" else (state,)
    wanted = [name for name in query.get("labels", "").split(",") if name]
    per_page = max(1, min(_int(query.get("per_page"), PER_PAGE_DEFAULT), PER_PAGE_MAX))
    page = max(1, _int(query.get("page"), 1))
    marks = ",".join("?" * len(states))
    numbers = [n for (n,) in db.execute(f"SELECT number FROM issues WHERE state IN ({marks}) ORDER BY number DESC",
                                        states)]
    if wanted:
        numbers = [n for n in numbers
                   if set(wanted) <= {name for (name,) in db.execute("SELECT name FROM labels WHERE number = ?", (n,))}]
    last = max(1, -(-len(numbers) // per_page))
    items = [_issue_json(db, n) for n in numbers[(page - 1) * per_page: page * per_page]]
    kept = {k: v for k, v in query.items() if k != "page"}
    link = _page_links(base, path, kept, page, last)
    return _Reply(200, items, (("Link", link),) if link else ())


def _matches(issue: Mapping[str, Any], terms: list[str], qualifiers: list[tuple[str, str]]) -> bool:
    fields: tuple[str, ...] = ("title", "body")
    for key, value in qualifiers:
        if key == "in":
            fields = tuple(f for f in value.split(",") if f in ("title", "body")) or fields
    for key, value in qualifiers:
        if key in ("is", "state") and value in ("open", "closed") and issue["state"] != value:
            return False
        if key in ("is", "type") and value in ("pr", "pull-request"):
            return False
        if key == "label" and value not in {label["name"] for label in issue["labels"]}:
            return False
        if key == "repo" and value.lower() != REPOSITORY:
            return False
    text = " ".join(str(issue[f]) for f in fields).lower()
    return all(term.lower() in text for term in terms)


_QUALIFIERS = frozenset({"is", "state", "label", "in", "repo", "type"})


def _search(db: sqlite3.Connection, query: Mapping[str, str]) -> _Reply:
    """GitHub's issue search, in part ("Searching issues and pull requests": qualifiers
    ``is:``, ``state:``, ``label:``, ``in:title|body``, ``repo:``, ``type:``; quoted phrases;
    every other word must appear)."""
    q = query.get("q", "").strip()
    if not q:
        return _error(422, "Validation Failed", _DOC_SEARCH,
                      errors=[{"resource": "Search", "field": "q", "code": "missing"}])
    try:
        words = shlex.split(q)
    except ValueError:
        words = q.split()
    terms: list[str] = []
    qualifiers: list[tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition(":")
        if sep and key.lower() in _QUALIFIERS:
            qualifiers.append((key.lower(), value.strip('"').lower()))
        else:
            terms.append(word)
    found = []
    for (number,) in db.execute("SELECT number FROM issues ORDER BY number DESC"):
        issue = _issue_json(db, number)
        if issue is not None and _matches(issue, terms, qualifiers):
            found.append({**issue, "score": 1.0})
    per_page = max(1, min(_int(query.get("per_page"), PER_PAGE_DEFAULT), PER_PAGE_MAX))
    return _Reply(200, {"total_count": len(found), "incomplete_results": False, "items": found[:per_page]})


def _route(db: sqlite3.Connection, method: str, base: str, path: str, query: Mapping[str, str],
           payload: Mapping[str, Any], authorised: bool) -> _Reply:
    if method == "GET" and path == "/search/issues":
        return _search(db, query)
    prefix = f"/repos/{REPOSITORY}/issues"
    if not path.startswith(prefix):
        return _not_found()
    parts = path[len(prefix):].strip("/").split("/") if path != prefix else []
    if method != "GET" and not authorised:
        return _error(401, "Bad credentials")
    if not parts:
        if method == "GET":
            return _list_issues(db, base, path, query)
        if method == "POST":
            return _create_issue(db, payload)
        return _not_found()
    if not parts[0].isdigit():
        return _not_found()
    number = int(parts[0])
    issue = _issue_json(db, number)
    doc = f"{_DOC_ISSUE}#get-an-issue"
    if issue is None:
        return _not_found(doc)
    rest = parts[1:]
    if not rest and method == "GET":
        return _Reply(200, issue)
    if not rest and method == "PATCH":
        state = payload.get("state")
        if state in ("open", "closed"):
            reason = payload.get("state_reason") or ("completed" if state == "closed" else None)
            db.execute("UPDATE issues SET state = ?, state_reason = ? WHERE number = ?", (state, reason, number))
        return _Reply(200, _issue_json(db, number))
    if rest == ["comments"] and method == "GET":
        rows = db.execute("SELECT id, number, body, author FROM comments WHERE number = ? ORDER BY id", (number,))
        return _Reply(200, [_comment_json(row) for row in rows])
    if rest == ["comments"] and method == "POST":
        body = payload.get("body")
        if not isinstance(body, str) or not body:
            return _missing_field("IssueComment", "body", f"{_DOC_COMMENTS}#create-an-issue-comment")
        cursor = db.execute("INSERT INTO comments (number, body, author) VALUES (?, ?, ?)", (number, body, LOGIN))
        row = db.execute("SELECT id, number, body, author FROM comments WHERE id = ?", (cursor.lastrowid,)).fetchone()
        return _Reply(201, _comment_json(row))
    if rest == ["labels"] and method == "POST":
        names = payload.get("labels")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            return _missing_field("Label", "labels", f"{_DOC_LABELS}#add-labels-to-an-issue")
        db.executemany("INSERT OR IGNORE INTO labels VALUES (?, ?)", [(number, n) for n in names])
        rows = db.execute("SELECT name FROM labels WHERE number = ? ORDER BY name", (number,))
        return _Reply(200, [{"name": name} for (name,) in rows])
    return _not_found()


def _create_issue(db: sqlite3.Connection, payload: Mapping[str, Any]) -> _Reply:
    title = payload.get("title")
    if not isinstance(title, str) or not title.strip():
        return _missing_field("Issue", "title", f"{_DOC_ISSUE}#create-an-issue")
    body = payload.get("body")
    (number,) = db.execute("SELECT COALESCE(MAX(number), 0) + 1 FROM issues").fetchone()
    db.execute("INSERT INTO issues VALUES (?, ?, ?, 'open', NULL, ?)",
               (number, title, body if isinstance(body, str) else "", LOGIN))
    labels = payload.get("labels")
    if isinstance(labels, list):
        db.executemany("INSERT OR IGNORE INTO labels VALUES (?, ?)",
                       [(number, n) for n in labels if isinstance(n, str) and n])
    return _Reply(201, _issue_json(db, number))


def _serve(db_path: Path, method: str, base: str, target: str, headers: Mapping[str, str], raw: bytes) -> _Reply:
    """Answer one request from the state in ``db_path``, in one transaction."""
    split = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
    db = sqlite3.connect(db_path, timeout=10, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        used = int(meta["requests"]) + 1
        db.execute("UPDATE meta SET value = ? WHERE key = 'requests'", (str(used),))
        reply = _rate_limited(meta, used)
        if reply is None:
            scheme, _, token = headers.get("authorization", "").partition(" ")
            authorised = (scheme.lower() in ("bearer", "token") and token == meta["token"]
                          and meta["token_state"] == TokenState.ACTIVE)
            try:
                payload = json.loads(raw) if raw else {}
            except ValueError:
                payload = None
            if not isinstance(payload, Mapping):
                reply = _error(400, "Problems parsing JSON")
            else:
                reply = _route(db, method, base, split.path.rstrip("/") or "/", query, payload, authorised)
                resource = "search" if split.path.startswith("/search/") else "core"
                limit = 30 if resource == "search" else 5000
                reply = _Reply(reply.status, reply.body, (
                    *reply.headers, ("X-RateLimit-Limit", str(limit)),
                    ("X-RateLimit-Remaining", str(max(limit - used, 0))), ("X-RateLimit-Used", str(used)),
                    ("X-RateLimit-Resource", resource)))
        db.execute("COMMIT")
        return reply
    finally:
        db.close()


class _QuietServer(http.server.ThreadingHTTPServer):
    """The tracker's server: ``server_close`` joins its request threads (none is a daemon),
    and a client that hangs up is the client's business, never a traceback."""

    daemon_threads = False
    block_on_close = True

    def handle_error(self, request: object, client_address: object) -> None:
        return None


def _handler(db_path: Path) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "GitHub.com"
        sys_version = ""
        timeout = _TIMEOUT_S  # seconds a request may take to arrive: close() never waits longer

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            base = f"http://127.0.0.1:{cast(_QuietServer, self.server).server_port}"
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = _serve(db_path, self.command, base, self.path, headers, raw)
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def do_PATCH(self) -> None:
            self._answer()

    return Handler


# ---------------------------------------------------------------------------------------------
# the tools


def _page_number(url: str | None) -> int | None:
    if url is None:
        return None
    pages = parse_qs(urlsplit(url).query).get("page")
    return int(pages[-1]) if pages and pages[-1].isdigit() else None


def _tracker_tools(base: str) -> tuple[ToolSpec, ...]:
    """The HTTP tools of a session whose server answers at ``base`` (``http://127.0.0.1:PORT``)."""
    repo = f"{base}/repos/{REPOSITORY}"

    def request(method: str, url: str, *, params: Mapping[str, Any] | None = None,
                payload: Mapping[str, Any] | None = None, write: bool = False) -> httpx.Response:
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        if write:
            headers["Authorization"] = f"Bearer {TOKEN}"
        return httpx.request(method, url, params=params, json=payload, headers=headers,
                             timeout=_TIMEOUT_S, trust_env=False)

    def failure(response: httpx.Response) -> HttpResponse:
        return HttpResponse(response.status_code, response.text, tuple(response.headers.multi_items()))

    def answer(response: httpx.Response) -> Any:
        return response.json() if response.is_success else failure(response)

    @tool(effect=Effect.READ, subject=SUBJECT, document_output=True)
    def list_issues(state: str = "open", page: int = 1, per_page: int = PER_PAGE_DEFAULT, label: str = "") -> Any:
        """List the repository's issues, newest first, one page at a time.

        state: "open" (default), "closed" or "all"; page: 1-based page number; per_page: issues
        per page (default 30, at most 100); label: only issues with this label.
        Returns {"items": [issue, ...], "page": N, "next_page": N or null, "last_page": N}:
        an issue you look for may be on a later page (next_page).
        """
        params: dict[str, Any] = {"state": state, "page": page, "per_page": per_page}
        if label:
            params["labels"] = label
        response = request("GET", f"{repo}/issues", params=params)
        if not response.is_success:
            return failure(response)
        links = response.links
        return {"items": response.json(), "page": page,
                "next_page": _page_number(links.get("next", {}).get("url")),
                "last_page": _page_number(links.get("last", {}).get("url")) or page}

    @tool(effect=Effect.READ, subject=SUBJECT, document_output=True)
    def get_issue(number: int) -> Any:
        """Get one issue by its number: title, body, state ("open"/"closed"), labels, comment count."""
        return answer(request("GET", f"{repo}/issues/{number}"))

    @tool(effect=Effect.READ, subject=SUBJECT, document_output=True)
    def search_issues(query: str) -> Any:
        """Search issues, open and closed, GitHub-style: words must all appear; "quoted phrases";
        qualifiers is:open, is:closed, label:NAME, in:title, in:body.
        Returns {"total_count": N, "items": [issue, ...]}."""
        return answer(request("GET", f"{base}/search/issues", params={"q": query}))

    @tool(effect=Effect.READ, subject=SUBJECT, document_output=True)
    def list_comments(number: int) -> Any:
        """List the comments on issue ``number``, oldest first."""
        return answer(request("GET", f"{repo}/issues/{number}/comments"))

    @tool(effect=Effect.WRITE, subject=SUBJECT, document_output=True)
    def create_issue(title: str, body: str = "") -> Any:
        """Open a new issue with this title and body; returns the issue with its new number.
        Not idempotent: calling it twice opens two issues."""
        return answer(request("POST", f"{repo}/issues", payload={"title": title, "body": body}, write=True))

    @tool(effect=Effect.WRITE, subject=SUBJECT, document_output=True)
    def comment_on_issue(number: int, body: str) -> Any:
        """Add a comment to issue ``number``. Not idempotent: calling it twice posts two comments."""
        return answer(request("POST", f"{repo}/issues/{number}/comments", payload={"body": body}, write=True))

    @tool(effect=Effect.WRITE, subject=SUBJECT, document_output=True)
    def close_issue(number: int) -> Any:
        """Close issue ``number`` (as completed); returns the updated issue."""
        return answer(request("PATCH", f"{repo}/issues/{number}", payload={"state": "closed"}, write=True))

    @tool(effect=Effect.WRITE, subject=SUBJECT, document_output=True)
    def add_label(number: int, label: str) -> Any:
        """Add ``label`` to issue ``number``; returns the issue's labels."""
        return answer(request("POST", f"{repo}/issues/{number}/labels", payload={"labels": [label]}, write=True))

    return (list_issues, get_issue, search_issues, list_comments, create_issue, comment_on_issue,
            close_issue, add_label)


# ---------------------------------------------------------------------------------------------
# tasks

_NEXT = ISSUE_COUNT + 1  # the number the first created issue gets


def _call(task: str, n: int, name: str, **arguments: Any) -> ToolCall:
    return ToolCall.of(f"{task}-{n}", name, arguments)


def _find(task: str, title: str, n: int = 0) -> Lookup:
    """Look an issue up by its exact title through the search API."""
    search = _call(task, 90 + n, "search_issues", query=f'"{title}" in:title')
    return Lookup("number", search, (("title", title),), "number")


def _comment(task: str, n: int, number: int, body: str, guess: int, lookup: Lookup) -> Step:
    return Step(_call(task, n, "comment_on_issue", number=number, body=body), (("number", guess),), lookup,
                Effect.WRITE, _call(task, 50 + n, "list_comments", number=number), body)


def _close(task: str, n: int, number: int, guess: int, lookup: Lookup) -> Step:
    return Step(_call(task, n, "close_issue", number=number), (("number", guess),), lookup, Effect.WRITE,
                _call(task, 50 + n, "get_issue", number=number), '"state": "closed"')


def _label(task: str, n: int, number: int, label: str, guess: int, lookup: Lookup) -> Step:
    return Step(_call(task, n, "add_label", number=number, label=label), (("number", guess),), lookup,
                Effect.WRITE, _call(task, 50 + n, "get_issue", number=number), f'"name": "{label}"')


def _create(task: str, n: int, title: str, body: str) -> Step:
    return Step(_call(task, n, "create_issue", title=title, body=body), effect=Effect.WRITE,
                read_back=_call(task, 50 + n, "search_issues", query=f'"{title}" in:title'), read_back_holds=title)


def _read(task: str, n: int, name: str, number: int, guess: int, lookup: Lookup) -> Step:
    return Step(_call(task, n, name, number=number), (("number", guess),), lookup)


@dataclass(frozen=True, slots=True)
class _Spec:
    task: Task
    fault: Fault
    expected: Expected


def _specs() -> tuple[_Spec, ...]:
    body_01 = "Reproduced on staging with a Gmail address."
    body_06 = "Confirmed on Safari 17.2."
    body_08 = "Fixed by debouncing the subscribe button."
    body_09 = "Fixed in release 2.4.1."
    body_14 = "Refunds for this order are shown in USD too."
    t04 = NewIssue("Checkout button unresponsive on slow networks", "On 3G the pay button does nothing for 10 s.")
    t07 = NewIssue("Gift card balance not shown after purchase", "The balance shows 0 until a reload.")
    t13 = NewIssue("Add Apple Pay to checkout", "Customers ask for Apple Pay.", ("enhancement",))
    title_14 = "Order confirmation page shows the wrong currency"
    page_two = _call("it-14", 90, "list_issues", state="open", page=2, per_page=PER_PAGE_DEFAULT)
    per_page_lookup = Lookup("number", page_two, (("title", title_14),), "number")
    return (
        _Spec(Task("it-01", f"Comment \"{body_01}\" on the issue \"Password reset email never arrives\".",
                   (_comment("it-01", 1, 9, body_01, 61, _find("it-01", "Password reset email never arrives")),)),
              Fault(), Expected(comments=((9, body_01),))),
        _Spec(Task("it-02", "Close the issue \"Dark mode toggle resets after reload\"; it is fixed.",
                   (_close("it-02", 1, 27, 70, _find("it-02", "Dark mode toggle resets after reload")),)),
              Fault(), Expected(closed=(27,))),
        _Spec(Task("it-03", "Add the label \"regression\" to the issue \"Search results include archived products\".",
                   (_label("it-03", 1, 18, "regression", 118,
                           _find("it-03", "Search results include archived products")),)),
              Fault(), Expected(labels=((18, "regression"),))),
        _Spec(Task("it-04", f"Open an issue titled \"{t04.title}\" with the description \"{t04.body}\".",
                   (_create("it-04", 1, t04.title, t04.body),)),
              Fault(rate_limit=RateLimit.PRIMARY, limited=1), Expected(created=(t04,))),
        _Spec(Task("it-05", "Is the issue \"Cart badge shows stale count\" open or closed?",
                   (_read("it-05", 1, "get_issue", 12, 66, _find("it-05", "Cart badge shows stale count")),),
                   answer="closed"),
              Fault(), Expected()),
        _Spec(Task("it-06", f"Comment \"{body_06}\" on the issue \"Login button misaligned on Safari\".",
                   (_comment("it-06", 1, 3, body_06, 1, _find("it-06", "Login button misaligned on Safari")),),
                   blocker=True),
              Fault(token=TokenState.EXPIRED), Expected()),
        _Spec(Task("it-07", f"Open an issue titled \"{t07.title}\" with the description \"{t07.body}\".",
                   (_create("it-07", 1, t07.title, t07.body),), blocker=True),
              Fault(token=TokenState.EXPIRED), Expected()),
        _Spec(Task("it-08", f"Comment \"{body_08}\" on the issue \"Newsletter signup double-submits\".",
                   (_comment("it-08", 1, 71, body_08, 17, _find("it-08", "Newsletter signup double-submits")),)),
              Fault(rate_limit=RateLimit.SECONDARY, limited=2), Expected(comments=((71, body_08),))),
        _Spec(Task("it-09", f"Close the issue \"Invoice PDF has the wrong tax rate\" with the comment \"{body_09}\".",
                   (_comment("it-09", 1, 33, body_09, 63, _find("it-09", "Invoice PDF has the wrong tax rate")),
                    _close("it-09", 2, 33, 63, _find("it-09", "Invoice PDF has the wrong tax rate", 1)))),
              Fault(), Expected(closed=(33,), comments=((33, body_09),))),
        _Spec(Task("it-10", "Which triage label does the issue \"Coupon code field accepts expired codes\" carry?",
                   (_read("it-10", 1, "get_issue", 5, 55, _find("it-10", "Coupon code field accepts expired codes")),),
                   answer="needs-triage"),
              Fault(), Expected()),
        _Spec(Task("it-11", "Add the label \"good first issue\" to the issue "
                            "\"Export to CSV drops non-ASCII characters\".",
                   (_label("it-11", 1, 40, "good first issue", 62,
                           _find("it-11", "Export to CSV drops non-ASCII characters")),)),
              Fault(rate_limit=RateLimit.PRIMARY, limited=1), Expected(labels=((40, "good first issue"),))),
        _Spec(Task("it-12", "Close the issue \"Shipping estimate missing for Canada\"; it is fixed.",
                   (_close("it-12", 1, 44, 4, _find("it-12", "Shipping estimate missing for Canada")),), blocker=True),
              Fault(token=TokenState.EXPIRED), Expected()),
        _Spec(Task("it-13", f"Open an issue titled \"{t13.title}\" with the description \"{t13.body}\" "
                            "and give it the label \"enhancement\".",
                   (_create("it-13", 1, t13.title, t13.body),
                    _label("it-13", 2, _NEXT, "enhancement", ISSUE_COUNT, _find("it-13", t13.title)))),
              Fault(rate_limit=RateLimit.SECONDARY, limited=1), Expected(created=(t13,))),
        _Spec(Task("it-14", f"Comment \"{body_14}\" on the open issue \"{title_14}\".",
                   (_comment("it-14", 1, 24, body_14, 404, per_page_lookup),)),
              Fault(), Expected(comments=((24, body_14),))),
    )


_SPECS = _specs()
#: The environment's tasks.
TASKS: tuple[Task, ...] = tuple(spec.task for spec in _SPECS)
_BY_ID: Mapping[str, _Spec] = {spec.task.id: spec for spec in _SPECS}

#: Words a question about the blocked writes names (the token, or the credentials it holds).
_BLOCKER_WORDS = ("token", "credential")


# ---------------------------------------------------------------------------------------------
# verification


@dataclass(frozen=True, slots=True)
class _IssueRow:
    number: int
    title: str
    body: str
    state: str
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _State:
    issues: tuple[_IssueRow, ...]
    comments: tuple[tuple[int, str], ...]  # (issue number, body), in id order


def _read_state(path: Path) -> _State:
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        labels: dict[int, list[str]] = {}
        for number, name in db.execute("SELECT number, name FROM labels ORDER BY number, name"):
            labels.setdefault(number, []).append(name)
        issues = tuple(_IssueRow(n, t, b, s, tuple(labels.get(n, ())))
                       for n, t, b, s in db.execute("SELECT number, title, body, state FROM issues ORDER BY number"))
        comments = tuple((n, b) for n, b in db.execute("SELECT number, body FROM comments ORDER BY id"))
        return _State(issues, comments)
    finally:
        db.close()


def _seed_state() -> _State:
    issues = tuple(_IssueRow(s.number, s.title, s.body, s.state, tuple(sorted(s.labels))) for s in SEED_ISSUES)
    comments = tuple((s.number, body) for s in SEED_ISSUES for body in s.comments)
    return _State(issues, comments)


def _expected_state(expected: Expected) -> _State:
    issues = {row.number: row for row in _seed_state().issues}
    for offset, new in enumerate(expected.created):
        issues[_NEXT + offset] = _IssueRow(_NEXT + offset, new.title, new.body, "open", tuple(sorted(new.labels)))
    for number in expected.closed:
        row = issues[number]
        issues[number] = _IssueRow(row.number, row.title, row.body, "closed", row.labels)
    for number, label in expected.labels:
        row = issues[number]
        issues[number] = _IssueRow(row.number, row.title, row.body, row.state, tuple(sorted({*row.labels, label})))
    return _State(tuple(issues[n] for n in sorted(issues)), (*_seed_state().comments, *expected.comments))


def _difference(want: _State, got: _State) -> str | None:
    """The first difference between the expected and the final state, in words, or ``None``."""
    want_issues = {row.number: row for row in want.issues}
    got_issues = {row.number: row for row in got.issues}
    for number in sorted(want_issues.keys() | got_issues.keys()):
        a, b = want_issues.get(number), got_issues.get(number)
        if a == b:
            continue
        if a is None and b is not None:
            return f"issue #{number} {b.title!r} exists but should not (a duplicate or an unasked issue)"
        if b is None and a is not None:
            return f"issue #{number} {a.title!r} was not created"
        assert a is not None and b is not None
        for name in ("title", "body", "state", "labels"):
            if getattr(a, name) != getattr(b, name):
                return f"issue #{number} {name} is {getattr(b, name)!r}, expected {getattr(a, name)!r}"
    if sorted(want.comments) != sorted(got.comments):
        extra = [c for c in got.comments if got.comments.count(c) > want.comments.count(c)]
        missing = [c for c in want.comments if want.comments.count(c) > got.comments.count(c)]
        if extra:
            number, body = extra[0]
            return f"issue #{number} has an unexpected or duplicate comment {body!r}"
        number, body = missing[0]
        return f"issue #{number} lacks the comment {body!r}"
    return None


# ---------------------------------------------------------------------------------------------
# sessions and the environment


class IssueTrackerSession(FolderSession):
    """One rollout's tracker: ``tracker.db`` and ``questions.jsonl`` under ``root``, served on
    ``base_url`` (``http://127.0.0.1:PORT``) until :meth:`close`."""

    def __init__(self, root: Path, fault: Fault) -> None:
        self.db_path = root / DB_FILE
        _build_db(self.db_path, fault)
        self._server: _QuietServer | None = _QuietServer(("127.0.0.1", 0), _handler(self.db_path))
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(_POLL_S,),
                                        name=f"issue-tracker:{port}", daemon=True)
        self._thread.start()
        super().__init__(root, Toolset((*_tracker_tools(self.base_url), ask_tool(root))))

    def verify(self, task: Task, answer: str) -> Verification:
        """Check the final state exactly against the seeded state with the task's changes (no
        other issue touched, no duplicate comment or issue); a blocker task also needs a
        question naming the token, a question task an answer holding ``task.answer``.

        Raises:
            MiningError: for a task that is not this environment's.
        """
        spec = _BY_ID.get(task.id)
        if spec is None:
            raise MiningError(f"issue_tracker has no task {task.id!r}")
        difference = _difference(_expected_state(spec.expected), _read_state(self.db_path))
        if difference is not None:
            return Verification(False, difference)
        if task.blocker:
            questions = asked_questions(self.root)
            if not any(word in q.lower() for q in questions for word in _BLOCKER_WORDS):
                if not questions:
                    return Verification(False, "the token is expired and no question to the user named it")
                return Verification(False, f"the questions asked never name the token: {questions[-1]!r}")
            return Verification(True, "nothing changed and the user was asked about the token")
        if task.answer and task.answer.lower() not in answer.lower():
            return Verification(False, f"the answer does not say {task.answer!r}")
        return Verification(True, "the final state is exactly the expected one")

    def close(self) -> None:
        """Stop the server thread and free its port; idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            self._thread.join(timeout=10)


class IssueTracker:
    """The ``issue_tracker`` environment (see the module doc)."""

    name: str = "issue_tracker"
    version: int = 1
    description: str = (
        f"An issue tracker for the repository {REPOSITORY}, served over a GitHub-like REST API: "
        "issues have numbers (not guessable from titles), titles, bodies, states, labels and "
        "comments; lists are paginated; writes need the user's token; the API rate-limits."
    )
    objects: tuple[BusinessObject, ...] = (
        BusinessObject("issue", "number", "an issue of the repository, named by users by its title"),
        BusinessObject("comment", "id", "a comment on an issue"),
        BusinessObject("label", "label", "a label on an issue, by name"),
        BusinessObject("token", "token", "the user's access token the write tools send; only the user can renew it"),
    )
    tasks: tuple[Task, ...] = TASKS

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools of every session, ``ask_user`` last."""
        return (*(spec.name for spec in _tracker_tools("http://127.0.0.1:0")), "ask_user")

    def open(self, task: Task, root: Path) -> IssueTrackerSession:
        """A fresh tracker for ``task`` served from the empty folder ``root``.

        Raises:
            MiningError: for a task that is not this environment's, or a ``root`` that is not
                an empty folder.
        """
        spec = _BY_ID.get(task.id)
        if spec is None:
            raise MiningError(f"issue_tracker has no task {task.id!r}")
        if not root.is_dir() or any(root.iterdir()):
            raise MiningError(f"the session folder {root} must be an existing empty directory")
        return IssueTrackerSession(root, spec.fault)


def make_environment() -> IssueTracker:
    """The ``issue_tracker`` environment."""
    return IssueTracker()

