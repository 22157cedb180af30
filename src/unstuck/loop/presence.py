"""Presence: asking a person who is there.

When a run is attended, an escalation becomes a question with three choices (DESIGN.md,
"What the user sees"; seed 000 section 3.3, Rule 4 delivery): "I've done it" (the loop runs
the probe and, if clean, continues), "Skip it" (continue without the blocked subject), and
"Stop" (end the turn blocked).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Protocol

from rich.console import Console
from rich.panel import Panel
from rich.prompt import Confirm, Prompt
from rich.text import Text

from unstuck.core.redact import redact
from unstuck.core.text import for_terminal
from unstuck.decide.escalation import Answer, Escalation

__all__ = ["Answer", "Asker", "ConsoleAsker", "ScriptedAsker", "console_can_ask"]


class Asker(Protocol):
    """Puts an escalation to the user and returns their answer."""

    def ask(self, escalation: Escalation, *, note: str | None = None) -> Answer:
        """Ask; ``note`` says why the question is asked again (e.g. the probe still fails)."""
        ...


_REPLIES = {
    "1": Answer.DONE, "done": Answer.DONE, "i've done it": Answer.DONE, "d": Answer.DONE,
    "2": Answer.SKIP, "skip": Answer.SKIP, "skip it": Answer.SKIP, "s": Answer.SKIP,
    "3": Answer.STOP, "stop": Answer.STOP, "q": Answer.STOP,
}


class ConsoleAsker:
    """Ask in the terminal with rich: the escalation in a panel, then a numbered choice.

    Accepts ``1``/``2``/``3`` or ``done``/``skip``/``stop``; end of input answers "Stop".
    """

    def __init__(self, console: Console | None = None) -> None:
        self._console = console or Console()

    def ask(self, escalation: Escalation, *, note: str | None = None) -> Answer:
        """Show the escalation and read one of the three choices."""
        # tool and model text as plain Text: never read as rich markup ("[/]" raises, "[link=…]"
        # writes an OSC 8 link), stripped of escape sequences (unstuck.core.text.for_terminal) and of
        # secrets (unstuck.core.redact)
        title = Text(f"unstuck: {for_terminal(escalation.subject)} needs you")
        self._console.print(Panel(Text(redact(escalation.text)), title=title))
        if note:
            self._console.print(Text(redact(for_terminal(note)), style="yellow"))
        self._console.print("  [bold]1[/bold] I've done it   [bold]2[/bold] Skip it   [bold]3[/bold] Stop")
        while True:
            try:
                reply = Prompt.ask("Your choice", console=self._console, default="3")
            except (EOFError, KeyboardInterrupt):
                return Answer.STOP
            answer = _REPLIES.get(reply.strip().lower())
            if answer is not None:
                return answer
            self._console.print("Please answer 1, 2 or 3.")

    def confirm(self, question: str) -> bool:
        """A yes/no question (``install_cli`` asks before it installs); end of input is no."""
        try:
            return Confirm.ask(Text(for_terminal(question)), console=self._console, default=False)
        except (EOFError, KeyboardInterrupt):
            return False

    def prompt(self, question: str) -> str:
        """A free-text question (``request_user_input``); end of input is an empty answer."""
        try:
            return Prompt.ask(Text(for_terminal(question)), console=self._console, default="")
        except (EOFError, KeyboardInterrupt):
            return ""


class ScriptedAsker:
    """Answers from a fixed list, in order, then "Stop" (for tests and evals)."""

    def __init__(self, answers: Iterable[Answer]) -> None:
        self._answers: Iterator[Answer] = iter(answers)
        self.asked: list[Escalation] = []

    def ask(self, escalation: Escalation, *, note: str | None = None) -> Answer:
        """Record the escalation; return the next scripted answer."""
        self.asked.append(escalation)
        return next(self._answers, Answer.STOP)


def console_can_ask() -> bool:
    """True when a person can plausibly answer at this console: stdin and stdout are
    terminals and ``CI`` is not set. Used only as the CLI's default; the library never guesses.
    """
    return sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("CI")
