"""Harvest the failure bank: run real programs on this machine in failure states.
Internal: not a supported import path (docs/reference/index.md lists those that are).

``unstuck bank harvest`` runs each recipe below: it builds the failure state from real
parts (an empty gh config; the fake GitHub API on a unix socket with a bad token, a token
without a scope, a spent rate limit or one 502; a git repository with a held ``index.lock``;
a loopback port that is bound but never listens; a server that accepts and never answers; a
self-signed TLS server; a process holding an SQLite write lock; a file another user owns; a
network namespace with no network), runs the real program, and records what it printed,
exited with, answered or raised. The label (family, kind, transient, interactive) comes from
the state the recipe built, never from the classifier.

Recipes whose program is missing are skipped and reported. Machine-specific text is replaced
by stable placeholders so two harvests compare: the scratch directory becomes
``/home/user/project``, the fake API's socket directory ``/run/user/1000``, and the loopback
ports the run picked ``54321``.

:func:`forms_from_cases` adds the failures reported in public (``shared/cases``) with their
case id and report as provenance.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from unstuck.core.situations import Kind
from unstuck.core.trees import temporary_tree
from unstuck.evals.sandbox import Sandbox
from unstuck.faults.bank import Channel, FailureForm, Provenance, family_of

__all__ = ["RECIPES", "HarvestReport", "Observed", "Recipe", "Scratch", "forms_from_cases", "harvest"]

PORT_PLACEHOLDER = "54321"
WORK_PLACEHOLDER = "/home/user/project"
SOCKET_PLACEHOLDER = "/run/user/1000"


@dataclass(frozen=True, slots=True)
class Observed:
    """What one run of a real program left."""

    channel: Channel
    output: str
    reference: str
    exit_code: int | None = None
    http_status: int | None = None
    headers: tuple[tuple[str, str], ...] = ()
    exception_type: str | None = None


class Scratch:
    """The failure states recipes share within one harvest (built lazily, torn down at the end)."""

    def __init__(self, stack: ExitStack) -> None:
        self.stack = stack
        self.root = stack.enter_context(temporary_tree("unstuck-harvest-"))
        self.work = self.root / "project"
        self.work.mkdir()
        self.ports: list[int] = []
        self.socket_dirs: list[Path] = []

    @property
    def env(self) -> dict[str, str]:
        """A clean environment: no tokens, no proxies, no terminal prompts."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "GIT_TERMINAL_PROMPT": "0",
            "GH_NO_UPDATE_NOTIFIER": "1", "GH_CONFIG_DIR": str(self.root / "gh-empty"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "KUBECONFIG": str(self.root / "no-kubeconfig"),
        }

    def refused_port(self) -> int:
        """A loopback port that is bound but never listens: every connect is refused."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.stack.callback(sock.close)
        return self._port(sock)

    def silent_port(self) -> int:
        """A loopback port that accepts connections into its backlog and never answers."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        self.stack.callback(sock.close)
        return self._port(sock)

    def tls_port(self) -> int:
        """A loopback TLS server with a freshly made self-signed certificate (openssl)."""
        key, cert = self.root / "tls.key", self.root / "tls.crt"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=unstuck.test", "-days", "1",
             "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60,
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        self.stack.callback(sock.close)

        def serve() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                try:
                    with context.wrap_socket(conn, server_side=True):
                        pass
                except (OSError, ssl.SSLError):
                    conn.close()

        threading.Thread(target=serve, daemon=True, name="harvest-tls").start()
        return self._port(sock)

    def sandbox(self, **github: object) -> Sandbox:
        """A sandbox whose gh is signed in to the fake GitHub API started with ``github``
        options (a ``token`` option signs gh in with that token instead of the valid one)."""
        token = github.pop("token", None)
        box = self.stack.enter_context(Sandbox())
        box.serve_github(**github)
        box.sign_in_gh(token=str(token) if token is not None else None)
        if box.github is not None:
            self.socket_dirs.append(box.github.socket_path.parent)
        return box

    def _port(self, sock: socket.socket) -> int:
        port: int = sock.getsockname()[1]
        self.ports.append(port)
        return port

    def scrub(self, text: str, extra_roots: Iterable[Path] = ()) -> str:
        """Replace machine-specific paths and ports with the module's placeholders."""
        for root in (*extra_roots, self.work, self.root):
            text = text.replace(str(root), WORK_PLACEHOLDER)
        for directory in self.socket_dirs:
            text = text.replace(str(directory), SOCKET_PLACEHOLDER)
        for port in self.ports:
            text = re.sub(rf"(?<!\d){port}(?!\d)", PORT_PLACEHOLDER, text)
        return text


