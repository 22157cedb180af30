"""``unstuck report`` run as a user runs it (a real process) over journals of real turns: the
table, JSON, the HTML page rendered by headless Chromium, and clear errors for bad files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_report_costs import CALL_S, IMPROVISING, Fleet, Wall, World, build_fleet

import unstuck.store.journal as journal_module
from chromium import LAYOUT, WIDTH, Browser
from conftest import PlaybackModel
from unstuck.loop.turn import run_turn
from unstuck.store.journal import Journal

UNSTUCK = [sys.executable, "-m", "unstuck"]


def unstuck(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([*UNSTUCK, *args], capture_output=True, text=True, timeout=120, env=env, check=False,
                          cwd=cwd)


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    return build_fleet(tmp_path, monkeypatch)


def journals(fleet: Fleet) -> list[str]:
    return [arg for path in fleet.journals for arg in ("--journal", str(path))]


def test_the_table_shows_each_day_subject_and_kind_with_its_cost(fleet: Fleet) -> None:
    proc = unstuck("report", *journals(fleet))
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("│") for line in proc.stdout.splitlines() if "2026-03-0" in line]
    cells = [[c.strip() for c in row if c.strip()] for row in rows]
    # day, subject, kind, blocked, asked, wasted steps, wasted s, lesson-stopped, steps saved, closed after, open
    assert ["2026-03-02", "cli", "auth", "1", "1", "3", f"{3 * CALL_S:.0f}", "0", "–", "2d 1h 30m", "0"] in cells
    assert ["2026-03-03", "cli", "auth", "1", "1", "0", "0", "1", "3", "–", "0"] in cells
    assert ["2026-03-03", "registry", "permission", "1", "1", "4", f"{4 * CALL_S:.0f}", "0", "–", "–", "1"] in cells
    assert "5 turns read from 2 journal(s); 3 met a blocker." in proc.stdout


def test_json_to_standard_output_carries_the_days_and_since_filters_them(fleet: Fleet) -> None:
    proc = unstuck("report", *journals(fleet), "--json", "-", "--since", "2026-03-03")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {d["day"] for d in data["days"]} == {"2026-03-03"} and data["since"] == "2026-03-03"
    assert [(t["subject"], t["wasted_steps"]) for t in data["totals"]] == [("registry", 4), ("cli", 0)]


def test_the_default_journal_is_the_one_unstuck_journal_reads(fleet: Fleet, tmp_path: Path) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "unstuck-journal.db").write_bytes(fleet.journals[1].read_bytes())
    proc = unstuck("report", "--json", "-", cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert [d["subject"] for d in json.loads(proc.stdout)["days"]] == ["registry"]


def add_unguarded_turn(fleet: Fleet, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Day 1, 12:00, machine 1: the same improvising script run unguarded (an eval's baseline):
    it never asks and wastes its three further calls on cli (test_report_costs: measure())."""
    root.mkdir()
    world = World(root)
    monkeypatch.setattr(journal_module, "time", Wall(world.clock))
    world.at(1, 12)
    with Journal(fleet.journals[0]) as journal:
        result = run_turn("list my repos", model=PlaybackModel(list(IMPROVISING)), tools=world.tools(),
                          unattended=True, guarded=False, clock=world.clock, journal=journal)
    assert result.escalation is None


