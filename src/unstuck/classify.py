"""Infer a situation from a tool result that declared none, from generic signals only.

The signals are data, in ``unstuck/data/signals.yaml`` (seed 000 section 3.2 lists them):

* a call that was not executed (refused by a permission tier) → ``permission``;
* the text rows, tried in order, first match wins: sign-in prompts and "not logged in" →
  ``auth``; "rate limit" → ``quota`` (retryable, with ``retry_after_s`` from a Retry-After
  header or "retry in N seconds"); "command not found" and "is not recognized as an internal
  or external command" → ``not_installed``; connection-failure and not-permitted wordings;
  the truncation marker → ``truncated``; and so on;
* then the exception type, the HTTP status (401 → auth, 403 → permission, ...), the exit
  code (127 → not_installed, 126 → permission, 124 → timeout);
* an empty success from a search tool → ``empty``.

A successful result is read only for degenerate and adversarial signals (truncation,
emptiness, an injected instruction): output that merely contains the word "error" in a
success is not a failure. A failed result that matches nothing is ``execution_error``.

Inferred situations have ``source=inferred`` and never an unblock or a probe.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from unstuck.situations import Kind, Situation, Source
from unstuck.tools import ToolResult, ToolSpec

__all__ = ["SignalTable", "classify_output", "classify_result", "load_signal_table"]

_DETAIL_CHARS = 240
#: Only this much of a result is read: its head and its tail (characters). Failures are worded
#: at the start or the end; a tool's own truncation keeps a result under the head size.
SCAN_HEAD_CHARS = 96_000
SCAN_TAIL_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class _Verdict:
    kind: Kind
    interactive: bool = False
    retryable: bool = False


@dataclass(frozen=True, slots=True)
class _TextRow:
    verdict: _Verdict
    pattern: re.Pattern[str]
    success_too: bool
    subject: re.Pattern[str] | None = None


@dataclass(frozen=True, slots=True)
class SignalTable:
    """The compiled signal table: text rows in order, and lookup tables by code and type."""

    text_rows: tuple[_TextRow, ...]
    http_status: Mapping[int, _Verdict]
    exit_code: Mapping[int, _Verdict]
    exception: Mapping[str, _Verdict]
    decisive_exit_codes: frozenset[int]
    search_tool: re.Pattern[str]
    empty: re.Pattern[str]
    retry_after_headers: tuple[str, ...]
    retry_after_text: re.Pattern[str]


def _verdict(where: str, raw: object) -> _Verdict:
    if not isinstance(raw, Mapping):
        raise ValueError(f"signal table: {where} must be a mapping, got {raw!r}")
    try:
        kind = Kind(raw["kind"])
    except (KeyError, ValueError):
        raise ValueError(f"signal table: {where} has an unknown or missing kind {raw.get('kind')!r}") from None
    return _Verdict(kind, bool(raw.get("interactive", False)), bool(raw.get("retryable", False)))


_ESCAPE = re.compile(r"\\.")


def _compile(where: str, pattern: object) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise ValueError(f"signal table: {where} pattern must be a string")
    if any(ch.isupper() for ch in _ESCAPE.sub("", pattern)):
        raise ValueError(f"signal table: {where} pattern has an upper-case letter; text is matched in lower case")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"signal table: {where} pattern does not compile: {exc}") from exc


def _parse_table(data: Mapping[str, Any]) -> SignalTable:
    rows = []
    for index, row in enumerate(data.get("text", [])):
        where = f"text row {index}"
        subject = row.get("subject")
        rows.append(_TextRow(
            _verdict(where, row), _compile(where, row.get("pattern")), bool(row.get("success_too")),
            _compile(f"{where} subject", subject) if subject is not None else None,
        ))
    return SignalTable(
        text_rows=tuple(rows),
        http_status={int(k): _verdict(f"http_status {k}", v) for k, v in data.get("http_status", {}).items()},
        exit_code={int(k): _verdict(f"exit_code {k}", v) for k, v in data.get("exit_code", {}).items()},
        exception={str(k): _verdict(f"exception {k}", v) for k, v in data.get("exception", {}).items()},
        decisive_exit_codes=frozenset(int(code) for code in data.get("decisive_exit_codes", [])),
        search_tool=_compile("search_tool_pattern", data.get("search_tool_pattern", "search")),
        empty=_compile("empty_pattern", data.get("empty_pattern", r"^\s*$")),
        retry_after_headers=tuple(str(h).lower() for h in data.get("retry_after_headers", [])),
        retry_after_text=_compile("retry_after_text", data.get("retry_after_text", r"(?!x)x")),
    )


@functools.cache
def load_signal_table() -> SignalTable:
    """Load and compile the bundled signal table (cached).

    Raises:
        ValueError: naming the row, when a row has an unknown kind or a pattern that does not
            compile.
    """
    text = resources.files("unstuck").joinpath("data/signals.yaml").read_text(encoding="utf-8")
    return _parse_table(yaml.safe_load(text))


def _retry_after(table: SignalTable, result: ToolResult) -> float | None:
    for name in table.retry_after_headers:
        value = result.header(name)
        if value is not None:
            try:
                wait = float(value.strip())
            except ValueError:
                continue  # an HTTP-date Retry-After needs a clock: tools declare it (unstuck.declare)
            if math.isfinite(wait):  # "nan" and "inf" parse as floats; neither is a wait
                return max(wait, 0.0)
    found = table.retry_after_text.search(result.content.lower())
    if found is None:
        return None
    wait = float(found.group(1))
    return wait if math.isfinite(wait) else None


def _subject(tool: ToolSpec | str, args: Mapping[str, Any]) -> str:
    if isinstance(tool, ToolSpec):
        return tool.subject_of(args)
    return tool


def _situation(
    table: SignalTable, verdict: _Verdict, subject: str, result: ToolResult, evidence: str
) -> Situation:
    retry_after = _retry_after(table, result) if verdict.retryable else None
    return Situation(
        kind=verdict.kind,
        subject=subject,
        interactive=verdict.interactive,
        retryable=verdict.retryable,
        retry_after_s=retry_after,
        source=Source.INFERRED,
        detail=evidence[:_DETAIL_CHARS],
    )


def _window(text: str) -> str:
    if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        return text
    return text[:SCAN_HEAD_CHARS] + "\n" + text[-SCAN_TAIL_CHARS:]


def _named_subject(row: _TextRow, lowered: str, original: str, default: str) -> str:
    """The subject a row's wording names (a missing program), in its original case."""
    if row.subject is None:
        return default
    found = row.subject.search(lowered)
    if found is None:
        return default
    index = next((i for i in range(1, (found.lastindex or 0) + 1) if found.group(i)), None)
    if index is None:
        return default
    start, end = found.span(index)
    same_length = len(lowered) == len(original)
    return (original[start:end] if same_length else found.group(index)) or default


