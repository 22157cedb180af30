"""Claude Code (``@anthropic-ai/claude-code`` 2.1.x) through its hooks: its payloads read into
:class:`~unstuck.integrations.coding_agents.events.HookEvent` and the guard's replies written in
the form Claude Code reads.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Sources: Claude Code's hooks reference (https://code.claude.com/docs/en/hooks: "Hook input",
"Hook output", "Exit code output", "JSON output", and each event's "Decision control"); the
hook-output schema compiled into the 2.1.332 binary (``hookSpecificOutput`` per event:
``PreToolUse``: ``permissionDecision`` ``allow|deny|ask|defer``, ``permissionDecisionReason``,
``additionalContext``; ``PostToolUse``/``PostToolUseFailure``/``SessionStart``:
``additionalContext``; the common fields ``continue``, ``stopReason``, ``decision``
``approve|block``, ``reason``, ``systemMessage``, ``suppressOutput``); the tool inputs of
``sdk-tools.d.ts`` shipped in the npm package (``BashInput.command``, ``FileReadInput.file_path``,
``WebFetchInput.url``, ``BashOutput.stdout/stderr/interrupted``); and the payloads the real
2.1.332 sent to a recording hook (``claude -p`` against a loopback Messages API server):

* every event: ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``;
* ``SessionStart``: ``source`` (``startup``, ``resume``, ``clear``, ``compact``);
* ``PreToolUse``: ``tool_name``, ``tool_input``, ``tool_use_id``;
* ``PostToolUse`` (only calls that succeeded): ``tool_response``; for ``Bash`` ``{"stdout",
  "stderr", "interrupted", "isImage", "noOutputExpected"}`` (no exit status: it was 0);
* ``PostToolUseFailure``: ``error``, for ``Bash`` ``"Exit code N\\n"`` then the command's output
  (its two streams as one text), and ``is_interrupt``;
* ``Stop``: ``stop_hook_active``, ``last_assistant_message``.

Whether anybody is at the console: Claude Code sets ``CLAUDE_CODE_SESSION_ATTENDED`` in the
environment of the processes it starts, hooks included (``"0"`` under ``claude -p``, ``"1"`` in
the interactive terminal; read from the 2.1.332 binary, which sets it for every child process),
and ``CLAUDE_CODE_ENTRYPOINT`` (``sdk-cli`` for ``-p``). :func:`unattended_hint` reads those and
the CI variables, and names the one that said so.

What the user sees (measured on 2.1.332): in the interactive terminal, ``stopReason`` and
``systemMessage``; under ``claude -p --output-format json`` a hook's ``continue: false`` ends
the run with ``"terminal_reason": "hook_stopped"`` (a ``Stop`` hook's: ``"stop_hook_prevented"``)
and neither text; ``--output-format stream-json --verbose`` carries ``systemMessage`` as a
``system`` event. So a stop carries the question in both fields, and the guard server keeps
it for ``unstuck answer`` and its event stream. ``continue: false`` ends the session from
``PreToolUse``, ``PostToolUse`` and ``Stop``, but 2.1.332 ignores it from ``PostToolUseFailure``
(measured: the model's next call still came): a session that escalates there is stopped at its
next ``PreToolUse`` (the guard is latched) or at its ``Stop``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from unstuck.core.tools import CommandOutput, ToolCall, ToolResult
from unstuck.integrations.coding_agents.events import (
    Agent,
    HookAction,
    HookEntry,
    HookEvent,
    HookKind,
    HookPayloadError,
    HookReply,
    Scope,
    ci_hint,
)
from unstuck.integrations.coding_agents.tools import fetch_spec, file_spec, mcp_spec, other_spec, shell_spec
from unstuck.toolkit.specs import ToolSpec

__all__ = [
    "EVENTS",
    "HOOKS",
    "HOOK_TIMEOUT_S",
    "ClaudeCodeHooks",
    "command_output",
    "unattended_hint",
]

#: Claude Code's event names unstuck installs, with their kinds.
EVENTS: Mapping[str, HookKind] = {
    "SessionStart": HookKind.SESSION_START,
    "PreToolUse": HookKind.PRE_TOOL,
    "PostToolUse": HookKind.POST_TOOL,
    "PostToolUseFailure": HookKind.POST_TOOL_FAILURE,
    "Stop": HookKind.STOP,
}

#: Seconds Claude Code gives each installed hook command (the ``timeout`` of a command hook,
#: in seconds: hooks reference, "Hook handler fields"): longer than an attended session's wait
#: for its user's answer (:data:`unstuck.integrations.coding_agents.client.ASK_WAIT_CLIENT_S`),
#: so the agent does not cut the question short. A guard server that does not answer never
#: holds a hook that long: the client gives up after its own timeout (10 s) and fails open.
HOOK_TIMEOUT_S = 330

#: Claude Code's file tools (sdk-tools.d.ts): name → (the argument holding the path, writes).
_FILE_TOOLS: Mapping[str, tuple[str, bool]] = {
    "Read": ("file_path", False), "Write": ("file_path", True), "Edit": ("file_path", True),
    "MultiEdit": ("file_path", True), "NotebookEdit": ("notebook_path", True),
    "Glob": ("path", False), "Grep": ("path", False),
}
#: Tools whose whole job is a hand-off to a person (``AskUserQuestion``: "Questions to ask the
#: user", sdk-tools.d.ts): refused before dispatch when nobody is at the console (rule 1).
_PERSON_TOOLS = frozenset({"AskUserQuestion"})
#: ``Exit code N`` at the start of a failed ``Bash`` call's ``error`` (2.1.332's wording).
_EXIT_CODE = re.compile(r"\AExit code (-?\d+)\r?\n?")
#: An MCP tool's name: ``mcp__<server>__<tool>`` (hooks reference, "Matching MCP tools").
_MCP_NAME = re.compile(r"\Amcp__(.+?)__(.+)\Z")


def unattended_hint(env: Mapping[str, str]) -> str | None:
    """What in the hook's environment says nobody is at the console, named
    (``"CLAUDE_CODE_SESSION_ATTENDED=0"``, ``"CI=true"``), or ``None``: Claude Code's own word
    first (``CLAUDE_CODE_SESSION_ATTENDED`` ``0``; with it absent, ``CLAUDE_CODE_ENTRYPOINT``
    ``sdk-*``, the ``-p``/SDK entry points), then a CI variable
    (:func:`~unstuck.integrations.coding_agents.events.ci_hint`)."""
    attended = env.get("CLAUDE_CODE_SESSION_ATTENDED")
    if attended is not None and attended.strip() == "0":
        return "CLAUDE_CODE_SESSION_ATTENDED=0"
    entry = env.get("CLAUDE_CODE_ENTRYPOINT", "")
    if attended is None and entry.startswith("sdk"):
        return f"CLAUDE_CODE_ENTRYPOINT={entry}"
    return ci_hint(env)


def command_output(command: str, response: object, error: str | None) -> CommandOutput | None:
    """A ``Bash`` call's result as a :class:`~unstuck.core.tools.CommandOutput`: from a
    ``PostToolUse`` ``tool_response`` (``stdout``, ``stderr``; exit status 0, or 124 when
    ``interrupted``, what coreutils ``timeout`` exits with for a command stopped before it
    ended), or from a ``PostToolUseFailure`` ``error`` (``Exit code N`` then the output, as
    stderr). ``None`` when neither reads so (an error without an exit status)."""
    if error is not None:
        found = _EXIT_CODE.match(error)
        if found is None:
            return None
        return CommandOutput(command, int(found.group(1)), "", error[found.end():])
    if not isinstance(response, Mapping):
        return None
    stdout, stderr = response.get("stdout", ""), response.get("stderr", "")
    if not isinstance(stdout, str) or not isinstance(stderr, str):
        return None
    if response.get("interrupted") is True:
        note = "(interrupted before it ended: Claude Code's tool_response.interrupted)"
        return CommandOutput(command, 124, stdout, f"{stderr.rstrip()}\n{note}".lstrip("\n"))
    return CommandOutput(command, 0, stdout, stderr)


def _response_text(response: object) -> str:
    """A tool's ``tool_response`` as text the guard reads: a Read's file content, a fetch's
    result, an MCP tool's text blocks, else the response as JSON."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping):
        file = response.get("file")
        if isinstance(file, Mapping) and isinstance(file.get("content"), str):
            return str(file["content"])
        for key in ("result", "content", "output", "text"):
            value = response.get(key)
            if isinstance(value, str):
                return value
    if isinstance(response, list):
        texts = [str(b.get("text")) for b in response if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return json.dumps(response, sort_keys=True, default=str)


class ClaudeCodeHooks:
    """Claude Code's hook mapping (an :class:`~unstuck.integrations.coding_agents.events.AgentHooks`);
    use :data:`HOOKS`."""

    agent = Agent.CLAUDE_CODE
    event_names: Mapping[str, HookKind] = EVENTS

    def _fail(self, event: str, field_name: str, problem: str) -> HookPayloadError:
        return HookPayloadError(self.agent, event, field_name, problem)

    def _text(self, payload: Mapping[str, Any], event: str, key: str, *, required: bool = True) -> str:
        value = payload.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value):
            raise self._fail(event, key, f"expected a non-empty string, got {type(value).__name__}")
        return value

    def parse(self, event_name: str, payload: Mapping[str, Any], env: Mapping[str, str]) -> HookEvent:
        """One Claude Code hook's payload as a :class:`HookEvent` (see the module doc for the
        fields read). A ``Bash`` post event's output is a ``CommandOutput``; another tool's
        a ``ToolResult`` (``ok`` as the event says: ``PostToolUse`` fires only for calls that
        succeeded).

        Raises:
            HookPayloadError: an event unstuck does not install, a payload that is not an
                object, a ``hook_event_name`` naming another event, or a missing or mistyped
                field (named).
        """
        kind = EVENTS.get(event_name)
        if kind is None:
            raise self._fail(event_name, "", f"not an event unstuck installs ({', '.join(EVENTS)})")
        if not isinstance(payload, Mapping):
            raise self._fail(event_name, "", f"expected a JSON object, got {type(payload).__name__}")
        said = payload.get("hook_event_name")
        if said is not None and said != event_name:
            raise self._fail(event_name, "hook_event_name", f"says {said!r}")
        session = self._text(payload, event_name, "session_id")
        cwd = self._text(payload, event_name, "cwd", required=False)
        hint = unattended_hint(env)
        if kind is HookKind.SESSION_START:
            return HookEvent(self.agent, kind, event_name, session, cwd, unattended_hint=hint,
                             source=self._text(payload, event_name, "source", required=False))
        if kind is HookKind.STOP:
            active = payload.get("stop_hook_active", False)
            if not isinstance(active, bool):
                raise self._fail(event_name, "stop_hook_active", f"expected a boolean, got {type(active).__name__}")
            last = payload.get("last_assistant_message")
            return HookEvent(self.agent, kind, event_name, session, cwd, unattended_hint=hint, stop_active=active,
                             text=last if isinstance(last, str) else "")
        tool = self._text(payload, event_name, "tool_name")
        arguments = payload.get("tool_input")
        if not isinstance(arguments, Mapping):
            raise self._fail(event_name, "tool_input", f"expected an object, got {type(arguments).__name__}")
        call_id = self._text(payload, event_name, "tool_use_id")
        try:
            call = ToolCall.of(call_id, tool, arguments)
        except (TypeError, ValueError) as exc:
            raise self._fail(event_name, "tool_input", f"not JSON: {exc}") from None
        output: CommandOutput | ToolResult | None = None
        if kind is HookKind.POST_TOOL:
            if "tool_response" not in payload:
                raise self._fail(event_name, "tool_response", "missing")
            output = self._output(tool, arguments, payload["tool_response"], None)
        elif kind is HookKind.POST_TOOL_FAILURE:
            error = payload.get("error")
            if not isinstance(error, str):
                raise self._fail(event_name, "error", f"expected a string, got {type(error).__name__}")
            output = self._output(tool, arguments, None, error)
        return HookEvent(self.agent, kind, event_name, session, cwd, call=call, output=output, unattended_hint=hint,
                         raw_tool=tool)

    def _output(self, tool: str, arguments: Mapping[str, Any], response: object,
                error: str | None) -> CommandOutput | ToolResult:
        if tool == "Bash":
            found = command_output(str(arguments.get("command", "")), response, error)
            if found is not None:
                return found
        if error is not None:
            return ToolResult(tool, False, error, status_stated=True)
        return ToolResult(tool, True, _response_text(response), status_stated=True)

    def render(self, event: HookEvent, reply: HookReply) -> tuple[str, int]:
        """The hook's stdout and exit code for ``reply`` (always exit 0 with JSON, the form
        every event documents; nothing at all for a plain allow):

        * ``deny`` on ``PreToolUse``: ``hookSpecificOutput.permissionDecision: "deny"`` with
          ``permissionDecisionReason`` (shown to Claude); on ``PostToolUse``: ``decision:
          "block"`` with ``reason`` (shown to Claude: the call already ran); on
          ``PostToolUseFailure``, whose decision control is ``additionalContext`` only, the reason
          as that context;
        * ``stop``: as ``deny`` for the event, and ``continue: false`` with ``stopReason`` and
          ``systemMessage`` the question (the user's); on ``Stop`` only ``continue: false``
          (``decision: "block"`` there would make Claude go on working);
        * ``context`` (or any reply with ``context``): ``hookSpecificOutput.additionalContext``
          on the events that take it (``SessionStart``, ``PreToolUse``, ``PostToolUse``,
          ``PostToolUseFailure``);
        * ``user_message`` without a stop: ``systemMessage``.
        """
        out: dict[str, Any] = {}
        specific: dict[str, Any] = {}
        kind = event.kind
        context = reply.context
        if reply.action in (HookAction.DENY, HookAction.STOP) and reply.reason:
            if kind is HookKind.PRE_TOOL:
                specific.update(permissionDecision="deny", permissionDecisionReason=reply.reason)
            elif kind is HookKind.POST_TOOL:
                out.update(decision="block", reason=reply.reason)
            elif kind is HookKind.POST_TOOL_FAILURE:  # it takes additionalContext only
                context = f"{context}\n{reply.reason}" if context else reply.reason
        if reply.action is HookAction.STOP:
            out["continue"] = False
            if reply.user_message:
                out["stopReason"] = reply.user_message
        if reply.user_message:
            out["systemMessage"] = reply.user_message
        if context and kind is not HookKind.STOP:
            specific["additionalContext"] = context
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": event.event_name, **specific}
        return (json.dumps(out, ensure_ascii=False) if out else ""), 0

    def tool_spec(self, name: str) -> ToolSpec:
        """The spec of Claude Code's tool ``name`` (module doc of
        :mod:`unstuck.integrations.coding_agents.tools`): ``Bash`` a shell tool (``command``);
        ``Read``/``Glob``/``Grep`` reads and ``Write``/``Edit``/``MultiEdit``/``NotebookEdit``
        writes on their path; ``WebFetch`` (``url``) and ``WebSearch`` web tools;
        ``mcp__SERVER__TOOL`` an MCP tool of ``SERVER``; ``AskUserQuestion`` a hand-off to the
        person; any other a read of its own name."""
        if name == "Bash":
            return shell_spec(name, "command", description="Claude Code's Bash tool")
        if name in _FILE_TOOLS:
            argument, write = _FILE_TOOLS[name]
            return file_spec(name, argument, write=write)
        if name == "WebFetch":
            return fetch_spec(name, "url")
        if name == "WebSearch":
            return fetch_spec(name, "query", search=True)
        found = _MCP_NAME.match(name)
        if found is not None:
            return mcp_spec(name, found.group(1))
        return other_spec(name, interactive=name in _PERSON_TOOLS)

    def settings_path(self, scope: Scope, home: Path, project: Path) -> Path:
        """``~/.claude/settings.json`` (user) or ``.claude/settings.json`` (project): hooks
        reference, "Configuration" (``.claude/settings.local.json`` is the user's own, left alone)."""
        return (home if scope == "user" else project) / ".claude" / "settings.json"

    def install_entries(self, command: str) -> tuple[HookEntry, ...]:
        """One group per event: ``{"matcher": "*", "hooks": [{"type": "command", "command":
        "COMMAND EVENT", "timeout": 330}]}`` for the tool events, without ``matcher`` for
        ``SessionStart`` and ``Stop`` (which match no tool: hooks reference, "Matcher")."""
        entries = []
        for event in EVENTS:
            hook = {"type": "command", "command": f"{command} {event}", "timeout": HOOK_TIMEOUT_S}
            group: dict[str, Any] = {"hooks": [hook]}
            if EVENTS[event] in (HookKind.PRE_TOOL, HookKind.POST_TOOL, HookKind.POST_TOOL_FAILURE):
                group = {"matcher": "*", **group}
            entries.append(HookEntry(event, group))
        return tuple(entries)


#: The Claude Code mapping.
HOOKS = ClaudeCodeHooks()
