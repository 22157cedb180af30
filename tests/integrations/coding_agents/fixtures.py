"""The hook payloads the real CLIs sent (``tests/data/coding_agents/``, written by
``tests/agents_support/capture_hooks.py``), for the mapping tests."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data" / "coding_agents"


def captured(agent: str, version: str) -> dict[str, Any]:
    """The capture file of ``agent`` at ``version``: ``{"agent", "version", "how", "events"}``."""
    loaded: dict[str, Any] = json.loads((DATA / f"{agent}-{version}.json").read_text(encoding="utf-8"))
    return loaded


def finder(events: list[dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``find(event, command=None, tool=None)``: a deep copy of the first captured event named
    ``event`` (whose shell command is ``command`` / whose tool is ``tool``, when given)."""

    def find(event: str, command: str | None = None, tool: str | None = None) -> dict[str, Any]:
        for entry in events:
            payload = entry["payload"]
            if entry["event"] != event:
                continue
            if command is not None and (payload.get("tool_input") or {}).get("command") != command:
                continue
            if tool is not None and payload.get("tool_name") != tool:
                continue
            return copy.deepcopy(entry)
        raise LookupError(f"no captured {event} for command={command!r} tool={tool!r}")

    return find


def with_transcript(payload: dict[str, Any], transcript: Path, folder: Path) -> dict[str, Any]:
    """``payload`` with its ``transcript_path`` pointing at a copy of ``transcript`` in ``folder``."""
    copied = folder / "rollout.jsonl"
    if not copied.exists():
        shutil.copyfile(transcript, copied)
    return {**payload, "transcript_path": str(copied)}
