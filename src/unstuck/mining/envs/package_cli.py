"""The package/CLI workspace: a project with a package manifest and a lock, a package index,
and stand-in command-line programs run as real subprocesses (seed 003, environments).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Faults this environment is about, each real:

* **missing programs**: the session's ``PATH`` is its own ``bin`` (the stand-ins) and
  ``.system`` (links to a fixed list of host programs, :data:`SYSTEM_PROGRAMS`), so ``jq``,
  ``protoc`` and ``shellcheck`` are absent on every machine, whatever the host has: bash
  answers its own ``command not found`` with exit status 127. Some tasks can be done with what
  is there (``python3`` or ``read_file`` instead of ``jq``); others only the user can unblock
  (``protoc``, ``shellcheck``: the agent must ask naming the program).
* **timeouts**: ``build`` and ``runtests`` are slow the first time in a task that starts with
  a cold cache (a real sleep of :data:`SLOW_S` seconds past the tool's deadline of
  :data:`DEADLINE_S` seconds; the run counter is written first), fast on every later run.
* **locks**: the stand-in package manager ``pkg`` takes an ``flock`` on
  ``.pkg/lock-frontend``; a task may start with that lock held by a real background process
  that lets go after the package manager has failed on it a set number of times (or never, in
  the task where only the user can free it). ``pkg`` words the failure as apt does.
* **wrong identifiers**: package names and versions guessed from the user's words (``yaml``
  for the YAML library, ``attr`` for ``attrs``, an older ``requests``); ``search_packages``
  finds the right ones.

The session's folder holds ``project/`` (the work tree: ``packages.json``, ``packages.lock``,
``packages/NAME/PKG-INFO``, config, sources, tests), ``registry/index.json`` (the package
index), ``bin/`` (the stand-ins), ``.pkg/`` (the lock and its failure counter), ``.cache/``
(run counters) and ``questions.jsonl``. ``.system/`` holds symbolic links only (not state:
snapshots leave it out and :meth:`PackageCliSession.restore` keeps it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unstuck.commands.parse import command_subject
from unstuck.core.tools import CommandOutput, Effect, ToolCall
from unstuck.core.trees import chmod_inside
from unstuck.mining.environment import (
    ASK_TOOL,
    BusinessObject,
    FolderSession,
    Lookup,
    MiningError,
    Snapshot,
    Step,
    Task,
    Verification,
    ask_tool,
    asked_questions,
)
from unstuck.toolkit.specs import Toolset, ToolSpec, tool
from unstuck.toolkit.workspace import Workspace

__all__ = [
    "DEADLINE_S",
    "INDEX",
    "LOCK_FILE",
    "MISSING_PROGRAMS",
    "SLOW_S",
    "SYSTEM_PROGRAMS",
    "PackageCliEnvironment",
    "PackageCliSession",
    "Release",
    "make_environment",
]

#: Seconds a command may run under ``run_command`` and ``run_tests``.
DEADLINE_S = 1.0
#: Seconds a cold ``build`` or ``runtests`` sleeps on its first run (past :data:`DEADLINE_S`;
#: with the kill grace the whole timed-out call stays under 2 s).
SLOW_S = 1.5
#: Seconds between SIGTERM and SIGKILL when a deadline passes.
GRACE_S = 0.2
#: Seconds ``install_package`` may run (the package manager waits up to 0.3 s for its lock).
INSTALL_DEADLINE_S = 5.0
#: Seconds a lock holder that lets go after failures lives at most (``close`` ends it sooner).
HOLDER_MAX_S = 60.0
#: Seconds a lock holder that never lets go lives at most, should ``close`` never be called.
STUCK_HOLDER_MAX_S = 600.0
#: The package manager's lock, relative to the session's folder.
LOCK_FILE = ".pkg/lock-frontend"
#: How many times the package manager failed on its lock, relative to the session's folder.
LOCK_FAILURES_FILE = ".pkg/lock-failures"

#: Host programs a session may run (linked into ``.system``); everything else is not installed.
SYSTEM_PROGRAMS: tuple[str, ...] = (
    "awk", "basename", "bash", "cat", "chmod", "cp", "cut", "diff", "dirname", "env", "find",
    "grep", "gzip", "head", "ls", "mkdir", "mv", "python3", "rm", "sed", "sh", "sleep", "sort",
    "tail", "tar", "tee", "touch", "tr", "uniq", "wc",
)
#: Programs tasks need that no session has (they are in neither ``bin`` nor ``.system``).
MISSING_PROGRAMS: tuple[str, ...] = ("jq", "protoc", "shellcheck")


@dataclass(frozen=True, slots=True)
class Release:
    """One release in the package index: ``name``, ``version``, the project's one-line
    ``summary``. Source: the project's page on PyPI (``https://pypi.org/project/NAME/``), its
    summary and release history; the index is a fixed excerpt, not today's PyPI."""

    name: str
    version: str
    summary: str


