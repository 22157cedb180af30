"""Gemini CLI (``@google/gemini-cli`` 0.6x) through its hooks: its payloads read into
:class:`~unstuck.integrations.coding_agents.events.HookEvent` and the guard's replies written in
the form Gemini CLI reads.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Sources: Gemini CLI's hooks documentation (``docs/hooks/index.md``: events, matchers, exit
codes, the configuration layers; ``docs/hooks/reference.md``: the base input, the common output
fields ``systemMessage``, ``continue``, ``stopReason``, ``decision``, ``reason``, and each
event's own); its source as bundled in the 0.61.0 npm package (``hookEventHandler``: the
``BeforeTool``/``AfterTool`` inputs; ``executeToolWithHooks``: a ``BeforeTool`` ``decision:
"deny"`` gives the model "Tool execution blocked: REASON", ``continue: false`` ends the agent
("Agent execution stopped by hook: REASON"), an ``AfterTool`` deny replaces the result with
"Tool result blocked: REASON" and ``hookSpecificOutput.additionalContext`` is appended to it;
the shell tool's result text: ``Output: …``, then ``Error: …``, ``Exit Code: N`` (only when not
0), ``Signal: …``, ``Process Group PGID: …``); and what the real 0.61.0 sent to a recording hook
(``gemini -p`` against a loopback Gemini API server; ``tests/data/coding_agents/gemini-0.61.0.json``):

* every event: ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``timestamp``;
* ``SessionStart``: ``source`` (``startup``, ``resume``, ``clear``);
* ``BeforeTool``: ``tool_name``, ``tool_input``, and for an MCP tool ``mcp_context``
  (``server_name``, ``tool_name``, the server's command); **no call id**;
* ``AfterTool``: the same plus ``tool_response`` ``{"llmContent", "returnDisplay", "error"?}``
  (``error`` ``{"message", "type"}`` when the tool failed);
* ``AfterAgent`` (the turn's end: unstuck's stop event): ``prompt``, ``prompt_response``,
  ``stop_hook_active``.

A call's id: Gemini CLI gives hooks none, so :func:`call_id` makes one from the session, the
tool and its arguments, and the hooks number each ``BeforeTool`` of the same call in a session
(``gemini-DIGEST``, then ``gemini-DIGEST-2``, ...): a model that makes one call twice makes two
calls, each charged (the second ``gh auth login --web`` after the first was refused is a second
workaround, not a framework replaying the first). An ``AfterTool`` takes the id of the latest
``BeforeTool`` of that call (Gemini CLI runs a reply's tools one after another, each
``AfterTool`` right after its ``BeforeTool``; a refused call has no ``AfterTool``).

Whether anybody is at the console: Gemini CLI gives hooks no headless flag (their environment
is its own, sanitised; in GitHub Actions, ``GITHUB_SHA`` set, only an allow-list passes, which
drops ``CI``); :func:`unattended_hint` reads the CI variables, and ``unstuck hooks install
--unattended`` says so for a machine that is never attended.

What the user sees (measured on 0.61.0): ``gemini -p`` prints a hook's ``systemMessage`` on
stderr ("Hook system message: …") and a stop's reason ("Agent execution stopped: …"), and exits
0 either way. User hooks (``~/.gemini/settings.json``) run without a trust step; project hooks
(``.gemini/settings.json``) run in a trusted folder, and Gemini CLI warns before running one
whose name or command changed.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import threading
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from unstuck.core.tools import CommandOutput, ToolCall, ToolResult
from unstuck.integrations.coding_agents import payloads
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
from unstuck.toolkit.specs import ToolSpec, run_elsewhere

__all__ = [
    "EVENTS",
    "HOOKS",
    "HOOK_TIMEOUT_MS",
    "GeminiHooks",
    "call_id",
    "shell_output",
    "unattended_hint",
]

#: Gemini CLI's event names unstuck installs, with their kinds (an ``AfterTool`` whose tool
#: failed reads as :attr:`HookKind.POST_TOOL_FAILURE`).
EVENTS: Mapping[str, HookKind] = {
    "SessionStart": HookKind.SESSION_START,
    "BeforeTool": HookKind.PRE_TOOL,
    "AfterTool": HookKind.POST_TOOL,
    "AfterAgent": HookKind.STOP,
}

#: Milliseconds Gemini CLI gives each installed hook command (a hook's ``timeout``, in
#: milliseconds; its default is 60000): longer than an attended session's wait for its user's
#: answer (:data:`unstuck.integrations.coding_agents.client.ASK_WAIT_CLIENT_S`), so the agent
#: does not cut the question short. A guard server that does not answer never holds a hook that
#: long: the client fails open first.
HOOK_TIMEOUT_MS = 330_000

#: Gemini CLI's file tools (their declarations as 0.61.0 sends them): name → (the argument
#: holding the path, writes).
_FILE_TOOLS: Mapping[str, tuple[str, bool]] = {
    "read_file": ("file_path", False), "read_many_files": ("include", False), "list_directory": ("dir_path", False),
    "glob": ("dir_path", False), "grep_search": ("dir_path", False), "write_file": ("file_path", True),
    "replace": ("file_path", True),
}
#: Tools whose whole job is a question to the person (``ask_user``).
_PERSON_TOOLS = frozenset({"ask_user"})
#: An MCP tool's name in Gemini CLI: ``mcp_<server>_<tool>`` (hooks reference, "Matchers and
#: tool names").
_MCP_NAME = re.compile(r"\Amcp_([^_]+)_(.+)\Z")
#: The lines of the shell tool's result, each ``Label: value`` (0.61.0's shell tool).
_SHELL_LABELS = ("Output", "Error", "Exit Code", "Signal", "Background PIDs", "Process Group PGID")
_SHELL_LINE = re.compile(r"(" + "|".join(map(re.escape, _SHELL_LABELS)) + r"): ?")
_UNTRUSTED = re.compile(r"\A\s*<untrusted_context>\n?(.*?)\n?</untrusted_context>\s*\Z", re.DOTALL)
_CANCELLED = ("Command was automatically cancelled", "Command was cancelled by user")
_URL = re.compile(r"https?://[^\s<>\"')\]]+")


def unattended_hint(env: Mapping[str, str]) -> str | None:
    """A CI variable of the hook's environment, named (``"CI=true"``), or ``None``: Gemini CLI
    itself tells hooks nothing about a headless run."""
    return ci_hint(env)


def call_id(session_id: str, tool: str, arguments: Mapping[str, Any], occurrence: int = 1) -> str:
    """A call's id for Gemini CLI, which gives hooks none: ``gemini-`` and 16 hexadecimal digits
    of the SHA-256 of the session, the tool and its arguments (canonical JSON); the
    ``occurrence``-th ``BeforeTool`` of that call in the session (1-based) adds ``-N`` from the
    second on."""
    canonical = json.dumps(dict(arguments), sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"{session_id}\0{tool}\0{canonical}".encode()).hexdigest()
    return _nth(f"gemini-{digest[:16]}", occurrence)


def _nth(first: str, occurrence: int) -> str:
    """The id of a call's ``occurrence``-th ``BeforeTool`` whose first id is ``first``."""
    return first if occurrence <= 1 else f"{first}-{occurrence}"


