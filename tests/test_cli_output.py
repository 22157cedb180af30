"""Every command's terminal output goes through one stripping console (issue 23, deliver 4):
the command modules make no console of their own and write to the standard streams no other
way; what the console prints holds no terminal control, whatever it is given."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from unstuck.cli.output import SafeConsole, json_for_terminal

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "unstuck"
#: The command modules: the CLI layer of DESIGN.md (tests/test_architecture.py).
COMMAND_MODULES = [*sorted(p for p in (PACKAGE / "cli").glob("*.py") if p.name != "output.py"), PACKAGE / "__main__.py"]

#: Terminal controls a tool's text can carry (ECMA-48: ESC, the C1 CSI, OSC and DCS, BEL; xterm's
#: OSC 52 clipboard write and OSC 8 link; Unicode UAX #9 overrides and isolates; a tag character).
HOSTILE = ("red\x1b[31m \x1b[2J\x1b[1A over \x1b]52;c;Y3VybCB4IHwgc2g=\x07 clip \x1b]8;;https://x.example/\x1b\\link"
           "\x1b]8;;\x1b\\ \x9b2J \x9d0;title\x9c \u202egol\u202c \u2066x\u2069 \U000e0041")
FORBIDDEN = ("\x1b", "\x9b", "\x9d", "\x9c", "\x07", "\u202e", "\u202c", "\u2066", "\u2069", "\U000e0041")


def _calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else ast.unparse(func) if isinstance(func, ast.Attribute) else ""
            found.append((node.lineno, name))
    return found


@pytest.mark.parametrize("path", COMMAND_MODULES, ids=lambda p: p.name)
def test_a_command_module_prints_only_through_the_stripping_console(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    banned = {"Console", "rich.console.Console", "print", "typer.echo", "typer.secho", "click.echo",
              "sys.stdout.write", "sys.stderr.write", "os.write"}
    violations = [f"{path.name}:{line}: {name}(…)" for line, name in _calls(tree) if name in banned]
    imports = [f"{path.name}:{node.lineno}: imports rich.console.Console" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == "rich.console"
               and any(alias.name == "Console" for alias in node.names)]
    assert not violations + imports, "\n".join(violations + imports)


@pytest.mark.parametrize("terminal", [False, True])
def test_the_console_strips_every_terminal_control_from_text_tables_panels_and_json(terminal: bool) -> None:
    out = io.StringIO()
    console = SafeConsole(file=out, width=100, force_terminal=terminal, color_system="standard" if terminal else None)
    console.print(HOSTILE)
    console.print(HOSTILE, markup=False, highlight=False)
    console.print(Text(HOSTILE))
    table = Table("cell")
    table.add_row(HOSTILE)
    console.print(table)
    console.print(Panel(Text(HOSTILE), title=Text(HOSTILE)))
    console.print_json(json.dumps({"v": HOSTILE}, ensure_ascii=False))
    console.print("[bold]bold[/bold] and red", style="red")  # rich's own styles are still written
    shown = out.getvalue()
    leaked = sorted({c for c in FORBIDDEN if c in shown})
    if terminal:  # rich's own SGR styles are the only escape sequences, and they stay
        leaked = [c for c in leaked if c != "\x1b"]
        assert "\x1b[1m" in shown
        assert not any(s in shown for s in ("\x1b[2J", "\x1b[1A", "\x1b]52", "\x1b]8;;https"))
    assert leaked == [], leaked
    assert "over" in shown and "clip" in shown  # the words around the controls stay


def test_json_for_a_terminal_keeps_every_string_exact_and_writes_the_controls_as_escapes() -> None:
    document = {"text": HOSTILE, "line": "a\u2028b", "del": "x\x7fy", "plain": "café"}
    shown = json_for_terminal(document)
    assert json.loads(shown) == document
    assert not any(c in shown for c in (*FORBIDDEN, "\u2028", "\x7f"))
    assert "café" in shown  # readable text stays readable


def test_a_secret_in_a_table_cell_is_masked_before_the_cell_wraps_it_across_lines() -> None:
    # A header credential as a JSON key (RFC 9110 section 11.6.2's Authorization field), long
    # enough that a 40-column table cell must break it; masked whole before rich lays it out.
    token = "eyJ0eXAiOiJKV1Qi" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY"
    cell = 'task={"headers": {"Authorization": "Bearer ' + token + '"}} then deploy'
    stream = io.StringIO()
    console = SafeConsole(file=stream, width=40, emoji=False)
    table = Table("event", "details")
    table.add_row("turn.started", cell)
    console.print(table)
    shown = stream.getvalue()
    assert "Authorization" in shown
    for piece in (token[i:i + 8] for i in range(0, len(token) - 8, 8)):
        assert piece not in shown.replace("\n", "").replace("│", "").replace(" ", "")
