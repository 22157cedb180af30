"""Benchmark: the turn-start lesson query and the lookup before dispatch, at 10^3 to 10^6 lessons.

For each size, a fresh store is filled (rows written straight into its ``knowledge`` table
in one transaction, so filling is quick; the FTS triggers still fire), then the lookup the
loop makes before a call's first dispatch (``LessonStore.on_subject`` and the fingerprint
comparison, as :meth:`unstuck.guard.lessons.LessonKeeper.lesson_for` does) runs for random
subjects, half of them with a lesson and half without. Printed: median and p99 in
microseconds, and the ratio of each size's p99 to the 10^3 store's (the baseline, in the
same run). Target: p99 under 1 ms at 10^5.

The turn-start query (issue 12, deliver 6): ``LessonStore.active(tools=..., limit=20)`` as
:meth:`unstuck.guard.lessons.LessonKeeper.known_blockers` asks it, for 5 tools of the 50 that
declared the stored lessons (one lesson in ten closed, so the partial index matters), with
p50/p99 in microseconds. Target: p99 under 1 ms at 10^6. ``--sizes`` picks the sizes.

Run: ``.venv/bin/python bench/bench_lessons.py`` (options: ``--lookups N``, ``--queries N``,
``--sizes 1000,10000``).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from unstuck.guard.lessons import CANDIDATES_AT_START
from unstuck.store.lessons import LessonStore

FINGERPRINT = "/usr/bin/tool|tool version 1.0"
TOOLS = 50
IN_PLAY = 5


def fill(path: Path, size: int) -> None:
    LessonStore(path).close()  # the schema, marked
    now = time.time()
    with sqlite3.connect(path) as db:  # one transaction
        db.executemany(
            "INSERT INTO knowledge (domain, tool, subject, kind, fingerprint, unblock, probe, content, confidence,"
            " created_at, last_verified_at, invalidated_at, source, metadata) VALUES ('', ?, ?, 'auth', ?, ?, NULL,"
            " ?, 0.5, ?, ?, ?, 'escalated', '{}')",
            ((f"declarer{i % TOOLS}", f"tool{i}", FINGERPRINT, f"tool{i} auth login", f"tool{i} was not signed in",
              now, now - i % 9973, now if i % 10 == 0 else None)
             for i in range(size)),
        )


def turn_starts(path: Path, count: int) -> list[float]:
    rng = random.Random(count)
    timings: list[float] = []
    with LessonStore(path) as store:
        for _ in range(count):
            tools = [f"declarer{rng.randrange(TOOLS)}" for _ in range(IN_PLAY)]
            started = time.perf_counter_ns()
            found = store.active(tools=tools, limit=CANDIDATES_AT_START)
            timings.append((time.perf_counter_ns() - started) / 1000)
            assert len(found) == CANDIDATES_AT_START and all(x.active for x in found)
    return timings


def lookups(path: Path, size: int, count: int) -> list[float]:
    rng = random.Random(size)
    timings: list[float] = []
    with LessonStore(path) as store:
        for _ in range(count):
            subject = f"tool{rng.randrange(size)}" if rng.random() < 0.5 else f"absent{rng.randrange(size)}"
            started = time.perf_counter_ns()
            found = next((x for x in store.on_subject(subject) if x.signature.fingerprint == FINGERPRINT), None)
            timings.append((time.perf_counter_ns() - started) / 1000)
            assert (found is not None) == (subject.startswith("tool") and int(subject[4:]) % 10 != 0)  # 1 in 10 closed
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    args = parser.parse_args()
    baseline: float | None = None
    with tempfile.TemporaryDirectory() as scratch:
        for size in (int(x) for x in args.sizes.split(",")):
            path = Path(scratch) / f"lessons-{size}.db"
            started = time.perf_counter()
            fill(path, size)
            filled = time.perf_counter() - started
            starts = sorted(turn_starts(path, args.queries))
            print(f"{size:>7} lessons (filled in {filled:.1f} s): turn-start query (5 tools, limit "
                  f"{CANDIDATES_AT_START}) p50 {statistics.median(starts):.1f} µs, "
                  f"p99 {starts[int(0.99 * len(starts))]:.1f} µs, max {starts[-1]:.1f} µs"
                  + ("  (target p99 < 1000 µs: " + ("met)" if starts[int(0.99 * len(starts))] < 1000 else "NOT met)")
                     if size == 1_000_000 else ""), flush=True)
            timings = sorted(lookups(path, size, args.lookups))
            p99 = timings[int(0.99 * len(timings))]
            baseline = baseline or p99
            print(f"{size:>7} lessons: lookup median {statistics.median(timings):.1f} µs, p99 {p99:.1f} µs, "
                  f"max {timings[-1]:.1f} µs; p99 ratio to 10^3: {p99 / baseline:.2f}"
                  + ("  (target p99 < 1000 µs: met)" if size == 100_000 and p99 < 1000 else ""))


if __name__ == "__main__":
    main()
