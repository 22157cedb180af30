"""The cost of blockers across sessions, read back from journals of real turns: a real program
run as a subprocess (signed out, then in), a lesson store, a virtual clock over several days."""

from __future__ import annotations

import datetime
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import unstuck.store.journal
from conftest import PlaybackModel
from pg_fixtures import StoreTarget
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind
from unstuck.decide.outcome import TurnResult, TurnStatus
from unstuck.loop.turn import run_turn
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore
from unstuck.store.report_costs import CostReport, read_costs
from unstuck.toolkit.specs import Toolset, tool

#: Every tool call takes this long on the virtual clock (the tools advance it).
CALL_S = 20.0
#: 2026-03-02 09:00 UTC, the first day's first turn.
DAY_1 = datetime.datetime(2026, 3, 2, 9, 0, tzinfo=datetime.UTC)

#: A CLI that is signed in when its state file says so (a real program, run as a subprocess).
PROGRAM = """\
import pathlib, sys
state = pathlib.Path(sys.argv[1]).read_text().strip()
args = sys.argv[2:]
if state != "in":
    print("cli: not logged in; run cli auth login", file=sys.stderr)
    sys.exit(1)
print("Logged in as robot" if args[:2] == ["auth", "status"] else "repo-a\\nrepo-b")
"""


class Wall:
    """``time`` for the journal: its wall clock is the test's virtual clock from DAY_1."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def time(self) -> float:
        return DAY_1.timestamp() + self.clock.now()

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()


@dataclass
class World:
    root: Path
    clock: VirtualClock = field(default_factory=lambda: VirtualClock(follow_real_time=False))

    def __post_init__(self) -> None:
        self.program = self.root / "cli.py"
        self.program.write_text(PROGRAM, encoding="utf-8")
        self.sign(False)

    def sign(self, signed_in: bool) -> None:
        (self.root / "state").write_text("in" if signed_in else "out", encoding="utf-8")

    def at(self, day: int, hour: int, minute: int = 0) -> None:
        """Move the clock to ``hour:minute`` UTC of day ``day`` (1 = DAY_1)."""
        target = (DAY_1 + datetime.timedelta(days=day - 1)).replace(hour=hour, minute=minute).timestamp()
        self.clock.advance(target - DAY_1.timestamp() - self.clock.now())

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.clock.advance(CALL_S)
        return subprocess.run([sys.executable, str(self.program), str(self.root / "state"), *args],
                              capture_output=True, text=True, timeout=30, check=False)

    def tools(self) -> Toolset:
        world = self

        @tool(subject=lambda a: a.get("name"))
        def check(name: str) -> dict[str, Any]:
            """Check the CLI's sign-in (declares the blocker, with its probe)."""
            proc = world.cli("auth", "status")
            if proc.returncode == 0:
                return {"status": "ok", "output": proc.stdout}
            return {"status": "error", "situation": {
                "kind": "auth", "subject": name, "interactive": True, "unblock": f"{name} auth login",
                "probe": {"tool": "check", "args": {"name": name}}, "detail": proc.stderr.strip()}}

        @tool(subject=lambda a: str(a.get("command", "")).split()[0])
        def run(command: str) -> dict[str, Any] | str:
            """Run a cli command."""
            proc = world.cli(*shlex.split(command)[1:])
            if proc.returncode:
                return {"status": "error", "exit_code": proc.returncode, "output": proc.stderr}
            return proc.stdout

        @tool(subject="registry")
        def push(tag: str) -> dict[str, Any]:
            """Push an image (the registry refuses this account: a declared permission blocker)."""
            world.clock.advance(CALL_S)
            return {"status": "error", "situation": {
                "kind": "permission", "subject": "registry", "unblock": "Ask an admin for the push role.",
                "detail": f"denied: push of {tag}"}}

        @tool(subject="files")
        def ls(path: str) -> str:
            """List a folder."""
            world.clock.advance(CALL_S)
            return "\n".join(sorted(p.name for p in Path(path).iterdir()))

        return Toolset([check, run, push, ls])

    def fingerprint(self, subject: str) -> str:
        return f"{self.program}|cli 1.0" if subject == "cli" else ""

    def turn(self, journal: Journal, replies: list[object], *, lessons: LessonStore | None = None) -> TurnResult:
        self.clock.advance(0)
        return run_turn("list my repos", model=PlaybackModel(replies), tools=self.tools(), unattended=True,
                        clock=self.clock, journal=journal, lessons=lessons, fingerprint=self.fingerprint)