@pytest.mark.slow
def test_chromium_shows_guarded_and_unguarded_turns_apart_one_colour_per_subject(
        fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_unguarded_turn(fleet, tmp_path / "bare", monkeypatch)
    page = tmp_path / "out" / "costs.html"
    proc = unstuck("report", *journals(fleet), "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "http://" not in text and "https://" not in text  # self-contained
    with Browser(tmp_path / "chromium") as browser:
        browser.open(page)
        browser.screenshot(tmp_path / "costs.png")
        layout = browser.evaluate(LAYOUT)
        assert layout["scrollWidth"] <= WIDTH, layout
        # the script's costs (test_report_costs): guarded 3 + 0 (the lesson) + 4 steps, unguarded 3
        assert browser.evaluate("document.getElementById('modes').innerText") == (
            f"3 guarded turns met a blocker and wasted 7 steps and {7 * CALL_S:.0f} s before asking · "
            f"1 unguarded turn (no policy: they never ask) wasted 3 steps and {3 * CALL_S:.0f} s after the blocker.")
        assert browser.evaluate("document.querySelectorAll('#guarded-turns tr.turn').length") == 3
        unguarded = browser.evaluate("[...document.querySelectorAll('#unguarded-turns tr.turn')].map(r => r.innerText)")
        assert len(unguarded) == 1 and "\tcli\tauth\tdone\tno\tno\t3\t60" in unguarded[0]
        lines = browser.evaluate("""[...document.querySelectorAll('#wasted-over-time g.line')].map(g => {
            const p = g.querySelector('path.series');
            return {guarded: p.classList.contains('guarded'), colour: getComputedStyle(p).stroke,
                    dashed: getComputedStyle(p).strokeDasharray !== 'none',
                    tips: [...g.querySelectorAll('circle.point title')].map(t => t.textContent)}; })""")
        subjects = [line["tips"][0].split(" ")[0] for line in lines]
        assert sorted(zip(subjects, [(x["guarded"], x["dashed"]) for x in lines], strict=True)) == [
            ("cli", (False, True)), ("cli", (True, False)), ("registry", (True, False))]  # cli unguarded: dashed
        tips = [tip for line in lines for tip in line["tips"]]
        assert "cli 2026-03-02: 3 wasted steps (guarded)" in tips
        assert "cli 2026-03-02: 3 wasted steps (unguarded)" in tips
        assert "registry 2026-03-03: 4 wasted steps (guarded)" in tips
        bars = browser.evaluate("""[...document.querySelectorAll('#top-blockers rect.bar')].map(b => ({
            title: b.querySelector('title').textContent, colour: getComputedStyle(b).fill}))""")
        # most wasted steps first: cli 3 + 3 (guarded, unguarded), then registry 4
        assert [b["title"] for b in bars] == ["cli (auth), guarded: 3 steps", "cli (auth), unguarded: 3 steps",
                                              "registry (permission), guarded: 4 steps"]
        colours: dict[str, set[str]] = {}
        for subject, line in zip(subjects, lines, strict=True):
            colours.setdefault(subject, set()).add(line["colour"])
        for bar in bars:
            colours.setdefault(bar["title"].split(" ")[0], set()).add(bar["colour"])
        assert {subject: len(seen) for subject, seen in colours.items()} == {"cli": 1, "registry": 1}, colours
        assert colours["cli"] != colours["registry"]  # one colour per subject, and two subjects
        swatches = browser.evaluate("""[...document.querySelectorAll('tr.turn .swatch')].map(s => [
            s.parentElement.innerText.trim(), getComputedStyle(s).backgroundColor])""")
        assert {(subject, colour) for subject, colour in swatches} == {
            ("cli", next(iter(colours["cli"]))), ("registry", next(iter(colours["registry"])))}
    assert len(re.findall(r'<tr class="day">', text)) == 3


def test_a_missing_journal_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.db"
    proc = unstuck("report", "--journal", str(missing))
    assert proc.returncode == 2 and str(missing) in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_a_corrupt_journal_is_a_usage_error_naming_it_and_left_untouched(tmp_path: Path) -> None:
    corrupt = tmp_path / "notes.db"
    corrupt.write_bytes(b"not a database, someone's notes\n" * 64)
    before = corrupt.read_bytes()
    proc = unstuck("report", "--journal", str(corrupt))
    assert proc.returncode == 2 and str(corrupt) in proc.stderr.replace("\n", "")
    assert "Traceback" not in proc.stderr + proc.stdout and corrupt.read_bytes() == before


def test_a_since_that_is_not_a_date_is_a_usage_error(fleet: Fleet) -> None:
    proc = unstuck("report", *journals(fleet), "--since", "last tuesday")
    assert proc.returncode == 2 and "--since" in proc.stderr and "Traceback" not in proc.stderr


def test_a_journal_named_twice_is_read_once(fleet: Fleet) -> None:
    proc = unstuck("report", *journals(fleet), "--journal", str(fleet.journals[0]), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["turns_read"] == 5 and data["journals"] == [str(path) for path in fleet.journals]


def test_an_unknown_recorded_decision_is_a_usage_error_naming_the_journal_table_and_row(fleet: Fleet) -> None:
    import sqlite3

    path = fleet.journals[0]
    assert isinstance(path, Path)
    db = sqlite3.connect(path)
    try:
        with db:
            (rowid,) = db.execute("SELECT rowid FROM decisions WHERE action = 'known'").fetchone()
            db.execute("UPDATE decisions SET action = 'dismiss' WHERE rowid = ?", (rowid,))
    finally:
        db.close()
    before = path.read_bytes()
    proc = unstuck("report", *journals(fleet))
    said = proc.stderr.replace("\n", "")
    assert proc.returncode == 2 and f"{path}: table decisions, row rowid={rowid}: action 'dismiss'" in said, said
    assert "Traceback" not in proc.stderr + proc.stdout and path.read_bytes() == before
