"""Chaos: the parent of a live tool tree dies (SIGTERM, SIGINT, SIGKILL) and no process of
the tree may outlive it. The parent is a real Python process leasing a real tree of
``sleep 3600`` processes (one in the group, one in a subshell, one that left the group with
setsid); after it dies, /proc is scanned (psutil) for any process carrying one of its lease
tokens or descending from the tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from conftest import bare_env, until
from unstuck.processes.members import tagged, token_prefix

#: The parent: leases a tree that would sleep an hour; ``contain`` installs the SIGTERM/SIGINT
#: drain and the supervisor as ``unstuck run`` does (``containment.install_containment``).
PARENT = """
import json
import signal
import sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a foreground command has it (a background job inherits it ignored)
from pathlib import Path
from unstuck.processes import containment, leases
if sys.argv[1] == "contain":
    containment.install_containment()
tree = "sleep 3600 & (sleep 3600 & wait) & setsid sleep 3600 & wait"
leases.run_leased(["bash", "-c", tree], cwd=Path(sys.argv[2]), env=json.loads(sys.argv[3]), deadline_s=600)
"""
TREE = 6  # bash, its sleep, the subshell and its sleep, the setsid sleep; and at least one more bash or sleep
SETTLE_S = 5.0


def _tree_of(pids: set[int]) -> set[int]:
    """The live processes among ``pids`` and their descendants (psutil), zombies excluded."""
    found: set[int] = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for member in [proc, *proc.children(recursive=True)]:
                if member.status() != psutil.STATUS_ZOMBIE:
                    found.add(member.pid)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def parent(tmp_path: Path) -> Iterator[Callable[[str], tuple[subprocess.Popen[bytes], set[int]]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> tuple[subprocess.Popen[bytes], set[int]]:
        proc = subprocess.Popen([sys.executable, "-c", PARENT, mode, str(tmp_path), json.dumps(bare_env())], start_new_session=True)
        started.append(proc)
        assert until(lambda: len(tagged(token_prefix(proc.pid))) >= TREE - 1, 10), "the tool tree started"
        return proc, set(tagged(token_prefix(proc.pid)))

    yield start
    for proc in started:  # whatever a failed test left: never leak an hour of sleep
        for pid in tagged(token_prefix(proc.pid)):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _left(parent: subprocess.Popen[bytes], tree: set[int]) -> set[int]:
    return set(tagged(token_prefix(parent.pid))) | _tree_of(tree)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_terminated_or_interrupted_parent_ends_its_tool_tree_before_it_exits(parent, signum: int) -> None:
    proc, tree = parent("contain")
    os.kill(proc.pid, signum)
    code = proc.wait(timeout=10)
    assert code != 0  # it still dies of the signal (SIGTERM) or of KeyboardInterrupt (SIGINT)
    assert until(lambda: not _left(proc, tree), SETTLE_S), f"survivors: {_left(proc, tree)}"


def test_a_killed_parent_leaves_no_tool_process_behind_its_supervisor_ends_them(parent) -> None:
    proc, tree = parent("contain")
    supervisor = {p.pid for p in psutil.Process(proc.pid).children() if "unstuck.processes.supervisor" in p.cmdline()}
    assert len(supervisor) == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert until(lambda: not _left(proc, tree), SETTLE_S), f"survivors: {_left(proc, tree)}"
    assert until(lambda: not _tree_of(supervisor), SETTLE_S), "the supervisor exits once it has ended them"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_without_containment_a_dead_parent_leaks_its_tree_the_condition_is_real(parent, signum: int) -> None:
    proc, tree = parent("bare")
    os.kill(proc.pid, signum)
    proc.wait(timeout=10)
    time.sleep(0.3)
    assert _left(proc, tree) >= tree - {proc.pid}  # the fixture kills them


#: A scenario whose one step starts a tree of hour-long sleeps through the run_command tool.
LONG_TREE = """\
name: long_tree
title: a command that starts a tree of hour-long sleeps
role: counter
tags: [chaos]
setup:
  files:
    README.md: "# app\\n"
task: "Run the long job."
plan:
  - {tool: run_command, args: {command: "sleep 3600 & (sleep 3600 & wait) & wait"}}
agents: [improviser]
expect:
  status: done
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_unstuck_run_killed_mid_tool_leaves_no_process_of_its_turn(tmp_path: Path, signum: int) -> None:
    (tmp_path / "long_tree.yaml").write_text(LONG_TREE)
    run = subprocess.Popen([sys.executable, "-m", "unstuck", "run", "long_tree", "--trust", "--scenario-dir", str(tmp_path),
                            "--unattended"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        assert until(lambda: len(tagged(token_prefix(run.pid))) >= 4, 20), "the tool tree started"
        tree = set(tagged(token_prefix(run.pid)))
        os.kill(run.pid, signum)
        assert run.wait(timeout=10) == -signum  # it dies of the signal, as before, with its tree ended
        assert until(lambda: not _left(run, tree), SETTLE_S), f"survivors: {_left(run, tree)}"
    finally:
        for pid in tagged(token_prefix(run.pid)):
            os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            run.kill()
        run.wait()


def test_a_parent_that_ignores_sigint_keeps_ignoring_it_and_its_tools_run_on(tmp_path: Path) -> None:
    # a shell's background job without job control starts with SIGINT ignored (POSIX 2.11)
    code = ("import signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "from unstuck.processes.containment import install_signal_drain\ninstall_signal_drain()\n"
            "print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.getsignal(signal.SIGTERM) != signal.SIG_DFL)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=bare_env(PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src")))
    assert done.stdout.split() == ["True", "True"], done.stderr  # SIGINT left ignored; SIGTERM drains
