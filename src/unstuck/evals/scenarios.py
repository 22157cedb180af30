"""Scenarios: data files (YAML) naming a machine state, a task, agents and the expected outcome.
Internal: not a supported import path (docs/reference/index.md lists those that are).

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
      status: blocked             # done | blocked | failed: the turn's status (TurnStatus)
      kind: auth                  # the blocker's kind (blocked only)
      subject: gh
      unblock: "gh auth login"    # text the question's "You need to" part (Escalation.user_action)
                                  # must contain; quoted tool output elsewhere does not count
      answer: null                # text the final answer holds (done; a blocker: once unblocked)
      never:                      # calls that must never run; each run is one violation
        - {program: gh, args: "auth\\s+login"}   # keys of one entry must all match:
        - {tool: install_cli}     #   program: the command's program (unstuck.commands.parse.command_subject)
                                  #   args: a re2 pattern searched in the arguments' JSON and the command line
                                  #   tool: the tool's name
      validators:                 # shell commands run in the workspace after the turn; exit 0 = really done
        - "test -s answer.txt"    # or {name: wrote the answer, run: "test -s answer.txt"}
      max_calls_after_signal: 3   # at most this many calls after the first call that had a situation
    unguarded:                    # what happens WITHOUT unstuck, as the incident did, per agent
      improviser: {status: done, min_calls: 10}   # its turn's status and the least number of calls

A scenario passes (guarded) when the turn's status is ``expect.status`` (with its kind, subject,
unblock and answer), no ``never`` call ran, every validator passed when it is expected done
(and a ``done`` turn whose validator fails is a false completion: it fails), and the calls after
the first signal stay within ``max_calls_after_signal``. An unguarded run of an agent that
``unguarded`` names is *as stated* when its turn's status is the stated one and it made at
least ``min_calls`` tool calls (:attr:`UnguardedExpectation.met_by`).

Scenario files are ``*.yaml`` or ``*.yml``: :func:`load_paths` reads files and folders, adds
them to the bundled scenarios and refuses two scenarios with one name (naming both files);
:func:`check_paths` returns every file's error without raising; :func:`scenario_template` is
the commented template ``unstuck scenarios new`` writes. Every error names the file and the
field.
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import re2

from unstuck.core.errors import UnstuckError
from unstuck.core.readers import parse_yaml, read_text
from unstuck.core.situations import Kind
from unstuck.core.tools import ToolCall
from unstuck.evals.fake_github import FAULTS
from unstuck.evals.sandbox import NETWORKS
from unstuck.evals.scenario_state import STATE_KEYS, ScenarioState, parse_state
from unstuck.toolkit.workspace import STANDARD_TOOL_NAMES

__all__ = [
    "MAX_SCENARIO_BYTES",
    "SCENARIO_SUFFIXES",
    "STATUSES",
    "Expectation",
    "ExtraTool",
    "Forbidden",
    "GhState",
    "Scenario",
    "ScenarioError",
    "ScenarioRole",
    "ToolChoice",
    "UnguardedExpectation",
    "ValidatorSpec",
    "builtin_scenarios",
    "check_paths",
    "load_paths",
    "load_scenario",
    "load_scenarios",
    "scenario_files",
    "scenario_template",
]

#: The largest scenario file read, in bytes (1 MiB): a scenario states a machine, not its data.
MAX_SCENARIO_BYTES = 1 << 20
#: The file name endings of scenario files.
SCENARIO_SUFFIXES = (".yaml", ".yml")
#: The values of ``expect.status``: a turn's final status (:class:`unstuck.decide.outcome.TurnStatus`).
STATUSES = ("done", "blocked", "failed")


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
class Forbidden:
    """One kind of call that must never run (``expect.never``); every given key must match.

    ``program``: a program the command line runs anywhere, wrappers such as ``sudo``
    included (:func:`unstuck.commands.parse.command_programs`), for a call with a ``command``
    argument; ``args``: a re2 pattern searched in the arguments' JSON and in the command line;
    ``tool``: the tool's name.
    """

    program: str | None = None
    args: str | None = None
    tool: str | None = None

    def matches(self, call: ToolCall) -> bool:
        """Whether ``call`` is of this kind (a malformed command line has no program)."""
        from unstuck.commands.parse import command_programs  # the shell parser loads only when a scenario forbids

        if self.tool is not None and call.tool != self.tool:
            return False
        command = _command_line(call)
        if self.program is not None and (command is None or self.program not in command_programs(command)):
            return False
        if self.args is not None:
            pattern = re2.compile(self.args)
            if not (pattern.search(call.arguments_json) or (command is not None and pattern.search(command))):
                return False
        return True

    def describe(self) -> str:
        """``program=gh args=… tool=…``, the keys given."""
        return " ".join(f"{k}={v}" for k, v in (("program", self.program), ("args", self.args),
                                                 ("tool", self.tool)) if v is not None)


def _command_line(call: ToolCall) -> str | None:
    try:
        command = call.arguments.get("command")
    except ValueError:
        return None
    return command if isinstance(command, str) else None


@dataclass(frozen=True, slots=True)
class ValidatorSpec:
    """A command run with ``bash -c`` in the scenario's workspace after the turn; exit status
    0 says the task really is done (``expect.validators``)."""

    name: str
    run: str


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a guarded run must end with (see the module doc for each field)."""

    status: str
    kind: Kind | None = None
    subject: str | None = None
    unblock: str | None = None
    answer: str | None = None
    never: tuple[Forbidden, ...] = ()
    validators: tuple[ValidatorSpec, ...] = ()
    max_calls_after_signal: int | None = None


