"""unstuck.core.trees: a tree is unlocked and removed without following a link out of it; what
lies outside (files, folders, programs, a set-user-ID program, a pipe, a socket, all made by
the test) keeps its mode, owner, ctime and content."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from outside import Outside
from unstuck.core.trees import (
    OutsideTreeError,
    chmod_inside,
    chown_inside,
    is_inside,
    remove_tree,
    set_immutable,
    temporary_tree,
    unlock_tree,
    write_inside,
)

AS_ROOT = os.geteuid() == 0


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Outside]:
    made = Outside.make(tmp_path / "outside")
    yield made
    made.close()


def _locked_tree(root: Path, outside: Outside) -> None:
    """A tree as a sandbox leaves it: links out at the top and in a shadow bin/, a folder of
    mode 000 and a read-only folder holding links, and (as root) immutable entries."""
    outside.plant_links(root / "bin")
    outside.plant_links(root / "work" / "locked")
    outside.plant_links(root / "work" / "read-only")
    (root / "work" / "read-only" / "file.txt").write_text("x\n")
    (root / "work" / "read-only" / "file.txt").chmod(0o444)
    (root / "work" / "read-only").chmod(0o555)
    (root / "work" / "locked").chmod(0)
    if AS_ROOT and shutil.which("chattr"):
        subprocess.run(["chattr", "-R", "-f", "+i", str(root / "work" / "read-only")], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_removing_a_tree_of_links_out_changes_nothing_outside_it(tmp_path: Path, outside: Outside) -> None:
    root = tmp_path / "tree"
    _locked_tree(root, outside)
    assert remove_tree(root)
    assert not os.path.lexists(root)
    assert outside.changed() == {}
    assert all(os.path.lexists(path) for path in outside.targets.values())


def test_unlocking_gives_back_directories_only_and_never_through_a_link(tmp_path: Path, outside: Outside) -> None:
    root = tmp_path / "tree"
    _locked_tree(root, outside)
    unlock_tree(root)
    assert outside.changed() == {}
    assert stat.S_IMODE((root / "work" / "locked").lstat().st_mode) == 0o700  # u+rwx added to 000
    assert stat.S_IMODE((root / "work" / "read-only").lstat().st_mode) == 0o755  # u+w added to 555
    assert stat.S_IMODE((root / "work" / "read-only" / "file.txt").lstat().st_mode) == 0o444  # files keep theirs
    shutil.rmtree(root)  # now removable as it is


@pytest.mark.skipif(not (AS_ROOT and shutil.which("chattr")), reason="the immutable attribute needs root and chattr")
def test_chattr_recursion_skips_links_so_attributes_never_change_outside(tmp_path: Path, outside: Outside) -> None:
    # the behaviour unstuck.core.trees relies on, shown on this machine's chattr (e2fsprogs)
    root = tmp_path / "tree"
    outside.plant_links(root)
    for flag in ("+i", "-i"):
        subprocess.run(["chattr", "-R", "-f", flag, str(root)], check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        listed = subprocess.run(["lsattr", "-d", str(outside.targets["plain.txt"]), str(outside.targets["folder"])],
                                capture_output=True, text=True, check=True)
        assert all("i" not in line.split()[0] for line in listed.stdout.splitlines())
    assert outside.changed() == {}


def test_a_root_that_is_a_link_is_neither_unlocked_nor_removed(tmp_path: Path, outside: Outside) -> None:
    link = tmp_path / "tree"
    link.symlink_to(outside.root)
    unlock_tree(link)
    assert not remove_tree(link)
    assert link.is_symlink() and outside.changed() == {}


def test_rmtree_on_this_platform_resists_symlink_attacks() -> None:
    # remove_tree relies on shutil's fd-based rmtree (the shutil documentation's
    # "symlink attack resistant" version)
    assert shutil.rmtree.avoids_symlink_attacks


def test_chmod_inside_refuses_a_path_that_resolves_outside_and_skips_a_link(tmp_path: Path, outside: Outside) -> None:
    root = tmp_path / "tree"
    links = outside.plant_links(root)
    escape = root / "to-folder" / "inner.txt"  # through a link to a folder outside
    with pytest.raises(OutsideTreeError, match="is outside"):
        chmod_inside(root, escape, 0o777)
    with pytest.raises(OutsideTreeError):
        chmod_inside(root, root / "to-program", 0o700)
    (root / "inside.txt").chmod(0o644)
    chmod_inside(root, root / "back-to-file", 0o600)  # a link pointing back in: the link is left, not its target
    assert stat.S_IMODE((root / "inside.txt").stat().st_mode) == 0o644
    chmod_inside(root, root / "inside.txt", 0o600)
    assert stat.S_IMODE((root / "inside.txt").stat().st_mode) == 0o600
    assert outside.changed() == {} and links


def test_is_inside_resolves_links_before_it_compares(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    (root / "up").symlink_to(tmp_path)
    (tmp_path / "treeish").mkdir()
    assert is_inside(root, root / "a")
    assert is_inside(root, root)
    assert not is_inside(root, root / "up" / "treeish")
    assert not is_inside(root, tmp_path / "treeish")  # a sibling whose name starts like the root's


def test_a_temporary_tree_left_locked_with_links_out_is_removed_and_nothing_outside_changes(outside: Outside) -> None:
    # the case where tempfile.TemporaryDirectory's clean-up chmods a link's target (CVE-2023-6597)
    with temporary_tree("unstuck-test-") as folder:
        _locked_tree(folder, outside)
        made = folder
    assert not os.path.lexists(made)
    assert outside.changed() == {}


_MOUNTED = textwrap.dedent("""\
    import os, subprocess, sys
    from pathlib import Path
    from unstuck.core.trees import mount_points_under, remove_tree, unlock_tree
    tree, outside = Path(sys.argv[1]), Path(sys.argv[2])
    (tree / "cache").mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(outside), str(tree / "cache")], check=True)
    print("mounted:", mount_points_under(tree) == (str(tree / "cache"),))
    unlock_tree(tree)
    print("removed:", remove_tree(tree))
    print("still there:", sorted(os.listdir(tree / "cache")))
