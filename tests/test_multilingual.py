"""The same failure, produced by the real program on this machine in English, German, French,
Spanish and Chinese, is recognised by the same message row in every one of them.

Each scenario runs a real program (coreutils, bash, git, apt) in a real failure state under
``LANG=C.UTF-8 LANGUAGE=<lang>``; the row's patterns (:func:`unstuck.recognise.catalogues.patterns_for`
over what :func:`unstuck.recognise.catalogues.harvest` reads from this machine's catalogues) must match
what it printed, name the same subject, and, in a language other than English, match where the
English msgid alone does not (the program really spoke that language). A language whose
catalogue is not installed here is skipped.

The classify-level tests feed the same output to :func:`unstuck.recognise.classify.classify_output` and
expect the kind the deciding row gives in English.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import re2

from conftest import bare_env
from unstuck.recognise.catalogues import (
    DEFAULT_LOCALE_DIRS,
    MessageRow,
    Translation,
    catalogue_files,
    harvest,
    load_message_rows,
    patterns_for,
)

LANGUAGES = ("en", "de", "fr", "es", "zh_CN")
LOCALE = DEFAULT_LOCALE_DIRS[0]
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


@dataclass(frozen=True)
class Expect:
    """A row the output must match, and the subject it must name (``None``: not checked)."""

    domain: str
    msgid: str
    subject: str | None = None


@dataclass(frozen=True)
class Run:
    """The call, and a file to hold a POSIX record lock on while it runs (as another apt would)."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    hold_lock: Path | None = None


@dataclass(frozen=True)
class Printed:
    output: str
    exit_code: int


@dataclass(frozen=True)
class Scenario:
    """A real program in a real failure state.

    ``setup`` prepares the state in a fresh directory and returns the call and what it must
    match; ``decides`` is the row whose verdict the whole output carries (``harmless`` rows:
    nothing failed).
    """

    name: str
    setup: Callable[[Path], tuple[Run, tuple[Expect, ...]]]
    decides: tuple[str, str]
    needs_root: bool = False
    needs: tuple[str, ...] = ()