def _run(scratch: Scratch, argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
         display: str | None = None, timeout_s: float = 60.0) -> Observed:
    done = subprocess.run(
        list(argv), env=env or scratch.env, cwd=cwd or scratch.work, capture_output=True, text=True,
        errors="replace", stdin=subprocess.DEVNULL, timeout=timeout_s,
    )
    printed = "\n".join(part.rstrip("\n") for part in (done.stdout, done.stderr) if part.strip())
    return Observed(Channel.EXIT, printed, display or " ".join(argv), exit_code=done.returncode)


def _curl_http(scratch: Scratch, box: Sandbox, path: str, token: str) -> Observed:
    """One request through the fake API's unix socket with curl, status and headers kept."""
    assert box.github is not None
    done = subprocess.run(
        ["curl", "-sS", "-i", "--unix-socket", str(box.github.socket_path), "-H", f"Authorization: token {token}",
         f"http://api.github.com{path}"], capture_output=True, text=True, timeout=30, env=scratch.env,
    )
    head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
    lines = head.splitlines()
    status = int(lines[0].split()[1])
    wanted = ("content-type", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-used",
              "x-ratelimit-reset", "x-ratelimit-resource", "x-oauth-scopes", "x-accepted-oauth-scopes", "retry-after")
    headers = tuple(
        (name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in lines[1:])
        if name.strip().lower() in wanted
    )
    return Observed(Channel.HTTP, body, f"GET https://api.github.com{path}", http_status=status, headers=headers)


_PY_RAISE = (
    "import json, sys\n"
    "try:\n    exec(sys.argv[1])\n"
    "except Exception as exc:\n"
    "    print(json.dumps({'type': type(exc).__name__, 'message': str(exc)}))\n"
)


def _python_raise(scratch: Scratch, code: str, *, as_nobody: bool = False) -> Observed:
    """Run ``code`` in a real Python process and record the exception it raised."""
    argv = [sys.executable, "-c", _PY_RAISE, code]
    if as_nobody and os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    done = subprocess.run(argv, cwd=scratch.work, capture_output=True, text=True, timeout=30, env=scratch.env)
    raised = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    if not raised:
        raise RuntimeError(f"expected an exception from {code!r}; got {done.stderr.strip()[:200]!r}")
    return Observed(Channel.EXCEPTION, raised["message"], code, exception_type=raised["type"])


def _git_repo(scratch: Scratch) -> Path:
    repo = scratch.work / "repo"
    if not repo.exists():
        repo.mkdir()
        env = {**scratch.env, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.invalid",
               "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.invalid"}
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
        (repo / "README.md").write_text("hello\n", encoding="utf-8")
        subprocess.run(["git", "add", "README.md"], cwd=repo, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=repo, check=True, env=env)
    return repo


def _index_lock(scratch: Scratch) -> Observed:
    repo = _git_repo(scratch)
    (repo / ".git" / "index.lock").write_text("", encoding="utf-8")
    try:
        return _run(scratch, ["git", "add", "README.md"], cwd=repo)
    finally:
        (repo / ".git" / "index.lock").unlink()


def _sqlite_locked(scratch: Scratch) -> Observed:
    box = scratch.stack.enter_context(Sandbox())
    box.hold_lock("sqlite", "app.db")
    observed = _run(scratch, ["sqlite3", str(box.work / "app.db"), "CREATE TABLE IF NOT EXISTS t (x)"],
                    display="sqlite3 app.db 'CREATE TABLE IF NOT EXISTS t (x)'")
    return Observed(observed.channel, observed.output.replace(str(box.work), WORK_PLACEHOLDER), observed.reference,
                    exit_code=observed.exit_code)


