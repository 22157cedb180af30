"""The ``unstuck`` command: a thin layer over the library (typer + rich).

Everything a command prints, on standard output and standard error, passes the output boundary
(:func:`unstuck.core.output.redact_standard_streams`: no secret is shown), and every file it writes
is written through :mod:`unstuck.core.output` (``--json`` documents redacted before they are
serialised, HTML pages as they are rendered).

Exit statuses: ``unstuck eval`` exits 0 unless the harness itself failed (a run that
raised, a malformed scenario); ``unstuck run`` exits 0 when the turn is done with the task
finished, 3 when it ended blocked, 1 when it failed or gave up without finishing. Usage errors
exit 2 (typer's convention).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from unstuck import __version__
from unstuck.cli.bank import bank_app
from unstuck.cli.common import EXIT_BLOCKED, EXIT_CODES, EXIT_FAILED, EXIT_USAGE, MINE_EXIT_CODES
from unstuck.cli.journal import journal_app
from unstuck.cli.lessons import lessons_app
from unstuck.cli.mining import mine_command, rules_app
from unstuck.cli.output import SafeConsole, output_consoles
from unstuck.cli.report import REPORT_EXIT_CODES, report_command
from unstuck.cli.signals import signals_app
from unstuck.cli.stores import StoreOption
from unstuck.cli.trace import trace_app
from unstuck.core.errors import UnstuckError
from unstuck.core.output import json_text, raw_stdout, redact_standard_streams, write_json, write_text
from unstuck.core.text import for_terminal
from unstuck.evals.agents import AGENTS
from unstuck.recognise.signals import SIGNALS_ENV

if TYPE_CHECKING:  # each command imports what it runs, so `unstuck classify` starts without the eval harness
    from unstuck.evals.compare import Regression
    from unstuck.evals.curve import Curve
    from unstuck.evals.runner import ModelFactory, RunMetrics
    from unstuck.evals.scenarios import Scenario
    from unstuck.evals.sessions import SessionResult
    from unstuck.recognise.classify import Classification
    from unstuck.recognise.signals import SignalTable
    from unstuck.store.events import Event
    from unstuck.store.urls import StoreURL

__all__ = ["app", "main"]

app = typer.Typer(
    name="unstuck",
    help="Keep tool-using agents from getting stuck: stop, ask one precise question, remember.",
    no_args_is_help=True,
    add_completion=False,
    epilog=EXIT_CODES,
)
app.add_typer(bank_app, name="bank")
app.add_typer(journal_app, name="journal")
app.add_typer(lessons_app, name="lessons")
app.add_typer(rules_app, name="rules")
app.command("mine", epilog=MINE_EXIT_CODES)(mine_command)
app.command("report", epilog=REPORT_EXIT_CODES)(report_command)
app.add_typer(signals_app, name="signals")
app.add_typer(trace_app, name="trace")
console, err_console = output_consoles()


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``message`` on one line (user text is escaped, never read as markup) and return
    the exit (a usage error unless ``code`` says otherwise)."""
    err_console.print(f"[red]error:[/red] {escape(for_terminal(message))}", soft_wrap=True)
    return typer.Exit(code)


def _split(value: str | None, what: str) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise _fail(f"--{what} was given but names nothing")
    return names


def _version(value: bool) -> None:
    if value:
        console.print(f"unstuck {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Keep tool-using agents from getting stuck: stop, ask one precise question, remember."""
    redact_standard_streams()  # main() did already, unless the app is run by a caller (a test runner)
    ctx.call_on_close(_flush_streams)  # what a writer holds back is out before the caller reads the streams


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed stream
            stream.flush()


def _scenarios(paths: list[Path], names: list[str] | None, *, only: bool = False) -> list[Scenario]:
    """The bundled scenarios plus those in ``paths`` (files or folders; only those with
    ``only``), narrowed to ``names`` (a name that matches nothing is a usage error)."""
    from unstuck.evals.scenarios import ScenarioError, load_paths

    if only and not paths:
        raise _fail("--only needs scenario files or folders to run instead of the bundled ones")
    try:
        found = load_paths(paths, bundled=not only)
    except ScenarioError as exc:
        raise _fail(str(exc)) from exc
    if names is None:
        return found
    by_name = {s.name: s for s in found}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise _fail(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(by_name)} "
                    "(a scenario of your own: give its file's path)")
    return [by_name[n] for n in names]


