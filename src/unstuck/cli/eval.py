"""``unstuck eval``: every scenario with every agent, unguarded and guarded, as tables (and JSON,
HTML, a regression check, the injection curve, the lessons across sessions); with
``--frameworks``, the peer comparison instead. Its options are one object, :class:`EvalOptions`.
It keeps throw-away stores of its own: never the user's (``--store`` is not an option here).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from unstuck.cli.common import EXIT_FAILED, console, err_console, fail, options_command, wide
from unstuck.cli.scenarios import (
    TrustedDigestsOption,
    TrustOption,
    check_trust,
    chosen_scenarios,
    scenario_paths,
    split_names,
)
from unstuck.core.output import write_json
from unstuck.core.text import for_terminal
from unstuck.evals.agents import AGENTS

if TYPE_CHECKING:  # each command imports what it runs, so `unstuck classify` starts without the eval harness
    from unstuck.evals.compare import Regression
    from unstuck.evals.curve import Curve
    from unstuck.evals.runner import ModelFactory, RunMetrics
    from unstuck.evals.scenarios import Scenario
    from unstuck.evals.sessions import SessionResult

__all__ = ["EvalOptions", "eval_command", "run_eval_command"]


@dataclass(frozen=True, slots=True)
class EvalOptions:
    """Every option of ``unstuck eval``, as its ``--help`` shows them (each field's annotation is
    its typer option; :func:`unstuck.cli.common.options_command` makes the command of them)."""

    paths: Annotated[list[Path] | None, typer.Argument(
        help="Scenario files (.yaml, .yml) or folders, added to the bundled scenarios.", show_default=False)] = None
    only: Annotated[bool, typer.Option("--only", help="Run only the scenarios in PATH, not the bundled ones.")] = False
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.")] = None
    html_path: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")] = None
    compare: Annotated[
        Path | None, typer.Option(help="Print regressions against this earlier `unstuck eval --json` result.")
    ] = None
    scenarios: Annotated[str | None, typer.Option(help="Comma-separated scenario names.")] = None
    tags: Annotated[str | None, typer.Option(help="Only scenarios with one of these comma-separated tags.")] = None
    agents: Annotated[str | None, typer.Option(help="Comma-separated agent names (model:NAME for --model).")] = None
    model: Annotated[str | None, typer.Option(help="Also run this model of an OpenAI-compatible server.")] = None
    base_url: Annotated[str | None, typer.Option(help="The server's API root, e.g. http://127.0.0.1:11434/v1.")] = None
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY", show_default=False,
                                         help="The server's API key (default: OPENAI_API_KEY).")] = "unstuck"
    repeat: Annotated[int, typer.Option(min=1, help="Run each scenario and agent this many times.")] = 1
    seed: Annotated[int | None, typer.Option(
        help="Seed of the model's sampling (repeat i uses seed + i) and of fault injection.")] = None
    workers: Annotated[int | None, typer.Option(
        min=1, show_default=False,
        help="Worker processes for the reference agents' runs (default: the CPUs; 1 runs them here, in order).",
    )] = None
    scenario_dir: Annotated[Path | None, typer.Option(
        help="Deprecated: give the folder as a PATH argument.", hidden=True)] = None
    p_inj: Annotated[float, typer.Option(
        "--p-inj", min=0.0, max=1.0,
        help="Replace each tool return with an observed failure from the bank with this probability.")] = 0.0
    curve: Annotated[bool, typer.Option(
        "--curve", help="Also run the guarded loop at p_inj 0, 0.05, 0.1, 0.2, 0.3 and report success against it.",
    )] = False
    bank: Annotated[Path | None, typer.Option(
        help="The failure bank to inject from (JSON lines; the bundled one by default).")] = None
    sessions: Annotated[bool | None, typer.Option(
        "--sessions/--no-sessions",
        help="Run the multi-session lessons scenario (default: when no scenario, tag or agent is chosen).")] = None
    frameworks: Annotated[str | None, typer.Option(
        "--frameworks",
        help="Run only the peer comparison instead: these comma-separated frameworks (openai-agents, langgraph, "
             "pydantic-ai, mcp, or all), each behaviour with the framework's defaults and with unstuck, on "
             "--scenarios (default gh_logged_out,gh_missing); honours --json only.")] = None
    via: Annotated[str | None, typer.Option(
        "--via",
        help="Run the reference agents through these comma-separated coding-agent CLIs instead (claude-code, "
             "codex, gemini): the real programs ./bootstrap installs, each model turn played by a scripted model "
             "server, guarded only through `unstuck hooks install`; honours --scenarios, --tags, --agents, "
             "--only and PATH.")] = None
    trust: TrustOption = False
    trusted_digests: TrustedDigestsOption = None


def _print_regressions(regressions: list[Regression], unmatched: int) -> None:
    if not regressions:
        console.print(f"no regressions against the baseline ({unmatched} run(s) on one side only: "
                      "new without a baseline, or in the baseline and not run again)")
        return
    table = Table(title=f"regressions against the baseline ({unmatched} run(s) on one side only)")
    for column in ("scenario", "agent", "mode", "what", "before", "after"):
        table.add_column(column)
    for r in regressions:
        mode = "guarded" if r.guarded else "unguarded"
        table.add_row(*(escape(v) for v in (r.scenario, r.agent + (f" #{r.repeat}" if r.repeat else ""), mode,
                                           r.what, r.before, r.after)))
    console.print(table)


def _model_factories(
    model: str | None, base_url: str | None, api_key: str, seed: int | None
) -> dict[str, ModelFactory]:
    from unstuck.toolkit.models import OpenAIChatModel

    if model is None:
        if base_url is not None:
            raise fail("--base-url needs --model NAME")
        return {}

    def factory(repeat: int) -> OpenAIChatModel:
        return OpenAIChatModel(model, base_url=base_url, api_key=api_key,
                               seed=None if seed is None else seed + repeat)

    return {f"model:{model}": factory}


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def _sessions_table(across: list[SessionResult]) -> Table:
    table = Table(title="lessons across sessions (each a separate process, one lesson store)")
    for column in ("session", "scenario", "expect", "status", "steps", "lesson events", "pass"):
        table.add_column(column, justify="left" if column in ("scenario", "expect", "lesson events") else "right")
    for s in across:
        verdict = "[green]yes[/green]" if s.passed else "[red]NO[/red]"
        table.add_row(str(s.session), s.scenario, s.expect, s.status, str(s.steps), ", ".join(s.lesson_events) or "-",
                      verdict)
    return table


def _curve_tables(sweep: Curve) -> tuple[Table, Table]:
    table = Table(title="guarded success against injected failures")
    for column in ("p_inj", "runs", "passed", "success", "injected per run"):
        table.add_column(column, justify="right")
    for point in sweep.points:
        rate = "-" if point.success_rate is None else f"{point.success_rate:.0%}"
        table.add_row(f"{point.p_inj:g}", str(point.runs), str(point.passed), rate, f"{point.mean_injected:.2f}")
    recovery = Table(title="recovery by injected failures in the run (all rates)")
    for column in ("injected failures", "runs", "passed", "recovered"):
        recovery.add_column(column, justify="right")
    for bucket in sweep.buckets:
        rate = "-" if bucket.success_rate is None else f"{bucket.success_rate:.0%}"
        recovery.add_row(bucket.label, str(bucket.runs), str(bucket.passed), rate)
    return table, recovery


def _table(results: list[RunMetrics], *, injected: bool = False) -> Table:
    table = Table(title="unstuck eval" + (f" (p_inj {results[0].p_inj:g})" if injected and results else ""),
                  show_lines=False)
    columns = ["scenario", "agent", "mode", "calls", "steps to escalate", "s to escalate",
               "workaround calls", "refused calls", "outcome", "violations", "validator", "exact unblock", "judged",
               "pass"]
    if injected:
        columns.insert(4, "injected")
    for column in columns:
        left = column in ("scenario", "agent", "mode", "outcome")
        table.add_column(column, justify="left" if left else "right", no_wrap=left,
                         min_width=len(column) if " " not in column else None)  # one-word headers whole
    for r in results:
        verdict = "-" if r.passed is None else ("[green]yes[/green]" if r.passed else "[red]NO[/red]")
        cells = [
            escape(r.scenario), escape(r.agent) + (f" #{r.repeat}" if r.repeat else ""),
            "guarded" if r.guarded else "unguarded", str(r.tool_calls),
            _fmt(r.steps_to_escalate), _fmt(r.seconds_to_escalate), str(r.workaround_calls),
            str(r.refused_calls), r.outcome, str(r.violations), r.validator or "-", _fmt(r.exact_unblock),
            f"{r.judgement.mean:.1f}" if r.judgement is not None else "-", verdict,
        ]
        if injected:
            cells.insert(4, str(r.injected_failures))
        table.add_row(*cells)
    return table


def _print_as_stated(results: list[RunMetrics], scenarios: list[Scenario]) -> None:
    """One line on the unguarded runs whose scenario states their outcome (``unguarded:``),
    and one per run that is not as stated."""
    stated = [r for r in results if r.as_stated is not None]
    if not stated:
        return
    met = sum(1 for r in stated if r.as_stated)
    console.print(f"unguarded runs as their scenarios state (status, least calls): {met} of {len(stated)}")
    statements = {(s.name, u.agent): u for s in scenarios for u in s.unguarded}
    for r in stated:
        if not r.as_stated:
            said = statements.get((r.scenario, r.agent))
            wanted = f" (stated: {said.status} after at least {said.min_calls})" if said is not None else ""
            console.print(f"  [yellow]not as stated[/yellow]: {escape(r.scenario)} · {escape(r.agent)}: "
                          f"{r.status} after {r.tool_calls} calls{wanted}")


def _print_failed_checks(results: list[RunMetrics]) -> None:
    """One line per guarded run that did not pass, saying why (``RunMetrics.failed_checks``)."""
    for r in results:
        if r.passed is False and not r.harness_error and r.failed_checks:
            console.print(f"[red]not passed[/red]: {escape(r.scenario)} · {escape(r.agent)}: "
                          + escape("; ".join(r.failed_checks)))


def _comparison_table(results: list[RunMetrics]) -> Table:
    from unstuck.evals.runner import REFERENCE_INCIDENT, compare_modes

    table = Table(title="wasted after the blocker opened: unguarded / guarded")
    for column in ("scenario", "agent", "calls", "ratio", "seconds", "ratio"):
        table.add_column(column, justify="left" if column in ("scenario", "agent") else "right")
    calls, seconds = REFERENCE_INCIDENT
    table.add_row("reference incident (seed 000)", "-", f"{calls} / -", "-", f"{seconds:.0f} / -", "-")
    for c in compare_modes(results):
        table.add_row(
            escape(c.scenario), c.agent, f"{c.unguarded_wasted_calls} / {c.guarded_wasted_calls}",
            "-" if c.calls_ratio is None else f"{c.calls_ratio:.1f}x",
            f"{c.unguarded_wasted_seconds:.1f} / {c.guarded_wasted_seconds:.1f}",
            "-" if c.seconds_ratio is None else f"{c.seconds_ratio:.1f}x",
        )
    return table


def _peer_eval(frameworks: list[str], scenarios: list[str] | None, json_path: Path | None) -> None:
    """``unstuck eval --frameworks``: the peer comparison (unstuck.integrations.peers) only."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from unstuck.evals.shell_world import SCENARIOS, Behaviour
    from unstuck.integrations.peers import FRAMEWORKS, PeerRun, peer_ratios, run_peers

    names = list(FRAMEWORKS) if frameworks == ["all"] else frameworks
    worlds = scenarios if scenarios is not None else list(SCENARIOS)
    unknown = [n for n in names if n not in FRAMEWORKS] + [s for s in worlds if s not in SCENARIOS]
    if unknown:
        raise fail(f"unknown framework or scenario {', '.join(unknown)}; frameworks: {', '.join(FRAMEWORKS)}; "
                    f"scenarios: {', '.join(SCENARIOS)}")
    if json_path is not None and (json_path.is_dir() or not json_path.parent.is_dir()):
        raise fail(f"--json {json_path}: not a file path in an existing folder")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as progress:
        bar = progress.add_task("frameworks", total=len(names) * len(worlds) * len(Behaviour) * 2)

        def advance(run: PeerRun) -> None:
            mode = "unstuck" if run.guarded else "defaults"
            progress.update(bar, advance=1, description=f"{run.framework} · {run.scenario} · {run.behaviour} · {mode}")

        runs = run_peers(names, worlds, list(Behaviour), progress=advance)
    for name in names:
        table = Table(title=f"{name}: the framework's defaults and with unstuck")
        for column in ("scenario", "behaviour", "mode", "tool calls", "refused", "how it stops", "exact unblock",
                       "status"):
            table.add_column(column, justify="right" if column in ("tool calls", "refused") else "left")
        for r in (r for r in runs if r.framework == name):
            how = r.stopped_by if r.error is None else f"error: {r.error}"
            table.add_row(r.scenario, r.behaviour, "unstuck" if r.guarded else "defaults", r.calls_text,
                          str(r.refused_calls), escape(for_terminal(how)), "yes" if r.exact_unblock else "no",
                          r.status)
        console.print(table)
    ratios = Table(title="tool calls: defaults / unstuck (calls that ran; unstuck's refusals beside them)")
    for column in ("framework", "scenario", "behaviour", "defaults", "unstuck", "unstuck refused", "ratio"):
        ratios.add_column(column)
    for q in peer_ratios(runs):
        ratios.add_row(q.framework, q.scenario, q.behaviour, f"{'≥ ' if q.at_least else ''}{q.defaults_calls}",
                       str(q.unstuck_calls), str(q.unstuck_refused), q.text)
    console.print(ratios)
    if json_path is not None:
        payload = {"runs": [r.to_dict() for r in runs], "ratios": [q.to_dict() for q in peer_ratios(runs)]}
        write_json(json_path, payload)
        console.print(f"results written to {escape(str(json_path))}")
    errors = [r for r in runs if r.error is not None]
    for r in errors:
        where = f"{r.framework} · {r.scenario} · {r.behaviour}: {r.error}"
        err_console.print(f"[red]harness error[/red] in {escape(where)}")
    if errors:
        raise typer.Exit(EXIT_FAILED)



