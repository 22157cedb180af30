"""The derived-data cache: a hit gives what a miss gives; a stale, damaged or foreign file is a
miss; an unwritable folder only costs the derivation."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from unstuck.core import cache
from unstuck.core.cache import (
    CACHE_DIR_ENV,
    bundled_document,
    cache_dir,
    data_bytes,
    digest_of,
    load_or_derive,
    load_or_derive_text,
)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _strings(raw: object) -> list[str] | None:
    return raw if isinstance(raw, list) and all(isinstance(x, str) for x in raw) else None


def test_cache_dir_is_the_environment_variable_else_the_platform_user_cache(tmp_path: Path) -> None:
    import platformdirs

    assert cache_dir({CACHE_DIR_ENV: str(tmp_path)}) == tmp_path
    assert cache_dir({}) == platformdirs.user_cache_path("unstuck")


def test_second_load_reads_the_file_instead_of_deriving(folder: Path) -> None:
    calls: list[int] = []

    def derive() -> list[str]:
        calls.append(1)
        return ["a", "b"]

    assert load_or_derive("entry", "k1", derive, _strings) == ["a", "b"]
    assert load_or_derive("entry", "k1", derive, _strings) == ["a", "b"]
    assert len(calls) == 1
    assert json.loads((folder / "entry.json").read_text()) == {"key": "k1", "value": ["a", "b"]}


def test_a_changed_key_is_a_miss_and_rewrites_the_file(folder: Path) -> None:
    load_or_derive("entry", "k1", lambda: ["old"], _strings)
    assert load_or_derive("entry", "k2", lambda: ["new"], _strings) == ["new"]
    assert json.loads((folder / "entry.json").read_text())["key"] == "k2"


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe", b'{"key": "k1", "value": [1, 2]}', b"[]",
                                  b'{"key": "k1"}', b"[" * 100_000])
def test_a_damaged_or_foreign_file_is_derived_again(folder: Path, body: bytes) -> None:
    folder.mkdir(parents=True)
    (folder / "entry.json").write_bytes(body)
    assert load_or_derive("entry", "k1", lambda: ["fresh"], _strings) == ["fresh"]
    assert load_or_derive("entry", "k1", lambda: ["other"], _strings) == ["fresh"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a mode 555 folder anyway")
def test_an_unwritable_folder_costs_only_the_derivation(folder: Path) -> None:
    folder.mkdir(parents=True)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert load_or_derive("entry", "k1", lambda: ["x"], _strings) == ["x"]
        assert not (folder / "entry.json").exists()
    finally:
        folder.chmod(stat.S_IRWXU)


def test_a_folder_that_is_a_file_costs_only_the_derivation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocker / "below"))
    assert load_or_derive("entry", "k1", lambda: ["x"], _strings) == ["x"]


def test_a_miss_returns_the_value_as_json_reads_it_back(folder: Path) -> None:
    """A hit and a miss give the same value: integer keys become strings either way."""
    def parse(raw: object) -> dict[str, object] | None:
        return raw if isinstance(raw, dict) else None

    first = load_or_derive("entry", "k1", lambda: {1: "one"}, parse)
    second = load_or_derive("entry", "k1", lambda: {1: "one"}, parse)
    assert first == second == {"1": "one"}


def test_a_value_that_is_not_json_is_a_clear_error(folder: Path) -> None:
    with pytest.raises(ValueError, match="'entry'.*not JSON data"):
        load_or_derive("entry", "k1", lambda: {"when": object()}, lambda raw: raw)


def test_bundled_document_is_the_yaml_file_as_json(folder: Path) -> None:
    from importlib import resources

    import yaml

    text = resources.files("unstuck").joinpath("data", "signals.yaml").read_text(encoding="utf-8")
    expected = json.loads(json.dumps(yaml.safe_load(text)))
    assert bundled_document("signals.yaml", yaml.safe_load) == expected  # a miss
    assert bundled_document("signals.yaml", yaml.safe_load) == expected  # a hit
    assert (folder / "data-signals-yaml.json").exists()


def test_bundled_document_key_covers_the_loader(folder: Path) -> None:
    import yaml

    def rows_only(text: str) -> object:
        return list(yaml.safe_load(text)["text"])[:1]

    whole = bundled_document("signals.yaml", yaml.safe_load)
    assert bundled_document("signals.yaml", rows_only) != whole
    assert cache.bundled_document("signals.yaml", yaml.safe_load) == whole


def test_a_fifo_symlink_or_device_in_place_of_an_entry_is_a_miss_not_a_hang(folder: Path) -> None:
    import threading

    folder.mkdir(parents=True)
    os.mkfifo(folder / "fifo.json")
    (folder / "link.json").symlink_to("/dev/zero")
    finished: list[object] = []

    def read_all() -> None:
        finished.append(load_or_derive("fifo", "k", lambda: ["a"], _strings))
        finished.append(load_or_derive("link", "k", lambda: ["b"], _strings))

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(10)
    assert finished == [["a"], ["b"]], "a FIFO or a link to a device must not block or be read without end"


def test_an_entry_far_larger_than_any_of_ours_is_not_read(folder: Path) -> None:
    folder.mkdir(parents=True)
    with (folder / "big.json").open("wb") as handle:
        handle.truncate(cache.MAX_ENTRY_BYTES + 1)  # a sparse file: nothing is written
    assert load_or_derive("big", "k", lambda: ["fresh"], _strings) == ["fresh"]


def _lines(text: str) -> list[str] | None:
    return text.split("\n") if text.startswith("row") else None


def test_a_text_entry_is_read_back_instead_of_derived(folder: Path) -> None:
    calls: list[int] = []

    def derive() -> str:
        calls.append(1)
        return "row a\nrow b"

    assert load_or_derive_text("rows", "k1", derive, _lines) == ["row a", "row b"]
    assert load_or_derive_text("rows", "k1", derive, _lines) == ["row a", "row b"]
    assert len(calls) == 1
    assert (folder / "rows.txt").read_text(encoding="utf-8") == "k1\nrow a\nrow b"


@pytest.mark.parametrize("body", [b"k2\nrow a", b"k1\nnot a row", b"k1", b"k1\n\xff\xfe", b""])
def test_a_stale_damaged_or_foreign_text_entry_is_derived_again(folder: Path, body: bytes) -> None:
    folder.mkdir(parents=True)
    (folder / "rows.txt").write_bytes(body)
    assert load_or_derive_text("rows", "k1", lambda: "row fresh", _lines) == ["row fresh"]
    assert (folder / "rows.txt").read_bytes() == b"k1\nrow fresh"


def test_a_symbolic_link_in_place_of_a_text_entry_is_not_followed(folder: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("k1\nrow planted", encoding="utf-8")
    folder.mkdir(parents=True)
    (folder / "rows.txt").symlink_to(elsewhere)
    assert load_or_derive_text("rows", "k1", lambda: "row fresh", _lines) == ["row fresh"]
    assert elsewhere.read_text(encoding="utf-8") == "k1\nrow planted", "the link's target is never written"
    assert not (folder / "rows.txt").is_symlink()


def test_a_text_entry_refused_by_its_own_parser_or_a_key_of_two_lines_is_an_error(folder: Path) -> None:
    with pytest.raises(ValueError, match="'rows' refuses"):
        load_or_derive_text("rows", "k1", lambda: "not a row", _lines)
    with pytest.raises(ValueError, match="one line"):
        load_or_derive_text("rows", "k1\nk2", lambda: "row a", _lines)
    with pytest.raises(ValueError, match="not latin-1"):
        load_or_derive_text("rows", "k1", lambda: "row ☃", _lines, encoding="latin-1")


def test_digest_of_separates_its_parts() -> None:
    assert digest_of(["ab", "c"]) != digest_of(["a", "bc"])
    assert digest_of([b"a", "b"]) == digest_of(["a", b"b"])


def test_data_bytes_is_the_bundled_file() -> None:
    from importlib import resources

    expected = resources.files("unstuck").joinpath("data", "signals.yaml").read_bytes()
    assert data_bytes("signals.yaml") == expected


def test_a_text_entry_is_kept_in_the_encoding_it_names(folder: Path) -> None:
    assert load_or_derive_text("rows", "k1", lambda: "row ☃", _lines, encoding="utf-16-le") == ["row ☃"]
    assert (folder / "rows.txt").read_bytes() == b"k1\n" + "row ☃".encode("utf-16-le")
    assert load_or_derive_text("rows", "k1", lambda: "row other", _lines, encoding="utf-16-le") == ["row ☃"]
    # read in another encoding, the same file is not the rows: derived again
    assert load_or_derive_text("rows", "k1", lambda: "row fresh", _lines) == ["row fresh"]


def test_an_entry_kept_beside_another_is_read_back_by_its_own_name(folder: Path, tmp_path: Path) -> None:
    from unstuck.core.cache import store_text

    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("planted", encoding="utf-8")
    folder.mkdir(parents=True)
    (folder / "extra.txt").symlink_to(elsewhere)
    store_text("extra", "k1", "row ☃", encoding="utf-16-le")
    assert elsewhere.read_text(encoding="utf-8") == "planted", "a link in the entry's place is replaced, not followed"
    assert load_or_derive_text("extra", "k1", lambda: "row derived", _lines, encoding="utf-16-le") == ["row ☃"]
    with pytest.raises(ValueError, match="one line of ASCII"):
        store_text("extra", "kéy", "row")
