"""Chaos: what a dead run left is ended and removed. A parent leasing a tree of ``sleep 3600``
dies by SIGKILL without containment (so the tree leaks) and the start-up sweep
(``containment.sweep_leftovers``) ends it; ``unstuck run`` of a locking scenario is killed mid-run
and its lock holder (a leased fixture) dies with it, while the sandbox folders it made are
left in the temporary directory until the next sandbox's sweep (``sandbox.sweep_sandboxes``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import psutil
import pytest

from conftest import bare_env, until
from unstuck.evals.sandbox import SANDBOX_PREFIX, SOCKET_PREFIX, Sandbox, sweep_sandboxes
from unstuck.processes.containment import sweep_leftovers
from unstuck.processes.identity import start_time
from unstuck.processes.members import LEASE_ENV, tagged, token_prefix

#: Leases a tree that would sleep an hour, with no containment installed (a run that dies leaks it).
BARE_PARENT = """
import json
import sys
from pathlib import Path
from unstuck.processes import leases
tree = "sleep 3600 & (sleep 3600 & wait) & setsid sleep 3600 & wait"
leases.run_leased(["bash", "-c", tree], cwd=Path(sys.argv[1]), env=json.loads(sys.argv[2]), deadline_s=600)
"""
TREE = 5  # bash, its sleep, the subshell and its sleep, the setsid sleep
SETTLE_S = 5.0


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def test_sweep_ends_the_tree_a_parent_killed_without_containment_left(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", BARE_PARENT, str(tmp_path), json.dumps(bare_env())], start_new_session=True)
    prefix = token_prefix(parent.pid)
    try:
        assert until(lambda: len(tagged(prefix)) >= TREE, 10), "the tool tree started"
        tree = tagged(prefix)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        time.sleep(0.2)
        assert set(tagged(prefix)) == set(tree), "without containment the whole tree outlives its parent"
        ended = sweep_leftovers(grace_s=1.0)
        assert set(tree) <= set(ended)
        assert until(lambda: not tagged(prefix), SETTLE_S), f"survivors: {tagged(prefix)}"
        assert all(start_time(pid) != start for pid, start in tree.items())
    finally:
        _kill_all(tagged(prefix))
        if parent.poll() is None:
            parent.kill()
        parent.wait()


def test_sweep_leaves_the_leases_of_a_live_owner_alone(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", BARE_PARENT, str(tmp_path), json.dumps(bare_env())], start_new_session=True)
    prefix = token_prefix(parent.pid)
    try:
        assert until(lambda: len(tagged(prefix)) >= TREE, 10), "the tool tree started"
        tree = tagged(prefix)
        ended = sweep_leftovers(grace_s=0.5)
        assert not set(tree) & set(ended)
        assert tagged(prefix) == tree
    finally:
        _kill_all(tagged(prefix))
        parent.kill()
        parent.wait()


def test_a_token_naming_a_pid_that_started_after_the_process_is_a_reused_pid_and_swept() -> None:
    # the shell waits, starts a child, then becomes a sleep whose token names that child: the
    # child has the pid the token names, but started after the token's carrier, so it cannot
    # be the owner (an owner starts before every process of its leases)
    script = "sleep 0.2; sleep 3600 & exec env " + LEASE_ENV + "=$!-reused sleep 3600"
    carrier = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    children: dict[int, int | None] = {}

    def ready() -> bool:
        proc = psutil.Process(carrier.pid)
        kids = proc.children()
        children.clear()  # only the last look: the first may see the shell's ``sleep 0.2``
        children.update({kid.pid: start_time(kid.pid) for kid in kids})
        return len(kids) == 1 and proc.environ().get(LEASE_ENV, "").endswith("-reused")

    try:
        assert until(ready, 10), "the carrier became a sleep with a token naming its child"
        child = next(iter(children))
        ended = sweep_leftovers(grace_s=1.0)
        assert carrier.pid in ended
        assert child not in ended  # it carries no token: the sweep ends leases, nothing else
        assert carrier.wait(timeout=5) == -signal.SIGTERM
        assert start_time(child) == children[child]
    finally:
        _kill_all(pid for pid, start in children.items() if start is not None and start_time(pid) == start)
        if carrier.poll() is None:
            carrier.kill()
        carrier.wait()


#: A locking scenario whose one step runs an hour, so a kill lands mid-run every time.
LOCKED_LONG = """\
name: locked_long
title: a lock held by a fixture while a command runs an hour
role: counter
tags: [chaos]
setup:
  files:
    data/ledger.txt: "order 41\\n"
  hold_locks: {data/ledger.lock: flock}
task: "Run the long job."
plan:
  - {tool: run_command, args: {command: "sleep 3600"}}
agents: [improviser]
expect:
  status: done
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_unstuck_run_killed_while_a_lock_fixture_holds_leaves_no_holder_and_its_folders_are_swept(
    tmp_path: Path, signum: int,
) -> None:
    (tmp_path / "locked_long.yaml").write_text(LOCKED_LONG)
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = subprocess.Popen([sys.executable, "-m", "unstuck", "run", "locked_long", "--trust", "--scenario-dir", str(tmp_path),
                            "--unattended"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "TMPDIR": str(temp)}, start_new_session=True)
    prefix = token_prefix(run.pid)
    try:
        assert until(lambda: len(tagged(prefix)) >= 2, 20), "the lock holder and the tool started"
        leased = tagged(prefix)
        os.kill(run.pid, signum)
        assert run.wait(timeout=10) == -signum
        assert until(lambda: not tagged(prefix), SETTLE_S), f"survivors: {tagged(prefix)}"
        assert all(start_time(pid) != start for pid, start in leased.items())
        left = {entry.name.partition(str(run.pid))[0] for entry in temp.iterdir()}
        assert left == {SANDBOX_PREFIX, SOCKET_PREFIX}, "a killed run leaves its sandbox and socket folders"
        assert {path.name.partition(str(run.pid))[0] for path in sweep_sandboxes(temp)} == left
        assert not list(temp.iterdir())
    finally:
        _kill_all(tagged(prefix))
        if run.poll() is None:
            run.kill()
        run.wait()


def test_the_real_locked_file_scenario_killed_mid_run_leaves_no_lock_holder(tmp_path: Path) -> None:
    run = subprocess.Popen([sys.executable, "-m", "unstuck", "run", "locked_file", "--agent", "compliant",
                            "--unattended"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "TMPDIR": str(tmp_path)}, start_new_session=True)
    prefix = token_prefix(run.pid)
    try:
        assert until(lambda: bool(tagged(prefix)), 20), "the lock holder started"
        holder = tagged(prefix)
        os.kill(run.pid, signal.SIGKILL)
        assert run.wait(timeout=10) == -signal.SIGKILL, "it was killed mid-run, not after it ended"
        assert until(lambda: not tagged(prefix), SETTLE_S), f"survivors: {tagged(prefix)}"
        assert all(start_time(pid) != start for pid, start in holder.items())
    finally:
        _kill_all(tagged(prefix))
        if run.poll() is None:
            run.kill()
        run.wait()


def test_closing_a_sandbox_ends_its_lock_holder_and_a_new_sandbox_keeps_a_live_makers_folders(tmp_path: Path) -> None:
    with Sandbox() as box:
        box.hold_lock("flock", "ledger.lock")
        holder = tagged(token_prefix())
        assert len(holder) == 1
        mine = tmp_path / box.root.name  # named after this live process: never swept
        mine.mkdir()
        assert mine not in sweep_sandboxes(tmp_path)
    assert until(lambda: all(start_time(pid) != start for pid, start in holder.items()), SETTLE_S)
    assert mine.is_dir()
