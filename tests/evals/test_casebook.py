from __future__ import annotations

import json
from pathlib import Path

import pytest

from unstuck.evals.casebook import CaseError, load_cases, score_cases

CASES = [
    {"id": "a", "tool": "gh", "output": "To get started with GitHub CLI, please run:  gh auth login", "exit_code": 4,
     "http_status": None, "expected_kind": "auth", "interactive": True, "retryable": False},
    {"id": "b", "tool": "bash", "output": "bash: jq: command not found", "exit_code": 127, "http_status": None,
     "expected_kind": "not_installed", "interactive": False, "retryable": False},
    {"id": "c", "tool": "curl", "output": "all 3 checks passed, 0 errors", "exit_code": 0, "http_status": None,
     "expected_kind": "ok", "interactive": False, "retryable": False},
    {"id": "d", "tool": "api", "output": "slow down", "exit_code": None, "http_status": 429,
     "expected_kind": "auth", "interactive": True, "retryable": False},  # labelled wrong on purpose
]


def write(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_scores_come_from_the_labels(tmp_path: Path) -> None:
    score = score_cases(load_cases(write(tmp_path, CASES)))
    # a, b, c are classified as labelled; d is a retryable quota (HTTP 429), not the label's auth
    assert score.total == 4 and score.kind_correct == 3 and score.kind_accuracy == 0.75
    assert score.wrong == (("d", "auth", "quota"),)
    assert (score.interactive_actual, score.interactive_predicted, score.interactive_true_positive) == (2, 1, 1)
    assert score.interactive_precision == 1.0 and score.interactive_recall == 0.5
    assert score.retryable_correct == 3  # d is retryable, labelled not
    assert score.confusion[("auth", "quota")] == 1


def test_a_malformed_line_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(CASES[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(CaseError, match=f"{path}:2: not JSON"):
        load_cases(path)
    path.write_text(json.dumps({"id": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(CaseError, match=f"{path}:1: missing or malformed field"):
        load_cases(path)