""")


@pytest.mark.skipif(not (AS_ROOT and shutil.which("unshare")), reason="a bind mount needs root (in a mount namespace)")
def test_a_tree_holding_a_mount_point_is_left_whole_and_the_mounted_folder_untouched(tmp_path: Path,
                                                                                      outside: Outside) -> None:
    # in a mount namespace of its own (unshare(1)), so the bind mount ends with the process
    (outside.targets["folder"]).chmod(0o550)
    outside._before = outside.records()
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", _MOUNTED,
                           str(tmp_path / "tree"), str(outside.targets["folder"])],
                          capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.splitlines() == ["mounted: True", "removed: False", "still there: ['inner.txt']"]
    assert outside.changed() == {}


def test_files_with_another_hard_link_are_never_changed(tmp_path: Path, outside: Outside) -> None:
    # a hard link looks like any file: its other name may be outside (here it is)
    root = tmp_path / "tree"
    root.mkdir()
    twin = root / "twin.txt"
    victim = outside.targets["plain.txt"]
    os.link(victim, twin)
    before = victim.lstat()
    with pytest.raises(OutsideTreeError, match="other hard link"):
        chmod_inside(root, twin, 0o600)
    if AS_ROOT:
        with pytest.raises(OutsideTreeError, match="other hard link"):
            chown_inside(root, twin, 65534, 65534)
        assert not set_immutable(twin)
    unlock_tree(root)
    assert remove_tree(root)
    after = victim.lstat()  # only its link count and change time moved (the twin came and went)
    assert (after.st_mode, after.st_uid, after.st_gid, after.st_nlink) == (before.st_mode, before.st_uid,
                                                                           before.st_gid, before.st_nlink - 1)
    assert victim.read_bytes() == b"the user's notes\n"


def _immutable(path: Path) -> bool:
    listed = subprocess.run(["lsattr", "-d", str(path)], capture_output=True, text=True, check=True)
    return "i" in listed.stdout.split()[0]


@pytest.mark.skipif(not (AS_ROOT and shutil.which("chattr")), reason="the immutable attribute needs root")
def test_unlocking_clears_attributes_inside_but_never_on_an_inode_shared_with_a_file_outside(
        tmp_path: Path, outside: Outside) -> None:
    root = tmp_path / "tree"
    (root / "ro").mkdir(parents=True)
    (root / "ro" / "own.txt").write_text("x\n")
    assert set_immutable(root / "ro" / "own.txt") and set_immutable(root / "ro")
    victim = outside.targets["read-only.txt"]
    os.link(victim, root / "twin.txt")
    subprocess.run(["chattr", "+i", str(victim)], check=True)  # made immutable after the twin existed
    try:
        assert not remove_tree(root)  # the twin cannot be unlinked while its inode is immutable
        assert _immutable(victim)  # and its attribute was not cleared through the twin
        assert not (root / "ro").exists()  # what was only inside was unlocked and removed
    finally:
        subprocess.run(["chattr", "-i", str(victim)], check=True)
    assert remove_tree(root)


def test_write_inside_never_writes_through_a_link_nor_climbs_out(tmp_path: Path, outside: Outside) -> None:
    root = tmp_path / "tree"
    outside.plant_links(root)
    write_inside(root, "to-plain.txt", b"new\n")  # a link at the name: replaced, its target kept
    assert not (root / "to-plain.txt").is_symlink() and (root / "to-plain.txt").read_bytes() == b"new\n"
    for name in ("../escaped.txt", "/tmp/abs.txt", "a/../../x", ""):
        with pytest.raises(OutsideTreeError):
            write_inside(root, name, b"x")
    with pytest.raises(OutsideTreeError, match="is a link or not a folder"):
        write_inside(root, "to-folder/inner.txt", b"through a folder link\n")
    write_inside(root, "deep/er/file.txt", b"ok\n")
    assert (root / "deep" / "er" / "file.txt").read_bytes() == b"ok\n"
    assert not (tmp_path / "escaped.txt").exists()
    assert outside.changed() == {}
