"""One error tree: every error class of the package derives from ``UnstuckError`` (keeping
its built-in base), and the stores never let a raw ``sqlite3.Error`` out of a public method:
a file damaged while open is the store's own error naming the path and the operation."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import unstuck
import unstuck.core.errors
from conftest import PlaybackModel
from unstuck.core.errors import UnstuckError
from unstuck.core.situations import Kind, Probe, Situation
from unstuck.evals.casebook import CaseError
from unstuck.evals.compare import BaselineError
from unstuck.evals.scenarios import ScenarioError
from unstuck.faults.bank import BankError
from unstuck.recognise.signals import SignalTableError
from unstuck.store.journal import Journal, JournalError
from unstuck.store.lessons import LessonStore, LessonStoreError
from unstuck.store.second_opinion import OpinionCacheError, SecondOpinion
from unstuck.store.sqlite import store_errors, translate_errors
from unstuck.toolkit.models import ModelError


def error_classes() -> list[type[BaseException]]:
    """Every error class defined in a module of the package (imported, not re-exported): the
    ``Exception`` subclasses. A ``BaseException`` that is not an ``Exception`` is control flow,
    as ``KeyboardInterrupt`` and ``GeneratorExit`` are (the peer comparison's cap, which no
    framework's ``except Exception`` may swallow), never an error a caller handles."""
    found: list[type[BaseException]] = []
    for _, name, _ in pkgutil.walk_packages(unstuck.__path__, "unstuck."):
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        found.extend(value for value in vars(module).values()
                     if inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == name)
    return sorted(set(found), key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def test_every_error_class_in_the_package_derives_from_unstuck_error() -> None:
    classes = error_classes()
    strays = [f"{cls.__module__}.{cls.__qualname__}" for cls in classes if not issubclass(cls, UnstuckError)]
    assert not strays, f"error classes outside the UnstuckError tree: {strays}"
    assert {JournalError, LessonStoreError, ModelError, SignalTableError, BankError, ScenarioError} <= set(classes)


def test_the_tree_in_the_errors_module_names_every_error_class() -> None:
    doc = unstuck.core.errors.__doc__ or ""
    missing = [cls.__qualname__ for cls in error_classes() if cls.__qualname__ not in doc]
    assert not missing, f"unstuck.core.errors' tree does not show: {missing}"


@pytest.mark.parametrize(("error", "builtin"), [
    (JournalError, RuntimeError), (LessonStoreError, RuntimeError), (ModelError, RuntimeError),
    (OpinionCacheError, RuntimeError), (SignalTableError, ValueError), (BankError, ValueError),
    (ScenarioError, ValueError), (CaseError, ValueError), (BaselineError, ValueError),
])
def test_each_error_keeps_the_builtin_base_its_callers_catch(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, UnstuckError) and issubclass(error, builtin)


# -- stores damaged while open -----------------------------------------------------------------

LOGGED_OUT = Situation(Kind.AUTH, "gh", interactive=True, unblock="gh auth login",
                       probe=Probe.of("check_cli_setup", {"name": "gh"}), detail="not logged in")


def damage_pages_after_the_first(path: Path) -> None:
    """Write garbage over every page of a real SQLite file but the first (the header and the
    schema stay readable, so only the data reads fail: "database disk image is malformed").
    The page size is read from the header, bytes 16-17 (sqlite.org, "Database File Format",
    1.3 "The Database Header")."""
    raw = path.read_bytes()
    page_size = int.from_bytes(raw[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    assert len(raw) > page_size, "the test needs a file of more than one page"
    with path.open("r+b") as f:
        f.seek(page_size)
        f.write(b"\xa5" * (len(raw) - page_size))


@pytest.fixture
def damaged_journal(tmp_path: Path) -> Iterator[Journal]:
    path = tmp_path / "turns.db"
    with Journal(path) as journal:
        journal.begin_turn("t1", "push the branch", unattended=True, guarded=True)
        journal.prepare_intent("t1", 0, "c1", "git_push", '{"remote": "origin"}')
    journal = Journal(path)  # closing checkpointed the WAL into the file: its pages are on disk
    damage_pages_after_the_first(path)
    yield journal
    journal.close()


def test_a_journal_damaged_while_open_reads_as_journal_error_naming_path_and_operation(
    damaged_journal: Journal,
) -> None:
    with pytest.raises(JournalError) as caught:
        damaged_journal.turns()
    message = str(caught.value)
    assert str(damaged_journal.path) in message and "Journal.turns" in message
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    assert not isinstance(caught.value, sqlite3.Error)


def test_a_write_to_a_journal_damaged_while_open_is_a_journal_error(damaged_journal: Journal) -> None:
    with pytest.raises(JournalError, match=r"Journal\.record_receipt") as caught:
        damaged_journal.record_receipt("t1:0", '{"pushed": true}')
    assert str(damaged_journal.path) in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


@pytest.fixture
def damaged_store(tmp_path: Path) -> Iterator[LessonStore]:
    path = tmp_path / "lessons.db"
    with LessonStore(path) as store:
        for n in range(20):  # enough rows for the table and its FTS index to span several pages
            store.record(LOGGED_OUT, tool="check_cli_setup", fingerprint=f"/usr/bin/gh|gh version 2.{n}.0",
                         content="gh was logged out " * 20, source="escalated")
    store = LessonStore(path)
    damage_pages_after_the_first(path)
    yield store
    store.close()


@pytest.mark.parametrize("read", ["active", "all", "search", "on_subject"])
def test_a_lesson_store_damaged_while_open_reads_as_lesson_store_error(damaged_store: LessonStore, read: str) -> None:
    calls = {"active": lambda: damaged_store.active(), "all": lambda: damaged_store.all(),
             "search": lambda: damaged_store.search("logged out"), "on_subject": lambda: damaged_store.on_subject("gh")}
    with pytest.raises(LessonStoreError) as caught:
        calls[read]()
    assert str(damaged_store.path) in str(caught.value) and f"LessonStore.{read}" in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


def test_recording_into_a_damaged_lesson_store_is_a_lesson_store_error(damaged_store: LessonStore) -> None:
    with pytest.raises(LessonStoreError, match=r"LessonStore\.record"):
        damaged_store.record(LOGGED_OUT, tool="check_cli_setup", fingerprint="/usr/bin/gh|gh version 2.99.0",
                             content="gh was logged out", source="escalated")


def test_an_opinion_cache_that_is_not_sqlite_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "opinions.db"
    path.write_bytes(b"notes, not a database\n" * 400)
    with pytest.raises(OpinionCacheError, match="opening the opinion cache") as caught:
        SecondOpinion(PlaybackModel([]), cache_path=path)
    assert str(path) in str(caught.value) and isinstance(caught.value.__cause__, sqlite3.DatabaseError)


# -- the helpers themselves --------------------------------------------------------------------

def test_translate_errors_lets_every_other_exception_through_unchanged(tmp_path: Path) -> None:
    original = KeyError("not SQLite's")
    with pytest.raises(KeyError) as caught, translate_errors(JournalError, tmp_path / "j.db", "reading"):
        raise original
    assert caught.value is original


def test_a_store_method_that_returns_lazily_is_refused_at_class_definition() -> None:
    with pytest.raises(TypeError, match=r"Lazy\.rows is a generator"):
        @store_errors(JournalError)
        class Lazy:
            path = Path("x.db")

            def rows(self) -> Iterator[int]:
                yield 1
