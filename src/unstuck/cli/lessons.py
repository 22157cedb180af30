"""``unstuck lessons``: list, show, forget and search remembered blockers (a thin layer over
:mod:`unstuck.store.lessons`). Forgetting closes a lesson; its row stays. The lesson store is the
one ``--store`` names (:mod:`unstuck.cli.stores`).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from unstuck.cli.common import EXIT_OK, STORE_EXIT_CODES, JsonOption, console, fail
from unstuck.cli.common import shown as _shown
from unstuck.cli.output import echo_json
from unstuck.cli.stores import StoreOption, location, role_store
from unstuck.store.lessons import Lesson, LessonStore, LessonStoreError
from unstuck.store.urls import StoreRole

__all__ = ["lessons_app"]

T = TypeVar("T")

lessons_app = typer.Typer(
    epilog=STORE_EXIT_CODES, help="Remembered blockers: shown at turn start, re-checked before use.",
                          no_args_is_help=True)


def _open(given: str | None, *, readonly: bool = True) -> LessonStore:
    place, named = location(given)
    url = role_store(StoreRole.LESSONS, place, named=given is not None)
    if not named and readonly and url.path is not None and not url.path.exists():
        console.print(f"no lessons yet (no store at {_shown(str(url.path))})", highlight=False)
        raise typer.Exit(EXIT_OK)
    if url.path is not None and not url.path.exists():  # a read, or forgetting: never make a store for it
        raise fail(f"no lesson store at {url.path}")
    try:
        return LessonStore(url, readonly=readonly)
    except (LessonStoreError, OSError) as exc:
        raise fail(str(exc)) from None


def _read(store: LessonStore, action: Callable[[LessonStore], T]) -> T:
    """Run a read; a damaged store is a clear error naming its path, not a traceback."""
    try:
        return action(store)
    except (LessonStoreError, ValueError) as exc:
        raise fail(f"{store.where} is damaged: {exc}") from None


def _when(epoch_s: float | None) -> str:
    if epoch_s is None:
        return "-"
    return datetime.datetime.fromtimestamp(epoch_s, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M")


def _table(lessons: list[Lesson], title: str) -> Table:
    table = Table("id", "subject", "kind", "tool", "unblock", "probe", "last verified", "state", title=title)
    for lesson in lessons:
        state = "active" if lesson.active else (
            f"superseded by {lesson.superseded_by}" if lesson.superseded_by else "closed")
        table.add_row(str(lesson.id), _shown(lesson.signature.subject), lesson.signature.kind.value,
                      _shown(lesson.signature.tool), _shown(lesson.unblock or "-"),
                      _shown(lesson.probe.tool if lesson.probe else "-"), _when(lesson.last_verified_at), state)
    return table


@lessons_app.command("list", epilog=STORE_EXIT_CODES)
def _list(store: StoreOption = None, all_: Annotated[bool, typer.Option("--all", help="Closed lessons too.")] = False,
          as_json: JsonOption = False) -> None:
    """List the active lessons (with --all, closed ones too)."""
    with _open(store) as s:
        lessons = _read(s, lambda x: x.all() if all_ else x.active())
    if as_json:
        echo_json([lesson.to_dict() for lesson in lessons])
    else:
        console.print(_table(lessons, "lessons" + (" (all)" if all_ else " (active)")))


#: The largest lesson id: SQLite's INTEGER PRIMARY KEY is a signed 64-bit integer
#: (sqlite.org, "Datatypes In SQLite", 2.1 "Storage Classes"). A larger one is a usage error.
_MAX_ID = 2**63 - 1


@lessons_app.command("show", epilog=STORE_EXIT_CODES)
def _show(lesson_id: Annotated[int, typer.Argument(help="A lesson id.", min=1, max=_MAX_ID)], store: StoreOption = None,
          as_json: JsonOption = False) -> None:
    """Show one lesson, whole."""
    with _open(store) as s:
        lesson = _read(s, lambda x: x.get(lesson_id))
    if lesson is None:
        raise fail(f"no lesson {lesson_id}")
    data = lesson.to_dict()
    if as_json:
        echo_json(data)
        return
    for key, value in data.items():
        shown = _when(value) if key.endswith("_at") and isinstance(value, float) else value
        console.print(f"{key}: {_shown(str(shown))}", highlight=False)


@lessons_app.command("forget", epilog=STORE_EXIT_CODES)
def _forget(lesson_id: Annotated[int, typer.Argument(help="A lesson id.", min=1, max=_MAX_ID)],
            store: StoreOption = None) -> None:
    """Close a lesson (its row is kept, marked forgotten)."""
    with _open(store, readonly=False) as s:
        if _read(s, lambda x: x.get(lesson_id)) is None:
            raise fail(f"no lesson {lesson_id}")
        closed = s.invalidate(lesson_id, "forgotten by the user")
    console.print(f"lesson {lesson_id} " + ("closed" if closed else "was already closed"))


@lessons_app.command("search", epilog=STORE_EXIT_CODES)
def _search(text: Annotated[str, typer.Argument(help="Words to find in lessons.")], store: StoreOption = None,
            as_json: JsonOption = False) -> None:
    """Full-text search over lessons (closed ones included)."""
    with _open(store) as s:
        found = _read(s, lambda x: x.search(text))
    if as_json:
        echo_json([lesson.to_dict() for lesson in found])
    else:
        console.print(_table(found, f"lessons matching {text!r}"))
