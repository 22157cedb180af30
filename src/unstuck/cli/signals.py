"""``unstuck signals``: the system's own messages in every installed language (a thin layer over
:mod:`unstuck.recognise.catalogues`).
Internal: not a supported import path (docs/reference/index.md lists those that are).

``unstuck signals harvest`` reads the msgstr of every message row's msgid from the gettext
catalogues installed on this machine and writes them as JSON lines: by default into the
package's own ``data/translations.jsonl`` when run from a source checkout, else into
``./translations.jsonl``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

import unstuck
from unstuck.cli.common import EXIT_FAILED, EXIT_USAGE, STORE_EXIT_CODES, console, err_console
from unstuck.core.output import write_text
from unstuck.recognise.catalogues import (
    DEFAULT_LOCALE_DIRS,
    harvest,
    language_dirs,
    load_message_rows,
    translations_jsonl,
)

__all__ = ["default_translations_path", "signals_app"]

signals_app = typer.Typer(
    epilog=STORE_EXIT_CODES, help="Signal rows that are programs' own messages, in every language.",
                          no_args_is_help=True)


@signals_app.callback()
def _signals() -> None:
    """Signal rows that are programs' own messages, in every installed language."""


def default_translations_path() -> Path:
    """Where ``harvest`` writes by default: the shipped ``src/unstuck/data/translations.jsonl``
    when this package runs from a source checkout (``src/unstuck`` beside a ``pyproject.toml``),
    else ``translations.jsonl`` in the working directory (an installed package is not written)."""
    package = Path(unstuck.__file__).resolve().parent
    checkout = package.parent.name == "src" and (package.parent.parent / "pyproject.toml").is_file()
    return package / "data" / "translations.jsonl" if checkout else Path("translations.jsonl")


def _usage(message: str) -> NoReturn:
    err_console.print(f"[red]error:[/red] {escape(message)}")
    raise typer.Exit(EXIT_USAGE)


@signals_app.command("harvest", epilog=STORE_EXIT_CODES)
def _harvest(
    locale_dir: Annotated[list[Path] | None, typer.Option(
        "--locale-dir", help="A directory laid out as <dir>/<lang>/LC_MESSAGES/<domain>.mo; repeat for more. "
                             f"Default: {', '.join(str(d) for d in DEFAULT_LOCALE_DIRS)}.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Where to write the translations (JSON lines). Default: the package's "
                            "data/translations.jsonl in a source checkout, else ./translations.jsonl.")] = None,
) -> None:
    """Read each message row's msgstr from every installed gettext catalogue."""
    dirs = tuple(locale_dir) if locale_dir else DEFAULT_LOCALE_DIRS
    missing = [d for d in dirs if not d.is_dir()]
    if missing:
        _usage(f"--locale-dir {missing[0]}: not a directory")
    target = out if out is not None else default_translations_path()
    if target.is_dir():
        _usage(f"--out {target}: is a directory; give a file path")
    if not target.parent.is_dir():
        _usage(f"--out {target}: the folder {target.parent} does not exist")
    rows = load_message_rows()
    languages = language_dirs(dirs)
    with Progress(TextColumn("harvest"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  console=err_console, transient=True) as progress:
        task = progress.add_task("", total=len(languages))
        try:
            found = harvest(rows, dirs, on_language=lambda lang: progress.update(
                task, advance=1, description=lang.name))
        except ValueError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(EXIT_FAILED) from None
    write_text(target, translations_jsonl(found))
    per_message = Counter((t.domain, t.msgid) for t in found)
    langs = {t.lang for t in found}
    console.print(f"found {len(per_message)} of {len(rows)} msgids in {len(langs)} languages: "
                  f"{len(found)} translations from {len(languages)} locale folders; wrote {escape(str(target))}")
    absent = [row for row in rows if (row.domain, row.msgid) not in per_message]
    if absent:
        console.print(f"{len(absent)} msgids no installed catalogue has (they match in English only):")
        for row in absent:
            console.print(f"  {escape(row.domain)}: {escape(repr(row.msgid))}")