#: Improvising after the blocker: three further failing calls, each different (never "stuck").
IMPROVISING: list[object] = [("check", {"name": "cli"}), ("run", {"command": "cli repo list"}),
                             ("run", {"command": "cli repo list --limit 5"}), ("run", {"command": "cli api /user/repos"}),
                             "gave up"]
#: The registry refuses, the agent lists files (a success elsewhere: still a step not spent on the
#: task), then pushes three more times.
PUSHING: list[object] = [("push", {"tag": "v1"}), ("ls", {"path": "."}), ("push", {"tag": "v1-retry"}),
                         ("push", {"tag": "latest"}), ("push", {"tag": "v1.0.0"}), "gave up"]


@dataclass(frozen=True)
class Fleet:
    """Two machines' journals of the scripted turns and what the script makes them cost."""

    journals: tuple[Path, Path] | tuple[str]  # one file per machine, or one shared store's URL
    first: TurnResult  # day 1, improvised on cli
    lesson_turn: TurnResult  # day 2, stopped by the lesson
    closed_at: float  # Unix seconds at which day 3's probe came back clean
    opened_at: float  # Unix seconds at which day 1's first signal ended


def build_fleet(root: Path, monkeypatch: pytest.MonkeyPatch, shared: str | None = None) -> Fleet:
    """Day 1: improvising on a signed-out cli (a lesson is stored); a turn with no blocker.
    Day 2: the same task on machine 1 stops on the lesson's probe; on machine 2 the registry
    refuses a push. Day 3, machine 2: signed in, the lesson's probe comes back clean.
    ``shared``: a store URL both machines journal and learn in (a fleet's shared store),
    instead of one journal file per machine and a lesson file."""
    world = World(root)
    monkeypatch.setattr(unstuck.store.journal, "time", Wall(world.clock))
    one, two = root / "machine1.db", root / "machine2.db"
    lessons: Path | str = root / "lessons.db" if shared is None else shared
    with LessonStore(lessons) as store, Journal(shared or one) as j1, Journal(shared or two) as j2:
        world.at(1, 9)
        first = world.turn(j1, list(IMPROVISING), lessons=store)
        assert first.status is TurnStatus.BLOCKED and len(store.active()) == 1
        world.at(1, 15)
        quiet = world.turn(j1, [("ls", {"path": str(root)}), "two files"])
        assert quiet.status is TurnStatus.DONE
        world.at(2, 9, 30)
        lesson_turn = world.turn(j1, list(IMPROVISING), lessons=store)
        assert lesson_turn.status is TurnStatus.BLOCKED and all(s.probe for s in lesson_turn.steps)
        world.at(2, 11)
        pushed = world.turn(j2, list(PUSHING))
        assert pushed.status is TurnStatus.BLOCKED
        world.sign(True)
        world.at(3, 10, 30)
        third = world.turn(j2, [("check", {"name": "cli"}), "signed in"], lessons=store)
        assert third.status is TurnStatus.DONE and store.active() == []
    opened = DAY_1.timestamp() + CALL_S  # day 1's check ended one call after 09:00
    closed = (DAY_1 + datetime.timedelta(days=2, hours=1, minutes=30)).timestamp() + CALL_S  # the probe's end
    return Fleet((one, two) if shared is None else (shared,), first, lesson_turn, closed, opened)


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    return build_fleet(tmp_path, monkeypatch)


@pytest.fixture
def report(fleet: Fleet) -> Iterator[CostReport]:
    with Journal(fleet.journals[0], readonly=True) as j1, Journal(fleet.journals[1], readonly=True) as j2:
        yield read_costs([j1, j2])


