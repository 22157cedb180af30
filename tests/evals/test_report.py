"""The HTML report: self-contained, and what headless Chromium shows of it at 1280 px (the verdict
line, each guarded run's question, why a run did not pass, no sideways scroll), read from the
laid-out page over the DevTools protocol (tests/chromium.py), not from the HTML source."""

from __future__ import annotations

import dataclasses
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from chromium import LAYOUT, WIDTH, Browser
from unstuck.evals.report import render_html, write_html
from unstuck.evals.runner import RunMetrics, compare_modes, run_eval
from unstuck.evals.scenarios import Scenario, builtin_scenarios

#: What the runner says when the question lacks the expected unblock (runner._failed_checks).
MISSED_UNBLOCK = "unblock: 'aws sso login' is not in the question's 'You need to' part"


def my_incident() -> Scenario:
    """A user's own scenario (not bundled) whose expectation the guarded run misses: it is
    gh_logged_out expecting ``aws sso login`` in the question, where the question says ``gh auth login``."""
    original = next(s for s in builtin_scenarios() if s.name == "gh_logged_out")
    return dataclasses.replace(original, name="my_incident", bundled=False,
                               expect=dataclasses.replace(original.expect, unblock="aws sso login"))


@pytest.fixture(scope="module")
def results() -> list[RunMetrics]:
    chosen = [s for s in builtin_scenarios() if s.name in ("gh_logged_out", "wrong_path")]
    return run_eval(chosen, agents=["improviser", "compliant"])


@pytest.fixture(scope="module")
def own() -> list[RunMetrics]:
    return run_eval([my_incident()], agents=["improviser"])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(tmp_path_factory.mktemp("chromium")) as opened:
        yield opened


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (the PNG specification, 11.2.2)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_report_loads_nothing_from_the_network(results: list[RunMetrics]) -> None:
    page = render_html(results)
    assert "<script" not in page and "<link" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", page)


def test_report_escapes_what_scenarios_say(results: list[RunMetrics]) -> None:
    hostile = [dataclasses.replace(results[0], scenario="<img src=x onerror=alert(1)>")]
    page = render_html(hostile)
    assert "<img src=x" not in page and "&lt;img src=x" in page


def test_chromium_renders_the_run_table_and_the_chart(results: list[RunMetrics], tmp_path: Path,
                                                      browser: Browser) -> None:
    page = tmp_path / "report.html"
    write_html(results, page)
    browser.open(page)
    assert browser.evaluate("document.querySelectorAll('#runs tr.run').length") == len(results)
    wasteful = [c for c in compare_modes(results) if c.unguarded_wasted_calls or c.guarded_wasted_calls]
    bars = browser.evaluate("document.querySelectorAll('#wasted-chart rect.bar').length")
    assert bars == 2 * len(wasteful) > 0
    table = browser.evaluate("document.getElementById('comparisons').innerText")
    improviser = next(c for c in compare_modes(results) if (c.scenario, c.agent) == ("gh_logged_out", "improviser"))
    assert f"{improviser.unguarded_wasted_calls} / {improviser.guarded_wasted_calls}" in table
    assert f"{improviser.calls_ratio:.1f}x" in table
    assert browser.evaluate("document.querySelectorAll('.call.charged').length") > 0, \
        "the timeline marks calls charged to the blocker"


def test_the_page_leads_with_the_verdict_and_the_bundled_runs_end_with_the_incident_to_beat(
        results: list[RunMetrics], tmp_path: Path, browser: Browser) -> None:
    page = tmp_path / "report.html"
    write_html(results, page)
    browser.open(page)
    guarded = len(results) // 2  # each run once unguarded, once guarded (run_eval's modes)
    # every bundled guarded run passes (README: "yes in every guarded row's pass column"); neither
    # scenario states an unguarded outcome for these agents unless its file says so
    stated = [r for r in results if not r.guarded and r.as_stated is not None]
    verdict = browser.evaluate("document.getElementById('verdict').innerText")
    assert verdict == (f"{guarded} of {guarded} guarded runs passed; "
                       f"{len(stated)} of {len(stated)} unguarded as stated")
    first = browser.evaluate("document.querySelector('h1').nextElementSibling.id")
    assert first == "verdict"
    rows = browser.evaluate("[...document.querySelectorAll('#comparisons tbody tr')].map(r => r.innerText)")
    assert rows[-1].startswith("reference incident (seed 000)") and "43 / –" in rows[-1]
    assert not any("reference incident" in row for row in rows[:-1])


