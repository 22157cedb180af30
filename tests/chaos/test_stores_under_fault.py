"""Chaos: the journal and the lesson store under real faults of the machine (issue 12, deliver 3
and 4): a filesystem that is full (a real tmpfs mounted for the test), a file made immutable
(``chattr +i``, ioctl_iflags(2) FS_IMMUTABLE_FL), a file of mode 0444 used by the account
``nobody``, a store replaced or damaged during a run. Each run is the real ``unstuck run``;
each expectation is the issue's: one line of error naming the file, exit status 1, no
traceback, and nothing already recorded lost or changed."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import unstuck
from conftest import bare_env
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore

SCENARIO = "gh_logged_out"  # a blocker: its run records a turn and stores a lesson (exit 3)


def unstuck_run(*args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = (),
                python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    """The real CLI (``python -m unstuck run``), unattended, with the compliant reference agent."""
    return subprocess.run([*prefix, python, "-m", "unstuck", "run", *args, "--agent", "compliant",
                           "--unattended"], capture_output=True, text=True, timeout=120, check=False,
                          env=env or bare_env(COLUMNS="1000"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_one_line_error_naming(proc: subprocess.CompletedProcess[str], path: Path, store: str) -> None:
    """No traceback; stderr one line that names the file. A journal that cannot record fails
    the run: exit 1 (``unstuck run --help``: "1 failed (… the machine: a full or read-only
    file)") and never "journaled"; a lesson store that cannot record is reported on the
    terminal beside the turn's own status (deliver 3), here 3, blocked, or refused at open (1)."""
    assert "Traceback" not in proc.stderr + proc.stdout
    # the one-line deprecation note of an older option name (--journal, --lessons: issue 24) aside
    lines = [line for line in proc.stderr.strip().splitlines() if not line.startswith("note: --")]
    assert len(lines) == 1 and lines[0].startswith("error:") and path.name in lines[0], proc.stderr
    assert proc.returncode in ((1,) if store == "--journal" else (1, 3)), (proc.returncode, proc.stdout, proc.stderr)
    assert "journaled as turn" not in proc.stdout


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (this test runs as uid {os.geteuid()})")


# -- a filesystem that fills -------------------------------------------------------------------

@pytest.fixture
def tmpfs() -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for the test (mount(8), tmpfs(5) ``size=``); unmounted after."""
    require_root("mounting a tmpfs")
    point = Path(tempfile.mkdtemp(prefix="unstuck-chaos-tmpfs-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(point)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        point.rmdir()
        pytest.skip(f"mount -t tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)
        point.rmdir()


def fill(folder: Path) -> Path:
    """Write zeros into ``folder`` until its filesystem answers ENOSPC (write(2))."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("store", ["--journal", "--lessons"])
def test_a_store_on_a_full_filesystem_is_a_one_line_error_and_keeps_what_it_had(tmpfs: Path, store: str) -> None:
    """Issue 12, Hygiene: "tracebacks instead of errors for … a read-only or full store"; deliver
    3: a store never loses what it recorded."""
    journal, lessons = tmpfs / "j.db", tmpfs / "l.db"
    first = unstuck_run(SCENARIO, "--journal", str(journal), "--lessons", str(lessons))
    assert first.returncode == 3, first.stderr  # blocked, as the scenario is
    with Journal(journal) as j:
        turns_before = [(t.turn_id, t.status) for t in j.turns()]
    with LessonStore(lessons) as s:
        lessons_before = [lesson.content for lesson in s.all()]
    assert len(turns_before) == 1 and len(lessons_before) == 1
    filler = fill(tmpfs)
    assert shutil.disk_usage(tmpfs).free < 8192
    path = journal if store == "--journal" else lessons
    proc = unstuck_run(SCENARIO, store, str(path))
    assert_one_line_error_naming(proc, path, store)
    assert "full" in proc.stderr, proc.stderr  # named as a full disk, not as a damaged store
    filler.unlink()  # room again: what was recorded before is all there
    with Journal(journal) as j:
        assert [(t.turn_id, t.status) for t in j.turns()] == turns_before
    with LessonStore(lessons) as s:
        assert [lesson.content for lesson in s.all()] == lessons_before


# -- an immutable file, a read-only file used by nobody ---------------------------------------