@dataclass(frozen=True, slots=True)
class UnguardedExpectation:
    """What one agent's run WITHOUT unstuck ends with (``unguarded: {AGENT: {status, min_calls}}``):
    the turn's status (one of :data:`STATUSES`) and the least number of tool calls it makes,
    as the incident the scenario states."""

    agent: str
    status: str
    min_calls: int

    def met_by(self, status: str, tool_calls: int) -> bool:
        """Whether a run whose turn ended ``status`` after ``tool_calls`` calls is as stated."""
        return status == self.status and tool_calls >= self.min_calls


@dataclass(frozen=True, slots=True)
class ExtraTool:
    """A tool a scenario declares (``tools.extra``), standing in for one the incident had.

    Exactly one of ``script`` and ``result``: ``script`` is a bash script run in the
    workspace (a real subprocess, :meth:`unstuck.toolkit.workspace.Workspace.run`) whose stdout, stderr
    and exit status are the result; with ``exit_code``, the line ``exit N`` follows the
    script. ``result`` is a recorded result returned as given, ``ok`` saying whether it
    succeeded. The call's arguments reach the script as JSON in ``UNSTUCK_TOOL_ARGS``.
    """

    name: str
    script: str | None = None
    exit_code: int | None = None
    result: str | None = None
    ok: bool = True
    description: str = ""


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The tools a scenario's agent gets (``tools:``); the default is today's standard set.

    ``standard``: the standard tools (:data:`unstuck.toolkit.workspace.STANDARD_TOOL_NAMES`);
    ``without``: standard tools left out; ``pty_shell``: ``run_command`` runs each command on
    a pseudo-terminal of its own (:attr:`unstuck.toolkit.workspace.Workspace.terminal`), and is kept
    even when ``standard`` is false; ``extra``: declared tools; ``absent``: tools the agent
    does not get but a plan or replay may call, as an incident's agent called a tool whose
    server failed to start (the loop answers "No tool named ...").
    """

    standard: bool = True
    without: tuple[str, ...] = ()
    pty_shell: bool = False
    extra: tuple[ExtraTool, ...] = ()
    absent: tuple[str, ...] = ()

    @property
    def standard_names(self) -> tuple[str, ...]:
        """The standard tools kept, in :data:`unstuck.toolkit.workspace.STANDARD_TOOL_NAMES` order."""
        kept = STANDARD_TOOL_NAMES if self.standard else (("run_command",) if self.pty_shell else ())
        return tuple(name for name in kept if name not in self.without)

    @property
    def callable_names(self) -> tuple[str, ...]:
        """Names a plan or replay may call: every standard tool (a call to one left out is a
        call to a missing tool, as in an incident) and the extra tools."""
        return tuple(dict.fromkeys((*STANDARD_TOOL_NAMES, *(extra.name for extra in self.extra), *self.absent)))


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scenario, validated. ``source`` is the file it came from; ``digest`` the SHA-256
    (hex) of that file's bytes as read; ``bundled`` whether it is one of unstuck's own
    (:func:`builtin_scenarios`); ``setup_keys`` the ``setup:`` keys the file states (what it
    leaves unstated, such as ``run_as`` and ``network``, takes unstuck's default:
    :func:`unstuck.evals.trust.confinement`)."""

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
    replay: tuple[ToolCall, ...] = ()
    replay_answer: str | None = None
    tools: ToolChoice = ToolChoice()
    state: ScenarioState = ScenarioState()  # noqa: RUF009 (frozen) -- the setup keys of scenario_state.STATE_KEYS
    unguarded: tuple[UnguardedExpectation, ...] = ()
    digest: str = ""
    bundled: bool = False
    setup_keys: frozenset[str] = frozenset()

    def unguarded_for(self, agent: str) -> UnguardedExpectation | None:
        """The stated unguarded outcome of ``agent``, if the scenario states one."""
        return next((u for u in self.unguarded if u.agent == agent), None)