def _permission_error(scratch: Scratch) -> Observed:
    secret = scratch.work / "secrets.env"
    secret.write_text("TOKEN=x\n", encoding="utf-8")
    secret.chmod(0o600)
    os.chmod(scratch.root, 0o755)
    os.chmod(scratch.work, 0o755)
    return _python_raise(scratch, f"open({str(secret)!r}).read()", as_nobody=True)


@dataclass(frozen=True, slots=True)
class Recipe:
    """One failure state and the real program run in it.

    Attributes:
        id: the form id it produces.
        kind, transient, interactive: the label, from the state built (see the module doc).
        tools: the tags the form fits (a program's name, ``shell``, ``http``, ``filesystem``,
            ``python``, ``database``).
        program: the program that must be on ``PATH`` (skipped when missing).
        run: builds the state and runs the program.
        needs_root: skipped unless running as root (``unshare --net``).
        slots: (scratch text, slot) pairs: names the harvest made up (a missing program, a
            file) become ``{program}``, ``{path}`` or ``{command}``, filled from the call a
            form later stands in for (:meth:`unstuck.faults.FailureForm.render`).
    """

    id: str
    kind: Kind
    tools: tuple[str, ...]
    program: str
    run: Callable[[Scratch], Observed]
    transient: bool = False
    interactive: bool = False
    needs_root: bool = False
    slots: tuple[tuple[str, str], ...] = ()


def _gh(*args: str) -> list[str]:
    return ["gh", *args]


