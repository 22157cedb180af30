"""``unstuck hooks install|uninstall|status`` on real settings files with hooks of the user's own:
the user's entries survive byte for byte, unstuck's come after them, and a file that is not JSON
is left untouched with an error naming the file and the line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unstuck.integrations.coding_agents.claude_code import EVENTS, HOOKS, ClaudeCodeHooks
from unstuck.integrations.coding_agents.events import OWN_MARKER, is_own_group
from unstuck.integrations.coding_agents.install import SettingsError, install_change, parse_spans, uninstall_change

DATA = Path(__file__).parent / "data"
USERS = (DATA / "claude_settings_with_user_hooks.json").read_text(encoding="utf-8")


def unstuck(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("UNSTUCK_STORE",)}
    env["HOME"] = str(home)
    env["UNSTUCK_GUARD_SOCKET"] = str(home / "guard.sock")
    return subprocess.run([sys.executable, "-m", "unstuck", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False, cwd=home)


def user_groups(text: str) -> dict[str, list[str]]:
    """Each event's groups that are not unstuck's, as the exact text they have in the file."""
    root = parse_spans(text, Path("settings.json"))
    hooks = root.member("hooks")
    assert hooks is not None
    return {event: [text[item.start:item.end] for item in groups.items if not is_own_group(item.value)]
            for event, _, groups in hooks.members}


def test_install_then_uninstall_gives_back_the_user_s_settings_byte_for_byte(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USERS, encoding="utf-8")
    out = unstuck(tmp_path, "hooks", "install", "claude-code", "--user")
    assert out.returncode == 0, out.stderr
    installed = settings.read_text(encoding="utf-8")
    data = json.loads(installed)
    for event in EVENTS:  # unstuck's group is the last of each event; the user's come first, unchanged
        assert is_own_group(data["hooks"][event][-1])
    assert user_groups(installed) == {**user_groups(USERS), **{e: [] for e in EVENTS if e not in user_groups(USERS)}}
    assert data["permissions"] == json.loads(USERS)["permissions"]
    client = Path(data["hooks"]["Stop"][-1]["hooks"][0]["command"].split()[0])
    assert client.name == OWN_MARKER and os.access(client, os.X_OK)
    status = unstuck(tmp_path, "hooks", "status", "claude-code", "--json")
    rows = json.loads(status.stdout)["hooks"]
    assert rows[0]["installed"] == {event: 1 for event in EVENTS}
    again = unstuck(tmp_path, "hooks", "install", "claude-code", "--user")  # a second install changes nothing
    assert again.returncode == 0 and settings.read_text(encoding="utf-8") == installed
    out = unstuck(tmp_path, "hooks", "uninstall", "claude-code", "--user")
    assert out.returncode == 0, out.stderr
    assert settings.read_bytes() == USERS.encode("utf-8")


def test_install_into_no_settings_creates_them_and_uninstall_removes_what_it_made(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    settings = project / ".claude" / "settings.json"
    out = unstuck(tmp_path, "hooks", "install", "claude-code", "--project", "--project-dir", str(project),
                  "--unattended")
    assert out.returncode == 0, out.stderr
    data = json.loads(settings.read_text(encoding="utf-8"))
    assert list(data["hooks"]) == list(EVENTS)
    assert all(g["hooks"][0]["command"].split()[1] == "--unattended" for e in EVENTS for g in data["hooks"][e])
    assert not (tmp_path / ".claude").exists()  # the user's own settings are not touched
    out = unstuck(tmp_path, "hooks", "uninstall", "claude-code", "--project", "--project-dir", str(project))
    assert out.returncode == 0, out.stderr
    assert not settings.exists()


def test_dry_run_prints_the_change_and_writes_nothing(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USERS, encoding="utf-8")
    out = unstuck(tmp_path, "hooks", "install", "claude-code", "--dry-run")
    assert out.returncode == 0 and "+" in out.stdout and "claude-code PreToolUse" in out.stdout
    assert settings.read_text(encoding="utf-8") == USERS


def test_settings_that_are_not_json_are_left_untouched_with_the_file_and_line_named(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    broken = USERS.replace('"opus",', '"opus"', 1)  # a missing comma, on the model's line
    settings.write_text(broken, encoding="utf-8")
    line = broken.splitlines().index('    "env": {"BASH_DEFAULT_TIMEOUT_MS": "120000"},') + 1
    out = unstuck(tmp_path, "hooks", "install", "claude-code")
    assert out.returncode == 2
    assert f"{settings}:{line}:" in out.stderr.replace("\n", "") and "left as it is" in out.stderr.replace("\n", " ")
    assert settings.read_text(encoding="utf-8") == broken
    with pytest.raises(SettingsError) as caught:
        install_change(HOOKS, settings, f"{OWN_MARKER} claude-code")
    assert caught.value.line == line


def test_a_hooks_member_of_another_type_is_refused(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"hooks": {"PreToolUse": {"matcher": "*"}}}\n', encoding="utf-8")
    with pytest.raises(SettingsError, match="'hooks.PreToolUse' is not a list"):
        install_change(HOOKS, settings, f"{OWN_MARKER} claude-code")


def test_uninstall_removes_only_unstuck_s_groups_even_after_the_user_added_more(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(USERS, encoding="utf-8")
    installed = install_change(HOOKS, settings, f"/x/{OWN_MARKER} claude-code")
    assert installed.after is not None
    mine = '{"hooks": [{"type": "command", "command": "echo mine"}]}'
    edited = installed.after.replace('"Notification": [', f'"Notification": [{mine}, ', 1)
    settings.write_text(edited, encoding="utf-8")
    removed = uninstall_change(HOOKS, settings, installed.created)
    assert removed.after == USERS.replace('"Notification": [', f'"Notification": [{mine}, ', 1)


class _CommentedSettings(ClaudeCodeHooks):
    """An agent whose settings take comments (as Gemini CLI reads its settings: strip-json-comments)."""

    settings_comments = True


def test_settings_with_comments_keep_them_when_the_agent_reads_comments(tmp_path: Path) -> None:
    commented = ('{\n  // my model\n  "model": "x", /* keep */\n  "hooks": {\n    "PreToolUse": [\n'
                 '      {"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]} // mine\n    ]\n  }\n}\n')
    settings = tmp_path / "settings.json"
    settings.write_text(commented, encoding="utf-8")
    with pytest.raises(SettingsError):  # an agent that reads plain JSON: refused, untouched
        install_change(HOOKS, settings, f"/x/{OWN_MARKER} claude-code")
    mapping = _CommentedSettings()
    change = install_change(mapping, settings, f"/x/{OWN_MARKER} claude-code")
    assert change.after is not None and "// my model" in change.after and "/* keep */" in change.after
    settings.write_text(change.after, encoding="utf-8")
    assert uninstall_change(mapping, settings, change.created).after == commented


USER_SETTINGS = {"claude-code": "claude_settings_with_user_hooks.json", "codex": "codex_hooks_with_user_hooks.json",
                 "gemini": "gemini_settings_with_user_hooks.json"}


@pytest.mark.parametrize("agent", list(USER_SETTINGS))
def test_each_agent_s_settings_with_the_user_s_hooks_survive_install_and_uninstall(tmp_path: Path, agent: str) -> None:
    from unstuck.integrations.coding_agents.events import Agent
    from unstuck.integrations.coding_agents.sessions import hooks_for

    try:
        mapping = hooks_for(Agent(agent))
    except LookupError:
        pytest.skip(f"the {agent} mapping is not in this build")
    text = (DATA / USER_SETTINGS[agent]).read_text(encoding="utf-8")
    settings = mapping.settings_path("user", tmp_path, tmp_path / "repo")
    settings.parent.mkdir(parents=True)
    settings.write_text(text, encoding="utf-8")
    out = unstuck(tmp_path, "hooks", "install", agent)
    assert out.returncode == 0, out.stderr
    installed = settings.read_text(encoding="utf-8")
    data = json.loads(installed)
    for event in mapping.event_names:
        assert is_own_group(data["hooks"][event][-1]), event
    for event, groups in user_groups(text).items():
        assert user_groups(installed)[event] == groups  # the user's, first, as they were written
    assert unstuck(tmp_path, "hooks", "uninstall", agent).returncode == 0
    assert settings.read_bytes() == text.encode("utf-8")


def test_every_agent_waits_for_its_hook_longer_than_an_attended_question_waits_for_its_answer() -> None:
    from unstuck.integrations.coding_agents import claude_code, client, codex, gemini

    # an agent that kills its hook first would run the call unguarded while the question is open
    assert min(claude_code.HOOK_TIMEOUT_S, codex.HOOK_TIMEOUT_S, gemini.HOOK_TIMEOUT_MS / 1000) > client.ASK_WAIT_CLIENT_S
