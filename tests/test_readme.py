"""The README's quickstart promises: two set-up commands, and CI runs the same test command."""

from __future__ import annotations

import re
from pathlib import Path

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