def _llm_text(content: object) -> str:
    """``llmContent`` (a string, a part, or a list of either) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        return str(content["text"]) if isinstance(content.get("text"), str) else json.dumps(content, default=str)
    if isinstance(content, list):
        return "\n".join(_llm_text(part) for part in content)
    return "" if content is None else json.dumps(content, default=str)


def shell_output(command: str, text: str) -> CommandOutput | None:
    """The shell tool's result text (``llmContent``) as a :class:`~unstuck.core.tools.CommandOutput`:
    ``Output:`` as stdout (Gemini CLI reports the two streams as one), ``Error:`` as stderr, the
    exit status ``Exit Code:`` (0 when the line is absent: Gemini CLI writes it only for a
    non-zero status), 128 + the signal's number for ``Signal:`` (the shell's convention), 124
    for a command Gemini CLI cancelled (what coreutils ``timeout`` exits with). ``None`` for a
    text that is not a finished command's (a command moved to the background)."""
    found = _UNTRUSTED.match(text)
    body = found.group(1) if found else text
    if body.startswith(_CANCELLED):
        return CommandOutput(command, 124, "", body)
    # The labelled lines follow the output, in _SHELL_LABELS' order: peel them off the end, so
    # a line of the command's own output that looks like one is left in the output.
    lines = body.split("\n")
    fields: dict[str, str] = {}
    rank = len(_SHELL_LABELS)
    while len(lines) > 1 and (mark := _SHELL_LINE.match(lines[-1])) is not None:
        label = mark.group(1)
        if label == "Output" or _SHELL_LABELS.index(label) >= rank:
            break
        rank = _SHELL_LABELS.index(label)
        fields[label] = lines.pop()[mark.end():]
    rest = "\n".join(lines)
    if not rest.startswith("Output: ") and rest != "Output:":
        return None
    fields["Output"] = rest[len("Output: "):]
    stdout = fields.get("Output", "")
    stdout = "" if stdout == "(empty)" else stdout
    code = _exit_status(fields)
    return CommandOutput(command, code, stdout + ("\n" if stdout else ""), fields.get("Error", ""))