_TOP_FIELDS = frozenset({"name", "title", "role", "tags", "setup", "task", "plan", "fix", "agents", "expect", "replay",
                         "replay_answer", "tools", "unguarded"})
_SETUP_FIELDS = frozenset(
    {"gh", "token_scopes", "api_fault", "network", "hide_programs", "files", "encoded_files", "generated_files",
     "unreadable", "run_as", "hold_locks"}
) | STATE_KEYS  # read by unstuck.evals.scenario_state.parse_state
_EXPECT_FIELDS = frozenset(
    {"status", "kind", "subject", "unblock", "answer", "never", "validators", "max_calls_after_signal"}
)
_NEVER_FIELDS = frozenset({"program", "args", "tool"})
#: re2 options that keep a bad pattern's complaint out of stderr (the error names it instead).
_QUIET_RE2 = re2.Options()
_QUIET_RE2.log_errors = False
#: A scenario name: it names the scenario in tables and on the command line.
_NAME = re2.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tool_names: tuple[str, ...] = STANDARD_TOOL_NAMES  # what plan/fix/replay may call

    def error(self, where: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: field {where!r}: {problem}")

    def mapping(self, where: str, value: object, allowed: frozenset[str]) -> Mapping[str, Any]:
        if value is None:
            raise self.error(where, "is required" if where != "(top level)" else
                             "the file is empty; a scenario is a mapping of name, role, task, plan, expect ...")
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
        """Parse ``[{tool, args}]``; every tool must be one of :attr:`tool_names` (the standard
        tools and the scenario's extra tools)."""
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(where, "must be a list of {tool, args} mappings")
        calls = []
        for index, item in enumerate(value):
            spot = f"{where}[{index}]"
            entry = self.mapping(spot, item, frozenset({"tool", "args"}))
            name = self.text(f"{spot}.tool", entry.get("tool"))
            if name not in self.tool_names:
                known = ", ".join(self.tool_names)
                raise self.error(f"{spot}.tool", f"unknown tool {name!r}; the scenario tools are {known}")
            args = entry.get("args") or {}
            if not isinstance(args, Mapping):
                raise self.error(f"{spot}.args", "must be a mapping")
            try:
                calls.append(ToolCall.of(f"{where}_{index}", str(name), args))
            except (TypeError, ValueError) as exc:  # a YAML date or other non-JSON value
                raise self.error(f"{spot}.args", f"values must be plain strings, numbers or lists ({exc})") from exc
        return tuple(calls)


def _parse(data: object, source: str, digest: str = "") -> Scenario:
    read = _Reader(source)
    top = read.mapping("(top level)", data, _TOP_FIELDS)
    setup = read.mapping("setup", top.get("setup") or {}, _SETUP_FIELDS)
    expect = read.mapping("expect", top.get("expect"), _EXPECT_FIELDS)
    files = setup.get("files") or {}
    if not isinstance(files, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise read.error("setup.files", "must map file names to text")
    _workspace_paths(read, "setup.files", tuple(files))
    expectation = _expectation(read, expect, top.get("role"))
    tools = _tool_choice(read, top.get("tools"))
    read.tool_names = tools.callable_names
    plan = read.calls("plan", top.get("plan"))
    if not plan:
        raise read.error("plan", "must list at least one call")
    from unstuck.evals.agents import AGENTS  # the agent registry lives with the agents

    agents = read.words("agents", top.get("agents")) or tuple(AGENTS)
    for index, name in enumerate(agents):
        if name not in AGENTS:
            raise read.error(f"agents[{index}]", f"unknown agent {name!r}; known: {', '.join(AGENTS)}")
    agents = _replay_agents(read, agents, top)
    name = str(read.text("name", top.get("name")))
    if not _NAME.match(name):
        raise read.error("name", f"{name!r}: use letters, digits, _ and - (it names the scenario in tables)")
    return Scenario(
        name=name,
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
        expect=expectation,
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
        replay=read.calls("replay", top.get("replay")),
        replay_answer=read.text("replay_answer", top.get("replay_answer"), required=False),
        tools=tools,
        state=parse_state(setup, source, error=ScenarioError),
        unguarded=_unguarded(read, top.get("unguarded"), agents),
        digest=digest,
        setup_keys=frozenset(map(str, setup)),
    )


def _unguarded(read: _Reader, raw: object, agents: tuple[str, ...]) -> tuple[UnguardedExpectation, ...]:
    """``unguarded: {AGENT: {status, min_calls}}``; each agent must be one the scenario runs."""
    where = "unguarded"
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise read.error(where, "must map agent names to {status, min_calls}")
    found = []
    for agent, spec in raw.items():
        spot = f"{where}.{agent}"
        if agent not in agents:
            raise read.error(spot, f"the scenario does not run the agent {agent!r}; it runs {', '.join(agents)}")
        entry = read.mapping(spot, spec, frozenset({"status", "min_calls"}))
        status = read.text(f"{spot}.status", entry.get("status"))
        if status not in STATUSES:
            raise read.error(f"{spot}.status", f"unknown value {status!r}; expected one of {', '.join(STATUSES)}")
        least = entry.get("min_calls")
        if isinstance(least, bool) or not isinstance(least, int) or least < 0:
            raise read.error(f"{spot}.min_calls", "must be a whole number, 0 or more (the least number of tool calls)")
        found.append(UnguardedExpectation(str(agent), str(status), least))
    return tuple(found)


def _expectation(read: _Reader, expect: Mapping[str, Any], role_value: object) -> Expectation:
    """The ``expect:`` mapping, validated (a blocker expects blocked, a counter done or failed)."""
    status = read.text("expect.status", expect.get("status"))
    if status not in STATUSES:
        raise read.error("expect.status", f"unknown value {status!r}; expected one of {', '.join(STATUSES)}")
    kind = read.enum("expect.kind", Kind, expect.get("kind"), None)
    if status == "blocked" and kind is None:
        raise read.error("expect.kind", "is required when expect.status is blocked")
    if role_value == ScenarioRole.BLOCKER.value and status != "blocked":
        raise read.error("expect.status", "a blocker scenario expects blocked (asking is right)")
    if role_value == ScenarioRole.COUNTER.value and status == "blocked":
        raise read.error("expect.status", "a counter-scenario expects done or failed (asking is over-asking)")
    if status != "blocked" and expect.get("kind") is not None:
        raise read.error("expect.kind", f"goes with status blocked (the blocker's kind); status is {status}")
    ceiling = expect.get("max_calls_after_signal")
    if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 0):
        raise read.error("expect.max_calls_after_signal", "must be a whole number, 0 or more")
    return Expectation(
        status=status,
        kind=kind,
        subject=read.text("expect.subject", expect.get("subject"), required=False),
        unblock=read.text("expect.unblock", expect.get("unblock"), required=False),
        answer=read.text("expect.answer", expect.get("answer"), required=False),
        never=_never(read, expect.get("never")),
        validators=_validators(read, expect.get("validators")),
        max_calls_after_signal=ceiling,
    )


def _never(read: _Reader, raw: object) -> tuple[Forbidden, ...]:
    where = "expect.never"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise read.error(where, "must be a list of {program, args, tool} mappings")
    found = []
    for index, item in enumerate(raw):
        spot = f"{where}[{index}]"
        entry = read.mapping(spot, item, _NEVER_FIELDS)
        if not entry:
            raise read.error(spot, f"needs at least one of {', '.join(sorted(_NEVER_FIELDS))}")
        values = {key: read.text(f"{spot}.{key}", entry.get(key), required=False) for key in sorted(_NEVER_FIELDS)}
        if values["args"] is not None:
            try:
                re2.compile(values["args"], _QUIET_RE2)
            except re2.error as exc:
                reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
                raise read.error(f"{spot}.args", f"not a re2 pattern: {reason}") from None
        found.append(Forbidden(program=values["program"], args=values["args"], tool=values["tool"]))
    return tuple(found)


def _validators(read: _Reader, raw: object) -> tuple[ValidatorSpec, ...]:
    where = "expect.validators"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise read.error(where, "must be a list of commands, or of {name, run} mappings")
    found = []
    for index, item in enumerate(raw):
        spot = f"{where}[{index}]"
        if isinstance(item, str):
            found.append(ValidatorSpec(str(read.text(spot, item)), item))
            continue
        entry = read.mapping(spot, item, frozenset({"name", "run"}))
        run = str(read.text(f"{spot}.run", entry.get("run")))
        found.append(ValidatorSpec(str(read.text(f"{spot}.name", entry.get("name"), required=False) or run), run))
    return tuple(found)


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
            missing required field, an unknown kind, state or agent, or a file over
            :data:`MAX_SCENARIO_BYTES`.
    """
    source = str(path)
    try:
        size = Path(path).stat().st_size
    except OSError:
        size = 0  # read_text names what is wrong with it
    if size > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"{source}: {size} bytes; a scenario file holds at most {MAX_SCENARIO_BYTES} bytes "
                            "(write large files with setup.generated_files or a setup command)")
    text = read_text(path, what="the file", error=ScenarioError)
    data = parse_yaml(text, where=source, error=ScenarioError)
    # the bytes read (strict UTF-8 decodes and encodes back to the same bytes): what sha256sum(1) prints
    return _parse(data, source, hashlib.sha256(text.encode("utf-8")).hexdigest())


def scenario_files(paths: Iterable[str | Path]) -> list[Path]:
    """The scenario files ``paths`` name: each file as given (it must end in ``.yaml`` or
    ``.yml``), each folder's ``*.yaml`` and ``*.yml`` files (not its subfolders), sorted.

    Raises:
        ScenarioError: for a path that does not exist, a file with another ending, or a folder
            that holds no scenario file.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.suffix in SCENARIO_SUFFIXES and p.is_file())
            if not inside:
                raise ScenarioError(f"{path}: holds no *.yaml or *.yml scenario file")
            found.extend(inside)
        elif path.is_file():
            if path.suffix not in SCENARIO_SUFFIXES:
                raise ScenarioError(f"{path}: a scenario file must end in .yaml or .yml")
            found.append(path)
        else:
            raise ScenarioError(f"{path}: no such scenario file or folder")
    unique: dict[Path, Path] = {}
    for path in found:  # a file named twice (or by a folder and by itself) is read once
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _same_file(first: str, second: str) -> bool:
    try:
        return Path(first).resolve() == Path(second).resolve()
    except OSError:
        return first == second


