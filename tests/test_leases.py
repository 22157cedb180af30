"""Leased processes: a deadline ends the whole tree, SIGTERM first, SIGKILL after the grace
period, with a check that nothing survives; real processes throughout."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import bare_env
from unstuck.processes.capture import DEFAULT_OUTPUT_CAP, OVERFLOW_FACTOR, TRUNCATION_MARKER
from unstuck.processes.containment import drain_leases
from unstuck.processes.identity import process_alive, start_time
from unstuck.processes.leases import end_lease, run_leased, start_lease
from unstuck.processes.members import descendants, tagged, token_prefix
from unstuck.processes.registry import live_leases
from unstuck.processes.supervisor import leases_left
from unstuck.processes.terminal import DEFAULT_WINDOW
from unstuck.processes.waits import reads_terminal, waiting_program

#: Seconds a loaded machine may take to start a program and bring it to the point a test looks at
#: (a prompt printed, a pid file written, a trap set, a pager waiting). A deadline shorter than this
#: lets the lease end the program before it got there: CI once saw an empty stdout from a
#: 0.5-second lease on a Python prompt.
SETTLE_S = 3.0


def _env() -> dict[str, str]:
    """A bare environment for the leased programs: the session's home, the C locale in UTF-8."""
    return bare_env(LANG="C.UTF-8")


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_command_that_ends_in_time_keeps_its_exit_and_output(tmp_path: Path) -> None:
    lease = run_leased(["bash", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, env=_env(), deadline_s=10)
    assert (lease.exit_code, lease.stdout, lease.stderr, lease.expired) == (3, "out\n", "err\n", False)


def test_a_grandchild_that_ignores_sigterm_is_killed_and_nothing_of_the_group_survives(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        f"bash -c 'trap \"\" TERM; echo $$ >> {pids}; while :; do sleep 0.1; done' & "
        f"echo $$ >> {pids}; wait"
    )
    started = time.monotonic()
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.5)
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
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.3)
    escaped = int(pid_file.read_text())
    assert lease.expired and escaped in lease.terminated and not alive(escaped)


def test_a_prompt_waiting_for_a_person_costs_one_deadline_and_keeps_what_it_printed(tmp_path: Path) -> None:
    prompt = "import sys, time\nprint('Password for deploy@host:', flush=True)\nsys.stdin.read()\ntime.sleep(60)\n"
    started = time.monotonic()
    lease = run_leased(["python3", "-c", prompt], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.5)
    assert lease.expired and "Password for deploy@host:" in lease.stdout
    assert time.monotonic() - started < SETTLE_S + 5  # stdin is /dev/null: the read ends at once, the sleep costs the deadline


def test_descendants_lists_the_tree_of_a_live_process(tmp_path: Path) -> None:
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
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.3)
    daemon = int(pid_file.read_text())
    assert lease.expired and not alive(daemon) and lease.survivors == ()


def test_a_process_started_during_the_grace_period_is_killed_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "late"
    script = f"trap 'bash -c \"echo \\$\\$ > {pid_file}; exec sleep 60\" & sleep 5' TERM; sleep 30 & wait"
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.5)
    assert lease.expired
    deadline = time.monotonic() + 2
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), "the TERM trap started its late process"
    late = int(pid_file.read_text())
    assert not alive(late) and late in lease.killed and lease.survivors == ()


# --- issue 11: a pseudo-terminal of the command's own, and who waited for input at the deadline ---

PROMPT = "input('Continue? [y/N] ')"


def test_a_pager_waiting_for_a_key_at_the_deadline_is_named(tmp_path: Path) -> None:
    started = time.monotonic()
    lease = run_leased(["bash", "-c", "seq 1 500 | less"], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.5,
                       terminal=True)
    assert lease.expired and lease.waiting_for_input == "less"
    assert lease.survivors == () and time.monotonic() - started < SETTLE_S + 5


def test_a_prompt_on_the_terminal_waits_and_is_named_with_what_it_asked(tmp_path: Path) -> None:
    lease = run_leased(["python3", "-c", PROMPT], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.5, terminal=True)
    assert lease.expired and lease.waiting_for_input == "python3"
    assert "Continue? [y/N]" in lease.stdout + lease.stderr  # Python prompts on stderr when stdin is a terminal


def test_a_slow_command_is_a_plain_timeout_not_a_wait_for_input(tmp_path: Path) -> None:
    on_terminal = run_leased(["sleep", "5"], cwd=tmp_path, env=_env(), deadline_s=1.0, grace_s=0.5, terminal=True)
    without = run_leased(["sleep", "5"], cwd=tmp_path, env=_env(), deadline_s=0.5, grace_s=0.5)
    assert on_terminal.expired and on_terminal.waiting_for_input is None
    assert without.expired and without.waiting_for_input is None


