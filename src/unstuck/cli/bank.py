"""``unstuck bank``: harvest, list and count the failure bank (a thin layer over
:mod:`unstuck.faults.bank` and :mod:`unstuck.evals.harvest`).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from unstuck.cli.common import EXIT_FAILED, EXIT_USAGE, STORE_EXIT_CODES, JsonOption, console, err_console
from unstuck.cli.output import echo_json
from unstuck.faults.bank import BankError, Channel, FailureBank, FailureForm, Family, load_bank

if TYPE_CHECKING:  # the harvest recipes load only for `unstuck bank harvest`
    from unstuck.evals.harvest import Recipe

__all__ = ["bank_app"]

bank_app = typer.Typer(
    epilog=STORE_EXIT_CODES, help="The failure bank: observed failures the injector draws from.", no_args_is_help=True)

BankOption = Annotated[
    Path | None, typer.Option("--bank", help="A bank file (JSON lines); the bundled one by default.")
]


def _load(path: Path | None) -> FailureBank:
    try:
        return load_bank(path)
    except (BankError, OSError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_USAGE) from None


@bank_app.command("harvest", epilog=STORE_EXIT_CODES)
def _harvest(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the bank (JSON lines).")] = Path(
        "failure_bank.jsonl"),
    cases: Annotated[Path | None, typer.Option(
        "--cases", help="Add the failures of a labelled corpus (shared/cases/tool_outputs.jsonl format).")] = None,
    only: Annotated[str | None, typer.Option(
        "--only", help="Comma-separated recipe ids, programs or tags to run (e.g. gh,curl,python).")] = None,
) -> None:
    """Run real programs in failure states and record what they print, exit with, answer or raise."""
    from unstuck.evals.harvest import RECIPES, forms_from_cases, harvest

    if not out.parent.is_dir():
        _usage(f"--out {out}: the folder {out.parent} does not exist")
    if out.is_dir():
        _usage(f"--out {out}: is a directory; give a file path")
    reported: list[FailureForm] = []
    if cases is not None:
        try:
            reported = list(forms_from_cases(cases))
        except (OSError, ValueError) as exc:
            _usage(f"--cases: {exc}")
    recipes = list(RECIPES)
    if only is not None:
        wanted = [part.strip().lower() for part in only.split(",") if part.strip()]
        if not wanted:
            _usage("--only needs at least one recipe id, program or tag")
        unmatched = [w for w in wanted if not any(_matches(r, w) for r in RECIPES)]
        if unmatched:
            _usage(f"--only: {', '.join(unmatched)} matched no recipe; recipes: {', '.join(r.id for r in RECIPES)}")
        recipes = [r for r in RECIPES if any(_matches(r, w) for w in wanted)]
    with Progress(TextColumn("harvest"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  console=err_console, transient=True) as progress:
        task = progress.add_task("", total=len(recipes))
        report = harvest(recipes, on_form=lambda rid: progress.update(task, advance=1, description=rid))
    forms: list[FailureForm] = [*report.forms, *reported]
    for recipe_id, reason in report.skipped:
        err_console.print(f"skipped {escape(recipe_id)}: {escape(reason)}")
    if not forms:
        err_console.print("[red]error:[/red] no recipe produced a form, and no cases were given; nothing written")
        raise typer.Exit(EXIT_FAILED)
    FailureBank(forms).write(out)
    from_cases = len(forms) - len(report.forms)
    console.print(f"wrote {len(forms)} forms to {escape(str(out))} ({len(report.forms)} harvested here, "
                  f"{from_cases} from reports, {len(report.skipped)} recipes skipped)")


def _usage(message: str) -> NoReturn:
    err_console.print(f"[red]error:[/red] {escape(message)}")
    raise typer.Exit(EXIT_USAGE)


def _matches(recipe: Recipe, wanted: str) -> bool:
    """``--only`` matches a recipe by id, program or tag, ignoring case (``python`` is the
    ``python3`` program's tag)."""
    return wanted in (recipe.id.lower(), recipe.program.lower(), *(t.lower() for t in recipe.tools))


@bank_app.command("list", epilog=STORE_EXIT_CODES)
def _list(
    bank: BankOption = None,
    family: Annotated[str | None, typer.Option("--family", help="Only this family.")] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="Only forms that fit this tool tag.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List the bank's forms."""
    forms = list(_load(bank))
    if family is not None:
        if family not in {f.value for f in Family}:
            err_console.print(f"[red]error:[/red] unknown family {escape(family)!r}; known: {', '.join(Family)}")
            raise typer.Exit(EXIT_USAGE)
        forms = [f for f in forms if f.family.value == family]
    if tool is not None:
        forms = [f for f in forms if tool in f.tools]
    if as_json:
        echo_json([f.to_json() for f in forms])
        return
    table = Table("id", "family", "kind", "channel", "tools", "transient", "first line", "source")
    for form in forms:
        first = next((line.strip() for line in form.output.splitlines() if line.strip()), "")
        table.add_row(escape(form.id), form.family.value, form.kind.value, form.channel.value,
                      escape(",".join(form.tools)), "yes" if form.transient else "no", escape(first[:60]),
                      form.provenance.source)
    console.print(table)


@bank_app.command("stats", epilog=STORE_EXIT_CODES)
def _stats(bank: BankOption = None, as_json: JsonOption = False) -> None:
    """Count the bank's forms by family and channel, and by source."""
    forms = list(_load(bank))
    by_cell = Counter((f.family, f.channel) for f in forms)
    by_source = Counter(f.provenance.source for f in forms)
    transient = sum(f.transient for f in forms)
    if as_json:
        echo_json({
            "forms": len(forms), "transient": transient, "permanent": len(forms) - transient,
            "by_source": dict(by_source),
            "by_family": {fam.value: {ch.value: by_cell[(fam, ch)] for ch in Channel} for fam in Family},
        })
        return
    table = Table("family", *[ch.value for ch in Channel], "all")
    for fam in Family:
        counts = [by_cell[(fam, ch)] for ch in Channel]
        table.add_row(fam.value, *[str(c) for c in counts], str(sum(counts)))
    console.print(table)
    sources = ", ".join(f"{n} from {source}" for source, n in sorted(by_source.items()))
    console.print(f"{len(forms)} forms: {transient} transient, {len(forms) - transient} permanent"
                  + (f"; {sources}" if sources else ""))
