"""File trees changed and removed without ever leaving them: no link is followed, no path
outside the tree's root is touched.

Why a module of its own: chmod(2) follows a symbolic link to its target, and so does Python's
``os.chmod`` (on Linux ``follow_symlinks=False`` raises ``NotImplementedError``: there is no
lchmod). A sandbox's shadow ``bin/`` is a folder of links to the host's programs, so a clean-up
that gave every entry of a sandbox mode 700 once set 1,173 of the host's own files to 700
(issue 23). Every clean-up in unstuck that changes a mode or removes a tree goes through here:

* :func:`unlock_tree` gives the root and every directory under it back its owner's read, write
  and search bits (``u+rwx``), so that the tree can be listed and removed: unlink(2) and
  rmdir(2) need write and search permission on the *directory* that holds the entry, not on the
  entry (path_resolution(7)), so the modes of files, links and special files are left as they
  are. As root, the immutable and append-only attributes, which even root cannot unlink
  through, are cleared first with chattr(1) ``-R -f -i -a``: e2fsprogs' recursion reads each
  entry with lstat(2) and changes no link nor what it points to (``tests/test_trees.py`` shows
  it on this machine's chattr).
* :func:`remove_tree` unlocks a tree and removes it with :func:`shutil.rmtree`, which on Linux
  walks by file descriptor and removes a link as a link, never what it points to (the library's
  documented "symlink attack resistant" version, ``rmtree.avoids_symlink_attacks``).
* :func:`chmod_inside` changes one path's mode when the path resolves inside the root and is
  not itself a link.
* :func:`temporary_tree` is a temporary folder removed with :func:`remove_tree`. Not
  :class:`tempfile.TemporaryDirectory`: on CPython before 3.11.8 and 3.12.2 its clean-up, on a
  ``PermissionError`` (an unwritable folder; ``EPERM`` of an immutable entry, even as root),
  calls ``os.chmod(path, 0o700)`` on the entry it could not remove, a link included, and so
  changes the link's target (CVE-2023-6597, python/cpython gh-91133).

A directory's mode is changed through a descriptor opened with ``O_PATH | O_NOFOLLOW`` on the
entry found while walking (open(2)): a descriptor for the directory itself, never for what a
link names, and ``/proc/self/fd/N`` then names that very inode (proc(5)), so a link swapped in
between the look and the change is never followed either.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from unstuck.errors import UnstuckError

__all__ = ["OutsideTreeError", "chmod_inside", "is_inside", "remove_tree", "temporary_tree", "unlock_tree"]


class OutsideTreeError(UnstuckError, ValueError):
    """A path asked to be changed resolves outside the tree it was meant to stay in."""


def is_inside(root: Path, path: Path) -> bool:
    """Whether ``path``, every link in it resolved, is ``root`` or lies under it (``root``
    resolved too)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _unlock_directory(name: str, dir_fd: int) -> None:
    """Add the owner's read, write and search bits to entry ``name`` of the directory open as
    ``dir_fd`` when it is a directory (never a link: ``O_NOFOLLOW`` opens the link itself,
    whose type is then not a directory)."""
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
    try:
        found = os.fstat(fd)
        if not stat.S_ISDIR(found.st_mode):
            return
        wanted = stat.S_IMODE(found.st_mode) | stat.S_IRWXU
        if wanted != stat.S_IMODE(found.st_mode):
            with contextlib.suppress(OSError):
                os.chmod(f"/proc/self/fd/{fd}", wanted)
    finally:
        os.close(fd)


def _clear_attributes(root: Path) -> None:
    """As root, clear the immutable and append-only attributes under ``root`` (chattr(1)
    ``-R -f -i -a``; see the module doc). Nothing to do for another user: only root (with
    CAP_LINUX_IMMUTABLE) can set them."""
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        return
    subprocess.run(["chattr", "-R", "-f", "-i", "-a", "--", os.fspath(root)], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def unlock_tree(root: Path) -> None:
    """Make ``root`` and every directory under it listable and writable by their owner (see
    the module doc), so that :func:`shutil.rmtree` can remove the tree. Never follows a link,
    never changes a file, link or special file, never changes anything outside ``root``.
    Never raises for what cannot be changed (removal then leaves it); a ``root`` that is a
    link or not a directory is left alone."""
    try:
        top = os.lstat(root)
    except OSError:
        return
    if not stat.S_ISDIR(top.st_mode):
        return
    _clear_attributes(root)
    parent = os.path.dirname(os.path.abspath(root)) or os.sep
    try:
        parent_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        _unlock_directory(os.path.basename(os.path.abspath(root)), parent_fd)
    finally:
        os.close(parent_fd)
    # os.fwalk with follow_symlinks=False (its default) never enters a link to a directory:
    # it opens each subdirectory and checks it is the entry it listed (same device and inode).
    # Top-down, a directory's entries are unlocked before the walk opens them.
    with contextlib.suppress(OSError):
        for _top, dirs, _files, dir_fd in os.fwalk(root, topdown=True, follow_symlinks=False):
            for name in dirs:
                _unlock_directory(name, dir_fd)


def remove_tree(root: Path) -> bool:
    """Remove the tree at ``root`` (:func:`unlock_tree`, then :func:`shutil.rmtree`), never
    following a link; a ``root`` that is itself a link, or not a directory, is left alone.
    Never raises; whether ``root`` is gone afterwards."""
    try:
        top = os.lstat(root)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(top.st_mode):
        return False
    unlock_tree(root)
    shutil.rmtree(root, ignore_errors=True)
    return not os.path.lexists(root)


def chmod_inside(root: Path, path: Path, mode: int) -> None:
    """Set ``path``'s mode to ``mode`` (permission bits, e.g. ``0o755``) when it lies inside
    ``root`` and is not a link (a link's target is never changed: there is no lchmod on Linux).

    Raises:
        OutsideTreeError: ``path`` resolves outside ``root``.
        OSError: as chmod(2) does (the path is missing, not ours).
    """
    if not is_inside(root, path):
        raise OutsideTreeError(f"{path} is outside {root}: its mode is not changed")
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            return
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


@contextlib.contextmanager
def temporary_tree(prefix: str) -> Iterator[Path]:
    """A new folder in the temporary directory (:func:`tempfile.mkdtemp`, named ``prefix``
    then random letters), removed with :func:`remove_tree` on the way out, whatever is in it
    then (see the module doc for why not :class:`tempfile.TemporaryDirectory`)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        remove_tree(folder)
