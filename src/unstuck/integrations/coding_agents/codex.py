"""Codex CLI (``@openai/codex`` 0.17x) through its hooks: its payloads read into
:class:`~unstuck.integrations.coding_agents.events.HookEvent` and the guard's replies written in
the form Codex reads.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Sources: Codex's hooks documentation (developers.openai.com/codex/hooks: where hooks live,
``hooks.json`` under ``~/.codex`` or a trusted project's ``.codex``, "Review and trust hooks",
the event list, matchers, the common output fields); Codex's source (``codex-rs/hooks``:
``src/schema.rs``, the wire types of every event's input and output, each output type with
``deny_unknown_fields``, and ``src/engine/output_parser.rs``, which rejects ``continue: false``,
``stopReason`` and ``suppressOutput`` on ``PreToolUse`` and accepts there only
``permissionDecision: "deny"`` with a non-empty ``permissionDecisionReason`` (or the older
``decision: "block"`` with ``reason``); ``src/events/post_tool_use.rs``: ``decision: "block"``
sends ``reason`` to the model, ``hookSpecificOutput.additionalContext`` is added for it, exit
status 2 sends stderr); and what the real 0.171.0 sent to a recording hook (``codex exec``
against a loopback Responses API server; ``tests/data/coding_agents/codex-0.171.0.json``):

* every event: ``session_id``, ``transcript_path`` (the session's rollout file, JSON lines),
  ``cwd``, ``hook_event_name``, ``model``, ``permission_mode``; the turn events ``turn_id``;
* ``SessionStart``: ``source`` (``startup``, ``resume``, ``clear``);
* ``PreToolUse``: ``tool_name``, ``tool_input``, ``tool_use_id`` (the model's call id). The
  shell tool ``exec_command`` shows as ``"Bash"`` with ``{"command": LINE}``; a patch as
  ``apply_patch``; an MCP tool as ``mcp__SERVER__TOOL`` with its arguments;
* ``PostToolUse``: the same plus ``tool_response``: for ``Bash`` the command's output as one
  string (its two streams together, as Codex captures them) and **no exit status**; it fires for
  failed commands too (Codex has no failure event). The exit status is in the transcript, which
  Codex writes before it runs the hook: an ``event_msg`` ``item_completed`` record whose
  ``item`` is the ``CommandExecution`` with ``id`` the call id, ``exit_code``, ``status``
  (``"failed"``) and ``aggregated_output`` (:func:`command_result` reads it);
* ``Stop``: ``stop_hook_active``, ``last_assistant_message``.

Whether anybody is at the console: Codex names how a session started in its transcript's first
record (``session_meta``: ``"source": "exec"`` and ``"originator": "codex_exec"`` for ``codex
exec``, its headless mode); :func:`unattended_hint` reads that, then the CI variables. The hook
environment carries no such flag (0.171.0 gives hooks its own environment).

What the user sees (measured on 0.171.0): ``codex exec`` prints each hook's start and outcome
(``hook: PreToolUse Blocked``) but neither ``systemMessage`` nor ``stopReason``, and exits 0
whatever a hook says; the interactive terminal shows both. ``continue: false`` on
``PostToolUse`` sends ``reason`` to the model in place of the tool's output and the turn goes on;
on ``Stop`` it ends the turn. So a stop carries the question in ``systemMessage`` and
``stopReason`` (the terminal's), and the guard server keeps it for ``unstuck answer``.

Trust: Codex runs a non-managed hook only after the user trusted its exact definition (by hash;
a changed hook needs trusting again), and skips an untrusted one without a word. The user
trusts new hooks in the terminal: at start-up Codex asks ("Hooks need review" → trust all), or
``/hooks`` lists them (``t`` trusts all). ``codex exec --dangerously-bypass-hook-trust`` runs
them untrusted, for automation that vetted its hooks. Project hooks (``.codex/hooks.json``)
load only in a project Codex trusts.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from unstuck.core.tools import CommandOutput, Effect, ToolCall, ToolResult
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
from unstuck.integrations.coding_agents.tools import mcp_spec, other_spec, shell_spec
from unstuck.toolkit.specs import ToolSpec, run_elsewhere

__all__ = [
    "EVENTS",
    "HOOKS",
    "HOOK_TIMEOUT_S",
    "CodexHooks",
    "command_result",
    "patch_paths",
    "unattended_hint",
]

#: Codex's event names unstuck installs, with their kinds (a ``PostToolUse`` of a command
#: that exited non-zero reads as :attr:`HookKind.POST_TOOL_FAILURE`).
EVENTS: Mapping[str, HookKind] = {
    "SessionStart": HookKind.SESSION_START,
    "PreToolUse": HookKind.PRE_TOOL,
    "PostToolUse": HookKind.POST_TOOL,
    "Stop": HookKind.STOP,
}

#: Seconds Codex gives each installed hook command (a handler's ``timeout``, in seconds):
#: longer than an attended session's wait for its user's answer
#: (:data:`unstuck.integrations.coding_agents.client.ASK_WAIT_CLIENT_S`), so the agent does not
#: cut the question short (as for Claude Code: :data:`.claude_code.HOOK_TIMEOUT_S`). A guard
#: server that does not answer never holds a hook that long: the client fails open first.
HOOK_TIMEOUT_S = 330

#: An MCP tool's name in Codex's hooks: ``mcp__<server>__<tool>``.
_MCP_NAME = re.compile(r"\Amcp__(.+?)__(.+)\Z")
#: The file lines of a patch in Codex's ``apply_patch`` format (``*** Add File: PATH``,
#: ``*** Update File:``, ``*** Delete File:``, ``*** Move to:``).
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
#: Codex's shell output header: ``Process exited with code N`` (its ``exec_command`` output).
_EXITED = re.compile(r"^Process exited with code (-?\d+)\s*$", re.MULTILINE)


@functools.lru_cache(maxsize=256)
def _session_source(transcript: str) -> str | None:
    head = payloads.transcript_head(transcript)
    if head is None or head.get("type") != "session_meta" or not isinstance(head.get("payload"), Mapping):
        return None
    source = head["payload"].get("source")
    return source if isinstance(source, str) else None


def unattended_hint(payload: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """What says nobody is at the console, named: the session's transcript saying it was started
    by ``codex exec`` (``"codex exec (session_meta.source=exec)"``), else a CI variable
    (:func:`~unstuck.integrations.coding_agents.events.ci_hint`), else ``None``."""
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and _session_source(transcript) == "exec":
        return "codex exec (session_meta.source=exec)"
    return ci_hint(env)


def command_result(transcript: str, call_id: str) -> tuple[int, str] | None:
    """The exit status and output Codex recorded for the shell call ``call_id`` in its
    transcript: the ``item_completed`` ``CommandExecution`` record's ``exit_code`` and
    ``aggregated_output``, else the ``function_call_output`` record's ``Process exited with code
    N`` header; ``None`` when neither is there."""
    for record in payloads.transcript_tail(transcript, call_id):
        body = record.get("payload")
        if not isinstance(body, Mapping):
            continue
        item = body.get("item")
        if (record.get("type") == "event_msg" and body.get("type") == "item_completed" and isinstance(item, Mapping)
                and item.get("type") == "CommandExecution" and item.get("id") == call_id):
            code, output = item.get("exit_code"), item.get("aggregated_output")
            if isinstance(code, int) and not isinstance(code, bool):
                return code, output if isinstance(output, str) else ""
        if body.get("type") == "function_call_output" and body.get("call_id") == call_id:
            text = body.get("output")
            if isinstance(text, str) and (found := _EXITED.search(text)) is not None:
                _, _, output = text.partition("\nOutput:\n")
                return int(found.group(1)), output
    return None


def patch_paths(patch: str) -> tuple[str, ...]:
    """The files a patch in Codex's ``apply_patch`` format touches, in order."""
    return tuple(a or b for a, b in _PATCH_FILE.findall(patch))


