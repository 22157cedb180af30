"""Benchmark: classification cost, today's classifier beside a baseline one, in one run.

Three measurements, each taken for the current classifier (this checkout) and for the
baseline (the classifier as it was at ``--baseline REV``, default ``b380de9``, the last commit
before the classifier was rebuilt on re2; extracted with ``git archive`` into a temporary
folder and run in a child process over the very same inputs):

1. **Real outputs**: every case of ``shared/cases/tool_outputs*.jsonl`` and every form of the
   bundled failure bank, each turned into the ``ToolResult`` the loop would classify, in a
   shuffled order, ``--rounds`` times: median, p99 and max per result, and the ratio of the
   medians (the bar: current no worse than 1.5x baseline).
2. **Size**: one result of 1 KB, 100 KB, 1 MB, 10 MB and 100 MB (a log of ordinary lines with
   a failure at its end), classified as a failure and as a success: the cost must be linear up
   to the scanned window and flat beyond it.
3. **Pathological single lines**: one line of up to 1 MB built to make backtracking regular
   expressions go quadratic (a long word, a long run of colons, a long "run ..." line, ...):
   the bar is no single line costing more than 50 ms.

Run: ``.venv/bin/python bench/bench_classify.py`` (``--rounds N``, ``--baseline REV``,
``--sizes`` to limit the sizes, ``--no-baseline`` to skip the child process).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = ROOT.parent / "shared" / "cases"
SIZES = {"1 KB": 1_000, "100 KB": 100_000, "1 MB": 1_000_000, "10 MB": 10_000_000, "100 MB": 100_000_000}
LINE_SIZES = (1_000, 10_000, 100_000, 1_000_000)
BASELINE_LINE_LIMIT = 100_000
FAILURE_TAIL = "\nError: EACCES: permission denied, open '/srv/app/config.yml'\n"
ORDINARY_LINE = "2026-11-30T12:00:00Z info worker 7 processed batch 1234 in 56 ms (ok)\n"


def pathological_lines(size: int) -> dict[str, str]:
    """Single lines shaped to make backtracking engines quadratic on today's rows."""
    return {
        "long word": "a" * size,
        "run repeated": "run" * (size // 3),  # a "run <cmd> login" row backtracked from every "run"
        "word then not found": "a" * size + ": command not found",
        "colons": "x:" * (size // 2),
        "run + word": "run " + "a" * size,
        "quotes": "'" + "a " * (size // 2),
        "spaces": " " * size,
        "braces": "{" * size,
        "dashes then login": "-" * size + " login",
        "path-like": "/a" * (size // 2) + ": permission",
    }


def corpus_records() -> list[dict[str, object]]:
    """The real-outputs corpus as plain records (so the child process reads the same)."""
    records: list[dict[str, object]] = []
    for path in sorted(CASES_DIR.glob("tool_outputs*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                code, status = case.get("exit_code"), case.get("http_status")
                ok = code in (None, 0) and (status is None or status < 400) and case["expected_kind"] == "ok"
                records.append({"tool": case["tool"], "ok": ok, "content": case["output"], "exit_code": code,
                                "http_status": status})
    from unstuck.faults.bank import load_bank

    for form in load_bank():
        result = form.to_result(form.tools[0])
        records.append({"tool": form.tools[0], "ok": result.ok, "content": result.content,
                        "exit_code": result.exit_code, "http_status": result.http_status})
    return records


# The measuring side: imported by this process and by the child (which has the baseline on its path).
MEASURE = r'''
import json, random, statistics, sys, time
from unstuck.recognise.classify import classify_result
from unstuck.core.tools import ToolResult

def timed(tool, result, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        classify_result(tool, {}, result)
        spent = time.perf_counter_ns() - t0
        best = spent if best is None else min(best, spent)
    return best

def measure(spec):
    out = {}
    records = spec["records"]
    results = [(r["tool"], ToolResult(r["tool"], r["ok"], r["content"], exit_code=r["exit_code"],
                                      http_status=r["http_status"])) for r in records]
    for tool, result in results:  # warm up: tables, caches
        classify_result(tool, {}, result)
    rng = random.Random(0)
    per = []
    for _ in range(spec["rounds"]):
        order = results[:]
        rng.shuffle(order)
        for tool, result in order:
            t0 = time.perf_counter_ns()
            classify_result(tool, {}, result)
            per.append(time.perf_counter_ns() - t0)
    per.sort()
    out["corpus"] = {"median_us": statistics.median(per) / 1e3, "p99_us": per[int(0.99 * (len(per) - 1))] / 1e3,
                     "max_us": per[-1] / 1e3, "count": len(per)}
    sizes = {}
    for name, size in spec["sizes"].items():
        body = (spec["line"] * (size // len(spec["line"]) + 1))[:size - len(spec["tail"])] + spec["tail"]
        failed = ToolResult("run_command", False, body, exit_code=1)
        passed = ToolResult("run_command", True, body, exit_code=0)
        repeat = 5 if size <= 1_000_000 else 2
        sizes[name] = {"failure_ms": timed("run_command", failed, repeat) / 1e6,
                       "success_ms": timed("run_command", passed, repeat) / 1e6}
        del body, failed, passed
    out["sizes"] = sizes
    lines = {}
    for size, shapes in spec["lines"].items():
        worst = 0.0
        worst_name = ""
        for name, text in shapes.items():
            for ok in (False, True):
                result = ToolResult("run_command", ok, text, exit_code=0 if ok else 1)
                spent = timed("run_command", result, 2) / 1e6
                if spent > worst:
                    worst, worst_name = spent, name
        lines[size] = {"worst_ms": worst, "shape": worst_name}
    out["lines"] = lines
    return out

if __name__ == "__main__":
    print(json.dumps(measure(json.load(sys.stdin))))
'''


def baseline_tree(rev: str, into: Path) -> Path:
    """The baseline's ``src`` folder, extracted from git at ``rev``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--baseline", default="b380de9")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--sizes", nargs="*", default=list(SIZES))
    args = parser.parse_args()
    spec = {
        "records": corpus_records(), "rounds": args.rounds, "line": ORDINARY_LINE, "tail": FAILURE_TAIL,
        "sizes": {name: SIZES[name] for name in args.sizes},
        "lines": {str(size): pathological_lines(size) for size in LINE_SIZES},
    }
    namespace: dict[str, object] = {"__name__": "bench_measure"}
    exec(compile(MEASURE, "measure", "exec"), namespace)
    started = time.perf_counter()
    current = namespace["measure"](spec)  # type: ignore[operator]
    print(f"current measured in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    baseline = None
    if not args.no_baseline:
        with tempfile.TemporaryDirectory() as tmp:
            src = baseline_tree(args.baseline, Path(tmp))
            # the baseline backtracks quadratically on some shapes (7 s at 112 kB): it is given
            # lines up to BASELINE_LINE_LIMIT characters only
            small = {**spec, "lines": {k: v for k, v in spec["lines"].items()  # type: ignore[union-attr]
                                       if int(k) <= BASELINE_LINE_LIMIT}}
            proc = subprocess.run([sys.executable, "-c", MEASURE], input=json.dumps(small), capture_output=True,
                                  text=True, env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, check=True)
            baseline = json.loads(proc.stdout)
    base_name = f"baseline {args.baseline}"
    print(f"corpus: {len(spec['records'])} real outputs x {args.rounds} rounds")  # type: ignore[arg-type]
    print(f"{'':24}{'current':>14}{base_name:>22}{'ratio':>8}")
    for key, label in (("median_us", "median µs"), ("p99_us", "p99 µs"), ("max_us", "max µs")):
        now = current["corpus"][key]
        then = baseline["corpus"][key] if baseline else float("nan")
        print(f"  {label:22}{now:14.1f}{then:22.1f}{now / then if baseline else float('nan'):8.2f}")
    print("one result of a given size (ms; failure / success):")
    for name in spec["sizes"]:  # type: ignore[union-attr]
        now = current["sizes"][name]
        then = baseline["sizes"][name] if baseline else {"failure_ms": float("nan"), "success_ms": float("nan")}
        print(f"  {name:22}{now['failure_ms']:9.2f} / {now['success_ms']:<7.2f}"
              f"{then['failure_ms']:13.2f} / {then['success_ms']:<7.2f}")
    print("worst pathological single line (ms, and its shape):")
    for size in spec["lines"]:  # type: ignore[union-attr]
        now = current["lines"][size]
        then = (baseline["lines"][size] if baseline and size in baseline["lines"]
                else {"worst_ms": float("nan"), "shape": "not run"})
        print(f"  {int(size):>9,} chars   {now['worst_ms']:9.2f} ({now['shape']}){'':4}"
              f"{then['worst_ms']:12.2f} ({then['shape']})")
    worst_line = max(v["worst_ms"] for v in current["lines"].values())
    ratio = current["corpus"]["median_us"] / baseline["corpus"]["median_us"] if baseline else float("nan")
    print(f"bars: median ratio {ratio:.2f} (<= 1.5); worst single line {worst_line:.1f} ms (<= 50)")


if __name__ == "__main__":
    main()
