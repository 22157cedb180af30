"""``unstuck classify``: what one tool output means (its situation, or none; ``--explain`` the
evidence and the rule that decided), or the scores of labelled corpora (``--cases``).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from unstuck.cli.common import console, fail
from unstuck.core.output import json_text
from unstuck.core.text import for_terminal
from unstuck.recognise.signals import SIGNALS_ENV

if TYPE_CHECKING:
    from unstuck.recognise.classify import Classification
    from unstuck.recognise.signals import SignalTable

__all__ = ["classify_command"]


def classify_command(
    source: Annotated[Path | None, typer.Argument(help="A file of tool output; stdin when left out.")] = None,
    exit_code: Annotated[int | None, typer.Option(help="The tool's exit code.")] = None,
    http_status: Annotated[int | None, typer.Option(help="The HTTP status the tool got.")] = None,
    tool_name: Annotated[str, typer.Option("--tool", help="The tool's name (also the subject).")] = "tool",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Print the evidence and the row or code that decided (or that nothing did)."),
    ] = False,
    cases: Annotated[
        list[Path] | None,
        typer.Option(help="Score labelled corpora (JSON lines, as in shared/cases) instead; repeatable."),
    ] = None,
    signals: Annotated[
        list[Path] | None,
        typer.Option(help=f"Your own signal file (YAML, the shipped format), ahead of the bundled rows; repeatable. "
                          f"Also read from ${SIGNALS_ENV}."),
    ] = None,
    document: Annotated[
        bool, typer.Option("--document", help="The output is a document the tool read (a file, a log): a success "
                                              "is read only for truncation, emptiness and injected instructions.")
    ] = False,
    second_opinion: Annotated[
        str | None,
        typer.Option(help="Ask this model (OpenAI-compatible) about a failure no signal recognises."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="The second opinion's server, e.g. http://127.0.0.1:11434/v1.")
    ] = None,
) -> None:
    """Say what a tool's output means: its situation (kind, subject, flags), or none."""
    from unstuck.core.readers import read_text_window
    from unstuck.recognise.classify import SCAN_HEAD_CHARS, SCAN_TAIL_CHARS, explain_output
    from unstuck.recognise.signals import SignalTableError, load_signal_table
    from unstuck.store.second_opinion import Opinion, SecondOpinion
    from unstuck.toolkit.models import OpenAIChatModel
    from unstuck.toolkit.specs import ToolSpec

    if http_status is not None and not 100 <= http_status <= 599:
        raise fail(f"--http-status {http_status}: an HTTP status is a number from 100 to 599 (RFC 9110 section 15)")
    try:
        table = load_signal_table(signals) if signals else load_signal_table()
    except SignalTableError as exc:
        raise fail(str(exc)) from exc
    if cases:
        _score_cases(cases, as_json, table)
        return
    try:  # only what the classifier scans: its head and its tail (bounded memory, unstuck.core.readers)
        if source is not None:
            with source.open("rb") as stream:
                text = read_text_window(stream, head_chars=SCAN_HEAD_CHARS, tail_chars=SCAN_TAIL_CHARS)
        else:
            text = read_text_window(sys.stdin.buffer, head_chars=SCAN_HEAD_CHARS, tail_chars=SCAN_TAIL_CHARS)
    except OSError as exc:
        raise fail(f"{source or 'stdin'}: {exc.strerror or exc}") from exc
    reader: ToolSpec | str = ToolSpec(tool_name, lambda: None, document_output=True) if document else tool_name
    found = explain_output(reader, {}, text, exit_code=exit_code, http_status=http_status, table=table)
    situation = found.situation
    opinion: Opinion | None = None
    if second_opinion is not None and situation is not None and not found.recognised:
        model = OpenAIChatModel(second_opinion, base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "unstuck"))
        opinion = SecondOpinion(model).review(tool_name, text, situation)
        situation = opinion.situation or situation
    if as_json:
        payload: dict[str, object] = {"situation": situation.to_dict() if situation is not None else None}
        if opinion is not None:
            payload["second_opinion"] = {"used": opinion.situation is not None, "problem": opinion.problem}
        if explain:
            payload["failed"] = found.failed
            payload["recognised"] = found.recognised
            payload["decided_by"] = (
                None if found.decided_by is None else {"stage": found.decided_by.stage.value,
                                                       "rule": found.decided_by.rule,
                                                       "source": found.decided_by.source})
            payload["evidence"] = [{"what": e.what, "excerpt": e.excerpt} for e in found.evidence]
        shown = payload if explain or opinion is not None else payload["situation"]
        console.print_json(json_text(shown))  # exact text, but never a secret (unstuck.core.output)
        return
    if situation is None:
        console.print("no situation: an ordinary success", highlight=False)
    else:
        flags = [name for name in ("interactive", "retryable") if getattr(situation, name)]
        console.print(
            f"{situation.kind.value} ({situation.kind_class.value}) on {escape(for_terminal(situation.subject))}"
            + (f" · {', '.join(flags)}" if flags else "")
            + (f" · retry after {situation.retry_after_s:g} s" if situation.retry_after_s is not None else ""),
            highlight=False,
        )
        if situation.detail:
            console.print(f"evidence: {for_terminal(situation.detail)}", markup=False, highlight=False)
        if situation.suggestion:
            console.print(f"the tool suggests: {for_terminal(situation.suggestion)}", markup=False,
                          highlight=False)
    if opinion is not None:
        said = (f"second opinion ({second_opinion}): {opinion.situation.kind.value}" if opinion.situation is not None
                else f"second opinion ({second_opinion}) not used: {opinion.problem}")
        console.print(for_terminal(said), markup=False, highlight=False)
    if explain:
        _print_explanation(found)