def test_a_pager_whose_output_is_not_the_terminal_copies_its_input_and_ends(tmp_path: Path) -> None:
    # less main.c: with standard output not a terminal it copies its input (the fix for a waiting pager)
    lease = run_leased(["bash", "-c", "seq 1 500 | less | cat"], cwd=tmp_path, env=_env(), deadline_s=10, terminal=True)
    assert (lease.exit_code, lease.expired, lease.waiting_for_input) == (0, False, None)
    assert lease.stdout.split() == [str(n) for n in range(1, 501)]


def test_the_command_gets_a_controlling_terminal_of_the_window_size_and_a_separate_stderr(tmp_path: Path) -> None:
    script = "tty; stty size; printf '%s\\n' \"$TERM\"; test -r /dev/tty && echo has-ctty; echo oops >&2"
    lease = run_leased(["bash", "-c", script], cwd=tmp_path, env=_env(), deadline_s=10, terminal=True)
    lines = lease.stdout.splitlines()
    assert lease.exit_code == 0 and lines[0].startswith("/dev/pts/")
    assert lines[1] == f"{DEFAULT_WINDOW[0]} {DEFAULT_WINDOW[1]}" and lines[2] == "dumb" and lines[3] == "has-ctty"
    assert lease.stderr == "oops\n" and "\r" not in lease.stdout


