"""Sandboxes: a throw-away machine state for one scenario run, built from real programs.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A :class:`Sandbox` is a directory with a home, a workspace, gh's config directory and the
environment its tool subprocesses get:

* the environment is built from scratch (no inherited tokens): ``HOME``, ``GH_CONFIG_DIR``,
  ``PATH``, a UTF-8 locale;
* every proxy variable points at a TCP port on 127.0.0.1 that is bound but never listens, so
  curl, git, gh, pip and Python's urllib get a real "connection refused" (a program that
  ignores the proxy variables can still connect: only ``network="none"``, an empty network
  namespace, is a jail);
* a program can be hidden: ``PATH`` then points at a directory of links to every program on
  the host's ``PATH`` except the hidden ones, so the shell prints its real "command not found";
* gh can be signed in against :class:`unstuck.evals.fake_github.FakeGitHub` on a unix socket;
* a scenario's :class:`unstuck.evals.scenario_state.ScenarioState` (:meth:`Sandbox.apply_state`):
  variables, ``PATH`` folders, stand-in programs, setup commands, read-only paths, a shell
  policy the workspace's ``run_command`` enforces, local HTTP services on 127.0.0.1, and the
  fake API's faults per route.

**Nothing outlives the run.** Lock holders are leases (:func:`unstuck.processes.leases.start_lease`):
they carry the lease token, so :meth:`Sandbox.close`, the signal drain and supervisor of
``unstuck run`` (:func:`unstuck.processes.containment.install_containment`) and the start-up sweep
(:func:`unstuck.processes.containment.sweep_leftovers`) end them. A sandbox made in the temporary directory
(``tempfile.gettempdir()``, ``$TMPDIR`` or ``/tmp``) is named after the process that made it,
``unstuck-sandbox-PID.START-…`` with its gh socket directory ``ugh-PID.START-…`` (``START``:
that process's start time, clock ticks since boot); a run killed before :meth:`Sandbox.close`
leaves them there, and the next sandbox made removes those whose maker is gone
(:func:`sweep_sandboxes`). A sandbox given a ``root`` is the caller's to remove.

**Nothing outside the run is touched.** Every folder a sandbox makes in the temporary directory
holds a marker file, :data:`MARKER`, naming its maker; the sweep removes only a folder whose
name, marker, owner (this process's user) and device (the temporary directory's) all say this
code made it, and every clean-up goes through :mod:`unstuck.core.trees`, which never follows a link:
the shadow ``bin/`` is a folder of links to the host's own programs, and chmod(2) through them
once set 1,173 of the host's files to mode 700 (issue 23).
"""

from __future__ import annotations

import fcntl
import http.server
import os
import pwd
import select
import shlex
import shutil
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import re2

from unstuck.core.errors import UnstuckError
from unstuck.core.trees import (
    OutsideTreeError,
    chmod_inside,
    chown_inside,
    is_inside,
    mount_points_under,
    remove_tree,
    set_immutable,
    write_inside,
)
from unstuck.evals.fake_github import FakeGitHub
from unstuck.evals.scenario_state import ScenarioState, Service, StandInProgram
from unstuck.processes.identity import start_time
from unstuck.processes.leases import LeasedProcess, end_lease, start_lease
from unstuck.toolkit.workspace import Workspace

__all__ = ["MARKER", "NETWORKS", "SANDBOX_PREFIX", "SOCKET_PREFIX", "Sandbox", "SetupCommandError", "sweep_sandboxes"]

#: The network states a sandbox can have (see :meth:`Sandbox.sign_in_gh`).
NETWORKS = ("ok", "refused", "none")


def _account(name: str) -> tuple[int, int]:
    """(uid, gid) of the account ``name``; running as it needs root.

    Raises:
        ValueError: when the account does not exist, or this process is not root.
    """
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"no account named {name!r} on this machine") from None
    if os.geteuid() != 0:
        raise ValueError(f"running tools as {name!r} needs root (this process is uid {os.geteuid()})")
    return entry.pw_uid, entry.pw_gid


