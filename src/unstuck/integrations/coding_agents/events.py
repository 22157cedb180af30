"""The vocabulary every coding-agent hook mapping shares (issue 26): which agent, which hook
fired, what it said, and what the guard answers.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Claude Code, Codex CLI and Gemini CLI each run a command before and after every tool call,
when a session starts and when the agent is about to stop, with a JSON payload on stdin; the
command's stdout (JSON) and exit code tell the agent to go on, refuse the call with a reason the
model reads, add context, or stop. Each agent names its events and fields its own way; a
mapping (:class:`AgentHooks`, one module per agent) reads its agent's payloads into one
:class:`HookEvent` and writes one :class:`HookReply` back in its agent's own form, so the guard
server (:mod:`unstuck.integrations.coding_agents.server`) drives the public
:class:`unstuck.Guard` the same way for every agent:

* :attr:`HookKind.PRE_TOOL` → :meth:`unstuck.Guard.before` (rule 1, the latch, a lesson's probe);
* :attr:`HookKind.POST_TOOL` and :attr:`HookKind.POST_TOOL_FAILURE` → :meth:`unstuck.Guard.after`
  with :attr:`HookEvent.output` (a :class:`~unstuck.core.tools.CommandOutput` for shell tools:
  exit code and streams as the agent reported them);
* :attr:`HookKind.SESSION_START` → the known blockers on this machine as added context;
* :attr:`HookKind.STOP` → a session stopping with a blocker open does not read as done.

Shapes::

    HookEvent(agent=Agent.CLAUDE_CODE, kind=HookKind.PRE_TOOL, event_name="PreToolUse",
              session_id="abc", cwd="/repo", call=ToolCall("toolu_1", "Bash", '{"command": "gh pr view 1"}'),
              raw_tool="Bash")
    HookReply(action=HookAction.DENY, reason="gh is not signed in ...", user_message=None)

This module imports no agent and runs nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from unstuck.core.errors import UnstuckError
from unstuck.core.tools import CommandOutput, ToolCall, ToolResult
from unstuck.toolkit.specs import ToolSpec

__all__ = [
    "CI_VARIABLES",
    "OWN_MARKER",
    "Agent",
    "AgentHooks",
    "HookAction",
    "HookEntry",
    "HookEvent",
    "HookKind",
    "HookPayloadError",
    "HookReply",
    "Scope",
    "ci_hint",
    "is_own_group",
]

#: A word every hook command unstuck installs contains (the client script is called
#: ``unstuck-hook``): an entry of an agent's settings is unstuck's own exactly when every
#: command in it contains this marker (:func:`is_own_group`); ``uninstall`` removes those and
#: nothing else.
OWN_MARKER = "unstuck-hook"

#: Environment variables that say a CI job runs the session: ``CI`` (set by GitHub Actions,
#: GitLab CI, CircleCI, Travis CI, Buildkite and others: each one's "default environment
#: variables" page), ``GITHUB_ACTIONS``, ``GITLAB_CI``, ``BUILDKITE``, ``TF_BUILD`` (Azure
#: Pipelines) and ``JENKINS_URL`` (Jenkins, which sets no ``CI``).
CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "TF_BUILD", "JENKINS_URL")

#: Where hook settings are written: the user's own (under ``$HOME``) or the project's
#: (under the project folder).
Scope = Literal["user", "project"]


class Agent(enum.StrEnum):
    """A coding agent whose hooks unstuck installs, by the name the CLI takes
    (``unstuck hooks install claude-code``)."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    GEMINI = "gemini"


class HookKind(enum.StrEnum):
    """What a hook fired for, whatever the agent calls it.

    Each agent's mapping names its own event for each kind (Claude Code ``PreToolUse``, Gemini
    CLI ``BeforeTool``, ...); :attr:`HookEvent.event_name` keeps the agent's name.
    """

    SESSION_START = "session_start"
    PRE_TOOL = "pre_tool"
    POST_TOOL = "post_tool"
    POST_TOOL_FAILURE = "post_tool_failure"
    STOP = "stop"


