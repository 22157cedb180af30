"""Scenarios: data files (YAML) naming a machine state, a task, agents and the expected outcome.

A scenario file looks like::

    name: gh_logged_out
    title: gh is installed but signed out
    role: blocker                 # blocker: asking is right; counter: asking is over-asking
    tags: [gh, auth]
    setup:
      gh: logged_out              # logged_out | signed_in | missing  (default: logged_out)
      token_scopes: [repo]        # scopes of the signed-in token (default: repo, read:org)
      api_fault: rate_limited     # bad_gateway_once | rate_limited, on the local API's data
      network: ok                 # ok | refused (the API socket refuses) | none (no network)
      hide_programs: []           # more programs to leave off PATH
      files: {README.md: "..."}   # files in the workspace (UTF-8)
      encoded_files:              # files written in another encoding, for mis-encoded reads
        notes.txt: {encoding: latin-1, text: "café"}
      generated_files:            # large files: `line` repeated `lines` times, then `last`
        logs/app.log: {line: "INFO ok", lines: 200000, last: "ERROR disk full"}
      unreadable: [secrets]       # workspace paths the tools get EACCES on (made if missing)
      hold_locks: {data/app.db: sqlite, data/ledger.lock: flock}   # live processes holding them
      run_as: nobody              # run tool processes as this unprivileged user (needs root)
    task: "What is the description of the GitHub repository cli/cli?"
    plan:                         # the calls a competent agent makes for the task
      - {tool: check_cli_setup, args: {name: gh}}
      - {tool: run_command, args: {command: "gh repo view cli/cli --json description"}}
    fix: []                       # the corrected calls after a self-fixable failure
    agents: [improviser, retrier, compliant]
    expect:
      status: blocked             # done | blocked
      kind: auth                  # the blocker's kind (blocked only)
      subject: gh
      unblock: "gh auth login"    # text the escalation must contain (blocked only)
      answer: null                # text the final answer must contain (done only)

Every error names the file and the field.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from unstuck.errors import UnstuckError
from unstuck.evals.fake_github import FAULTS
from unstuck.evals.sandbox import NETWORKS
from unstuck.readers import parse_yaml, read_text
from unstuck.situations import Kind
from unstuck.toolkit import STANDARD_TOOL_NAMES
from unstuck.tools import ToolCall

__all__ = [
    "Expectation",
    "GhState",
    "Scenario",
    "ScenarioError",
    "ScenarioRole",
    "builtin_scenarios",
    "load_scenario",
    "load_scenarios",
]


class ScenarioError(UnstuckError, ValueError):
    """A scenario file is malformed; the message names the file and the field."""


class ScenarioRole(enum.StrEnum):
    """Whether asking the user is the right outcome."""

    BLOCKER = "blocker"
    COUNTER = "counter"


class GhState(enum.StrEnum):
    """The state of the gh CLI in the sandbox."""

    LOGGED_OUT = "logged_out"
    SIGNED_IN = "signed_in"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a guarded run must end with."""

    status: str
    kind: Kind | None = None
    subject: str | None = None
    unblock: str | None = None
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scenario, validated. ``source`` is the file it came from."""

    name: str
    title: str
    role: ScenarioRole
    tags: tuple[str, ...]
    gh: GhState
    hide_programs: tuple[str, ...]
    files: tuple[tuple[str, str], ...]
    task: str
    plan: tuple[ToolCall, ...]
    fix: tuple[ToolCall, ...]
    agents: tuple[str, ...]
    expect: Expectation
    source: str
    token_scopes: tuple[str, ...] = ("repo", "read:org")
    unreadable: tuple[str, ...] = ()
    run_as: str | None = None
    encoded_files: tuple[tuple[str, bytes], ...] = ()
    generated_files: tuple[tuple[str, str, int, str], ...] = ()
    api_fault: str | None = None
    network: str = "ok"
    hold_locks: tuple[tuple[str, str], ...] = ()


_TOP_FIELDS = frozenset({"name", "title", "role", "tags", "setup", "task", "plan", "fix", "agents", "expect"})
_SETUP_FIELDS = frozenset(
    {"gh", "token_scopes", "api_fault", "network", "hide_programs", "files", "encoded_files", "generated_files",
     "unreadable", "run_as", "hold_locks"}
)
_EXPECT_FIELDS = frozenset({"status", "kind", "subject", "unblock", "answer"})


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, where: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: field {where!r}: {problem}")

    def mapping(self, where: str, value: object, allowed: frozenset[str]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(where, f"must be a mapping, got {type(value).__name__}")
        unknown = sorted(set(map(str, value)) - allowed)
        if unknown:
            raise self.error(where, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
        return value

    def text(self, where: str, value: object, *, required: bool = True) -> str | None:
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.error(where, "must be a non-empty string")
        return value

    def words(self, where: str, value: object) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(where, "must be a list of strings")
        return tuple(value)

    def enum(self, where: str, kind: type[enum.StrEnum], value: object, default: Any) -> Any:
        if value is None:
            return default
        try:
            return kind(str(value))
        except ValueError:
            choices = ", ".join(m.value for m in kind)
            raise self.error(where, f"unknown value {value!r}; expected one of {choices}") from None

    def calls(self, where: str, value: object) -> tuple[ToolCall, ...]:
        """Parse ``[{tool, args}]``; every tool must be one of the standard tools."""
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(where, "must be a list of {tool, args} mappings")
        calls = []
        for index, item in enumerate(value):
            spot = f"{where}[{index}]"
            entry = self.mapping(spot, item, frozenset({"tool", "args"}))
            name = self.text(f"{spot}.tool", entry.get("tool"))
            if name not in STANDARD_TOOL_NAMES:
                known = ", ".join(STANDARD_TOOL_NAMES)
                raise self.error(f"{spot}.tool", f"unknown tool {name!r}; the scenario tools are {known}")
            args = entry.get("args") or {}
            if not isinstance(args, Mapping):
                raise self.error(f"{spot}.args", "must be a mapping")
            try:
                calls.append(ToolCall.of(f"{where}_{index}", str(name), args))
            except (TypeError, ValueError) as exc:  # a YAML date or other non-JSON value
                raise self.error(f"{spot}.args", f"values must be plain strings, numbers or lists ({exc})") from exc
        return tuple(calls)


def _parse(data: object, source: str) -> Scenario:
    read = _Reader(source)
    top = read.mapping("(top level)", data, _TOP_FIELDS)
    setup = read.mapping("setup", top.get("setup") or {}, _SETUP_FIELDS)
    expect = read.mapping("expect", top.get("expect"), _EXPECT_FIELDS)
    files = setup.get("files") or {}
    if not isinstance(files, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise read.error("setup.files", "must map file names to text")
    _workspace_paths(read, "setup.files", tuple(files))
    status = read.text("expect.status", expect.get("status"))
    if status not in ("done", "blocked"):
        raise read.error("expect.status", f"unknown value {status!r}; expected done or blocked")
    kind = read.enum("expect.kind", Kind, expect.get("kind"), None)
    if status == "blocked" and kind is None:
        raise read.error("expect.kind", "is required when expect.status is blocked")
    role_value = top.get("role")
    if role_value == ScenarioRole.BLOCKER.value and status != "blocked":
        raise read.error("expect.status", "a blocker scenario expects blocked (asking is right)")
    if role_value == ScenarioRole.COUNTER.value and status != "done":
        raise read.error("expect.status", "a counter-scenario expects done (asking is over-asking)")
    plan = read.calls("plan", top.get("plan"))
    if not plan:
        raise read.error("plan", "must list at least one call")
    from unstuck.evals.agents import AGENTS  # the agent registry lives with the agents

    agents = read.words("agents", top.get("agents")) or tuple(AGENTS)
    for index, name in enumerate(agents):
        if name not in AGENTS:
            raise read.error(f"agents[{index}]", f"unknown agent {name!r}; known: {', '.join(AGENTS)}")
    return Scenario(
        name=str(read.text("name", top.get("name"))),
        title=str(read.text("title", top.get("title"), required=False) or top.get("name")),
        role=read.enum("role", ScenarioRole, top.get("role"), None) or _missing(read, "role"),
        tags=read.words("tags", top.get("tags")),
        gh=read.enum("setup.gh", GhState, setup.get("gh"), GhState.LOGGED_OUT),
        hide_programs=read.words("setup.hide_programs", setup.get("hide_programs")),
        files=tuple((str(k), str(v)) for k, v in files.items()),
        task=str(read.text("task", top.get("task"))),
        plan=plan,
        fix=read.calls("fix", top.get("fix")),
        agents=agents,
        expect=Expectation(
            status=status,
            kind=kind,
            subject=read.text("expect.subject", expect.get("subject"), required=False),
            unblock=read.text("expect.unblock", expect.get("unblock"), required=False),
            answer=read.text("expect.answer", expect.get("answer"), required=False),
        ),
        source=source,
        token_scopes=(
            ("repo", "read:org") if setup.get("token_scopes") is None
            else read.words("setup.token_scopes", setup.get("token_scopes"))
        ),
        unreadable=_workspace_paths(read, "setup.unreadable", read.words("setup.unreadable", setup.get("unreadable"))),
        run_as=read.text("setup.run_as", setup.get("run_as"), required=False),
        encoded_files=_encoded_files(read, setup.get("encoded_files") or {}),
        generated_files=_generated_files(read, setup.get("generated_files") or {}),
        api_fault=_choice(read, "setup.api_fault", setup.get("api_fault"), FAULTS, None),
        network=_choice(read, "setup.network", setup.get("network"), NETWORKS, "ok") or "ok",
        hold_locks=_locks(read, setup.get("hold_locks") or {}),
    )


def _file_specs(read: _Reader, where: str, raw: object, keys: frozenset[str]) -> list[tuple[str, Mapping[str, Any]]]:
    """Workspace file names, each with its mapping of ``keys``."""
    if not isinstance(raw, Mapping):
        raise read.error(where, f"must map file names to {{{', '.join(sorted(keys))}}}")
    _workspace_paths(read, where, tuple(map(str, raw)))
    return [(str(name), read.mapping(f"{where}.{name}", spec, keys)) for name, spec in raw.items()]


def _encoded_files(read: _Reader, raw: object) -> tuple[tuple[str, bytes], ...]:
    where = "setup.encoded_files"
    files = []
    for name, entry in _file_specs(read, where, raw, frozenset({"encoding", "text"})):
        encoding, text = entry.get("encoding"), entry.get("text")
        if not isinstance(encoding, str) or not isinstance(text, str):
            raise read.error(f"{where}.{name}", "needs an encoding and a text")
        try:
            files.append((name, text.encode(encoding)))
        except (LookupError, UnicodeEncodeError) as exc:
            raise read.error(f"{where}.{name}.encoding", str(exc)) from exc
    return tuple(files)


def _generated_files(read: _Reader, raw: object) -> tuple[tuple[str, str, int, str], ...]:
    where = "setup.generated_files"
    files = []
    for name, entry in _file_specs(read, where, raw, frozenset({"line", "lines", "last"})):
        line, lines, last = entry.get("line"), entry.get("lines"), entry.get("last", "")
        if not isinstance(line, str) or not isinstance(last, str):
            raise read.error(f"{where}.{name}", "line and last must be strings")
        if isinstance(lines, bool) or not isinstance(lines, int) or not 0 < lines <= 5_000_000:
            raise read.error(f"{where}.{name}.lines", "must be a whole number from 1 to 5000000")
        files.append((name, line, lines, last))
    return tuple(files)


def _workspace_paths(read: _Reader, where: str, names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        parts = PurePosixPath(name).parts
        if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
            raise read.error(where, f"{name!r} must be a relative path inside the workspace")
    return names


def _locks(read: _Reader, raw: object) -> tuple[tuple[str, str], ...]:
    where = "setup.hold_locks"
    if not isinstance(raw, Mapping):
        raise read.error(where, "must map workspace paths to a lock kind (sqlite or flock)")
    _workspace_paths(read, where, tuple(map(str, raw)))
    kinds = ("sqlite", "flock")
    return tuple((str(name), str(_choice(read, f"{where}.{name}", kind, kinds, None))) for name, kind in raw.items())


def _choice(read: _Reader, where: str, value: object, choices: tuple[str, ...], default: str | None) -> str | None:
    if value is None:
        return default
    if value not in choices:
        raise read.error(where, f"unknown value {value!r}; expected one of {', '.join(choices)}")
    return str(value)


def _missing(read: _Reader, where: str) -> Any:
    raise read.error(where, "is required")


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate one scenario file.

    Raises:
        ScenarioError: naming the file and field, for unreadable YAML, an unknown key, a
            missing required field, an unknown kind, state or agent.
    """
    source = str(path)
    text = read_text(path, what="the file", error=ScenarioError)
    data = parse_yaml(text, where=source, error=ScenarioError)
    return _parse(data, source)


def load_scenarios(directory: str | Path) -> list[Scenario]:
    """Every ``*.yaml`` scenario in ``directory``, sorted by name.

    Raises:
        ScenarioError: when ``directory`` is not a directory or holds no ``*.yaml`` file, for
            the first malformed file, or for two scenarios with one name.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise ScenarioError(f"{folder}: not a directory of scenario files")
    scenarios = [load_scenario(p) for p in sorted(folder.glob("*.yaml"))]
    if not scenarios:
        raise ScenarioError(f"{folder}: holds no *.yaml scenario file")
    seen: dict[str, str] = {}
    for scenario in scenarios:
        if scenario.name in seen:
            other = seen[scenario.name]
            raise ScenarioError(f"{scenario.source}: field 'name': {scenario.name!r} is also used by {other}")
        seen[scenario.name] = scenario.source
    return sorted(scenarios, key=lambda s: s.name)


def builtin_scenarios() -> list[Scenario]:
    """The scenarios bundled with unstuck (``unstuck/evals/scenarios/*.yaml``)."""
    folder = resources.files("unstuck.evals").joinpath("scenarios")
    with resources.as_file(folder) as path:
        return load_scenarios(path)
