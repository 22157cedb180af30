"""unstuck in the Claude Agent SDK (``unstuck[claude-agent-sdk]``, ``claude-agent-sdk`` 0.2.x,
which drives the Claude Code binary): every tool call of a session goes through one
:class:`unstuck.Guard` per SDK session id, through the SDK's own hook callbacks, on the same
event mapping as Claude Code's command hooks
(:mod:`unstuck.integrations.coding_agents.claude_code`).

For the user::

    guard = SdkGuard(journal=Journal(path), lessons=LessonStore(path))
    options = guard.options(ClaudeAgentOptions(allowed_tools=["Bash"], cwd="/repo"))
    async for message in query(prompt=TASK, options=options):
        ...
    question = guard.question(session_id)   # an Escalation when the session stopped blocked

How it rides on the SDK:

* **Hooks**: :meth:`SdkGuard.options` adds one :class:`claude_agent_sdk.HookMatcher` (matcher
  ``None``: every tool) per event unstuck installs for Claude Code (``SessionStart``,
  ``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, ``Stop``:
  :data:`unstuck.integrations.coding_agents.claude_code.EVENTS`) to ``ClaudeAgentOptions.hooks``,
  after the caller's own matchers (theirs run first and stay as they were). The SDK sends the
  matchers to the CLI in its ``initialize`` control request and the CLI calls back over the
  control channel (``hook_callback``) with the same input the command hooks read on stdin
  (``claude_agent_sdk.types``: ``PreToolUseHookInput`` … ``StopHookInput``: ``session_id``,
  ``cwd``, ``hook_event_name``, ``tool_name``, ``tool_input``, ``tool_use_id``,
  ``tool_response``, ``error``, ``stop_hook_active``, ``last_assistant_message``).
* **Session start**: Claude Code 2.1.332 driven by the SDK never calls a ``SessionStart``
  callback (measured: ``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure`` and ``Stop``
  callbacks came, ``SessionStart`` never did; the SDK's ``HookEvent`` literal leaves it out),
  so a ``UserPromptSubmit`` matcher stands in for it: the first prompt of a session id is
  handled as its session start (the known blockers on this machine, probed, as
  ``hookSpecificOutput.additionalContext``, which ``UserPromptSubmit`` takes:
  ``UserPromptSubmitHookSpecificOutput``); later prompts pass. The ``SessionStart`` matcher is
  registered too, for a CLI that calls it; a session gets its start once, whichever comes first.
* **Events**: each input dict is read by :meth:`ClaudeCodeHooks.parse
  <unstuck.integrations.coding_agents.claude_code.ClaudeCodeHooks.parse>` into a
  :class:`~unstuck.integrations.coding_agents.events.HookEvent` and handled by a
  :class:`~unstuck.integrations.coding_agents.sessions.SessionKeeper` in this process (one guard
  per session id, journaled like any turn, lessons shown at session start): the same code as the
  guard server behind the command hooks, without a socket.
* **Replies**: the keeper's reply is rendered by :meth:`ClaudeCodeHooks.render` (the command
  hook's JSON) and returned as the SDK's hook output dict (``SyncHookJSONOutput``), with
  ``continue`` spelled ``continue_`` as the SDK asks (it turns it back into ``continue`` for the
  CLI: ``_internal/query.py``, ``_convert_hook_output_for_cli``): a refusal is
  ``hookSpecificOutput.permissionDecision: "deny"``; a stop is ``continue_: False`` with
  ``stopReason`` and ``systemMessage`` the question.
* **Unattended**: by default as the CLI itself would say in its hook's environment: the SDK
  starts it with ``CLAUDE_CODE_ENTRYPOINT=sdk-py`` unless ``options.env`` says otherwise
  (``_internal/transport/subprocess_cli.py``), so an SDK session is unattended (rule 1 refuses
  ``gh auth login --web``) unless ``options.env`` sets ``CLAUDE_CODE_SESSION_ATTENDED=1`` or
  ``SdkGuard(unattended=False)`` is given. Attended, a hook that escalates waits (in a worker
  thread) for the user's answer given with :meth:`SdkGuard.answer` at most ``ask_wait_s``.

* **Failing open**: an input that does not read as Claude Code's shape raises
  :class:`~unstuck.integrations.coding_agents.events.HookPayloadError` in the callback; the SDK
  counts a callback that raises as no decision (``HookMatcher.on_failure`` left unset, its
  default "continue"), so the call goes on, as a command hook fails open.

This module imports ``claude_agent_sdk`` (the optional extra); nothing else of unstuck does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
from collections.abc import Mapping
from typing import Any, cast

from claude_agent_sdk import ClaudeAgentOptions, HookContext, HookMatcher

from unstuck.decide.escalation import Answer, Escalation
from unstuck.decide.policy import PolicyConfig
from unstuck.integrations.coding_agents.claude_code import EVENTS, HOOK_TIMEOUT_S, HOOKS
from unstuck.integrations.coding_agents.events import HookEvent
from unstuck.integrations.coding_agents.sessions import ASK_WAIT_S, SessionKeeper, turn_id_of
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore

__all__ = ["PROMPT_EVENT", "SDK_ENTRYPOINT", "START_EVENT", "SdkGuard", "sdk_output"]

#: Claude Code's session-start event, and the prompt event that stands in for it under the SDK
#: (module doc, "Session start").
START_EVENT = "SessionStart"
PROMPT_EVENT = "UserPromptSubmit"

#: The ``CLAUDE_CODE_ENTRYPOINT`` the Python SDK starts the CLI with unless ``options.env`` sets
#: another (``claude_agent_sdk/_internal/transport/subprocess_cli.py``).
SDK_ENTRYPOINT = "sdk-py"


def sdk_output(stdout: str) -> dict[str, Any]:
    """A Claude Code command hook's stdout (one JSON object, or ``""`` for nothing) as the SDK's
    hook output dict: the same keys, ``continue`` spelled ``continue_`` and ``async`` spelled
    ``async_`` (the SDK's ``SyncHookJSONOutput``; it spells them back for the CLI).

    Raises:
        ValueError: ``stdout`` is not empty and not one JSON object.
    """
    if not stdout.strip():
        return {}
    loaded = json.loads(stdout)
    if not isinstance(loaded, dict):
        raise ValueError(f"a hook's output must be a JSON object, got {type(loaded).__name__}")
    renamed = {"continue": "continue_", "async": "async_"}
    return {renamed.get(str(key), str(key)): value for key, value in loaded.items()}


class SdkGuard:
    """The guard of a program's Claude Agent SDK sessions (see the module doc).

    Args:
        journal: where each session's turns are journaled (``None``: not kept).
        lessons: the lesson store (``None``: no lessons, nothing shown at session start).
        unattended: ``True`` or ``False`` to say so; ``None`` (default) reads the CLI's own word
            from the environment it runs with (:func:`~unstuck.integrations.coding_agents.claude_code.unattended_hint`).
        ask_wait_s: seconds an attended session's hook waits for :meth:`answer`.
        config: the guard's budgets.
        keeper: the sessions to use (the other arguments but ``unattended`` are then ignored).
    """

    def __init__(self, *, journal: Journal | None = None, lessons: LessonStore | None = None,
                 unattended: bool | None = None, ask_wait_s: float = ASK_WAIT_S, config: PolicyConfig | None = None,
                 keeper: SessionKeeper | None = None) -> None:
        self.keeper = keeper if keeper is not None else SessionKeeper(journal, lessons, ask_wait_s=ask_wait_s,
                                                                      config=config)
        self.unattended = unattended
        self._env: dict[str, str] = {**os.environ, "CLAUDE_CODE_ENTRYPOINT": SDK_ENTRYPOINT}
        self._started: set[str] = set()
        self._lock = threading.Lock()

    def options(self, options: ClaudeAgentOptions | None = None) -> ClaudeAgentOptions:
        """A copy of ``options`` (a default ``ClaudeAgentOptions`` when ``None``) with unstuck's hook
        matchers appended after the caller's own for each event; the hooks read the
        environment the SDK will start the CLI with (``os.environ``, ``CLAUDE_CODE_ENTRYPOINT``
        ``sdk-py``, then ``options.env``)."""
        chosen = options if options is not None else ClaudeAgentOptions()
        self._env = {**os.environ, "CLAUDE_CODE_ENTRYPOINT": SDK_ENTRYPOINT, **chosen.env}
        hooks: dict[str, list[HookMatcher]] = {str(k): list(v) for k, v in (chosen.hooks or {}).items()}
        for event in (*EVENTS, PROMPT_EVENT):
            hooks.setdefault(event, []).append(HookMatcher(matcher=None, hooks=[self._callback],
                                                           timeout=float(HOOK_TIMEOUT_S)))
        # the SDK's HookEvent literal leaves SessionStart out; the CLI takes it (hooks reference)
        return dataclasses.replace(chosen, hooks=cast(Any, hooks))

    async def _callback(self, input_data: Any, tool_use_id: str | None, context: HookContext) -> Any:
        """One hook callback of the SDK: the input dict → :class:`HookEvent` → the session's
        guard → the SDK's output dict. Runs the guard in a worker thread (probes run programs)."""
        payload: Mapping[str, Any] = input_data
        event_name = str(payload.get("hook_event_name", ""))
        if event_name in (PROMPT_EVENT, START_EVENT):
            session = str(payload.get("session_id", ""))
            with self._lock:
                first = session not in self._started
                self._started.add(session)
            if not first:
                return {}
            if event_name == PROMPT_EVENT:  # read as the session's start, answered as the prompt's hook
                payload = {**payload, "hook_event_name": START_EVENT, "source": "startup"}
        event = HOOKS.parse(START_EVENT if event_name == PROMPT_EVENT else event_name, payload, self._env)
        if event_name == PROMPT_EVENT:
            event = dataclasses.replace(event, event_name=PROMPT_EVENT)
        flag: str | None = None
        if self.unattended is True:
            flag = "SdkGuard(unattended=True)"
        elif self.unattended is False:
            event = dataclasses.replace(event, unattended_hint=None)
        return await asyncio.to_thread(self._handle, event, flag)

    def _handle(self, event: HookEvent, flag: str | None) -> dict[str, Any]:
        outcome = self.keeper.handle(HOOKS, event, self._env, unattended_flag=flag)
        if outcome.wait is not None:
            outcome = self.keeper.wait(outcome.wait)
        return sdk_output(outcome.stdout)

    def question(self, session_id: str) -> Escalation | None:
        """The question the SDK session ``session_id`` stopped with (or is asking), or ``None``."""
        found = self.keeper.find(session_id)
        return None if found is None else found.guard.escalation

    def turn_id(self, session_id: str) -> str:
        """The journal's turn id of the SDK session ``session_id`` (its first stretch)."""
        return turn_id_of(HOOKS.agent, session_id)

    def answer(self, session_id: str, answer: Answer) -> dict[str, Any]:
        """The user's answer to an attended session's question
        (:meth:`SessionKeeper.answer <unstuck.integrations.coding_agents.sessions.SessionKeeper.answer>`:
        "done" runs the blocker's probe).

        Raises:
            KeyError: no session has that id.
            ValueError: the session has no open question.
        """
        return self.keeper.answer(session_id, answer)

    def close(self) -> None:
        """Wake every hook still waiting for an answer (their sessions stop)."""
        self.keeper.close()
