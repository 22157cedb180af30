"""``unstuck report``: the cost of blockers across sessions, read from journals
(:mod:`unstuck.store.report_costs`), as a table, JSON, or a self-contained HTML page with plots.
Internal: not a supported import path (docs/reference/index.md lists those that are).

The page is one file (inline CSS and SVG, no script, nothing fetched from the network),
rendered from ``evals/templates/costs.html.j2`` with jinja2 (autoescaped), as the eval's
report is (:mod:`unstuck.evals.report`). It keeps guarded turns apart from unguarded ones (an
eval's baseline never asks, so its waste is not unstuck's): solid lines and bars for guarded
turns, dashed lines and pale bars for unguarded ones, and a table of each; and one colour per
subject across both charts (issue 28). Like the eval's page it reads at 1280 CSS pixels without
a sideways scroll.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from unstuck.cli.common import EXIT_FAILED, EXIT_USAGE, STORE_EXIT_CODES, console, err_console, fail
from unstuck.cli.common import shown as _shown
from unstuck.cli.output import write_text
from unstuck.cli.stores import StoresOption, deprecated, journal_store
from unstuck.core.output import finalize
from unstuck.core.output import write_text as write_file

if TYPE_CHECKING:  # the journal and the policy load only when the command runs
    from unstuck.store.report_costs import CostReport

__all__ = ["REPORT_EXIT_CODES", "duration", "render_html", "report_command"]

#: Under ``unstuck report --help`` (the store commands' exit statuses: it reads journals).
REPORT_EXIT_CODES = STORE_EXIT_CODES

#: Subject colours of both charts, in turn by subject name (a subject beyond the last reuses the first).
_COLOURS = ("#cf222e", "#0969da", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#1b7c83", "#57606a")
_TOP = 10  # bars in the top-blockers chart


def duration(seconds: float | None) -> str:
    """``3d 1h 30m``-style text for seconds (``–`` for ``None``; under a minute in seconds)."""
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{mins}m" if mins else ""]
    return " ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class _Series:
    label: str
    colour: str
    path: str
    points: tuple[tuple[float, float, str], ...]  # x, y, tooltip
    guarded: bool = True


@dataclass(frozen=True, slots=True)
class _Lines:
    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    series: tuple[_Series, ...]
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]


@dataclass(frozen=True, slots=True)
class _Bar:
    """One top blocker: its guarded turns' wasted steps (a solid bar), then its unguarded
    turns' (a pale one after it), in its subject's colour."""

    label: str
    y: int
    colour: str
    guarded_steps: int
    unguarded_steps: int
    guarded_width: float
    unguarded_width: float

    @property
    def steps(self) -> int:
        return self.guarded_steps + self.unguarded_steps


@dataclass(frozen=True, slots=True)
class _Bars:
    width: int
    height: int
    label_width: int
    bars: tuple[_Bar, ...]


def _colours(report: CostReport) -> dict[str, str]:
    """One colour per subject, the same in every chart: :data:`_COLOURS` in turn, subjects by name."""
    subjects = sorted({c.subject for c in report.turns} | {t.subject for t in report.totals})
    return {subject: _COLOURS[i % len(_COLOURS)] for i, subject in enumerate(subjects)}


def _mode(guarded: bool) -> str:
    return "guarded" if guarded else "unguarded"


def _lines(report: CostReport, colours: dict[str, str]) -> _Lines:
    """Wasted steps per day (y) over every day from the first to the last in the report (x),
    one line per subject and mode (its kinds summed): solid for its guarded turns, dashed for
    its unguarded ones (drawn only when it has some)."""
    left, top, plot_width, plot_height = 50, 16, 620, 220
    days = sorted({d.day for d in report.days})
    span = [days[0] + datetime.timedelta(days=i) for i in range((days[-1] - days[0]).days + 1)] if days else []
    per: dict[tuple[str, bool], dict[datetime.date, int]] = {}
    for c in report.turns:
        per.setdefault((c.subject, c.guarded), {}).setdefault(c.day, 0)
        per[c.subject, c.guarded][c.day] += c.wasted_steps
    peak = max((v for by_day in per.values() for v in by_day.values()), default=0) or 1
    step = plot_width / max(len(span) - 1, 1)

    def x(day: datetime.date) -> float:
        return round(left + (day - span[0]).days * step, 1) if len(span) > 1 else left + plot_width / 2

    def y(value: int) -> float:
        return round(top + (1 - value / peak) * plot_height, 1)

    series = []
    for subject, guarded in sorted(per, key=lambda key: (key[0], not key[1])):
        by_day = per[subject, guarded]
        points = tuple((x(day), y(by_day.get(day, 0)), f"{subject} {day.isoformat()}: "
                        f"{by_day.get(day, 0)} wasted steps ({_mode(guarded)})") for day in span)
        path = " ".join(f"{'M' if j == 0 else 'L'}{px},{py}" for j, (px, py, _) in enumerate(points))
        label = subject if guarded else f"{subject} (unguarded)"
        series.append(_Series(label, colours[subject], path, points, guarded))
    every = max(len(span) // 8, 1)  # at most about 8 date labels
    x_ticks = tuple((x(day), day.isoformat()) for k, day in enumerate(span) if k % every == 0)
    y_ticks = tuple((y(v), str(v)) for v in sorted({0, peak // 2, peak}))
    return _Lines(left + plot_width + 40, top + plot_height + 30, left, top, plot_width, plot_height, tuple(series),
                  x_ticks, y_ticks)


def _bars(report: CostReport, colours: dict[str, str]) -> _Bars:
    label_width, area, row = 240, 560, 24
    top = [t for t in report.totals[:_TOP] if t.wasted_steps or t.blocked_turns]
    peak = max((t.wasted_steps for t in top), default=0) or 1
    bars = []
    for i, t in enumerate(top):
        mine = [c for c in report.turns if (c.subject, c.kind) == (t.subject, t.kind)]
        guarded = sum(c.wasted_steps for c in mine if c.guarded)
        unguarded = sum(c.wasted_steps for c in mine if not c.guarded)
        bars.append(_Bar(f"{t.subject} ({t.kind.value})", 4 + i * row, colours[t.subject], guarded, unguarded,
                         round(guarded / peak * area, 1), round(unguarded / peak * area, 1)))
    return _Bars(label_width + area + 40, 8 + len(bars) * row, label_width, tuple(bars))


def render_html(report: CostReport) -> str:
    """The report as one HTML document (a string): a line chart of wasted steps per day by
    subject, a bar chart of the top blockers (most wasted steps first, at most 10), both
    keeping guarded turns apart from unguarded ones and one colour per subject, the tables of
    totals and days, and the turns that met a blocker, guarded and unguarded apart."""
    import jinja2

    from unstuck import __version__

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("unstuck.evals", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,  # every value redacted before it is escaped (unstuck.core.output)
    )
    colours = _colours(report)
    guarded = [c for c in report.turns if c.guarded]
    unguarded = [c for c in report.turns if not c.guarded]
    return environment.get_template("costs.html.j2").render(
        report=report, lines=_lines(report, colours), bars=_bars(report, colours), colours=colours,
        duration=duration, version=__version__, guarded=guarded, unguarded=unguarded,
        guarded_steps=sum(c.wasted_steps for c in guarded), unguarded_steps=sum(c.wasted_steps for c in unguarded),
        guarded_seconds=sum(c.wasted_seconds for c in guarded),
        unguarded_seconds=sum(c.wasted_seconds for c in unguarded),
        utc=lambda unix_s: datetime.datetime.fromtimestamp(unix_s, datetime.UTC).strftime("%Y-%m-%d %H:%M"),
    )


def _print(report: CostReport) -> None:
    table = Table(title="The cost of blockers, per day (UTC)", title_justify="left")
    for name in ("day", "subject", "kind", "blocked", "asked", "wasted steps", "wasted s", "lesson-stopped",
                 "steps saved", "time until closed", "still open"):
        table.add_column(name, justify="left" if name in ("day", "subject", "kind") else "right")
    for d in report.days:
        table.add_row(d.day.isoformat(), _shown(d.subject), d.kind.value, str(d.blocked_turns), str(d.asked_turns),
                      str(d.wasted_steps), f"{d.wasted_seconds:.0f}", str(d.lesson_turns),
                      "–" if d.steps_saved is None else f"{d.steps_saved:g}", duration(d.closed_after_s),
                      str(d.still_open))
    console.print(table)
    top = Table(title="Top blockers", title_justify="left")
    for name in ("subject", "kind", "blocked", "wasted steps", "wasted s", "steps saved"):
        top.add_column(name, justify="left" if name in ("subject", "kind") else "right")
    for t in report.totals[:_TOP]:
        top.add_row(_shown(t.subject), t.kind.value, str(t.blocked_turns), str(t.wasted_steps),
                    f"{t.wasted_seconds:.0f}", "–" if t.steps_saved is None else f"{t.steps_saved:g}")
    console.print(top)
    console.print(f"{report.turns_read} turn{'' if report.turns_read == 1 else 's'} read from "
                  f"{len(report.journals)} journal(s); "
                  f"{len(report.turns)} met a blocker.", highlight=False)


def _since(text: str | None) -> datetime.date | None:
    if text is None:
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise fail(f"--since {text!r} is not a date (YYYY-MM-DD, UTC)", EXIT_USAGE) from None


def _write(path: Path, text: str, what: str) -> None:
    if str(path) == "-":
        write_text(text)
        return
    try:
        write_file(path, text)
    except OSError as exc:
        raise fail(f"{what} {path}: {exc.strerror or exc}", EXIT_FAILED) from None


def report_command(
    store: StoresOption = None,
    since: Annotated[str | None, typer.Option(
        metavar="DATE", help="Only turns that started on this UTC day or later (YYYY-MM-DD).")] = None,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON to this file (- for "
                                                                  "standard output, without the tables).")] = None,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML report with plots to this file.")]
    = None,
    journal: Annotated[list[str] | None, typer.Option(
        "--journal", "-j", metavar="URL", hidden=True, help="Deprecated: use --store.")] = None,
) -> None:
    """The cost of blockers across sessions: per day, subject and kind, the blocked turns, the
    steps and seconds wasted before asking, the turns a lesson stopped early (steps saved), and
    the time until the blocker closed."""
    from unstuck.store.journal import Journal, JournalError
    from unstuck.store.report_costs import read_costs

    start = _since(since)
    if journal:
        deprecated("--journal")
    named = [journal_store(given) for given in store or []] + [journal_store(None, old) for old in journal or []]
    if not named:
        named = [journal_store(None)]
    urls = list({url.shown: url for url in named}.values())  # a store named twice is read once
    opened: list[Journal] = []
    try:
        for url in urls:
            if url.path is not None and not url.path.exists():
                raise fail(f"no journal at {url.path}", EXIT_USAGE)
            try:
                opened.append(Journal(url, readonly=True))
            except JournalError as exc:
                raise fail(str(exc), EXIT_USAGE) from None
        try:
            report = read_costs(opened, since=start)
        except JournalError as exc:
            raise fail(str(exc), EXIT_USAGE) from None
    finally:
        for each in opened:
            each.close()
    if json_file is not None:
        _write(json_file, report.to_json(), "--json")
    if html is not None:
        _write(html, render_html(report), "--html")
        if str(html) != "-":
            err_console.print(f"HTML report written to {escape(str(html))}", highlight=False)
    if json_file is None or str(json_file) != "-":
        _print(report)
