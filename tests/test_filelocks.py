"""Lock holders read from /proc/locks, with real processes holding real locks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from unstuck.processes.filelocks import lock_holders, parse_proc_locks

HOLD = {
    "flock": "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
    "flock-shared": "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_SH)\nprint('held', flush=True)\ntime.sleep(60)\n",
    "sqlite": "import sqlite3, sys, time\ndb = sqlite3.connect(sys.argv[1], isolation_level=None)\ndb.execute('BEGIN EXCLUSIVE')\nprint('held', flush=True)\ntime.sleep(60)\n",
}


@pytest.fixture
def holder(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    kind = request.param
    target = tmp_path / ("app.db" if kind == "sqlite" else "ledger.lock")
    proc = subprocess.Popen([sys.executable, "-c", HOLD[kind], str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield target, proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("holder", ["flock", "sqlite"], indirect=True)
def test_a_live_write_lock_is_found_with_its_pid_and_command(holder: tuple[Path, subprocess.Popen[str]]) -> None:
    target, proc = holder
    found = lock_holders([target, target.with_name("other")])
    assert list(found) == [target]
    (only,) = found[target]
    assert only.pid == proc.pid and only.access == "WRITE" and only.command.startswith("python")
    assert only.lock_type == ("POSIX" if target.name == "app.db" else "FLOCK")


@pytest.mark.parametrize("holder", ["flock-shared"], indirect=True)
def test_a_shared_read_lock_does_not_count_unless_asked(holder: tuple[Path, subprocess.Popen[str]]) -> None:
    target, proc = holder
    assert lock_holders([target]) == {}
    assert [h.pid for h in lock_holders([target], writes_only=False)[target]] == [proc.pid]


@pytest.mark.parametrize("holder", ["flock"], indirect=True)
def test_the_callers_own_locks_can_be_left_out(holder: tuple[Path, subprocess.Popen[str]]) -> None:
    target, proc = holder
    assert lock_holders([target], exclude_pids=(proc.pid,)) == {}


def test_a_released_lock_is_gone(tmp_path: Path) -> None:
    target = tmp_path / "ledger.lock"
    proc = subprocess.Popen([sys.executable, "-c", HOLD["flock"], str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    proc.kill()
    proc.wait()
    assert lock_holders([target]) == {}


def test_waiters_and_unparsable_lines_are_skipped() -> None:
    text = (
        "1: POSIX  ADVISORY  WRITE 4242 fd:01:1835011 1073741824 1073742335\n"
        "1: -> POSIX  ADVISORY  WRITE 4250 fd:01:1835011 1073741824 1073742335\n"
        "garbage line\n"
        "2: FLOCK  ADVISORY  READ 77 00:2f:99 0 EOF\n"
    )
    rows = parse_proc_locks(text)
    assert [(major, minor, inode, h.pid, h.access) for major, minor, inode, h in rows] == [
        (0xFD, 1, 1835011, 4242, "WRITE"), (0, 0x2F, 99, 77, "READ")]


def test_leases_and_delegations_are_not_locks() -> None:
    text = "1: LEASE  ACTIVE    READ 4242 fd:01:1835011 0 EOF\n2: DELEG  ACTIVE    READ 4243 fd:01:9 0 EOF\n"
    assert parse_proc_locks(text) == []


def test_a_missing_locks_table_reports_nothing(tmp_path: Path) -> None:
    target = tmp_path / "x"
    target.write_text("", encoding="utf-8")
    assert lock_holders([target], source=tmp_path / "no-such-locks") == {}
    assert os.path.exists(target)
