"""A program missing from PATH may still be on disk: real directories, real executables, a fake
HOME; nothing is run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from unstuck.commands.installed import MAX_OPT_DIRS, OFF_PATH_DIRS, locate_off_path


def executable(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(mode)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_a_program_in_the_users_local_bin_is_found_when_path_lacks_it(home: Path) -> None:
    tool = executable(home / ".local" / "bin" / "mytool")
    assert locate_off_path("mytool", "/usr/bin:/bin", str(home), roots=["~/.local/bin"]) == str(tool)


def test_a_program_path_already_reaches_is_not_off_path(home: Path) -> None:
    executable(home / ".local" / "bin" / "mytool")
    other = executable(home / "bin" / "mytool")
    path_env = f"/usr/bin:{other.parent}"
    assert locate_off_path("mytool", path_env, str(home), roots=["~/.local/bin"]) is None


def test_a_directory_on_path_under_another_name_is_not_looked_at_again(home: Path, tmp_path: Path) -> None:
    executable(home / ".local" / "bin" / "mytool")
    alias = tmp_path / "alias"
    alias.symlink_to(home / ".local" / "bin")
    # PATH holds the same directory through a symlink: the program is on PATH, not off it
    assert locate_off_path("mytool", str(alias), str(home), roots=["~/.local/bin"]) is None


def test_only_an_executable_regular_file_counts(home: Path) -> None:
    executable(home / ".local" / "bin" / "plain", mode=0o644)
    (home / ".local" / "bin" / "adir").mkdir()
    assert locate_off_path("plain", "/usr/bin", str(home), roots=["~/.local/bin"]) is None
    assert locate_off_path("adir", "/usr/bin", str(home), roots=["~/.local/bin"]) is None


def test_a_symlink_to_an_executable_counts_and_a_dangling_one_does_not(home: Path, tmp_path: Path) -> None:
    target = executable(tmp_path / "store" / "real-tool")
    link = home / ".local" / "bin" / "linked"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    (home / ".local" / "bin" / "dangling").symlink_to(tmp_path / "nothing")
    assert locate_off_path("linked", "/usr/bin", str(home), roots=["~/.local/bin"]) == str(link)
    assert locate_off_path("dangling", "/usr/bin", str(home), roots=["~/.local/bin"]) is None


def test_an_add_on_package_under_opt_is_found_through_the_glob(tmp_path: Path) -> None:
    opt = tmp_path / "opt"
    executable(opt / "zzz" / "bin" / "other")
    tool = executable(opt / "vendor-tool" / "bin" / "vendortool")
    roots = [f"{opt}/*/bin"]
    assert locate_off_path("vendortool", "/usr/bin", None, roots=roots) == str(tool)


def test_the_opt_glob_is_bounded(tmp_path: Path) -> None:
    opt = tmp_path / "opt"
    for n in range(MAX_OPT_DIRS):
        (opt / f"a{n:03d}").mkdir(parents=True)
    executable(opt / "zzz-last" / "bin" / "late")  # past the bound in name order
    assert locate_off_path("late", "/usr/bin", None, roots=[f"{opt}/*/bin"]) is None


def test_places_are_tried_in_order_and_home_places_need_a_home(home: Path, tmp_path: Path) -> None:
    first = executable(tmp_path / "first" / "dup")
    executable(home / ".local" / "bin" / "dup")
    assert locate_off_path("dup", "/usr/bin", str(home), roots=[str(tmp_path / "first"), "~/.local/bin"]) == str(first)
    only_home = executable(home / ".local" / "bin" / "homeonly")
    assert locate_off_path("homeonly", "/usr/bin", None, roots=["~/.local/bin"]) is None
    assert locate_off_path("homeonly", "/usr/bin", str(home), roots=["~/.local/bin"]) == str(only_home)


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "..", "gh; rm -rf /", "two words"])
def test_a_name_that_is_not_a_program_name_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a program name"):
        locate_off_path(bad, "/usr/bin", None)


def test_the_default_places_each_name_their_source_and_include_the_common_ones() -> None:
    paths = [entry.path for entry in OFF_PATH_DIRS]
    assert all(entry.source for entry in OFF_PATH_DIRS)
    for expected in ("/usr/local/bin", "/usr/sbin", "~/.local/bin", "~/.cargo/bin", "~/go/bin", "/snap/bin",
                     "/opt/*/bin"):
        assert expected in paths


def test_the_default_places_find_a_program_in_a_fake_homes_cargo_bin(home: Path) -> None:
    tool = executable(home / ".cargo" / "bin" / "unstuck-test-cargo-tool")
    assert locate_off_path("unstuck-test-cargo-tool", os.defpath, str(home)) == str(tool)


def test_a_path_directory_written_with_a_trailing_slash_or_twice_still_reaches_the_program(home: Path) -> None:
    executable(home / ".local" / "bin" / "mytool")
    on_path = executable(home / "bin" / "mytool").parent
    assert locate_off_path("mytool", f"/usr/bin:{on_path}/:{on_path}/", str(home), roots=["~/.local/bin"]) is None
    assert locate_off_path("mytool", f"{on_path}:{on_path}", str(home), roots=["~/.local/bin"]) is None


def test_a_program_added_to_a_path_directory_is_seen_at_the_next_look(home: Path, tmp_path: Path) -> None:
    off = executable(home / ".local" / "bin" / "mytool")
    on_path = tmp_path / "on-path"
    on_path.mkdir()
    path_env = f"/usr/bin:{on_path}"
    assert locate_off_path("mytool", path_env, str(home), roots=["~/.local/bin"]) == str(off)
    executable(on_path / "mytool")  # the same PATH text, a directory that changed: looked at again
    assert locate_off_path("mytool", path_env, str(home), roots=["~/.local/bin"]) is None
    (on_path / "mytool").unlink()
    assert locate_off_path("mytool", path_env, str(home), roots=["~/.local/bin"]) == str(off)


def test_a_directory_on_path_named_like_the_program_does_not_reach_it(home: Path, tmp_path: Path) -> None:
    off = executable(home / ".local" / "bin" / "mytool")
    (tmp_path / "on-path" / "mytool").mkdir(parents=True)  # searchable (x bit), but no program
    path_env = str(tmp_path / "on-path")
    assert locate_off_path("mytool", path_env, str(home), roots=["~/.local/bin"]) == str(off)
