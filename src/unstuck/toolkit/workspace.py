"""Real tools for agents and scenarios: run a command, check a CLI's setup, sign a CLI in,
install a CLI, ask the user, read a file, search files, search the web.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Every tool works inside a :class:`Workspace` (a directory and the environment its
subprocesses see), so the same tools run on a developer's machine and in an eval sandbox.

``check_cli_setup`` declares its situations (seed 000 section 5, slice 1 step 2): a missing
program is ``not_installed``, a signed-out CLI is ``auth`` with the exact sign-in command as
``unblock``, missing token scopes are ``permission``; each carries itself as the probe. The
per-CLI facts (how to read the version, the sign-in state, the scopes) are rows of
:data:`KNOWN_CLIS`, taken from each program's documented behaviour.

``check_cli_setup``, ``sign_in_cli`` and ``install_cli`` answer alike (seed 000 section 5,
slice 1 step 2): ``status: error`` with a declared situation for a missing program
(``not_installed``; when an executable of that name is on disk outside ``PATH``
(:func:`unstuck.commands.installed.locate_off_path`), "installed at X but not on PATH" with
``export PATH="DIR:$PATH"`` as the unblock and X as the situation's ``location``), a signed-out
CLI (``auth``) and missing scopes (``permission``).

``install_cli`` installs only in an attended turn after the user confirms
(:attr:`Workspace.confirm`); unattended, or declined, it declares ``not_installed`` with the
exact install command as the unblock, interactive when installing needs a person (the command
raises privileges with sudo, doas, pkexec, su or run0, or the CLI's installer asks for a
licence).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unstuck.commands.installed import locate_off_path
from unstuck.commands.parse import command_operators, command_programs, command_subject, parse_command_line
from unstuck.core.situations import Kind, Probe, Situation
from unstuck.core.text import clean_terminal_text
from unstuck.core.tools import CommandOutput, Effect, HttpResponse, ToolResult, normalize_result, truncate_content
from unstuck.processes.ending import DEFAULT_GRACE_S
from unstuck.processes.filelocks import lock_holders
from unstuck.processes.leases import OUTPUT_GRACE_S, run_leased
from unstuck.recognise.classify import classify_result
from unstuck.recognise.declare import declare_http, declare_lock, declare_refusal
from unstuck.toolkit.specs import Toolset, ToolSpec, tool

__all__ = [
    "KNOWN_CLIS",
    "OUTPUT_GRACE_S",
    "STANDARD_TOOL_NAMES",
    "TIMEOUT_EXIT_CODE",
    "CliFacts",
    "Workspace",
    "check_cli",
    "cli_fingerprint",
    "command_subject",
    "install",
    "needs_a_person",
    "path_words",
    "sign_in",
    "standard_tools",
]

#: The names of the tools :func:`standard_tools` provides.
STANDARD_TOOL_NAMES = (
    "run_command", "check_cli_setup", "sign_in_cli", "install_cli", "read_file", "search_files", "web_search",
    "fetch_url", "check_file_lock", "request_user_input",
)

#: The exit code of a command killed at its deadline (what coreutils ``timeout`` exits with).
TIMEOUT_EXIT_CODE = 124

@dataclass(frozen=True, slots=True)
class CliFacts:
    """How to check one CLI's setup (from the CLI's own documentation).

    Attributes:
        name: the program name.
        display: what to call it in messages.
        version_args: arguments that print the version.
        auth_status_args: arguments whose exit status is 0 only when signed in.
        sign_in: the exact command the user runs to sign in (interactive).
        sign_in_flow: the command ``sign_in_cli`` runs to start the sign-in (a browser or
            device flow a person approves); ``sign_in`` when not given.
        install: the exact command that installs it (a shell command line).
        install_source: the document ``install`` comes from.
        install_prompts: the installer itself asks a person something (a licence to accept)
            however it is run, so installing needs a person even without sudo.
        required_scopes: token scopes the CLI needs (read from ``scopes_pattern``).
        scopes_pattern: a regex whose group 1 lists the token's scopes in the status output.
            A status output with no such list claims nothing about scopes: a token type that
            has none (gh lists no scopes for a fine-grained ``github_pat_`` token or an app's
            token: cli/cli pkg/cmd/auth/status/status.go prints "Token scopes" only when the API
            sent ``X-OAuth-Scopes`` or the token is a classic ``ghp_``/``gho_`` one
            (``expectScopes``), and pkg/cmd/auth/shared/oauth_scopes.go
            ``HeaderHasMinimumScopes`` gives up on a token that reports no scopes).
        missing_scope_pattern: a regex whose group 1 names a scope the status output says is
            missing (gh exits 1 then, rather than 0).
        reachability_args: a cheap read of the service, run when the sign-in check fails:
            gh 2.23's ``auth status`` reports "authentication failed" when it could not
            connect at all (or was rate limited), so the failure is declared as what this
            read says (network, unavailable, timeout, a rate limit) rather than as a sign-in
            problem.
        scope_fix: the command that adds missing scopes; ``{scopes}`` is filled in.
        host_variables: environment variables that name the host of the service the CLI
            talks to, first set wins; ``default_host`` when none is set. Part of the CLI's
            fingerprint, so a lesson about one service host (a GitHub Enterprise server) is
            not taken for another (github.com).
        default_host: the service host when no ``host_variables`` is set.
    """

    name: str
    display: str
    version_args: tuple[str, ...] = ("--version",)
    auth_status_args: tuple[str, ...] | None = None
    sign_in: str | None = None
    install: str | None = None
    required_scopes: tuple[str, ...] = ()
    scopes_pattern: str | None = None
    missing_scope_pattern: str | None = None
    scope_fix: str | None = None
    reachability_args: tuple[str, ...] | None = None
    sign_in_flow: str | None = None
    install_source: str | None = None
    install_prompts: bool = False
    host_variables: tuple[str, ...] = ()
    default_host: str | None = None


#: Known CLIs. gh: ``gh auth status`` exits non-zero when not signed in and prints
#: "Token scopes: ..." when signed in; ``gh auth login`` is the browser/device sign-in; the
#: minimum scopes are "repo", "read:org" (``gh auth login --help``); ``--web`` opens the
#: browser flow rather than asking questions at the terminal. Installing: the ``gh`` package
#: of Debian (bookworm on) and Ubuntu (22.04 on), and of GitHub's own apt repository, whose
#: instructions end ``sudo apt install gh -y``.
KNOWN_CLIS: Mapping[str, CliFacts] = {
    "gh": CliFacts(
        name="gh",
        display="the GitHub CLI (gh)",
        auth_status_args=("auth", "status"),
        sign_in="gh auth login",
        sign_in_flow="gh auth login --web",
        install="sudo apt-get install -y gh",
        install_source="cli/cli docs/install_linux.md (Debian, Ubuntu: apt); packages.debian.org/gh; "
                       "apt-get(8) -y",
        required_scopes=("repo", "read:org"),
        scopes_pattern=r"Token scopes:\s*(.*)",
        missing_scope_pattern=r"missing required scopes? '([^']+)'",
        scope_fix="gh auth refresh -h github.com -s {scopes}",
        reachability_args=("api", "--silent", "/"),
        # gh help environment: "GH_HOST: specify the GitHub hostname for commands where a hostname
        # has not been provided"; github.com otherwise
        host_variables=("GH_HOST",),
        default_host="github.com",
    ),
}


@dataclass(frozen=True)
class Workspace:
    """Where tools run: a working directory and the environment their subprocesses get.

    Attributes:
        root: the working directory; relative paths are resolved against it.
        env: the full environment of subprocesses (``PATH`` decides what is installed).
        output_limit_bytes: results longer than this are truncated with the marker.
        argv_prefix: words put before every subprocess's command line, e.g. ``setpriv
            --reuid=65534 ...`` to run tools as an unprivileged user.
        denied_programs: programs ``run_command`` refuses to run (its permission rule); a
            refused command never runs and declares ``permission`` on its program.
        denied_operators: shell operators ``run_command`` refuses in a command line (``&&``,
            ``|``, ``;``, ``>`` …, as :func:`unstuck.commands.parse.command_operators` reads them); a
            refused command never runs and declares ``permission`` on its program.
        grace_s: seconds between SIGTERM and SIGKILL when a command's deadline passes.
        stdin_tty: give commands this process's terminal as stdin (attended runs only);
            ``/dev/null`` by default, so a prompt cannot wait on a person who is not there.
        terminal: run commands on a pseudo-terminal of their own (the PTY shell tool:
            :func:`unstuck.processes.leases.run_leased` with ``terminal=True``), so pagers page and
            prompts prompt as in a terminal window; at a deadline, the program that was waiting
            for input is named (:attr:`CommandOutput.waiting_for_input`).
        confirm: asks the person at the keyboard a yes/no question (``install_cli``'s "Install
            gh with: ...?") and returns their answer; ``None``: nobody is attending, so
            nothing that needs a yes runs.
        ask: asks the person a question and returns their answer (``request_user_input``);
            ``None``: nobody is attending.

    Raises:
        ValueError: when both ``stdin_tty`` and ``terminal`` are set (this process's terminal,
            or one of the command's own).
    """

    root: Path
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    output_limit_bytes: int = 64_000
    argv_prefix: tuple[str, ...] = ()
    denied_programs: frozenset[str] = frozenset()
    denied_operators: frozenset[str] = frozenset()
    grace_s: float = DEFAULT_GRACE_S
    stdin_tty: bool = False
    terminal: bool = False
    confirm: Callable[[str], bool] | None = None
    ask: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        if self.stdin_tty and self.terminal:
            raise ValueError("Workspace: stdin_tty (this process's terminal) and terminal (a pseudo-terminal of "
                             "the command's own) exclude each other")

    def path(self, name: str) -> Path:
        """``name`` resolved against :attr:`root` (absolute paths are kept)."""
        candidate = Path(name).expanduser()
        return candidate if candidate.is_absolute() else self.root / candidate

    def which(self, program: str) -> str | None:
        """The program's resolved path on this workspace's ``PATH``, or ``None``."""
        return shutil.which(program, path=self.env.get("PATH", ""))

    def run(self, argv: list[str] | str, timeout_s: float = 60.0) -> CommandOutput:
        """Run a command (a string goes to ``/bin/bash -c``) as a leased process
        (:func:`unstuck.processes.leases.run_leased`): its own process group, no terminal stdin unless
        :attr:`stdin_tty`, a pseudo-terminal of its own with :attr:`terminal`, and a deadline
        of ``timeout_s`` seconds.

        On expiry the whole tree gets SIGTERM, then SIGKILL after :attr:`grace_s`; the output
        so far comes back with exit code 124 (as coreutils ``timeout`` reports it) and a line
        naming what was killed and whether anything survived, so a prompt the command was
        waiting on (a device code, a password) is not lost; when a program of the command was
        waiting for input then, the line names it and so does
        :attr:`CommandOutput.waiting_for_input`. On a terminal, stdout is what the command
        showed there, with the terminal's control and escape sequences stripped.
        """
        args = [*self.argv_prefix, *(["/bin/bash", "-c", argv] if isinstance(argv, str) else argv)]
        shown = argv if isinstance(argv, str) else shlex.join(argv)
        lease = run_leased(args, cwd=self.root, env=self.env, deadline_s=timeout_s, grace_s=self.grace_s,
                           stdin_tty=self.stdin_tty, terminal=self.terminal)
        limit = self.output_limit_bytes
        stderr = truncate_content(lease.stderr, limit)
        if lease.expired:
            killed = ", ".join(map(str, lease.killed)) or "none (all ended on SIGTERM)"
            survived = ", ".join(map(str, lease.survivors)) or "none"
            note = (f"timed out after {timeout_s:g} s: killed process group {lease.group} ({shown}): SIGTERM to "
                    f"{len(lease.terminated)} process(es), SIGKILL after {self.grace_s:g} s to {killed}; "
                    f"survivors: {survived}")
            if lease.waiting_for_input:
                note += f"; {lease.waiting_for_input} was waiting for input at the deadline"
            stderr = f"{stderr.rstrip()}\n{note}".lstrip("\n")
        code = TIMEOUT_EXIT_CODE if lease.expired else lease.exit_code
        stdout = clean_terminal_text(lease.stdout) if self.terminal else lease.stdout
        return CommandOutput(shown, code, truncate_content(stdout, limit), stderr,
                             waiting_for_input=lease.waiting_for_input if lease.expired else None)


_PATH_WORD = re.compile(r"[\w.~/-]*[./][\w.~/-]*")


def path_words(command: str) -> list[str]:
    """The words of a shell command that look like paths (they hold ``/`` or ``.``): its
    shell words as bash reads them (:func:`unstuck.commands.parse.parse_command_line`; quoted paths
    with spaces included) and path-like parts of longer words,
    in order, each once; the program itself left out."""
    words = [word for simple in parse_command_line(command).commands for word in simple.words]
    program = command_subject(command)
    return [w for w in dict.fromkeys([*words, *_PATH_WORD.findall(command)])
            if ("/" in w or "." in w) and w != program]


def _named_files(workspace: Workspace, command: str, limit: int = 64) -> list[Path]:
    """Existing files the command's words name (relative to the workspace or absolute)."""
    found: list[Path] = []
    for word in path_words(command):
        if len(found) >= limit:
            break
        with contextlib.suppress(OSError, ValueError):
            path = workspace.path(word)
            if path.is_file():
                found.append(path)
    return found


def _lock_may_explain(result: ToolResult) -> bool:
    """A held lock explains a failure that reads as a conflict or a timeout, or that says
    nothing at all (``flock -n`` exits 1 silently); it does not explain one that names
    another cause (a missing file, a bad option)."""
    inferred = classify_result("run_command", {}, result)
    if inferred is None or inferred.kind in (Kind.CONFLICT, Kind.TIMEOUT):
        return True
    said = result.content.replace(f"(exit code {result.exit_code})", "").strip()
    return inferred.kind is Kind.EXECUTION_ERROR and not said


def _lock_probe(path: str) -> Probe:
    return Probe.of("check_file_lock", {"path": path})


def _declared_lock(workspace: Workspace, command: str) -> Situation | None:
    """A failed command that names a file another live process holds a write lock on: the
    lock is declared (:func:`unstuck.recognise.declare.declare_lock`), naming the file and its holder."""
    locked = lock_holders(_named_files(workspace, command), exclude_pids=(os.getpid(),))
    if not locked:
        return None
    path, holders = next(iter(locked.items()))
    shown = _shown_path(workspace, path)
    return declare_lock(shown, holders, probe=_lock_probe(shown))


def _shown_path(workspace: Workspace, path: Path) -> str:
    try:
        return str(path.relative_to(workspace.root))
    except ValueError:
        return str(path)


def _http_get(tool_name: str, url: str, proxy: str | None, subject: str, *, limit: int = 200_000) -> ToolResult:
    """GET ``url`` (through ``proxy`` when set); an error status comes back as a result with
    its declared situation (:func:`unstuck.recognise.declare.declare_http`), never as an exception."""
    handlers = [urllib.request.ProxyHandler({"http": proxy, "https": proxy} if proxy else {})]
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(url, timeout=20) as response:
            body = response.read(limit).decode("utf-8", errors="replace")
            return normalize_result(tool_name, HttpResponse(response.status, body, tuple(response.headers.items())))
    except urllib.error.HTTPError as error:
        with error:
            body = error.read(limit).decode("utf-8", errors="replace")
        headers = tuple(error.headers.items()) if error.headers is not None else ()
        result = normalize_result(tool_name, HttpResponse(error.code, body, headers))
        declared = declare_http(error.code, headers, subject, now_s=time.time(), body=body)
        return dataclasses.replace(result, declared=declared) if declared is not None else result


def _cli_probe(name: str) -> Probe:
    return Probe.of("check_cli_setup", {"name": name})


def cli_fingerprint(workspace: Workspace, program: str, *, timeout_s: float = 10.0,
                    clis: Mapping[str, CliFacts] = KNOWN_CLIS) -> str:
    """The environment fingerprint of a CLI, for lessons: its resolved binary path, the
    first line of its ``--version`` and, for a CLI whose facts name the host of its service
    (:attr:`CliFacts.host_variables`), that host as the workspace's environment sets it
    (``/usr/bin/gh|gh version 2.23.0 (2023-02-14)|host=github.com``); ``"{program}: not on
    PATH"`` when it is not installed. A subject that is not a program (a path, a host) has
    the fingerprint ``""``. gh upgraded or moved, or pointed at another server, gives another
    fingerprint, so an old lesson no longer matches; machines of a fleet with the same build
    and service host share one (:mod:`unstuck.guard.lessons`)."""
    if not program or "/" in program or not re.fullmatch(r"[\w.+-]+", program):
        return ""
    path = workspace.which(program)
    if path is None:
        return f"{program}: not on PATH"
    resolved = os.path.realpath(path)
    out = workspace.run([path, "--version"], timeout_s=timeout_s)
    first = next((line.strip() for line in (out.stdout or out.stderr).splitlines() if line.strip()), "")
    facts = clis.get(program)
    if facts is None or not facts.host_variables:
        return f"{resolved}|{first}"
    host = next((workspace.env[name].strip() for name in facts.host_variables if workspace.env.get(name, "").strip()),
                facts.default_host or "")
    return f"{resolved}|{first}|host={host}"


PROGRAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def _checked_name(name: object) -> str:
    if not isinstance(name, str) or not PROGRAM_NAME.fullmatch(name):
        raise ValueError(f"not a program name: {str(name)[:80]!r} (letters, digits and ._+- only)")
    return name


#: Programs that run a command as another user (root), asking the invoking user to
#: authenticate: sudo(8), doas(1), pkexec(1), su(1), run0(1).
_RAISES_PRIVILEGES = frozenset({"sudo", "doas", "pkexec", "su", "run0"})


def needs_a_person(command: str, facts: CliFacts | None = None) -> bool:
    """Whether running an install command needs a person: one of its commands raises
    privileges (sudo, doas, pkexec, su, run0, which ask the invoking user to authenticate), or
    the CLI's installer asks something itself (:attr:`CliFacts.install_prompts`, a licence)."""
    if facts is not None and facts.install_prompts:
        return True
    for simple in parse_command_line(command).commands:
        words = [simple.program or "", *(wrapper[0] for wrapper in simple.wrappers if wrapper)]
        if any(os.path.basename(word) in _RAISES_PRIVILEGES for word in words):
            return True
    return False


def _path_export(directory: str) -> str:
    """``export PATH="DIR:$PATH"``, with DIR quoted for the shell when it needs it."""
    if re.fullmatch(r"[\w./+@%=,-]+", directory):
        return f'export PATH="{directory}:$PATH"'
    return f'export PATH={shlex.quote(directory)}":$PATH"'


def _not_installed(workspace: Workspace, facts: CliFacts, name: str, probe: Probe,
                   *, declined: bool = False, unattended: bool = False) -> dict[str, Any]:
    """The report of a program not on ``PATH``: found on disk elsewhere ("installed at X but
    not on PATH", unblock ``export PATH=...``), else the install command (interactive when
    installing needs a person), else a generic instruction."""
    found = locate_off_path(name, workspace.env.get("PATH", ""), workspace.env.get("HOME"))
    if found is not None:
        directory = os.path.dirname(found)
        situation = Situation(Kind.NOT_INSTALLED, name, unblock=_path_export(directory), probe=probe,
                              detail=f"{name} is installed at {found} but not on PATH", location=found)
        return {"status": "error", "installed": False, "on_path": False, "location": found,
                "message": f"{facts.display} is installed at {found}, but that directory is not on PATH.",
                "situation": situation}
    command = facts.install
    unblock = command or f"Install {name} and make sure it is on PATH."  # a sentence: shown as it is
    detail = f"{name}: command not found on PATH"
    if declined:
        detail += f"; the user declined to install it with: {command}"
    elif unattended and command:
        detail += f"; nobody is attending this run to confirm installing it with: {command}"
    interactive = command is not None and needs_a_person(command, facts)
    situation = Situation(Kind.NOT_INSTALLED, name, interactive=interactive, unblock=unblock, probe=probe,
                          detail=detail)
    report: dict[str, Any] = {"status": "error", "installed": False,
                              "message": f"{facts.display} is not installed.", "situation": situation}
    if command:
        report["install_command"] = command
        if facts.install_source:
            report["install_source"] = facts.install_source
    return report


def _installed_report(workspace: Workspace, facts: CliFacts, path: str) -> dict[str, Any]:
    version = workspace.run([path, *facts.version_args], timeout_s=30)
    version_text = (version.stdout or version.stderr).strip()
    return {"status": "success", "installed": True, "path": path,
            "version": version_text.splitlines()[0] if version_text else None}


def check_cli(workspace: Workspace, name: str, *, clis: Mapping[str, CliFacts] = KNOWN_CLIS) -> dict[str, Any]:
    """``check_cli_setup``'s body: installed? version? signed in? scopes? (see module doc).

    Args:
        workspace: where the CLI runs.
        name: the program.
        clis: the facts per CLI (:data:`KNOWN_CLIS`); an unknown CLI is checked for being
            installed only.

    Raises:
        ValueError: when ``name`` is not a program name (letters, digits, ``._+-``; no path,
            space or shell syntax): a model's argument never becomes a declared subject or
            unblock as it was typed.
    """
    name = _checked_name(name)
    facts = clis.get(name, CliFacts(name=name, display=name))
    probe = _cli_probe(name)
    path = workspace.which(name)
    if path is None:
        return _not_installed(workspace, facts, name, probe)
    report = _installed_report(workspace, facts, path)
    if facts.auth_status_args is None:
        return report
    status = workspace.run([path, *facts.auth_status_args], timeout_s=30)
    text = "\n".join(part for part in (status.stdout, status.stderr) if part).strip()
    report["auth_status"] = text
    missing_named = re.findall(facts.missing_scope_pattern, text) if facts.missing_scope_pattern else []
    if status.exit_code != 0 and missing_named:
        return _missing_scopes(report, facts, name, probe, sorted(set(missing_named)))
    unreachable = _unreachable(workspace, path, facts, name, probe) if status.exit_code != 0 else None
    if unreachable is not None:
        report.update(status="error", reachable=False, situation=unreachable)
        return report
    if status.exit_code != 0:
        report.update(status="error", signed_in=False)
        report["situation"] = Situation(
            Kind.AUTH, name, interactive=True, unblock=facts.sign_in, probe=probe,
            detail=text.splitlines()[-1] if text else f"{name} is not signed in",
        )
        return report
    report["signed_in"] = True
    found = re.search(facts.scopes_pattern, text) if facts.scopes_pattern and facts.required_scopes else None
    if found is not None:  # no list at all: a token type that has no scopes, never "lacks" them
        scopes = {s.strip().strip("'\"") for s in found.group(1).split(",")}
        missing = [s for s in facts.required_scopes if s not in scopes]
        report["scopes"] = sorted(scopes)
        if missing:
            return _missing_scopes(report, facts, name, probe, missing)
    return report


def _unreachable(workspace: Workspace, path: str, facts: CliFacts, name: str, probe: Probe) -> Situation | None:
    """A declared transient situation when the service cannot be reached, else ``None``."""
    if facts.reachability_args is None:
        return None
    reached = workspace.run([path, *facts.reachability_args], timeout_s=30)
    seen = classify_result(name, {}, normalize_result(name, reached))
    waitable = (Kind.NETWORK, Kind.UNAVAILABLE, Kind.TIMEOUT, Kind.QUOTA)
    if seen is None or not seen.retryable or seen.kind not in waitable:
        return None
    return Situation(seen.kind, name, retryable=True, retry_after_s=seen.retry_after_s, probe=probe, detail=seen.detail)


def _missing_scopes(
    report: dict[str, Any], facts: CliFacts, name: str, probe: Probe, missing: list[str]
) -> dict[str, Any]:
    report.update(status="error", signed_in=True, missing_scopes=missing)
    fix = (facts.scope_fix or "").format(scopes=",".join(missing)) or None
    report["situation"] = Situation(
        Kind.PERMISSION, name, interactive=True, unblock=fix, probe=probe,
        detail=f"the token lacks scope(s): {', '.join(missing)}",
    )
    return report


def sign_in(workspace: Workspace, name: str, *, clis: Mapping[str, CliFacts] = KNOWN_CLIS,
            timeout_s: float = 45.0) -> dict[str, Any]:
    """``sign_in_cli``'s body: start the CLI's sign-in (:attr:`CliFacts.sign_in_flow`, a browser
    or device flow a person approves) and report the setup afterwards as ``check_cli_setup``
    does (signed in: ``status: success``; still signed out: ``auth`` with the sign-in command).
    The sign-in's own output (a one-time code, a URL) is kept under ``sign_in``.

    Raises:
        ValueError: when ``name`` is not a program name, or no sign-in is known for it.
    """
    name = _checked_name(name)
    facts = clis.get(name)
    if facts is None or facts.sign_in is None:
        raise ValueError(f"no sign-in known for {name!r}; known: {', '.join(n for n, f in clis.items() if f.sign_in)}")
    if workspace.which(name) is None:
        return _not_installed(workspace, facts, name, _cli_probe(name))
    flow = facts.sign_in_flow or facts.sign_in
    out = workspace.run(flow, timeout_s=timeout_s)
    said = "\n".join(part for part in (out.stdout.strip(), out.stderr.strip()) if part)
    report = check_cli(workspace, name, clis=clis)
    report["sign_in"] = {"command": flow, "exit_code": out.exit_code,
                         "output": truncate_content(said, min(workspace.output_limit_bytes, 8_000))}
    return report


def install(workspace: Workspace, name: str, *, clis: Mapping[str, CliFacts] = KNOWN_CLIS,
            timeout_s: float = 600.0) -> dict[str, Any]:
    """``install_cli``'s body (see the module doc).

    * already on ``PATH``: ``status: success``, where and which version;
    * on disk outside ``PATH``: ``not_installed``, "installed at X but not on PATH", unblock
      ``export PATH="DIR:$PATH"``;
    * no install command known: ``not_installed`` with a generic instruction;
    * unattended (:attr:`Workspace.confirm` is ``None``): ``not_installed`` with the install
      command as the unblock, never run;
    * attended: asks ``confirm(f"Install {name} with: {command}?")``; no: ``not_installed``,
      declined; yes: runs the command (:meth:`Workspace.run`, on the workspace's terminal
      settings, ``timeout_s`` seconds) and checks again: on ``PATH`` now is a success (with
      the install's exit code), otherwise ``not_installed`` with what the install printed.

    Raises:
        ValueError: when ``name`` is not a program name.
    """
    name = _checked_name(name)
    facts = clis.get(name, CliFacts(name=name, display=name))
    probe = _cli_probe(name)
    path = workspace.which(name)
    if path is not None:
        return _installed_report(workspace, facts, path)
    command = facts.install
    if command is None or locate_off_path(name, workspace.env.get("PATH", ""), workspace.env.get("HOME")):
        return _not_installed(workspace, facts, name, probe)
    if workspace.confirm is None:
        return {**_not_installed(workspace, facts, name, probe, unattended=True), "ran": False}
    if not workspace.confirm(f"Install {name} with: {command}?"):
        return {**_not_installed(workspace, facts, name, probe, declined=True), "ran": False, "declined": True}
    out = workspace.run(command, timeout_s=timeout_s)
    said = "\n".join(part for part in (out.stdout.strip(), out.stderr.strip()) if part)
    ran = {"command": command, "exit_code": out.exit_code,
           "output": truncate_content(said, min(workspace.output_limit_bytes, 8_000))}
    path = workspace.which(name)
    if path is not None:
        return {**_installed_report(workspace, facts, path), "ran": True, "install": ran}
    report = _not_installed(workspace, facts, name, probe)
    situation = report["situation"]
    if isinstance(situation, Situation) and situation.location is None:
        last = said.splitlines()[-1] if said else f"exit code {out.exit_code}"
        report["situation"] = dataclasses.replace(
            situation, detail=f"{name} is still not on PATH after {command} (exit code {out.exit_code}): {last}"[:240])
    return {**report, "ran": True, "install": ran}


def _jsonable(report: dict[str, Any]) -> dict[str, Any]:
    situation = report.get("situation")
    if isinstance(situation, Situation):
        report["situation"] = situation.to_dict()
    return report


def standard_tools(workspace: Workspace, *, clis: Mapping[str, CliFacts] | None = None) -> Toolset:
    """The reference tool set, bound to ``workspace``; ``clis`` replaces :data:`KNOWN_CLIS`
    as the facts per CLI (how to check, sign in and install each) for the three CLI tools.

    * ``run_command(command, timeout_s)``: ``/bin/bash -c`` in the workspace; subject is the
      program the command runs; on a pseudo-terminal when :attr:`Workspace.terminal`.
    * ``check_cli_setup(name)``: declares not_installed / auth / permission (see module doc).
    * ``sign_in_cli(name)``: the CLI's interactive sign-in (``interactive=True``), then its
      setup as ``check_cli_setup`` reports it (:func:`sign_in`).
    * ``install_cli(name)``: installs a CLI after the user confirms, in attended turns only;
      otherwise declares ``not_installed`` with the exact command (:func:`install`).
    * ``read_file(path)``: a text file, UTF-8; large files are truncated with the marker.
    * ``search_files(query)``: paths under the workspace whose name contains ``query``.
    * ``web_search(query)``: a web search through the workspace's HTTPS proxy settings.
    * ``fetch_url(url)``: an HTTP GET; 401/403/429 are declared (:func:`unstuck.recognise.declare.declare_http`).
    * ``check_file_lock(path)``: who holds a write lock on a file; the probe of a declared lock.
    * ``request_user_input(question)``: asks the person attending the turn and returns their
      answer (``interactive=True``: refused before dispatch when the run is unattended; with
      no :attr:`Workspace.ask`, ``status: error`` declaring ``permission``, interactive).

    ``run_command`` runs command lines: before dispatch each is read for a part that would wait
    for a person (:func:`unstuck.commands.interactive.interactive_call`, judged with the workspace's terminal),
    and when an inferred sign-in, missing-program or permission blocker opens on a known CLI
    (:data:`KNOWN_CLIS`), the loop runs ``check_cli_setup`` on it as a probe.
    ``read_file``, ``web_search`` and ``fetch_url`` return documents (``document_output``):
    a successful read is data, never read for failure wording.

    ``run_command`` declares two situations of its own: a program in the workspace's
    ``denied_programs`` is refused before it runs (``permission``), and a failed command that
    names a file another live process holds a write lock on is a ``conflict`` on that file
    naming the holder (read from ``/proc/locks``).
    """

    facts = KNOWN_CLIS if clis is None else clis

    def setup_probe(program: str) -> Probe | None:
        return _cli_probe(program) if program in facts else None

    @tool(subject=lambda a: command_subject(str(a.get("command", ""))), effect=Effect.WRITE,
          command_argument="command", terminal=workspace.stdin_tty or workspace.terminal, setup_probe=setup_probe,
          environ=workspace.env)
    def run_command(command: str, timeout_s: float = 60.0) -> CommandOutput | ToolResult | dict[str, Any]:
        """Run a shell command in the workspace and return its exit code, stdout and stderr."""
        program = command_subject(command)
        denied_here = [p for p in command_programs(command) if p in workspace.denied_programs] \
            if workspace.denied_programs else []
        if denied_here:  # anywhere in the line: a pipeline, a list, a substitution, a nested shell
            rule = f"{denied_here[0]} is denied in this workspace"
            return {"status": "refused", "executed": False, "reason": rule,
                    "situation": declare_refusal(denied_here[0], command, rule)}
        denied = workspace.denied_operators
        operators = sorted(command_operators(command) & denied) if denied else []
        if operators:
            rule = f"the operator(s) {' '.join(operators)} are denied in this workspace"
            return {"status": "refused", "executed": False, "reason": rule,
                    "situation": declare_refusal(program or "shell", command, rule)}
        out = workspace.run(command, timeout_s=timeout_s)
        if out.exit_code == 0:
            return out
        result = normalize_result("run_command", out)
        lock = _declared_lock(workspace, command)  # cheap when nothing is locked: one read of /proc/locks
        if lock is not None and _lock_may_explain(result):
            return dataclasses.replace(result, declared=lock)
        return result

    @tool(subject=lambda a: str(a.get("name") or "") or None, probe=None)
    def check_cli_setup(name: str) -> dict[str, Any]:
        """Check a command-line tool: installed, version, signed in, token scopes."""
        return _jsonable(check_cli(workspace, name, clis=facts))

    @tool(interactive=True, effect=Effect.WRITE, subject=lambda a: str(a.get("name") or "") or None)
    def sign_in_cli(name: str, timeout_s: float = 45.0) -> dict[str, Any]:
        """Start the CLI's interactive sign-in (a browser or device-code flow a person approves)."""
        return _jsonable(sign_in(workspace, name, clis=facts, timeout_s=timeout_s))

    @tool(effect=Effect.WRITE, subject=lambda a: str(a.get("name") or "") or None)
    def install_cli(name: str) -> dict[str, Any]:
        """Install a command-line tool, if the user confirms; says where it is when it already is."""
        return _jsonable(install(workspace, name, clis=facts))

    @tool(interactive=True, subject="user")
    def request_user_input(question: str) -> str | dict[str, Any]:
        """Ask the person attending this turn a question and return their answer."""
        text = clean_terminal_text(str(question)).strip()
        if not text:
            raise ValueError("request_user_input: the question is empty")
        if workspace.ask is None:
            refusal = Situation(Kind.PERMISSION, "user", interactive=True,
                                detail="nobody is attending this run to answer: " + text[:160])
            return _jsonable({"status": "error", "answered": False, "question": text, "situation": refusal})
        return workspace.ask(text)

    @tool(subject=lambda a: str(a.get("path") or "") or None, document_output=True)
    def read_file(path: str) -> str:
        """Read a text file (UTF-8) from the workspace."""
        text = workspace.path(path).read_text(encoding="utf-8")
        return truncate_content(text, workspace.output_limit_bytes)

    @tool(subject="files")
    def search_files(query: str) -> list[str]:
        """List files under the workspace whose path contains ``query`` (case-insensitive)."""
        wanted = query.lower().strip("*")
        found = [
            str(p.relative_to(workspace.root))
            for p in sorted(workspace.root.rglob("*"))
            if p.is_file() and wanted in str(p.relative_to(workspace.root)).lower()
        ]
        return found[:200]

    def proxy_for(url: str) -> str | None:
        scheme = "https" if url.startswith("https:") else "http"
        return workspace.env.get(f"{scheme}_proxy") or workspace.env.get(f"{scheme.upper()}_PROXY")

    @tool(subject=lambda a: "web", document_output=True)
    def web_search(query: str) -> ToolResult:
        """Search the web (an HTML results page), through the workspace's proxy settings."""
        url = "https://html.duckduckgo.com/html/?" + urllib.parse.urlencode({"q": query})
        return _http_get("web_search", url, proxy_for(url), "web")

    @tool(subject=lambda a: urllib.parse.urlsplit(str(a.get("url", ""))).hostname or None, document_output=True)
    def fetch_url(url: str) -> ToolResult:
        """Fetch a URL with GET (status, headers and up to 200 kB of the body), through the
        workspace's proxy settings; 401/403/429 come back declared."""
        return _http_get("fetch_url", url, proxy_for(url), urllib.parse.urlsplit(url).hostname or url)

    @tool(subject=lambda a: str(a.get("path") or "") or None)
    def check_file_lock(path: str) -> dict[str, Any]:
        """Say whether another process holds a write lock on a workspace file, and which."""
        target = workspace.path(path)
        holders = lock_holders([target], exclude_pids=(os.getpid(),)).get(target, [])
        if not holders:
            return {"status": "ok", "path": path, "locked": False}
        shown = _shown_path(workspace, target)
        return {"status": "locked", "path": path, "locked": True,
                "holders": [{"pid": h.pid, "command": h.command} for h in holders],
                "situation": declare_lock(shown, holders, probe=_lock_probe(shown))}

    specs: list[ToolSpec] = [
        run_command, check_cli_setup, sign_in_cli, install_cli, read_file, search_files, web_search, fetch_url,
        check_file_lock, request_user_input,
    ]
    return Toolset(specs)

