"""The eval's self-contained HTML report: the verdict line, each guarded run's question and why
a run did not pass, run table, judged dimensions, a chart of wasted calls unguarded against
guarded, a timeline of the calls after each blocker opened, and (when the eval swept fault
injection) success against the injection rate.
Internal: not a supported import path (docs/reference/index.md lists those that are).

The page is one file (inline CSS and SVG, no script, nothing fetched from the network),
rendered from ``templates/report.html.j2`` with jinja2 (autoescaped; every value redacted
first, :func:`unstuck.core.output.finalize`: a page never shows a secret). It reads at 1280 CSS
pixels without a sideways scroll (issue 28): a table wider than the page scrolls inside its own
box, a chart scales down to the page's width, and long words (paths, questions) wrap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from unstuck.core.output import finalize, write_text
from unstuck.evals.curve import Curve
from unstuck.evals.judge import DIMENSIONS
from unstuck.evals.runner import REFERENCE_INCIDENT, RunMetrics, compare_modes

__all__ = ["Tally", "render_html", "tally", "write_html"]

_LABEL_WIDTH = 260
_BAR_AREA = 600
_ROW_HEIGHT = 26


@dataclass(frozen=True, slots=True)
class _Bar:
    label: str
    y: int
    unguarded: int
    guarded: int
    unguarded_width: float
    guarded_width: float


@dataclass(frozen=True, slots=True)
class _Chart:
    width: int
    height: int
    label_width: int
    bars: tuple[_Bar, ...]


@dataclass(frozen=True, slots=True)
class _Group:
    scenario: str
    runs: tuple[RunMetrics, ...]


@dataclass(frozen=True, slots=True)
class Tally:
    """The eval's verdict, counted from its runs.

    Attributes:
        guarded: guarded runs with a verdict (``RunMetrics.passed`` not ``None``; a harness
            error counts as not passed).
        passed: those that passed.
        stated: unguarded runs whose scenario states their outcome (``RunMetrics.as_stated``
            not ``None``: the scenario's ``unguarded:``).
        as_stated: those that went as stated.
    """

    guarded: int
    passed: int
    stated: int
    as_stated: int

    @property
    def ok(self) -> bool:
        """Every guarded run passed and every stated unguarded run went as stated."""
        return self.passed == self.guarded and self.as_stated == self.stated

    @property
    def line(self) -> str:
        """``N of N guarded runs passed; M of M unguarded as stated`` (issue 28)."""
        return (f"{self.passed} of {self.guarded} guarded runs passed; "
                f"{self.as_stated} of {self.stated} unguarded as stated")


def tally(results: Sequence[RunMetrics]) -> Tally:
    """Count the verdict of ``results`` (see :class:`Tally`)."""
    guarded = [r for r in results if r.guarded and r.passed is not None]
    stated = [r for r in results if not r.guarded and r.as_stated is not None]
    return Tally(len(guarded), sum(1 for r in guarded if r.passed), len(stated), sum(1 for r in stated if r.as_stated))


@dataclass(frozen=True, slots=True)
class _Asked:
    """One guarded run as the page shows it: what it asked, and why it did not pass."""

    run: RunMetrics
    question: str | None
    reasons: tuple[str, ...]


def _asked(results: Sequence[RunMetrics]) -> list[_Asked]:
    """The guarded runs, those that did not pass first (in run order within each group); a
    harness error's reason is the error (the run did not happen)."""
    shown = []
    for r in results:
        if not r.guarded:
            continue
        reasons = r.failed_checks
        if r.passed is False and not reasons:
            reasons = (f"harness error: {r.error}" if r.harness_error else r.error or f"outcome: {r.outcome}",)
        shown.append(_Asked(r, r.escalation, reasons if r.passed is False else ()))
    return sorted(shown, key=lambda a: a.run.passed is not False)


def _chart(results: Sequence[RunMetrics]) -> _Chart:
    comparisons = [c for c in compare_modes(results) if c.unguarded_wasted_calls or c.guarded_wasted_calls]
    top = max((max(c.unguarded_wasted_calls, c.guarded_wasted_calls) for c in comparisons), default=1) or 1
    scale = _BAR_AREA / top
    bars = tuple(
        _Bar(
            f"{c.scenario} · {c.agent}" + (f" #{c.repeat}" if c.repeat else ""), 4 + i * _ROW_HEIGHT,
            c.unguarded_wasted_calls, c.guarded_wasted_calls,
            round(c.unguarded_wasted_calls * scale, 1), round(c.guarded_wasted_calls * scale, 1),
        )
        for i, c in enumerate(comparisons)
    )
    return _Chart(_LABEL_WIDTH + _BAR_AREA + 40, 8 + len(bars) * _ROW_HEIGHT, _LABEL_WIDTH, bars)


@dataclass(frozen=True, slots=True)
class _CurveChart:
    """A line chart of success rate (y, 0-100 %) against the injection rate (x)."""

    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    points: tuple[tuple[float, float, str, str], ...]  # x, y, rate label, success label
    path: str
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]