def _run_stores(journal: str | None, lessons: str | None,
                store: str | None) -> tuple[StoreURL | None, StoreURL | None]:
    """The journal and lesson store of ``unstuck run``. With neither deprecated option, both in
    the one place (:func:`unstuck.cli.stores.shared_location`: ``--store``, else
    ``UNSTUCK_STORE``, else the user data folder). With ``--journal`` or ``--lessons``, as
    before: each option given, else the shared location of ``--store`` or ``UNSTUCK_STORE``, else
    none. A bad URL is a usage error naming its option."""
    from unstuck.cli.stores import deprecated, role_store, shared_location
    from unstuck.store.urls import StoreRole, StoreURLError, parse_store_url, store_for, store_url_for

    if journal is None and lessons is None:
        place = shared_location(store)
        return role_store(StoreRole.JOURNAL, place, named=False), role_store(StoreRole.LESSONS, place, named=False)
    for old, given in (("--journal", journal), ("--lessons", lessons)):
        if given is not None:
            deprecated(old)
    chosen: list[StoreURL | None] = []
    for role, given, option in ((StoreRole.JOURNAL, journal, "--journal"), (StoreRole.LESSONS, lessons, "--lessons")):
        try:
            if given is not None:
                chosen.append(parse_store_url(given))
            elif store is not None:
                option = "--store"
                chosen.append(store_url_for(role, parse_store_url(store)))
            else:
                option = ""  # store_for's message names ENV_VAR
                chosen.append(store_for(role))
        except StoreURLError as exc:
            raise _fail(f"{option}: {exc}" if option else str(exc)) from None
    return chosen[0], chosen[1]


TrustOption = Annotated[bool, typer.Option(
    "--trust", help="Run scenario files of your own without asking (they run commands on this machine: read "
                    "them first).")]
TrustedDigestsOption = Annotated[Path | None, typer.Option(
    "--trusted-digests", metavar="FILE", show_default=False,
    help="Also trust the scenario files whose SHA-256 this file lists (sha256sum's format; default: "
         "UNSTUCK_TRUSTED_DIGESTS, and trusted-scenarios.sha256 in the user config folder).")]


def _check_trust(chosen: list[Scenario], *, trust: bool, digests: Path | None, attended: bool | None = None) -> None:
    """Refuse to run a scenario file of the user's that is not trusted (see
    :mod:`unstuck.evals.trust`): each one's commands are shown on standard error; at a terminal
    the user is asked, and "yes" records its digest; without one (or under CI, or with
    ``attended`` false: ``--unattended``) the command exits 2 without running anything and
    without waiting."""
    from rich.prompt import Confirm

    from unstuck.evals.trust import (
        TRUSTED_DIGESTS_ENV,
        TrustError,
        default_digests_file,
        describe_rights,
        remember_trusted,
        scenario_text,
        shown_commands,
        trusted_digests,
        untrusted,
    )
    from unstuck.loop.presence import console_can_ask

    if trust:
        return
    try:
        pending = untrusted(chosen, trusted_digests(digests))
    except TrustError as exc:
        raise _fail(str(exc)) from exc
    can_ask = console_can_ask() and attended is not False
    for scenario in pending:
        commands = shown_commands(scenario, scenario_text(scenario))
        err_console.print(f"[bold]{escape(scenario.source)}[/bold] is a scenario file unstuck has not run before "
                          f"(sha256 {scenario.digest}). A scenario file is a program: it runs "
                          f"{len(commands) or 'no'} command(s) on this machine, {escape(describe_rights(scenario))}"
                          + (":" if commands else "."), soft_wrap=True)
        for item in commands:
            place = f" (line {item.line})" if item.line is not None else ""
            why = f"  [{item.why}]" if item.why else ""
            err_console.print(f"  {escape(item.where)}{place}: {escape(item.text)}{escape(why)}", soft_wrap=True,
                              highlight=False)
            if not item.exact:
                err_console.print(f"    (not shown as it runs: part of it is masked as a secret or held control "
                                  f"characters; read {escape(scenario.source)}, "
                                  + (f"line {item.line}" if item.line is not None else f"field {escape(item.where)}")
                                  + ", before you trust it)", soft_wrap=True, highlight=False)
        hidden = [item for item in commands if not item.exact]
        trust_how = (f"run it with --trust, or list its SHA-256 in {default_digests_file()}, in the file "
                     f"{TRUSTED_DIGESTS_ENV} names, or in a file given as --trusted-digests")
        if hidden:
            lines = ", ".join(f"line {i.line}" if i.line is not None else f"field {i.where}" for i in hidden)
            raise _fail(f"{scenario.source}: not run: it is not trusted, and part of {len(hidden)} of its commands "
                        f"cannot be shown here (masked as a secret, or holding control characters), so it is not "
                        f"offered for a yes. Read {scenario.source} ({lines}), then {trust_how}")
        if not can_ask:
            raise _fail(f"{scenario.source}: not run: it is not trusted, and no one is at a terminal to ask. "
                        f"Read its commands (above), then {trust_how}")
        if not Confirm.ask(f"Run {escape(scenario.source)} and these commands?", console=err_console, default=False):
            raise _fail(f"{scenario.source}: not run (you said no)")
        try:
            recorded = remember_trusted(scenario)
        except TrustError as exc:
            raise _fail(str(exc)) from exc
        err_console.print(f"trusted from now on (recorded in {escape(str(recorded))})", highlight=False)


