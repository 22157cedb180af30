"""The session-wide check of tests/host_guard.py fails a session that changed a program on
PATH or the real home, and passes one that changed neither (each in a pytest session of its
own, a subprocess)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import host_guard

TESTS = Path(__file__).resolve().parent


def _session(pytester: pytest.Pytester, body: str, *, path: Path, home: Path) -> pytest.RunResult:
    """Run ``body`` as a test file in a pytest session of its own with host_guard loaded,
    ``path`` first on PATH and ``home`` as its real home."""
    pytester.makepyfile(test_inner=body)
    home.mkdir(parents=True, exist_ok=True)
    python_path = os.pathsep.join(filter(None, (str(TESTS), os.environ.get("PYTHONPATH"))))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{path}{os.pathsep}{os.environ['PATH']}")
        patch.setenv("HOME", str(home))
        patch.setenv("PYTHONPATH", python_path)
        # the inner session needs host_guard alone: the plugins installed for the whole suite
        # (pytest's entry points: hypothesis, langsmith, ...) take seconds to import each time
        patch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        return pytester.runpytest_subprocess("-p", "host_guard", "-p", "no:cacheprovider")


@pytest.fixture
def program_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "made-by-the-test"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    return folder


def test_a_session_that_changes_a_programs_mode_on_path_fails(pytester: pytest.Pytester, program_folder: Path,
                                                                tmp_path: Path) -> None:
    program = program_folder / "made-by-the-test"
    result = _session(pytester, f"import os\ndef test_x():\n    os.chmod({str(program)!r}, 0o700)\n",
                      path=program_folder, home=tmp_path / "home")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*the tests changed the machine outside their sandboxes*",
                                 f"mode/owner: {program}: -rwxr-xr-x 0:0 -> -rwx------ *"
                                 if os.geteuid() == 0 else f"mode/owner: {program}: -rwxr-xr-x*"])


def test_a_session_that_changes_what_a_link_on_path_points_to_fails(pytester: pytest.Pytester, tmp_path: Path) -> None:
    outside = tmp_path / "real-program"
    outside.write_text("#!/bin/sh\n")
    outside.chmod(0o755)
    folder = tmp_path / "links"
    folder.mkdir()
    (folder / "prog").symlink_to(outside)
    result = _session(pytester, f"import os\ndef test_x():\n    os.chmod({str(outside)!r}, 0o700)\n",
                      path=folder, home=tmp_path / "home")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"mode/owner: {folder / 'prog'} -> {outside}: *"])


def test_a_session_that_writes_the_real_home_fails_and_tests_see_a_temporary_home(
        pytester: pytest.Pytester, program_folder: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)  # the folder exists: the session makes one in it
    body = ("import os, host_guard\n"
            "def test_x():\n"
            f"    assert os.environ['HOME'] != {str(home)!r}\n"
            f"    assert os.environ['XDG_CONFIG_HOME'].startswith(os.environ['HOME'])\n"
            f"    assert str(host_guard.real_home()) == {str(home)!r}\n"
            "    (host_guard.real_home() / '.config' / 'unstuck').mkdir()\n")
    result = _session(pytester, body, path=program_folder, home=home)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"made: {home / '.config' / 'unstuck'}"])
    result.assert_outcomes(passed=1)  # the test itself passed: the session failed on what it left


def test_a_session_that_leaves_path_and_home_alone_passes(pytester: pytest.Pytester, program_folder: Path,
                                                           tmp_path: Path) -> None:
    body = ("import os, pathlib\n"
            "def test_x():\n"
            "    pathlib.Path(os.environ['HOME'], '.bashrc').write_text('# the temporary home is the tests own')\n")
    result = _session(pytester, body, path=program_folder, home=tmp_path / "home")
    assert result.ret == pytest.ExitCode.OK
    assert stat.S_IMODE((program_folder / "made-by-the-test").stat().st_mode) == 0o755


def test_this_session_runs_in_a_temporary_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    real = host_guard.real_home()
    assert Path(os.environ["HOME"]) != real
    # the session's temporary home, or the test's own user data folder (conftest: one per test)
    data = Path(os.environ["XDG_DATA_HOME"])
    assert data.is_relative_to(os.environ["HOME"]) or data.is_relative_to(tmp_path_factory.getbasetemp())
    assert not data.is_relative_to(real)


def test_a_session_that_changes_a_programs_content_on_path_fails(pytester: pytest.Pytester, program_folder: Path,
                                                                   tmp_path: Path) -> None:
    program = program_folder / "made-by-the-test"
    result = _session(pytester, f"def test_x():\n    open({str(program)!r}, 'a').write('# patched\\n')\n",
                      path=program_folder, home=tmp_path / "home")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"changed: {program}"])
