"""The ``unstuck`` command: the typer application, each command group registered from its own
module of :mod:`unstuck.cli` (a thin layer over the library: typer + rich), and the entry point.

Everything a command prints, on standard output and standard error, passes the output boundary
(:func:`unstuck.core.output.redact_standard_streams`: no secret is shown), and every file it writes
is written through :mod:`unstuck.core.output` (``--json`` documents redacted before they are
serialised, HTML pages as they are rendered).

Exit statuses: ``unstuck eval`` exits 0 unless the harness itself failed (a run that
raised, a malformed scenario); ``unstuck run`` exits 0 when the turn is done with the task
finished, 3 when it ended blocked, 1 when it failed or gave up without finishing. Usage errors
exit 2 (typer's convention). The statuses and the consoles are :mod:`unstuck.cli.common`'s.

Internal to the command line (``unstuck.cli.app.main`` is the console script): not a supported API.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer

from unstuck import __version__
from unstuck.cli.bank import bank_app
from unstuck.cli.classify import classify_command
from unstuck.cli.common import EXIT_CODES, EXIT_FAILED, EXIT_USAGE, MINE_EXIT_CODES, console, err_console, one_line
from unstuck.cli.common import shown as _shown
from unstuck.cli.eval import eval_command
from unstuck.cli.hooks import answer_command, hooks_app, serve_command
from unstuck.cli.journal import journal_app
from unstuck.cli.lessons import lessons_app
from unstuck.cli.mining import mine_command, rules_app
from unstuck.cli.proxy import mcp_proxy_command
from unstuck.cli.report import REPORT_EXIT_CODES, report_command
from unstuck.cli.run import run_command
from unstuck.cli.scenarios import scenarios_app
from unstuck.cli.signals import signals_app
from unstuck.cli.trace import trace_app
from unstuck.core.errors import UnstuckError
from unstuck.core.output import redact_standard_streams

__all__ = ["app", "main"]

app = typer.Typer(
    name="unstuck",
    help="Keep tool-using agents from getting stuck: stop, ask one precise question, remember.",
    no_args_is_help=True,
    add_completion=False,
    epilog=EXIT_CODES,
)
# in the order --help lists them
app.add_typer(bank_app, name="bank")
app.add_typer(journal_app, name="journal")
app.add_typer(lessons_app, name="lessons")
app.add_typer(rules_app, name="rules")
app.command("mine", epilog=MINE_EXIT_CODES)(mine_command)
app.command("report", epilog=REPORT_EXIT_CODES)(report_command)
app.add_typer(signals_app, name="signals")
app.add_typer(trace_app, name="trace")
app.command("eval", epilog=EXIT_CODES)(eval_command)
app.command("run", epilog=EXIT_CODES)(run_command)
app.command("mcp-proxy", epilog=EXIT_CODES)(mcp_proxy_command)
app.add_typer(scenarios_app, name="scenarios")
app.add_typer(hooks_app, name="hooks")
app.command("serve", epilog=EXIT_CODES)(serve_command)
app.command("answer", epilog=EXIT_CODES)(answer_command)
app.command("classify", epilog=EXIT_CODES)(classify_command)


def _version(value: bool) -> None:
    if value:
        console.print(f"unstuck {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Keep tool-using agents from getting stuck: stop, ask one precise question, remember."""
    redact_standard_streams()  # main() did already, unless the app is run by a caller (a test runner)
    ctx.call_on_close(_flush_streams)  # what a writer holds back is out before the caller reads the streams


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed stream
            stream.flush()


def main() -> None:
    """Entry point of the ``unstuck`` console script: every error unstuck raises on purpose
    (:class:`unstuck.core.errors.UnstuckError`, exit 2) and every OSError of the machine (a full or
    read-only file, exit 1) ends the command with one line naming what and where, never a
    traceback. Its standard output and error are redacted from the start
    (:func:`unstuck.core.output.redact_standard_streams`), usage errors included."""
    redact_standard_streams()
    try:
        app(standalone_mode=True)
    except UnstuckError as exc:
        err_console.print(f"[red]error:[/red] {_shown(one_line(exc))}", soft_wrap=True)
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        err_console.print(f"[red]error:[/red] {_shown(one_line(exc))}", soft_wrap=True)
        sys.exit(EXIT_FAILED)