def _scenario_paths(paths: list[Path] | None, scenario_dir: Path | None) -> list[Path]:
    """The PATH arguments, with the deprecated ``--scenario-dir`` (hidden from --help) as one more."""
    return [*(paths or []), *([scenario_dir] if scenario_dir is not None else [])]


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
            raise _fail("--base-url needs --model NAME")
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


_WIDE = 200  # characters: the run table's width when the output is not a terminal


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
        raise _fail(f"unknown framework or scenario {', '.join(unknown)}; frameworks: {', '.join(FRAMEWORKS)}; "
                    f"scenarios: {', '.join(SCENARIOS)}")
    if json_path is not None and (json_path.is_dir() or not json_path.parent.is_dir()):
        raise _fail(f"--json {json_path}: not a file path in an existing folder")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as progress:
        bar = progress.add_task("frameworks", total=len(names) * len(worlds) * len(Behaviour) * 2)

        def advance(run: PeerRun) -> None:
            mode = "unstuck" if run.guarded else "defaults"
            progress.update(bar, advance=1, description=f"{run.framework} · {run.scenario} · {run.behaviour} · {mode}")

        runs = run_peers(names, worlds, list(Behaviour), progress=advance)
    for name in names:
        table = Table(title=f"{name}: the framework's defaults and with unstuck")
        for column in ("scenario", "behaviour", "mode", "tool calls", "how it stops", "exact unblock", "status"):
            table.add_column(column, justify="right" if column == "tool calls" else "left")
        for r in (r for r in runs if r.framework == name):
            how = r.stopped_by if r.error is None else f"error: {r.error}"
            table.add_row(r.scenario, r.behaviour, "unstuck" if r.guarded else "defaults", r.calls_text,
                          escape(for_terminal(how)), "yes" if r.exact_unblock else "no", r.status)
        console.print(table)
    ratios = Table(title="tool calls: defaults / unstuck")
    for column in ("framework", "scenario", "behaviour", "defaults", "unstuck", "ratio"):
        ratios.add_column(column)
    for q in peer_ratios(runs):
        ratios.add_row(q.framework, q.scenario, q.behaviour, f"{'≥ ' if q.at_least else ''}{q.defaults_calls}",
                       str(q.unstuck_calls), q.text)
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


