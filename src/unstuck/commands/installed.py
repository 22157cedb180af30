"""Programs installed off ``PATH``: whether a program a shell calls "not installed" is really
missing, or only missing from ``PATH``.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Installers put programs in directories that a given shell's ``PATH`` often lacks (a user's
``~/.local/bin`` before their profile ran, ``/usr/sbin`` for a non-root user on Debian,
``~/.cargo/bin`` in a service's environment). :func:`locate_off_path` looks in those well-known
places (:data:`OFF_PATH_DIRS`, each with the document that names it) for an executable of that
name, so the fix said is "add its directory to PATH", not "install it".

Pure apart from ``stat`` (and listing ``/opt``): it never runs anything and never reads a
file's contents.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["MAX_OPT_DIRS", "OFF_PATH_DIRS", "OffPathDir", "locate_off_path"]

#: At most this many ``/opt/*/bin`` directories are looked at (in name order).
MAX_OPT_DIRS = 64
_PROGRAM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,254}")


@dataclass(frozen=True, slots=True)
class OffPathDir:
    """A directory programs are installed in that ``PATH`` often lacks.

    Attributes:
        path: the directory; ``~/`` is the user's home, one ``*`` a glob over the names in its
            parent (``/opt/*/bin``, at most :data:`MAX_OPT_DIRS`).
        source: the document that names it as an install location.
    """

    path: str
    source: str


#: Where to look, in order.
OFF_PATH_DIRS: tuple[OffPathDir, ...] = (
    OffPathDir("/usr/local/bin", "FHS 3.0 section 4.9 (/usr/local: the local hierarchy, locally installed software)"),
    OffPathDir("/usr/local/sbin", "FHS 3.0 section 4.9 (/usr/local/sbin: local system binaries)"),
    OffPathDir("/usr/sbin", "FHS 3.0 section 4.10; Debian's /etc/profile gives non-root users a PATH without sbin"),
    OffPathDir("/sbin", "FHS 3.0 section 3.16 (system binaries); not on Debian's non-root PATH"),
    OffPathDir("~/.local/bin", "XDG Base Directory Specification (user executables in $HOME/.local/bin); "
               "pip install --user puts scripts there"),
    OffPathDir("~/bin", "Debian's /etc/skel/.profile adds $HOME/bin to PATH only when it exists at login"),
    OffPathDir("/snap/bin", "snapd (the snap commands' directory, added by /etc/profile.d/apps-bin-path.sh)"),
    OffPathDir("~/.cargo/bin", "The rustup book, Installation (cargo install and rustup put tools in ~/.cargo/bin)"),
    OffPathDir("~/go/bin", "Go documentation, go install (GOBIN, else $GOPATH/bin; GOPATH defaults to $HOME/go)"),
    OffPathDir("/usr/local/go/bin", "Go documentation, Download and install (add /usr/local/go/bin to PATH)"),
    OffPathDir("~/.npm-global/bin", "npm Docs, Resolving EACCES permissions errors (a prefix of ~/.npm-global)"),
    OffPathDir("/opt/homebrew/bin", "Homebrew documentation, Installation (the prefix on Apple Silicon)"),
    OffPathDir("/home/linuxbrew/.linuxbrew/bin", "Homebrew documentation, Homebrew on Linux (the default prefix)"),
    OffPathDir("~/.deno/bin", "Deno documentation, Installation (the install script's $HOME/.deno/bin)"),
    OffPathDir("~/.bun/bin", "Bun documentation, Installation (the install script's ~/.bun/bin)"),
    OffPathDir("/opt/*/bin", "FHS 3.0 section 3.13 (/opt: add-on application packages, /opt/<package>/bin)"),
)


def locate_off_path(
    program: str, path_env: str, home: str | None, *, roots: Sequence[str] | None = None
) -> str | None:
    """Where an executable named ``program`` is installed outside ``PATH``, if anywhere.

    Args:
        program: a program name (letters, digits, ``._+-``; no ``/``).
        path_env: the ``PATH`` of the environment that did not find it (``:``-separated).
        home: that environment's home directory; without one, ``~/`` places are skipped.
        roots: the directories to look in, in order, written as in :data:`OFF_PATH_DIRS`
            (``~/``, one ``*``); :data:`OFF_PATH_DIRS` by default.

    Returns:
        The absolute path of the first executable regular file (after symlinks) named
        ``program`` in those directories, skipping any that ``PATH`` already holds;
        ``None`` when ``PATH`` already reaches one (it is not off ``PATH``) or none exists.

    Raises:
        ValueError: when ``program`` is not a program name.
    """
    if not isinstance(program, str) or not _PROGRAM.fullmatch(program) or program in (".", ".."):
        raise ValueError(f"locate_off_path: not a program name: {str(program)[:80]!r}")
    on_path, prefixes = _path_dirs(path_env)
    for prefix in prefixes:
        if _executable(prefix + program):
            return None
    reached: set[str] | None = None  # the real paths of PATH's directories, resolved once a candidate is met
    places = roots if roots is not None else _PLACES
    for directory in _expanded(places, home):
        candidate = os.path.join(directory, program)
        if not _executable(candidate):
            continue
        if reached is None:
            reached = {_real(d) for d in on_path}
        if _real(directory) not in reached:
            return candidate
    return None


_PLACES = tuple(entry.path for entry in OFF_PATH_DIRS)


#: :func:`_path_dirs` of the ``PATH`` values met, at most :data:`_PATHS_KEPT` (a process meets a few).
_PATHS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_PATHS_KEPT = 64


def _path_dirs(path_env: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The directories of ``path_env`` (empty entries dropped), and each absolute one once, in
    order, as the prefix a program's name is joined to (``os.path.join`` of an absolute
    directory and a name without ``/``): derived from the text alone, so kept by it."""
    found = _PATHS.get(path_env)
    if found is None:
        on_path = tuple(d for d in path_env.split(os.pathsep) if d)
        absolute = dict.fromkeys(d for d in on_path if os.path.isabs(d))  # a directory listed twice is looked in once
        prefixes = tuple(os.path.join(d, "") for d in absolute)
        if len(_PATHS) >= _PATHS_KEPT:
            _PATHS.clear()
        found = _PATHS[path_env] = (on_path, prefixes)
    return found


def _expanded(places: Sequence[str], home: str | None) -> Iterator[str]:
    """The directories ``places`` name: ``~/`` under ``home``, one ``*`` over the names of its
    parent directory in order (at most :data:`MAX_OPT_DIRS`); absolute paths only."""
    for place in places:
        if place.startswith("~/"):
            if not home or not os.path.isabs(home):
                continue
            place = os.path.join(home, place[2:])
        if not os.path.isabs(place):
            continue
        if "*" not in place:
            yield os.path.normpath(place)
            continue
        parent, _, rest = place.partition("*")
        try:
            names = sorted(os.listdir(parent))
        except OSError:
            continue
        for name in names[:MAX_OPT_DIRS]:
            if not name.startswith("."):
                yield os.path.normpath(f"{parent}{name}{rest}")


def _executable(path: str) -> bool:
    """A regular file (after symlinks) with an execute bit this process may use (``access``
    first: it says no to a missing file without raising, where ``stat`` raises)."""
    try:
        return os.access(path, os.X_OK) and stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path
