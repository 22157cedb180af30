"""What the command modules share (``unstuck.cli.common``): a command whose options are one frozen
dataclass, as ``unstuck eval``'s are (issue 24, deliver 6)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from unstuck.cli.common import options_command
from unstuck.cli.eval import EvalOptions, eval_command


@dataclass(frozen=True, slots=True)
class _Greeting:
    name: Annotated[str, typer.Argument(help="Whom to greet.")]
    times: Annotated[int, typer.Option(min=1, help="How often.")] = 1
    loud: Annotated[bool, typer.Option("--loud", help="Shout.")] = False


def test_a_command_made_of_an_options_dataclass_parses_each_field_and_passes_one_object() -> None:
    seen: list[_Greeting] = []

    def greet(options: _Greeting) -> None:
        """Greet someone."""
        seen.append(options)

    app = typer.Typer()
    app.command("greet")(options_command(_Greeting, greet))
    app.command("other")(lambda: None)  # two commands: typer keeps the sub-command name
    ran = CliRunner().invoke(app, ["greet", "ada", "--times", "3", "--loud"])
    assert ran.exit_code == 0, ran.output
    assert seen == [_Greeting("ada", 3, True)]
    defaults = CliRunner().invoke(app, ["greet", "bob"])
    assert defaults.exit_code == 0 and seen[-1] == _Greeting("bob")
    refused = CliRunner().invoke(app, ["greet", "ada", "--times", "0"])
    assert refused.exit_code == 2  # the field's own typer.Option(min=1) applies
    shown = CliRunner().invoke(app, ["greet", "--help"], env={"COLUMNS": "200"})
    assert "Greet someone." in shown.output and "--times" in shown.output and "--loud" in shown.output


def test_a_class_that_is_not_a_dataclass_is_refused() -> None:
    class Loose:
        pass

    with pytest.raises(TypeError, match="is not a dataclass"):
        options_command(Loose, lambda options: None)


def test_the_eval_command_takes_every_option_as_fields_of_one_object() -> None:
    import inspect

    fields = [f.name for f in dataclasses.fields(EvalOptions)]
    assert list(inspect.signature(eval_command).parameters) == fields
    assert EvalOptions().paths is None and EvalOptions(paths=[Path("x.yaml")]).paths == [Path("x.yaml")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        EvalOptions().only = True  # type: ignore[misc]
