"""Which journal and lesson store a command uses: one ``--store`` option, one default, for every
command that reads or writes them (``run``, ``journal``, ``lessons``, ``report``; ``eval`` keeps
throw-away stores of its own).
Internal: not a supported import path (docs/reference/index.md lists those that are).

``--store`` names (:func:`location`):

* a folder (``sqlite:///folder`` too): ``journal.db`` and ``lessons.db`` inside it
  (:data:`unstuck.store.urls.SQLITE_FILES`); a path that does not exist is a folder unless its
  name ends in ``.db``, ``.sqlite`` or ``.sqlite3`` (:data:`FILE_SUFFIXES`);
* a file: that one store, for the commands that use one (``journal``, ``lessons``, ``report``);
* a PostgreSQL URL (``postgresql://…``): the database holds both stores.

Without it, ``UNSTUCK_STORE`` (read the same way, :func:`unstuck.store.urls.store_for`), else
the user data folder (:func:`unstuck.store.urls.default_store_folder`). So ``unstuck run``, then
``unstuck journal list``, ``unstuck lessons list`` and ``unstuck report`` see the same turn with
no option at all.

The option names of earlier releases keep working, each with a one-line deprecation note on
standard error (:func:`deprecated`): ``run --journal URL`` and ``run --lessons URL`` (one store
each, as before: a store not named is not kept), ``journal --journal/-j URL`` and ``report
--journal/-j URL`` (the journal file). A journal ``unstuck-journal.db`` in the working folder
(:data:`LEGACY_JOURNAL`, where ``journal`` and ``report`` looked by default before) is still
read when nothing names a store, with a note saying where the default is now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from unstuck.cli.common import err_console, fail, shown
from unstuck.store.urls import (
    ENV_VAR,
    SQLITE_FILES,
    Engine,
    StoreRole,
    StoreURL,
    StoreURLError,
    default_store_folder,
    parse_store_url,
    store_url_from_env,
)

__all__ = [
    "FILE_SUFFIXES",
    "LEGACY_JOURNAL",
    "STORE_HELP",
    "JournalOption",
    "StoreOption",
    "StoresOption",
    "deprecated",
    "journal_store",
    "location",
    "role_store",
    "shared_location",
]

#: Names that say a path is a store file rather than a folder, when it does not exist yet.
FILE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: Where ``unstuck journal`` and ``unstuck report`` looked by default before (the working folder).
LEGACY_JOURNAL = Path("unstuck-journal.db")

STORE_HELP = (f"Where the journal and the lessons are: a folder (journal.db and lessons.db in it), one store's "
              f"file, or a store URL (sqlite:///path, postgresql://… holding both). Default: {ENV_VAR}, else "
              f"the user data folder ({default_store_folder()}).")

StoreOption = Annotated[str | None, typer.Option("--store", metavar="URL", show_default=False, help=STORE_HELP)]
StoresOption = Annotated[list[str] | None, typer.Option(
    "--store", metavar="URL", show_default=False,
    help=f"{STORE_HELP} Repeat it to read several (a file per machine, or a fleet's shared database).")]
#: ``--journal/-j`` of ``unstuck journal`` and ``unstuck report`` (deprecated: ``--store``).
JournalOption = Annotated[str | None, typer.Option(
    "--journal", "-j", metavar="URL", hidden=True, help="Deprecated: use --store.")]


def deprecated(old: str, instead: str = "--store") -> None:
    """One line on standard error: ``old`` still works, ``instead`` is its name now."""
    err_console.print(f"note: {old} is deprecated; use {instead} (a folder, a file or a store URL)",
                      highlight=False, markup=False)


def location(given: str | None, option: str = "--store") -> tuple[StoreURL, bool]:
    """Where a command's stores are, and whether anything named the place: ``given`` (the
    option), else :data:`unstuck.store.urls.ENV_VAR`, else the user data folder.

    Raises:
        typer.Exit: a URL that cannot be read (exit 2), its option or the variable named once.
    """
    try:
        if given is not None:
            return parse_store_url(given), True
        shared = store_url_from_env()
    except StoreURLError as exc:  # from the variable, the message names it already
        raise fail(f"{option}: {exc}" if given is not None else str(exc)) from None
    if shared is not None:  # a database or a folder, never one store's file (as it always was)
        return shared, True
    return StoreURL(Engine.SQLITE, path=default_store_folder()), False


def _is_file(url: StoreURL) -> bool:
    """Whether an SQLite location names one store's file rather than a folder of stores."""
    assert url.path is not None
    if url.path.is_dir():
        return False
    return url.path.exists() or url.path.suffix.lower() in FILE_SUFFIXES


def role_store(role: StoreRole, place: StoreURL, *, named: bool = True) -> StoreURL:
    """The ``role`` store at ``place``: a PostgreSQL database itself; one store's file itself
    (only when ``named``: the variable and the default always name a folder); else that store's
    file in the folder."""
    if place.engine is Engine.POSTGRESQL:
        return place
    assert place.path is not None
    if named and _is_file(place):
        return place
    return StoreURL(Engine.SQLITE, path=place.path / SQLITE_FILES[role])


def shared_location(given: str | None) -> StoreURL:
    """The place that holds both stores (``unstuck run``): ``--store``, the variable or the
    default, which must be a folder or a database.

    Raises:
        typer.Exit: a bad URL, or ``--store`` naming one store's file (exit 2).
    """
    place, _ = location(given)
    if given is not None and place.engine is Engine.SQLITE and _is_file(place):
        raise fail(f"--store {given}: names one store's file, but `unstuck run` keeps a journal and lessons: give a "
                   f"folder (journal.db and lessons.db go in it) or a postgresql:// URL")
    return place


def journal_store(given: str | None, old: str | None = None) -> StoreURL:
    """The journal a ``journal`` or ``report`` command reads: ``--journal`` (deprecated; the
    journal itself), else ``--store`` (:func:`role_store`), else the variable's, else
    :data:`LEGACY_JOURNAL` when the working folder has one (with a note), else the user data
    folder's.

    Raises:
        typer.Exit: a bad URL (exit 2), its option or the variable named once.
    """
    if old is not None:
        try:
            return parse_store_url(old)
        except StoreURLError as exc:
            raise fail(f"--journal: {exc}") from None
    place, named = location(given)
    if given is None and not named and LEGACY_JOURNAL.is_file():
        err_console.print(f"note: reading {shown(str(LEGACY_JOURNAL))} in this folder, the default of earlier "
                          f"releases; the default is now {shown(str(role_store(StoreRole.JOURNAL, place)))}: move "
                          f"it there, or name it with --store", highlight=False)
        return StoreURL(Engine.SQLITE, path=LEGACY_JOURNAL)
    return role_store(StoreRole.JOURNAL, place, named=given is not None)