def day(n: int) -> datetime.date:
    return (DAY_1 + datetime.timedelta(days=n - 1)).date()


def test_each_day_subject_and_kind_gets_its_blocked_turns_and_wasted_steps_and_seconds(report: CostReport) -> None:
    rows = {(r.day, r.subject, r.kind): r for r in report.days}
    assert set(rows) == {(day(1), "cli", Kind.AUTH), (day(2), "cli", Kind.AUTH), (day(2), "registry", Kind.PERMISSION)}
    improvised = rows[day(1), "cli", Kind.AUTH]
    # a declared blocker's budget is 2 (DESIGN.md, "Defaults"): the third further failing call asks
    assert (improvised.blocked_turns, improvised.asked_turns, improvised.wasted_steps) == (1, 1, 3)
    assert improvised.wasted_seconds == pytest.approx(3 * CALL_S)
    registry = rows[day(2), "registry", Kind.PERMISSION]
    # every call after the blocker opened counts, the successful `ls` elsewhere too (measure(): "after")
    assert (registry.blocked_turns, registry.wasted_steps, registry.lesson_turns) == (1, 4, 0)
    assert registry.wasted_seconds == pytest.approx(4 * CALL_S)
    assert report.turns_read == 5 and len(report.turns) == 3  # the quiet turn and the signed-in one met no blocker


def test_a_turn_stopped_by_a_lessons_probe_wastes_nothing_and_saves_the_median_of_the_others(
        report: CostReport) -> None:
    row = next(r for r in report.days if (r.day, r.subject) == (day(2), "cli"))
    assert (row.blocked_turns, row.asked_turns, row.lesson_turns, row.wasted_steps) == (1, 1, 1, 0)
    assert row.wasted_seconds == 0.0
    assert row.steps_saved == 3.0  # the lesson-free turn that asked about cli wasted 3
    total = next(t for t in report.totals if t.subject == "cli")
    assert (total.baseline_steps, total.steps_saved, total.lesson_turns) == (3.0, 3.0, 1)


def test_the_blocker_closes_at_the_first_clean_probe_on_another_machine(report: CostReport, fleet: Fleet) -> None:
    cli = next(e for e in report.episodes if e.subject == "cli")
    assert (cli.turns, cli.closed_by) == (2, "probe clean")
    assert cli.closed_after_s == pytest.approx(fleet.closed_at - fleet.opened_at)
    assert cli.closed_after_s == pytest.approx(2 * 86400 + 90 * 60)
    first_day = next(r for r in report.days if (r.day, r.subject) == (day(1), "cli"))
    assert first_day.closed_after_s == cli.closed_after_s and first_day.still_open == 0
    registry = next(e for e in report.episodes if e.subject == "registry")
    assert registry.closed_at is None and registry.closed_after_s is None
    assert next(r for r in report.days if r.subject == "registry").still_open == 1


def test_the_journal_gives_the_same_cost_as_the_turn_measured_in_memory(report: CostReport, fleet: Fleet) -> None:
    for result in (fleet.first, fleet.lesson_turn):
        cost = next(c for c in report.turns if c.turn_id == result.turn_id)
        first = result.first_signal_step()
        assert first is not None and result.escalated_at_s is not None
        assert cost.wasted_steps == len([s for s in result.steps_since_first_signal() if not s.retry])
        assert cost.wasted_seconds == pytest.approx(result.escalated_at_s - (first.started_s + first.duration_s))
        assert result.escalation is not None and (cost.subject, cost.kind) == (result.escalation.subject,
                                                                               result.escalation.kind)


def test_top_blockers_come_most_wasted_steps_first(report: CostReport) -> None:
    assert [(t.subject, t.wasted_steps) for t in report.totals] == [("registry", 4), ("cli", 3)]


def test_since_keeps_the_turns_that_started_on_that_day_or_later(fleet: Fleet) -> None:
    with Journal(fleet.journals[0], readonly=True) as j1, Journal(fleet.journals[1], readonly=True) as j2:
        later = read_costs([j1, j2], since=day(2))
    assert {r.day for r in later.days} == {day(2)} and later.turns_read == 3
    cli = next(r for r in later.days if r.subject == "cli")
    assert cli.steps_saved is None  # no lesson-free turn on cli since day 2 to compare with