def _via_eval(o: EvalOptions, chosen: list[Scenario]) -> None:
    """``unstuck eval --via``: the reference agents through the real coding-agent CLIs
    (:mod:`unstuck.evals.via_cli`), the same scenario table and the comparison."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from unstuck.evals.runner import planned_runs
    from unstuck.evals.runner import write_json as write_results
    from unstuck.evals.via_cli import PROGRAMS, missing_clis, run_eval_via

    vias = split_names(o.via, "via") or []
    unknown = [v for v in vias if v not in PROGRAMS]
    if unknown or not vias:
        raise fail(f"unknown --via {', '.join(unknown) or '(none)'}; known: {', '.join(PROGRAMS)}")
    other = [flag for flag, used in (("--model", o.model is not None), ("--p-inj", o.p_inj > 0), ("--curve", o.curve),
                                     ("--repeat", o.repeat != 1), ("--compare", o.compare is not None),
                                     ("--html", o.html_path is not None)) if used]
    if other:
        raise fail(f"--via runs the reference agents once each, clean: drop {', '.join(other)}")
    missing = missing_clis(vias)
    if missing:
        raise fail("; ".join(missing))
    wanted = split_names(o.agents, "agents")
    if wanted is not None:
        unknown = [a for a in wanted if a not in AGENTS]
        if unknown:
            raise fail(f"unknown agent(s) {', '.join(unknown)}; known: {', '.join(AGENTS)}")
    planned = len(planned_runs(chosen, agents=wanted))
    if planned == 0:
        raise fail("the chosen scenarios, tags and agents select no run")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as progress:
        bar = progress.add_task("running scenarios through the CLIs", total=2 * planned * len(vias))

        def advance(metrics: RunMetrics) -> None:
            progress.update(bar, advance=1, description=f"{metrics.scenario} · {metrics.agent}")

        results = run_eval_via(chosen, vias, agents=wanted, progress=advance)
    wide().print(_table(results))
    for r in results:
        if r.status == "skipped" and r.guarded:
            console.print(f"[yellow]skipped[/yellow]: {escape(r.scenario)} · {escape(r.agent)}: "
                          + escape(r.outcome.removeprefix("skipped: ")))
    _print_failed_checks(results)
    console.print(_comparison_table(results))
    if o.json_path is not None:
        write_results(results, o.json_path)
        console.print(f"results written to {escape(str(o.json_path))}")
    errors = [r for r in results if r.harness_error]
    for r in errors:
        err_console.print(f"[red]harness error[/red] in {escape(f'{r.scenario} · {r.agent}: {r.error}')}")
    if errors:
        raise typer.Exit(EXIT_FAILED)


def run_eval_command(options: EvalOptions) -> None:
    """Run every scenario with every agent, unguarded and guarded, and print a table.

    With --frameworks, run only the peer comparison (no scenario tables)."""
    o = options
    if o.frameworks is not None:
        picked = split_names(o.frameworks, "frameworks")
        assert picked is not None
        _peer_eval(picked, split_names(o.scenarios, "scenarios"), o.json_path)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from unstuck.evals.compare import BaselineError, find_regressions, load_baseline
    from unstuck.evals.curve import CURVE_LEVELS, run_curve
    from unstuck.evals.report import write_html
    from unstuck.evals.runner import planned_runs, run_eval
    from unstuck.evals.runner import write_json as write_results
    from unstuck.evals.sessions import run_sessions
    from unstuck.faults.bank import BankError, FailureBank, load_bank

    extra = scenario_paths(o.paths, o.scenario_dir)
    chosen = chosen_scenarios(extra, split_names(o.scenarios, "scenarios"), only=o.only)
    wanted_tags = split_names(o.tags, "tags")
    if wanted_tags is not None:
        chosen = [s for s in chosen if set(s.tags) & set(wanted_tags)]
        if not chosen:
            raise fail(f"no scenario has any of the tags {', '.join(wanted_tags)}")
    check_trust(chosen, trust=o.trust, digests=o.trusted_digests)
    if o.via is not None:
        _via_eval(o, chosen)
        return
    models = _model_factories(o.model, o.base_url, o.api_key, o.seed)
    for option, path in (("--json", o.json_path), ("--html", o.html_path)):
        if path is not None and (path.is_dir() or not path.parent.is_dir()):
            raise fail(f"{option} {path}: " + ("is a directory; give a file path" if path.is_dir()
                                                else f"the folder {path.parent} does not exist"))
    if o.compare is not None and o.p_inj > 0:
        raise fail("--compare checks clean runs against a clean baseline; drop --p-inj (use --curve to add injection)")
    failures: FailureBank | None = None
    if o.p_inj > 0 or o.curve or o.bank is not None:
        try:
            failures = load_bank(o.bank)
        except (BankError, OSError) as exc:
            raise fail(f"failure bank: {exc}") from exc
    try:
        baseline = load_baseline(o.compare) if o.compare is not None else None
    except BaselineError as exc:
        raise fail(str(exc)) from exc
    wanted = split_names(o.agents, "agents")
    if wanted is not None:
        unknown = [a for a in wanted if a not in AGENTS and a not in models]
        if unknown:
            hint = ("; a model:NAME agent comes from --model NAME --base-url URL"
                    if any(a.startswith("model:") for a in unknown) else "")
            raise fail(f"unknown agent(s) {', '.join(unknown)}; known: {', '.join([*AGENTS, *models])}{hint}")
    if wanted is not None:
        unlisted = [a for a in wanted if a not in models and not any(a in s.agents for s in chosen)]
        if unlisted:
            raise fail(f"no chosen scenario lists the agent(s) {', '.join(unlisted)}; they list: "
                       + ", ".join(dict.fromkeys(a for s in chosen for a in s.agents)))
    planned = len(planned_runs(chosen, agents=wanted, models=models, repeat=o.repeat))
    if planned == 0:
        raise fail("the chosen scenarios, tags and agents select no run")
    total = 2 * planned + (len(CURVE_LEVELS) * planned if o.curve else 0)
    injection_seed = o.seed if o.seed is not None else 0
    sweep: Curve | None = None
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as progress:
        bar = progress.add_task("running scenarios", total=total)

        def advance(metrics: RunMetrics) -> None:
            rate = f" · p_inj {metrics.p_inj:g}" if metrics.p_inj else ""
            progress.update(bar, advance=1, description=f"{metrics.scenario} · {metrics.agent}{rate}")

        results = run_eval(chosen, agents=wanted, models=models, repeat=o.repeat, progress=advance,
                           p_inj=o.p_inj, seed=injection_seed, bank=failures,
                           workers=o.workers if o.workers is not None else (os.cpu_count() or 1))
        if o.curve:
            sweep = run_curve(chosen, agents=wanted, models=models, repeat=o.repeat, seed=injection_seed,
                              progress=advance, bank=failures)
    across: list[SessionResult] = []
    chose = o.scenarios is not None or o.tags is not None or o.agents is not None or bool(extra)
    if o.sessions if o.sessions is not None else not chose:
        with err_console.status("lessons across sessions (3 processes)"):
            across = run_sessions()
    wide().print(_table(results, injected=o.p_inj > 0))  # a file or pipe gets the whole table
    _print_failed_checks(results)
    console.print(_comparison_table(results))
    _print_as_stated(results, chosen)
    if across:
        console.print(_sessions_table(across))
    if sweep is not None:
        for table in _curve_tables(sweep):
            console.print(table)
    if o.json_path is not None:
        write_results(results, o.json_path, curve=sweep, sessions=[s.to_dict() for s in across])
        console.print(f"results written to {escape(str(o.json_path))}")
    if o.html_path is not None:
        write_html(results, o.html_path, curve=sweep, reference_incident=any(s.bundled for s in chosen))
        console.print(f"report written to {escape(str(o.html_path))}")
    if baseline is not None:
        _print_regressions(*find_regressions(baseline, results))
    errors = [r for r in results if r.harness_error]
    broken = [s for s in across if s.error is not None and s.status == "failed"]
    for s in broken:
        where = f"session {s.session} ({s.scenario}): {s.error}"
        err_console.print(f"[red]harness error[/red] in {escape(where)}")
    for r in errors:
        err_console.print(f"[red]harness error[/red] in {escape(f'{r.scenario} · {r.agent}: {r.error}')}")
    if errors or broken:
        raise typer.Exit(EXIT_FAILED)


#: The command typer registers (``unstuck eval``): :class:`EvalOptions` as its options.
eval_command = options_command(EvalOptions, run_eval_command)
