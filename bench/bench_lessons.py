"""Benchmark: the lesson lookup before dispatch, with 10^3, 10^4 and 10^5 lessons stored.

For each size, a fresh store is filled (rows written straight into its ``knowledge`` table
in one transaction, so filling is quick; the FTS triggers still fire), then the lookup the
loop makes before a call's first dispatch (``LessonStore.on_subject`` and the fingerprint
comparison, as :meth:`unstuck.remember.LessonKeeper.lesson_for` does) runs for random
subjects, half of them with a lesson and half without. Printed: median and p99 in
microseconds, and the ratio of each size's p99 to the 10^3 store's (the baseline, in the
same run). Target: p99 under 1 ms at 10^5.

Run: ``.venv/bin/python bench/bench_lessons.py`` (options: ``--lookups N``).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from unstuck.lessons import LessonStore

FINGERPRINT = "/usr/bin/tool|tool version 1.0"


def fill(path: Path, size: int) -> None:
    LessonStore(path).close()  # the schema, marked
    now = time.time()
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO knowledge (domain, tool, subject, kind, fingerprint, unblock, probe, content, confidence,"
            " created_at, last_verified_at, source, metadata) VALUES ('', 'check_cli_setup', ?, 'auth', ?, ?, NULL,"
            " ?, 0.5, ?, ?, 'escalated', '{}')",
            ((f"tool{i}", FINGERPRINT, f"tool{i} auth login", f"tool{i} was not signed in", now, now)
             for i in range(size)),
        )


def lookups(path: Path, size: int, count: int) -> list[float]:
    rng = random.Random(size)
    timings: list[float] = []
    with LessonStore(path) as store:
        for _ in range(count):
            subject = f"tool{rng.randrange(size)}" if rng.random() < 0.5 else f"absent{rng.randrange(size)}"
            started = time.perf_counter_ns()
            found = next((x for x in store.on_subject(subject) if x.signature.fingerprint == FINGERPRINT), None)
            timings.append((time.perf_counter_ns() - started) / 1000)
            assert (found is not None) == subject.startswith("tool")
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=20_000)
    args = parser.parse_args()
    baseline: float | None = None
    with tempfile.TemporaryDirectory() as scratch:
        for size in (1_000, 10_000, 100_000):
            path = Path(scratch) / f"lessons-{size}.db"
            fill(path, size)
            timings = sorted(lookups(path, size, args.lookups))
            p99 = timings[int(0.99 * len(timings))]
            baseline = baseline or p99
            print(f"{size:>7} lessons: lookup median {statistics.median(timings):.1f} µs, p99 {p99:.1f} µs, "
                  f"max {timings[-1]:.1f} µs; p99 ratio to 10^3: {p99 / baseline:.2f}"
                  + ("  (target p99 < 1000 µs: met)" if size == 100_000 and p99 < 1000 else ""))


if __name__ == "__main__":
    main()
