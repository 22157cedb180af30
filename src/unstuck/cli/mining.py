"""``unstuck mine ENV`` and ``unstuck rules list | show | disable | enable``: mining recovery
rules from contrast (a thin layer over :mod:`unstuck.mining`).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from unstuck.cli.common import STORE_EXIT_CODES, console, err_console, fail
from unstuck.cli.common import shown as _shown
from unstuck.core.output import json_text, write_json

if TYPE_CHECKING:  # the mining modules load only inside the commands (start-up stays small)
    from rich.progress import TaskID

    from unstuck.mining.mine import MiningReport
    from unstuck.mining.rules import EnvironmentRecord

__all__ = ["mine_command", "rules_app"]

rules_app = typer.Typer(epilog=STORE_EXIT_CODES, no_args_is_help=True,
                        help="Recovery rules mined per environment (`unstuck mine`): list, show, disable, enable.")

RecordsOption = Annotated[Path | None, typer.Option(
    "--records", show_default=False,
    help="The folder of environment records (default: UNSTUCK_RECORDS_DIR, else the user data folder).")]


def mine_command(
    environment: Annotated[str, typer.Argument(help="The environment: files_comments, issue_tracker, package_cli.")],
    p_inj: Annotated[float, typer.Option("--p-inj", min=0.0, max=1.0,
                                         help="Replace each tool return with an observed failure with this "
                                              "probability.")] = 0.1,
    pair_cap: Annotated[int, typer.Option("--pair-cap", min=1, help="Contrast pairs taken per task, at most.")] = 3,
    seeds: Annotated[int, typer.Option(min=1, help="Rollouts per task and agent (seeds 0 to N-1).")] = 2,
    model: Annotated[list[str] | None, typer.Option(
        "--model", show_default=False, help="Also attempt every task with this model of an OpenAI-compatible "
                                            "server (repeatable; NAME or NAME@BASE_URL).")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="The server's API root for --model NAME without @BASE_URL, e.g. http://127.0.0.1:11434/v1.")] = None,
    analyzer_model: Annotated[str | None, typer.Option(
        help="Label rollouts with this model (NAME or NAME@BASE_URL) instead of the trace rules.")] = None,
    backend: Annotated[str, typer.Option(help="Where rollouts run: local (processes) or ray.")] = "local",
    workers: Annotated[int | None, typer.Option(min=1, show_default=False,
                                                help="Parallel rollouts (default: the CPUs).")] = None,
    records: RecordsOption = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
) -> None:
    """Mine recovery rules for ENV: eligible tasks, rollouts by the pool, joint labels, contrast
    pairs, rules, interventions on held-out tasks; save the kept rules in its record."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from unstuck.mining.agents import ModelSpec
    from unstuck.mining.environment import MiningError
    from unstuck.mining.envs import environment as make_environment
    from unstuck.mining.labels import ModelAnalyzer
    from unstuck.mining.mine import mine_environment, report_to_dict
    from unstuck.mining.rules import default_records_dir

    def spec(text: str) -> ModelSpec:
        name, _, url = text.partition("@")
        return ModelSpec(name, base_url=url or base_url)

    if backend not in ("local", "ray"):
        raise fail(f"--backend {backend!r}: use local or ray")
    if json_path is not None and (json_path.is_dir() or not json_path.parent.is_dir()):
        raise fail(f"--json {json_path}: not a file path in an existing folder")
    try:
        env = make_environment(environment)
        models = [spec(text) for text in model or []]
        analyzer = ModelAnalyzer(spec(analyzer_model).build()) if analyzer_model else None
    except MiningError as exc:
        raise fail(str(exc)) from exc
    folder = records if records is not None else default_records_dir()
    if folder.exists() and not folder.is_dir():
        raise fail(f"--records {folder}: not a folder (records are written there as ENV.json)")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as progress:
        bars: dict[str, TaskID] = {}

        def tick(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                bars[stage] = progress.add_task(f"{environment}: {stage}", total=total)
            progress.update(bars[stage], completed=done, total=total)

        try:
            report = mine_environment(env, p_inj=p_inj, pair_cap=pair_cap, seeds=seeds, models=models,
                                      analyzer=analyzer, backend=backend, workers=workers, records=folder,
                                      progress=tick)
        except MiningError as exc:
            raise fail(str(exc)) from exc
    from unstuck.mining.rules import record_path

    _print_report(report, record_path(environment, folder))
    if json_path is not None:
        write_json(json_path, report_to_dict(report))
        console.print(f"report written to {_shown(str(json_path))}", highlight=False)


def _print_report(report: MiningReport, old_record: Path | None = None) -> None:
    entered = [e for e in report.eligibility if e.eligible]
    console.print(f"{report.environment}: {len(entered)} of {len(report.eligibility)} tasks eligible; "
                  f"{len(report.mining_tasks)} for mining, {len(report.held_out)} held out", highlight=False)
    for e in report.eligibility:
        if not e.eligible:
            console.print(f"  not eligible: {e.task}: {_shown(e.evidence)}", highlight=False)
    console.print(f"rollouts: {report.rollouts} at p_inj {report.p_inj:g}; labels: {_shown(report.labels.summary())}",
                  highlight=False)
    console.print(f"contrast: {_shown(report.contrast.message)}", highlight=False)
    if report.rules:
        table = Table(title="rules as interventions on held-out tasks (same tasks, same seeds)")
        for column in ("rule", "when P, do A", "support", "fixed", "broke", "kept"):
            table.add_column(column, justify="right" if column in ("support", "fixed", "broke") else "left")
        for r in report.rules:
            table.add_row(r.rule.id, _shown(r.rule.text), str(r.rule.support), str(r.effect.fixed),
                          str(r.effect.broke), "yes" if r.kept else "no")
        console.print(table)
    if report.levels:
        table = Table(title="held-out success: without rules / with the kept rules")
        for column in ("p_inj", "runs", "without rules", "with rules"):
            table.add_column(column, justify="right")
        for level in report.levels:
            table.add_row(f"{level.p_inj:g}", str(level.runs), f"{level.without_rate:.0%}", f"{level.with_rate:.0%}")
        console.print(table)
    if report.record_path:
        console.print(f"record written to {_shown(report.record_path)} ({len(report.kept_rules)} rule(s) kept)",
                      highlight=False)
    else:
        if report.stopped:
            console.print(f"stopped: {_shown(report.stopped)}", highlight=False)
        elif report.contrast.enough:
            console.print("no rule was kept: none fixed more held-out rollouts than it broke; no record written",
                          highlight=False)
        else:
            console.print("no rules written", highlight=False)
        if old_record is not None and old_record.exists():
            console.print(f"the record of an earlier run stays in force: {_shown(str(old_record))}", highlight=False)
    if report.kept_disabled:
        console.print(f"kept disabled as you left them: {', '.join(report.kept_disabled)}", highlight=False)


def _load(environment: str, records: Path | None) -> tuple[Path, EnvironmentRecord]:
    from unstuck.mining.environment import MiningError
    from unstuck.mining.envs import environment_names
    from unstuck.mining.rules import load_record, record_path

    try:
        path = record_path(environment, records)
    except MiningError as exc:
        raise fail(str(exc)) from exc
    if not path.exists():
        if environment not in environment_names():
            raise fail(f"no record for {environment!r} at {path}, and no such environment; the environments are "
                        f"{', '.join(environment_names())}")
        raise fail(f"no record for {environment!r} at {path}; run `unstuck mine {environment}` first")
    try:
        record = load_record(path)
    except MiningError as exc:
        raise fail(str(exc)) from exc
    if record.environment != environment:
        raise fail(f"{path} holds the record of {record.environment!r}, not {environment!r}")
    return path, record


@rules_app.command("list")
def _rules_list(
    environment: Annotated[str | None, typer.Argument(help="One environment (default: every record).")] = None,
    records: RecordsOption = None,
) -> None:
    """List the rules of every environment record (or of one)."""
    from unstuck.mining.environment import MiningError
    from unstuck.mining.rules import default_records_dir, load_record

    folder = records if records is not None else default_records_dir()
    if folder.exists() and not folder.is_dir():
        raise fail(f"--records {folder}: not a folder")
    if environment:
        _, one = _load(environment, records)
        records_found = [one]
    else:
        records_found = []
        for path in sorted(folder.glob("*.json")):
            try:
                records_found.append(load_record(path))
            except MiningError as exc:  # one foreign or damaged file does not hide the others
                err_console.print(f"[yellow]skipped:[/yellow] {_shown(str(exc))}")
    table = Table("environment", "rule", "enabled", "when P, do A", "support", "fixed", "broke")
    shown = 0
    for record in records_found:
        for rule in record.rules:
            effect = rule.effect
            table.add_row(record.environment, rule.id, "yes" if rule.enabled else "no", _shown(rule.text),
                          str(rule.support), str(effect.fixed) if effect else "-", str(effect.broke) if effect else "-")
            shown += 1
    if not shown:
        console.print(f"no rules yet (no records in {_shown(str(folder))})", highlight=False)
        return
    console.print(table)


@rules_app.command("show")
def _rules_show(
    environment: Annotated[str, typer.Argument(help="The environment.")],
    rule_id: Annotated[str, typer.Argument(help="The rule's id (see `unstuck rules list`).")],
    records: RecordsOption = None,
) -> None:
    """Show one rule: its sentence, trigger, action, support and effect, as JSON."""
    import dataclasses

    from unstuck.mining.environment import MiningError

    _, record = _load(environment, records)
    try:
        rule = record.rule(rule_id)
    except MiningError as exc:
        raise fail(str(exc)) from exc
    console.print_json(json_text(dataclasses.asdict(rule), ensure_ascii=False))


def _set_enabled(environment: str, rule_id: str, records: Path | None, enabled: bool) -> None:
    import dataclasses

    from unstuck.mining.environment import MiningError
    from unstuck.mining.rules import save_record

    path, record = _load(environment, records)
    try:
        rule = record.rule(rule_id)
    except MiningError as exc:
        raise fail(str(exc)) from exc
    save_record(record.with_rule(dataclasses.replace(rule, enabled=enabled)), path)
    console.print(f"{environment} {rule_id}: {'enabled' if enabled else 'disabled'}", highlight=False)


@rules_app.command("disable")
def _rules_disable(
    environment: Annotated[str, typer.Argument(help="The environment.")],
    rule_id: Annotated[str, typer.Argument(help="The rule's id.")],
    records: RecordsOption = None,
) -> None:
    """Stop giving a rule to agents (it stays in the record)."""
    _set_enabled(environment, rule_id, records, False)


@rules_app.command("enable")
def _rules_enable(
    environment: Annotated[str, typer.Argument(help="The environment.")],
    rule_id: Annotated[str, typer.Argument(help="The rule's id.")],
    records: RecordsOption = None,
) -> None:
    """Give a disabled rule to agents again."""
    _set_enabled(environment, rule_id, records, True)


@rules_app.command("prompt")
def _rules_prompt(
    environment: Annotated[str, typer.Argument(help="The environment.")],
    records: RecordsOption = None,
) -> None:
    """Print the enabled rules as the prompt section a model agent gets (paste it into your
    agent's system prompt for that environment); nothing when no rule is enabled. A rule whose
    text is not one plain sentence, or reads as an instruction to the agent, is left out, and
    named on standard error."""
    from unstuck.mining.rules import rules_prompt, withheld_rules

    _, record = _load(environment, records)
    for rule, why in withheld_rules(record.enabled_rules()):
        err_console.print(f"[yellow]withheld:[/yellow] {_shown(rule.id)}: its text is not given to a model: "
                          f"{_shown(why)}")
    text = rules_prompt(record.enabled_rules(), record.environment)
    if text:
        console.print(text, highlight=False, markup=False, soft_wrap=True)
    else:
        err_console.print(f"{environment}: no rule is enabled")
