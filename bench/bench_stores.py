"""Benchmark: the journal and the lesson store on SQLite beside PostgreSQL, and a fleet's turns
per second (issue 16), all in one run on one machine.

PostgreSQL is a throw-away cluster started by this run (tests/pg_cluster.py: ``initdb`` into a
temporary folder, reached over TCP on 127.0.0.1) with PostgreSQL's durable defaults
(``PostgresCluster(durable=True)``: ``fsync``, ``synchronous_commit`` and ``full_page_writes``
on), so a synced commit waits for the disk as the journal's synced commits on SQLite do. The
SQLite cases run twice: in a file on the disk (the working folder, ``synchronous=FULL``: the
like-for-like baseline) and on a tmpfs (``/dev/shm``, where an fsync returns at once: the
cost of the SQL alone).

1. **Per-call journal cost.** One turn of ``--calls`` write calls (default 300) through
   :func:`unstuck.loop.turn.run_turn` with a scripted model (bench/bench_journal.py's
   ``CountingModel`` and ``ledger_tools``): without a journal (the baseline), then with a
   :class:`~unstuck.store.journal.Journal` on each store. Each write call costs the journal an effect
   intent (a synced commit), a receipt and a checkpoint. Printed: microseconds per call, best
   of ``--repeats``; the journal's added cost per call (journal minus none); the ratio
   PostgreSQL / SQLite of the added cost.
2. **Lesson lookups** on a store of ``--lessons`` lessons (default 1,000, recorded through
   :meth:`LessonStore.record <unstuck.store.lessons.LessonStore.record>`, 50 declaring tools, one in
   ten closed): the turn-start query as :meth:`unstuck.guard.lessons.LessonKeeper.known_blockers`
   asks it (``active(tools=5 of the 50, limit=CANDIDATES_AT_START)``) and the lookup before a
   call (``on_subject``, half the subjects with a lesson, half without). Printed: p50 and p99
   in microseconds; the ratio PostgreSQL / SQLite of the p50.
3. **Turns per second on PostgreSQL**: ``--workers`` worker processes (default 16, 8 named
   ``machine-a`` and 8 ``machine-b``; tests/fleet_worker.py), each with its own journal and
   lesson store connections on one database, each running ``--turns`` turns of ``--writes``
   write calls (each inserting a row into a second database). One worker alone is the baseline
   in the same run. Counted from the start gate's opening (all processes started, stores open)
   to the last turn's end. Printed: turns per second and the ratio to one worker.

Run: ``.venv/bin/python bench/bench_stores.py`` (options: ``--calls N --repeats R --lessons N
--lookups N --workers N --turns N --writes N``). Needs PostgreSQL's server programs
(``./bootstrap`` installs them) and ``unstuck[postgres]``.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))  # the throw-away cluster and the fleet worker live with the tests

from bench_journal import CountingModel, ledger_tools  # noqa: E402

from fleet_worker import prepare_effects, run_fleet, standard_plans  # noqa: E402
from pg_cluster import PostgresCluster  # noqa: E402
from unstuck.core.clock import VirtualClock  # noqa: E402
from unstuck.core.situations import Kind, Situation  # noqa: E402
from unstuck.guard.lessons import CANDIDATES_AT_START  # noqa: E402
from unstuck.loop.turn import run_turn  # noqa: E402
from unstuck.store.journal import Journal  # noqa: E402
from unstuck.store.lessons import LessonStore  # noqa: E402

TOOLS = 50
IN_PLAY = 5
FINGERPRINT = "/usr/bin/tool|tool version 1.0"
TMPFS = Path("/dev/shm")
#: Seconds to let closed backends' statistics reach pg_stat_database (PostgreSQL 15 flushes
#: them when a backend exits or idles, at most once a second: PGSTAT_MIN_INTERVAL).
STATS_SETTLE_S = 1.2


@dataclass(frozen=True, slots=True)
class Store:
    """One place a store can live: its label, and a function giving a new store URL each time."""

    label: str
    fresh: Callable[[], str]


def journal_turn(calls: int, url: str | None) -> float:
    """Seconds of one turn of ``calls`` write calls, with a journal on ``url`` (none for ``None``)."""
    ledger: list[int] = []
    journal = Journal(url) if url is not None else None
    started = time.perf_counter()
    result = run_turn("fill the ledger", model=CountingModel(calls, "write_ledger"), tools=ledger_tools(ledger),
                      unattended=True, clock=VirtualClock(), journal=journal, max_steps=calls + 5, stall_after_s=None)
    elapsed = time.perf_counter() - started
    if journal is not None:
        intents = sum(1 for _ in journal.intents(result.turn_id))
        journal.close()
        assert intents == calls, f"{intents} intents for {calls} write calls"
    assert result.status.value == "done" and len(ledger) == calls, result.error
    return elapsed


def pg_commits(url: str) -> tuple[int, int, int]:
    """(committed transactions, rows inserted, rows updated) of ``url``'s database so far
    (``pg_stat_database``; a backend reports its counts when it goes idle or exits)."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SELECT pg_stat_clear_snapshot()")
        row = connection.execute("SELECT xact_commit, tup_inserted, tup_updated FROM pg_stat_database"
                                 " WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def pg_work_per_call(url: str, calls: int) -> tuple[float, ...]:
    """PostgreSQL's committed transactions, inserted and updated rows per added write call:
    a turn of ``2 * calls`` minus a turn of ``calls``, over ``calls`` (fixed costs cancel)."""
    Journal(url).close()  # the schema (catalog rows) first, outside the counts
    time.sleep(STATS_SETTLE_S)
    counts: list[tuple[int, ...]] = []
    for n in (calls, 2 * calls):
        before = pg_commits(url)
        journal_turn(n, url)
        time.sleep(STATS_SETTLE_S)
        after = pg_commits(url)
        counts.append(tuple(b - a for a, b in zip(before, after, strict=True)))
    return tuple((twice - once) / calls for once, twice in zip(*counts, strict=True))


def fill_lessons(url: str, size: int) -> None:
    """``size`` lessons through the public API, one in ten closed."""
    with LessonStore(url) as store:
        for i in range(size):
            lesson = store.record(Situation(Kind.AUTH, f"tool{i}", unblock=f"tool{i} auth login"),
                                  tool=f"declarer{i % TOOLS}", fingerprint=FINGERPRINT,
                                  content=f"tool{i} was not signed in", source="escalated", now_s=1e9 + i)
            if i % 10 == 0:
                store.invalidate(lesson.id, "bench: closed")


def lesson_lookups(url: str, size: int, count: int) -> tuple[list[float], list[float]]:
    """(turn-start query µs, on_subject lookup µs), ``count`` of each."""
    rng = random.Random(size)
    starts: list[float] = []
    lookups: list[float] = []
    with LessonStore(url) as store:
        for _ in range(count):
            tools = [f"declarer{rng.randrange(TOOLS)}" for _ in range(IN_PLAY)]
            began = time.perf_counter_ns()
            found = store.active(tools=tools, limit=CANDIDATES_AT_START)
            starts.append((time.perf_counter_ns() - began) / 1000)
            active = sum(1 for i in range(size) if f"declarer{i % TOOLS}" in tools and i % 10 != 0)
            assert len(found) == min(active, CANDIDATES_AT_START) and all(x.active for x in found)
        for _ in range(count):
            n = rng.randrange(size)
            subject = f"tool{n}" if rng.random() < 0.5 else f"absent{n}"
            began = time.perf_counter_ns()
            lessons = store.on_subject(subject)
            lookups.append((time.perf_counter_ns() - began) / 1000)
            assert len(lessons) == (1 if subject.startswith("tool") and n % 10 != 0 else 0)
    return sorted(starts), sorted(lookups)


def p(values: list[float], q: float) -> float:
    return values[min(int(q * len(values)), len(values) - 1)]


def fleet_rate(cluster: PostgresCluster, workers: int, turns: int, writes: int,
               folder: Path) -> tuple[float, int, float]:
    """(turns per second, turns, the workers' mean CPU ms per turn) of ``workers`` processes
    on fresh databases of ``cluster``."""
    suffix = secrets.token_hex(4)
    store = cluster.create_database(f"bench_store_{suffix}")
    effects = cluster.create_database(f"bench_effects_{suffix}")
    prepare_effects(effects)
    Journal(store).close()  # the schemas before the workers start
    LessonStore(store).close()
    run = run_fleet(standard_plans(workers, turns, writes, lesson=False), store, effects, folder / suffix)
    done = sum(1 for r in run.reports if r.status == "done")
    assert done == workers * turns, f"{done} of {workers * turns} turns done"
    return done / run.seconds, done, statistics.mean(r.cpu_s for r in run.reports) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lessons", type=int, default=1000)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--writes", type=int, default=2)
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with (PostgresCluster(durable=True) as cluster, tempfile.TemporaryDirectory(dir=Path.cwd()) as on_disk,
          tempfile.TemporaryDirectory(dir=TMPFS if TMPFS.is_dir() else None) as in_memory):

        def sqlite_in(folder: str) -> Callable[[], str]:
            return lambda: f"sqlite:///{Path(folder) / f'{secrets.token_hex(6)}.db'}"

        stores = [Store("SQLite, tmpfs", sqlite_in(in_memory)), Store("SQLite, disk", sqlite_in(on_disk)),
                  Store("PostgreSQL", lambda: cluster.create_database(f"bench_{secrets.token_hex(6)}"))]
        print(f"PostgreSQL {cluster.bin_dir} on 127.0.0.1:{cluster.port} (durable: fsync, synchronous_commit on); "
              f"SQLite on {in_memory} (tmpfs) and {on_disk} (disk, synchronous=FULL)", flush=True)

        n, r = args.calls, args.repeats
        journal_turn(n, None)  # warm: imports, the signal table, the first turn's caches
        bare = min(journal_turn(n, None) for _ in range(r)) / n * 1e6
        per_call: dict[str, float] = {}
        for store in stores:
            url = store.fresh()
            Journal(url).close()  # the schema, outside the timing
            per_call[store.label] = min(journal_turn(n, url) for _ in range(r)) / n * 1e6
        print(f"\n1. journal, one turn of {n} write calls, best of {r}, µs per call (added: minus no journal)")
        print(f"   no journal            {bare:8.0f}")
        for label, us in per_call.items():
            print(f"   {label:<21} {us:8.0f}  added {us - bare:7.0f}")
        pg_added = per_call["PostgreSQL"] - bare
        for label in ("SQLite, tmpfs", "SQLite, disk"):
            print(f"   ratio PostgreSQL / {label}, added cost per call: {pg_added / (per_call[label] - bare):.2f}")
        commits, inserted, updated = pg_work_per_call(stores[-1].fresh(), n)
        print(f"   PostgreSQL work per added write call (pg_stat_database, {2 * n}-call turn minus {n}-call turn): "
              f"{commits:.2f} transactions, {inserted:.2f} rows inserted, {updated:.2f} rows updated")

        size, count = args.lessons, args.lookups
        print(f"\n2. lessons: {size} stored (50 declaring tools, 1 in 10 closed), {count} queries each, µs", flush=True)
        medians: dict[str, tuple[float, float]] = {}
        for store in stores:
            url = store.fresh()
            began = time.perf_counter()
            fill_lessons(url, size)
            filled = time.perf_counter() - began
            starts, lookups = lesson_lookups(url, size, count)
            medians[store.label] = (statistics.median(starts), statistics.median(lookups))
            print(f"   {store.label:<14} turn-start query (5 tools, limit {CANDIDATES_AT_START}) p50 "
                  f"{statistics.median(starts):7.1f} p99 {p(starts, 0.99):7.1f}; on_subject p50 "
                  f"{statistics.median(lookups):7.1f} p99 {p(lookups, 0.99):7.1f}  (filled in {filled:.1f} s)")
        pg = medians["PostgreSQL"]
        for label in ("SQLite, tmpfs", "SQLite, disk"):
            base = medians[label]
            print(f"   ratio PostgreSQL / {label}, p50: turn-start query {pg[0] / base[0]:.2f}, "
                  f"on_subject {pg[1] / base[1]:.2f}")

        print(f"\n3. fleet on PostgreSQL: {args.turns} turns per worker, {args.writes} write calls per turn",
              flush=True)
        with tempfile.TemporaryDirectory() as scratch:
            one, one_turns, one_cpu = fleet_rate(cluster, 1, args.turns, args.writes, Path(scratch))
            many, many_turns, many_cpu = fleet_rate(cluster, args.workers, args.turns, args.writes, Path(scratch))
        print(f"   1 worker            {one:7.1f} turns/s ({one_turns} turns; worker CPU {one_cpu:.1f} ms/turn)")
        print(f"   {args.workers} workers (2 hosts) {many:7.1f} turns/s ({many_turns} turns; worker CPU "
              f"{many_cpu:.1f} ms/turn); ratio to 1 worker {many / one:.2f}")
        print(f"   CPUs on this machine: {os.cpu_count()}; load average before the run: {load}")


if __name__ == "__main__":
    main()
