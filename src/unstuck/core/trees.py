"""File trees changed and removed without ever leaving them: no link is followed, no mount
crossed, no inode shared with a file outside changed, no path outside the tree's root touched.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Why a module of its own: chmod(2) follows a symbolic link to its target, and so does Python's
``os.chmod`` (on Linux ``follow_symlinks=False`` raises ``NotImplementedError``: there is no
lchmod). A sandbox's shadow ``bin/`` is a folder of links to the host's programs, so a clean-up
that gave every entry of a sandbox mode 700 once set 1,173 of the host's own files to 700
(issue 23). Every change of a mode or an attribute, every removal of a tree and every write of
a restored file in unstuck goes through here:

* :func:`unlock_tree` gives the root and every directory under it back its owner's read, write
  and search bits (``u+rwx``), so that the tree can be listed and removed: unlink(2) and
  rmdir(2) need write and search permission on the *directory* that holds the entry, not on the
  entry (path_resolution(7)), so the modes of files, links and special files are left as they
  are. As root it first clears the immutable and append-only attributes, which even root
  cannot unlink through (:func:`set_immutable`), on directories and on regular files with no
  other hard link.
* :func:`remove_tree` unlocks a tree and removes it with :func:`shutil.rmtree`, which on Linux
  walks by file descriptor and removes a link as a link, never what it points to (the library's
  documented "symlink attack resistant" version, ``rmtree.avoids_symlink_attacks``). A tree
  with a mount point inside it (a bind mount a setup command made) is left whole: rmtree would
  empty the mounted folder, which lies outside.
* :func:`chmod_inside`, :func:`chown_inside` and :func:`set_immutable` change one entry: never a link, never a
  regular file with another hard link (the other name may be outside: a hard link looks like
  any file), and, for the first two, only a path that resolves inside the root.
* :func:`write_inside` writes a file under a root by a relative name: every folder on the way
  opened without following a link, the file made new (``O_EXCL``), never written through what
  was there.
* :func:`temporary_tree` is a temporary folder removed with :func:`remove_tree`. Not
  :class:`tempfile.TemporaryDirectory`: on CPython before 3.11.8 and 3.12.2 its clean-up, on a
  ``PermissionError`` (an unwritable folder; ``EPERM`` of an immutable entry, even as root),
  calls ``os.chmod(path, 0o700)`` on the entry it could not remove, a link included, and so
  changes the link's target (CVE-2023-6597, python/cpython gh-91133).

An entry is changed through a descriptor opened with ``O_NOFOLLOW`` on the entry found while
walking (open(2)): a descriptor for the entry itself, never for what a link names. A mode is
set through ``/proc/self/fd/N`` of an ``O_PATH`` descriptor, which names that very inode
(proc(5)); an attribute with the ``FS_IOC_SETFLAGS`` ioctl on the descriptor (ioctl_iflags(2)),
as chattr(1) does. A link swapped in between the look and the change is never followed.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil

from unstuck.core.errors import UnstuckError

__all__ = [
    "OutsideTreeError",
    "chmod_inside",
    "chown_inside",
    "is_inside",
    "mount_points_under",
    "remove_tree",
    "set_immutable",
    "temporary_tree",
    "unlock_tree",
    "write_inside",
]

#: ioctl_iflags(2): ``FS_IOC_GETFLAGS`` / ``FS_IOC_SETFLAGS`` (``_IOR('f', 1, long)`` and
#: ``_IOW('f', 2, long)`` on a 64-bit kernel; the kernel reads and writes an ``int``).
_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602
#: linux/fs.h: the immutable and append-only inode flags.
_FS_IMMUTABLE_FL = 0x00000010
_FS_APPEND_FL = 0x00000020


class OutsideTreeError(UnstuckError, ValueError):
    """A path asked to be changed resolves outside the tree it was meant to stay in, or is an
    inode a file outside may share (a hard link), or a name that climbs out (``..``)."""


def is_inside(root: Path, path: Path) -> bool:
    """Whether ``path``, every link in it resolved, is ``root`` or lies under it (``root``
    resolved too)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def mount_points_under(root: Path) -> tuple[str, ...]:
    """The mount points of this process's mount namespace that lie strictly under ``root``
    (resolved), as ``psutil.disk_partitions(all=True)`` reads them (``/proc/self/mounts``,
    proc(5)); ``()`` where they cannot be read."""
    real_root = os.path.realpath(root).rstrip(os.sep) + os.sep
    try:
        points = [part.mountpoint for part in psutil.disk_partitions(all=True)]
    except (OSError, RuntimeError):
        return ()
    return tuple(sorted(point for point in points if point.startswith(real_root)))