def _patch_spec(name: str) -> ToolSpec:
    def subject(arguments: Mapping[str, Any]) -> str | None:
        paths = patch_paths(str(arguments.get("command") or ""))
        return paths[0] if paths else None

    return ToolSpec(name, run_elsewhere, description="Codex's apply_patch: edits files from a patch",
                    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
                    effect=Effect.WRITE, subject=subject)


def _mcp_text(response: object) -> tuple[bool, str, bool]:
    """An MCP ``CallToolResult`` (``content`` blocks, ``isError``) as (ok, text, stated)."""
    if isinstance(response, Mapping):
        blocks = response.get("content")
        texts = [str(b.get("text")) for b in blocks or [] if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
        error = response.get("isError", response.get("is_error"))
        stated = isinstance(error, bool)
        if texts:
            return not bool(error), "\n".join(texts), stated
        return not bool(error), json.dumps(response, sort_keys=True, default=str), stated
    if isinstance(response, str):
        return True, response, False
    return True, json.dumps(response, sort_keys=True, default=str), False


class CodexHooks:
    """Codex CLI's hook mapping (an :class:`~unstuck.integrations.coding_agents.events.AgentHooks`);
    use :data:`HOOKS`."""

    agent = Agent.CODEX
    event_names: Mapping[str, HookKind] = EVENTS
    #: Codex reads ``hooks.json`` as plain JSON (``serde_json``): a comment makes it unreadable.
    settings_comments = False

    def parse(self, event_name: str, payload: Mapping[str, Any], env: Mapping[str, str]) -> HookEvent:
        """One Codex hook's payload as a :class:`HookEvent` (see the module doc for the fields).
        A ``Bash`` post event's output is a ``CommandOutput`` with the exit status from the
        transcript (all the output as stdout: Codex reports one stream), its kind
        :attr:`HookKind.POST_TOOL_FAILURE` when the status is not 0; without a record of the
        status, a ``ToolResult`` of the output whose success is not stated. An MCP tool's
        output is a ``ToolResult`` whose success is its ``isError``.

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
        hint = unattended_hint(payload, env)
        if kind is HookKind.SESSION_START:
            return HookEvent(self.agent, kind, event_name, session, cwd, unattended_hint=hint,
                             source=payloads.text(self.agent, event_name, payload, "source", required=False))
        if kind is HookKind.STOP:
            last = payload.get("last_assistant_message")
            return HookEvent(self.agent, kind, event_name, session, cwd, unattended_hint=hint,
                             stop_active=payloads.boolean(self.agent, event_name, payload, "stop_hook_active"),
                             text=last if isinstance(last, str) else "")
        tool = payloads.text(self.agent, event_name, payload, "tool_name")
        arguments = payloads.mapping(self.agent, event_name, payload, "tool_input")
        call_id = payloads.text(self.agent, event_name, payload, "tool_use_id")
        try:
            call = ToolCall.of(call_id, tool, arguments)
        except (TypeError, ValueError) as exc:
            raise HookPayloadError(self.agent, event_name, "tool_input", f"not JSON: {exc}") from None
        output: CommandOutput | ToolResult | None = None
        if kind is HookKind.POST_TOOL:
            if "tool_response" not in payload:
                raise HookPayloadError(self.agent, event_name, "tool_response", "missing")
            output = self._output(tool, arguments, payload["tool_response"], call_id,
                                  str(payload.get("transcript_path") or ""))
            failed = (output.exit_code != 0 if isinstance(output, CommandOutput)
                      else output.status_stated and not output.ok)
            if failed:
                kind = HookKind.POST_TOOL_FAILURE
        return HookEvent(self.agent, kind, event_name, session, cwd, call=call, output=output, unattended_hint=hint,
                         raw_tool=tool)

    def _output(self, tool: str, arguments: Mapping[str, Any], response: object, call_id: str,
                transcript: str) -> CommandOutput | ToolResult:
        if tool == "Bash":
            command = str(arguments.get("command", ""))
            text = response if isinstance(response, str) else None
            recorded = command_result(transcript, call_id)
            if recorded is not None:
                return CommandOutput(command, recorded[0], recorded[1] if text is None else text, "")
            return ToolResult(tool, True, json.dumps(response, default=str) if text is None else text)
        ok, text, stated = _mcp_text(response)
        return ToolResult(tool, ok, text, status_stated=stated)

    def render(self, event: HookEvent, reply: HookReply) -> tuple[str, int]:
        """The hook's stdout and exit code for ``reply`` (exit 0 with JSON, nothing at all for a
        plain allow), in the fields Codex accepts for each event (it rejects any other):

        * ``PreToolUse``: ``deny`` and ``stop`` as ``hookSpecificOutput.permissionDecision:
          "deny"`` with ``permissionDecisionReason`` (the model reads it: ``Command blocked by
          PreToolUse hook: REASON. Command: LINE``, so the reason's own last full stop is left
          out); Codex lets no ``PreToolUse`` hook stop the agent, so a stop
          adds only ``systemMessage``, the question;
        * ``PostToolUse``: ``deny`` as ``decision: "block"`` with ``reason`` (read by the model in
          place of the output); ``stop`` adds ``continue: false`` and ``stopReason``;
        * ``Stop``: ``stop`` as ``continue: false`` with ``stopReason``; ``deny`` as ``decision:
          "block"`` with ``reason`` (Codex goes on, the reason its next prompt);
        * ``context`` (or any reply's ``context``): ``hookSpecificOutput.additionalContext`` on
          ``SessionStart``, ``PreToolUse`` and ``PostToolUse``;
        * a ``user_message``: ``systemMessage``.
        """
        out: dict[str, Any] = {}
        specific: dict[str, Any] = {}
        kind = event.kind
        refuse = reply.action in (HookAction.DENY, HookAction.STOP)
        reason = reply.reason or reply.user_message or "unstuck refused this call."
        if kind is HookKind.PRE_TOOL and refuse:
            # Codex shows it as "Command blocked by PreToolUse hook: REASON. Command: LINE"
            specific.update(permissionDecision="deny", permissionDecisionReason=reason.rstrip().rstrip(".") or reason)
        elif kind in (HookKind.POST_TOOL, HookKind.POST_TOOL_FAILURE) and refuse:
            out.update(decision="block", reason=reason)
            if reply.action is HookAction.STOP:
                out["continue"] = False
                out["stopReason"] = reply.user_message or reason
        elif kind is HookKind.STOP and reply.action is HookAction.STOP:
            out.update({"continue": False, "stopReason": reply.user_message or reason})
        elif kind is HookKind.STOP and reply.action is HookAction.DENY:
            out.update(decision="block", reason=reason)
        if reply.user_message:
            out["systemMessage"] = reply.user_message
        if reply.context and kind is not HookKind.STOP:
            specific["additionalContext"] = reply.context
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": event.event_name, **specific}
        return (json.dumps(out, ensure_ascii=False) if out else ""), 0

    def tool_spec(self, name: str) -> ToolSpec:
        """The spec of Codex's tool ``name`` as its hooks name it: ``Bash`` (``exec_command``,
        ``shell``, ``local_shell``) a shell tool on ``command``; ``apply_patch`` a write whose
        subject is the first file its patch touches; ``mcp__SERVER__TOOL`` an MCP tool of
        ``SERVER``; any other a read of its own name (``request_user_input``, a question to the
        person, a hand-off)."""
        if name == "Bash":
            return shell_spec(name, "command", description="Codex's shell tool (exec_command)")
        if name == "apply_patch":
            return _patch_spec(name)
        found = _MCP_NAME.match(name)
        if found is not None:
            return mcp_spec(name, found.group(1))
        return other_spec(name, interactive=name == "request_user_input")

    def settings_path(self, scope: Scope, home: Path, project: Path) -> Path:
        """``~/.codex/hooks.json`` (user) or ``.codex/hooks.json`` (project): Codex's hooks
        documentation, "Where Codex looks for hooks" (``config.toml`` is left alone)."""
        return (home if scope == "user" else project) / ".codex" / "hooks.json"

    def install_entries(self, command: str) -> tuple[HookEntry, ...]:
        """One group per event: ``{"matcher": "*", "hooks": [{"type": "command", "command":
        "COMMAND EVENT", "timeout": 30}]}`` for the tool events (a regular expression matched
        against the tool's name: ``*`` matches all), without ``matcher`` for ``SessionStart`` and
        ``Stop``."""
        entries = []
        for event, kind in EVENTS.items():
            hook = {"type": "command", "command": f"{command} {event}", "timeout": HOOK_TIMEOUT_S}
            group: dict[str, Any] = {"hooks": [hook]}
            if kind in (HookKind.PRE_TOOL, HookKind.POST_TOOL):
                group = {"matcher": "*", **group}
            entries.append(HookEntry(event, group))
        return tuple(entries)


#: The Codex CLI mapping.
HOOKS = CodexHooks()
