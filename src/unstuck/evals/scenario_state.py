"""The machine state a scenario states beyond gh and files: the ``setup:`` keys below, parsed
into a frozen :class:`ScenarioState` (applied by :meth:`unstuck.evals.sandbox.Sandbox.apply_state`).
Internal: not a supported import path (docs/reference/index.md lists those that are).

The keys, as a scenario file writes them::

    setup:
      env: {AWS_PROFILE: prod}        # variables added to the tools' environment (strings)
      path: [tools/bin]               # workspace folders put first on PATH (made if missing)
      programs:                       # stand-in programs, first on PATH (before `path:`)
        deploy: {script: "echo deploying; exit 3"}          # a bash body; `exit:` after it (default 0)
        aws: {output: "", stderr: "Token has expired", exit: 255}   # a recorded output replayed
      commands: ["git init -q ."]     # run in the workspace before the agent; one failing is a harness error
      read_only: [docs, setup.cfg]    # workspace paths the tools cannot write (EACCES / EPERM)
      shell_policy:                   # what run_command refuses before running, as a sandbox would
        deny_programs: [curl]
        deny_operators: ["&&", "|", ";", ">"]
      services:                       # local HTTP services on 127.0.0.1, one ephemeral port each
        api:
          url_env: API_URL            # the variable that holds http://127.0.0.1:PORT
          routes:
            - method: GET
              path: /v1/items
              responses:              # answered in order; the last one repeats
                - {status: 429, headers: {Retry-After: "1"}, body: "slow down"}
                - {status: 200, body: {items: []}}   # a mapping or list body is sent as JSON
      api_faults: {/graphql: bad_gateway_once, "/repos/*": rate_limited}   # fake GitHub API, per route

Every error names the file, the field and the allowed values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

import re2

from unstuck.evals.fake_github import FAULTS

__all__ = [
    "HTTP_METHODS",
    "OPERATORS",
    "STATE_KEYS",
    "Response",
    "Route",
    "ScenarioState",
    "Service",
    "ShellPolicy",
    "StandInProgram",
    "parse_state",
]

#: The ``setup:`` keys this module reads.
STATE_KEYS = frozenset({"env", "path", "programs", "commands", "read_only", "shell_policy", "services", "api_faults"})

#: Shell operators a policy may deny: bash(1) "DEFINITIONS" (control operators) and
#: "REDIRECTION" (redirection operators), as tree-sitter-bash tokenises them.
OPERATORS = ("&&", "||", ";", "&", "|", "|&", ">", ">>", "<", "<<", "<<-", "<<<", "&>", "&>>", ">&", "<&", ">|", "<>")

#: Request methods a service route may name (RFC 9110 section 9, and PATCH: RFC 5789).
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

#: An environment variable name (POSIX.1-2017 XBD 8.1: letters, digits, underscore; no leading digit).
_ENV_NAME = re2.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A program name: one path component, no shell metacharacters.
_PROGRAM_NAME = re2.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]*$")


@dataclass(frozen=True, slots=True)
class StandInProgram:
    """A program installed first on ``PATH``: a bash ``script`` body (then ``exit``), or,
    with no script, ``output`` on stdout and ``stderr`` on stderr replayed, then ``exit``."""

    name: str
    script: str | None = None
    output: str = ""
    stderr: str = ""
    exit: int = 0


@dataclass(frozen=True, slots=True)
class Response:
    """One HTTP answer: status, headers (in order) and body (UTF-8 text)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    """A method and path (query ignored) answered with ``responses`` in order, the last repeating."""

    method: str
    path: str
    responses: tuple[Response, ...]


@dataclass(frozen=True, slots=True)
class Service:
    """A local HTTP service; its base URL goes into the variable ``url_env``."""

    name: str
    url_env: str
    routes: tuple[Route, ...]


@dataclass(frozen=True, slots=True)
class ShellPolicy:
    """Programs and operators (:data:`OPERATORS`) the shell tool refuses before running."""

    deny_programs: frozenset[str] = frozenset()
    deny_operators: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ScenarioState:
    """The ``setup:`` state of :data:`STATE_KEYS` (see the module doc); empty by default."""

    env: tuple[tuple[str, str], ...] = ()
    path: tuple[str, ...] = ()
    programs: tuple[StandInProgram, ...] = ()
    commands: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    shell_policy: ShellPolicy = ShellPolicy()
    services: tuple[Service, ...] = ()
    api_faults: tuple[tuple[str, str], ...] = ()


