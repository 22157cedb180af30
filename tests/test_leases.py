"""Leased processes: a deadline ends the whole tree, SIGTERM first, SIGKILL after the grace
period, with a check that nothing survives; real processes throughout."""

from __future__ import annotations

import os
import time
from pathlib import Path

from unstuck.leases import descendants, run_leased

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_command_that_ends_in_time_keeps_its_exit_and_output(tmp_path: Path) -> None:
    lease = run_leased(["bash", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, env=ENV, deadline_s=10)
    assert (lease.exit_code, lease.stdout, lease.stderr, lease.expired) == (3, "out\n", "err\n", False)


def test_a_grandchild_that_ignores_sigterm_is_killed_and_nothing_of_the_group_survives(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        f"bash -c 'trap \"\" TERM; echo $$ >> {pids}; while :; do sleep 0.1; done' & "
        f"echo $$ >> {pids}; wait"
    )
    started = time.monotonic()
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=ENV, deadline_s=0.5, grace_s=0.5)
    assert lease.expired and time.monotonic() - started < 10
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 2
    stubborn = recorded[0] if recorded[0] != lease.group else recorded[1]
    assert stubborn in lease.killed  # it outlived SIGTERM, so it got SIGKILL
    assert lease.survivors == ()
    assert not any(alive(p) for p in (*recorded, *lease.terminated))


def test_a_descendant_that_left_the_group_is_still_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "escaped"
    script = f"setsid bash -c 'trap \"\" TERM; echo $$ > {pid_file}; while :; do sleep 0.1; done' & wait"
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=ENV, deadline_s=0.7, grace_s=0.3)
    escaped = int(pid_file.read_text())
    assert lease.expired and escaped in lease.terminated and not alive(escaped)


def test_a_prompt_waiting_for_a_person_costs_one_deadline_and_keeps_what_it_printed(tmp_path: Path) -> None:
    prompt = "import sys, time\nprint('Password for deploy@host:', flush=True)\nsys.stdin.read()\ntime.sleep(60)\n"
    started = time.monotonic()
    lease = run_leased(["python3", "-c", prompt], cwd=tmp_path, env=ENV, deadline_s=0.5, grace_s=0.5)
    assert lease.expired and "Password for deploy@host:" in lease.stdout
    assert time.monotonic() - started < 5  # stdin is /dev/null: the read ends at once, the sleep costs the deadline


def test_descendants_lists_the_tree_of_a_live_process(tmp_path: Path) -> None:
    import subprocess

    child = subprocess.Popen(["bash", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        found: dict[int, int] = {}
        while time.monotonic() < deadline and len(found) < 2:
            found = descendants(child.pid)
            time.sleep(0.05)
        assert child.pid in found and len(found) == 2  # bash and its sleep
        assert os.getpid() not in found
    finally:
        os.killpg(child.pid, 9)
        child.wait()


def test_a_double_forked_daemon_is_caught_by_its_lease_token(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon"
    script = (f"setsid bash -c '(trap \"\" TERM; echo $BASHPID > {pid_file}; exec sleep 60) &' ; "
              "sleep 30")
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=ENV, deadline_s=1.0, grace_s=0.3)
    daemon = int(pid_file.read_text())
    assert lease.expired and not alive(daemon) and lease.survivors == ()


def test_a_process_started_during_the_grace_period_is_killed_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "late"
    script = f"trap 'bash -c \"echo \\$\\$ > {pid_file}; exec sleep 60\" & sleep 5' TERM; sleep 30 & wait"
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=ENV, deadline_s=0.5, grace_s=0.5)
    assert lease.expired
    deadline = time.monotonic() + 2
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), "the TERM trap started its late process"
    late = int(pid_file.read_text())
    assert not alive(late) and late in lease.killed and lease.survivors == ()
