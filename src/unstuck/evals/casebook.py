"""Scoring the classifier on a labelled corpus (``unstuck classify --cases FILE.jsonl``).
Internal: not a supported import path (docs/reference/index.md lists those that are).

The corpus has one JSON object per line, in the format of ``shared/cases/tool_outputs.jsonl``:
``id``, ``tool``, ``output``, ``exit_code`` and ``http_status`` (or null), ``expected_kind``
(a kind, or ``ok`` for no failure), ``interactive`` and ``retryable``. Each case is classified
with :func:`unstuck.recognise.classify.classify_output` from what a tool would report (its output and
codes), never from its label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from unstuck.core.errors import UnstuckError
from unstuck.core.readers import parse_json, read_text
from unstuck.recognise.classify import classify_output
from unstuck.recognise.signals import SignalTable

__all__ = ["Case", "CaseError", "CaseScore", "ToolScore", "load_cases", "score_cases"]

NO_FAILURE = "ok"


class CaseError(UnstuckError, ValueError):
    """A corpus file cannot be read, or a line is not a case; the message names both."""


@dataclass(frozen=True, slots=True)
class Case:
    """One labelled tool output."""

    id: str
    tool: str
    output: str
    exit_code: int | None
    http_status: int | None
    expected_kind: str
    interactive: bool
    retryable: bool


@dataclass(frozen=True, slots=True)
class ToolScore:
    """How the classifier did on one tool's cases: cases, kinds right, interactive cases and
    how many of them were flagged."""

    tool: str
    total: int
    kind_correct: int
    interactive_actual: int
    interactive_flagged: int

    @property
    def kind_accuracy(self) -> float:
        """Share of this tool's cases whose kind was right."""
        return self.kind_correct / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class CaseScore:
    """How the classifier did on a corpus.

    ``confusion`` counts (expected kind, classified kind) pairs; ``wrong`` lists
    (id, expected, classified) for each case whose kind was wrong; ``missed_interactive``
    the ids of interactive cases not flagged; ``failure_as_ok`` the ids of failures classified
    as no situation at all; ``by_tool`` the score per tool, by name.
    """

    total: int
    kind_correct: int
    interactive_true_positive: int
    interactive_predicted: int
    interactive_actual: int
    retryable_correct: int
    confusion: Counter[tuple[str, str]]
    wrong: tuple[tuple[str, str, str], ...]
    missed_interactive: tuple[str, ...] = ()
    failure_as_ok: tuple[str, ...] = ()
    by_tool: tuple[ToolScore, ...] = ()

    @property
    def kind_accuracy(self) -> float:
        """Share of cases whose kind was right."""
        return self.kind_correct / self.total if self.total else 0.0

    @property
    def interactive_precision(self) -> float:
        """Of the cases classified interactive, the share that are."""
        return self.interactive_true_positive / self.interactive_predicted if self.interactive_predicted else 1.0

    @property
    def interactive_recall(self) -> float:
        """Of the interactive cases, the share classified so."""
        return self.interactive_true_positive / self.interactive_actual if self.interactive_actual else 1.0

    @property
    def interactive_accuracy(self) -> float:
        """Share of cases whose interactive flag was right (the issue's bar: at least 90%)."""
        if not self.total:
            return 0.0
        false_positive = self.interactive_predicted - self.interactive_true_positive
        false_negative = self.interactive_actual - self.interactive_true_positive
        return (self.total - false_positive - false_negative) / self.total

    @property
    def retryable_accuracy(self) -> float:
        """Share of cases whose retryable flag was right."""
        return self.retryable_correct / self.total if self.total else 0.0


def _code(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseError(f"{where}: must be a whole number or null, not {value!r}")
    return value


def load_cases(path: Path) -> list[Case]:
    """Read a corpus file.

    Raises:
        CaseError: naming the file and line, when it cannot be read or a line lacks a field.
    """
    lines = read_text(path, what="the cases", error=CaseError).splitlines()
    cases = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = parse_json(line, where=where, error=CaseError)
            if not isinstance(raw, dict):
                raise CaseError(f"{where}: a case is a JSON object, not {type(raw).__name__}")
            cases.append(Case(
                id=str(raw["id"]), tool=str(raw.get("tool") or "tool"), output=str(raw["output"]),
                exit_code=_code(raw.get("exit_code"), f"{where} exit_code"),
                http_status=_code(raw.get("http_status"), f"{where} http_status"),
                expected_kind=str(raw["expected_kind"]), interactive=bool(raw.get("interactive")),
                retryable=bool(raw.get("retryable")),
            ))
        except (KeyError, TypeError, AttributeError) as exc:
            raise CaseError(f"{where}: missing or malformed field ({exc})") from exc
    return cases


def score_cases(cases: Sequence[Case], *, table: SignalTable | None = None) -> CaseScore:
    """Classify every case (with ``table``, the default signal table when ``None``) and score
    it against its labels."""
    kind_correct = tp = predicted = actual = retry_correct = 0
    confusion: Counter[tuple[str, str]] = Counter()
    wrong = []
    missed: list[str] = []
    as_ok: list[str] = []
    tools: dict[str, list[int]] = {}
    for case in cases:
        situation = classify_output(case.tool, {}, case.output, exit_code=case.exit_code, http_status=case.http_status,
                                    table=table)
        got = situation.kind.value if situation is not None else NO_FAILURE
        interactive = situation.interactive if situation is not None else False
        retryable = situation.retryable if situation is not None else False
        confusion[(case.expected_kind, got)] += 1
        tally = tools.setdefault(case.tool, [0, 0, 0, 0])
        tally[0] += 1
        if got == case.expected_kind:
            kind_correct += 1
            tally[1] += 1
        else:
            wrong.append((case.id, case.expected_kind, got))
            if got == NO_FAILURE:
                as_ok.append(case.id)
        if case.interactive:
            tally[2] += 1
            tally[3] += interactive
            if not interactive:
                missed.append(case.id)
        predicted += interactive
        actual += case.interactive
        tp += interactive and case.interactive
        retry_correct += retryable == case.retryable
    by_tool = tuple(ToolScore(tool, *tally) for tool, tally in sorted(tools.items()))
    return CaseScore(len(cases), kind_correct, tp, predicted, actual, retry_correct, confusion, tuple(wrong),
                     tuple(missed), tuple(as_ok), by_tool)
