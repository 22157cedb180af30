"""``unstuck trace show FILE``: a run's events (JSON lines, as ``--events`` writes them) as a
timeline, one table per turn (a thin layer over :mod:`unstuck.store.events`).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from unstuck.cli.common import EXIT_USAGE, STORE_EXIT_CODES, err_console
from unstuck.cli.common import timeline_console as console
from unstuck.store.events import Event, EventName, read_events

__all__ = ["trace_app"]

trace_app = typer.Typer(epilog=STORE_EXIT_CODES, help="Read recorded events.", no_args_is_help=True)

#: Event names drawn in colour: what needed the user, what was refused, what ended a turn.
_STYLES: dict[str, str] = {
    EventName.BLOCKER_OPENED: "yellow", EventName.TURN_ESCALATED: "bold yellow", EventName.CALL_REFUSED: "red",
    EventName.BUDGET_CHARGED: "red", EventName.FAULT_INJECTED: "magenta", EventName.INTENT_HELD: "bold red",
    EventName.DIAGNOSTIC_STALL: "red", EventName.TURN_ENDED: "bold", EventName.BLOCKER_CLOSED: "green",
    EventName.VALIDATION_CHECKED: "cyan",
}
_SHOWN_FIRST = ("tool", "subject", "kind", "status", "reason", "unblock")


def _details(fields: dict[str, Any]) -> str:
    ordered = [k for k in _SHOWN_FIRST if k in fields] + sorted(k for k in fields if k not in _SHOWN_FIRST)
    return " ".join(f"{k}={fields[k]}" for k in ordered if fields[k] is not None and fields[k] != "")


@trace_app.command("show", epilog=STORE_EXIT_CODES)
def _show(
    path: Annotated[Path, typer.Argument(help="An events file (JSON lines), e.g. from `unstuck run --events`.")],
    turn: Annotated[str | None, typer.Option(help="Only this turn.")] = None,
) -> None:
    """Render a run's events as a timeline, one table per turn."""
    try:
        recorded, bad = read_events(path)
    except OSError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(path))}: {escape(exc.strerror or str(exc))}")
        raise typer.Exit(EXIT_USAGE) from None
    turns: dict[str, list[Event]] = {}
    for item in recorded:
        if turn is None or item.turn_id == turn:
            turns.setdefault(item.turn_id, []).append(item)
    for turn_id, events in turns.items():
        started = next((e for e in events if e.name == EventName.TURN_STARTED), None)
        title = f"turn {turn_id}" + (f" · {started.get('task') or ''}" if started else "")
        table = Table("t (s)", "event", "details", title=escape(title), title_justify="left")
        for e in events:
            table.add_row(f"{e.at_s:.3f}", escape(e.name), escape(_details(dict(e.fields))),
                          style=_STYLES.get(e.name, ""))
        console.print(table)
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (" ..." if len(bad) > 10 else "")
        where = escape(str(path))
        err_console.print(f"[yellow]skipped {len(bad)} line(s) of {where} that are not events: {shown}[/yellow]")
    if not turns:
        err_console.print(f"[red]error:[/red] no events in {escape(str(path))}" + (f" for turn {turn}" if turn else ""))
        raise typer.Exit(EXIT_USAGE)
