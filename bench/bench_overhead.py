"""Benchmark: what the guard costs per tool result and per loop step.

1. classify + policy per tool result (median and p99, microseconds): ``classify_result``
   then ``before_dispatch`` + ``after_result`` on a mix of results, including real gh output.
2. time per step of the guarded loop as a ratio to a bare loop (model -> tool -> message,
   no classification, no policy), both over the same in-process tools and scripted model,
   measured in the same run.

Run: ``.venv/bin/python bench/bench_overhead.py`` (options: ``--results N --steps N``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence

from unstuck.core.tools import CommandOutput, HttpResponse, ToolCall, normalize_result
from unstuck.decide import policy
from unstuck.loop.turn import run_turn
from unstuck.recognise.classify import classify_result
from unstuck.toolkit.models import Message, ModelReply, Role
from unstuck.toolkit.specs import Toolset, ToolSpec, tool


def sample_results() -> list[tuple[str, object]]:
    with tempfile.TemporaryDirectory() as config:
        gh = subprocess.run(["gh", "repo", "view", "cli/cli"], capture_output=True, text=True, check=False,
                            env={"GH_CONFIG_DIR": config, "HOME": config, "PATH": "/usr/bin:/bin"})
    return [
        ("run_command", CommandOutput("gh repo view cli/cli", gh.returncode, gh.stdout, gh.stderr)),
        ("run_command", CommandOutput("ls", 0, "README.md\nsrc\ntests\n" * 20)),
        ("run_command", CommandOutput("gh", 127, "", "/bin/bash: line 1: gh: command not found")),
        ("http_get", HttpResponse(429, '{"message": "API rate limit exceeded"}', (("Retry-After", "30"),))),
        ("http_get", HttpResponse(200, '{"ok": true, "items": [1, 2, 3]}')),
        ("read_file", FileNotFoundError(2, "No such file or directory", "INSTALL.md")),
        ("read_file", "# Title\n\nSome text with the word error in it, but fine.\n" * 30),
        ("search_files", []),
        ("check_cli_setup", {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}),
        ("run_command", CommandOutput("curl x", 7, "", "curl: (7) Failed to connect to 127.0.0.1 port 9: Connection refused")),
    ]


def bench_per_result(rounds: int) -> list[float]:
    samples = [(name, normalize_result(name, raw)) for name, raw in sample_results()]
    call = ToolCall.of("c", "run_command", {"command": "x"})
    timings: list[float] = []
    state = policy.RecoveryState(unattended=True)
    for i in range(rounds):
        name, result = samples[i % len(samples)]
        started = time.perf_counter_ns()
        situation = result.declared or classify_result(name, {}, result)
        _, counted = policy.before_dispatch(state, call, subject=name, interactive=False)
        policy.after_result(counted, call, policy.CallOutcome(name, situation, result.ok))
        timings.append((time.perf_counter_ns() - started) / 1000)
    return timings


class Scripted:
    name = "bench"

    def __init__(self, steps: int) -> None:
        self.left = steps

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        if self.left <= 0 or not tools:
            return ModelReply("done")
        self.left -= 1
        return ModelReply("", (ToolCall.of(f"c{self.left}", "lookup", {"key": f"k{self.left % 7}"}),))


@tool
def lookup(key: str) -> dict[str, str]:
    """A cheap in-process tool."""
    return {"status": "success", "value": key * 3}


def bare_loop(model: Scripted, tools: Toolset) -> int:
    messages = [Message(Role.SYSTEM, "s"), Message(Role.USER, "task")]
    specs = tuple(tools.values())
    steps = 0
    while True:
        reply = model.complete(messages, specs)
        messages.append(Message(Role.ASSISTANT, reply.content, reply.tool_calls))
        if not reply.tool_calls:
            return steps
        for call in reply.tool_calls:
            result = tools[call.tool].invoke(call.arguments)
            messages.append(Message(Role.TOOL, result.content, tool_call_id=call.id, name=call.tool))
            steps += 1


def bench_loop(steps: int, repeats: int) -> tuple[float, float]:
    tools = Toolset([lookup])
    bare, guarded = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        bare_loop(Scripted(steps), tools)
        bare.append((time.perf_counter() - started) / steps)
        started = time.perf_counter()
        run_turn("task", model=Scripted(steps), tools=tools, unattended=True, max_steps=steps + 2)
        guarded.append((time.perf_counter() - started) / steps)
    return statistics.median(bare), statistics.median(guarded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bench_per_result(500)  # warm up caches (signal table, regex compilation)
    timings = sorted(bench_per_result(args.results))
    p99 = timings[int(len(timings) * 0.99) - 1]
    print(f"classify + policy per tool result over {len(timings)} results: "
          f"median {statistics.median(timings):.1f} µs, p99 {p99:.1f} µs (target: median < 50 µs)")
    bare, guarded = bench_loop(args.steps, args.repeats)
    print(f"loop step, {args.steps} steps x {args.repeats}: bare {bare * 1e6:.1f} µs, guarded {guarded * 1e6:.1f} µs, "
          f"ratio guarded/bare {guarded / bare:.2f}")


if __name__ == "__main__":
    main()
