"""Capture the hook payloads the real Codex CLI and Gemini CLI send, as test fixtures
(``tests/data/coding_agents/``): each CLI runs offline against a scripted model server on
127.0.0.1 in a throw-away home, with a recording hook on every event unstuck installs, playing
tool calls around the real (logged-out) ``gh``.

Run from the repository root (needs the CLIs ``./bootstrap`` installs, and ``gh``)::

    .venv/bin/python tests/agents_support/capture_hooks.py

It writes ``codex-VERSION.json`` and ``gemini-VERSION.json`` (``{"agent", "version", "how",
"events": [{"event", "payload", "env"}]}``: ``env`` holds only the variables a mapping reads)
and, for Codex, ``codex-VERSION.transcript.jsonl`` (the session's rollout file its
``transcript_path`` named: the exit codes are there). Nothing here is run by the tests.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: conftest's bare_env, run as a script too
from conftest import bare_env
from unstuck.core.tools import ToolCall
from unstuck.evals import coding_clis
from unstuck.evals.model_servers.base import PlayList
from unstuck.evals.model_servers.gemini import GeminiServer
from unstuck.evals.model_servers.openai_responses import ResponsesServer

OUT = Path(__file__).resolve().parent.parent / "data" / "coding_agents"
#: The environment variables the mappings read (unattended hints), kept in a fixture.
KEPT = ("CI", "GITHUB_ACTIONS", "GEMINI_SESSION_ID", "GEMINI_CWD", "GEMINI_PROJECT_DIR", "GEMINI_CLI_TRUST_WORKSPACE",
        "CODEX_MANAGED_BY_NPM")

RECORDER = """\
import json, os, sys
payload = sys.stdin.read()
with open(os.environ["HOOK_RECORD"], "a", encoding="utf-8") as out:
    out.write(json.dumps({"event": sys.argv[1], "payload": json.loads(payload),
                          "env": {k: v for k, v in os.environ.items() if k in KEPT}}) + "\\n")
""".replace("KEPT", repr(KEPT))

CODEX_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
GEMINI_EVENTS = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "SessionEnd")


def _env(home: Path, record: Path) -> dict[str, str]:
    return bare_env(home=home, PATH=os.environ.get("PATH", "/usr/bin:/bin"), HOOK_RECORD=record, LANG="C.UTF-8")


def _read(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines() if line.strip()]


def capture_codex(scratch: Path) -> None:
    home, work, record = scratch / "codex-home", scratch / "codex-work", scratch / "codex.jsonl"
    work.mkdir(parents=True)
    hook = scratch / "record.py"
    hook.write_text(RECORDER, encoding="utf-8")
    moves = ["gh pr view 1 --repo cli/cli", "echo hello; echo oops >&2; exit 3", "ls"]
    with ResponsesServer(PlayList(moves, answer="I could not get the description.")) as server:
        coding_clis.codex_config(home, server.base_url)
        hooks = {event: [{"matcher": "*", "hooks": [{"type": "command", "command": f"{sys.executable} {hook} {event}"}]}]
                 for event in CODEX_EVENTS}
        (home / ".codex" / "hooks.json").write_text(json.dumps({"hooks": hooks}, indent=2), encoding="utf-8")
        run = coding_clis.codex_exec("Fetch the description of PR 1 of cli/cli.", cwd=work,
                                     env=_env(home, record), bypass_hook_trust=True)
    if run.exit_code != 0:
        raise SystemExit(f"codex exited {run.exit_code}: {run.stderr[-2000:]}")
    events = _read(record)
    transcript = Path(events[0]["payload"]["transcript_path"])
    version = coding_clis.CODEX_VERSION
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"codex-{version}.transcript.jsonl").write_text(transcript.read_text(encoding="utf-8"), encoding="utf-8")
    _write("codex", version, events, "codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox "
           "--dangerously-bypass-hook-trust, a recording hook on " + ", ".join(CODEX_EVENTS) + "; moves: "
           + "; ".join(moves))


def capture_gemini(scratch: Path) -> None:
    home, work, record = scratch / "gemini-home", scratch / "gemini-work", scratch / "gemini.jsonl"
    work.mkdir(parents=True)
    (work / "notes.txt").write_text("line one\n", encoding="utf-8")
    hook = scratch / "record.py"
    hook.write_text(RECORDER, encoding="utf-8")
    moves: list[str | ToolCall] = [
        "gh pr view 1 --repo cli/cli",
        "echo hello; echo oops >&2; exit 3",
        "ls",
        ToolCall.of("", "read_file", {"file_path": "notes.txt"}),
        ToolCall.of("", "read_file", {"file_path": "missing.txt"}),
        ToolCall.of("", "write_file", {"file_path": "out.txt", "content": "hello\n"}),
        ToolCall.of("", "replace", {"file_path": "out.txt", "old_string": "hello", "new_string": "bye",
                                    "instruction": "Say bye."}),
        ToolCall.of("", "web_fetch", {"prompt": "Summarise https://127.0.0.1:9/page"}),
        ToolCall.of("", "mcp_shellsrv_run_command", {"command": "gh pr view 1"}),
    ]
    hooks = {event: [{"matcher": "*", "hooks": [{"type": "command", "name": f"record-{event}",
                                                 "command": f"{sys.executable} {hook} {event}"}]}]
             for event in GEMINI_EVENTS}
    mcp = {"shellsrv": {"command": sys.executable, "args": ["-m", "unstuck.integrations.shell_server"], "trust": True}}
    with GeminiServer(PlayList(moves, answer="I could not get the description.")) as server:
        coding_clis.gemini_settings(home, {"hooks": hooks, "mcpServers": mcp})
        run = coding_clis.gemini_prompt("Fetch the description of PR 1 of cli/cli.", cwd=work,
                                        env=_env(home, record), base_url=server.base_url)
    if run.exit_code != 0:
        raise SystemExit(f"gemini exited {run.exit_code}: {run.stderr[-2000:]}")
    _write("gemini", coding_clis.GEMINI_VERSION, _read(record),
           "gemini --approval-mode=yolo --model=gemini-2.5-pro -p, a recording hook on " + ", ".join(GEMINI_EVENTS)
           + ", an MCP server shellsrv (unstuck.integrations.shell_server); moves: shell "
           + "gh pr view 1 --repo cli/cli; echo hello; echo oops >&2; exit 3; ls; read_file notes.txt; read_file "
           + "missing.txt; write_file; replace; web_fetch (a loopback URL it refuses); mcp_shellsrv_run_command gh pr "
           + "view 1")


def _write(agent: str, version: str, events: list[dict[str, Any]], how: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    data = {"agent": agent, "version": version, "how": how, "events": events}
    (OUT / f"{agent}-{version}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"{agent} {version}: {len(events)} events")


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="unstuck-capture-"))
    try:
        capture_codex(scratch)
        capture_gemini(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
