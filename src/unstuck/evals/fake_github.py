"""A local stand-in for the GitHub API, served on a unix socket for the real ``gh``.
Internal: not a supported import path (docs/reference/index.md lists those that are).

gh sends every API request to the socket named by its ``http_unix_socket`` setting (see
``gh help environment`` / ``gh config``), still addressed to ``api.github.com``. This server
answers the requests gh makes for the scenarios with GitHub's documented status codes,
headers and bodies:

* ``GET /``: 200 with ``X-OAuth-Scopes`` (how ``gh auth status`` reads token scopes);
* ``POST /graphql``: the ``UserCurrent`` (viewer login) and ``RepositoryInfo`` queries;
* ``GET /repos/{owner}/{repo}``: the REST repository object;
* ``GET /orgs/{org}/teams``: an empty list when the token has ``read:org``; without it, 404
  with ``X-Accepted-OAuth-Scopes`` naming the scopes the endpoint checks (GitHub REST API docs,
  "Scopes for OAuth apps": the two headers tell what a token has and what an action needs);
* a missing or wrong token: 401 ``{"message": "Bad credentials", "documentation_url":
  "https://docs.github.com/rest"}`` (GitHub REST API docs, "Troubleshooting");
* faults on the data endpoints (repositories, GraphQL queries other than the viewer's), for
  the scenarios: ``bad_gateway_once`` answers the first with 502 and GraphQL's "Something
  went wrong while executing your query" error; ``rate_limited`` answers every request
  (the root and the viewer's query included: they count against the limit too) with 403
  "API rate limit exceeded for user ID …" and the ``X-RateLimit-*`` headers of a spent
  primary limit, reset an hour ahead (GitHub REST API docs, "Rate limits for the REST API");
  with route faults (``route_faults``), a fault applies only to request paths matching its
  pattern (``/graphql`` fails while ``/repos/*`` works).

Nothing here listens on a network address.
"""

from __future__ import annotations

import fnmatch
import http.server
import json
import os
import socketserver
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FAULTS", "FakeGitHub", "Repository"]

#: The faults :class:`FakeGitHub` can play on its data endpoints.
FAULTS = ("bad_gateway_once", "rate_limited")

_DOCS = "https://docs.github.com/rest"


@dataclass(frozen=True, slots=True)
class Repository:
    """A repository the fake API knows."""

    owner: str
    name: str
    description: str

    def rest(self) -> dict[str, Any]:
        """The REST representation (a subset of GitHub's repository object)."""
        full = f"{self.owner}/{self.name}"
        return {
            "name": self.name, "full_name": full, "description": self.description,
            "owner": {"login": self.owner}, "html_url": f"https://github.com/{full}",
            "private": False, "default_branch": "trunk",
        }

    def graphql(self) -> dict[str, Any]:
        """The GraphQL representation gh's ``repo view`` reads."""
        return {
            "id": f"R_{self.owner}_{self.name}", "name": self.name, "description": self.description,
            "owner": {"id": f"U_{self.owner}", "login": self.owner},
            "url": f"https://github.com/{self.owner}/{self.name}", "nameWithOwner": f"{self.owner}/{self.name}",
            "isPrivate": False, "isArchived": False, "isFork": False, "stargazerCount": 0,
            "defaultBranchRef": {"name": "trunk"}, "viewerPermission": "READ", "hasIssuesEnabled": True,
        }


