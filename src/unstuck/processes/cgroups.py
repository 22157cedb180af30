"""A cgroup v2 subtree per lease: the processes a tool starts, found however they hide.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A lease (:mod:`unstuck.processes.leases`) finds its processes by process group, by parentage and by the
token in their environment. A daemon that double-forks *and* clears its environment escapes
all three. The kernel does not let it escape its control group: a child starts in its
parent's cgroup, and only a process allowed to write another cgroup's ``cgroup.procs`` moves
it out (the kernel's ``Documentation/admin-guide/cgroup-v2.rst``, "Processes"). So where this
process may create cgroups, each lease gets one, ``unstuck-<token>``, beside nothing else
under this process's own cgroup; the lease's first process is moved into it as soon as it has
started, and every process it then starts is born there.

* **Where.** The cgroup v2 hierarchy is found in ``/proc/self/mountinfo`` (filesystem type
  ``cgroup2``; on hybrid machines it is often mounted at ``/sys/fs/cgroup/unified``), and this
  process's own cgroup in ``/proc/self/cgroup`` (the ``0::PATH`` line). A lease's cgroup is
  made below that; where the folder cannot be made (no cgroup v2, a read-only mount, no
  delegation to this user) there is no cgroup and the lease relies on its other means.
  ``UNSTUCK_NO_CGROUP=1`` turns cgroups off.
* **Moved before the command runs.** The lease's first process is ``/bin/sh``, which writes its
  own pid to the cgroup's ``cgroup.procs`` and then executes the command in its place
  (:mod:`unstuck.processes.leases`); so the command and everything it starts are born in the cgroup. (A
  move after :class:`subprocess.Popen` returns races the command's first fork; a
  ``preexec_fn`` runs Python between fork and exec, which Python's documentation calls unsafe
  in a threaded program.)
* **Ended whole.** :meth:`LeaseCgroup.kill` writes ``1`` to ``cgroup.kill`` (Linux 5.14 and
  later: SIGKILL to every process of the cgroup and its descendants, new forks included),
  else sends SIGKILL to each pid in ``cgroup.procs`` until none is left. An empty cgroup is
  removed with ``rmdir`` (the only way, cgroup-v2.rst); one still holding processes cannot be.

Every function here never raises on what the machine refuses (a missing file, a permission, a
process gone): it reports it as ``None``, ``False`` or an empty result.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CGROUP_OFF_ENV",
    "NAME_PREFIX",
    "LeaseCgroup",
    "create",
    "delegation_root",
    "existing",
    "lease_cgroups",
    "locate",
    "members_of",
]

#: Set to ``1`` (or ``true``, ``yes``, ``on``) to give leases no cgroup.
CGROUP_OFF_ENV = "UNSTUCK_NO_CGROUP"
#: A lease's cgroup is ``NAME_PREFIX`` followed by its token.
NAME_PREFIX = "unstuck-"


@dataclass(frozen=True, slots=True)
class LeaseCgroup:
    """One lease's cgroup.

    Attributes:
        path: its folder in the cgroup v2 filesystem.
        token: the lease token it is named after.
    """

    path: Path
    token: str

    def add(self, pid: int) -> bool:
        """Move process ``pid`` into this cgroup (its future children are born here); whether
        the kernel accepted it."""
        try:
            (self.path / "cgroup.procs").write_text(f"{pid}\n", encoding="ascii")
        except OSError:
            return False
        return True

    def members(self) -> tuple[int, ...]:
        """The pids in this cgroup and the cgroups below it (a nested unstuck's leases), sorted."""
        found: set[int] = set()
        for procs in self._procs_files():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(word) for word in procs.read_text(encoding="ascii").split())
        return tuple(sorted(found))

    def kill(self, settle_s: float = 1.0) -> tuple[int, ...]:
        """SIGKILL every process of the cgroup (``cgroup.kill``, else each member in turn) and
        wait up to ``settle_s`` seconds for the cgroup to empty; the pids that were members."""
        killed = set(self.members())
        if not killed:
            return ()
        written = False
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1\n", encoding="ascii")
            written = True
        deadline = time.monotonic() + settle_s
        while True:
            left = self.members()
            killed.update(left)
            if not left or time.monotonic() >= deadline:
                break
            if not written:
                for pid in left:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        return tuple(sorted(killed))

    def remove(self) -> bool:
        """Remove the cgroup (its sub-cgroups first) when no process is left in it; whether it
        is gone."""
        for folder in sorted((p.parent for p in self._procs_files()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        return not self.path.exists()

    def _procs_files(self) -> list[Path]:
        try:
            return sorted(self.path.rglob("cgroup.procs"))
        except OSError:
            return []


def _mounts(mountinfo: str) -> list[tuple[str, str]]:
    """The cgroup2 mounts of a ``/proc/PID/mountinfo`` text: (root within the hierarchy, mount
    point), in order (proc(5): field 4 is the root, 5 the mount point, and the filesystem type
    follows the `` - `` separator). Octal escapes (``\\040`` for a space) are decoded."""
    found = []
    for line in mountinfo.splitlines():
        head, separator, tail = line.partition(" - ")
        fields = head.split()
        if not separator or len(fields) < 5 or not tail.split() or tail.split()[0] != "cgroup2":
            continue
        found.append((_unescape(fields[3]), _unescape(fields[4])))
    return found


def _unescape(field: str) -> str:
    return field.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in field else field


def _own_cgroup(cgroup_file: str) -> str | None:
    """This process's cgroup v2 path, from a ``/proc/PID/cgroup`` text (its ``0::PATH`` line)."""
    for line in cgroup_file.splitlines():
        if line.startswith("0::"):
            return line[3:].split(" ", 1)[0] or "/"
    return None


def locate(mountinfo: str, cgroup_file: str) -> Path | None:
    """Where this process's own cgroup is in the filesystem, given the texts of
    ``/proc/self/mountinfo`` and ``/proc/self/cgroup``; ``None`` without a cgroup v2 mount
    that holds it."""
    own = _own_cgroup(cgroup_file)
    if own is None:
        return None
    for root, point in _mounts(mountinfo):
        relative = os.path.relpath(own, root) if own.startswith(root) else None
        if relative is not None and not relative.startswith(".."):
            return Path(point) if relative == "." else Path(point) / relative
    return None


@functools.cache
def delegation_root() -> Path | None:
    """The folder below which this process makes lease cgroups (its own cgroup's folder),
    when cgroup v2 is mounted there and a cgroup can be made in it (tried once, with a
    cgroup made and removed); ``None`` otherwise or with ``UNSTUCK_NO_CGROUP=1``. Cached for
    the life of the process."""
    if os.environ.get(CGROUP_OFF_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mountinfo, \
                open("/proc/self/cgroup", encoding="utf-8", errors="replace") as cgroup_file:
            base = locate(mountinfo.read(), cgroup_file.read())
    except OSError:
        return None
    if base is None:
        return None
    probe = base / f"{NAME_PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir()
    except FileExistsError:
        pass
    except OSError:
        return None
    with contextlib.suppress(OSError):
        probe.rmdir()
    return base


def create(token: str) -> LeaseCgroup | None:
    """A new cgroup for the lease ``token``, or ``None`` where none can be made."""
    base = delegation_root()
    if base is None:
        return None
    path = base / f"{NAME_PREFIX}{token}"
    try:
        path.mkdir()
    except FileExistsError:
        pass
    except OSError:
        return None
    return LeaseCgroup(path, token)


def existing(token: str) -> LeaseCgroup | None:
    """The cgroup of lease ``token`` when it exists under this process's delegation root."""
    base = delegation_root()
    if base is None:
        return None
    path = base / f"{NAME_PREFIX}{token}"
    return LeaseCgroup(path, token) if path.is_dir() else None


def lease_cgroups(prefixes: Iterable[str] | None = None) -> tuple[LeaseCgroup, ...]:
    """Every lease cgroup under the delegation root (whose token begins with one of
    ``prefixes``, when given), sorted by name."""
    base = delegation_root()
    if base is None:
        return ()
    wanted = tuple(prefixes) if prefixes is not None else ("",)
    try:
        names = sorted(entry.name for entry in os.scandir(base) if entry.is_dir(follow_symlinks=False))
    except OSError:
        return ()
    found = []
    for name in names:
        token = name.removeprefix(NAME_PREFIX)
        if name.startswith(NAME_PREFIX) and not token.startswith("probe-") and token.startswith(wanted):
            found.append(LeaseCgroup(base / name, token))
    return tuple(found)


def members_of(cgroups: Iterable[LeaseCgroup]) -> Mapping[int, LeaseCgroup]:
    """Each pid in ``cgroups`` with the cgroup it was found in."""
    return {pid: group for group in cgroups for pid in group.members()}