def test_a_guarded_run_that_did_not_pass_shows_why_and_every_guarded_run_its_question(
        own: list[RunMetrics], results: list[RunMetrics], tmp_path: Path, browser: Browser) -> None:
    page = tmp_path / "own.html"
    write_html([*results, *own], page, reference_incident=False)
    browser.open(page)
    browser.screenshot(tmp_path / "own.png")
    guarded = len(results) // 2 + 1
    verdict = browser.evaluate("document.getElementById('verdict').innerText")
    assert verdict.startswith(f"{guarded - 1} of {guarded} guarded runs passed; ")
    failed = browser.evaluate("""(() => { const el = document.querySelector('#asked .asked.notpassed');
        const r = el.getBoundingClientRect();
        return {text: el.innerText, top: Math.round(r.top), visible: r.width > 0 && r.height > 0,
                first: document.querySelector('#asked .asked') === el}; })()""")
    assert failed["visible"] and failed["first"], "the run that did not pass comes first in its section"
    assert failed["text"].startswith("my_incident · improviser")
    assert MISSED_UNBLOCK in failed["text"] and "did not pass" in failed["text"]
    asked = browser.evaluate("document.getElementById('asked').innerText")
    for r in [*results, *own]:
        if r.guarded and r.escalation:
            assert r.escalation.splitlines()[0] in asked  # the question itself, as the user reads it
    assert asked.count("You need to: Run: gh auth login") == sum(
        1 for r in [*results, *own] if r.guarded and r.escalation and "gh auth login" in r.escalation)


def test_an_eval_of_only_the_users_scenarios_does_not_show_the_reference_incident(
        own: list[RunMetrics], tmp_path: Path, browser: Browser) -> None:
    page = tmp_path / "only.html"
    write_html(own, page, reference_incident=False)
    browser.open(page)
    text = browser.evaluate("document.body.innerText")
    assert "reference incident" not in text and "seed 000" not in text
    assert browser.evaluate("document.getElementById('verdict').innerText") == \
        "0 of 1 guarded runs passed; 0 of 0 unguarded as stated"


def test_the_page_never_scrolls_sideways_at_1280_px(own: list[RunMetrics], results: list[RunMetrics],
                                                    tmp_path: Path, browser: Browser) -> None:
    long_name = "a_scenario_name_" * 12  # one word longer than the page: it wraps, it does not widen it
    runs = [*results, *own, *(dataclasses.replace(r, scenario=long_name) for r in own)]
    page = tmp_path / "wide.html"
    write_html(runs, page)
    browser.open(page)
    layout = browser.evaluate(LAYOUT)
    shot = browser.screenshot(tmp_path / "wide.png")
    assert png_size(shot)[0] == WIDTH
    assert layout["clientWidth"] == WIDTH
    assert layout["scrollWidth"] <= WIDTH, layout
    # the run table is wider than the page: it scrolls inside its own box, not the page
    box = browser.evaluate("""(() => { const t = document.getElementById('runs'); const b = t.parentElement;
        return {table: t.scrollWidth, box: b.clientWidth, overflow: getComputedStyle(b).overflowX}; })()""")
    assert box["overflow"] == "auto" and box["box"] <= WIDTH


def test_a_missing_chromium_fails_under_ci_and_skips_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chromium import chromium_binary

    empty = str(tmp_path)  # a PATH with no browser on it
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium is required under CI"):
        chromium_binary(empty)
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        chromium_binary(empty)
    assert chromium_binary().endswith("chromium")  # this machine has Debian's (./bootstrap)
