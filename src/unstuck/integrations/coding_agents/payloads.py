"""Reading the fields of a coding agent's hook payload, each failure a
:class:`~unstuck.integrations.coding_agents.events.HookPayloadError` naming the agent, the event and
the field; and the bounded reads of an agent's own transcript file that Codex's mappings need.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Nothing here writes anything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from unstuck.integrations.coding_agents.events import Agent, HookPayloadError

__all__ = [
    "TRANSCRIPT_TAIL_BYTES",
    "boolean",
    "mapping",
    "text",
    "transcript_head",
    "transcript_tail",
]

#: How much of a transcript's end is read for one call's record (bytes): a call's record is
#: written just before its post-tool hook runs, so it is among the last lines.
TRANSCRIPT_TAIL_BYTES = 4 * 1024 * 1024
#: The longest first line of a transcript read (bytes): Codex's ``session_meta`` line carries
#: the base instructions (tens of kilobytes).
_HEAD_BYTES = 4 * 1024 * 1024


def text(agent: Agent, event: str, payload: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    """``payload[key]`` as a string: non-empty when ``required``, ``""`` when absent otherwise.

    Raises:
        HookPayloadError: a required field missing or empty, or a field that is not a string.
    """
    value = payload.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise HookPayloadError(agent, event, key, f"expected a non-empty string, got {type(value).__name__}")
    return value


def mapping(agent: Agent, event: str, payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``payload[key]`` as a JSON object.

    Raises:
        HookPayloadError: when it is missing or not an object.
    """
    value = payload.get(key)
    if not isinstance(value, Mapping):
        raise HookPayloadError(agent, event, key, f"expected an object, got {type(value).__name__}")
    return value


def boolean(agent: Agent, event: str, payload: Mapping[str, Any], key: str) -> bool:
    """``payload[key]`` as a boolean (``False`` when absent).

    Raises:
        HookPayloadError: when it is present and not a boolean.
    """
    value = payload.get(key, False)
    if not isinstance(value, bool):
        raise HookPayloadError(agent, event, key, f"expected a boolean, got {type(value).__name__}")
    return value


def _readable_jsonl(path: str) -> Path | None:
    """``path`` when it names a regular ``.jsonl`` file, else ``None``."""
    if not path or not path.endswith(".jsonl"):
        return None
    candidate = Path(path)
    try:
        return candidate if candidate.is_file() else None
    except OSError:
        return None


def transcript_head(path: str) -> Mapping[str, Any] | None:
    """The first record of the JSON-lines transcript at ``path`` (at most 4 MiB read), or
    ``None`` when there is no such file or its first line is not a JSON object."""
    found = _readable_jsonl(path)
    if found is None:
        return None
    try:
        with found.open("rb") as stream:
            line = stream.readline(_HEAD_BYTES)
        record = json.loads(line)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, Mapping) else None


def transcript_tail(path: str, needle: str) -> Iterator[Mapping[str, Any]]:
    """The records of the JSON-lines transcript at ``path`` whose line contains ``needle``,
    last first, read from the file's last :data:`TRANSCRIPT_TAIL_BYTES` (a cut first line is
    skipped); nothing when there is no such file."""
    found = _readable_jsonl(path)
    if found is None or not needle:
        return
    try:
        with found.open("rb") as stream:
            size = stream.seek(0, os.SEEK_END)
            start = max(0, size - TRANSCRIPT_TAIL_BYTES)
            stream.seek(start)
            data = stream.read()
    except OSError:
        return
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]
    wanted = needle.encode("utf-8")
    for line in reversed(lines):
        if wanted not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, Mapping):
            yield record
