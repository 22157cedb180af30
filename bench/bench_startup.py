"""Benchmark: ``unstuck classify`` start-up beside bare Python and the CLI library's own floor.

Each command below is a whole process, timed from outside (wall clock from start to exit,
``subprocess.run`` with the venv's interpreter), ``--runs`` times (default 20) after one
warm-up, the commands taken in turn (A B C ... A B C ...) so a drift in the machine's speed
touches them alike:

* ``python -c pass``: bare Python (the baseline);
* a minimal typer app, one command with two options, run with both options: the floor of
  any typer CLI (typer builds its parameters' types at start-up);
* ``python -c "import unstuck"``: the package itself;
* ``unstuck --version``: the CLI's start-up with no command run;
* ``unstuck classify`` reading gh's logged-out message on stdin, with a warm derived-data
  cache (:mod:`unstuck.core.cache`; its folder is a temporary ``UNSTUCK_CACHE_DIR`` filled by the
  warm-up);
* the same with a new, empty ``UNSTUCK_CACHE_DIR`` for every run (a cold cache: the derived
  data is derived again and written).

The message is what the installed gh prints for ``gh auth status`` with an empty config
folder (its source: cli/cli ``pkg/cmd/auth/status/status.go``, "You are not logged into any
GitHub hosts. Run gh auth login to authenticate."); without gh that same sentence is used.

Printed: median and p90 in milliseconds, and each median's ratio to bare Python's and to the
typer floor's (same run).

Run: ``.venv/bin/python bench/bench_startup.py`` (options: ``--runs N``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: gh's wording when no host is logged in (cli/cli pkg/cmd/auth/status/status.go).
GH_LOGGED_OUT = "You are not logged into any GitHub hosts. Run gh auth login to authenticate.\n"

TYPER_FLOOR = '''\
import typer

app = typer.Typer()


@app.command()
def main(name: str = typer.Option("world", help="Who."), count: int = typer.Option(1, help="How many.")) -> None:
    for _ in range(count):
        typer.echo(f"hello {name}")


if __name__ == "__main__":
    app()
'''


@dataclass(frozen=True, slots=True)
class Case:
    """One command to time: its label, argv, standard input, and whether it gets a new empty cache."""

    label: str
    argv: tuple[str, ...]
    stdin: bytes = b""
    cold_cache: bool = False


def gh_logged_out_message() -> str:
    """What the installed gh says for ``gh auth status`` with no host configured (stderr), or the source's wording."""
    gh = shutil.which("gh")
    if gh is None:
        return GH_LOGGED_OUT
    with tempfile.TemporaryDirectory() as config:
        env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN")}
        env["GH_CONFIG_DIR"] = config
        done = subprocess.run([gh, "auth", "status"], capture_output=True, text=True, env=env, timeout=30, check=False)
    return (done.stderr or done.stdout) or GH_LOGGED_OUT


def run_once(case: Case, env: dict[str, str], scratch: Path) -> float:
    """Wall seconds of one run of ``case``; raises ``RuntimeError`` naming the case if it fails."""
    run_env = dict(env)
    cold: Path | None = None
    if case.cold_cache:
        cold = Path(tempfile.mkdtemp(prefix="cold-", dir=scratch))
        run_env["UNSTUCK_CACHE_DIR"] = str(cold)
    started = time.perf_counter()
    done = subprocess.run(case.argv, input=case.stdin, capture_output=True, env=run_env, check=False)
    elapsed = time.perf_counter() - started
    if cold is not None:
        shutil.rmtree(cold)
    # classify exits 0 whatever it found; anything else is a broken benchmark
    if done.returncode != 0:
        raise RuntimeError(f"{case.label}: exit {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    python = sys.executable
    unstuck = str(Path(python).with_name("unstuck"))
    message = gh_logged_out_message()
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        floor = scratch / "typer_floor.py"
        floor.write_text(TYPER_FLOOR, encoding="utf-8")
        warm_cache = scratch / "warm-cache"
        warm_cache.mkdir()
        env = {**os.environ, "UNSTUCK_CACHE_DIR": str(warm_cache)}
        cases = (
            Case("bare python (python -c pass)", (python, "-c", "pass")),
            Case("typer floor (1 command, 2 options)", (python, str(floor), "--name", "x", "--count", "2")),
            Case('python -c "import unstuck"', (python, "-c", "import unstuck")),
            Case("unstuck --version", (unstuck, "--version")),
            Case("unstuck classify, warm cache", (unstuck, "classify"), message.encode()),
            Case("unstuck classify, cold cache", (unstuck, "classify"), message.encode(), cold_cache=True),
        )
        for case in cases:  # warm-up: the OS's page cache, the .pyc files, the warm derived-data cache
            run_once(case, env, scratch)
        found = subprocess.run((unstuck, "classify"), input=message.encode(), capture_output=True, env=env, check=True)
        timings: dict[str, list[float]] = {case.label: [] for case in cases}
        for _ in range(args.runs):
            for case in cases:
                timings[case.label].append(run_once(case, env, scratch) * 1000)
    print(f"input: {message.strip()!r}")
    print(f"classify says: {found.stdout.decode().strip().splitlines()[0] if found.stdout.strip() else '(nothing)'}")
    print(f"{args.runs} runs each, interleaved, wall ms per process (2 cores)")
    bare = statistics.median(timings[cases[0].label])
    typer_floor = statistics.median(timings[cases[1].label])
    print(f"  {'command':<36} {'median':>8} {'p90':>8} {'x bare':>8} {'x typer':>8}")
    for case in cases:
        values = sorted(timings[case.label])
        median = statistics.median(values)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"  {case.label:<36} {median:>8.1f} {p90:>8.1f} {median / bare:>8.2f} {median / typer_floor:>8.2f}")


if __name__ == "__main__":
    main()