RECIPES: tuple[Recipe, ...] = (
    # gh: a real CLI against the fake GitHub API on a unix socket
    Recipe("gh-logged-out", Kind.AUTH, ("gh",), "gh", lambda s: _run(s, _gh("repo", "view", "cli/cli")),
           interactive=True),
    Recipe("gh-bad-token", Kind.AUTH, ("gh",), "gh", lambda s: _run(
        s, _gh("repo", "view", "cli/cli"), env=s.sandbox(token="gho_revoked_token").env), interactive=True),
    Recipe("gh-missing-scope", Kind.PERMISSION, ("gh",), "gh", lambda s: _run(
        s, _gh("api", "/orgs/cli/teams"), env=s.sandbox(scopes=("repo",)).env), interactive=True),
    Recipe("gh-rate-limited", Kind.QUOTA, ("gh",), "gh", lambda s: _run(
        s, _gh("api", "/repos/cli/cli"), env=s.sandbox(fault="rate_limited").env), transient=True),
    Recipe("gh-bad-gateway", Kind.UNAVAILABLE, ("gh",), "gh", lambda s: _run(
        s, _gh("repo", "view", "cli/cli"), env=s.sandbox(fault="bad_gateway_once").env), transient=True),
    Recipe("gh-unknown-flag", Kind.INVALID_ARGS, ("gh",), "gh", lambda s: _run(
        s, _gh("repo", "view", "--no-such-flag"))),
    # the same API over HTTP, as an HTTP tool sees it
    Recipe("github-api-401", Kind.AUTH, ("http",), "curl", lambda s: _curl_http(
        s, s.sandbox(), "/repos/cli/cli", "gho_revoked_token")),
    Recipe("github-api-403-rate-limit", Kind.QUOTA, ("http",), "curl", lambda s: _curl_http(
        s, s.sandbox(fault="rate_limited"), "/repos/cli/cli", "gho_unstuck_valid_token"), transient=True),
    Recipe("github-api-502", Kind.UNAVAILABLE, ("http",), "curl", lambda s: _curl_http(
        s, s.sandbox(fault="bad_gateway_once"), "/repos/cli/cli", "gho_unstuck_valid_token"), transient=True),
    Recipe("github-api-404", Kind.NOT_FOUND, ("http",), "curl", lambda s: _curl_http(
        s, s.sandbox(), "/repos/cli/no-such-repository", "gho_unstuck_valid_token")),
    # git
    Recipe("git-missing-remote", Kind.NOT_FOUND, ("git",), "git", lambda s: _run(
        s, ["git", "push", "origin", "main"], cwd=_git_repo(s))),
    Recipe("git-http-auth", Kind.AUTH, ("git",), "git", lambda s: _run(
        s, ["git", "ls-remote", f"http://127.0.0.1:{_auth_server(s)}/org/repo.git"]), interactive=True),
    Recipe("git-index-lock", Kind.CONFLICT, ("git",), "git", _index_lock),
    Recipe("git-unknown-option", Kind.INVALID_ARGS, ("git",), "git", lambda s: _run(
        s, ["git", "log", "--no-such-option"], cwd=_git_repo(s))),
    # pip, docker, kubectl, psql, redis-cli
    Recipe("pip-no-matching-distribution", Kind.NOT_FOUND, ("pip", "python"), "pip", lambda s: _run(
        s, [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(s.work),
            "unstuck-no-such-package"], display="pip install unstuck-no-such-package")),
    Recipe("docker-no-daemon", Kind.UNAVAILABLE, ("docker",), "docker", lambda s: _run(
        s, ["docker", "-H", f"unix://{s.work}/docker.sock", "ps"], display="docker ps")),
    Recipe("kubectl-no-cluster", Kind.UNAVAILABLE, ("kubectl",), "kubectl", lambda s: _run(
        s, ["kubectl", f"--server=http://127.0.0.1:{s.refused_port()}", "get", "pods"], display="kubectl get pods")),
    Recipe("psql-no-server", Kind.UNAVAILABLE, ("psql", "database"), "psql", lambda s: _run(
        s, ["psql", "-h", "127.0.0.1", "-p", str(s.refused_port()), "-U", "app", "app"],
        display="psql -h 127.0.0.1 app")),
    Recipe("redis-no-server", Kind.UNAVAILABLE, ("redis-cli", "database"), "redis-cli", lambda s: _run(
        s, ["redis-cli", "-p", str(s.refused_port()), "ping"], display="redis-cli ping")),
    Recipe("sqlite-database-locked", Kind.CONFLICT, ("sqlite3", "database"), "sqlite3", _sqlite_locked, transient=True),
    # curl
    Recipe("curl-refused", Kind.UNAVAILABLE, ("curl",), "curl", lambda s: _run(
        s, ["curl", "-sS", f"http://127.0.0.1:{s.refused_port()}/"]), transient=True),
    Recipe("curl-timeout", Kind.TIMEOUT, ("curl",), "curl", lambda s: _run(
        s, ["curl", "-sS", "--max-time", "1", f"http://127.0.0.1:{s.silent_port()}/"]), transient=True),
    Recipe("curl-tls-self-signed", Kind.NETWORK, ("curl",), "curl", lambda s: _run(
        s, ["curl", "-sS", f"https://127.0.0.1:{s.tls_port()}/"])),
    Recipe("curl-dns", Kind.NETWORK, ("curl",), "curl", lambda s: _run(
        s, ["unshare", "--net", "curl", "-sS", "http://api.example.invalid/"],
        display="curl -sS http://api.example.invalid/"), transient=True, needs_root=True),
    # the shell itself
    Recipe("shell-command-not-found", Kind.NOT_INSTALLED, ("shell",), "bash", lambda s: _run(
        s, ["bash", "-c", "unstuck-no-such-program --version"], display="unstuck-no-such-program --version"),
        slots=(("unstuck-no-such-program", "{program}"),)),
    Recipe("shell-not-executable", Kind.PERMISSION, ("shell",), "bash", lambda s: _run(
        s, ["bash", "-c", f"{_plain_file(s)}"], display="./deploy.sh"), slots=(("./deploy.sh", "{program}"),)),
    Recipe("ls-no-such-file", Kind.NOT_FOUND, ("ls",), "ls", lambda s: _run(
        s, ["ls", "build/output"]), slots=(("build/output", "{path}"),)),
    Recipe("ls-unrecognized-option", Kind.INVALID_ARGS, ("ls",), "ls", lambda s: _run(
        s, ["ls", "--no-such-option"])),
    Recipe("shell-timeout", Kind.TIMEOUT, ("shell",), "timeout", lambda s: _run(
        s, ["timeout", "1", "sleep", "30"]), transient=True),
    Recipe("shell-killed", Kind.EXECUTION_ERROR, ("shell",), "bash", lambda s: _run(
        s, ["bash", "-c", 'sh -c "kill -KILL \\$\\$"; exit $?'], display="./train.sh"),
        slots=(('sh -c "kill -KILL \\$\\$"', "{command}"),)),
    # Python's own exceptions (filesystem and socket tools)
    Recipe("python-permission-error", Kind.PERMISSION, ("filesystem", "python"), "python3", _permission_error,
           slots=((f"{WORK_PLACEHOLDER}/secrets.env", "{path}"),)),
    Recipe("python-file-not-found", Kind.NOT_FOUND, ("filesystem", "python"), "python3", lambda s: _python_raise(
        s, "open('config.yaml').read()"), slots=(("config.yaml", "{path}"),)),
    Recipe("python-unicode-decode-error", Kind.EXECUTION_ERROR, ("filesystem", "python"), "python3",
           lambda s: _python_raise(s, _latin1_read(s))),
    Recipe("python-timeout-error", Kind.TIMEOUT, ("python",), "python3", lambda s: _python_raise(
        s, f"import socket; c = socket.create_connection(('127.0.0.1', {s.silent_port()}), timeout=0.5); c.recv(1)"),
        transient=True),
    Recipe("python-connection-refused", Kind.UNAVAILABLE, ("python",), "python3", lambda s: _python_raise(
        s, f"import socket; socket.create_connection(('127.0.0.1', {s.refused_port()}), timeout=5)"), transient=True),
)


