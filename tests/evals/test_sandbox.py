"""A sandbox's clean-up, its sweep of leftovers and its own set-up never change anything
outside it: links to files, folders, programs and special files the test made outside, planted
in every part of a sandbox (its shadow bin/, its work folder, an unreadable and a read-only
path), keep their targets' mode, owner, ctime and content; the sweep removes only folders a
sandbox made (issue 23)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from outside import Outside
from unstuck.evals.sandbox import MARKER, SANDBOX_PREFIX, SOCKET_PREFIX, Sandbox, sweep_sandboxes
from unstuck.evals.scenario_state import ScenarioState

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Outside]:
    made = Outside.make(tmp_path / "outside")
    yield made
    made.close()


def _plant(box: Sandbox, outside: Outside) -> None:
    """Links out in every part of ``box``, then its unreadable and read-only paths."""
    outside.plant_links(box.root / "bin")
    outside.plant_links(box.root)
    outside.plant_links(box.work / "secret")
    outside.plant_links(box.work / "docs")
    box.make_unreadable(["secret"])
    box.apply_state(ScenarioState(read_only=("docs",)))


def test_closing_a_sandbox_with_links_out_everywhere_changes_nothing_outside(outside: Outside) -> None:
    box = Sandbox(hide_programs=["gh"])
    _plant(box, outside)
    root = box.root
    box.close()
    assert not os.path.lexists(root)
    assert outside.changed() == {}


def test_a_sandbox_in_a_folder_of_the_callers_with_links_out_changes_nothing_outside(tmp_path: Path,
                                                                                      outside: Outside) -> None:
    with Sandbox(tmp_path / "box") as box:
        _plant(box, outside)
    assert not (tmp_path / "box").exists()
    assert outside.changed() == {}


def test_a_sandbox_refuses_a_callers_folder_that_already_holds_files(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("years of work\n")
    for keep in (False, True):  # kept or not: a folder that holds files is never built in
        with pytest.raises(ValueError, match="is not empty"):
            Sandbox(tmp_path / "mine", keep=keep)
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["thesis.tex"]
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "years of work\n"
    with Sandbox(tmp_path / "new", keep=True) as kept:  # a new one, kept for inspection
        assert kept.work.is_dir()
    assert (tmp_path / "new" / "work").is_dir()


_LEFTOVER = textwrap.dedent("""\
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from outside import Outside
    from unstuck.evals.sandbox import Sandbox
    from unstuck.evals.scenario_state import ScenarioState
    box = Sandbox(hide_programs=["gh"])
    made = Outside(__import__("pathlib").Path(sys.argv[2]))
    made.targets = {p.name: p for p in made.root.iterdir()}
    for folder in (box.root / "bin", box.root, box.work / "secret", box.work / "docs"):
        made.plant_links(folder)
    box.make_unreadable(["secret"])
    box.apply_state(ScenarioState(read_only=("docs",)))
    print(box.root, flush=True)
    os._exit(0)  # killed before close: the folders stay behind