def _own(found: os.stat_result) -> bool:
    """Whether an entry is one this module may change: a directory, or a regular file with no
    other hard link."""
    return stat.S_ISDIR(found.st_mode) or (stat.S_ISREG(found.st_mode) and found.st_nlink == 1)


def _set_flags_fd(fd: int, *, on: bool) -> bool:
    """Set (``on``) or clear the immutable and append-only flags of the inode open as ``fd``;
    whether that held."""
    flags = array.array("i", [0])
    try:
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        wanted = (flags[0] | _FS_IMMUTABLE_FL) if on else (flags[0] & ~(_FS_IMMUTABLE_FL | _FS_APPEND_FL))
        if wanted != flags[0]:
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, array.array("i", [wanted]), False)
    except OSError:
        return False
    return True


def _open_entry(name: str, dir_fd: int | None) -> int | None:
    """A read descriptor for entry ``name`` (never through a link: ``O_NOFOLLOW``; a pipe never
    blocks the open: ``O_NONBLOCK``), or ``None``."""
    try:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None


def set_immutable(path: Path, *, on: bool = True) -> bool:
    """Set (``on``) or clear the immutable attribute of ``path`` (chattr(1) ``+i``/``-i``; off
    clears append-only too), as root only (CAP_LINUX_IMMUTABLE). A link, a special file, or a
    regular file with another hard link is never changed. Whether the attribute is now as
    asked (``False`` for what is left alone, or a file system without the attribute)."""
    fd = _open_entry(os.fspath(path), None)
    if fd is None:
        return False
    try:
        if not _own(os.fstat(fd)):
            return False
        return _set_flags_fd(fd, on=on)
    finally:
        os.close(fd)


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


def _clear_attributes(name: str, dir_fd: int) -> None:
    """As root, clear the immutable and append-only flags of entry ``name`` (see :func:`_own`)."""
    fd = _open_entry(name, dir_fd)
    if fd is None:
        return
    try:
        if _own(os.fstat(fd)):
            _set_flags_fd(fd, on=False)
    finally:
        os.close(fd)


def _walk(root: Path, mounts: tuple[str, ...]) -> Iterator[tuple[str, list[str], list[str], int]]:
    """``os.fwalk`` of ``root`` top-down that never enters a link (its default:
    ``follow_symlinks=False``, each subdirectory opened and checked to be the entry it listed)
    nor a mount point in ``mounts``."""
    skipped = set(mounts)
    for top, dirs, files, dir_fd in os.fwalk(root, topdown=True, follow_symlinks=False):
        dirs[:] = [name for name in dirs if os.path.join(top, name) not in skipped]
        yield top, dirs, files, dir_fd


def unlock_tree(root: Path) -> None:
    """Make ``root`` and every directory under it removable (see the module doc): as root, the
    immutable and append-only attributes cleared; the owner's ``rwx`` added to directories.
    Never follows a link, never enters a mount point, never changes a special file, a file
    with another hard link, or anything outside ``root``. Never raises for what cannot be
    changed (removal then leaves it); a ``root`` that is a link or not a directory is left
    alone."""
    try:
        top = os.lstat(root)
    except OSError:
        return
    if not stat.S_ISDIR(top.st_mode):
        return
    as_root = os.geteuid() == 0
    mounts = mount_points_under(root)
    parent = os.path.dirname(os.path.abspath(root)) or os.sep
    name = os.path.basename(os.path.abspath(root))
    try:
        parent_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if as_root:
            _clear_attributes(name, parent_fd)
        _unlock_directory(name, parent_fd)
    finally:
        os.close(parent_fd)
    # top-down: a directory's entries are unlocked before the walk opens them
    with contextlib.suppress(OSError):
        for _top, dirs, files, dir_fd in _walk(root, mounts):
            for entry in (*dirs, *files) if as_root else ():
                _clear_attributes(entry, dir_fd)
            for entry in dirs:
                _unlock_directory(entry, dir_fd)