class HookAction(enum.StrEnum):
    """What the guard answers a hook.

    * ``allow``: go on as if no hook ran (the reply's ``context``, when set, is added for the model);
    * ``deny``: a pre-tool hook refuses the call; ``reason`` is what the model reads instead of
      the tool's output. On a post-tool hook it tells the model its call's result reads as a
      failure (the call already ran);
    * ``stop``: the agent stops (a blocker is open and the question is asked); ``reason`` is why,
      ``user_message`` the question the user reads;
    * ``context``: add ``context`` for the model (a session start's known blockers, a post-tool
      hook's guidance) and go on.
    """

    ALLOW = "allow"
    DENY = "deny"
    STOP = "stop"
    CONTEXT = "context"


class HookPayloadError(UnstuckError, ValueError):
    """A hook payload that does not read as the agent's documented shape: not a JSON object,
    an unknown event, a missing or mistyped field.

    Attributes:
        agent: the agent whose payload it was.
        event: the event name the hook was run for (as the agent names it).
        field: the payload field at fault (dotted, ``"tool_input.command"``), or ``""`` for
            the payload as a whole.
    """

    def __init__(self, agent: Agent, event: str, field_name: str, problem: str) -> None:
        where = f" field {field_name!r}" if field_name else ""
        super().__init__(f"{agent.value} {event} hook payload{where}: {problem}")
        self.agent, self.event, self.field = agent, event, field_name


@dataclass(frozen=True, slots=True)
class HookEvent:
    """One hook, read from the agent's payload (and the hook process's environment).

    Attributes:
        agent: the agent that ran the hook.
        kind: what it fired for.
        event_name: the agent's own name for the event (``"PreToolUse"``); a reply is rendered
            for it.
        session_id: the agent's session id; the guard server keeps one guard per
            ``(agent, session_id)``.
        cwd: the agent's working folder, as the payload gives it (``""`` when it does not).
        call: the tool call, on tool events: ``id`` is the agent's own call id (Claude Code's
            ``tool_use_id``), ``tool`` the name of the :class:`~unstuck.toolkit.specs.ToolSpec`
            that :meth:`AgentHooks.tool_spec` gives for it, ``arguments`` the tool's input.
            ``None`` on session start and stop.
        output: on post-tool events, what the tool returned: a
            :class:`~unstuck.core.tools.CommandOutput` for shell tools (exit code and the two
            streams as the agent reported them), else a :class:`~unstuck.core.tools.ToolResult`
            (or raw text). ``None`` otherwise.
        unattended_hint: what said the session is unattended, named (``"install --unattended"``,
            ``"CI=true"``, ``"claude -p (CLAUDE_CODE_ENTRYPOINT=sdk-cli)"``): the hook client's
            flag, the agent's headless mode as the agent itself reports it, or a CI environment
            variable; ``None`` when nothing said so. Never guessed from how a console looks.
        raw_tool: the tool name exactly as the payload gave it (``"mcp__github__get_issue"``);
            ``""`` on events without a tool.
        stop_active: on a stop event, the agent says it is already continuing because a stop
            hook blocked it before (Claude Code's ``stop_hook_active``): blocking again would
            loop.
        source: on a session start, how it started as the agent says (``"startup"``,
            ``"resume"``, ``"clear"``, ``"compact"``); ``""`` otherwise.
        text: on a stop event, the agent's last message when the payload carries it; ``""``
            otherwise.
    """

    agent: Agent
    kind: HookKind
    event_name: str
    session_id: str
    cwd: str = ""
    call: ToolCall | None = None
    output: CommandOutput | ToolResult | str | None = None
    unattended_hint: str | None = None
    raw_tool: str = ""
    stop_active: bool = False
    source: str = ""
    text: str = ""

    @property
    def unattended(self) -> bool:
        """Something named said the session runs with nobody at the console."""
        return self.unattended_hint is not None


@dataclass(frozen=True, slots=True)
class HookReply:
    """The guard's answer to one hook, before an agent's mapping renders it.

    Attributes:
        action: what the agent is to do (:class:`HookAction`).
        reason: what the model reads (a refusal's text, why the agent stops); ``""`` when
            there is nothing to say.
        context: text added for the model (known blockers at session start, a post-tool
            note), or ``None``.
        user_message: what the user sees (the escalation's three parts: what is blocked, the
            exact unblock, what happens next), shown by the agent as its system message or stop
            reason; ``None`` when the user needs to see nothing.
    """

    action: HookAction = HookAction.ALLOW
    reason: str = ""
    context: str | None = None
    user_message: str | None = None


