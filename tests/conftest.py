"""Shared helpers: a model that plays back replies, and the real gh."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence

import pytest

from unstuck.core.tools import ToolCall
from unstuck.toolkit.models import Message, ModelError, ModelReply
from unstuck.toolkit.specs import ToolSpec

pytest.register_assert_rewrite("host_guard")  # imported here, before pytest_plugins loads it
from host_guard import XDG_VARIABLES  # noqa: E402

#: Fixtures of a real PostgreSQL server and of a store per engine (tests/pg_fixtures.py); the
#: check that the session leaves PATH's programs and the real home as they were, with HOME and
#: the XDG folders in a temporary folder (tests/host_guard.py); pytest's own pytester, which
#: runs that check in a session of its own (tests/test_host_guard.py).
pytest_plugins = ["pg_fixtures", "host_guard", "pytester"]


@pytest.fixture(autouse=True)
def _own_user_data_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own user data folder (``XDG_DATA_HOME``): a plain ``unstuck run`` journals and
    learns there (issue 24), so a lesson one test's run records never changes another test's run."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("user-data")))


#: What an environment built from scratch carries over from the session: ``HOME`` and the XDG
#: base directories (tests/host_guard.py points them at a temporary home; the autouse fixture
#: above gives each test its own ``XDG_DATA_HOME``) and ``UNSTUCK_CACHE_DIR``
#: (:func:`pytest_configure` below). A program started without ``HOME`` falls back to the real
#: one: Python's ``os.path.expanduser`` reads the password database then (getpwuid(3)), and the
#: XDG folders default to ``$HOME/.config`` and the like (XDG Base Directory Specification 0.8).
SESSION_VARIABLES = ("HOME", *XDG_VARIABLES, "UNSTUCK_CACHE_DIR")
#: The base directories a home of a test's own holds, where the XDG specification puts them
#: by default (``XDG_RUNTIME_DIR`` has no default there: left out).
HOME_FOLDERS = {name: below for name, below in XDG_VARIABLES.items() if name != "XDG_RUNTIME_DIR"}


def bare_env(*, home: str | os.PathLike[str] | None = None, **extra: str | os.PathLike[str]) -> dict[str, str]:
    """An environment built from scratch for a test's subprocess (``subprocess.run``, ``Popen``,
    ``run_leased``, a ``Workspace``): ``PATH`` ``/usr/bin:/bin``, then :data:`SESSION_VARIABLES` as
    this process has them now (so the session's temporary home and cache, never the real ones),
    then ``extra`` over those (``PATH=...``, ``LANG="C.UTF-8"``, any variable; a path is written
    out with ``os.fspath``).

    ``home``: a home of the test's own instead: ``HOME`` is it and the XDG base directories are
    under it where the specification puts them by default (``home/.config``, ``home/.cache``, ...),
    as a program would find them with ``HOME`` alone; ``XDG_RUNTIME_DIR`` is left out.

    Every environment the tests build without ``os.environ`` comes from here
    (tests/test_test_envs.py checks it)."""
    env = {"PATH": "/usr/bin:/bin", **{name: os.environ[name] for name in SESSION_VARIABLES if name in os.environ}}
    if home is not None:
        for name in XDG_VARIABLES:
            env.pop(name, None)
        env["HOME"] = os.fspath(home)
        env.update({name: os.path.join(env["HOME"], below) for name, below in HOME_FOLDERS.items()})
    env.update({name: os.fspath(value) for name, value in extra.items()})
    return env


def run_at_once(commands: Sequence[Sequence[str]], *, timeout: float = 60) -> list[tuple[int, str, str]]:
    """Start each command (a Python process that prints ``ready`` once set up, then waits for
    a line on its standard input), let them all go at once, as near as processes get, and
    return each one's (exit status, standard output, standard error), in order. Every process
    is killed on the way out, whatever happened."""
    processes = [subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for command in commands]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline() == "ready\n", process.communicate()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outputs = [process.communicate(timeout=timeout) for process in processes]
    finally:
        for process in processes:
            process.kill()
    return [(process.returncode, out, err) for process, (out, err) in zip(processes, outputs, strict=True)]


class PlaybackModel:
    """Plays back a list of replies; records every request (messages and tools offered).

    A reply may be a ``ModelReply``, a ``(tool, args)`` pair (one tool call), a string (a
    final answer), or an exception instance (raised). When tools are withheld (the closing
    call), ``closing`` is answered instead (a string, or an exception to raise); asked whether
    it finished without a blocked subject (the guard's route-around check), ``confirm``.
    """

    name = "playback"

    def __init__(self, replies: Sequence[object], closing: object = "I will retry the task.",
                 confirm: str = "No, I could not.") -> None:
        self.replies = list(replies)
        self.closing = closing
        self.confirm = confirm
        self.requests: list[tuple[tuple[Message, ...], tuple[ToolSpec, ...]]] = []
        self._n = 0

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        self.requests.append((tuple(messages), tuple(tools)))
        if not tools:
            if messages and "Did you complete the task without" in messages[-1].content:
                return ModelReply(self.confirm)
            if isinstance(self.closing, BaseException):
                raise self.closing
            return ModelReply(str(self.closing))
        if not self.replies:
            return ModelReply("finished")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ModelReply):
            return reply
        if isinstance(reply, str):
            return ModelReply(reply)
        name, args = reply  # type: ignore[misc]
        self._n += 1
        return ModelReply("", (ToolCall.of(f"c{self._n}", name, args),))


@pytest.fixture
def gh_path() -> str:
    path = shutil.which("gh")
    if path is None:
        pytest.fail("the real gh CLI is required (Debian package 'gh'; .ci/run installs it)")
    return path


def until(predicate: Callable[[], bool], seconds: float) -> bool:
    """Poll ``predicate`` every 50 ms until it is true or ``seconds`` of real time pass; its last
    answer (for tests that wait on real processes)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


__all__ = ["ModelError", "PlaybackModel", "bare_env", "until"]


def pytest_configure(config: pytest.Config) -> None:
    """Derived caches (unstuck.core.cache) go to a folder of this run, never the user's own, and
    every subprocess the tests start inherits it."""
    import tempfile

    if "UNSTUCK_CACHE_DIR" not in os.environ:
        os.environ["UNSTUCK_CACHE_DIR"] = tempfile.mkdtemp(prefix="unstuck-test-cache-")
