"""Benchmark: classification throughput and latency over real-world tool outputs.

The corpus is every case of ``shared/cases/tool_outputs.jsonl`` (real outputs people
reported) and every form of the bundled failure bank (real programs' failures harvested on a
machine), each turned into the :class:`ToolResult` the loop would classify. Each round
classifies the whole corpus once, in a shuffled order.

Printed: results per second and MB per second; median, p99 and worst latency per result; and,
as a baseline measured in the same run over the same results, the cost of the least any
classifier must do (lower-casing the scanned window of the text), with the ratio
classify/baseline.

Run: ``.venv/bin/python bench/bench_classify.py`` (options: ``--rounds N --cases FILE``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from unstuck.classify import SCAN_HEAD_CHARS, SCAN_TAIL_CHARS, classify_result, load_signal_table
from unstuck.faults.bank import load_bank
from unstuck.tools import ToolResult

DEFAULT_CASES = Path(__file__).resolve().parents[2] / "shared" / "cases" / "tool_outputs.jsonl"


def corpus(cases: Path) -> list[tuple[str, ToolResult]]:
    items: list[tuple[str, ToolResult]] = []
    if cases.exists():
        for line in cases.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            case = json.loads(line)
            code, status = case.get("exit_code"), case.get("http_status")
            ok = code in (None, 0) and (status is None or status < 400) and case["expected_kind"] == "ok"
            items.append((case["tool"], ToolResult(case["tool"], ok, case["output"], exit_code=code, http_status=status)))
    for form in load_bank():
        items.append((form.tools[0], form.to_result(form.tools[0])))
    return items


def lower_window(text: str) -> str:
    window = text if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS else text[:SCAN_HEAD_CHARS] + text[-SCAN_TAIL_CHARS:]
    return window.lower()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    args = parser.parse_args()
    items = corpus(args.cases)
    table = load_signal_table()
    total_bytes = sum(len(result.content.encode()) for _, result in items)
    rng = random.Random(0)
    for tool, result in items:  # warm the table and the regex caches
        classify_result(tool, {}, result, table=table)
    classify_ns: list[int] = []
    baseline_ns: list[int] = []
    wall_classify = wall_baseline = 0.0
    for _ in range(args.rounds):
        order = items[:]
        rng.shuffle(order)
        started = time.perf_counter()
        for tool, result in order:
            t0 = time.perf_counter_ns()
            classify_result(tool, {}, result, table=table)
            classify_ns.append(time.perf_counter_ns() - t0)
        wall_classify += time.perf_counter() - started
        started = time.perf_counter()
        for _, result in order:
            t0 = time.perf_counter_ns()
            lower_window(result.content)
            baseline_ns.append(time.perf_counter_ns() - t0)
        wall_baseline += time.perf_counter() - started
    count = len(classify_ns)

    def p(values: list[int], q: float) -> float:
        return sorted(values)[min(int(q * len(values)), len(values) - 1)] / 1000

    print(f"corpus: {len(items)} results ({total_bytes / 1e3:.1f} kB), {args.rounds} rounds, {count} classifications")
    print(f"classify: {count / wall_classify:,.0f} results/s, {total_bytes * args.rounds / wall_classify / 1e6:.1f} MB/s; "
          f"median {statistics.median(classify_ns) / 1000:.1f} µs, p99 {p(classify_ns, 0.99):.1f} µs, "
          f"max {max(classify_ns) / 1000:.1f} µs")
    print(f"baseline (lower-case the scanned window): median {statistics.median(baseline_ns) / 1000:.2f} µs, "
          f"p99 {p(baseline_ns, 0.99):.2f} µs")
    print(f"ratio classify/baseline: median {statistics.median(classify_ns) / statistics.median(baseline_ns):.1f}, "
          f"wall {wall_classify / wall_baseline:.1f}")


if __name__ == "__main__":
    main()