""")


def test_sweeping_a_dead_makers_sandbox_with_links_out_changes_nothing_outside(tmp_path: Path,
                                                                               outside: Outside) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    made = subprocess.run([sys.executable, "-c", _LEFTOVER, str(TESTS), str(outside.root)], capture_output=True,
                          text=True, check=True, env={**os.environ, "TMPDIR": str(temp)}, timeout=60)
    left = Path(made.stdout.strip())
    assert left.parent == temp and left.is_dir()
    assert sorted(p.name.split("-")[0] for p in temp.iterdir()) == sorted(
        (SANDBOX_PREFIX.split("-")[0], SOCKET_PREFIX.split("-")[0]))
    removed = sweep_sandboxes(temp)
    assert len(removed) == 2 and not list(temp.iterdir())
    assert outside.changed() == {}


def _dead_tag() -> str:
    """``PID.START-`` of a process that has ended (its pid, a start time no process has)."""
    ended = subprocess.run(["true"], check=True)
    del ended
    return f"{os.getpid() + 400000}.1-"


def test_the_sweep_leaves_folders_it_did_not_make(tmp_path: Path, outside: Outside) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    tag = _dead_tag()
    unmarked = temp / f"{SANDBOX_PREFIX}{tag}unmarked"
    wrong_maker = temp / f"{SANDBOX_PREFIX}{tag}wrong"
    linked_marker = temp / f"{SOCKET_PREFIX}{tag}linked"
    folder_link = temp / f"{SANDBOX_PREFIX}{tag}link"
    for folder in (unmarked, wrong_maker, linked_marker):
        outside.plant_links(folder / "bin")
    (wrong_maker / MARKER).write_text("unstuck sandbox 1.2-\n")
    (tmp_path / "marker-elsewhere").write_text(f"unstuck sandbox {tag}\n")
    (linked_marker / MARKER).symlink_to(tmp_path / "marker-elsewhere")
    folder_link.symlink_to(outside.root)
    assert sweep_sandboxes(temp) == ()
    assert all(p.is_dir() for p in (unmarked, wrong_maker, linked_marker)) and folder_link.is_symlink()
    assert outside.changed() == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user's needs root to make")
def test_the_sweep_leaves_another_users_folder_even_with_a_marker(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    tag = _dead_tag()
    theirs = temp / f"{SANDBOX_PREFIX}{tag}theirs"
    theirs.mkdir()
    (theirs / MARKER).write_text(f"unstuck sandbox {tag}\n")
    (theirs / "work.txt").write_text("theirs\n")
    for path in (theirs, theirs / MARKER, theirs / "work.txt"):
        os.chown(path, 65534, 65534)
    assert sweep_sandboxes(temp) == ()
    assert (theirs / "work.txt").read_text() == "theirs\n"


def test_the_sweep_removes_a_marked_folder_of_a_dead_maker(tmp_path: Path) -> None:
    # the counterpart of the refusals above: the same shape with its marker is removed
    temp = tmp_path / "tmp"
    temp.mkdir()
    tag = _dead_tag()
    ours = temp / f"{SANDBOX_PREFIX}{tag}ours"
    (ours / "work").mkdir(parents=True)
    (ours / MARKER).write_text(f"unstuck sandbox {tag}\n")
    assert sweep_sandboxes(temp) == (ours,)
    assert not ours.exists()


def test_the_sweep_leaves_a_folder_whose_maker_still_holds_its_marker_lock(tmp_path: Path) -> None:
    # a maker in another PID namespace: its pid means nothing here, but its lock is seen
    temp = tmp_path / "tmp"
    temp.mkdir()
    tag = _dead_tag()
    live = temp / f"{SANDBOX_PREFIX}{tag}live"
    live.mkdir()
    with (live / MARKER).open("w+") as marker:
        marker.write(f"unstuck sandbox {tag}\n")
        marker.flush()
        fcntl.flock(marker.fileno(), fcntl.LOCK_EX)
        assert sweep_sandboxes(temp) == ()
        assert live.is_dir()
    assert sweep_sandboxes(temp) == (live,)  # the lock ended with its holder


def test_a_kept_sandbox_in_the_temporary_directory_is_never_swept(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    made = subprocess.run([sys.executable, "-c", "from unstuck.evals.sandbox import Sandbox\n"
                           "box = Sandbox(keep=True)\nbox.close()\nprint(box.root)"],
                          capture_output=True, text=True, check=True, env={**os.environ, "TMPDIR": str(temp)})
    kept = Path(made.stdout.strip())
    assert kept.is_dir() and not (kept / MARKER).exists()
    assert sweep_sandboxes(temp) == ()
    assert kept.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user's needs root to make")
def test_a_callers_folder_another_user_owns_or_can_swap_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(ValueError, match="is not yours alone"):
        Sandbox(theirs, keep=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all, no sticky bit: anyone could rename a folder in it
    with pytest.raises(ValueError, match="can be changed by another user"):
        Sandbox(shared / "box")
    assert not (shared / "box").exists() and list(theirs.iterdir()) == []


def test_a_hard_linked_file_is_never_made_read_only_or_unreadable(tmp_path: Path, outside: Outside) -> None:
    with Sandbox() as box:
        os.link(outside.targets["plain.txt"], box.work / "twin.txt")
        before = outside.targets["plain.txt"].lstat()
        with pytest.raises(ValueError, match="has another hard link"):
            box.apply_state(ScenarioState(read_only=("twin.txt",)))
        with pytest.raises(ValueError, match="other hard link"):
            box.make_unreadable(["twin.txt"])
        after = outside.targets["plain.txt"].lstat()
        assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="tools run in a mount namespace of their own as root only")
def test_a_mount_a_setup_command_makes_ends_with_it_and_clean_up_removes_nothing_through_it(
        tmp_path: Path, outside: Outside) -> None:
    folder = outside.targets["folder"]
    with Sandbox() as box:
        box.apply_state(ScenarioState(commands=(f"mkdir cache && mount --bind {folder} cache && ls cache",)))
        assert not os.path.ismount(box.work / "cache")  # the mount lived in the command's namespace only
        assert (folder / "inner.txt").is_file()
    assert (folder / "inner.txt").read_bytes() == b"inner\n"
    assert outside.changed() == {}