class _Read:
    def __init__(self, source: str, error: Callable[[str], Exception]) -> None:
        self.source, self.make = source, error

    def error(self, where: str, problem: str) -> Exception:
        return self.make(f"{self.source}: field {where!r}: {problem}")

    def mapping(self, where: str, value: object, allowed: frozenset[str] | None = None,
                shape: str = "a mapping") -> Mapping[str, object]:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise self.error(where, f"must be {shape}, got {type(value).__name__}")
        if allowed is not None:
            unknown = sorted(set(value) - allowed)
            if unknown:
                raise self.error(where, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
        return value

    def strings(self, where: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.error(where, "must be a list of non-empty strings")
        return tuple(value)

    def text(self, where: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.error(where, f"must be a string, got {type(value).__name__}")
        return value

    def number(self, where: str, value: object, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.error(where, f"must be a whole number from {low} to {high}, got {value!r}")
        return value

    def env_name(self, where: str, value: object) -> str:
        if not isinstance(value, str) or not _ENV_NAME.match(value):
            raise self.error(where, f"{value!r} is not a variable name (letters, digits, _; no leading digit)")
        return value

    def workspace_paths(self, where: str, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            parts = PurePosixPath(name).parts
            if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
                raise self.error(where, f"{name!r} must be a relative path inside the workspace")
        return names


def parse_state(setup: Mapping[str, object], source: str, *, error: Callable[[str], Exception] = ValueError,
                ) -> ScenarioState:
    """Read the :data:`STATE_KEYS` of a scenario's ``setup:`` mapping (other keys are ignored:
    the caller checks them).

    Args:
        setup: the parsed ``setup:`` mapping.
        source: the scenario file, named in errors.
        error: the exception type raised, called with the message.

    Raises:
        the ``error`` type, with ``"{source}: field 'setup.KEY…': problem"`` naming the allowed
        values: for a wrong shape, an unknown key, operator, method, fault, a status outside
        100-599, an exit code outside 0-255, a path outside the workspace, a bad variable name.
    """
    read = _Read(source, error)
    return ScenarioState(
        env=_env(read, setup.get("env")),
        path=read.workspace_paths("setup.path", read.strings("setup.path", setup.get("path") or [])),
        programs=_programs(read, setup.get("programs")),
        commands=read.strings("setup.commands", setup.get("commands") or []),
        read_only=read.workspace_paths("setup.read_only",
                                       read.strings("setup.read_only", setup.get("read_only") or [])),
        shell_policy=_policy(read, setup.get("shell_policy")),
        services=_services(read, setup.get("services")),
        api_faults=_api_faults(read, setup.get("api_faults")),
    )


#: Variables the sandbox sets for every tool (evals.sandbox): a service's url_env must not replace one.
_SANDBOX_VARIABLES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "LANG", "LC_ALL", "TERM",
                                "GH_CONFIG_DIR", "NO_PROXY", "no_proxy"})
#: A header field name: RFC 9110 section 5.1, a token (RFC 9110 section 5.6.2 tchar).
_HEADER_NAME = re2.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _env(read: _Read, raw: object) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    where = "setup.env"
    pairs = []
    for name, value in read.mapping(where, raw, shape="a mapping of variable names to strings").items():
        read.env_name(where, name)
        if name == "PATH":
            raise read.error(f"{where}.PATH", "set PATH entries with setup.path (and stand-ins with setup.programs)")
        if not isinstance(value, str):
            raise read.error(f"{where}.{name}", f"must be a string (quote it), got {type(value).__name__}")
        pairs.append((name, value))
    return tuple(pairs)


def _programs(read: _Read, raw: object) -> tuple[StandInProgram, ...]:
    if raw is None:
        return ()
    where = "setup.programs"
    keys = frozenset({"script", "output", "stderr", "exit"})
    programs = []
    for name, spec in read.mapping(where, raw, shape="a mapping of program names to {script, exit} "
                                   "or {output, stderr, exit}").items():
        if not _PROGRAM_NAME.match(name):
            raise read.error(where, f"{name!r} is not a program name (letters, digits, . _ + -)")
        entry = read.mapping(f"{where}.{name}", spec, keys)
        script = entry.get("script")
        if script is not None and ("output" in entry or "stderr" in entry):
            raise read.error(f"{where}.{name}", "give either script (a bash body) or output/stderr (a recording)")
        if script is None and not ({"output", "stderr", "exit"} & set(entry)):
            raise read.error(f"{where}.{name}", "needs script, or output/stderr, and exit; allowed: "
                             + ", ".join(sorted(keys)))
        programs.append(StandInProgram(
            name,
            script=None if script is None else read.text(f"{where}.{name}.script", script),
            output=read.text(f"{where}.{name}.output", entry.get("output", "")),
            stderr=read.text(f"{where}.{name}.stderr", entry.get("stderr", "")),
            exit=read.number(f"{where}.{name}.exit", entry.get("exit", 0), 0, 255),
        ))
    return tuple(programs)


def _policy(read: _Read, raw: object) -> ShellPolicy:
    if raw is None:
        return ShellPolicy()
    where = "setup.shell_policy"
    entry = read.mapping(where, raw, frozenset({"deny_programs", "deny_operators"}))
    operators = read.strings(f"{where}.deny_operators", entry.get("deny_operators") or [])
    for index, operator in enumerate(operators):
        if operator not in OPERATORS:
            raise read.error(f"{where}.deny_operators[{index}]",
                             f"unknown operator {operator!r}; allowed: {' '.join(OPERATORS)}")
    programs = read.strings(f"{where}.deny_programs", entry.get("deny_programs") or [])
    return ShellPolicy(frozenset(programs), frozenset(operators))


def _services(read: _Read, raw: object) -> tuple[Service, ...]:
    if raw is None:
        return ()
    where = "setup.services"
    services, used = [], set()
    for name, spec in read.mapping(where, raw, shape="a mapping of service names to {url_env, routes}").items():
        spot = f"{where}.{name}"
        entry = read.mapping(spot, spec, frozenset({"url_env", "routes"}))
        url_env = read.env_name(f"{spot}.url_env", entry.get("url_env"))
        if url_env in _SANDBOX_VARIABLES or url_env.lower().endswith("_proxy"):
            raise read.error(f"{spot}.url_env", f"{url_env} is a variable the sandbox sets itself; choose another name")
        if url_env in used:
            raise read.error(f"{spot}.url_env", f"{url_env} is also the url_env of another service")
        used.add(url_env)
        routes_raw = entry.get("routes")
        if not isinstance(routes_raw, list) or not routes_raw:
            raise read.error(f"{spot}.routes", "must be a non-empty list of {method, path, responses}")
        services.append(Service(name, url_env, tuple(_route(read, f"{spot}.routes[{i}]", r)
                                                     for i, r in enumerate(routes_raw))))
    return tuple(services)


def _route(read: _Read, where: str, raw: object) -> Route:
    entry = read.mapping(where, raw, frozenset({"method", "path", "responses"}))
    method = str(entry.get("method", "GET")).upper()
    if method not in HTTP_METHODS:
        raise read.error(f"{where}.method",
                         f"unknown method {entry.get('method')!r}; allowed: {', '.join(HTTP_METHODS)}")
    path = read.text(f"{where}.path", entry.get("path"))
    if not path.startswith("/"):
        raise read.error(f"{where}.path", f"{path!r} must start with /")
    answers = entry.get("responses")
    if not isinstance(answers, list) or not answers:
        raise read.error(f"{where}.responses", "must be a non-empty list of {status, headers, body}")
    return Route(method, path, tuple(_response(read, f"{where}.responses[{i}]", a) for i, a in enumerate(answers)))


def _response(read: _Read, where: str, raw: object) -> Response:
    entry = read.mapping(where, raw, frozenset({"status", "headers", "body"}))
    status = read.number(f"{where}.status", entry.get("status"), 100, 599)
    headers: list[tuple[str, str]] = []
    for name, value in read.mapping(f"{where}.headers", entry.get("headers") or {},
                                    shape="a mapping of header names to strings").items():
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise read.error(f"{where}.headers.{name}", "must be a string or a whole number")
        if not _HEADER_NAME.match(str(name)):
            raise read.error(f"{where}.headers", f"{name!r} is not a header name (RFC 9110 section 5.1: a token)")
        if any(c in str(value) for c in "\r\n\0"):
            raise read.error(f"{where}.headers.{name}", "a header value holds no line break or NUL "
                             "(RFC 9110 section 5.5)")
        headers.append((name, str(value)))
    body = entry.get("body", "")
    if isinstance(body, Mapping | list):  # JSON body (RFC 8259), typed as such unless the headers say
        body = json.dumps(body)
        if not any(n.lower() == "content-type" for n, _ in headers):
            headers.append(("Content-Type", "application/json"))
    return Response(status, tuple(headers), read.text(f"{where}.body", body))


def _api_faults(read: _Read, raw: object) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    where = "setup.api_faults"
    pairs = []
    for pattern, fault in read.mapping(where, raw, shape="a mapping of route patterns (/graphql, /repos/*) "
                                       "to faults").items():
        if not pattern.startswith("/"):
            raise read.error(where, f"route pattern {pattern!r} must start with / (e.g. /graphql, /repos/*)")
        if fault not in FAULTS:
            raise read.error(f"{where}.{pattern}", f"unknown fault {fault!r}; allowed: {', '.join(FAULTS)}")
        pairs.append((pattern, str(fault)))
    return tuple(pairs)
