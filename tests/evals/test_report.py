"""The HTML report: self-contained, and what headless Chromium sees in it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from unstuck.evals.report import render_html, write_html
from unstuck.evals.runner import RunMetrics, compare_modes, run_eval
from unstuck.evals.scenarios import builtin_scenarios


@pytest.fixture(scope="module")
def results() -> list[RunMetrics]:
    chosen = [s for s in builtin_scenarios() if s.name in ("gh_logged_out", "wrong_path")]
    return run_eval(chosen, agents=["improviser", "compliant"])


def test_report_loads_nothing_from_the_network(results: list[RunMetrics]) -> None:
    page = render_html(results)
    assert "<script" not in page and "<link" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", page)


def test_report_escapes_what_scenarios_say(results: list[RunMetrics]) -> None:
    from dataclasses import replace

    hostile = [replace(results[0], scenario="<img src=x onerror=alert(1)>")]
    page = render_html(hostile)
    assert "<img src=x" not in page and "&lt;img src=x" in page


def chromium_dom(page: Path, tmp_path: Path) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("Debian's chromium is required (./bootstrap installs it)")
    proc = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_chromium_renders_the_run_table_and_the_chart(results: list[RunMetrics], tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_html(results, page)
    dom = chromium_dom(page, tmp_path)
    rows = re.findall(r'<tr class="run">', dom)
    assert len(rows) == len(results)
    chart = re.search(r'<svg id="wasted-chart".*?</svg>', dom, re.DOTALL)
    assert chart is not None
    bars = re.findall(r'<rect class="bar (unguarded|guarded)"', chart.group(0))
    wasteful = [c for c in compare_modes(results) if c.unguarded_wasted_calls or c.guarded_wasted_calls]
    assert len(bars) == 2 * len(wasteful) > 0
    assert "gh_logged_out" in dom and "reference incident: 43 calls" in dom
    table = re.search(r'<table id="comparisons">.*?</table>', dom, re.DOTALL)
    assert table is not None and "reference incident (seed 000)" in table.group(0)
    improviser = next(c for c in compare_modes(results) if (c.scenario, c.agent) == ("gh_logged_out", "improviser"))
    assert f"{improviser.unguarded_wasted_calls} / {improviser.guarded_wasted_calls}" in table.group(0)
    assert f"{improviser.calls_ratio:.1f}x" in table.group(0)
    assert 'class="call charged' in dom, "the timeline marks calls charged to the blocker"