def test_the_json_form_names_days_and_kinds_as_words(report: CostReport) -> None:
    import json

    data = json.loads(report.to_json())
    assert data["days"][0]["day"] == "2026-03-02" and data["days"][0]["kind"] == "auth"
    assert data["episodes"][0]["closed_after_s"] == pytest.approx(2 * 86400 + 90 * 60)


def test_an_unguarded_turn_never_asks_and_wastes_every_call_after_the_blocker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(tmp_path)
    monkeypatch.setattr(unstuck.store.journal, "time", Wall(world.clock))
    with Journal(tmp_path / "bare.db") as journal:
        world.at(1, 9)
        result = run_turn("list my repos", model=PlaybackModel(list(IMPROVISING)), tools=world.tools(),
                          unattended=True, guarded=False, clock=world.clock, journal=journal)
        assert result.status is TurnStatus.DONE and result.escalation is None
        report = read_costs([journal])
    (cost,) = report.turns
    # measure() without an escalation: every call after the blocker opened, to the turn's end
    assert (cost.subject, cost.kind, cost.asked, cost.lesson, cost.wasted_steps) == ("cli", Kind.AUTH, False, False, 3)
    assert cost.wasted_seconds == pytest.approx(3 * CALL_S)
    (row,) = report.days
    assert (row.blocked_turns, row.asked_turns, row.still_open) == (1, 0, 1)
    assert report.totals[0].baseline_steps is None  # a turn that never asked is no baseline for savings


def test_a_fleets_shared_postgresql_journal_reports_what_one_journal_per_machine_reports(
        report: CostReport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_store: StoreTarget) -> None:
    (tmp_path / "shared").mkdir()
    shared = build_fleet(tmp_path / "shared", monkeypatch, pg_store.url)
    with Journal(pg_store.url, readonly=True) as journal:
        together = read_costs([journal])
    assert together.journals == (pg_store.where,) and "***" in pg_store.where  # the password never shown
    assert (together.turns_read, together.days, together.totals) == (report.turns_read, report.days, report.totals)
    assert [(c.subject, c.kind, c.wasted_steps, c.wasted_seconds, c.lesson) for c in together.turns] == \
        [(c.subject, c.kind, c.wasted_steps, c.wasted_seconds, c.lesson) for c in report.turns]
    assert [(e.subject, e.closed_at, e.closed_by) for e in together.episodes] == \
        [(e.subject, e.closed_at, e.closed_by) for e in report.episodes]
    assert shared.closed_at in [e.closed_at for e in together.episodes]


def test_an_unknown_recorded_decision_is_an_error_naming_the_journal_table_and_row_never_a_close(
        fleet: Fleet) -> None:
    """Day 2's turn stopped on a lesson (a ``known`` decision); the same row holding a word no
    release records is not counted as anything (before issue 24 it was read as ``close``)."""
    import sqlite3

    from unstuck.store.journal import JournalError
    from unstuck.store.report_costs import turn_cost

    path = fleet.journals[0]
    assert isinstance(path, Path)
    db = sqlite3.connect(path)
    try:
        with db:
            (rowid,) = db.execute("SELECT rowid FROM decisions WHERE action = 'known'").fetchone()
            db.execute("UPDATE decisions SET action = 'dismiss' WHERE rowid = ?", (rowid,))
    finally:
        db.close()
    with Journal(path, readonly=True) as one, Journal(fleet.journals[1], readonly=True) as two:
        with pytest.raises(JournalError) as caught:
            read_costs([one, two])
        assert f"{path}: table decisions, row rowid={rowid}: action 'dismiss' is not one of" in str(caught.value)
        turn = next(t for t in one.turns() if t.turn_id == fleet.lesson_turn.turn_id)
        with pytest.raises(ValueError, match="dismiss"):
            turn_cost(turn, one.steps(turn.turn_id), [(0, "dismiss", "cli")])  # type: ignore[list-item]
