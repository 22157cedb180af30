"""Benchmark: the injection shapes' recall on the shared cases, false positives on documents.

Two measurements over the adversarial rows of ``src/unstuck/data/signals.yaml`` (issue 25,
deliver 2), each for the classifier (:func:`unstuck.classify.classify_output`: the kind a
tool result is given) and for the prose screen (:func:`unstuck.instructions.find_instruction`:
the rows plus the download-and-run structure, what mcp-proxy and the unblock screen refuse):

1. **Recall** on every shared case labelled ``injected_instruction``
   (``../shared/cases/tool_outputs*.jsonl``), and the cases of any other label that the rows
   read as an injection (false positives among the cases); incidents labelled
   ``injected_instruction`` are counted apart: they record no tool text to read.
2. **False positives** on the reader-document corpus, ``tests/data/reader_documents/``:
   READMEs, NEWS files, Debian changelogs and manual pages of Debian packages (the list and
   licences in its ``LICENCES``), each read as the output of ``cat`` on that file (a document)
   and screened as prose. The target is none.

Run: ``PYTHONPATH=src .venv/bin/python bench/injection_shapes.py`` (``--show`` prints each
flagged line).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from unstuck.classify import classify_output, find_injection
from unstuck.instructions import find_instruction
from unstuck.situations import Kind

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = ROOT.parent / "shared" / "cases"
CORPUS = ROOT / "tests" / "data" / "reader_documents"
INJECTED = Kind.INJECTED_INSTRUCTION.value


def reader_documents() -> list[tuple[str, str]]:
    """The corpus as (document, text), in the order its ``LICENCES`` lists them."""
    lines = (CORPUS / "LICENCES").read_text(encoding="utf-8").splitlines()
    names = [line.split("\t", 1)[0] for line in lines if line and not line.startswith("#")]
    return [(name, (CORPUS / name).read_text(encoding="utf-8")) for name in names]


def shared_cases() -> list[dict[str, object]]:
    cases: list[dict[str, object]] = []
    for path in sorted(CASES_DIR.glob("tool_outputs*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                cases.append({**json.loads(line), "file": path.name})
    return cases


def _kind(case: dict[str, object]) -> str:
    situation = classify_output(str(case["tool"]), {}, str(case["output"]),
                                exit_code=case["exit_code"], http_status=case["http_status"])  # type: ignore[arg-type]
    return situation.kind.value if situation is not None else "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print each flagged line")
    options = parser.parse_args()

    cases = shared_cases()
    labelled = [c for c in cases if c["expected_kind"] == INJECTED]
    print(f"## Recall on the shared cases labelled {INJECTED} ({len(labelled)} of {len(cases)} cases)")
    print(f"{'case':<8} {'file':<22} {'classified as':<22} screen")
    found_kind = found_screen = 0
    for case in labelled:
        kind = _kind(case)
        screened = find_instruction(str(case["output"]))
        found_kind += kind == INJECTED
        found_screen += screened is not None
        print(f"{case['id']!s:<8} {case['file']!s:<22} {kind:<22} {'found' if screened else 'missed'}")
        if options.show and screened:
            print(f"         {screened[:150]!r}")
    print(f"recall: classified {found_kind}/{len(labelled)}, screened {found_screen}/{len(labelled)}")
    others = [c for c in cases if c["expected_kind"] != INJECTED]
    wrong = [c for c in others if _kind(c) == INJECTED]
    print(f"cases of other labels classified {INJECTED}: {len(wrong)}/{len(others)}"
          + "".join(f"\n  {c['id']} (labelled {c['expected_kind']})" for c in wrong))
    incidents = [json.loads(line) for line in (CASES_DIR / "incidents.jsonl").read_text(encoding="utf-8").splitlines()
                 if line.strip()] if (CASES_DIR / "incidents.jsonl").exists() else []
    adversarial = [i for i in incidents if i.get("blocker_kind") == INJECTED]
    print(f"incidents with blocker_kind {INJECTED}: {len(adversarial)} (no tool text recorded: "
          "first_signal is a paraphrase; not scored)")

    documents = reader_documents()
    print(f"\n## False positives on the reader-document corpus ({len(documents)} documents, "
          f"{sum(len(t) for _, t in documents) / 1e6:.1f} MB)")
    started = time.perf_counter()
    rows = [(name, find_injection(text)) for name, text in documents]
    rows_s = time.perf_counter() - started
    started = time.perf_counter()
    screen = [(name, find_instruction(text)) for name, text in documents]
    screen_s = time.perf_counter() - started
    kinds = [(name, classify_output("cat", {"args": name}, text, exit_code=0)) for name, text in documents]
    classified = [name for name, situation in kinds if situation is not None and situation.kind is Kind.INJECTED_INSTRUCTION]
    for label, flagged, seconds in (("signal rows (find_injection)", rows, rows_s),
                                    ("prose screen (find_instruction)", screen, screen_s)):
        hits = [(name, line) for name, line in flagged if line is not None]
        print(f"{label}: {len(hits)} false positives in {len(documents)} documents "
              f"({seconds * 1000 / len(documents):.2f} ms per document)")
        for name, line in hits:
            print(f"  {name}: {line[:160]!r}")
    print(f"classified {INJECTED} as the output of cat: {len(classified)}"
          + "".join(f"\n  {name}" for name in classified))
    return 0


if __name__ == "__main__":
    sys.exit(main())
