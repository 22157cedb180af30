"""Every command's terminal output, made safe in one place (DESIGN.md: tool text reaches a
terminal only with control and escape sequences stripped; issue 23, deliver 4).
Internal: not a supported import path (docs/reference/index.md lists those that are).

The commands print only through what this module gives them:

* :class:`SafeConsole`, a ``rich`` console whose every rendered piece of text passes
  :func:`unstuck.core.text.for_terminal` (strings before markup and highlighting are read, and
  every segment of text after rendering: tables, panels, JSON, prompts and progress lines
  alike), so no escape sequence, C1 control, bidirectional override or invisible character in
  a tool's text, a stored record or a file reaches the terminal, whichever command prints it
  and however it was built. Only rich's own styles and cursor moves (its control segments)
  are written as escape sequences;
* :func:`output_consoles`, the standard-output and standard-error consoles of a command;
* :func:`echo_json` and :func:`write_text`, for documents a command writes to standard output
  (``--json``, ``-``): JSON keeps every string exact, with the characters a terminal would act
  on (C0 and C1 controls, the invisible and bidirectional characters of
  :data:`unstuck.core.text.DEFAULT_IGNORABLE`, line and paragraph separators) written as ``\\uXXXX``
  escapes (RFC 8259 section 7), so a parser reads the same value and a terminal shows it inert.

``tests/test_cli_output.py`` fails when a command module makes a console, calls
``typer.echo``, ``print`` or writes to ``sys.stdout`` or ``sys.stderr`` any other way.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import re2
from rich.console import Console
from rich.segment import Segment

from unstuck.core.output import json_text
from unstuck.core.redact import redact
from unstuck.core.text import DEFAULT_IGNORABLE, for_terminal

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, RenderableType
    from rich.text import Text

__all__ = ["SafeConsole", "echo_json", "json_for_terminal", "output_consoles", "write_text"]


class SafeConsole(Console):
    """A ``rich`` console whose text is stripped for the terminal (see the module doc)."""

    def render_str(self, text: str, **options: Any) -> Text:
        """rich's reading of a string (markup, emoji, highlighting), of the string redacted
        (:func:`unstuck.core.redact.redact`) and stripped by :func:`unstuck.core.text.for_terminal` first:
        redacted whole, before rich wraps it into a table cell's or a panel's lines, since a
        secret cut across two lines is no longer a shape the output stream's redaction finds."""
        return super().render_str(for_terminal(redact(text)), **options)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """rich's segments, each segment of text stripped by :func:`unstuck.core.text.for_terminal`;
        control segments (rich's own cursor moves) pass as they are."""
        for segment in super().render(renderable, options):
            if segment.control is not None or not segment.text:
                yield segment
            else:
                yield Segment(for_terminal(segment.text), segment.style, None)


def output_consoles(*, width: int = 150) -> tuple[SafeConsole, SafeConsole]:
    """A command's standard-output console (``width`` columns when it is not a terminal, so a
    file or a pipe gets whole tables; a terminal's own width otherwise) and its standard-error
    console (one line per message, never wrapped)."""
    out = SafeConsole(emoji=False)
    if not out.is_terminal:
        out = SafeConsole(width=width, emoji=False)
    return out, SafeConsole(stderr=True, emoji=False, soft_wrap=True)


#: What a terminal acts on or hides, written as a ``\\uXXXX`` escape inside JSON text: DEL,
#: C1 controls, :data:`unstuck.core.text.DEFAULT_IGNORABLE`, U+2028/U+2029 (``json.dumps`` escapes
#: the C0 controls itself; the only raw one it writes is the newline of its indentation).
_ACTIVE = re2.compile(f"[\\x7f-\\x9f{DEFAULT_IGNORABLE}\u2028\u2029]")


def _escaped(char: str) -> str:
    """``char`` as a JSON ``\\uXXXX`` escape (a UTF-16 surrogate pair above U+FFFF, as RFC
    8259 section 7 writes it)."""
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_for_terminal(document: object, *, indent: int | None = 2) -> str:
    """``document`` as JSON text safe to show on a terminal: every string exact but for its
    secrets (redacted before it is serialised, :func:`unstuck.core.output.json_text`, so the text
    still parses), non-ASCII text kept readable, and each character of :data:`_ACTIVE` written
    as a ``\\uXXXX`` escape."""
    text = json_text(document, indent=indent, ensure_ascii=False)
    return str(_ACTIVE.sub(lambda match: _escaped(match.group(0)), text))


def echo_json(document: object, *, indent: int | None = 2) -> None:
    """Write ``document`` to standard output as :func:`json_for_terminal` gives it, then a newline."""
    write_text(json_for_terminal(document, indent=indent) + "\n", stripped=False)


def write_text(text: str, *, stripped: bool = True) -> None:
    """Write a document to standard output, stripped by :func:`unstuck.core.text.for_terminal`
    (``stripped=False`` only for text already made safe, such as :func:`json_for_terminal`'s),
    ending with a newline."""
    shown = for_terminal(text) if stripped else text
    sys.stdout.write(shown if shown.endswith("\n") else f"{shown}\n")
    sys.stdout.flush()
