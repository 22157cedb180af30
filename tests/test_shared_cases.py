"""Every real-world case in ../shared/cases/tool_outputs.jsonl, each a test with its label.

The classifier sees only what the tool reported (output, exit code, HTTP status), never the
label. Cases the signal table still gets wrong are listed with the reason, as strict xfails:
fixing one makes its test fail until it is taken off the list.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unstuck.classify import classify_output
from unstuck.evals.casebook import load_cases, score_cases

CASES_FILE = Path(__file__).resolve().parents[2] / "shared" / "cases" / "tool_outputs.jsonl"

#: Known misses, by case id, and why no general signal separates them yet.
KNOWN_MISSES = {
    "c023": "the same pip wording as c022 (not_found: no such package) is labelled invalid_args here, where the package name was a typo (`pip install install`)",
    "c106": "a refused connection labelled unavailable (the server is down), worded as c055's network errors",
    "c116": "a typo ('nmp') labelled invalid_args, worded exactly like a missing program",
    "c119": "an unquoted path ('C:\\\\Program') labelled invalid_args, worded like a missing program",
    "c162": "documentation quoting an injection phrase, labelled ok",
}


def shared_cases() -> list[dict[str, object]]:
    if not CASES_FILE.exists():
        return []
    return [json.loads(line) for line in CASES_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]


CASES = shared_cases()
pytestmark = pytest.mark.skipif(not CASES, reason=f"{CASES_FILE} is not beside this checkout")


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=str(c["id"]), marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[str(c["id"])]))
        if c["id"] in KNOWN_MISSES else pytest.param(c, id=str(c["id"]))
        for c in CASES
    ],
)
def test_case_kind(case: dict[str, object]) -> None:
    situation = classify_output(str(case["tool"]), {}, str(case["output"]),
                                exit_code=case["exit_code"], http_status=case["http_status"])  # type: ignore[arg-type]
    assert (situation.kind.value if situation is not None else "ok") == case["expected_kind"]


def test_kind_accuracy_and_flags_meet_the_bar() -> None:
    score = score_cases(load_cases(CASES_FILE))
    assert score.kind_accuracy >= 0.95, score.wrong
    assert score.retryable_accuracy >= 0.90
    assert score.interactive_accuracy >= 0.90

