"""The test session leaves the machine as it found it (issue 23: a sandbox's clean-up once set
1,173 of the host's programs to mode 700 through its links).

A pytest plugin (``tests/conftest.py`` loads it; ``-p host_guard`` loads it into a session of its
own, as ``tests/test_host_guard.py`` does):

* at the start it records the mode, owner, group and inode change time of every program on
  ``PATH`` (each entry of each folder, and what a link there points to; the change time moves
  with any change of content, mode, owner, attributes or links: inode(7)), and a listing of
  the real home: every entry
  down to :data:`HOME_DEPTH` levels with its type, mode, owner, size and modification time,
  and every entry under the folders and files where unstuck, its agents' settings or a shell
  keeps state (:data:`HOME_WATCHED`), whatever their depth;
* it then points ``HOME`` and the XDG base directories (XDG Base Directory Specification 0.8:
  ``XDG_CONFIG_HOME``, ``XDG_DATA_HOME``, ``XDG_STATE_HOME``, ``XDG_CACHE_HOME``,
  ``XDG_RUNTIME_DIR``) at a temporary folder, so nothing the tests run (the library, the CLI,
  gh, git, pip, a coding agent) writes the user's own settings, stores or shell files; every
  subprocess inherits them;
* at the end it compares both records again and fails the session (exit status 1, the changes
  listed) when any program changed, or the real home changed.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

#: How deep the listing of the real home goes everywhere (a folder's modification time changes
#: when an entry is made or removed in it, so a change one level deeper is seen too).
HOME_DEPTH = 2
#: Where unstuck, the agents it guards, gh, git and the shells keep state under a home: listed
#: whole.
HOME_WATCHED = (
    ".local/share/unstuck", ".cache/unstuck", ".config/unstuck", ".local/state/unstuck",
    ".config/gh", ".gitconfig", ".config/git", ".claude", ".claude.json", ".codex", ".gemini",
    ".bashrc", ".bash_profile", ".profile", ".zshrc", ".zprofile", ".npmrc", ".netrc", ".ssh",
)
#: The XDG base directory variables pointed into the temporary home.
XDG_VARIABLES = {
    "XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share", "XDG_STATE_HOME": ".local/state",
    "XDG_CACHE_HOME": ".cache", "XDG_RUNTIME_DIR": "run",
}

Record = dict[str, tuple[int, ...]]


def _programs(path: str) -> Record:
    """``{path: (mode, uid, gid, ctime_ns)}`` of each entry of each folder on ``path`` and,
    for a link, of what it points to (under ``path -> target``)."""
    seen: Record = {}
    for folder in dict.fromkeys(part for part in path.split(os.pathsep) if part):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                own = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            seen[entry.path] = (own.st_mode, own.st_uid, own.st_gid, own.st_ctime_ns)
            if entry.is_symlink():
                try:
                    target = os.stat(entry.path)
                except OSError:
                    continue
                seen[f"{entry.path} -> {os.path.realpath(entry.path)}"] = (
                    target.st_mode, target.st_uid, target.st_gid, target.st_ctime_ns)
    return seen


def _entry(path: str) -> tuple[int, ...] | None:
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return (found.st_mode, found.st_uid, found.st_gid, found.st_size, found.st_mtime_ns)


def _walk(top: str, depth: int | None) -> Iterator[str]:
    """``top`` and the paths under it, ``depth`` levels down (``None``: all); never into a link."""
    yield top
    if depth == 0 or not os.path.isdir(top) or os.path.islink(top):
        return
    try:
        names = sorted(os.listdir(top))
    except OSError:
        return
    for name in names:
        yield from _walk(os.path.join(top, name), None if depth is None else depth - 1)


def _home(home: str) -> Record:
    """The listing of ``home`` described in the module doc: ``{path: (mode, uid, gid, size,
    mtime_ns)}``."""
    seen: Record = {}
    for path in _walk(home, HOME_DEPTH):
        found = _entry(path)
        if found is not None:
            seen[path] = found
    for watched in HOME_WATCHED:
        for path in _walk(os.path.join(home, watched), None):
            found = _entry(path)
            if found is not None:
                seen[path] = found
    return seen


def _changes(before: Record, after: Record) -> list[str]:
    lines = []
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        if was == now:
            continue
        if was is None:
            lines.append(f"made: {path}")
        elif now is None:
            lines.append(f"removed: {path}")
        elif was[:3] != now[:3]:
            lines.append(f"mode/owner: {path}: {stat.filemode(was[0])} {was[1]}:{was[2]} -> "
                         f"{stat.filemode(now[0])} {now[1]}:{now[2]}")
        else:
            lines.append(f"changed: {path}")
    return lines


class HostGuard:
    """What the session found at its start, and the temporary home it runs in."""

    def __init__(self) -> None:
        self.path = os.environ.get("PATH", os.defpath)
        self.real_home = os.path.expanduser("~")
        self.programs = _programs(self.path)
        self.home = _home(self.real_home)
        self.test_home = tempfile.mkdtemp(prefix="unstuck-test-home-")
        os.environ["HOME"] = self.test_home
        for variable, below in XDG_VARIABLES.items():
            folder = os.path.join(self.test_home, below)
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.environ[variable] = folder

    def changes(self) -> list[str]:
        """What changed on ``PATH`` (programs made or removed are another program's business:
        only a change of one that was there counts) and in the real home since the start."""
        programs = [line for line in _changes(self.programs, _programs(self.path))
                    if line.startswith(("mode/owner", "changed"))]
        return programs + _changes(self.home, _home(self.real_home))


_GUARD: HostGuard | None = None


def real_home() -> Path:
    """The home the session started with (``HOME`` now names a temporary one)."""
    assert _GUARD is not None, "the host_guard plugin is not loaded"
    return Path(_GUARD.real_home)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    global _GUARD
    if _GUARD is None:
        _GUARD = HostGuard()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _GUARD is None or hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks
        return
    changed = _GUARD.changes()
    if not changed:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["the tests changed the machine outside their sandboxes:", *changed[:50]]
    if len(changed) > 50:
        lines.append(f"... and {len(changed) - 50} more")
    if reporter is not None:
        reporter.write_sep("=", "host changed", red=True)
        for line in lines:
            reporter.write_line(line)
    else:
        print("\n".join(lines))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