def test_this_processs_terminal_and_one_of_its_own_cannot_both_be_asked_for(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        run_leased(["true"], cwd=tmp_path, env=_env(), deadline_s=1, stdin_tty=True, terminal=True)


def _until(predicate: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_process_blocked_reading_a_terminal_it_was_given_is_seen_without_a_lease_pty(tmp_path: Path) -> None:
    master, slave = os.openpty()
    reader = subprocess.Popen(["python3", "-c", "import sys; sys.stdin.readline()"], stdin=slave,
                              stdout=subprocess.DEVNULL, env=_env())
    piped = subprocess.Popen(["python3", "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE, env=_env())
    try:
        assert _until(lambda: reads_terminal(reader.pid)), "python3 reading the pty it was given as stdin"
        assert reads_terminal(reader.pid, os.fstat(slave).st_rdev)
        assert waiting_program([piped.pid, reader.pid]) == "python3"
        time.sleep(0.3)
        assert not reads_terminal(piped.pid), "a read of a pipe is not a wait for a person"
        assert waiting_program([piped.pid]) is None
    finally:
        for child in (reader, piped):
            child.kill()
            child.wait()
        os.close(master)
        os.close(slave)


def test_a_pager_polling_its_terminal_is_waiting_too(tmp_path: Path) -> None:
    # util-linux more(1) waits in poll(2) on the terminal and a signalfd, not in read(2)
    (tmp_path / "long.txt").write_text("".join(f"line {n}\n" for n in range(500)))
    lease = run_leased(["more", "long.txt"], cwd=tmp_path, env=_env(), deadline_s=SETTLE_S, grace_s=0.5, terminal=True)
    assert lease.expired and lease.waiting_for_input == "more"


# --- issue 12: output in bounded memory, start times from psutil ---

def _proc_stat_start(pid: int) -> int:
    """Field 22 of /proc/PID/stat (proc(5): starttime, clock ticks since boot), read here
    independently of the code under test."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    return int(raw[raw.rfind(")") + 2:].split()[19])


def test_a_printer_that_never_stops_is_ended_at_once_in_bounded_memory_with_head_marker_and_tail(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, getrusage(2)
    started = time.monotonic()
    lease = run_leased(["yes"], cwd=tmp_path, env=_env(), deadline_s=2.0, grace_s=0.5)
    elapsed = time.monotonic() - started
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert elapsed < 2.5 and grown_mib < 50
    assert lease.overflowed and not lease.expired and lease.survivors == () and lease.group in lease.terminated
    half = DEFAULT_OUTPUT_CAP // 2  # yes(1) prints "y\n" forever: both halves are whole lines
    assert lease.stdout_dropped >= (OVERFLOW_FACTOR - 1) * DEFAULT_OUTPUT_CAP
    marker = TRUNCATION_MARKER.format(dropped=lease.stdout_dropped)
    assert lease.stdout == "y\n" * (half // 2) + marker + "y\n" * (half // 2)


def test_output_over_the_cap_keeps_its_head_and_tail_and_names_what_was_dropped(tmp_path: Path) -> None:
    printed = "".join(f"{n}\n" for n in range(1, 2001))  # what seq(1) prints, 8893 bytes
    lease = run_leased(["seq", "1", "2000"], cwd=tmp_path, env=_env(), deadline_s=10, output_cap=1000)
    dropped = len(printed) - 1000
    assert (lease.exit_code, lease.expired, lease.overflowed, lease.stdout_dropped) == (0, False, False, dropped)
    assert lease.stdout == printed[:500] + TRUNCATION_MARKER.format(dropped=dropped) + printed[-500:]


def test_output_within_the_cap_is_kept_whole_and_a_character_cut_by_the_marker_is_not_garbled(tmp_path: Path) -> None:
    whole = run_leased(["printf", "%s", "é" * 10], cwd=tmp_path, env=_env(), deadline_s=10, output_cap=20)
    assert (whole.stdout, whole.stdout_dropped) == ("é" * 10, 0)
    cut = run_leased(["printf", "%s", "é" * 10], cwd=tmp_path, env=_env(), deadline_s=10, output_cap=7)
    head, _, tail = cut.stdout.partition(TRUNCATION_MARKER.format(dropped=20 - 7))
    assert (head, tail) == ("é", "éé") and "\ufffd" not in cut.stdout  # 3 bytes kept: é and half of one


def test_a_flood_on_stderr_ends_the_tree_too(tmp_path: Path) -> None:
    lease = run_leased(["bash", "-c", "yes >&2"], cwd=tmp_path, env=_env(), deadline_s=5, output_cap=4096)
    assert lease.overflowed and lease.stderr_dropped > (OVERFLOW_FACTOR - 1) * 4096 and lease.survivors == ()


def test_an_output_cap_below_two_bytes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="output_cap"):
        run_leased(["true"], cwd=tmp_path, env=_env(), deadline_s=1, output_cap=1)


def test_a_start_time_is_procs_field_22_and_names_one_process(tmp_path: Path) -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert start_time(child.pid) == _proc_stat_start(child.pid)
        assert process_alive(child.pid, _proc_stat_start(child.pid))
        assert not process_alive(child.pid, _proc_stat_start(child.pid) + 1)  # a later process with the same pid
    finally:
        child.kill()
        child.wait()
    assert start_time(child.pid) is None and not process_alive(child.pid, None)


def test_a_running_lease_is_registered_and_a_drain_ends_it_and_its_background_jobs(tmp_path: Path) -> None:
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(
        run_leased(["bash", "-c", "sleep 3600 & sleep 3600"], cwd=tmp_path, env=_env(), deadline_s=60)))
    worker.start()
    assert _until(lambda: len(tagged(token_prefix())) >= 3), "bash and its two sleeps"
    (token, group), = live_leases().items()
    tree = tagged(token)
    assert token.startswith(token_prefix()) and group in tree
    signalled = drain_leases()
    worker.join(10)
    assert set(tree) <= set(signalled) and not any(alive(p) for p in tree)
    assert live_leases() == {} and not tagged(token_prefix())


def test_the_supervisor_keeps_only_the_leases_still_live() -> None:
    lines = [b"+ 7-a\n", b"g 7-a 100\n", b"+ 7-b\n", b"g 7-b 200\n", b"- 7-a\n", b"+ 7-c\n", b"garbage\n",
             b"g 7-z 300\n"]
    assert leases_left(lines) == {"7-b": 200, "7-c": 0}  # 7-z never started: its group line is not believed


def test_the_supervisor_refuses_a_missing_or_bad_pid_with_usage() -> None:
    for argv in ([], ["x"], ["0"], ["1", "2"]):
        bad = subprocess.run([sys.executable, "-m", "unstuck.processes.supervisor", *argv], capture_output=True, text=True)
        assert bad.returncode == 2 and "usage: python -m unstuck.processes.supervisor PID" in bad.stderr


def test_a_leased_fixture_carries_its_token_is_registered_and_end_lease_ends_its_whole_group() -> None:
    lease = start_lease(["bash", "-c", "sleep 3600 & echo ready; wait"], env=_env())
    try:
        assert lease.proc.stdout is not None
        assert lease.proc.stdout.readline().strip() == "ready"
        assert lease.token.startswith(token_prefix())
        assert live_leases()[lease.token] == lease.proc.pid
        members = tagged(lease.token)
        assert len(members) == 2  # bash and its background sleep inherit the token
        signalled = end_lease(lease)
        assert set(members) <= set(signalled)
        assert lease.token not in live_leases()
        assert lease.proc.returncode == -9
        assert not any(start_time(pid) == start for pid, start in members.items())
        assert end_lease(lease) == ()  # idempotent: nothing left to signal
    finally:
        drain_leases()