@app.command("eval", epilog=EXIT_CODES)
def _eval_command(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Scenario files (.yaml, .yml) or folders, added to the bundled scenarios.", show_default=False)] = None,
    only: Annotated[bool, typer.Option("--only", help="Run only the scenarios in PATH, not the bundled ones.")] = False,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.")] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")] = None,
    compare: Annotated[
        Path | None, typer.Option(help="Print regressions against this earlier `unstuck eval --json` result.")
    ] = None,
    scenarios: Annotated[str | None, typer.Option(help="Comma-separated scenario names.")] = None,
    tags: Annotated[str | None, typer.Option(help="Only scenarios with one of these comma-separated tags.")] = None,
    agents: Annotated[str | None, typer.Option(help="Comma-separated agent names (model:NAME for --model).")] = None,
    model: Annotated[str | None, typer.Option(help="Also run this model of an OpenAI-compatible server.")] = None,
    base_url: Annotated[str | None, typer.Option(help="The server's API root, e.g. http://127.0.0.1:11434/v1.")] = None,
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY", show_default=False,
                                         help="The server's API key (default: OPENAI_API_KEY).")] = "unstuck",
    repeat: Annotated[int, typer.Option(min=1, help="Run each scenario and agent this many times.")] = 1,
    seed: Annotated[int | None, typer.Option(
        help="Seed of the model's sampling (repeat i uses seed + i) and of fault injection.")] = None,
    workers: Annotated[int | None, typer.Option(
        min=1, show_default=False,
        help="Worker processes for the reference agents' runs (default: the CPUs; 1 runs them here, in order).",
    )] = None,
    scenario_dir: Annotated[Path | None, typer.Option(
        help="Deprecated: give the folder as a PATH argument.", hidden=True)] = None,
    p_inj: Annotated[float, typer.Option(
        "--p-inj", min=0.0, max=1.0,
        help="Replace each tool return with an observed failure from the bank with this probability.")] = 0.0,
    curve: Annotated[bool, typer.Option(
        "--curve", help="Also run the guarded loop at p_inj 0, 0.05, 0.1, 0.2, 0.3 and report success against it.",
    )] = False,
    bank: Annotated[Path | None, typer.Option(
        help="The failure bank to inject from (JSON lines; the bundled one by default).")] = None,
    sessions: Annotated[bool | None, typer.Option(
        "--sessions/--no-sessions",
        help="Run the multi-session lessons scenario (default: when no scenario, tag or agent is chosen).")] = None,
    frameworks: Annotated[str | None, typer.Option(
        "--frameworks",
        help="Run only the peer comparison instead: these comma-separated frameworks (openai-agents, langgraph, "
             "pydantic-ai, mcp, or all), each behaviour with the framework's defaults and with unstuck, on "
             "--scenarios (default gh_logged_out,gh_missing); honours --json only.")] = None,
    trust: TrustOption = False,
    trusted_digests: TrustedDigestsOption = None,
) -> None:
    """Run every scenario with every agent, unguarded and guarded, and print a table.

    With --frameworks, run only the peer comparison (no scenario tables)."""
    if frameworks is not None:
        picked = _split(frameworks, "frameworks")
        assert picked is not None
        _peer_eval(picked, _split(scenarios, "scenarios"), json_path)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from unstuck.evals.compare import BaselineError, find_regressions, load_baseline
    from unstuck.evals.curve import CURVE_LEVELS, run_curve
    from unstuck.evals.report import write_html
    from unstuck.evals.runner import planned_runs, run_eval, write_json
    from unstuck.evals.sessions import run_sessions
    from unstuck.faults.bank import BankError, FailureBank, load_bank

    extra = _scenario_paths(paths, scenario_dir)
    chosen = _scenarios(extra, _split(scenarios, "scenarios"), only=only)
    wanted_tags = _split(tags, "tags")
    if wanted_tags is not None:
        chosen = [s for s in chosen if set(s.tags) & set(wanted_tags)]
        if not chosen:
            raise _fail(f"no scenario has any of the tags {', '.join(wanted_tags)}")
    _check_trust(chosen, trust=trust, digests=trusted_digests)
    models = _model_factories(model, base_url, api_key, seed)
    for option, path in (("--json", json_path), ("--html", html_path)):
        if path is not None and (path.is_dir() or not path.parent.is_dir()):
            raise _fail(f"{option} {path}: " + ("is a directory; give a file path" if path.is_dir()
                                                 else f"the folder {path.parent} does not exist"))
    if compare is not None and p_inj > 0:
        raise _fail("--compare checks clean runs against a clean baseline; drop --p-inj (use --curve to add injection)")
    failures: FailureBank | None = None
    if p_inj > 0 or curve or bank is not None:
        try:
            failures = load_bank(bank)
        except (BankError, OSError) as exc:
            raise _fail(f"failure bank: {exc}") from exc
    try:
        baseline = load_baseline(compare) if compare is not None else None
    except BaselineError as exc:
        raise _fail(str(exc)) from exc
    wanted = _split(agents, "agents")
    if wanted is not None:
        unknown = [a for a in wanted if a not in AGENTS and a not in models]
        if unknown:
            hint = ("; a model:NAME agent comes from --model NAME --base-url URL"
                    if any(a.startswith("model:") for a in unknown) else "")
            raise _fail(f"unknown agent(s) {', '.join(unknown)}; known: {', '.join([*AGENTS, *models])}{hint}")
    if wanted is not None:
        unlisted = [a for a in wanted if a not in models and not any(a in s.agents for s in chosen)]
        if unlisted:
            raise _fail(f"no chosen scenario lists the agent(s) {', '.join(unlisted)}; they list: "
                        + ", ".join(dict.fromkeys(a for s in chosen for a in s.agents)))
    planned = len(planned_runs(chosen, agents=wanted, models=models, repeat=repeat))
    if planned == 0:
        raise _fail("the chosen scenarios, tags and agents select no run")
    total = 2 * planned + (len(CURVE_LEVELS) * planned if curve else 0)
    injection_seed = seed if seed is not None else 0
    sweep: Curve | None = None
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as progress:
        bar = progress.add_task("running scenarios", total=total)

        def advance(metrics: RunMetrics) -> None:
            rate = f" · p_inj {metrics.p_inj:g}" if metrics.p_inj else ""
            progress.update(bar, advance=1, description=f"{metrics.scenario} · {metrics.agent}{rate}")

        results = run_eval(chosen, agents=wanted, models=models, repeat=repeat, progress=advance,
                           p_inj=p_inj, seed=injection_seed, bank=failures,
                           workers=workers if workers is not None else (os.cpu_count() or 1))
        if curve:
            sweep = run_curve(chosen, agents=wanted, models=models, repeat=repeat, seed=injection_seed,
                              progress=advance, bank=failures)
    across: list[SessionResult] = []
    chose = scenarios is not None or tags is not None or agents is not None or bool(extra)
    if sessions if sessions is not None else not chose:
        with err_console.status("lessons across sessions (3 processes)"):
            across = run_sessions()
    # a file or pipe gets the whole table (no cut-off headers); a terminal wraps to its own width
    wide = console if console.is_terminal else SafeConsole(width=_WIDE, emoji=False, file=console.file)
    wide.print(_table(results, injected=p_inj > 0))
    _print_failed_checks(results)
    console.print(_comparison_table(results))
    _print_as_stated(results, chosen)
    if across:
        console.print(_sessions_table(across))
    if sweep is not None:
        for table in _curve_tables(sweep):
            console.print(table)
    if json_path is not None:
        write_json(results, json_path, curve=sweep, sessions=[s.to_dict() for s in across])
        console.print(f"results written to {escape(str(json_path))}")
    if html_path is not None:
        write_html(results, html_path, curve=sweep)
        console.print(f"report written to {escape(str(html_path))}")
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


