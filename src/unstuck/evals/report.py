"""The eval's self-contained HTML report: run table, judged dimensions, a chart of wasted
calls unguarded against guarded, and a timeline of the calls after each blocker opened.

The page is one file (inline CSS and SVG, no script, nothing fetched from the network),
rendered from ``templates/report.html.j2`` with jinja2 (autoescaped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from unstuck.evals.judge import DIMENSIONS
from unstuck.evals.runner import REFERENCE_INCIDENT, RunMetrics, compare_modes

__all__ = ["render_html", "write_html"]

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


def _timelines(results: Sequence[RunMetrics]) -> list[_Group]:
    groups: dict[str, list[RunMetrics]] = {}
    for r in results:
        if r.timeline or r.escalation is not None:
            groups.setdefault(r.scenario, []).append(r)
    return [_Group(name, tuple(runs)) for name, runs in groups.items()]


def render_html(results: Sequence[RunMetrics]) -> str:
    """The report for ``results`` as one HTML document (a string)."""
    from unstuck import __version__

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("unstuck.evals", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    template = environment.get_template("report.html.j2")
    return template.render(
        runs=list(results),
        scenario_count=len({r.scenario for r in results}),
        incident_calls=REFERENCE_INCIDENT[0],
        incident_seconds=REFERENCE_INCIDENT[1],
        chart=_chart(results),
        comparisons=compare_modes(results),
        dimensions=DIMENSIONS,
        timelines=_timelines(results),
        version=__version__,
    )


def write_html(results: Sequence[RunMetrics], path: Path) -> None:
    """Write the report to ``path`` (UTF-8; parent folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(results), encoding="utf-8")
