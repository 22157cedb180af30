"""A cgroup v2 subtree per lease (unstuck.processes.cgroups, wired into unstuck.processes.leases): a daemon that
double-forks and clears its environment is still ended, and a lease's cgroup is gone once
nothing of it runs. The tests that need a writable cgroup v2 hierarchy skip, with the reason,
where the machine has none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from conftest import bare_env, until
from unstuck.processes import cgroups
from unstuck.processes.cgroups import LeaseCgroup, delegation_root, locate
from unstuck.processes.containment import sweep_leftovers
from unstuck.processes.ending import end_leases
from unstuck.processes.leases import run_leased
from unstuck.processes.members import token_prefix

HYBRID = """\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
33 31 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,name=systemd
"""
UNIFIED = "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n"


def test_the_hierarchy_is_found_where_a_hybrid_machine_mounts_it() -> None:
    assert locate(HYBRID, "1:name=systemd:/user.slice\n0::/user.slice/session-2.scope\n") == \
        Path("/sys/fs/cgroup/unified/user.slice/session-2.scope")


def test_the_hierarchy_is_found_on_a_unified_machine_and_at_its_root() -> None:
    assert locate(UNIFIED, "0::/system.slice/ci.service\n") == Path("/sys/fs/cgroup/system.slice/ci.service")
    assert locate(UNIFIED, "0::/\n") == Path("/sys/fs/cgroup")


def test_a_mount_of_part_of_the_hierarchy_is_read_relative_to_its_root() -> None:
    """proc(5): field 4 of mountinfo is the root of the mount within the filesystem (a
    container sees its own cgroup as the root of the mount)."""
    nested = "40 30 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    assert locate(nested, "0::/docker/abc/inner\n") == Path("/sys/fs/cgroup/inner")
    assert locate(nested, "0::/elsewhere\n") is None


def test_no_cgroup2_mount_or_no_unified_line_means_no_cgroup() -> None:
    only_v1 = "33 31 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    assert locate(only_v1, "0::/\n") is None
    assert locate(UNIFIED, "4:memory:/x\n") is None


def test_an_escaped_mount_point_is_decoded() -> None:
    spaced = "35 24 0:30 / /mnt/cgroup\\040two rw - cgroup2 cgroup2 rw\n"
    assert locate(spaced, "0::/\n") == Path("/mnt/cgroup two")


def test_turning_cgroups_off_is_honoured() -> None:
    code = ("import os; os.environ['UNSTUCK_NO_CGROUP'] = '1'; "
            "from unstuck.processes.cgroups import delegation_root; print(delegation_root())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


needs_cgroup = pytest.mark.skipif(delegation_root() is None,
                                  reason="no writable cgroup v2 hierarchy here (none mounted, read-only, "
                                         "or not delegated to this user)")

#: A daemon that leaves everything a lease can see: a new session, no parent (double fork),
#: an empty environment (no lease token), a name of its own.
DAEMON = "(env -i setsid /bin/bash -c 'exec -a {marker} sleep 300' &) ; sleep 30"


def _named(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with_name = proc.info["cmdline"] or []
        if with_name and with_name[0] == marker:
            found.append(proc.pid)
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    name = f"unstuck-test-daemon-{uuid.uuid4().hex[:12]}"
    yield name
    for pid in _named(name):  # never leave a daemon behind, whatever the test did
        os.kill(pid, signal.SIGKILL)


@needs_cgroup
def test_a_daemon_that_cleared_its_environment_and_left_the_tree_is_ended_at_expiry(tmp_path: Path,
                                                                                    marker: str) -> None:
    outcome = run_leased(["/bin/bash", "-c", DAEMON.format(marker=marker)], cwd=tmp_path, env=dict(os.environ),
                         deadline_s=3.0, grace_s=0.2)
    assert outcome.expired
    assert outcome.cgroup is not None and outcome.cgroup.startswith(str(delegation_root()))
    assert until(lambda: not _named(marker), 3.0), "the daemon outlived its lease"
    assert not outcome.survivors
    assert not Path(outcome.cgroup).exists(), "an empty lease cgroup is removed"


@needs_cgroup
def test_without_a_cgroup_the_same_daemon_survives_the_condition_is_real(tmp_path: Path, marker: str) -> None:
    code = ("import os, sys; os.environ['UNSTUCK_NO_CGROUP'] = '1'\n"
            "from pathlib import Path\nfrom unstuck.processes.leases import run_leased\n"
            "o = run_leased(['/bin/bash', '-c', sys.argv[1]], cwd=Path(sys.argv[2]), env=dict(os.environ), "
            "deadline_s=3.0, grace_s=0.2)\nprint(o.cgroup, o.expired)")
    out = subprocess.run([sys.executable, "-c", code, DAEMON.format(marker=marker), str(tmp_path)],
                         capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.split() == ["None", "True"]
    time.sleep(0.3)
    assert _named(marker), "without a cgroup, nothing a lease sees finds it (the fixture kills it)"


@needs_cgroup
def test_the_command_and_what_it_starts_are_born_in_the_leases_cgroup(tmp_path: Path) -> None:
    outcome = run_leased(["/bin/bash", "-c", "cat /proc/self/cgroup; (cat /proc/self/cgroup)"], cwd=tmp_path,
                         env=dict(os.environ), deadline_s=10)
    assert outcome.exit_code == 0 and outcome.cgroup is not None
    own = [line for line in outcome.stdout.splitlines() if line.startswith("0::")]
    assert len(own) == 2
    assert all(line.endswith("/" + Path(outcome.cgroup).name) for line in own), own
    assert not Path(outcome.cgroup).exists(), "a command that ended in time and left nothing: removed at once"


@needs_cgroup
def test_a_background_job_keeps_the_cgroup_until_its_lease_is_ended(tmp_path: Path, marker: str) -> None:
    outcome = run_leased(["/bin/bash", "-c", DAEMON.format(marker=marker).replace("; sleep 30", "")],
                         cwd=tmp_path, env=dict(os.environ), deadline_s=10)
    assert not outcome.expired and outcome.cgroup is not None
    assert until(lambda: bool(_named(marker)), 3.0)
    group = LeaseCgroup(Path(outcome.cgroup), Path(outcome.cgroup).name.removeprefix(cgroups.NAME_PREFIX))
    assert set(_named(marker)) <= set(group.members()), "the daemon is a member of the lease's cgroup"
    signalled = end_leases({group.token: 0})
    assert set(_named(marker)) <= set(signalled) or not _named(marker)
    assert until(lambda: not _named(marker), 3.0)
    assert not group.path.exists()


@needs_cgroup
def test_a_program_that_cannot_start_raises_as_without_a_cgroup(tmp_path: Path) -> None:
    earlier = set(cgroups.lease_cgroups([token_prefix()]))  # other tests' background jobs may keep theirs
    with pytest.raises(FileNotFoundError):
        run_leased(["no-such-program-anywhere"], cwd=tmp_path, env=bare_env(), deadline_s=5)
    (tmp_path / "plain.txt").write_text("not a program")
    with pytest.raises(PermissionError):
        run_leased(["./plain.txt"], cwd=tmp_path, env=bare_env(), deadline_s=5)
    assert set(cgroups.lease_cgroups([token_prefix()])) <= earlier, "no cgroup left by a start that failed"


@needs_cgroup
def test_the_sweep_ends_and_removes_the_cgroup_of_an_owner_that_is_gone(marker: str) -> None:
    dead_owner = _dead_pid()
    group = cgroups.create(f"{dead_owner}-{uuid.uuid4().hex}")
    assert group is not None
    hidden = subprocess.Popen(["/bin/bash", "-c", f'echo "$$" > "$0"; exec -a {marker} sleep 300',
                               str(group.path / "cgroup.procs")], env=bare_env())  # no token: only the cgroup holds it
    try:
        assert until(lambda: hidden.pid in group.members(), 3.0)
        signalled = sweep_leftovers(grace_s=0.2)
        assert hidden.pid in signalled
        assert hidden.wait(timeout=5) in (-signal.SIGKILL, -signal.SIGTERM)
        assert until(lambda: not group.path.exists(), 3.0)
    finally:
        if hidden.poll() is None:
            hidden.kill()
            hidden.wait()
        group.kill()
        group.remove()


def _dead_pid() -> int:
    probe = subprocess.Popen(["true"])
    probe.wait()
    assert not psutil.pid_exists(probe.pid)
    return probe.pid