def _plain_file(scratch: Scratch) -> str:
    script = scratch.work / "deploy.sh"
    script.write_text("#!/bin/sh\necho deployed\n", encoding="utf-8")
    script.chmod(0o644)
    return "./deploy.sh"


def _latin1_read(scratch: Scratch) -> str:
    (scratch.work / "notes.txt").write_bytes("Café résumé, naïve\n".encode("latin-1"))
    return "open('notes.txt', encoding='utf-8').read()"


def _auth_server(scratch: Scratch) -> int:
    """A loopback HTTP server that answers every request 401 with a Basic challenge, as a
    private git host does to an anonymous clone."""
    import http.server

    class Challenge(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Challenge)
    threading.Thread(target=server.serve_forever, daemon=True, name="harvest-401").start()
    scratch.stack.callback(server.server_close)
    scratch.stack.callback(server.shutdown)
    port: int = server.server_address[1]
    scratch.ports.append(port)
    return port


def _version(program: str) -> str | None:
    special = {"kubectl": ["kubectl", "version", "--client"], "pip": [sys.executable, "-m", "pip", "--version"],
               "python3": [sys.executable, "--version"]}
    argv = special.get(program, [program, "--version"])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else None


@dataclass
class HarvestReport:
    """What a harvest produced: the forms, and the recipes skipped or failed with why."""

    forms: list[FailureForm] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _available(recipe: Recipe) -> str | None:
    """Why ``recipe`` cannot run here, or ``None``."""
    if recipe.program != "python3" and shutil.which(recipe.program) is None:
        return f"{recipe.program} is not installed"
    if recipe.needs_root and os.geteuid() != 0:
        return "needs root (unshare --net)"
    return None


def harvest(recipes: Sequence[Recipe] = RECIPES, *, on_form: Callable[[str], None] | None = None) -> HarvestReport:
    """Run ``recipes`` and return the forms they produced.

    A recipe that cannot run here is skipped with the reason; one whose program did not fail
    as the state should make it (exit code 0, HTTP below 400) or that raised is reported as
    skipped with what happened, and produces no form. ``on_form`` is told each recipe's id
    when it is done (for a progress bar).
    """
    report = HarvestReport()
    versions: dict[str, str | None] = {}
    with ExitStack() as stack:
        scratch = Scratch(stack)
        for recipe in recipes:
            reason = _available(recipe)
            if reason is None:
                try:
                    observed = recipe.run(scratch)
                    reason = _not_a_failure(observed)
                except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
                    reason = f"{type(exc).__name__}: {exc}"
            if reason is not None:
                report.skipped.append((recipe.id, reason))
            else:
                if recipe.program not in versions:
                    versions[recipe.program] = _version(recipe.program)
                report.forms.append(_form(recipe, observed, scratch, versions[recipe.program]))
            if on_form is not None:
                on_form(recipe.id)
    return report


