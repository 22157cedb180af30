"""Benchmark: the cost of unstuck.recognise.envelopes.find_envelopes on ordinary and hostile text.

Ordinary inputs: a 1 KB curl -i error response (headers and a JSON body), a 100 KB service log
mixing JSON log lines, logfmt lines and plain text with failures near its end, and a 112 KB
single-line JSON document (the most the classifier hands over). Hostile inputs: a megabyte of
``{``, of ``[``, of ``{"`` and of ``{'``, ``{"a":`` nested 100,000 deep, a megabyte single-line
JSON string, 1,000 KB of backslash-escaped bodies, and 112 KB of JSON lines (the most parse
attempts ordinary text can ask for).

Printed per input: its size, the median and worst time of find_envelopes over the rounds, and
the parse attempts, characters charged and candidates visited, beside the module's caps
(MAX_ATTEMPTS, MAX_SCAN_CHARS, MAX_CANDIDATES). The counts, not the times, are what the tests
assert; the times are for the report.

Run: ``.venv/bin/python bench/bench_envelopes.py`` (option: ``--rounds N``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from unstuck.recognise.envelopes import MAX_ATTEMPTS, MAX_CANDIDATES, MAX_SCAN_CHARS, scan_envelopes


def curl_error_1kb() -> str:
    body = json.dumps({"error": {"code": 403, "message": "The caller does not have permission",
                                 "status": "PERMISSION_DENIED",
                                 "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                              "reason": "IAM_PERMISSION_DENIED", "domain": "iam.googleapis.com",
                                              "metadata": {"permission": "storage.objects.get"}}]}}, indent=2)
    head = ("HTTP/2 403\ncontent-type: application/json; charset=UTF-8\nvary: X-Origin\nvary: Referer\n"
            "date: Mon, 30 Nov 2026 16:00:00 GMT\nserver: ESF\ncache-control: private\nx-xss-protection: 0\n"
            "x-frame-options: SAMEORIGIN\nx-content-type-options: nosniff\nalt-svc: h3=\":443\"; ma=2592000\n\n")
    text = head + body + "\n"
    return (text + " " * 1024)[:1024] if len(text) < 1024 else text


def service_log_100kb() -> str:
    lines: list[str] = []
    i = 0
    while sum(len(line) + 1 for line in lines) < 100_000:
        i += 1
        if i % 5 == 0:
            lines.append(f'time="2026-03-10T10:50:{i % 60:02d}Z" level=info msg="handled request" path=/v1/items/{i} status=200 took={i % 97}ms')
        elif i % 7 == 0:
            lines.append(f"2026-03-10 10:50:{i % 60:02d} INFO worker {i}: batch of {i % 13} items done")
        else:
            lines.append(json.dumps({"level": "info", "ts": 1712345678.0 + i, "caller": "server/main.go:41",
                                     "msg": "request served", "id": i}))
    lines.append(json.dumps({"level": "error", "ts": 1712349999.0, "msg": "upstream failed",
                             "error": 'POST https://api.example.com/v1/chat: 429 {"error":{"type":"rate_limit_error","message":"slow down"}}'}))
    lines.append('time="2026-03-10T10:59:59Z" level=fatal msg="giving up" err="too many failures"')
    return "\n".join(lines) + "\n"


def single_line_json_112kb() -> str:
    items = [{"name": f"pod-{i}", "status": {"phase": "Running"}, "labels": {"app": "web"}} for i in range(1200)]
    return json.dumps({"kind": "List", "apiVersion": "v1", "items": items})[:112_000]


INPUTS = {
    "1 KB curl -i error": curl_error_1kb,
    "100 KB service log": service_log_100kb,
    "112 KB single-line JSON": single_line_json_112kb,
    "1 MB of {": lambda: "{" * 1_000_000,
    "1 MB of [": lambda: "[" * 1_000_000,
    '1 MB of {"': lambda: '{"' * 500_000,
    "1 MB of {'": lambda: "{'" * 500_000,
    '{"a": nested 100,000 deep': lambda: '{"a":' * 100_000,
    "1 MB single-line JSON string": lambda: json.dumps({"error": {"message": "x" * 1_000_000}}),
    "1 MB of escaped bodies": lambda: '{\\"a\\":1}" ' * 100_000,
    "112 KB of JSON lines": lambda: '{"level":"info","msg":"ok"}\n' * 4_000,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"caps: MAX_ATTEMPTS={MAX_ATTEMPTS} MAX_SCAN_CHARS={MAX_SCAN_CHARS} MAX_CANDIDATES={MAX_CANDIDATES}")
    print(f"{'input':32} {'chars':>9} {'median ms':>10} {'worst ms':>9} {'attempts':>9} {'charged':>9} {'visited':>8} {'found':>6}")
    for name, make in INPUTS.items():
        text = make()
        times = []
        scan = scan_envelopes(text)
        for _ in range(args.rounds):
            started = time.perf_counter()
            scan = scan_envelopes(text)
            times.append((time.perf_counter() - started) * 1000)
        print(f"{name:32} {len(text):9} {statistics.median(times):10.2f} {max(times):9.2f} "
              f"{scan.attempts:9} {scan.scanned_chars:9} {scan.candidates:8} {len(scan.envelopes):6}")


if __name__ == "__main__":
    main()