@dataclass(frozen=True, slots=True)
class HookEntry:
    """One group of hook commands to put in an agent's settings.

    All three agents keep hooks as ``{"hooks": {EVENT: [GROUP, ...]}}`` where a group is a JSON
    object such as ``{"matcher": "*", "hooks": [{"type": "command", "command": "..."}]}``;
    ``install`` appends each entry's ``group`` to the list under ``event_name`` (creating it),
    after the user's own groups, and ``uninstall`` removes exactly the groups
    :func:`is_own_group` recognises.

    Attributes:
        event_name: the agent's event name (the key under ``hooks``).
        group: the JSON object appended to that event's list.
    """

    event_name: str
    group: Mapping[str, Any] = field(default_factory=dict)


def is_own_group(group: object) -> bool:
    """A settings hook group is unstuck's own: a JSON object whose ``hooks`` list is non-empty
    and every command of it contains :data:`OWN_MARKER` (a user's group that merely mentions
    unstuck next to its own commands is the user's)."""
    if not isinstance(group, Mapping):
        return False
    hooks = group.get("hooks")
    if not isinstance(hooks, list) or not hooks:
        return False
    return all(isinstance(h, Mapping) and OWN_MARKER in str(h.get("command", "")) for h in hooks)


def ci_hint(env: Mapping[str, str]) -> str | None:
    """The first CI variable of ``env`` (:data:`CI_VARIABLES`) that is set and does not read as
    no (``""``, ``0``, ``false``, ``no``, ``off``), named with its value (``"CI=true"``; the value
    cut to 40 characters), or ``None``."""
    for name in CI_VARIABLES:
        value = env.get(name)
        if value is not None and value.strip().lower() not in ("", "0", "false", "no", "off"):
            return f"{name}={value.strip()[:40]}"
    return None


@runtime_checkable
class AgentHooks(Protocol):
    """One agent's hook mapping: reading its payloads, writing its replies, describing its tools
    and where its hook settings live. Implemented by
    :mod:`~unstuck.integrations.coding_agents.claude_code`,
    :mod:`~unstuck.integrations.coding_agents.codex` and
    :mod:`~unstuck.integrations.coding_agents.gemini`; each cites its agent's hook documentation
    or source for every field it reads and writes.

    A mapping whose agent reads its settings file with comments (``//``, ``/* */``) says so with
    a class attribute ``settings_comments = True`` (optional; ``False`` when absent): ``unstuck
    hooks install`` then reads such a file without refusing it, and keeps the comments.
    """

    @property
    def agent(self) -> Agent:
        """The agent this mapping is for."""
        ...

    @property
    def event_names(self) -> Mapping[str, HookKind]:
        """The agent's hook event names unstuck installs, each with its kind."""
        ...

    def parse(self, event_name: str, payload: Mapping[str, Any], env: Mapping[str, str]) -> HookEvent:
        """Read one hook's payload (the JSON object on the hook's stdin) and the hook process's
        environment (for the agent's headless flag and CI variables) into a :class:`HookEvent`.

        Raises:
            HookPayloadError: naming the agent, the event and the field, for an unknown event
                or a payload that is not the documented shape.
        """
        ...

    def render(self, event: HookEvent, reply: HookReply) -> tuple[str, int]:
        """The hook command's stdout (text, usually one JSON object; ``""`` for nothing) and its
        exit code that make the agent do what ``reply`` says for ``event``, exactly as the
        agent's hook documentation defines them."""
        ...

    def tool_spec(self, name: str) -> ToolSpec:
        """The :class:`~unstuck.toolkit.specs.ToolSpec` the guard knows the agent's tool
        ``name`` by (the name as :attr:`HookEvent.call` carries it): shell tools as
        command-line tools (the shell parser, their subjects, the interactive-call catalogue),
        file tools with their path as subject, web fetch, MCP tools in the agent's naming form;
        any other tool as a read tool named as the agent names it."""
        ...

    def settings_path(self, scope: Scope, home: Path, project: Path) -> Path:
        """The settings file the agent reads hooks from, for the user (under ``home``) or the
        project (under ``project``)."""
        ...

    def install_entries(self, command: str) -> Sequence[HookEntry]:
        """The hook groups to install, each running ``command`` (the hook client with its
        arguments, containing :data:`OWN_MARKER`) followed by the event's name as its last
        argument, in the agent's settings form."""
        ...