def remove_tree(root: Path) -> bool:
    """Remove the tree at ``root`` (:func:`unlock_tree`, then :func:`shutil.rmtree`), never
    following a link. A ``root`` that is itself a link, or not a directory, or that holds a
    mount point, is left as it is. Never raises; whether ``root`` is gone afterwards."""
    try:
        top = os.lstat(root)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(top.st_mode) or mount_points_under(root):
        return False
    unlock_tree(root)
    shutil.rmtree(root, ignore_errors=True)
    return not os.path.lexists(root)


def chmod_inside(root: Path, path: Path, mode: int) -> None:
    """Set ``path``'s mode to ``mode`` (permission bits, e.g. ``0o755``) when it lies inside
    ``root`` and is not a link (a link's target is never changed: there is no lchmod on Linux).

    Raises:
        OutsideTreeError: ``path`` resolves outside ``root``, or is a regular file with another
            hard link (which may be a file outside).
        OSError: as chmod(2) does (the path is missing, not ours).
    """
    if not is_inside(root, path):
        raise OutsideTreeError(f"{path} is outside {root}: its mode is not changed")
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        found = os.fstat(fd)
        if stat.S_ISLNK(found.st_mode):
            return
        if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
            raise OutsideTreeError(f"{path} has {found.st_nlink - 1} other hard link(s), which may be outside "
                                   f"{root}: its mode is not changed")
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


def chown_inside(root: Path, path: Path, uid: int, gid: int) -> None:
    """Give ``path`` the owner ``uid`` and group ``gid`` (root only, chown(2)) when it lies
    inside ``root``: a link's own owner (lchown), never its target's.

    Raises:
        OutsideTreeError: ``path`` resolves outside ``root`` (a link to outside is changed as
            a link, so only a path through a link is refused), or is a regular file with
            another hard link.
        OSError: as chown(2) does.
    """
    if not (is_inside(root, path.parent) if path.is_symlink() else is_inside(root, path)):
        raise OutsideTreeError(f"{path} is outside {root}: its owner is not changed")
    found = os.lstat(path)
    if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
        raise OutsideTreeError(f"{path} has {found.st_nlink - 1} other hard link(s), which may be outside "
                               f"{root}: its owner is not changed")
    os.chown(path, uid, gid, follow_symlinks=False)


def _parts(name: str) -> list[str]:
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts or name.startswith("/") or ".." in parts or "\0" in name:
        raise OutsideTreeError(f"{name!r} is not a relative name inside the tree (no leading /, no ..)")
    return parts


def write_inside(root: Path, name: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` as the file ``root/name`` (``name`` relative, ``/``-separated): each
    folder on the way made if missing and opened without following a link, what stands at
    the name removed (a file or a link; never what a link points to), then the file made new
    with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode ``mode`` (less the umask).

    Raises:
        OutsideTreeError: ``name`` is absolute, empty or climbs out with ``..``, or a folder on
            the way is a link or not a folder.
        OSError: as the writes do (no space, no permission).
    """
    parts = _parts(name)
    folders, leaf = parts[:-1], parts[-1]
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for folder in folders:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o755, dir_fd=dir_fd)
            try:
                inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except OSError as error:
                raise OutsideTreeError(f"{name!r}: {folder!r} under {root} is a link or not a folder") from error
            os.close(dir_fd)
            dir_fd = inner
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(leaf, dir_fd=dir_fd)
        fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    finally:
        os.close(dir_fd)


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