@dataclass
class _Config:
    token: str
    login: str
    scopes: tuple[str, ...]
    repositories: Mapping[str, Repository]
    fault: str | None = None
    faults_played: int = 0
    route_faults: tuple[tuple[str, str], ...] = ()  # (path pattern, fault), first match wins over ``fault``
    played: dict[str, int] = field(default_factory=dict)  # faults played per pattern ("" for ``fault``)
    requests: list[tuple[str, str]] = field(default_factory=list)


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "GitHub.com"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    config: _Config

    def address_string(self) -> str:  # a unix socket has no client address
        return "unix-socket"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return

    def _send(self, status: int, body: Mapping[str, Any] | list[Any], headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _authorised(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() in ("token", "bearer") and token == self.config.token:
            return True
        self._send(401, {"message": "Bad credentials", "documentation_url": _DOCS})
        return False

    def _fault_here(self) -> tuple[str | None, str]:
        """The fault for this request's path and the pattern that chose it: the first of the
        route faults whose pattern matches (:func:`fnmatch.fnmatchcase`), else the fault."""
        path = self.path.split("?", 1)[0]
        for pattern, fault in self.config.route_faults:
            if fnmatch.fnmatchcase(path, pattern):
                return fault, pattern
        return self.config.fault, ""

    def _fault(self, resource: str) -> bool:
        """Play the configured fault on a data request; True when it answered."""
        fault, key = self._fault_here()
        if fault == "bad_gateway_once" and self.config.played.get(key, 0) == 0:
            self.config.played[key] = 1
            self.config.faults_played += 1
            self._send(502, {"data": None, "errors": [{"message": (
                "Something went wrong while executing your query. This may be the result of a timeout, "
                "or it could be a GitHub bug. Please include `C0DE:1234:5678` when reporting this issue."
            )}]})
            return True
        if fault == "rate_limited":
            self.config.faults_played += 1
            reset = int(time.time()) + 3600
            self._send(403, {
                "message": "API rate limit exceeded for user ID 1.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            }, {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
                "X-RateLimit-Reset": str(reset), "X-RateLimit-Resource": resource})
            return True
        return False

    def _scopes(self) -> dict[str, str]:
        return {"X-OAuth-Scopes": ", ".join(self.config.scopes), "X-GitHub-Media-Type": "github.v3"}

    def do_GET(self) -> None:
        self.config.requests.append(("GET", self.path))
        if not self._authorised():
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._fault_here()[0] == "rate_limited" and self._fault("core"):
            return
        if path == "":
            self._send(200, {"current_user_url": "https://api.github.com/user"}, self._scopes())
        elif path == "/user":
            self._send(200, {"login": self.config.login}, self._scopes())
        elif path.startswith("/repos/") and path.count("/") == 3:
            if self._fault("core"):
                return
            repo = self.config.repositories.get(path.removeprefix("/repos/"))
            if repo is None:
                self._send(404, {"message": "Not Found", "documentation_url": _DOCS})
            else:
                self._send(200, repo.rest(), self._scopes())
        elif path.startswith("/orgs/") and path.endswith("/teams") and path.count("/") == 3:
            if "read:org" not in self.config.scopes:
                # a token without the scope an endpoint checks: GitHub names the scope it wanted
                # in X-Accepted-OAuth-Scopes, next to the token's own in X-OAuth-Scopes
                self._send(404, {"message": "Not Found", "documentation_url": _DOCS},
                           {**self._scopes(), "X-Accepted-OAuth-Scopes": "read:org"})
            else:
                self._send(200, [], self._scopes())
        else:
            self._send(404, {"message": "Not Found", "documentation_url": _DOCS})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.config.requests.append(("POST", self.path))
        if not self._authorised():
            return
        if self.path.rstrip("/") != "/graphql":
            self._send(404, {"message": "Not Found", "documentation_url": _DOCS})
            return
        try:
            query = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"message": "Problems parsing JSON", "documentation_url": _DOCS})
            return
        text = str(query.get("query", ""))
        variables = query.get("variables") or {}
        if self._fault_here()[0] == "rate_limited" and self._fault("graphql"):
            return
        if "viewer" in text:
            self._send(200, {"data": {"viewer": {"login": self.config.login}}}, self._scopes())
            return
        if "repository(" in text:
            if self._fault("graphql"):
                return
            key = f"{variables.get('owner')}/{variables.get('name')}"
            repo = self.config.repositories.get(key)
            if repo is None:
                self._send(200, {"data": {"repository": None}, "errors": [{
                    "type": "NOT_FOUND", "path": ["repository"],
                    "message": f"Could not resolve to a Repository with the name '{key}'.",
                }]})
            else:
                self._send(200, {"data": {"repository": repo.graphql()}}, self._scopes())
            return
        self._send(200, {"data": None, "errors": [{"message": "unsupported query in the fake API"}]})


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class FakeGitHub:
    """Serve the fake GitHub API on ``socket_path`` in a background thread.

    Args:
        socket_path: where to create the unix socket (must not exist).
        token: the one token the API accepts.
        login: the signed-in user's login.
        scopes: the token's OAuth scopes.
        repositories: repositories by ``owner/name``.
        fault: one of :data:`FAULTS`, played on the data endpoints, or ``None``.
        route_faults: ``(path pattern, fault)`` pairs (:func:`fnmatch.fnmatchcase` on the
            request path, e.g. ``/graphql``, ``/repos/*``); the first match beats ``fault``,
            and ``bad_gateway_once`` is played once per pattern.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        socket_path: Path,
        *,
        token: str = "gho_unstuck_valid_token",
        login: str = "octocat",
        scopes: tuple[str, ...] = ("repo", "read:org"),
        repositories: Mapping[str, Repository] | None = None,
        fault: str | None = None,
        route_faults: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.socket_path = Path(socket_path)
        self.token = token
        repos = repositories or {"cli/cli": Repository("cli", "cli", "GitHub's official command line tool")}
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        self._config = _Config(token, login, scopes, dict(repos), fault)
        self.set_route_faults(route_faults)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def set_route_faults(self, route_faults: tuple[tuple[str, str], ...]) -> None:
        """Play faults per route from now on (see ``route_faults`` above).

        Raises:
            ValueError: for a fault not in :data:`FAULTS`.
        """
        for pattern, fault in route_faults:
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r} for {pattern}; known: {', '.join(FAULTS)}")
        self._config.route_faults = tuple(route_faults)

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request served so far."""
        return list(self._config.requests)

    def start(self) -> FakeGitHub:
        """Bind the socket and start serving."""
        handler = type("Handler", (_Handler,), {"config": self._config})
        self._server = _Server(os.fspath(self.socket_path), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and remove the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
