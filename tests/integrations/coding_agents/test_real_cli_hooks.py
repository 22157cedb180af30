"""The Codex and Gemini mappings' replies, as the real CLIs act on them: each CLI runs offline
(a scripted model server on 127.0.0.1, a temporary home) with a hook that reads every payload
through unstuck's mapping and answers with a rendered reply (``agent_worlds.probe_hook``), so
what is tested is what Codex 0.171.0 and Gemini CLI 0.61.0 do with it: a refused command does
not run and the model reads the reason, added context reaches the model, a stop ends the agent,
and a post-tool event's exit status is read live (Codex: from its transcript)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integrations.coding_agents.agent_worlds import CodexWorld, GeminiWorld, probe_hook, probe_records

from unstuck.evals.model_servers.base import PlayList
from unstuck.integrations.coding_agents import codex, gemini

pytestmark = pytest.mark.slow

REFUSED = "touch refused.txt"
FAILING = "echo hello; exit 3"


@pytest.fixture
def codex_world(tmp_path: Path) -> Iterator[CodexWorld]:
    world = CodexWorld(tmp_path / "codex")
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def gemini_world(tmp_path: Path) -> Iterator[GeminiWorld]:
    world = GeminiWorld(tmp_path / "gemini")
    try:
        yield world
    finally:
        world.close()


def codex_hooks(world: CodexWorld, rules: list[dict[str, Any]]) -> None:
    command = probe_hook(world.root, "codex")(rules)
    groups = {entry.event_name: [entry.group] for entry in codex.HOOKS.install_entries(command)}
    (world.home / ".codex").mkdir(parents=True, exist_ok=True)
    (world.home / ".codex" / "hooks.json").write_text(json.dumps({"hooks": groups}), encoding="utf-8")


def gemini_hooks(world: GeminiWorld, rules: list[dict[str, Any]]) -> None:
    command = probe_hook(world.root, "gemini")(rules)
    world.settings["hooks"] = {entry.event_name: [entry.group] for entry in gemini.HOOKS.install_entries(command)}


def test_codex_skips_an_untrusted_hook_and_runs_it_with_the_bypass_flag(codex_world: CodexWorld) -> None:
    codex_hooks(codex_world, [])
    run = codex_world.run(PlayList(["ls"]), "List the folder.", bypass_hook_trust=False)
    assert run.exit_code == 0 and run.commands == ["ls"]
    assert probe_records(codex_world.root) == []  # Codex runs a non-managed hook only once trusted
    codex_world.run(PlayList(["ls"]), "List the folder.", bypass_hook_trust=True)
    assert [r["event"] for r in probe_records(codex_world.root)] == ["SessionStart", "PreToolUse", "PostToolUse",
                                                                      "Stop"]


def test_codex_refused_command_never_runs_and_the_model_reads_the_reason(codex_world: CodexWorld) -> None:
    codex_hooks(codex_world, [{"event": "PreToolUse", "match": REFUSED, "action": "deny", "reason": "R-DENY-1"}])
    run = codex_world.run(PlayList([REFUSED, FAILING, "ls"]), "Do the task.")
    assert not (codex_world.work / "refused.txt").exists()
    first, second, third = run.results()
    assert first.startswith("Error: Command blocked by PreToolUse hook: R-DENY-1")
    assert "(exit code 3)" in second and "refused.txt" not in third
    posts = [r for r in probe_records(codex_world.root) if r["event"] == "PostToolUse"]
    # the exit status read from Codex's transcript while the hook ran
    assert [(r["arguments"]["command"], r["kind"], r["exit_code"]) for r in posts] == [
        (FAILING, "post_tool_failure", 3), ("ls", "post_tool", 0)]
    assert posts[0]["stdout"] == "hello\n"
    assert {r["hint"] for r in probe_records(codex_world.root)} == {"codex exec (session_meta.source=exec)"}


def test_codex_added_context_reaches_the_model(codex_world: CodexWorld) -> None:
    codex_hooks(codex_world, [
        {"event": "SessionStart", "action": "context", "context": "S-CONTEXT-1"},
        {"event": "PostToolUse", "match": "ls", "action": "context", "context": "P-CONTEXT-2"},
    ])
    run = codex_world.run(PlayList(["ls"]), "List the folder.")
    first, last = run.server.requests[0].body, run.server.requests[-1].body
    assert "S-CONTEXT-1" in json.dumps(first["input"])
    assert "P-CONTEXT-2" in json.dumps(last["input"]) and "P-CONTEXT-2" not in json.dumps(first["input"])


def test_codex_post_tool_deny_replaces_the_output_and_stop_ends_the_turn(codex_world: CodexWorld) -> None:
    codex_hooks(codex_world, [
        {"event": "PostToolUse", "match": FAILING, "action": "deny", "reason": "R-BLOCK-2"},
        {"event": "Stop", "action": "stop", "reason": "blocked", "user_message": "Q-STOP-3"},
    ])
    run = codex_world.run(PlayList([FAILING], answer="A-FINAL"), "Do the task.")
    assert run.results() == ["Error: R-BLOCK-2"] or run.results()[0].endswith("R-BLOCK-2")
    stop = [r for r in probe_records(codex_world.root) if r["event"] == "Stop"]
    assert json.loads(stop[0]["reply"]) == {"continue": False, "stopReason": "Q-STOP-3", "systemMessage": "Q-STOP-3"}
    # codex exec 0.171.0 prints neither text and exits 0 whatever a hook says (documented)
    assert run.exit_code == 0 and "A-FINAL" in run.stdout and "Q-STOP-3" not in run.stdout + run.stderr


def test_gemini_refused_command_never_runs_and_the_model_reads_the_reason(gemini_world: GeminiWorld) -> None:
    gemini_hooks(gemini_world, [{"event": "BeforeTool", "match": REFUSED, "action": "deny", "reason": "R-DENY-1"}])
    run = gemini_world.run(PlayList([REFUSED, FAILING, "ls"]), "Do the task.")
    assert run.exit_code == 0, run.stderr
    assert not (gemini_world.work / "refused.txt").exists()
    first, second, _ = run.results()
    assert first == "Error: Tool execution blocked: R-DENY-1"
    assert "(exit code 3)" in second
    posts = [r for r in probe_records(gemini_world.root) if r["event"] == "AfterTool"]
    assert [(r["arguments"]["command"], r["kind"], r["exit_code"]) for r in posts] == [
        (FAILING, "post_tool_failure", 3), ("ls", "post_tool", 0)]
    assert all(r["hint"] is None for r in probe_records(gemini_world.root))  # Gemini CLI says nothing of -p


def test_gemini_added_context_reaches_the_model(gemini_world: GeminiWorld) -> None:
    gemini_hooks(gemini_world, [
        {"event": "SessionStart", "action": "context", "context": "S-CONTEXT-1"},
        {"event": "AfterTool", "match": "ls", "action": "context", "context": "P-CONTEXT-2"},
    ])
    run = gemini_world.run(PlayList(["ls"]), "List the folder.")
    assert "S-CONTEXT-1" in json.dumps(run.server.requests[0].body["contents"])
    assert "<hook_context>P-CONTEXT-2</hook_context>" in run.results()[0]


def test_gemini_stop_before_a_tool_ends_the_agent_and_shows_the_question(gemini_world: GeminiWorld) -> None:
    gemini_hooks(gemini_world, [{"event": "BeforeTool", "match": "echo stop-here", "action": "stop",
                                 "reason": "blocked", "user_message": "Q-STOP-3"}])
    run = gemini_world.run(PlayList(["ls", "echo stop-here", "echo never"]), "Do the task.")
    assert "echo never" not in run.commands  # the agent ended at the stop: no more model turns
    assert len(run.server.requests) == 2
    assert "Q-STOP-3" in run.stderr  # "Hook system message" and "Agent execution stopped"
    assert run.exit_code == 0  # gemini -p 0.61.0 exits 0 after a hook's stop (documented)
