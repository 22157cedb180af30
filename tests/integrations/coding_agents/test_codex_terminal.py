"""Codex CLI 0.171.0's interactive terminal (in ``tmux``): how a user trusts the hooks ``unstuck hooks
install codex`` wrote (Codex runs a non-managed hook only once trusted: at start-up it asks "Hooks
need review", and "Trust all and continue" records each hook's hash in ``config.toml``), that
``codex exec`` then runs them without ``--dangerously-bypass-hook-trust``, and that the terminal
shows the question a hook's ``systemMessage`` carries (``codex exec`` prints none)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integrations.coding_agents.agent_worlds import CodexWorld, probe_hook, probe_records

from unstuck.evals.model_servers.base import PlayList
from unstuck.integrations.coding_agents import codex
from unstuck.toolkit.workspace import KNOWN_CLIS

pytestmark = pytest.mark.slow

GH = KNOWN_CLIS["gh"]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[CodexWorld]:
    made = CodexWorld(tmp_path / "codex")
    try:
        yield made
    finally:
        made.close()


def test_hooks_trusted_in_codex_s_terminal_run_under_codex_exec(world: CodexWorld) -> None:
    world.unstuck("hooks", "install", "codex", "--user")
    untrusted = world.scenario_run("gh_logged_out", bypass_hook_trust=False)
    assert world.journal() == []  # Codex skipped the untrusted hooks: no guard saw the session
    assert GH.sign_in_flow in untrusted.commands
    before, after = world.terminal(PlayList([]))
    assert "Hooks need review" in before and "Trust all and continue" in before
    assert "Ask Codex" in after
    assert "[hooks.state" in (world.home / ".codex" / "config.toml").read_text(encoding="utf-8")
    trusted = world.scenario_run("gh_logged_out", bypass_hook_trust=False)
    assert [t["status"] for t in world.journal()] == ["blocked"]  # the hooks ran: the guard stopped it
    assert any("unattended" in (trusted.result_of(i) or "") for i, (_, agent) in enumerate(trusted.server.played())
               if agent.arguments.get("cmd") == GH.sign_in_flow)


def test_codex_s_terminal_shows_the_question_a_hook_sends(world: CodexWorld) -> None:
    command = probe_hook(world.root, "codex")([{"event": "PreToolUse", "match": "ls", "action": "stop",
                                                "reason": "R-TERMINAL", "user_message": "Q-TERMINAL-QUESTION"}])
    groups = {entry.event_name: [entry.group] for entry in codex.HOOKS.install_entries(command)}
    (world.home / ".codex").mkdir(parents=True, exist_ok=True)
    (world.home / ".codex" / "hooks.json").write_text(json.dumps({"hooks": groups}), encoding="utf-8")
    screens = world.terminal(PlayList(["ls"], answer="A-TERMINAL-DONE"), "List the folder",
                             wait_for="A-TERMINAL-DONE")
    answered = screens[-1]
    assert "A-TERMINAL-DONE" in answered, "\n----\n".join(screens)
    assert "Q-TERMINAL-QUESTION" in answered and "R-TERMINAL" in answered  # "Blocked by hook", both texts
    assert [r["event"] for r in probe_records(world.root)][:2] == ["SessionStart", "PreToolUse"]