def _first_line_around(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end != -1 else len(text)].strip()


def _match_rows(table: SignalTable, ok: bool, lowered: str) -> tuple[_TextRow, re.Match[str]] | None:
    """The first text row that reads ``lowered`` (a success is read only for degenerate and
    adversarial rows; a failure never for an injected instruction)."""
    for row in table.text_rows:
        if ok and not row.success_too:
            continue
        if not ok and row.verdict.kind is Kind.INJECTED_INSTRUCTION:
            continue
        match = row.pattern.search(lowered)
        if match:
            return row, match
    return None


def classify_output(
    tool: ToolSpec | str,
    args: Mapping[str, Any],
    output: str,
    *,
    exit_code: int | None = None,
    http_status: int | None = None,
    table: SignalTable | None = None,
) -> Situation | None:
    """Classify a tool's printed output when the caller may not know whether the call failed.

    With an exit code or an HTTP status, they decide success (exit 0 and status below 400).
    Without either, the wording decides: when a failure row reads the text it is classified
    as a failure; otherwise as a success (truncated, empty, injected instruction, or nothing).
    Never raises on any text.
    """
    table = table or load_signal_table()
    name = tool.name if isinstance(tool, ToolSpec) else tool
    if exit_code is not None or http_status is not None:
        ok = exit_code in (None, 0) and (http_status is None or http_status < 400)
        return classify_result(tool, args, ToolResult(name, ok, output, exit_code=exit_code, http_status=http_status),
                               table=table)
    failed = _match_rows(table, False, _window(output).lower()) is not None
    return classify_result(tool, args, ToolResult(name, not failed, output), table=table)


def classify_result(
    tool: ToolSpec | str,
    args: Mapping[str, Any],
    result: ToolResult,
    *,
    table: SignalTable | None = None,
) -> Situation | None:
    """Infer what ``result`` means for the loop, from generic signals only.

    Args:
        tool: the tool's spec (its ``subject_of(args)`` names the subject) or just its name
            (then the name is the subject).
        args: the call's arguments.
        result: the normalised result; its declared situation, if any, is ignored here (the
            loop prefers it: declared beats inferred).
        table: a signal table; the bundled one by default.

    Returns:
        An inferred :class:`Situation` (never with ``unblock`` or ``probe``), or ``None`` when
        the result is an ordinary success. Never raises on any content.
    """
    table = table or load_signal_table()
    subject = _subject(tool, args)
    tool_name = (tool.name if isinstance(tool, ToolSpec) else tool).lower()
    text = _window(result.content)
    lowered = text.lower()  # patterns are lower case: much faster than re.IGNORECASE
    # Lower-casing can change a string's length ("İ" → "i̇"); offsets then come from ``lowered``.
    evidence_text = text if len(lowered) == len(text) else lowered
    if not result.executed:
        return _situation(table, _Verdict(Kind.PERMISSION), subject, result, text)
    if not result.ok and result.exit_code in table.decisive_exit_codes:
        verdict = table.exit_code[result.exit_code]
        namer = next((row for row in table.text_rows if row.verdict.kind is verdict.kind and row.subject), None)
        named = _named_subject(namer, lowered, text, subject) if namer is not None else subject
        worded = namer.pattern.search(lowered) if namer is not None else None
        evidence = (
            _first_line_around(evidence_text, worded) if worded is not None
            else text.strip().splitlines()[0] if text.strip() else f"exit code {result.exit_code}"
        )
        return _situation(table, verdict, named, result, evidence)
    found = _match_rows(table, result.ok, lowered)
    if found is not None:
        row, match = found
        named = _named_subject(row, lowered, text, subject)
        return _situation(table, row.verdict, named, result, _first_line_around(evidence_text, match))
    if result.ok:
        if table.search_tool.search(tool_name) and table.empty.fullmatch(lowered):
            return _situation(table, _Verdict(Kind.EMPTY), subject, result, "no results")
        return None
    structured = (
        table.exception.get(result.error_type or "")
        or table.http_status.get(result.http_status or 0)
        or table.exit_code.get(result.exit_code if result.exit_code is not None else 0)
        or _Verdict(Kind.EXECUTION_ERROR)
    )
    return _situation(table, structured, subject, result, text.strip().splitlines()[-1] if text.strip() else "")