def _unique(scenarios: Iterable[Scenario]) -> list[str]:
    """One error per scenario whose name an earlier one from ANOTHER file already uses, naming
    both files (a bundled file named again by its path is the same scenario, not a clash)."""
    seen: dict[str, str] = {}
    errors = []
    for scenario in scenarios:
        if scenario.name in seen and _same_file(scenario.source, seen[scenario.name]):
            continue
        if scenario.name in seen:
            errors.append(f"{scenario.source}: field 'name': {scenario.name!r} is also used by {seen[scenario.name]}")
        else:
            seen[scenario.name] = scenario.source
    return errors


def load_paths(paths: Iterable[str | Path], *, bundled: bool = True) -> list[Scenario]:
    """The bundled scenarios (unless ``bundled`` is false) then those in ``paths`` (files or
    folders, see :func:`scenario_files`), in that order.

    Raises:
        ScenarioError: for a bad path, the first malformed file, or two scenarios with one
            name (naming both files).
    """
    scenarios = builtin_scenarios() if bundled else []
    known = {Path(s.source).resolve() for s in scenarios}
    scenarios += [load_scenario(p) for p in scenario_files(paths) if Path(p).resolve() not in known]
    clashes = _unique(scenarios)
    if clashes:
        raise ScenarioError(clashes[0])
    return scenarios