def _not_a_failure(observed: Observed) -> str | None:
    if observed.channel is Channel.EXIT and observed.exit_code == 0:
        return "the program exited 0 in the failure state"
    if observed.channel is Channel.HTTP and (observed.http_status or 0) < 400:
        return f"the API answered {observed.http_status}"
    return None


def _form(recipe: Recipe, observed: Observed, scratch: Scratch, version: str | None) -> FailureForm:
    family = family_of(recipe.kind)
    assert family is not None, recipe.id
    return FailureForm(
        id=recipe.id, family=family, kind=recipe.kind, tools=recipe.tools, channel=observed.channel,
        transient=recipe.transient, interactive=recipe.interactive,
        output=_slotted(recipe, scratch.scrub(observed.output)),
        provenance=Provenance("harvest", scratch.scrub(observed.reference), version),
        exit_code=observed.exit_code, http_status=observed.http_status,
        headers=tuple((name, scratch.scrub(value)) for name, value in observed.headers
                      if name.lower() != "x-ratelimit-reset") + _reset_placeholder(observed.headers),
        exception_type=observed.exception_type,
    )


def _slotted(recipe: Recipe, text: str) -> str:
    for literal, slot in recipe.slots:
        text = text.replace(literal, slot)
    return re.sub(r"line 1: \d+ Killed", "line 1: 4242 Killed", text)  # the pid differs every run


def _reset_placeholder(headers: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """X-RateLimit-Reset is an epoch second an hour after the harvest; it is kept as the
    fixed instant 2026-01-01T13:00:00Z so the bank does not change with every run."""
    return tuple(("X-RateLimit-Reset", "1767272400") for name, _ in headers if name.lower() == "x-ratelimit-reset")


def forms_from_cases(path: Path) -> Iterator[FailureForm]:
    """Forms from a labelled corpus in the ``shared/cases/tool_outputs.jsonl`` format.

    Each failure case (not ``ok``, and a kind with a family) becomes a form ``case-{id}``:
    channel ``mcp`` for an MCP tool, ``http`` for an HTTP API's own response (tool ``http``
    with a status), else ``exit``: a CLI or script that printed an HTTP error still reached
    the agent as its output (a report without an exit code gets 1, what most programs exit
    with on error). Tags are the case's tool; provenance is the case id and its report.

    Raises:
        ValueError: naming the file and line, for a line that is not JSON or lacks a field.
    """
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
                kind_name, tool_name, output = case["expected_kind"], str(case["tool"]), str(case["output"])
                case_id, report = case["id"], case.get("source") or ""
                status, code = case.get("http_status"), case.get("exit_code")
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a case line ({exc})") from None
            if kind_name == "ok":
                continue
            try:
                kind = Kind(kind_name)
            except ValueError:
                raise ValueError(f"{path}:{number}: unknown expected_kind {kind_name!r}") from None
            for name, value in (("exit_code", code), ("http_status", status)):
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                    raise ValueError(f"{path}:{number}: {name} must be an integer or null, got {value!r}")
            family = family_of(kind)
            if family is None:  # empty, truncated, injected_instruction: not failures of a call
                continue
            # an HTTP body only when the case is an API's own response; a CLI or a script that
            # printed an HTTP error still reached the agent as its exit and output
            api_response = bool(status) and tool_name == "http"
            channel = Channel.MCP if tool_name == "mcp" else Channel.HTTP if api_response else Channel.EXIT
            tags = (tool_name,)
            yield FailureForm(
                id=f"case-{case_id}", family=family, kind=kind, tools=tags, channel=channel,
                transient=bool(case.get("retryable")), interactive=bool(case.get("interactive")), output=output,
                provenance=Provenance("report", f"{case_id}: {report}"),
                exit_code=(code if isinstance(code, int) else 1) if channel is Channel.EXIT else None,
                http_status=status if channel is Channel.HTTP else None,
            )