def _exit_status(fields: Mapping[str, str]) -> int:
    """The exit status the shell tool's labelled lines state: ``Exit Code``, else 128 + the
    number of ``Signal`` (a name such as ``SIGTERM`` or a number), else 1 for an ``Error``, else 0."""
    stated = fields.get("Exit Code", "").strip()
    if stated.lstrip("-").isdigit():
        return int(stated)
    name = fields.get("Signal", "").strip()
    if name.isdigit():
        return 128 + int(name)
    if name:
        try:
            return 128 + int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
        except KeyError:
            return 1
    return 1 if stated or "Error" in fields else 0


def _web_subject(arguments: Mapping[str, Any]) -> str | None:
    found = _URL.search(str(arguments.get("prompt") or ""))
    if found is None:
        return None
    return urllib.parse.urlsplit(found.group(0)).hostname or None


class GeminiHooks:
    """Gemini CLI's hook mapping (an :class:`~unstuck.integrations.coding_agents.events.AgentHooks`);
    use :data:`HOOKS`.

    It remembers which MCP server each MCP tool name belongs to, from the payloads'
    ``mcp_context`` (a server's name may hold the ``_`` that separates it from the tool's).
    """

    agent = Agent.GEMINI
    event_names: Mapping[str, HookKind] = EVENTS
    #: Gemini CLI reads its settings with comments (0.61.0's ``loadSettings``: ``JSON.parse`` of
    #: the file through ``strip-json-comments``), so ``unstuck hooks install`` keeps them.
    settings_comments = True

    def __init__(self) -> None:
        self._mcp_servers: dict[str, str] = {}
        #: (session, the call's first id) -> how many ``BeforeTool`` events it had; the
        #: guard server parses on many threads, hence the lock. A session's entries go at its stop.
        self._occurrences: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def _numbered(self, kind: HookKind, session: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """The id of this call's event (module doc): a new number for a ``BeforeTool``, the
        latest one for an ``AfterTool`` (the first when no ``BeforeTool`` was seen)."""
        first = call_id(session, tool, arguments)
        with self._lock:
            seen = self._occurrences.get((session, first), 0)
            if kind is HookKind.PRE_TOOL:
                seen += 1
                self._occurrences[(session, first)] = seen
        return _nth(first, seen)

    def _forget(self, session: str) -> None:
        with self._lock:
            for key in [k for k in self._occurrences if k[0] == session]:
                del self._occurrences[key]

    def parse(self, event_name: str, payload: Mapping[str, Any], env: Mapping[str, str]) -> HookEvent:
        """One Gemini CLI hook's payload as a :class:`HookEvent` (see the module doc for the
        fields). A ``run_shell_command`` post event's output is a ``CommandOutput`` read from
        its result text (:func:`shell_output`); another tool's a ``ToolResult`` whose success is
        the absence of ``tool_response.error``. The kind is
        :attr:`HookKind.POST_TOOL_FAILURE` for a failed tool or a non-zero exit status.

        Raises:
            HookPayloadError: an event unstuck does not install, a payload that is not an
                object, a ``hook_event_name`` naming another event, or a missing or mistyped
                field (named).
        """
        kind = EVENTS.get(event_name)
        if kind is None:
            raise HookPayloadError(self.agent, event_name, "", f"not an event unstuck installs ({', '.join(EVENTS)})")
        if not isinstance(payload, Mapping):
            raise HookPayloadError(self.agent, event_name, "", f"expected a JSON object, got {type(payload).__name__}")
        said = payload.get("hook_event_name")
        if said is not None and said != event_name:
            raise HookPayloadError(self.agent, event_name, "hook_event_name", f"says {said!r}")
        session = payloads.text(self.agent, event_name, payload, "session_id")
        cwd = payloads.text(self.agent, event_name, payload, "cwd", required=False)
        hint = unattended_hint(env)
        if kind is HookKind.SESSION_START:
            self._forget(session)  # a new or resumed session numbers its calls afresh
            return HookEvent(self.agent, kind, event_name, session, cwd, unattended_hint=hint,
                             source=payloads.text(self.agent, event_name, payload, "source", required=False))
        if kind is HookKind.STOP:
            said_last = payload.get("prompt_response")
            return HookEvent(self.agent, kind, event_name, session, cwd, unattended_hint=hint,
                             stop_active=payloads.boolean(self.agent, event_name, payload, "stop_hook_active"),
                             text=said_last if isinstance(said_last, str) else "")
        tool = payloads.text(self.agent, event_name, payload, "tool_name")
        arguments = payloads.mapping(self.agent, event_name, payload, "tool_input")
        context = payload.get("mcp_context")
        if isinstance(context, Mapping) and isinstance(context.get("server_name"), str) and context["server_name"]:
            self._mcp_servers[tool] = context["server_name"]
        try:
            call = ToolCall.of(self._numbered(kind, session, tool, arguments), tool, arguments)
        except (TypeError, ValueError) as exc:
            raise HookPayloadError(self.agent, event_name, "tool_input", f"not JSON: {exc}") from None
        output: CommandOutput | ToolResult | None = None
        if kind is HookKind.POST_TOOL:
            response = payloads.mapping(self.agent, event_name, payload, "tool_response")
            output = self._output(tool, arguments, response)
            failed = (output.exit_code != 0 if isinstance(output, CommandOutput) else not output.ok)
            if failed:
                kind = HookKind.POST_TOOL_FAILURE
        return HookEvent(self.agent, kind, event_name, session, cwd, call=call, output=output, unattended_hint=hint,
                         raw_tool=tool)

    def _output(self, tool: str, arguments: Mapping[str, Any],
                response: Mapping[str, Any]) -> CommandOutput | ToolResult:
        text = _llm_text(response.get("llmContent"))
        error = response.get("error")
        if tool == "run_shell_command":
            found = shell_output(str(arguments.get("command", "")), text)
            if found is not None:
                return found
        if isinstance(error, Mapping):
            message = error.get("message")
            return ToolResult(tool, False, text or (message if isinstance(message, str) else json.dumps(error)),
                              status_stated=True)
        return ToolResult(tool, True, text, status_stated=True)

    def render(self, event: HookEvent, reply: HookReply) -> tuple[str, int]:
        """The hook's stdout and exit code for ``reply`` (exit 0 with JSON, the form the hooks
        reference prefers; nothing at all for a plain allow):

        * ``BeforeTool``: ``deny`` as ``decision: "deny"`` with ``reason`` (the model reads "Tool
          execution blocked: REASON"); ``stop`` adds ``continue: false`` with ``stopReason``
          (the agent ends);
        * ``AfterTool``: ``deny`` as ``decision: "deny"`` with ``reason`` (read in place of the
          result); ``stop`` adds ``continue: false`` with ``stopReason``;
        * ``AfterAgent``: ``stop`` as ``continue: false`` with ``stopReason``; ``deny`` as
          ``decision: "deny"`` with ``reason`` (Gemini CLI goes on, the reason its next prompt);
        * ``context``: ``hookSpecificOutput.additionalContext`` on ``SessionStart`` and
          ``AfterTool`` (the events that take it);
        * a ``user_message``: ``systemMessage``.
        """
        out: dict[str, Any] = {}
        kind = event.kind
        reason = reply.reason or reply.user_message or "unstuck refused this call."
        if reply.action in (HookAction.DENY, HookAction.STOP) and kind is not HookKind.SESSION_START:
            if kind is not HookKind.STOP or reply.action is HookAction.DENY:
                out.update(decision="deny", reason=reason)
            if reply.action is HookAction.STOP:
                out.update({"continue": False, "stopReason": reply.user_message or reason})
        if reply.user_message:
            out["systemMessage"] = reply.user_message
        if reply.context and kind in (HookKind.SESSION_START, HookKind.POST_TOOL, HookKind.POST_TOOL_FAILURE):
            out["hookSpecificOutput"] = {"hookEventName": event.event_name, "additionalContext": reply.context}
        return (json.dumps(out, ensure_ascii=False) if out else ""), 0

    def tool_spec(self, name: str) -> ToolSpec:
        """The spec of Gemini CLI's tool ``name``: ``run_shell_command`` a shell tool on
        ``command``; the file tools (``read_file``, ``read_many_files``, ``list_directory``,
        ``glob``, ``grep_search`` read; ``write_file``, ``replace`` write) on their path;
        ``web_fetch`` a fetch whose subject is the host of the first URL in its ``prompt``;
        ``google_web_search`` a search; ``mcp_SERVER_TOOL`` an MCP tool of ``SERVER`` (as its
        payload's ``mcp_context`` named it); ``ask_user`` a hand-off to the person; any other a
        read of its own name."""
        if name == "run_shell_command":
            return shell_spec(name, "command", description="Gemini CLI's run_shell_command")
        if name in _FILE_TOOLS:
            argument, write = _FILE_TOOLS[name]
            return file_spec(name, argument, write=write)
        if name == "web_fetch":
            base = fetch_spec(name, "prompt")
            return ToolSpec(name, run_elsewhere, description=base.description, parameters=base.parameters,
                            subject=_web_subject, document_output=True)
        if name == "google_web_search":
            return fetch_spec(name, "query", search=True)
        server = self._mcp_servers.get(name)
        if server is None and (found := _MCP_NAME.match(name)) is not None:
            server = found.group(1)
        if server is not None:
            return mcp_spec(name, server)
        return other_spec(name, interactive=name in _PERSON_TOOLS)

    def settings_path(self, scope: Scope, home: Path, project: Path) -> Path:
        """``~/.gemini/settings.json`` (user) or ``.gemini/settings.json`` (project): hooks
        documentation, "Configuration"."""
        return (home if scope == "user" else project) / ".gemini" / "settings.json"

    def install_entries(self, command: str) -> tuple[HookEntry, ...]:
        """One group per event: ``{"matcher": "*", "hooks": [{"type": "command", "name":
        "unstuck-EVENT", "command": "COMMAND EVENT", "timeout": 30000}]}`` (``*`` matches every
        tool or trigger; the name is how ``/hooks disable`` refers to it), without ``matcher`` for
        ``AfterAgent``."""
        entries = []
        for event, kind in EVENTS.items():
            hook = {"type": "command", "name": f"unstuck-{event}", "command": f"{command} {event}",
                    "timeout": HOOK_TIMEOUT_MS}
            group: dict[str, Any] = {"hooks": [hook]}
            if kind is not HookKind.STOP:
                group = {"matcher": "*", **group}
            entries.append(HookEntry(event, group))
        return tuple(entries)


#: The Gemini CLI mapping.
HOOKS = GeminiHooks()