def _print_explanation(found: Classification) -> None:
    from unstuck.recognise.classify import Stage

    decided = found.decided_by
    if decided is None:
        console.print("decided by: nothing (no failure, and no degenerate or adversarial signal)", highlight=False)
    elif decided.stage is Stage.UNRECOGNISED:
        console.print("decided by: nothing matched; an unrecognised failure stays execution_error (inferred)",
                      highlight=False)
    else:
        console.print(f"decided by: {decided.stage.value} · {for_terminal(decided.rule)}", markup=False,
                      highlight=False)
        console.print(f"source: {for_terminal(decided.source)}", markup=False, highlight=False)
    console.print(f"read as: {'a failure' if found.failed else 'not a failure'}", highlight=False)
    for item in found.evidence:
        console.print(f"  {item.what}: {for_terminal(item.excerpt)}", markup=False, highlight=False)


def _score_cases(paths: list[Path], as_json: bool, table: SignalTable) -> None:
    from unstuck.evals.casebook import CaseError, CaseScore, load_cases, score_cases

    scored: list[tuple[Path, CaseScore]] = []
    for path in paths:
        try:
            scored.append((path, score_cases(load_cases(path), table=table)))
        except CaseError as exc:
            raise fail(str(exc)) from exc
    if as_json:
        console.print_json(json_text([{
            "file": str(path), "total": score.total, "kind_accuracy": score.kind_accuracy,
            "interactive_precision": score.interactive_precision, "interactive_recall": score.interactive_recall,
            "retryable_accuracy": score.retryable_accuracy,
            "wrong": [{"id": i, "expected": e, "got": g} for i, e, g in score.wrong],
            "missed_interactive": list(score.missed_interactive), "failure_as_ok": list(score.failure_as_ok),
            "by_tool": [{"tool": t.tool, "total": t.total, "kind_correct": t.kind_correct,
                         "interactive": t.interactive_actual, "interactive_flagged": t.interactive_flagged}
                        for t in score.by_tool],
        } for path, score in scored]))
        return
    for path, score in scored:
        differing = sorted((pair, count) for pair, count in score.confusion.items() if pair[0] != pair[1])
        if differing:
            confusion = Table(title=f"{path.name}: kind expected → classified (only where they differ)")
            for column in ("expected", "classified", "cases"):
                confusion.add_column(column)
            for (expected, got), count in differing:
                confusion.add_row(expected, got, str(count))
            console.print(confusion)
        tools = Table(title=f"{path.name}: per tool")
        for column in ("tool", "cases", "kind right", "interactive flagged"):
            tools.add_column(column, justify="left" if column == "tool" else "right")
        for t in score.by_tool:
            flagged = f"{t.interactive_flagged}/{t.interactive_actual}" if t.interactive_actual else "-"
            tools.add_row(escape(t.tool), str(t.total), f"{t.kind_correct} ({t.kind_accuracy:.0%})", flagged)
        console.print(tools)
        console.print(f"wrong: {', '.join(i for i, _, _ in score.wrong) or 'none'}", highlight=False)
        console.print(
            f"{path.name}: {score.total} cases · kind accuracy {score.kind_accuracy:.1%} · interactive accuracy "
            f"{score.interactive_accuracy:.1%} (precision {score.interactive_precision:.1%}, recall "
            f"{score.interactive_recall:.1%}) · retryable accuracy {score.retryable_accuracy:.1%}",
            highlight=False,
        )
    if len(scored) > 1:
        summary = Table(title="per file")
        for column in ("file", "cases", "kind", "interactive recall", "retryable"):
            summary.add_column(column, justify="left" if column == "file" else "right")
        for path, score in scored:
            summary.add_row(escape(path.name), str(score.total), f"{score.kind_accuracy:.1%}",
                            f"{score.interactive_recall:.1%}", f"{score.retryable_accuracy:.1%}")
        console.print(summary)