def _missing_path(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    missing = tmp / "no such dir" / "input.csv"
    return Run(("ls", str(missing)), tmp), (
        Expect("coreutils", "cannot access %s", str(missing)),
        Expect("libc", "No such file or directory"),
    )


def _cat_missing(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    return Run(("cat", str(tmp / "absent.txt")), tmp), (Expect("libc", "No such file or directory"),)


def _cat_unreadable(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    secret = tmp / "secret.txt"
    secret.write_text("not for nobody\n")
    secret.chmod(0o000)
    return Run((*NOBODY, "cat", str(secret)), tmp), (Expect("libc", "Permission denied"),)


def _missing_command(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    return Run(("bash", "-c", "unstuck-no-such-tool --version"), tmp), (
        Expect("bash", "%s: command not found", "unstuck-no-such-tool"),)


def _git_outside_a_repository(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    work = tmp / "plain"
    work.mkdir()
    return Run(("git", "status"), work, {"GIT_CEILING_DIRECTORIES": str(tmp)}), (
        Expect("git", "not a git repository (or any of the parent directories): %s"),)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args), cwd=cwd, env=_env("en", cwd),
                   check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)


def _dubious_ownership(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    repo = tmp / "theirs"
    repo.mkdir()
    _git(repo, "init", "-q")
    for path in (repo, *repo.rglob("*")):
        os.chown(path, 65534, 65534, follow_symlinks=False)
    return Run(("git", "status"), repo), (
        Expect("git", "detected dubious ownership in repository at '%s'\n%sTo add an exception for this directory, "
                      "call:\n\n\tgit config --global --add safe.directory %s", str(repo)),)


def _push_rejected(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    remote = tmp / "remote.git"
    _git(tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    for clone in ("ahead", "behind"):
        _git(tmp, "clone", "-q", str(remote), clone)
    _git(tmp / "ahead", "commit", "-q", "--allow-empty", "-m", "theirs")
    _git(tmp / "ahead", "push", "-q", "origin", "HEAD:main")
    _git(tmp / "behind", "commit", "-q", "--allow-empty", "-m", "ours")
    return Run(("git", "push", "origin", "HEAD:main"), tmp / "behind"), (
        Expect("git", "failed to push some refs to '%s'", str(remote)),
        Expect("git", "Updates were rejected because the remote contains work that you do\nnot have locally. This is "
                      "usually caused by another repository pushing\nto the same ref. You may want to first integrate "
                      "the remote changes\n(e.g., 'git pull ...') before pushing again.\nSee the 'Note about "
                      "fast-forwards' in 'git push --help' for details."),
    )


def _nothing_to_commit(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    repo = tmp / "clean"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    run = Run(("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-m", "again"), repo)
    return run, (Expect("git", "nothing to commit, working tree clean\n"),)


def _apt_admin_dir(tmp: Path) -> Path:
    admin = tmp / "dpkg"
    admin.mkdir()
    shutil.copy("/var/lib/dpkg/status", admin / "status")
    return admin


def _apt_lock_held(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    admin = _apt_admin_dir(tmp)
    lock = admin / "lock-frontend"
    return Run(("apt-get", "-o", f"Dir::State::status={admin / 'status'}", "remove", "-y", "unstuck-no-such-package"),
               tmp, hold_lock=lock), (
        Expect("libapt-pkg6.0", "Unable to acquire the dpkg frontend lock (%s), is another process using it?", str(lock)),)


def _apt_not_root(tmp: Path) -> tuple[Run, tuple[Expect, ...]]:
    return Run((*NOBODY, "apt-get", "remove", "-y", "unstuck-no-such-package"), tmp), (
        Expect("libapt-pkg6.0", "Unable to acquire the dpkg frontend lock (%s), are you root?",
               "/var/lib/dpkg/lock-frontend"),)


SCENARIOS = (
    Scenario("ls-missing-path", _missing_path, ("libc", "No such file or directory")),
    Scenario("cat-missing-path", _cat_missing, ("libc", "No such file or directory")),
    Scenario("cat-unreadable-as-nobody", _cat_unreadable, ("libc", "Permission denied"), needs_root=True,
             needs=("setpriv",)),
    Scenario("bash-missing-command", _missing_command, ("bash", "%s: command not found")),
    Scenario("git-outside-a-repository", _git_outside_a_repository,
             ("git", "not a git repository (or any of the parent directories): %s"), needs=("git",)),
    Scenario("git-dubious-ownership", _dubious_ownership,
             ("git", "detected dubious ownership in repository at '%s'\n%sTo add an exception for this directory, "
                     "call:\n\n\tgit config --global --add safe.directory %s"), needs_root=True, needs=("git",)),
    Scenario("git-push-rejected", _push_rejected, ("git", "failed to push some refs to '%s'"), needs=("git",)),
    Scenario("git-nothing-to-commit", _nothing_to_commit, ("git", "nothing to commit, working tree clean\n"),
             needs=("git",)),
    Scenario("apt-lock-held", _apt_lock_held,
             ("libapt-pkg6.0", "Unable to acquire the dpkg frontend lock (%s), is another process using it?"),
             needs_root=True, needs=("apt-get",)),
    Scenario("apt-not-root", _apt_not_root,
             ("libapt-pkg6.0", "Unable to acquire the dpkg frontend lock (%s), are you root?"),
             needs_root=True, needs=("apt-get", "setpriv")),
)


def _env(lang: str, home: Path) -> dict[str, str]:
    return bare_env(home=home, PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG="C.UTF-8",
                    LANGUAGE=lang, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, str], MessageRow]:
    return {(r.domain, r.msgid): r for r in load_message_rows()}


@pytest.fixture(scope="module")
def translations(rows: dict[tuple[str, str], MessageRow]) -> tuple[Translation, ...]:
    """What this machine's catalogues say for every bundled row (harvested once)."""
    return harvest(list(rows.values()), [LOCALE])


@pytest.fixture(scope="module")
def patterns(rows: dict[tuple[str, str], MessageRow],
             translations: tuple[Translation, ...]) -> Callable[[str, str], tuple[Any, ...]]:
    """A row's compiled patterns, English first (:func:`patterns_for`)."""
    compiled: dict[tuple[str, str], tuple[Any, ...]] = {}

    def of(domain: str, msgid: str) -> tuple[Any, ...]:
        if (domain, msgid) not in compiled:
            found = patterns_for(rows[(domain, msgid)], translations)
            compiled[(domain, msgid)] = tuple(re2.compile(p) for p in found)
        return compiled[(domain, msgid)]

    return of


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def held_lock() -> Iterator[Callable[[Path], None]]:
    """Holds a POSIX record lock (as apt's GetLock takes one) on a file for the test's length."""
    fds: list[int] = []

    def hold(path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fds.append(fd)

    yield hold
    for fd in fds:
        os.close(fd)


def _prepare(scenario: Scenario, tmp_path: Path) -> tuple[Run, tuple[Expect, ...]]:
    if scenario.needs_root and os.geteuid() != 0:
        pytest.skip("needs root (to act as another user or own another user's files)")
    for program in scenario.needs:
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed")
    if "apt-get" in scenario.needs and not Path("/var/lib/dpkg/status").is_file():
        pytest.skip("no dpkg status file to copy")
    work = tmp_path / "work"
    work.mkdir()
    return scenario.setup(work)


def _run(run: Run, lang: str, home: Path, hold: Callable[[Path], None]) -> Printed:
    env = _env(lang, home) | run.env
    if run.hold_lock is not None:
        hold(run.hold_lock)
    done = subprocess.run(run.argv, cwd=run.cwd, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    return Printed(done.stdout + done.stderr, done.returncode)


def _skip_untranslated(lang: str, expects: tuple[Expect, ...], translations: tuple[Translation, ...]) -> None:
    """Skip a language whose installed catalogues do not translate every expected message."""
    if lang == "en":
        return
    have = {(t.domain, t.msgid) for t in translations if t.lang == lang}
    for expect in expects:
        if (expect.domain, expect.msgid) not in have:
            where = "no catalogue" if not catalogue_files(LOCALE / lang, expect.domain) else "its catalogue lacks it"
            pytest.skip(f"{expect.domain} {expect.msgid[:40]!r} is not translated to {lang} here ({where})")


def _subject(found: Any) -> str | None:
    return next((g for g in found.groups() if g), None)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_same_failure_is_matched_by_the_same_row_in_every_language(
    scenario: Scenario, lang: str, tmp_path: Path, home: Path, held_lock: Callable[[Path], None],
    patterns: Callable[[str, str], tuple[Any, ...]], translations: tuple[Translation, ...],
) -> None:
    run, expects = _prepare(scenario, tmp_path)
    _skip_untranslated(lang, expects, translations)
    printed = _run(run, lang, home, held_lock)
    text = printed.output.lower()
    for expect in expects:
        compiled = patterns(expect.domain, expect.msgid)
        found = next((m for m in (p.search(text) for p in compiled) if m is not None), None)
        assert found is not None, f"{expect.msgid!r} not recognised in {lang}: {printed.output!r}"
        if expect.subject is not None:
            assert _subject(found) == expect.subject.lower()
        if lang != "en":
            english = compiled[0]
            assert english.search(text) is None, f"{lang} printed the English message: {printed.output!r}"


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_classifier_gives_the_english_kind_in_every_language(
    scenario: Scenario, lang: str, tmp_path: Path, home: Path, held_lock: Callable[[Path], None],
    rows: dict[tuple[str, str], MessageRow], translations: tuple[Translation, ...],
) -> None:
    from unstuck.recognise.classify import classify_output

    run, expects = _prepare(scenario, tmp_path)
    _skip_untranslated(lang, expects, translations)
    printed = _run(run, lang, home, held_lock)
    deciding = rows[scenario.decides]
    situation = classify_output("run_command", {}, printed.output, exit_code=printed.exit_code)
    if deciding.harmless:
        assert printed.exit_code != 0
        assert situation is None
        return
    assert situation is not None, printed.output
    assert situation.kind is deciding.kind, printed.output
    assert situation.retryable == deciding.retryable
    assert situation.interactive == deciding.interactive
