"""Scenarios on the command line: ``unstuck scenarios`` (list, ``new``, ``check``), and the
choosing (by name or file) and trust check (:mod:`unstuck.evals.trust`) of the scenario files
``run`` and ``eval`` are given.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from unstuck.cli.common import EXIT_CODES, EXIT_USAGE, console, err_console, fail
from unstuck.core.output import write_text
from unstuck.core.text import for_terminal

if TYPE_CHECKING:
    from unstuck.evals.scenarios import Scenario

__all__ = [
    "TrustOption",
    "TrustedDigestsOption",
    "check_trust",
    "chosen_scenarios",
    "scenario_paths",
    "scenarios_app",
    "split_names",
]

def split_names(value: str | None, what: str) -> list[str] | None:
    """A comma-separated option's names (``None`` when the option was not given; a usage error
    when it was given but names nothing)."""
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise fail(f"--{what} was given but names nothing")
    return names




def chosen_scenarios(paths: list[Path], names: list[str] | None, *, only: bool = False) -> list[Scenario]:
    """The bundled scenarios plus those in ``paths`` (files or folders; only those with
    ``only``), narrowed to ``names`` (a name that matches nothing is a usage error)."""
    from unstuck.evals.scenarios import ScenarioError, load_paths

    if only and not paths:
        raise fail("--only needs scenario files or folders to run instead of the bundled ones")
    try:
        found = load_paths(paths, bundled=not only)
    except ScenarioError as exc:
        raise fail(str(exc)) from exc
    if names is None:
        return found
    by_name = {s.name: s for s in found}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise fail(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(by_name)} "
                    "(a scenario of your own: give its file's path)")
    return [by_name[n] for n in names]



TrustOption = Annotated[bool, typer.Option(
    "--trust", help="Run scenario files of your own without asking (they run commands on this machine: read "
                    "them first).")]
TrustedDigestsOption = Annotated[Path | None, typer.Option(
    "--trusted-digests", metavar="FILE", show_default=False,
    help="Also trust the scenario files whose SHA-256 this file lists (sha256sum's format; default: "
         "UNSTUCK_TRUSTED_DIGESTS, and trusted-scenarios.sha256 in the user config folder).")]


def check_trust(chosen: list[Scenario], *, trust: bool, digests: Path | None, attended: bool | None = None) -> None:
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
        raise fail(str(exc)) from exc
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
            raise fail(f"{scenario.source}: not run: it is not trusted, and part of {len(hidden)} of its commands "
                        f"cannot be shown here (masked as a secret, or holding control characters), so it is not "
                        f"offered for a yes. Read {scenario.source} ({lines}), then {trust_how}")
        if not can_ask:
            raise fail(f"{scenario.source}: not run: it is not trusted, and no one is at a terminal to ask. "
                        f"Read its commands (above), then {trust_how}")
        if not Confirm.ask(f"Run {escape(scenario.source)} and these commands?", console=err_console, default=False):
            raise fail(f"{scenario.source}: not run (you said no)")
        try:
            recorded = remember_trusted(scenario)
        except TrustError as exc:
            raise fail(str(exc)) from exc
        err_console.print(f"trusted from now on (recorded in {escape(str(recorded))})", highlight=False)



def scenario_paths(paths: list[Path] | None, scenario_dir: Path | None) -> list[Path]:
    """The PATH arguments, with the deprecated ``--scenario-dir`` (hidden from --help) as one more."""
    return [*(paths or []), *([scenario_dir] if scenario_dir is not None else [])]



scenarios_app = typer.Typer(help="List, write and check scenarios.", no_args_is_help=False)


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
    for s in chosen_scenarios(scenario_paths(None, scenario_dir), None):
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
        raise fail(str(exc)) from exc
    target = out if out is not None else Path(f"{name}.yaml")
    if target.exists():
        raise fail(f"{target}: already exists; choose another --out")
    try:
        write_text(target, text)
    except OSError as exc:
        raise fail(f"{target}: {exc.strerror or exc}") from exc
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