#: What a sandbox's directory in the temporary directory is named with, before ``PID.START-``.
SANDBOX_PREFIX = "unstuck-sandbox-"
#: What its gh socket directory is named with, before ``PID.START-`` (unix socket paths must stay short).
SOCKET_PREFIX = "ugh-"
_MAKER = re2.compile(r"^(?:unstuck-sandbox-|ugh-)([0-9]{1,7})\.([0-9]{1,20})-")


#: The file each folder a sandbox makes in the temporary directory holds: ``unstuck sandbox``,
#: a space, and the ``PID.START-`` tag its name carries. The sweep removes no folder without it.
MARKER = ".unstuck-sandbox"


def _maker_tag() -> str:
    """``PID.START-`` of this process (see the module doc)."""
    return f"{os.getpid()}.{start_time(os.getpid()) or 0}-"


def _mark(folder: Path, tag: str) -> int:
    """Write :data:`MARKER` into a folder this process just made (``O_EXCL``: never through a
    file or link that is already there) and hold an exclusive flock(2) on it; the descriptor,
    to keep open while the sandbox lives (the lock ends with it, or with the process)."""
    fd = os.open(folder / MARKER, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"unstuck sandbox {tag}\n".encode())
    return fd


def _made_here(entry: os.DirEntry[str], tag: str, device: int) -> bool:
    """Whether ``entry`` is a folder a sandbox made and its maker is gone: a directory (not a
    link) owned by this process's user on ``device``, holding a regular-file :data:`MARKER` of
    the same owner that names ``tag``, whose flock(2) no process holds. The lock, not the pid,
    says the maker is gone: a maker in another PID namespace (a container sharing the
    temporary directory) has a pid that means nothing here, but its lock is seen."""
    try:
        folder = entry.stat(follow_symlinks=False)
        if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != os.geteuid() or folder.st_dev != device:
            return False
        fd = os.open(os.path.join(entry.path, MARKER), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        marker = os.fstat(handle.fileno())
        if not stat.S_ISREG(marker.st_mode) or marker.st_uid != os.geteuid():
            return False
        if handle.read(200) != f"unstuck sandbox {tag}\n".encode():
            return False
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its maker still holds it
        return True


def _claim_root(root: Path) -> Path:
    """A caller's folder for a sandbox, checked to be this process's alone (resolved): new
    (made here, mode 700), or an empty directory owned by this user that nobody else may
    write; and its parent one nobody else can swap it out of (owned by this user or root,
    and writable by others only with the sticky bit, as ``/tmp``). Otherwise another user
    could put a link where the sandbox writes (its gh config, its programs) and point root's
    writes anywhere.

    Raises:
        ValueError: naming what is wrong with the folder.
    """
    target = Path(root).resolve()
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    found = os.lstat(parent)
    me = os.geteuid()
    if found.st_uid not in (me, 0) or (found.st_mode & 0o022 and not found.st_mode & stat.S_ISVTX):
        raise ValueError(f"sandbox root {target}: its folder {parent} can be changed by another user "
                         f"(owner uid {found.st_uid}, mode {stat.filemode(found.st_mode)}); name a folder of your own")
    try:
        os.mkdir(target, 0o700)
    except FileExistsError:
        found = os.lstat(target)
        if not stat.S_ISDIR(found.st_mode):
            raise ValueError(f"sandbox root {target} exists and is not a directory") from None
        if found.st_uid != me or found.st_mode & 0o022:
            raise ValueError(f"sandbox root {target} is not yours alone (owner uid {found.st_uid}, mode "
                             f"{stat.filemode(found.st_mode)}): name a new folder") from None
        if any(os.scandir(target)):
            raise ValueError(f"sandbox root {target} is not empty: a sandbox is built in a new or empty "
                             "folder (name another folder)") from None
    return target


def sweep_sandboxes(directory: Path | None = None) -> tuple[Path, ...]:
    """Remove the sandbox and socket directories in ``directory`` (the temporary directory by
    default) whose maker is gone: no process has the pid in the name, or the one that has it
    started at another time (a reused pid). Directories of live makers, names of another
    shape, and folders a sandbox did not make (no :data:`MARKER` naming the same maker,
    another owner, another device, a link) are left alone, and nothing is followed out of
    the folders removed (:func:`unstuck.core.trees.remove_tree`). Never raises (what cannot be
    removed stays).

    Returns the directories removed, sorted."""
    where = Path(tempfile.gettempdir()) if directory is None else directory
    removed: list[Path] = []
    try:
        device = os.stat(where).st_dev
        entries = list(os.scandir(where))
    except OSError:
        return ()
    for entry in entries:
        found = _MAKER.match(entry.name)
        if found is None:
            continue
        if start_time(int(found.group(1))) == int(found.group(2)):
            continue
        if not _made_here(entry, f"{found.group(1)}.{found.group(2)}-", device):
            continue
        path = Path(entry.path)
        if remove_tree(path):
            removed.append(path)
    return tuple(sorted(removed))


def _host_path() -> str:
    return os.environ.get("PATH", os.defpath)


class _QuietServer(http.server.ThreadingHTTPServer):
    """A scenario's local service: a client that hangs up mid-request (curl after its answer,
    a killed tool) is the client's business, never a traceback on the terminal."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return None


class Sandbox:
    """One scenario's machine state. Use as a context manager; :meth:`close` removes it.

    Args:
        root: a directory to build in (created); a fresh temporary one by default.
        hide_programs: programs to leave off ``PATH``.
        keep: leave the directory behind on close (for inspection).
    """

    def __init__(
        self, root: Path | None = None, *, hide_programs: Iterable[str] = (), keep: bool = False,
        run_as: str | None = None, network: str = "ok",
    ) -> None:
        if root is None:
            sweep_sandboxes()
        tag = _maker_tag()
        # absolute: the environment names folders inside it, and the tools run from inside it
        self.root = _claim_root(root) if root is not None else Path(tempfile.mkdtemp(prefix=SANDBOX_PREFIX + tag))
        self._markers: list[int] = []
        if root is None and not keep:  # a kept one is the user's to look at: never swept
            self._markers.append(_mark(self.root, tag))
        self.home = self.root / "home"
        self.work = self.root / "work"
        self.gh_config = self.root / "gh-config"
        for directory in (self.home, self.work, self.gh_config):
            directory.mkdir()
        self.keep = keep
        self._socket_dir = Path(tempfile.mkdtemp(prefix=SOCKET_PREFIX + tag))  # unix socket paths must stay short
        self._markers.append(_mark(self._socket_dir, tag))
        self._blackhole = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._blackhole.bind(("127.0.0.1", 0))  # bound, never listening: connects are refused
        self.proxy_url = f"http://127.0.0.1:{self._blackhole.getsockname()[1]}"
        self.hidden = tuple(hide_programs)
        self.path = self._shadow_path(self.hidden) if self.hidden else _host_path()
        self.github: FakeGitHub | None = None
        self.run_as = _account(run_as) if run_as is not None else None
        if self.run_as is not None:
            self._hand_over(self.run_as)
        if network not in NETWORKS:
            raise ValueError(f"unknown network state {network!r}; known: {', '.join(NETWORKS)}")
        if network == "none" and os.geteuid() != 0:
            raise ValueError("a sandbox without network (unshare -n) needs root")
        self.network = network
        self._dead_socket: socket.socket | None = None
        self._holders: list[LeasedProcess] = []
        self.state = ScenarioState()
        self._path_prefix: tuple[str, ...] = ()
        self._services: list[http.server.ThreadingHTTPServer] = []
        self._service_env: dict[str, str] = {}

    # -- environment -----------------------------------------------------------------------

    def _shadow_path(self, hidden: tuple[str, ...]) -> str:
        shadow = self.root / "bin"
        shadow.mkdir(exist_ok=True)
        for directory in _host_path().split(os.pathsep):
            if not directory or not os.path.isdir(directory):
                continue
            for entry in os.scandir(directory):
                target = shadow / entry.name
                if entry.name in hidden or target.exists() or target.is_symlink():
                    continue
                if entry.is_file() and os.access(entry.path, os.X_OK):
                    target.symlink_to(entry.path)
        return str(shadow)

    @property
    def env(self) -> dict[str, str]:
        """The environment tool subprocesses get."""
        env = {
            "PATH": self.path,
            "HOME": str(self.home),
            "GH_CONFIG_DIR": str(self.gh_config),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "GH_NO_UPDATE_NOTIFIER": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_RETRIES": "0",
            "PIP_TIMEOUT": "3",
            # npm (npx) retries a refused proxy for a minute (npm config: fetch-retries 2,
            # fetch-retry-maxtimeout 60000 ms); the sandbox has no network, as pip's settings say
            "npm_config_fetch_retries": "0",
            "npm_config_fetch_timeout": "3000",
            "NO_PROXY": "",
            "no_proxy": "",
        }
        if self.network != "none":  # in a namespace without network nothing can leave anyway
            for name in ("http_proxy", "https_proxy", "all_proxy"):
                env[name] = env[name.upper()] = self.proxy_url
        if self._services:  # the local services are reached directly (curl(1), urllib: no_proxy)
            env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        env.update(self._service_env)
        env.update(self.state.env)
        if self._path_prefix:
            env["PATH"] = os.pathsep.join((*self._path_prefix, self.path))
        return env

    def workspace(self) -> Workspace:
        """A :class:`unstuck.toolkit.workspace.Workspace` rooted at the sandbox's work directory; with
        ``run_as``, its subprocesses run as that user (``setpriv``, util-linux). As root, each
        runs in a mount namespace of its own with private propagation (unshare(1)
        ``--mount --propagation private``), so a mount a tool or a setup command makes ends
        with it and is never left on the host, where the sandbox's clean-up would meet it;
        with ``network="none"``, also in a network namespace with no network (``--net``).
        """
        spaces: list[str] = []
        if os.geteuid() == 0 and shutil.which("unshare") is not None:
            spaces += ["--mount", "--propagation", "private"]
        if self.network == "none":
            spaces.append("--net")
        prefix: tuple[str, ...] = ("unshare", *spaces, "--") if spaces else ()
        if self.run_as is not None:
            uid, gid = self.run_as
            prefix = (*prefix, "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--")
        policy = self.state.shell_policy
        return Workspace(self.work, self.env, argv_prefix=prefix, denied_programs=policy.deny_programs,
                         denied_operators=policy.deny_operators)

    def _hand_over(self, account: tuple[int, int]) -> None:
        """Let ``account`` into the sandbox: its home and work directory become its own."""
        uid, gid = account
        for directory in (self.root, self.home, self.gh_config, self.work):
            chmod_inside(self.root, directory, 0o755)
        for directory in (self.home, self.gh_config, self.work):
            os.chown(directory, uid, gid, follow_symlinks=False)

    def make_unreadable(self, names: Iterable[str]) -> None:
        """Make work-directory paths unreadable to the tool processes: owned by root, mode 000
        (a directory or file they then get a real EACCES on, and cannot chmod back).

        Raises:
            ValueError: a path that escapes the work directory, or a file with another hard
                link (its other name may be outside: :class:`unstuck.core.trees.OutsideTreeError`).
        """
        for name in names:
            target = self.work / name
            if not is_inside(self.work, target):
                raise ValueError(f"sandbox path {name!r} escapes the work directory")
            if not target.exists():
                target.mkdir(parents=True)
            if os.geteuid() == 0:
                chown_inside(self.work, target, 0, 0)
            chmod_inside(self.work, target, 0)

    # -- state -------------------------------------------------------------------------------

    def write_files(self, files: Mapping[str, str | bytes]) -> None:
        """Create files under the work directory (parents made): text as UTF-8, bytes as they
        are; with ``run_as``, owned by that user. Each is written new, never through a link or
        a folder link on the way (:func:`unstuck.core.trees.write_inside`).

        Raises:
            ValueError: a name that is absolute or climbs out of the work directory.
        """
        for name, content in files.items():
            try:
                write_inside(self.work, name, content if isinstance(content, bytes) else content.encode("utf-8"))
            except OutsideTreeError as error:
                raise ValueError(f"sandbox file {name!r} escapes the work directory ({error})") from error
            if self.run_as is not None:
                target = self.work / name
                for part in (target, *target.relative_to(self.work).parents):
                    chown_inside(self.work, self.work / part, *self.run_as)

    def serve_github(self, **options: object) -> FakeGitHub:
        """Start the fake GitHub API on a unix socket (options go to :class:`FakeGitHub`)."""
        if self.github is None:
            options.setdefault("route_faults", self.state.api_faults)
            self.github = FakeGitHub(self._socket_dir / "api.sock", **options).start()  # type: ignore[arg-type]
        return self.github

    # -- scenario state (unstuck.evals.scenario_state) ------------------------------------------

    def apply_state(self, state: ScenarioState) -> None:
        """Set up a scenario's :class:`ScenarioState`, in this order: stand-in programs (a
        folder first on ``PATH``), the ``path`` folders (made if missing) after it, the
        variables, the shell policy (read by :meth:`workspace`), the local HTTP services (their
        URLs in their ``url_env`` variables), the GitHub API's route faults (on the running
        fake API, or the one started later), then the setup commands (run as the tools run),
        and last the read-only paths (so files the commands made can be among them).

        Read-only: mode ``a-w`` on the path and everything under it; as root, also the
        immutable attribute (chattr(1) ``+i``: even root then gets EPERM); when that does not
        hold on this file system, the tools must run as ``run_as`` (the paths are then owned by
        root, so the tools get EACCES and cannot chmod them back).

        Raises:
            SetupCommandError: a setup command exited non-zero (names the command, its exit
                code and stderr).
            ValueError: a read-only path missing from the workspace, or read-only as root
                without chattr support and without ``run_as``.
        """
        self.state = state
        prefix: list[str] = []
        if state.programs:
            folder = self.root / "programs"
            folder.mkdir(exist_ok=True)
            folder.chmod(0o755)
            for program in state.programs:
                _install_program(folder, program)
            prefix.append(str(folder))
        for name in state.path:
            folder = self._inside(name, "path")
            folder.mkdir(parents=True, exist_ok=True)
            prefix.append(str(folder))
        self._path_prefix = tuple(prefix)
        for service in state.services:
            self._service_env[service.url_env] = self._start_service(service)
        if state.api_faults and self.github is not None:
            self.github.set_route_faults(state.api_faults)
        workspace = self.workspace()
        for index, command in enumerate(state.commands):
            out = workspace.run(command, timeout_s=60.0)
            if out.exit_code != 0:
                raise SetupCommandError(command, out.exit_code, out.stderr or out.stdout, index=index)
        for name in state.read_only:
            self._make_read_only(name)

    def _inside(self, name: str, field: str) -> Path:
        target = self.work / name
        if not target.resolve().is_relative_to(self.work.resolve()):
            raise ValueError(f"sandbox {field} {name!r} escapes the work directory")
        return target

    def _make_read_only(self, name: str) -> None:
        target = self._inside(name, "read_only path")
        if not target.exists():
            raise ValueError(f"field 'setup.read_only': {name!r} does not exist in the workspace (write it with "
                             "setup.files or a setup command)")
        mounted = mount_points_under(target)
        if mounted:
            raise ValueError(f"field 'setup.read_only': {name!r} holds a mount point ({mounted[0]}): what is mounted "
                             "there is outside the sandbox, so it is not made read-only")
        paths = [target]
        if target.is_dir() and not target.is_symlink():
            for top, dirs, files in os.walk(target):  # never into a link to a directory
                paths.extend(Path(top, name) for name in (*dirs, *files))
        shared = [path for path in paths if not path.is_symlink() and path.is_file() and path.lstat().st_nlink > 1]
        if shared:
            raise ValueError(f"field 'setup.read_only': {shared[0].relative_to(self.work)} has another hard link, "
                             "which may be a file outside the sandbox: it is not made read-only (copy it instead)")
        for path in paths:
            if self.run_as is not None:
                chown_inside(self.work, path, 0, 0)
            if not path.is_symlink():
                chmod_inside(self.work, path, path.lstat().st_mode & 0o7777 & ~0o222)
        if os.geteuid() != 0:
            return
        # as root, mode bits are not enough: the immutable attribute, on directories and files
        # only (a link or a special file is left as it is)
        settable = [path for path in paths if not path.is_symlink() and (path.is_dir() or path.is_file())]
        done = all(set_immutable(path) for path in settable)
        if not done and self.run_as is None:
            raise ValueError(f"field 'setup.read_only': {name!r}: the tools run as root, which ignores mode bits, "
                             "and the immutable attribute (chattr +i) does not hold here; set setup.run_as "
                             "(e.g. nobody)")

    def _start_service(self, service: Service) -> str:
        """Serve ``service`` on 127.0.0.1, an ephemeral port, in a thread; returns its base URL."""
        server = _QuietServer(("127.0.0.1", 0), _service_handler(service))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name=f"service-{service.name}", daemon=True).start()
        self._services.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    def sign_in_gh(self, token: str | None = None) -> None:
        """Sign gh in: write ``hosts.yml`` (the token) and ``config.yml``, as ``gh auth login``
        would leave them. Where the API answers depends on the sandbox's network:

        * ``ok``: ``http_unix_socket`` points at the fake API (started here);
        * ``refused``: it points at a unix socket that is bound but never listens, so every
          request gets a real "connect: connection refused";
        * ``none``: no ``http_unix_socket``; the tools run in a network namespace with no
          network, so gh finds no route to api.github.com at all.
        """
        api = self.serve_github()
        login = "octocat"
        self.gh_config.joinpath("hosts.yml").write_text(
            f"github.com:\n    oauth_token: {token or api.token}\n    user: {login}\n    git_protocol: https\n",
            encoding="utf-8",
        )
        if self.network == "none":
            return
        socket_path = api.socket_path
        if self.network == "refused":
            socket_path = self._socket_dir / "dead.sock"
            self._dead_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._dead_socket.bind(os.fspath(socket_path))  # bound, never listening
        self.gh_config.joinpath("config.yml").write_text(f"http_unix_socket: {socket_path}\n", encoding="utf-8")

    def hold_lock(self, kind: str, name: str) -> None:
        """Start a live process that holds a lock on work-directory file ``name`` until the
        sandbox closes: ``sqlite`` (a write transaction, ``BEGIN EXCLUSIVE``, on an SQLite
        database made if missing) or ``flock`` (an exclusive advisory lock, flock(2)).

        Raises:
            ValueError: for another kind of lock, or a path outside the work directory.
            RuntimeError: when the holder did not report the lock held within 10 s.
        """
        target = self.work / name
        if not target.resolve().is_relative_to(self.work.resolve()):
            raise ValueError(f"sandbox path {name!r} escapes the work directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        scripts = {
            "sqlite": (
                "import sqlite3, sys, time\n"
                "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "db.execute('BEGIN EXCLUSIVE')\n"
                "print('held', flush=True)\ntime.sleep(3600)\n"
            ),
            "flock": (
                "import fcntl, sys, time\n"
                "handle = open(sys.argv[1], 'a')\n"
                "fcntl.flock(handle, fcntl.LOCK_EX)\n"
                "print('held', flush=True)\ntime.sleep(3600)\n"
            ),
        }
        if kind not in scripts:
            raise ValueError(f"unknown lock {kind!r}; known: {', '.join(scripts)}")
        lease = start_lease([sys.executable, "-c", scripts[kind], str(target)])
        self._holders.append(lease)
        holder = lease.proc
        ready = select.select([holder.stdout], [], [], 10)[0] if holder.stdout is not None else []
        if not ready or holder.stdout is None or holder.stdout.readline().strip() != "held":
            raise RuntimeError(f"the {kind} lock on {name} was not held within 10 s")
        if self.run_as is not None:
            # Another user's lock on a shared file: the tools' account may read and write it
            # (mode 666), and create files beside it, but not delete or replace what root owns
            # (a sticky, world-writable directory, as /tmp is).
            os.chown(target, 0, 0, follow_symlinks=False)
            os.chown(target.parent, 0, 0, follow_symlinks=False)
            chmod_inside(self.work, target, 0o666)
            chmod_inside(self.work, target.parent, 0o1777)

    def close(self) -> None:
        """Stop the lock holders and the fake API, release the port, and remove the
        directories (unless kept).
        """
        for holder in self._holders:
            end_lease(holder)
        self._holders.clear()
        for server in self._services:
            server.shutdown()
            server.server_close()
        self._services.clear()
        if self.github is not None:
            self.github.stop()
            self.github = None
        if self._dead_socket is not None:
            self._dead_socket.close()
        self._blackhole.close()
        remove_tree(self._socket_dir)
        if not self.keep:
            remove_tree(self.root)
        for fd in self._markers:
            os.close(fd)
        self._markers.clear()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SetupCommandError(UnstuckError, RuntimeError):
    """A scenario's setup command failed: a harness error, not the agent's."""

    def __init__(self, command: str, exit_code: int, output: str, *, index: int = 0) -> None:
        self.command, self.exit_code = command, exit_code
        tail = output.strip()[-400:]
        super().__init__(f"field 'setup.commands[{index}]': the setup command {command!r} exited {exit_code}"
                         + (f": {tail}" if tail else " (no output)"))


def _install_program(folder: Path, program: StandInProgram) -> None:
    """Write ``program`` as an executable bash script in ``folder``: its script body then
    ``exit N``, or a replay of its recorded stdout and stderr (kept byte for byte in files
    beside it) then ``exit N``."""
    target = folder / program.name
    if program.script is not None:
        body = f"{program.script}\nexit {program.exit}\n"
    else:
        data = folder / ".recorded"
        data.mkdir(exist_ok=True)
        data.chmod(0o755)
        out, err = data / f"{program.name}.stdout", data / f"{program.name}.stderr"
        out.write_text(program.output, encoding="utf-8")
        err.write_text(program.stderr, encoding="utf-8")
        for part in (out, err):
            part.chmod(0o644)
        body = f"cat -- {shlex.quote(str(out))}\ncat -- {shlex.quote(str(err))} >&2\nexit {program.exit}\n"
    target.write_text("#!/bin/bash\n" + body, encoding="utf-8")
    target.chmod(0o755)


def _service_handler(service: Service) -> type[http.server.BaseHTTPRequestHandler]:
    """A request handler answering ``service``'s routes in order (the last answer repeats);
    404 for a path no route has, 405 with ``Allow`` for a known path and another method
    (RFC 9110 sections 15.5.5 and 15.5.6)."""
    served: dict[int, int] = {}
    lock = threading.Lock()
    routes = service.routes

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            path = self.path.split("?", 1)[0]
            index = next((i for i, r in enumerate(routes) if r.path == path and r.method == self.command), None)
            headers: tuple[tuple[str, str], ...] = ()
            if index is None:
                allowed = sorted({r.method for r in routes if r.path == path})
                status, body = (405, "method not allowed\n") if allowed else (404, "not found\n")
                if allowed:
                    headers = (("Allow", ", ".join(allowed)),)
            else:
                with lock:
                    count = served.get(index, 0)
                    served[index] = count + 1
                answers = routes[index].responses
                answer = answers[min(count, len(answers) - 1)]
                status, headers, body = answer.status, answer.headers, answer.body
            payload = body.encode("utf-8")
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            if not any(name.lower() == "content-type" for name, _ in headers):
                self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _answer  # noqa: N815 (http.server's names)

    return Handler