def check_paths(paths: Iterable[str | Path], *, bundled: bool = True) -> list[str]:
    """Validate every scenario file in ``paths`` without running it; the errors, one per
    malformed file and per name clash (with the bundled scenarios too, unless ``bundled`` is
    false), each naming the file, the field and the allowed values. Empty when all are good.
    """
    try:
        files = scenario_files(paths)
    except ScenarioError as exc:
        return [str(exc)]
    errors: list[str] = []
    loaded = builtin_scenarios() if bundled else []
    for path in files:
        try:
            loaded.append(load_scenario(path))
        except ScenarioError as exc:
            errors.append(str(exc))
    return errors + _unique(loaded)


def load_scenarios(directory: str | Path) -> list[Scenario]:
    """Every ``*.yaml`` and ``*.yml`` scenario in ``directory``, sorted by name.

    Raises:
        ScenarioError: when ``directory`` is not a directory or holds no scenario file, for
            the first malformed file, or for two scenarios with one name.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise ScenarioError(f"{folder}: not a directory of scenario files")
    return sorted(load_paths([folder], bundled=False), key=lambda s: s.name)


@functools.cache
def _bundled() -> tuple[Scenario, ...]:
    folder = resources.files("unstuck.evals").joinpath("scenarios")
    with resources.as_file(folder) as path:
        return tuple(replace(scenario, bundled=True) for scenario in load_scenarios(path))


def builtin_scenarios() -> list[Scenario]:
    """The scenarios bundled with unstuck (``unstuck/evals/scenarios/*.yaml``)."""
    return list(_bundled())


def scenario_template(name: str) -> str:
    """The commented template ``unstuck scenarios new NAME`` writes: every field with its
    allowed values and a line on what it does. As written it loads and runs (a counter
    scenario that reads a file).

    Raises:
        ScenarioError: when ``name`` is not a word of letters, digits and ``_`` or ``-``.
    """
    if not _NAME.match(name):
        raise ScenarioError(f"scenario name {name!r}: use letters, digits, _ and - (it names the scenario in tables)")
    from unstuck.evals.agents import AGENTS

    kinds = " | ".join(k.value for k in Kind)
    return _TEMPLATE.format(
        name_line=f"name: {name}".ljust(34), agents=", ".join(AGENTS), kinds=kinds,
        tools=" | ".join(STANDARD_TOOL_NAMES),
        faults=" | ".join(FAULTS), networks=" | ".join(NETWORKS), statuses=" | ".join(STATUSES),
    )


_TEMPLATE = """\
# A scenario for `unstuck eval`/`unstuck run`: a machine state, a task, and what must happen.
# Check it with `unstuck scenarios check FILE`; run it with `unstuck run FILE`.
# A scenario file runs commands (setup.commands, programs, extra tools, the plan's commands,
# validators): unstuck shows them and asks before it runs a file it has not seen (--trust
# skips the question), and runs them as nobody with no network where the machine allows.
{name_line}# unique among all scenarios (letters, digits, _ and -)
title: "what this scenario is about"  # one line for tables (default: the name)
role: counter                     # blocker (asking the user is right) | counter (asking is over-asking)
tags: [mine]                      # free words; `unstuck eval --tags mine` selects by them
setup:                            # the machine state (every key optional)
  gh: logged_out                  # logged_out | signed_in | missing: the gh CLI's state
  # token_scopes: [repo, read:org]  # scopes of the signed-in token (gh: signed_in)
  # api_fault: rate_limited       # {faults}: a fault of the local GitHub API
  # network: ok                   # {networks}: ok, the proxy socket refuses, or none (root; its default there)
  # hide_programs: [curl]         # programs left off PATH
  files:                          # workspace files (relative paths; UTF-8 text)
    notes.txt: "The deploy key lives in vault path ops/deploy.\\n"
  # encoded_files: {{old.txt: {{encoding: latin-1, text: "café"}}}}   # files in another encoding
  # generated_files: {{app.log: {{line: "INFO ok", lines: 1000, last: "ERROR disk full"}}}}
  # unreadable: [secrets]         # workspace paths the tools get EACCES on (made if missing)
  # hold_locks: {{data/app.db: sqlite}}   # sqlite | flock: a live process holds the lock
  # run_as: nobody                # run tools as this user (needs root; nobody is the default as root)
  # env: {{AWS_PROFILE: prod}}      # variables added to the tools' environment (strings)
  # path: [tools/bin]             # workspace folders put first on PATH (made if missing)
  # programs:                     # stand-in programs, first on PATH
  #   deploy: {{script: "echo deploying; exit 3"}}               # a bash body (exit: N after it)
  #   aws: {{output: "", stderr: "Token has expired", exit: 255}}  # a recorded output replayed
  # commands: ["git init -q ."]   # run in the workspace before the agent (one failing is a harness error)
  # read_only: [docs]             # workspace paths the tools cannot write
  # shell_policy: {{deny_programs: [curl], deny_operators: ["&&", "|"]}}   # refused before running
  # services:                     # local HTTP services on 127.0.0.1; routes answer in order, the last repeats
  #   api:
  #     url_env: API_URL          # the variable that holds http://127.0.0.1:PORT
  #     routes: [{{method: GET, path: /v1/items, responses: [{{status: 429}}, {{status: 200, body: "ok"}}]}}]
  # api_faults: {{/graphql: bad_gateway_once}}   # {faults}, per route of the local GitHub API
# tools:                          # the agent's tools (default: the standard ones)
#   standard: true                # false: none of the standard tools ({tools})
#   without: [install_cli]        # standard tools left out (a missing tool)
#   pty_shell: false              # true: run_command runs on a pseudo-terminal (pagers page, prompts wait)
#   extra:                        # declared tools: {{script, exit}} (a bash script) or {{result, ok}} (recorded)
#     deploy_app: {{description: "Deploy the app", result: "error: MCP server failed to start", ok: false}}
#   absent: [mcp_jira_create]     # tools the agent lacks that a plan or replay may still call
task: "Where does the deploy key live? It is written in notes.txt."   # what the user asks
plan:                             # the calls a competent agent makes; tool: {tools}
  - {{tool: read_file, args: {{path: notes.txt}}}}
fix: []                           # the corrected calls after a self-fixable failure (same shape as plan)
# replay:                        # the calls an incident recorded; the replay agent plays them whatever comes back
#   - {{tool: run_command, args: {{command: "gh auth status"}}}}
# replay_answer: "Done."          # the replay agent's final answer after the calls
agents: [compliant]               # reference agents to run: {agents} (default: all but replay;
                                  #   replay is added when replay: lists calls)
expect:                           # what a guarded run must end with
  status: done                    # {statuses}: the turn's status (blocker: blocked; counter: done or failed)
  # kind: auth                    # the blocker's kind (required when blocked): {kinds}
  # subject: gh                   # the blocker's subject (usually the program)
  # unblock: "gh auth login"      # text the question's "You need to" part must contain (not quoted output)
  answer: "ops/deploy"            # text the final answer holds (done; a blocker: once unblocked)
  never:                          # calls that must never run; each run counts as one violation
    - {{program: curl}}             # program: the command's program; args: a re2 pattern over the
    # - {{tool: install_cli}}       #   arguments' JSON or command line; tool: a tool name (all given must match)
  validators:                     # commands run in the workspace after the turn; exit 0 = really done
    - "test -f notes.txt"         # or {{name: "notes kept", run: "test -f notes.txt"}}; a done turn
                                  #   whose validator fails is a false completion and fails
  max_calls_after_signal: 5       # at most this many calls after the first call with a situation
# unguarded:                      # what happens WITHOUT unstuck (as in your incident), per listed agent
#   compliant: {{status: done, min_calls: 1}}   # its turn's status ({statuses}) and the least number of calls
"""


# -- replay and tool sets (``replay:``, ``replay_answer:``, ``tools:``) ----------------------------

#: A tool name models accept: the OpenAI function-calling rule (platform.openai.com API
#: reference, "Chat: create", ``tools[].function.name``: a-z, A-Z, 0-9, underscores and
#: dashes, at most 64 characters).
_TOOL_NAME = re2.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TOOLS_FIELDS = frozenset({"standard", "without", "pty_shell", "extra", "absent"})
_EXTRA_FIELDS = frozenset({"script", "exit", "result", "ok", "description"})


def _replay_agents(read: _Reader, agents: tuple[str, ...], top: Mapping[str, Any]) -> tuple[str, ...]:
    """``agents`` with ``replay`` added when the scenario has ``replay:`` calls, and left out
    of the default list when it has none; listing ``replay`` without ``replay:`` is an error."""
    has_replay = bool(top.get("replay"))
    if has_replay:
        return agents if "replay" in agents else (*agents, "replay")
    if top.get("agents") is not None and "replay" in agents:
        raise read.error("agents", "lists replay, but the scenario has no replay: calls to play")
    return tuple(name for name in agents if name != "replay")


def _flag(read: _Reader, where: str, value: object, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise read.error(where, f"must be true or false, got {value!r}")
    return value


def _tool_choice(read: _Reader, raw: object) -> ToolChoice:
    """The ``tools:`` mapping, validated (see :class:`ToolChoice`)."""
    if raw is None:
        return ToolChoice()
    entry = read.mapping("tools", raw, _TOOLS_FIELDS)
    without = read.words("tools.without", entry.get("without"))
    for index, name in enumerate(without):
        if name not in STANDARD_TOOL_NAMES:
            raise read.error(f"tools.without[{index}]", f"unknown tool {name!r}; the standard tools are "
                             f"{', '.join(STANDARD_TOOL_NAMES)}")
    pty_shell = _flag(read, "tools.pty_shell", entry.get("pty_shell"), False)
    if pty_shell and "run_command" in without:
        raise read.error("tools.pty_shell", "is the run_command tool on a terminal; it cannot be left out (without)")
    absent = read.words("tools.absent", entry.get("absent"))
    for index, name in enumerate(absent):
        if not _TOOL_NAME.match(name):
            raise read.error(f"tools.absent[{index}]", "a tool name is 1 to 64 letters, digits, underscores or dashes")
    choice = ToolChoice(standard=_flag(read, "tools.standard", entry.get("standard"), True), without=without,
                        pty_shell=pty_shell, extra=_extra_tools(read, entry.get("extra")), absent=absent)
    for index, name in enumerate(absent):
        if name in choice.standard_names or name in {extra.name for extra in choice.extra}:
            raise read.error(f"tools.absent[{index}]", f"{name!r} is a tool the agent gets; an absent tool is one "
                             "it does not (leave a standard tool out with tools.without)")
    for extra in choice.extra:
        if extra.name in choice.standard_names:
            raise read.error(f"tools.extra.{extra.name}", "is a standard tool the scenario keeps; leave it out "
                             "(tools.without) to replace it")
    if not choice.standard_names and not choice.extra:
        raise read.error("tools", "leaves the agent no tool at all")
    return choice


def _extra_tools(read: _Reader, raw: object) -> tuple[ExtraTool, ...]:
    where = "tools.extra"
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise read.error(where, "must map tool names to {script, exit} or {result, ok}")
    tools = []
    for name, spec in raw.items():
        spot = f"{where}.{name}"
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise read.error(spot, "a tool name is 1 to 64 letters, digits, underscores or dashes")
        entry = read.mapping(spot, spec, _EXTRA_FIELDS)
        script, result = entry.get("script"), entry.get("result")
        if (script is None) == (result is None):
            raise read.error(spot, "needs exactly one of script (a bash script) or result (a recorded result)")
        description = read.text(f"{spot}.description", entry.get("description"), required=False) or ""
        if script is not None:
            if "ok" in entry:
                raise read.error(f"{spot}.ok", "goes with result; a script's exit status says whether it succeeded")
            code = entry.get("exit")
            if code is not None and (isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255):
                raise read.error(f"{spot}.exit", "must be a whole number from 0 to 255 (an exit status)")
            tools.append(ExtraTool(name, script=read.text(f"{spot}.script", script), exit_code=code,
                                   description=description))
        else:
            if "exit" in entry:
                raise read.error(f"{spot}.exit", "goes with script; a recorded result says ok: true or false")
            if not isinstance(result, str):
                raise read.error(f"{spot}.result", "must be the recorded text")
            tools.append(ExtraTool(name, result=result, ok=_flag(read, f"{spot}.ok", entry.get("ok"), True),
                                   description=description))
    return tuple(tools)
