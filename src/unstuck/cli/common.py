"""What every command module shares: the consoles, the ``--json`` option, the one-line error and
the exit statuses (one owner: the command modules read them here and set up nothing of their own).
Internal: not a supported import path (docs/reference/index.md lists those that are).

* :data:`console` and :data:`err_console`: standard output and standard error, each a
  :class:`unstuck.cli.output.SafeConsole` (every piece of text redacted and stripped for the
  terminal); :data:`timeline_console` is standard output 160 columns wide when it is not a
  terminal (``unstuck trace show``), :func:`wide` a console of :data:`WIDE` columns for the
  eval's run table;
* :func:`shown`: user text for a console (control sequences stripped, rich markup escaped);
* :func:`fail`: print ``error: MESSAGE`` on one line and return the :class:`typer.Exit` to raise;
  :func:`one_line` is how an exception reads in that line;
* :data:`JsonOption`: ``--json`` as the listing commands take it (print JSON, not a table);
* the exit statuses (:data:`EXIT_OK` … :data:`EXIT_BLOCKED`) and the line each command's
  ``--help`` shows about them (:data:`EXIT_CODES`, :data:`STORE_EXIT_CODES`, :data:`MINE_EXIT_CODES`);
* :func:`options_command`: a command whose options are one frozen dataclass (each field
  annotated with its ``typer.Option`` or ``typer.Argument``), so the body takes one object.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape

from unstuck.cli.output import SafeConsole, output_consoles
from unstuck.core.text import for_terminal

__all__ = [
    "EXIT_BLOCKED",
    "EXIT_CODES",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "MINE_EXIT_CODES",
    "STORE_EXIT_CODES",
    "WIDE",
    "JsonOption",
    "console",
    "err_console",
    "fail",
    "one_line",
    "options_command",
    "shown",
    "timeline_console",
    "wide",
]

#: Done: the task finished, the command did what it was asked.
EXIT_OK = 0
#: Failed: the turn, the harness, or the machine (a full or read-only file).
EXIT_FAILED = 1
#: A usage error: a bad option, a missing or malformed input file (typer's convention).
EXIT_USAGE = 2
#: ``unstuck run``: the turn ended blocked, asking the user.
EXIT_BLOCKED = 3

#: Under ``unstuck --help``, ``run``, ``eval``, ``classify`` and ``scenarios``.
EXIT_CODES = ("Exit status: 0 done; 1 failed (the turn, the harness, or the machine: a full or read-only "
              "file); 2 a usage error (a bad option, a missing or malformed input file, a scenario file not "
              "trusted to run); 3 the turn ended blocked (`unstuck run`).")
#: Under the sub-commands that read or write a file (``journal``, ``lessons``, ``bank``,
#: ``signals``, ``trace``, ``report``).
STORE_EXIT_CODES = ("Exit status: 0 done; 1 failed (the machine: a full or read-only file); 2 a usage error "
                    "(a bad option, a missing, damaged or malformed file, or a refused request).")
#: Under ``unstuck mine``.
MINE_EXIT_CODES = ("Exit status: 0 done (whether or not rules were mined: the report says); 1 failed (a rollout "
                   "the harness could not make, or the machine: a full or read-only file); 2 a usage error (a bad "
                   "option, an unknown environment, a model that does not answer, a records path that is not a "
                   "folder).")

#: Characters: the eval's run table's width when the output is not a terminal.
WIDE = 200

console, err_console = output_consoles()
timeline_console = output_consoles(width=160)[0]

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def wide() -> SafeConsole:
    """:data:`console` when it is a terminal (it wraps to its own width), else a console on the
    same file :data:`WIDE` columns wide (a file or a pipe gets a whole table, no cut-off headers)."""
    return console if console.is_terminal else SafeConsole(width=WIDE, emoji=False, file=console.file)


def shown(text: str) -> str:
    """Text for a console: control and escape sequences removed, rich markup escaped."""
    return escape(for_terminal(text))


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: MESSAGE`` on standard error on one line (user text is escaped, never read
    as markup) and return the exit to raise (a usage error unless ``code`` says otherwise)."""
    err_console.print(f"[red]error:[/red] {shown(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(code)


def one_line(exc: BaseException) -> str:
    """An exception as the error line reads it: an OSError's file names (``a -> b``) and reason,
    else its message."""
    if isinstance(exc, OSError):
        where = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
        return f"{where}: {exc.strerror or exc}" if where else f"{exc.strerror or exc}"
    return str(exc)


Options = TypeVar("Options")


def options_command(options: type[Options], body: Callable[[Options], None]) -> Callable[..., None]:
    """A function typer can register as a command, whose parameters are the fields of the frozen
    dataclass ``options`` (in order; each annotated ``Annotated[type, typer.Option(...)]`` or
    ``typer.Argument``, with its default), and which calls ``body`` with one ``options`` object.
    Its ``--help`` text is ``body``'s docstring.

    Raises:
        TypeError: ``options`` is not a dataclass.
    """
    if not dataclasses.is_dataclass(options):
        raise TypeError(f"{options!r} is not a dataclass")
    hints = typing.get_type_hints(options, include_extras=True)
    empty = inspect.Parameter.empty
    parameters = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                                    default=empty if f.default is dataclasses.MISSING else f.default)
                  for f in dataclasses.fields(options)]

    def command(**values: Any) -> None:
        body(options(**values))

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = body.__doc__
    command.__name__ = command.__qualname__ = body.__name__
    command.__module__ = body.__module__
    return command