_SUMMARIES: Mapping[str, str] = {
    # Each from https://pypi.org/project/<name>/ (the "Summary" of the project's metadata).
    "requests": "Python HTTP for Humans.",
    "click": "Composable command line interface toolkit",
    "pyyaml": "YAML parser and emitter for Python",
    "beautifulsoup4": "Screen-scraping library",
    "beautifulsoup": "HTML/XML parser for quick-turnaround applications like screen-scraping.",
    "attrs": "Classes Without Boilerplate",
    "attr": "Simple decorator to set attributes of target function or class in a DRY way.",
    "python-dateutil": "Extensions to the standard Python datetime module",
    "rich": "Render rich text, tables, progress bars, syntax highlighting, markdown and more to the terminal",
}

_VERSIONS: Mapping[str, tuple[str, ...]] = {
    # Release numbers from each project's PyPI release history, oldest first (an excerpt).
    "requests": ("2.31.0", "2.32.0", "2.32.3"),
    "click": ("8.1.6", "8.1.7", "8.1.8"),
    "pyyaml": ("6.0", "6.0.1", "6.0.2"),
    "beautifulsoup4": ("4.12.2", "4.12.3"),
    "beautifulsoup": ("3.2.1", "3.2.2"),
    "attrs": ("23.1.0", "23.2.0"),
    "attr": ("0.3.1", "0.3.2"),
    "python-dateutil": ("2.8.2", "2.9.0.post0"),
    "rich": ("13.7.0", "13.7.1"),
}

#: The package index every session starts with.
INDEX: tuple[Release, ...] = tuple(
    Release(name, version, _SUMMARIES[name]) for name, versions in _VERSIONS.items() for version in versions
)

_INSTALLED: Mapping[str, str] = {"requests": "2.31.0", "click": "8.1.7"}

_CONFIG: Mapping[str, Any] = {"service": "weatherly", "version": "2.4.1", "region": "eu-west-1", "retries": 3}

# The test suite: (test id, the package it needs or None, the module that package provides).
_TEST_CASES: tuple[tuple[str, str | None, str | None], ...] = (
    ("tests/test_cli.py::test_help", "click", "click"),
    ("tests/test_cli.py::test_forecast_command", "click", "click"),
    ("tests/test_cli.py::test_unknown_city", "click", "click"),
    ("tests/test_client.py::test_get_forecast", "requests", "requests"),
    ("tests/test_client.py::test_retry_on_503", "requests", "requests"),
    ("tests/test_client.py::test_timeout", "requests", "requests"),
    ("tests/test_units.py::test_celsius", None, None),
    ("tests/test_units.py::test_fahrenheit", None, None),
    ("tests/test_units.py::test_round_trip", None, None),
    ("tests/test_units.py::test_kelvin", None, None),
    ("tests/test_format.py::test_table", None, None),
    ("tests/test_config.py::test_yaml_roundtrip", "pyyaml", "yaml"),
)

_PROTO = """syntax = "proto3";

package weatherly;

message Forecast {
  string city = 1;
  double temperature_c = 2;
  string summary = 3;
  int32 humidity_pct = 4;
}
"""

_STUB = """# Generated by the protocol buffer compiler from an older proto/forecast.proto.
# DO NOT EDIT!
"""

_DEPLOY = """#!/bin/sh
# Deploy the built archive to the release bucket.
set -e
archive=$(ls dist/*.tar.gz | head -n 1)
echo Deploying $archive
cp $archive /srv/releases/
"""

_APP = '''"""weatherly: a small weather forecast command-line client."""

__version__ = "0.3.0"
'''


def _project_files() -> dict[str, str]:
    """The project's files at the start of every task (path under ``project/`` -> text)."""
    files = {
        "packages.json": json.dumps({"name": "weatherly", "version": "0.3.0", "dependencies": dict(_INSTALLED)},
                                    indent=2) + "\n",
        "packages.lock": _lock_text(_INSTALLED),
        "config.json": json.dumps(_CONFIG) + "\n",
        "proto/forecast.proto": _PROTO,
        "gen/forecast_pb2.py": _STUB,
        "scripts/deploy.sh": _DEPLOY,
        "src/weatherly/__init__.py": _APP,
        "tests/cases.json": json.dumps([{"test": t, "needs": n, "module": m} for t, n, m in _TEST_CASES],
                                       indent=2) + "\n",
    }
    for name, version in _INSTALLED.items():
        files[f"packages/{name}/PKG-INFO"] = _pkg_info(name, version)
    return files


def _lock_text(installed: Mapping[str, str]) -> str:
    return json.dumps({"lockfileVersion": 1,
                       "packages": {n: {"version": v} for n, v in sorted(installed.items())}}, indent=2) + "\n"