@app.command("run", epilog=EXIT_CODES)
def _run_command(
    scenario: Annotated[str, typer.Argument(
        help="A scenario name (see `unstuck scenarios`) or a scenario file (.yaml, .yml).")],
    agent: Annotated[str | None, typer.Option(
        help="Reference agent: " + ", ".join(AGENTS) + " (default: the scenario's first agent)",
        show_default=False)] = None,
    unguarded: Annotated[bool, typer.Option("--unguarded", help="Run the bare loop, no policy.")] = False,
    attended: Annotated[
        bool | None,
        typer.Option("--attended/--unattended", help="Whether a person can answer (default: a terminal that can ask)."),
    ] = None,
    scenario_dir: Annotated[Path | None, typer.Option(
        help="Deprecated: also load the scenarios in this folder.", hidden=True)] = None,
    sandbox: Annotated[Path | None, typer.Option(help="Build the sandbox in this folder and keep it.")] = None,
    events: Annotated[Path | None, typer.Option(help="Append the turn's events here as JSON lines.")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the run's metrics as JSON here.")] = None,
    store: StoreOption = None,
    journal: Annotated[str | None, typer.Option(
        metavar="URL", hidden=True, help="Deprecated: use --store. Record the turn in this journal only.")] = None,
    lessons: Annotated[str | None, typer.Option(
        metavar="URL", hidden=True, help="Deprecated: use --store. Use and update this lesson store only.")] = None,
    trust: TrustOption = False,
    trusted_digests: TrustedDigestsOption = None,
) -> None:
    """Run one scenario turn headless (or attended) and print its outcome and escalation."""
    from unstuck.evals.runner import run_scenario, write_json
    from unstuck.loop.presence import ConsoleAsker, console_can_ask
    from unstuck.loop.turn import TurnStatus
    from unstuck.processes import leases
    from unstuck.store.journal import Journal, JournalError
    from unstuck.store.lessons import LessonStore, LessonStoreError

    as_file = Path(scenario)
    extra = _scenario_paths([as_file] if as_file.suffix in (".yaml", ".yml") or as_file.is_file() else [], scenario_dir)
    if as_file in extra:
        from unstuck.evals.scenarios import ScenarioError, load_scenario

        try:
            scenario = load_scenario(as_file).name
        except ScenarioError as exc:
            raise _fail(str(exc)) from exc
    (chosen,) = _scenarios(extra, [scenario])
    _check_trust([chosen], trust=trust, digests=trusted_digests, attended=attended)
    if agent is None:
        agent = chosen.agents[0]
    if agent not in AGENTS:
        raise _fail(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    if agent not in chosen.agents:
        raise _fail(f"scenario {chosen.name} ({chosen.source}) does not list the agent {agent}; "
                    f"it lists: {', '.join(chosen.agents)}")
    sandbox = sandbox.resolve() if sandbox is not None else None  # the tools run inside it: a relative path would move
    if sandbox is not None and sandbox.exists() and (not sandbox.is_dir() or any(sandbox.iterdir())):
        raise _fail(f"--sandbox {sandbox}: must be a new or empty directory (the scenario builds its state there)")
    for option, path in (("--events", events), ("--json", json_path)):
        if path is not None and path.is_dir():
            raise _fail(f"{option} {path}: is a directory; give a file path")
    is_attended = console_can_ask() if attended is None else attended
    try:
        sink = _EventsFile(events) if events is not None else None
    except OSError as exc:
        raise _fail(f"--events {events}: {exc.strerror or exc}", EXIT_FAILED) from exc
    journal_url, lessons_url = _run_stores(journal, lessons, store)
    try:  # the stores' errors name the store (a URL's password masked)
        journal_store = Journal(journal_url) if journal_url is not None else None
    except (JournalError, OSError) as exc:
        raise _fail(str(exc) if isinstance(exc, JournalError) else f"{journal_url}: {exc}", EXIT_FAILED) from exc
    try:
        memory = LessonStore(lessons_url) if lessons_url is not None else None
    except (LessonStoreError, OSError) as exc:
        if journal_store is not None:
            journal_store.close()
        raise _fail(str(exc) if isinstance(exc, LessonStoreError) else f"{lessons_url}: {exc}",
                    EXIT_FAILED) from exc
    leases.install_containment()  # tool processes end with this command, SIGTERM, SIGINT or SIGKILL (issue 12)
    try:
        result, metrics = run_scenario(
            chosen, agent, guarded=not unguarded, unattended=not is_attended,
            asker=ConsoleAsker(console) if is_attended else None, events=sink,
            sandbox_root=sandbox, keep_sandbox=sandbox is not None, journal=journal_store, lessons=memory,
        )
    except OSError as exc:
        where = (f"--events {events}: " if sink is not None and exc.filename == sink.path
                 else f"{exc.filename}: " if exc.filename else "could not build the sandbox: ")
        raise _fail(f"{where}{exc.strerror or exc}", EXIT_FAILED) from exc
    except (JournalError, LessonStoreError) as exc:  # a store damaged, full or replaced during the turn
        raise _fail(str(exc), EXIT_FAILED) from exc
    finally:
        if sink is not None:
            sink.close()
        if journal_store is not None:
            journal_store.close()
        if memory is not None:
            memory.close()
    for failure in memory.failures if memory is not None else ():  # the turn went on without its lessons
        err_console.print(f"[red]error:[/red] {'--lessons' if lessons is not None else 'lessons'}: {escape(failure)}")
    if journal_url is not None:
        where = str(journal_url.path) if journal_url.path is not None else journal_url.shown
        console.print(f"journaled as turn {result.turn_id} in {escape(where)}", highlight=False)
    retries = sum(1 for s in result.steps if s.retry)
    console.print(
        f"turn: {result.status.value} · task: {metrics.outcome} · {result.tool_calls} tool call(s)"
        + (f" · validator: {metrics.validator}" if metrics.validator else "")
        + (f" · {metrics.violations} forbidden call(s)" if metrics.violations else "")
        + (f" (+{retries} retried by unstuck)" if retries else ""),
        highlight=False,
    )
    if result.escalation is not None:
        if not is_attended:  # an attended user has just read it in the question
            console.print(for_terminal(result.escalation.text), markup=False, highlight=False, soft_wrap=True)
        if result.cost_line:
            console.print(result.cost_line, highlight=False)
    elif result.answer:
        console.print(for_terminal(result.answer), markup=False, highlight=False, soft_wrap=True)
    if result.error:
        err_console.print(f"[red]error:[/red] {escape(for_terminal(result.error))}")
    if json_path is not None:
        write_json([metrics], json_path)
    if result.status is TurnStatus.BLOCKED:
        raise typer.Exit(EXIT_BLOCKED)
    if (result.status is not TurnStatus.DONE or metrics.outcome != "done" or metrics.answered is False
            or metrics.validator == "failed" or metrics.violations or (memory is not None and memory.failures)):
        raise typer.Exit(EXIT_FAILED)


@app.command("mcp-proxy", epilog=EXIT_CODES)
def _mcp_proxy_command(
    command: Annotated[list[str], typer.Argument(help="The MCP server's command line, after --.")],
    trusted: Annotated[bool, typer.Option("--trusted", help="Read situations the server declares in _meta.")] = False,
    deadline: Annotated[float, typer.Option(help="Seconds each tool call may take.")] = 120.0,
    task: Annotated[str, typer.Option(help="The task, named in the question when a call is blocked.")] = "",
    attended: Annotated[bool, typer.Option(
        "--attended", help="Someone can answer the upstream's prompts: do not refuse interactive calls.")] = False,
) -> None:
    """Serve an MCP server's tools over stdio with the guard in front of every call (the mcp extra)."""
    try:  # the proxy's machinery is imported only here (pip install "unstuck[mcp]")
        import anyio

        from unstuck.integrations.mcp_proxy import serve
    except ModuleNotFoundError as exc:
        raise UnstuckError(f"mcp-proxy needs the mcp extra: pip install 'unstuck[mcp]' ({exc})") from exc
    raw_stdout()  # the MCP channel to the agent: what the model reads, as the tools returned it (DESIGN.md)
    anyio.run(lambda: serve(command, trusted=trusted, deadline_s=deadline, task=task, unattended=not attended))


scenarios_app = typer.Typer(help="List, write and check scenarios.", no_args_is_help=False)
app.add_typer(scenarios_app, name="scenarios")


@scenarios_app.callback(invoke_without_command=True, epilog=EXIT_CODES)
def _scenarios_command(
    ctx: typer.Context,
    scenario_dir: Annotated[Path | None, typer.Option(
        help="Deprecated: also list the scenarios in this folder.", hidden=True)] = None,
) -> None:
    """Without a sub-command, list the bundled scenarios; `new` writes a template, `check` validates files."""
    if ctx.invoked_subcommand is not None:
        return
    table = Table("name", "role", "expect", "tags", "agents", "title")
    for s in _scenarios(_scenario_paths(None, scenario_dir), None):
        cells = (s.name, s.role.value, s.expect.status, ", ".join(s.tags), ", ".join(s.agents), s.title)
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)


@scenarios_app.command("new", epilog=EXIT_CODES)
def _scenarios_new_command(
    name: Annotated[str, typer.Argument(help="The new scenario's name (letters, digits, _ and -).")],
    out: Annotated[Path | None, typer.Option(help="Write the template here (default: NAME.yaml).")] = None,
) -> None:
    """Write a commented scenario template: every field, its allowed values, what it does."""
    from unstuck.evals.scenarios import ScenarioError, scenario_template

    try:
        text = scenario_template(name)
    except ScenarioError as exc:
        raise _fail(str(exc)) from exc
    target = out if out is not None else Path(f"{name}.yaml")
    if target.exists():
        raise _fail(f"{target}: already exists; choose another --out")
    try:
        write_text(target, text)
    except OSError as exc:
        raise _fail(f"{target}: {exc.strerror or exc}") from exc
    console.print(f"wrote {escape(str(target))}; check it with `unstuck scenarios check {escape(str(target))}`",
                  highlight=False)


@scenarios_app.command("check", epilog=EXIT_CODES)
def _scenarios_check_command(
    paths: Annotated[list[Path], typer.Argument(help="Scenario files (.yaml, .yml) or folders.")],
) -> None:
    """Validate scenario files without running them: exit 0, or 2 with each bad file's first error."""
    from unstuck.evals.scenarios import check_paths, scenario_files

    errors = check_paths(paths)
    for error in errors:
        err_console.print(f"[red]error:[/red] {escape(for_terminal(error))}", soft_wrap=True)
    if errors:
        raise typer.Exit(EXIT_USAGE)
    console.print(f"{len(scenario_files(paths))} scenario file(s) OK", highlight=False)


@app.command("classify", epilog=EXIT_CODES)
def _classify_command(
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
        raise _fail(f"--http-status {http_status}: an HTTP status is a number from 100 to 599 (RFC 9110 section 15)")
    try:
        table = load_signal_table(signals) if signals else load_signal_table()
    except SignalTableError as exc:
        raise _fail(str(exc)) from exc
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
        raise _fail(f"{source or 'stdin'}: {exc.strerror or exc}") from exc
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
            raise _fail(str(exc)) from exc
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


class _EventsFile:
    """A :class:`JsonLinesSink` whose write failures say they were the events file's (a
    full device is not a sandbox that could not be built)."""

    def __init__(self, path: Path) -> None:
        from unstuck.store.events import JsonLinesSink

        self._sink = JsonLinesSink(path)
        self.path = str(path)

    def emit(self, item: Event) -> None:
        try:
            self._sink.emit(item)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self.path) from exc

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the failed write was reported already
            self._sink.close()


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
        return f"{where}: {exc.strerror or exc}" if where else f"{exc.strerror or exc}"
    return str(exc)


def main() -> None:
    """Entry point of the ``unstuck`` console script: every error unstuck raises on purpose
    (:class:`unstuck.core.errors.UnstuckError`, exit 2) and every OSError of the machine (a full or
    read-only file, exit 1) ends the command with one line naming what and where, never a
    traceback. Its standard output and error are redacted from the start
    (:func:`unstuck.core.output.redact_standard_streams`), usage errors included."""
    redact_standard_streams()
    try:
        app(standalone_mode=True)
    except UnstuckError as exc:
        err_console.print(f"[red]error:[/red] {escape(for_terminal(_one_line(exc)))}", soft_wrap=True)
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        err_console.print(f"[red]error:[/red] {escape(for_terminal(_one_line(exc)))}", soft_wrap=True)
        sys.exit(EXIT_FAILED)
