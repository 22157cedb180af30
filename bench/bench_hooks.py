"""Benchmark: what a unstuck hook adds to a coding agent's tool call, beside a no-op command hook,
in one run (issue 26, deliver 3: p50 <= 30 ms and p99 <= 100 ms added).

Each hook is a whole process started the way Claude Code starts a command hook (``sh -c
COMMAND``, the event's JSON payload on stdin, stdout read to the end, the exit status waited
for), timed from outside with the wall clock from spawn to exit:

* **no-op**: a command hook that reads its payload and prints nothing (``cat >/dev/null``);
* **unstuck**: the hook client ``unstuck hooks install`` writes (``sh`` + ``curl --unix-socket``)
  posting to a warm guard server, which runs the event through the session's guard (the shell
  parser, the interactive-call catalogue, the classifier, the policy, the journal's riding
  commit) and renders Claude Code's reply.

The events are a Claude Code session's: per call a ``PreToolUse`` and a ``PostToolUse`` for
``Bash`` (``echo N``, its real output), ``--runs`` calls (default 200) after 10 warm-up calls,
the two hooks taken in turn (no-op, unstuck, no-op, unstuck …) so a drift in the machine's speed
touches them alike. Printed: p50, p90 and p99 per hook and event, and the added latency (the
unstuck hook's quantile minus the no-op's, and the quantiles of the paired differences).

Everything runs in a temporary home with its own stores and socket; the server the first hook
starts is stopped at the end.

Run: ``.venv/bin/python bench/bench_hooks.py`` (options: ``--runs N``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from unstuck.integrations.coding_agents.client import stop_server, write_client

NOOP = "cat >/dev/null"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spawn(command: str, payload: str, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(["sh", "-c", command], input=payload, capture_output=True, text=True, env=env, check=False,
                         timeout=60)
    took = (time.perf_counter() - started) * 1000
    if out.returncode != 0:
        raise RuntimeError(f"{command}: exit {out.returncode}: {out.stderr}")
    return took, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    root = Path(tempfile.mkdtemp(prefix="ubh-"))
    socket = root / "run" / "guard.sock"
    client = root / "bin" / "unstuck-hook"
    write_client(client, socket, pythonpath=os.environ.get("PYTHONPATH") or None)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG")}
    for name, folder in (("HOME", "home"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache"),
                         ("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"), ("UNSTUCK_STORE", "store")):
        (root / folder).mkdir(exist_ok=True)
        env[name] = str(root / folder)
    env["CLAUDE_CODE_SESSION_ATTENDED"] = "0"  # as under claude -p
    unstuck = f"{client} claude-code"
    session = "bench-session"
    times: dict[tuple[str, str], list[float]] = {(h, e): [] for h in ("noop", "unstuck")
                                                 for e in ("PreToolUse", "PostToolUse")}
    try:
        spawn(f"{unstuck} SessionStart", json.dumps({"session_id": session, "cwd": str(root), "source": "startup"}),
              env)  # starts the server
        for n in range(-10, runs):
            base = {"session_id": session, "cwd": str(root), "tool_name": "Bash",
                    "tool_input": {"command": f"echo {n}", "description": "Print a number"}, "tool_use_id": f"t{n}"}
            events = {"PreToolUse": {**base, "hook_event_name": "PreToolUse"},
                      "PostToolUse": {**base, "hook_event_name": "PostToolUse",
                                      "tool_response": {"stdout": f"{n}", "stderr": "", "interrupted": False,
                                                        "isImage": False, "noOutputExpected": False}}}
            for event, payload in events.items():
                text = json.dumps(payload)
                took_noop, _ = spawn(NOOP, text, env)
                took, out = spawn(f"{unstuck} {event}", text, env)
                if out:
                    raise RuntimeError(f"the guard answered a plain call with {out!r}")
                if n >= 0:
                    times[("noop", event)].append(took_noop)
                    times[("unstuck", event)].append(took)
    finally:
        stop_server(socket)
        shutil.rmtree(root, ignore_errors=True)
    print(f"hook latency, {runs} Bash calls (PreToolUse + PostToolUse each), ms, spawn to exit, one run:")
    for event in ("PreToolUse", "PostToolUse"):
        noop, guarded = times[("noop", event)], times[("unstuck", event)]
        paired = [g - n for g, n in zip(guarded, noop, strict=True)]
        print(f"  {event:12} no-op    p50 {quantile(noop, .5):6.1f}  p90 {quantile(noop, .9):6.1f}  "
              f"p99 {quantile(noop, .99):6.1f}")
        print(f"  {event:12} unstuck  p50 {quantile(guarded, .5):6.1f}  p90 {quantile(guarded, .9):6.1f}  "
              f"p99 {quantile(guarded, .99):6.1f}")
        print(f"  {event:12} added    p50 {quantile(guarded, .5) - quantile(noop, .5):6.1f}  "
              f"p99 {quantile(guarded, .99) - quantile(noop, .99):6.1f}   (paired differences: p50 "
              f"{quantile(paired, .5):.1f}, p99 {quantile(paired, .99):.1f}; mean {statistics.fmean(paired):.1f})")
    print("target: added p50 <= 30 ms, p99 <= 100 ms")


if __name__ == "__main__":
    sys.exit(main())
