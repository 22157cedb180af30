"""unstuck inside the coding agents people run from a terminal or a CI job: Claude Code, Codex
CLI and Gemini CLI, through their own hooks (issue 26).
Internal: not a supported import path (docs/reference/index.md lists those that are).

* :mod:`~unstuck.integrations.coding_agents.events`: the shared vocabulary (agents, hook kinds,
  events, replies, the :class:`~unstuck.integrations.coding_agents.events.AgentHooks` protocol);
* one module per agent mapping its payloads and replies (``claude_code``, ``codex``, ``gemini``);
* the guard server (``unstuck serve``), the hook client, and ``unstuck hooks install``.

Importing this package imports no agent.
"""
