"""The README's quickstart promises: two set-up commands, and CI runs the same test command."""

from __future__ import annotations

import contextlib
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import bare_env
from unstuck.evals.chat_server import DEFAULT_PORT

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


def test_the_one_turn_run_comes_right_after_the_quickstart() -> None:
    headings = re.findall(r"^## (.+)$", (ROOT / "README.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert headings[headings.index("Quickstart") + 1] == "One turn, watched"


def test_ci_runs_the_readme_test_command_after_bootstrap() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    test_command = quickstart_commands()[1]
    assert test_command in ci
    assert ci.index("./bootstrap") < ci.index(test_command)


@contextlib.contextmanager
def chat_server(*args: str) -> Iterator[str]:
    """``python -m unstuck.evals.chat_server --port 0 ARGS`` as the README tells a user to start
    it; yields the ``OPENAI_BASE_URL`` it prints on its first line, and ends it on the way out."""
    server = subprocess.Popen([sys.executable, "-m", "unstuck.evals.chat_server", "--port", "0", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=bare_env(PYTHONPATH=ROOT / "src"))
    try:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 60)
        first = server.stdout.readline() if ready else ""
        assert first.startswith("OPENAI_BASE_URL=http://127.0.0.1:"), (first, server.poll())
        yield first.strip().split("=", 1)[1]
    finally:
        server.terminate()
        try:
            server.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate(timeout=10)


def readme_loop() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Guard your own loop", 1)[1]
    block = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_readme_says_how_to_run_its_loop_without_a_model() -> None:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Guard your own loop", 1)[1]
    prose = section.split("```python", 1)[0]
    assert "python -m unstuck.evals.chat_server" in prose and "OPENAI_BASE_URL" in prose
    assert f"127.0.0.1:{DEFAULT_PORT}/v1" in prose  # the address the server prints by default


def test_the_guard_your_own_loop_example_runs_against_the_scripted_chat_server_and_stops() -> None:
    scope: dict[str, object] = {}
    with chat_server() as base_url, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", base_url)
        env.delenv("MODEL", raising=False)
        exec(compile(readme_loop(), "README.md", "exec"), scope)
    guard = scope["guard"]
    escalation = guard.escalation  # type: ignore[attr-defined]
    assert escalation is not None and escalation.kind.value == "auth"
    assert "gh auth login" in escalation.user_action
    calls = [m for m in scope["messages"] if isinstance(m, dict) and m.get("role") == "tool"]  # type: ignore[attr-defined]
    # the replay agent would make its call 10 times (--repeat's default); identical failing calls
    # escalate as stuck at the third (DESIGN.md, "Defaults": repetition, 3 consecutive identical
    # calls), inside the inferred blocker's workaround budget (4) after the first
    assert len(calls) == 3
    # closer=: the server's agent said what it will do next (agents.Replay.closing_sentence, --task)
    assert escalation.next_step == "Once that is done, I will go on with the task: Describe cli/cli"


def test_the_readme_loop_as_a_script_prints_the_question(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text(readme_loop(), encoding="utf-8")
    with chat_server("--task", "Describe cli/cli") as base_url:
        ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False,
                             env=bare_env(PYTHONPATH=ROOT / "src", OPENAI_BASE_URL=base_url))
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = ran.stdout.splitlines()
    assert lines[0].startswith("Blocked: gh is not signed in") and "gh auth login" in lines[1]


def test_the_chat_server_refuses_a_call_that_is_not_a_name_and_a_json_object() -> None:
    ran = subprocess.run([sys.executable, "-m", "unstuck.evals.chat_server", "--port", "0", "--call", "gh_repo_view cli/cli"],
                         capture_output=True, text=True, timeout=60, check=False, env=bare_env(PYTHONPATH=ROOT / "src"))
    assert ran.returncode == 2 and "--call" in ran.stderr and "'gh_repo_view cli/cli'" in ran.stderr


def test_the_run_sample_is_what_the_run_prints() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## One turn, watched", 1)[1]
    sample = re.findall(r"```\n(.*?)```", text, re.DOTALL)[0].splitlines()
    printed = subprocess.run([sys.executable, "-m", "unstuck", "run", "gh_logged_out", "--agent", "improviser",
                              "--unattended"], capture_output=True, text=True, timeout=120, check=False)
    assert printed.returncode == 3
    lines = printed.stdout.splitlines()
    for wanted in sample:
        if wanted.startswith(("Blocked:", "You need to:", "Then:")):
            assert wanted in lines
