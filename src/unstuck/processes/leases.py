"""Running a command as a lease: in a session and process group (and a cgroup) of its own,
under a deadline, its output captured, its whole tree ended at expiry.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Every subprocess a tool starts runs so (seed 002, "leases"; DESIGN.md: a hung prompt costs one
deadline, never the turn). Every process of the lease carries a token in its environment
(``UNSTUCK_LEASE``, :mod:`unstuck.processes.members`), which children inherit. On expiry
:func:`run_leased` ends the whole tree (:func:`unstuck.processes.ending.end_tree`: SIGTERM,
``grace_s`` seconds, SIGKILL to what is left, a check that none survives) and reports the pids
it signalled, those it killed and any survivor. A command that ends in time may leave
background jobs running (``server &``): the lease ends at expiry only, as its deadline says.

Stdin is ``/dev/null`` unless the caller passes ``stdin_tty=True`` (attended runs), so a
password or sign-in prompt reads end-of-file or waits on nothing and the deadline ends it.
Output is read while the process runs and kept in bounded memory
(:mod:`unstuck.processes.capture`: :attr:`LeaseOutcome.stdout_dropped`, and
:attr:`LeaseOutcome.overflowed` for a stream that never stops, which ends the tree at once).
With ``terminal=True`` (the PTY shell tool) the command runs on a pseudo-terminal of its own
(:mod:`unstuck.processes.terminal`).

**However the caller ends.** Every lease running is in the registry
(:mod:`unstuck.processes.registry`), which the signal drain, the supervisor and the start-up
sweep read (:mod:`unstuck.processes.containment`).

**A cgroup per lease.** Where this process may make cgroups (cgroup v2; see
:mod:`unstuck.processes.cgroups`), each lease's first process is moved into a cgroup of its own,
``unstuck-<token>``, as soon as it has started, and every process it starts is born there: a
daemon that double-forks and clears its environment is still a member. Expiry, the signal
drain, the supervisor and the sweep end the cgroup's members with the rest of the tree
(``cgroup.kill``) and remove the cgroup once it is empty; a command that ended in time has
its cgroup removed at once when nothing of it is left (:attr:`LeaseOutcome.cgroup` names it).

**Waiting for input.** At expiry, before anything is signalled, every process of the lease is
looked at for one asleep reading a terminal (:mod:`unstuck.processes.waits`); the program that
waited is :attr:`LeaseOutcome.waiting_for_input`: the deadline did not catch a slow command,
it caught a pager or a prompt waiting for a person.

:func:`start_lease` starts a long-lived helper (a fixture that holds a lock, a fake server)
under a lease with no deadline; :func:`end_lease` ends it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from unstuck.processes import cgroups, registry
from unstuck.processes.capture import DEFAULT_OUTPUT_CAP, Capture, PipeReader, TerminalReader
from unstuck.processes.cgroups import LeaseCgroup
from unstuck.processes.ending import DEFAULT_GRACE_S, EndedTree, end_leases, end_tree, kill_tree
from unstuck.processes.members import LEASE_ENV, lease_tree, new_token
from unstuck.processes.terminal import DEFAULT_WINDOW, start_on_terminal
from unstuck.processes.waits import waiting_program

__all__ = [
    "OUTPUT_GRACE_S",
    "LeaseOutcome",
    "LeasedProcess",
    "end_lease",
    "run_leased",
    "start_lease",
]

#: Seconds to wait for output still in flight after the command itself has exited.
OUTPUT_GRACE_S = 0.5


@dataclass(frozen=True, slots=True)
class LeaseOutcome:
    """What a leased process left.

    Attributes:
        exit_code: the child's exit status (negative: the signal that ended it).
        group: the process group (the child's pid).
        stdout, stderr: what it printed (decoded UTF-8, invalid bytes replaced).
        expired: the deadline passed and the tree was ended.
        terminated: pids sent SIGTERM at expiry.
        killed: pids that were still alive after the grace period and got SIGKILL.
        survivors: pids still alive after SIGKILL (should be empty; reported, never hidden).
        waiting_for_input: at expiry, the program that was asleep reading its terminal (a
            pager waiting for a key, a prompt waiting for an answer), e.g. ``"less"``; ``None``
            when nothing was (a slow command, or the command ended in time).
        overflowed: a stream printed more than
            :data:`~unstuck.processes.capture.OVERFLOW_FACTOR` times its cap and the tree was
            ended (as at expiry: ``terminated``, ``killed``, ``survivors``); ``expired`` is
            then false.
        stdout_dropped, stderr_dropped: bytes of each stream dropped between the head and
            the tail kept (where :data:`~unstuck.processes.capture.TRUNCATION_MARKER` stands
            in the text); 0 when all was kept.
        cgroup: the folder of the lease's cgroup (see the module doc), ``None`` when it had
            none; gone once the lease has left nothing running.
    """

    exit_code: int
    stdout: str
    stderr: str
    group: int = 0
    expired: bool = False
    terminated: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()
    waiting_for_input: str | None = None
    overflowed: bool = False
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    cgroup: str | None = None


def run_leased(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    deadline_s: float,
    grace_s: float = DEFAULT_GRACE_S,
    stdin_tty: bool = False,
    terminal: bool = False,
    window: tuple[int, int] = DEFAULT_WINDOW,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> LeaseOutcome:
    """Run ``argv`` in a new session and process group under a deadline (see the module doc).

    Args:
        argv: the command line.
        cwd: its working directory.
        env: its whole environment.
        deadline_s: seconds it may run.
        grace_s: seconds between SIGTERM and SIGKILL at expiry.
        stdin_tty: inherit this process's stdin (attended runs); ``/dev/null`` otherwise.
        terminal: run it on a pseudo-terminal of its own (stdin and stdout the pty, stderr a
            pipe; see the module doc).
        window: the pty's size as (rows, columns), with ``terminal``.
        output_cap: bytes kept of each stream (head and tail halves, the rest dropped with
            :data:`~unstuck.processes.capture.TRUNCATION_MARKER`); a stream past
            :data:`~unstuck.processes.capture.OVERFLOW_FACTOR` times this ends the tree
            (:attr:`LeaseOutcome.overflowed`).

    Returns:
        The :class:`LeaseOutcome`; the command's own exit when it ended in time; at expiry,
        the program that was waiting for input, if one was.

    Raises:
        OSError: when the command cannot be started (not found, not executable), or no
            pseudo-terminal can be opened.
        ValueError: when both ``stdin_tty`` and ``terminal`` are set, ``window`` is not
            two positive sizes below 65536, or ``output_cap`` is below 2.
    """
    if stdin_tty and terminal:
        raise ValueError("run_leased: stdin_tty (this process's terminal) and terminal (a pty of its own) "
                         "exclude each other")
    if not isinstance(output_cap, int) or output_cap < 2:
        raise ValueError(f"run_leased: output_cap must be a whole number of bytes, at least 2, got {output_cap!r}")
    token = new_token()
    child_env = {**env, LEASE_ENV: token}
    device: int | None = None
    overflow = threading.Event()
    out_capture, err_capture = Capture(output_cap, overflow), Capture(output_cap, overflow)
    out_reader: PipeReader | TerminalReader
    with registry.starting(token), _cgroup_for(token) as group:
        if group is not None:
            argv = _joining(group, argv, cwd, child_env)
        if terminal:
            proc, device, out_reader = start_on_terminal(argv, cwd, child_env, window, out_capture)
        else:
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=child_env, stdin=None if stdin_tty else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                # attended: a new process group in this session, so /dev/tty (a password prompt) still works;
                # unattended: a new session, with no terminal at all
                start_new_session=not stdin_tty, process_group=0 if stdin_tty else None,
            )
            out_reader = PipeReader(proc.stdout, out_capture)
        registry.started(token, proc)
    readers: list[PipeReader | TerminalReader] = [out_reader, PipeReader(proc.stderr, err_capture)]
    expired = overflowed = False
    waiting: str | None = None
    ended = EndedTree()
    try:
        try:
            _wait(proc, deadline_s, overflow)
        except subprocess.TimeoutExpired:
            overflowed = out_capture.overflowed or err_capture.overflowed
            expired = not overflowed
            if expired:
                waiting = waiting_program(lease_tree(proc.pid, token, group), device)  # before anything is signalled
            ended = end_tree(proc, grace_s, token, group)
    except BaseException:  # an interrupt while it runs ends the tree before it propagates
        kill_tree(proc, token, group)
        if isinstance(out_reader, TerminalReader):
            out_reader.text(0.0)  # closes the pty
        raise
    finally:
        registry.ended(token)
    out, err = (reader.text(OUTPUT_GRACE_S) for reader in readers)
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    if group is not None:
        group.remove()  # only when empty: background jobs keep it until they end or are ended
    return LeaseOutcome(code, out, err, proc.pid, expired, ended.terminated, ended.killed, ended.survivors, waiting,
                        overflowed, out_capture.dropped, err_capture.dropped,
                        str(group.path) if group is not None else None)


@contextlib.contextmanager
def _cgroup_for(token: str) -> Iterator[LeaseCgroup | None]:
    """A new cgroup for the lease ``token`` while its first process starts (``None`` where
    none can be made); removed again when the start fails."""
    group = cgroups.create(token)
    try:
        yield group
    except BaseException:
        if group is not None:
            group.kill()
            group.remove()
        raise


#: What a lease's first process runs when it has a cgroup: it moves itself into the cgroup
#: (``$0``: the cgroup's ``cgroup.procs``), then executes the command in its place, so the
#: command and all it starts are born in the cgroup (no Python runs between fork and exec).
_JOIN_CGROUP = 'echo "$$" > "$0" 2>/dev/null; exec "$@"'


def _joining(group: LeaseCgroup, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> list[str]:
    """``argv`` run through :data:`_JOIN_CGROUP` by ``/bin/sh``, when it can start: a program
    that cannot raises here as :class:`subprocess.Popen` would (the shell would only exit 127).

    Raises:
        FileNotFoundError: the program is not found (on the environment's ``PATH``, or at its
            path relative to ``cwd``).
        PermissionError: it is found but not executable.
    """
    program = argv[0] if argv else ""
    found: str | None
    if "/" in program:
        found = str(cwd / program) if os.path.exists(cwd / program) else None
    else:
        found = shutil.which(program, mode=os.F_OK, path=env.get("PATH", os.defpath)) if program else None
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return ["/bin/sh", "-c", _JOIN_CGROUP, str(group.path / "cgroup.procs"), *argv]


def _wait(proc: subprocess.Popen[bytes], deadline_s: float, wake: threading.Event) -> None:
    """Wait for ``proc`` to exit; :class:`subprocess.TimeoutExpired` when ``deadline_s``
    passes or ``wake`` is set (a stream overflowed) while it still runs."""
    def reap() -> None:
        with contextlib.suppress(Exception):
            proc.wait()
        wake.set()

    threading.Thread(target=reap, daemon=True).start()
    wake.wait(deadline_s)
    if proc.poll() is None:
        raise subprocess.TimeoutExpired(proc.args, deadline_s)


# ----------------------------------------------------------------------------- leased fixtures

@dataclass(frozen=True, slots=True)
class LeasedProcess:
    """A long-lived helper process started under a lease (:func:`start_lease`): a fixture
    that holds a lock, a fake server. It carries ``token`` in its environment and is in the
    registry until :func:`end_lease`, so the signal drain, the supervisor and the sweep
    (:mod:`unstuck.processes.containment`) end it as they end a tool's processes.

    Attributes:
        token: its ``UNSTUCK_LEASE`` value.
        proc: the process (text-mode pipes; its pid is its process group).
    """

    token: str
    proc: subprocess.Popen[str]


def start_lease(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
) -> LeasedProcess:
    """Start ``argv`` as a leased helper with no deadline: in a session and process group
    of its own, stdin ``/dev/null``, stdout a text pipe (UTF-8) the caller reads, stderr
    inherited; its environment ``env`` (this process's by default) plus its lease token.
    End it with :func:`end_lease`.

    Raises:
        OSError: when the command cannot be started.
    """
    token = new_token()
    child_env = {**(os.environ if env is None else env), LEASE_ENV: token}
    with registry.starting(token), _cgroup_for(token) as group:
        if group is not None:
            argv = _joining(group, argv, cwd or Path.cwd(), child_env)
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", start_new_session=True,
        )
        registry.started(token, proc)
    return LeasedProcess(token, proc)


def end_lease(lease: LeasedProcess, grace_s: float = 0.0) -> tuple[int, ...]:
    """End a helper started with :func:`start_lease`: its group, its descendants and every
    process carrying its token (see :func:`unstuck.processes.ending.end_leases`), then reap
    it, close its pipe and take it off the registry. Idempotent; never raises. Returns the pids signalled."""
    try:
        # a reaped child's pid may be reused: its group only while it is unreaped (alive or a zombie)
        return end_leases({lease.token: lease.proc.pid if lease.proc.poll() is None else 0}, grace_s)
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            lease.proc.wait(timeout=5)
        if lease.proc.stdout is not None:
            with contextlib.suppress(OSError):
                lease.proc.stdout.close()
        registry.ended(lease.token)