def _curve_chart(curve: Curve) -> _CurveChart:
    left, top, plot_width, plot_height = 60, 16, 520, 220
    top_rate = max((p.p_inj for p in curve.points), default=0.0) or 1.0
    placed = [
        (round(left + p.p_inj / top_rate * plot_width, 1), round(top + (1 - (p.success_rate or 0.0)) * plot_height, 1),
         f"{p.p_inj:g}", f"{(p.success_rate or 0.0):.0%} of {p.runs}")
        for p in curve.points if p.runs
    ]
    path = " ".join(f"{'M' if i == 0 else 'L'}{x},{y}" for i, (x, y, _, _) in enumerate(placed))
    x_ticks = tuple((x, label) for x, _, label, _ in placed)
    shares = (0.0, 0.25, 0.5, 0.75, 1.0)
    y_ticks = tuple((round(top + (1 - share) * plot_height, 1), f"{share:.0%}") for share in shares)
    return _CurveChart(left + plot_width + 40, top + plot_height + 44, left, top, plot_width, plot_height,
                       tuple(placed), path, x_ticks, y_ticks)


def _timelines(results: Sequence[RunMetrics]) -> list[_Group]:
    groups: dict[str, list[RunMetrics]] = {}
    for r in results:
        if r.timeline or r.escalation is not None:
            groups.setdefault(r.scenario, []).append(r)
    return [_Group(name, tuple(runs)) for name, runs in groups.items()]


def render_html(results: Sequence[RunMetrics], *, curve: Curve | None = None, reference_incident: bool = True) -> str:
    """The report for ``results`` as one HTML document (a string): the verdict line first
    (:func:`tally`), then each guarded run's question, those that did not pass first with why
    (``RunMetrics.failed_checks``). With ``curve``, a section charting success against the
    injection rate and a table by injected failures per run. ``reference_incident``: compare
    with the reference incident (seed 000), after the runs' own rows; false for an eval of the
    user's own scenarios alone (``--only``), which it would only distract from."""
    from unstuck import __version__

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("unstuck.evals", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,  # every value redacted before it is escaped (unstuck.core.output)
    )
    template = environment.get_template("report.html.j2")
    return template.render(
        runs=list(results),
        scenario_count=len({r.scenario for r in results}),
        tally=tally(results),
        asked=_asked(results),
        reference_incident=reference_incident,
        incident_calls=REFERENCE_INCIDENT[0],
        incident_seconds=REFERENCE_INCIDENT[1],
        chart=_chart(results),
        comparisons=compare_modes(results),
        dimensions=DIMENSIONS,
        timelines=_timelines(results),
        version=__version__,
        curve=curve,
        curve_chart=_curve_chart(curve) if curve is not None else None,
    )


def write_html(results: Sequence[RunMetrics], path: Path, *, curve: Curve | None = None,
               reference_incident: bool = True) -> None:
    """Write the report (:func:`render_html`) to ``path`` (UTF-8; parent folders made;
    :func:`unstuck.core.output.write_text`)."""
    write_text(path, render_html(results, curve=curve, reference_incident=reference_incident))
