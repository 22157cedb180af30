"""Scripted model servers on 127.0.0.1 that speak the coding agents' real model APIs, so the real
CLIs (Codex CLI, Gemini CLI) run offline against an unstuck :class:`~unstuck.toolkit.models.Model`
(a reference agent, or a played list of moves) through their own base-URL settings (issue 26).
Internal: not a supported import path (docs/reference/index.md lists those that are).

* :mod:`~unstuck.evals.model_servers.base`: the loopback server, its request log, the played
  list (:class:`~unstuck.evals.model_servers.base.PlayList`) and the shell-tool alias;
* :mod:`~unstuck.evals.model_servers.openai_responses`: the OpenAI Responses API with streaming
  (what ``codex`` posts to a model provider with ``wire_api = "responses"``);
* :mod:`~unstuck.evals.model_servers.gemini`: the Gemini API's ``generateContent`` and
  ``streamGenerateContent`` (what ``gemini`` posts to ``GOOGLE_GEMINI_BASE_URL``).

Importing this package starts nothing.
"""