def _pkg_info(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {_SUMMARIES[name]}\n"


# --- the stand-in programs (written into the session's bin/) -------------------------------

# The package manager. Its messages follow apt (apt-pkg/contrib/fileutl.cc GetLock: "Could not
# get lock %s" through _error->Errno("open", ...), which appends " - open (11: Resource
# temporarily unavailable)"; apt-pkg/deb/debsystem.cc: "Unable to acquire the dpkg frontend lock
# (%s), is another process using it?"; apt-pkg/cacheset.cc: "Unable to locate package %s",
# "Version '%s' for '%s' was not found"; apt-private/private-install.cc: "%s is already the
# newest version (%s)."), "E: " before an error and exit status 100, as apt-get(8) documents.
_PKG = r'''#!/usr/bin/env python3
"""pkg: the project's package manager (install NAME[=VERSION] | list | search WORDS)."""
import fcntl, json, os, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "project"
LOCK = ROOT / ".pkg" / "lock-frontend"
FAILURES = ROOT / ".pkg" / "lock-failures"


def fail(*lines):
    for line in lines:
        print("E: " + line, file=sys.stderr)
    sys.exit(100)


def index():
    return json.loads((ROOT / "registry" / "index.json").read_text())


def lock():
    LOCK.parent.mkdir(exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o640)
    end = time.monotonic() + 0.3
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= end:
                break
            time.sleep(0.02)
    count = int(FAILURES.read_text() or 0) if FAILURES.exists() else 0
    FAILURES.write_text(str(count + 1))
    shown = "~/" + LOCK.relative_to(ROOT).as_posix()  # HOME is the session's folder
    fail(f"Could not get lock {shown} - open (11: Resource temporarily unavailable)",
         f"Unable to acquire the pkg frontend lock ({shown}), is another process using it?")


def install(spec):
    name, _, version = spec.partition("=")
    releases = [r for r in index() if r["name"] == name]
    if not releases:
        fail(f"Unable to locate package {name}")
    if not version:
        version = releases[-1]["version"]
    release = next((r for r in releases if r["version"] == version), None)
    if release is None:
        fail(f"Version '{version}' for '{name}' was not found")
    fd = lock()
    try:
        lockfile = json.loads((PROJECT / "packages.lock").read_text())
        current = lockfile["packages"].get(name, {}).get("version")
        if current == version:
            print(f"{name} is already the newest version ({version}).")
            print("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
            return
        info = PROJECT / "packages" / name / "PKG-INFO"
        info.parent.mkdir(parents=True, exist_ok=True)
        info.write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {release['summary']}\n")
        lockfile["packages"][name] = {"version": version}
        lockfile["packages"] = dict(sorted(lockfile["packages"].items()))
        (PROJECT / "packages.lock").write_text(json.dumps(lockfile, indent=2) + "\n")
        manifest = json.loads((PROJECT / "packages.json").read_text())
        manifest["dependencies"][name] = version
        (PROJECT / "packages.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if current is None:
            print(f"Setting up {name} ({version}) ...")
            print("0 upgraded, 1 newly installed, 0 to remove and 0 not upgraded.")
        else:
            print(f"Unpacking {name} ({version}) over ({current}) ...")
            print(f"Setting up {name} ({version}) ...")
            print("1 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
    finally:
        os.close(fd)


def main(argv):
    if len(argv) == 2 and argv[0] == "install":
        install(argv[1])
    elif argv == ["list"]:
        lockfile = json.loads((PROJECT / "packages.lock").read_text())
        for name, entry in lockfile["packages"].items():
            print(f"{name}/{entry['version']} [installed]")
    elif argv and argv[0] == "search":
        words = [w.lower() for w in argv[1:]]
        for r in index():
            text = (r["name"] + " " + r["summary"]).lower()
            if all(w in text for w in words):
                print(f"{r['name']}/{r['version']}\n  {r['summary']}")
    else:
        print("Usage: pkg install NAME[=VERSION] | pkg list | pkg search WORDS", file=sys.stderr)
        sys.exit(100)


main(sys.argv[1:])
'''

# A cold first run: the run counter is written before the sleep, so a retry is fast.
_COLD = r'''
def cold_start(program):
    cache = ROOT / ".cache"
    runs = cache / f"{program}.runs"
    count = int(runs.read_text() or 0) if runs.exists() else 0
    runs.write_text(str(count + 1))
    cold = (cache / "cold").read_text().split() if (cache / "cold").exists() else []
    if count == 0 and program in cold:
        time.sleep(SLOW_S)
'''

# The build: a source archive as "python -m build --sdist" names it, byte for byte the same on
# every run (mtime 0, sorted names); its last line is build's "Successfully built ...".
_BUILD = r'''#!/usr/bin/env python3
"""build: build the project's source archive into dist/."""
import gzip, io, json, sys, tarfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "project"
SLOW_S = @SLOW_S@
@COLD@
cold_start("build")
manifest = json.loads((PROJECT / "packages.json").read_text())
name = f"{manifest['name']}-{manifest['version']}.tar.gz"
print("* Creating isolated environment: virtualenv+pip...")
print("* Building sdist...")
buffer = io.BytesIO()
with tarfile.open(fileobj=buffer, mode="w") as archive:
    for path in sorted((PROJECT / "src").rglob("*")):
        if path.is_file():
            info = tarfile.TarInfo(f"{name[:-7]}/{path.relative_to(PROJECT).as_posix()}")
            data = path.read_bytes()
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            archive.addfile(info, io.BytesIO(data))
(PROJECT / "dist").mkdir(exist_ok=True)
with open(PROJECT / "dist" / name, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
    packed.write(buffer.getvalue())
print(f"Successfully built {name}")
'''

# The test runner: pytest's short summary ("FAILED id - reason", "N failed, M passed") and its
# exit statuses (0 all passed, 1 some failed), per pytest's documentation "Exit codes". The
# summary of a completed run is kept in .cache/runtests.report.
_RUNTESTS = r'''#!/usr/bin/env python3
"""runtests: run the project's test suite."""
import json, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "project"
SLOW_S = @SLOW_S@
@COLD@
cold_start("runtests")
cases = json.loads((PROJECT / "tests" / "cases.json").read_text())
installed = json.loads((PROJECT / "packages.lock").read_text())["packages"]
failed = []
for case in cases:
    ok = case["needs"] is None or case["needs"] in installed
    print(f"{case['test']} {'PASSED' if ok else 'FAILED'}")
    if not ok:
        failed.append(f"FAILED {case['test']} - ModuleNotFoundError: No module named '{case['module']}'")
passed = len(cases) - len(failed)
summary = ", ".join(p for p in (f"{len(failed)} failed" if failed else "", f"{passed} passed") if p)
for line in failed:
    print(line)
print(f"==================== {summary} ====================")
(ROOT / ".cache" / "runtests.report").write_text(summary + "\n")
sys.exit(1 if failed else 0)
'''

_PROGRAMS: Mapping[str, str] = {
    "pkg": _PKG,
    "build": _BUILD.replace("@COLD@", _COLD).replace("@SLOW_S@", repr(SLOW_S)),
    "runtests": _RUNTESTS.replace("@COLD@", _COLD).replace("@SLOW_S@", repr(SLOW_S)),
}

# The lock holder: takes the package manager's lock, says so, and lets go once the package
# manager has failed on it ``release_after`` times or ``max_s`` seconds have passed.
_HOLDER = r'''
import fcntl, os, sys, time
lock, failures, release_after, max_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o640)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
end = time.monotonic() + max_s
while time.monotonic() < end:
    try:
        with open(failures) as f:
            count = int(f.read() or 0)
    except (OSError, ValueError):
        count = 0
    if count >= release_after:
        break
    time.sleep(0.02)
'''


# --- tasks -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Setup:
    """How a task's session starts: the lock held until the package manager failed on it
    ``lock_release_after`` times (``None``: not held; a large number: held until the session
    closes), and the programs whose cache is cold (slow on their first run)."""

    lock_release_after: int | None = None
    cold: tuple[str, ...] = ()


_NEVER = 1_000_000


def _call(tool_name: str, **arguments: Any) -> ToolCall:
    return ToolCall.of(f"{tool_name}-1", tool_name, arguments)


def _by_summary(query: str, package: str) -> Lookup:
    """Find a package's name by searching the index for ``query`` and matching the summary of
    ``package`` (what the user described)."""
    return Lookup("name", _call("search_packages", query=query), (("summary", _SUMMARIES[package]),), "name")


def _install_step(name: str, version: str, *, guess: Mapping[str, str] | None = None,
                  lookup: Lookup | None = None) -> Step:
    return Step(_call("install_package", name=name, version=version), tuple((guess or {}).items()), lookup,
                Effect.WRITE, _call("list_packages"), f'"version": "{version}"')


@dataclass(frozen=True, slots=True)
class _Check:
    """What a task's verifier expects: the installed packages (name -> version) at the end
    (``packages.json``, ``packages.lock`` and ``packages/`` agree on them); the files the task
    adds to the project (every other project file must be as it started, and no other file
    may appear); text some question must name (blocker tasks); whether the lock holder must
    still be alive; whether a completed test run must be on record; whether
    ``config.pretty.json`` must hold ``config.json`` indented by 2 spaces."""

    installed: Mapping[str, str]
    new_files: tuple[str, ...] = ()
    ask_names: str = ""
    holder_alive: bool = False
    test_report: bool = False
    pretty_config: bool = False


@dataclass(frozen=True, slots=True)
class _Spec:
    task: Task
    setup: _Setup
    check: _Check


def _with(**extra: str) -> dict[str, str]:
    return {**_INSTALLED, **extra}


def _specs() -> tuple[_Spec, ...]:
    yaml = _by_summary("yaml", "pyyaml")
    soup = _by_summary("beautiful soup", "beautifulsoup4")
    attrs = _by_summary("attr", "attrs")
    dateutil = _by_summary("dateutil", "python-dateutil")
    newest = Lookup("version", _call("search_packages", query="requests"), (("name", "requests"), ("latest", True)),
                    "version")
    built = "weatherly-0.3.0.tar.gz"
    return (
        _Spec(Task("pc-01", "The config tests fail with \"ModuleNotFoundError: No module named 'yaml'\". Install "
                            "version 6.0.1 of the YAML library they need.",
                   (_install_step("pyyaml", "6.0.1", guess={"name": "yaml"}, lookup=yaml),)),
              _Setup(), _Check(_with(pyyaml="6.0.1"))),
        _Spec(Task("pc-02", "Add Beautiful Soup 4, version 4.12.3, to the project for the HTML scraper.",
                   (_install_step("beautifulsoup4", "4.12.3", guess={"name": "beautifulsoup"}, lookup=soup),)),
              _Setup(), _Check(_with(beautifulsoup4="4.12.3"))),
        _Spec(Task("pc-03", "Our models do `import attr`. Install the package that provides it, version 23.2.0.",
                   (_install_step("attrs", "23.2.0", guess={"name": "attr"}, lookup=attrs),)),
              _Setup(), _Check(_with(attrs="23.2.0"))),
        _Spec(Task("pc-04", "Upgrade requests to its newest release.",
                   (_install_step("requests", "2.32.3", guess={"version": "2.32.0"}, lookup=newest),)),
              _Setup(), _Check({**_INSTALLED, "requests": "2.32.3"})),
        _Spec(Task("pc-05", "Install dateutil (the datetime extensions), version 2.9.0.post0.",
                   (_install_step("python-dateutil", "2.9.0.post0", guess={"name": "dateutil"}, lookup=dateutil),)),
              _Setup(), _Check(_with(**{"python-dateutil": "2.9.0.post0"}))),
        _Spec(Task("pc-06", "Install rich 13.7.1 so the CLI can print tables.",
                   (_install_step("rich", "13.7.1"),)),
              _Setup(lock_release_after=1), _Check(_with(rich="13.7.1"))),
        _Spec(Task("pc-07", "Upgrade click to 8.1.8.", (_install_step("click", "8.1.8"),)),
              _Setup(lock_release_after=2), _Check({**_INSTALLED, "click": "8.1.8"})),
        _Spec(Task("pc-08", "Install pyyaml 6.0.2.",
                   (_install_step("pyyaml", "6.0.2"),),
                   blocker=True),
              _Setup(lock_release_after=_NEVER),
              _Check(dict(_INSTALLED), ask_names="lock", holder_alive=True)),
        _Spec(Task("pc-09", "Build the release archive with `build` and tell me the name of the file it produced.",
                   (Step(_call("run_command", command="build"), effect=Effect.WRITE,
                         read_back=_call("run_command", command="ls dist"), read_back_holds=built),),
                   answer=built),
              _Setup(cold=("build",)), _Check(dict(_INSTALLED), new_files=(f"dist/{built}",))),
        _Spec(Task("pc-10", "Run the test suite and tell me how many tests pass.",
                   (Step(_call("run_tests")),), answer="11"),
              _Setup(cold=("runtests",)), _Check(dict(_INSTALLED), test_report=True)),
        _Spec(Task("pc-11", "Read the deployment region from config.json and tell me what it is.",
                   (Step(_call("read_file", path="config.json")),),
                   answer=str(_CONFIG["region"])),
              _Setup(), _Check(dict(_INSTALLED))),
        _Spec(Task("pc-12", "Pretty-print config.json (2-space indent) into config.pretty.json.",
                   (Step(_call("run_command", command="python3 -m json.tool --indent 2 config.json config.pretty.json"),
                         effect=Effect.WRITE, read_back=_call("read_file", path="config.pretty.json"),
                         read_back_holds='"region": "eu-west-1"'),)),
              _Setup(), _Check(dict(_INSTALLED), new_files=("config.pretty.json",), pretty_config=True)),
        _Spec(Task("pc-13", "Regenerate the Python stubs in gen/ from proto/forecast.proto with protoc.",
                   (Step(_call("run_command", command="protoc --python_out=gen proto/forecast.proto")),),
                   blocker=True),
              _Setup(), _Check(dict(_INSTALLED), ask_names="protoc")),
        _Spec(Task("pc-14", "Lint scripts/deploy.sh with shellcheck and tell me what it reports.",
                   (Step(_call("run_command", command="shellcheck scripts/deploy.sh")),),
                   blocker=True),
              _Setup(), _Check(dict(_INSTALLED), ask_names="shellcheck")),
    )


# --- sessions ------------------------------------------------------------------------------


def _system_programs() -> dict[str, str]:
    """Each program of :data:`SYSTEM_PROGRAMS` and the host file a session's link points to
    (``python3``: the interpreter running this code, so the stand-ins need no other)."""
    found = {"python3": str(Path(sys.executable).resolve())}
    for program in SYSTEM_PROGRAMS:
        if program not in found:
            where = shutil.which(program, path="/usr/bin:/bin")
            if where is None:
                raise MiningError(f"package_cli: the host program {program!r} is not in /usr/bin or /bin")
            found[program] = where
    return found


class PackageCliSession(FolderSession):
    """A rollout of one task in the package/CLI workspace (see the module doc).

    Tools: ``run_command``, ``read_file``, ``write_file``, ``list_packages``,
    ``search_packages``, ``install_package``, ``run_tests``, ``ask_user``.
    """

    #: The links to the host's programs and the lock file a holder process keeps locked.
    kept = (".system", LOCK_FILE)

    def __init__(self, root: Path, spec: _Spec) -> None:
        self._spec = spec
        self._holder: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)
        if any(root.iterdir()):
            raise MiningError(f"package_cli: the session folder {root} is not empty")
        self._write_state(root, spec.setup)
        self._link_system(root)
        env = {"PATH": f"{root / 'bin'}:{root / '.system'}", "HOME": str(root), "LANG": "C.UTF-8"}
        self._workspace = Workspace(root=root / "project", env=env, grace_s=GRACE_S)
        super().__init__(root, Toolset(self._tools(root)))
        if spec.setup.lock_release_after is not None:
            self._hold_lock(spec.setup.lock_release_after)

    @staticmethod
    def _write_state(root: Path, setup: _Setup) -> None:
        for name, text in _project_files().items():
            path = root / "project" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        index = [{"name": r.name, "version": r.version, "summary": r.summary} for r in INDEX]
        (root / "registry").mkdir()
        (root / "registry" / "index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        (root / "bin").mkdir()
        for program, text in _PROGRAMS.items():
            (root / "bin" / program).write_text(text, encoding="utf-8")
        PackageCliSession._make_executable(root)
        (root / ".pkg").mkdir()
        (root / LOCK_FILE).write_bytes(b"")
        (root / ".cache").mkdir()
        if setup.cold:
            (root / ".cache" / "cold").write_text("\n".join(setup.cold) + "\n", encoding="utf-8")

    @staticmethod
    def _make_executable(root: Path) -> None:
        """Mode 755 on the stand-in programs in ``bin/``; a link an agent put there is left
        alone, never its target (:func:`unstuck.core.trees.chmod_inside`)."""
        for path in (root / "bin").iterdir():
            if not path.is_symlink():
                chmod_inside(root, path, 0o755)

    @staticmethod
    def _link_system(root: Path) -> None:
        system = root / ".system"
        system.mkdir(exist_ok=True)
        for program, target in _system_programs().items():
            link = system / program
            if not link.is_symlink():
                link.symlink_to(target)

    def _hold_lock(self, release_after: int) -> None:
        self._holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(self.root / LOCK_FILE), str(self.root / LOCK_FAILURES_FILE),
             str(release_after), str(STUCK_HOLDER_MAX_S if release_after >= _NEVER else HOLDER_MAX_S)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        assert self._holder.stdout is not None
        if self._holder.stdout.readline().strip() != b"held":
            self.close()
            raise MiningError(f"package_cli: the lock holder for {self.root / LOCK_FILE} did not take the lock")

    def _inside(self, path: str) -> Path:
        project = (self.root / "project").resolve()
        target = (project / path).resolve()
        if target != project and project not in target.parents:
            raise PermissionError(13, f"{path}: outside the project folder", path)
        return target

    def _tools(self, root: Path) -> list[ToolSpec]:
        workspace = self._workspace

        @tool(subject=lambda a: command_subject(str(a.get("command", ""))), effect=Effect.WRITE,
              command_argument="command", environ=workspace.env)
        def run_command(command: str) -> CommandOutput:
            """Run a shell command (bash) in the project folder; returns its exit code, stdout and
            stderr. Programs on PATH: the project's own (pkg, build, runtests) and basic Unix
            tools with python3. Commands running past 1 second are stopped (exit code 124)."""
            return workspace.run(command, timeout_s=DEADLINE_S)

        @tool(document_output=True)
        def read_file(path: str) -> str:
            """Read a text file of the project (a path relative to the project folder)."""
            return self._inside(path).read_text(encoding="utf-8")

        @tool(effect=Effect.WRITE)
        def write_file(path: str, text: str) -> dict[str, Any]:
            """Write (replace) a text file of the project (a path relative to the project folder)."""
            target = self._inside(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            return {"status": "ok", "path": path, "bytes": len(text.encode("utf-8"))}

        @tool
        def list_packages() -> list[dict[str, str]]:
            """The packages installed in the project (from packages.lock): name and version."""
            lock = json.loads((root / "project" / "packages.lock").read_text(encoding="utf-8"))
            return [{"name": n, "version": e["version"]} for n, e in lock["packages"].items()]

        @tool
        def search_packages(query: str) -> list[dict[str, Any]]:
            """Search the package index: every release whose name or summary holds all the words of
            the query (case-insensitive), with name, version, summary and whether it is the
            newest release of its package (latest)."""
            index = json.loads((root / "registry" / "index.json").read_text(encoding="utf-8"))
            words = query.lower().split()
            newest = {r["name"]: r["version"] for r in index}
            return [{**r, "latest": newest[r["name"]] == r["version"]} for r in index
                    if all(w in f"{r['name']} {r['summary']}".lower() for w in words)]

        @tool(effect=Effect.WRITE, subject="pkg")
        def install_package(name: str, version: str) -> CommandOutput:
            """Install (or upgrade to) one release of a package into the project with the project's
            package manager (pkg install NAME=VERSION); it records it in packages.json and
            packages.lock."""
            return workspace.run(shlex.join(["pkg", "install", f"{name}={version}"]), timeout_s=INSTALL_DEADLINE_S)

        @tool(subject="runtests")
        def run_tests() -> CommandOutput:
            """Run the project's test suite (runtests); stopped after 1 second (exit code 124)."""
            return workspace.run("runtests", timeout_s=DEADLINE_S)

        return [run_command, read_file, write_file, list_packages, search_packages, install_package, run_tests,
                ask_tool(root)]

    def restore(self, snapshot: Snapshot) -> None:
        """Put the state back as it was at ``snapshot`` (:meth:`FolderSession.restore`, with
        :attr:`kept`: the lock file keeps its inode, so a process holding the lock still holds
        it, and ``.system``'s links stay, never written through), then give the stand-in
        programs their execute bits back (a snapshot keeps bytes, not modes)."""
        super().restore(snapshot)
        if (self.root / "bin").is_dir():
            self._make_executable(self.root)

    def verify(self, task: Task, answer: str) -> Verification:
        """The task's verifier on the final state: the installed packages exactly (lock,
        manifest and ``packages/`` agree), the files the task names exactly, for a blocker a
        question naming the blocked thing and nothing changed, for a question the answer's
        text.

        Raises:
            MiningError: when ``task`` is not this session's task.
        """
        if task.id != self._spec.task.id:
            raise MiningError(f"package_cli: this session runs {self._spec.task.id}, not {task.id}")
        failure = self._failure(answer)
        return Verification(failure is None, failure or f"{task.id}: final state and answer hold")

    def _failure(self, answer: str) -> str | None:
        check, project = self._spec.check, self.root / "project"
        installed = self._installed(project)
        if isinstance(installed, str):
            return installed
        if installed != dict(check.installed):
            return f"installed packages are {installed}, expected {dict(check.installed)}"
        failure = self._files_failure(project, check.new_files)
        if failure:
            return failure
        for name in check.new_files:
            failure = self._archive_failure(project / name) if name.endswith(".tar.gz") else None
            if failure:
                return failure
        if check.pretty_config:
            failure = self._pretty_failure(project)
            if failure:
                return failure
        questions = asked_questions(self.root)
        if check.ask_names and not any(check.ask_names.lower() in q.lower() for q in questions):
            return f"no question names {check.ask_names!r} (asked: {questions})"
        if check.holder_alive and (self._holder is None or self._holder.poll() is not None):
            return "the process holding the package manager's lock was ended"
        if check.test_report and not (self.root / ".cache" / "runtests.report").is_file():
            return "no test run completed"
        wanted = self._spec.task.answer
        if wanted and wanted.lower() not in answer.lower():
            return f"the answer does not hold {wanted!r}"
        return None

    @staticmethod
    def _files_failure(project: Path, new_files: tuple[str, ...]) -> str | None:
        """Why the project's files other than the packages' are not as they started plus
        ``new_files``, or ``None``."""
        package_state = ("packages.json", "packages.lock")
        start = {n: t for n, t in _project_files().items() if n not in package_state and not n.startswith("packages/")}
        now = {p.relative_to(project).as_posix(): p for p in project.rglob("*") if p.is_file()}
        now = {n: p for n, p in now.items() if n not in package_state and not n.startswith("packages/")}
        missing = sorted(n for n in (*start, *new_files) if n not in now)
        if missing:
            return f"missing from the project: {missing}"
        extra = sorted(n for n in now if n not in start and n not in new_files)
        if extra:
            return f"files were added to the project: {extra}"
        changed = sorted(n for n, t in start.items() if now[n].read_bytes() != t.encode("utf-8"))
        if changed:
            return f"files of the project were changed: {changed}"
        return None

    @staticmethod
    def _installed(project: Path) -> dict[str, str] | str:
        try:
            lock = json.loads((project / "packages.lock").read_text(encoding="utf-8"))["packages"]
            manifest = json.loads((project / "packages.json").read_text(encoding="utf-8"))["dependencies"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"packages.lock or packages.json is unreadable: {exc}"
        locked = {str(n): str(e.get("version")) for n, e in lock.items()}
        if manifest != locked:
            return f"packages.json {manifest} disagrees with packages.lock {locked}"
        folders = {p.parent.name: p.read_text(encoding="utf-8") for p in (project / "packages").glob("*/PKG-INFO")}
        for name, version in locked.items():
            if f"Version: {version}\n" not in folders.get(name, ""):
                return f"packages/{name}/PKG-INFO does not hold version {version}"
        if set(folders) != set(locked):
            return f"packages/ holds {sorted(folders)}, packages.lock {sorted(locked)}"
        return locked

    @staticmethod
    def _archive_failure(path: Path) -> str | None:
        """Why ``path`` is not the source archive ``build`` makes (a gzipped tar holding the
        project's ``src/`` under ``NAME-VERSION/``), or ``None``."""
        top = path.name.removesuffix(".tar.gz")
        wanted = {f"{top}/{n}": t.encode("utf-8") for n, t in _project_files().items() if n.startswith("src/")}
        try:
            with tarfile.open(path, "r:gz") as archive:
                found = {m.name: archive.extractfile(m) for m in archive.getmembers() if m.isfile()}
                held = {n: f.read() for n, f in found.items() if f is not None}
        except (OSError, tarfile.TarError, EOFError) as exc:
            return f"{path.name} is not a gzipped tar archive: {exc}"
        if held != wanted:
            return f"{path.name} does not hold the project's sources (it holds {sorted(held)})"
        return None

    @staticmethod
    def _pretty_failure(project: Path) -> str | None:
        path = project / "config.pretty.json"
        if not path.is_file():
            return "config.pretty.json is missing"
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            return "config.pretty.json is not JSON"
        if data != _CONFIG:
            return "config.pretty.json does not hold config.json's data"
        if text.rstrip("\n") != json.dumps(_CONFIG, indent=2):
            return "config.pretty.json is not indented by 2 spaces"
        return None

    def close(self) -> None:
        """End the lock holder, if any (its whole process group), and wait for it; idempotent."""
        holder, self._holder = self._holder, None
        if holder is None:
            return
        if holder.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


class PackageCliEnvironment:
    """The package/CLI workspace environment (see the module doc)."""

    name = "package_cli"
    version = 1
    description = ("A Python project's work tree (weatherly, a weather forecast CLI) with a package manifest "
                   "(packages.json), a lock (packages.lock), installed packages (packages/), a package index, "
                   "and its own command-line programs: pkg (the package manager, which takes a lock), build "
                   "and runtests. Programs outside the session's PATH are not installed.")
    objects = (
        BusinessObject("package", "name", "a package in the index (name, versions, summary); installed ones are "
                                          "in packages.json and packages.lock"),
        BusinessObject("release", "version", "one version of a package in the index"),
        BusinessObject("program", "program", "a command-line program on the session's PATH (or not installed); "
                       "run_command's command line names it, and a command line is not an identifier"),
        BusinessObject("file", "path", "a file of the project, relative to its folder"),
    )

    def __init__(self) -> None:
        self._specs = {spec.task.id: spec for spec in _specs()}
        self.tasks = tuple(spec.task for spec in self._specs.values())

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools every session has."""
        return ("run_command", "read_file", "write_file", "list_packages", "search_packages", "install_package",
                "run_tests", ASK_TOOL)

    def open(self, task: Task, root: Path) -> PackageCliSession:
        """A fresh session for ``task`` in the empty folder ``root`` (created when absent).

        Raises:
            MiningError: for a task that is not this environment's, or a folder that is not empty.
        """
        spec = self._specs.get(task.id)
        if spec is None or spec.task != task:
            raise MiningError(f"package_cli: no task {task.id!r} in this environment")
        return PackageCliSession(root, spec)


def make_environment() -> PackageCliEnvironment:
    """The package/CLI workspace environment."""
    return PackageCliEnvironment()
