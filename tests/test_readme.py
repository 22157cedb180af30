"""The README's quickstart promises: two set-up commands, and CI runs the same test command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the quickstart has no sh code block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_quickstart_has_exactly_two_commands_main_job_then_tests() -> None:
    commands = quickstart_commands()
    assert len(commands) == 2
    assert "unstuck eval" in commands[0] and "./bootstrap" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_after_bootstrap() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    test_command = quickstart_commands()[1]
    assert test_command in ci
    assert ci.index("./bootstrap") < ci.index(test_command)


def test_the_guard_your_own_loop_example_runs_against_a_local_server_and_stops() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from chat_server import ChatServer

    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Guard your own loop", 1)[1]
    block = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert block is not None
    calls = [{"tool_calls": [("gh_repo_view", {"repo": "cli/cli"})]}] * 10
    scope: dict[str, object] = {}
    closing = "I will re-check the repository once you are signed in."
    with ChatServer(calls, closing=closing) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", server.base_url)
        env.setenv("MODEL", "local-model")
        exec(compile(block.group(1), "README.md", "exec"), scope)
        requests = len([r for r in server.requests if r.get("tools")])
    guard = scope["guard"]
    escalation = guard.escalation  # type: ignore[attr-defined]
    assert escalation is not None and escalation.kind.value == "auth"
    assert "gh auth login" in escalation.user_action
    assert requests <= 6  # it stopped within the inferred blocker's budget, not after ten calls
    assert escalation.next_step == "I will re-check the repository once you are signed in."  # from closer=


def test_the_run_sample_is_what_the_run_prints() -> None:
    import subprocess
    import sys

    text = (ROOT / "README.md").read_text(encoding="utf-8").split("To run one turn and watch it:", 1)[1]
    sample = re.findall(r"```\n(.*?)```", text, re.DOTALL)[0].splitlines()
    printed = subprocess.run([sys.executable, "-m", "unstuck", "run", "gh_logged_out", "--agent", "improviser",
                              "--unattended"], capture_output=True, text=True, timeout=120, check=False)
    assert printed.returncode == 3
    lines = printed.stdout.splitlines()
    for wanted in sample:
        if wanted.startswith(("Blocked:", "You need to:", "Then:")):
            assert wanted in lines