@pytest.fixture
def recorded() -> Iterator[tuple[Path, Path]]:
    """A journal and a lesson store, each with one turn's record, in a folder on a disk
    filesystem (chattr(1) needs ext2/3/4, xfs, btrfs…; tmpfs refuses it) that ``nobody`` may
    enter and write (so only the file's own mode or flag can refuse)."""
    folder = Path(tempfile.mkdtemp(prefix="unstuck-chaos-store-", dir="/var/tmp"))
    folder.chmod(0o777)
    journal, lessons = folder / "j.db", folder / "l.db"
    first = unstuck_run(SCENARIO, "--journal", str(journal), "--lessons", str(lessons))
    assert first.returncode == 3, first.stderr
    yield journal, lessons
    for path in (journal, lessons):
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("store", ["--journal", "--lessons"])
def test_an_immutable_store_is_a_clear_error_and_left_byte_for_byte(recorded: tuple[Path, Path], store: str) -> None:
    """Issue 12, Hygiene: "tracebacks instead of errors for … a read-only … store"; deliver 7:
    "``chattr +i`` as root"."""
    require_root("chattr +i")
    if shutil.which("chattr") is None:
        pytest.skip("chattr(1) is not installed (Debian package e2fsprogs)")
    path = recorded[0] if store == "--journal" else recorded[1]
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"the filesystem of {path.parent} refuses chattr +i: {made.stderr.strip()}")
    before = sha256(path)
    proc = unstuck_run(SCENARIO, store, str(path))
    assert_one_line_error_naming(proc, path, store)
    assert sha256(path) == before


@pytest.mark.parametrize("store", ["--journal", "--lessons"])
def test_a_read_only_store_used_as_nobody_is_a_clear_error_and_left_byte_for_byte(
    recorded: tuple[Path, Path], store: str
) -> None:
    """Issue 12, Hygiene: "tracebacks instead of errors for … a read-only … store"; deliver 7:
    "mode 444 with the store used as ``nobody``"."""
    require_root("running a command as nobody")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv(1) is not installed (Debian package util-linux)")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("this machine has no account named nobody")
    path = recorded[0] if store == "--journal" else recorded[1]
    path.chmod(0o444)
    before = sha256(path)
    home = path.parent / "home"
    home.mkdir()
    home.chmod(0o777)  # past the umask: nobody keeps its default stores here (the user data folder)
    env = bare_env(home=home, COLUMNS="1000", TMPDIR=home, UNSTUCK_CACHE_DIR=home / "cache")
    as_nobody = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
    # this interpreter may live where nobody cannot reach (a pyenv under /root, mode 0700): then the
    # system's interpreter of the same version, given this checkout and its installed libraries
    python = sys.executable
    reexec = "import subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"  # as unstuck re-executes
    reach = subprocess.run([*as_nobody, python, "-c", reexec], capture_output=True, check=False, env=env)
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/bin")
    if reach.returncode != 0 and system is not None:
        python = system
        env["PYTHONPATH"] = os.pathsep.join([str(Path(unstuck.__file__).parents[1]),
                                             sysconfig.get_paths()["purelib"]])
    probe = unstuck_run(SCENARIO, env=env, prefix=as_nobody, python=python)  # its default stores: can nobody run a turn?
    if probe.returncode != 3:
        pytest.skip(f"nobody cannot run a turn on this machine, with its default stores: {probe.stderr.strip()[-200:]}")
    proc = unstuck_run(SCENARIO, store, str(path), env=env, prefix=as_nobody, python=python)
    assert_one_line_error_naming(proc, path, store)
    assert sha256(path) == before


# -- a damaged store (a replaced store: tests/test_journal.py and tests/test_lessons.py) ------------

def test_unstuck_run_refuses_a_damaged_lesson_store_before_writing_naming_it(tmp_path: Path) -> None:
    """Issue 12, Data: "a damaged lesson store drops the lesson this run should have stored
    without a word to the user"; deliver 3: "a store checks at open that it is sound
    (``quick_check``) and refuses before writing"."""
    from test_sqlite_store import damage_page
    from unstuck.core.situations import Kind, Situation

    path = tmp_path / "lessons.db"
    with LessonStore(path) as store:
        for n in range(40):  # enough rows for the knowledge table to span several pages
            store.record(Situation(Kind.AUTH, "gh", unblock="gh auth login"), tool="check_cli_setup",
                         fingerprint=f"/usr/bin/gh|gh version 2.{n}.0", content="gh was blocked (auth)",
                         source="escalated")
    damage_page(path, "knowledge")
    before = path.read_bytes()
    proc = unstuck_run(SCENARIO, "--lessons", str(path))
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "is damaged" in proc.stderr and path.name in proc.stderr
    assert proc.returncode in (1, 2), proc.returncode
    assert path.read_bytes() == before
