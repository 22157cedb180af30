"""The world every framework adapter is tried in (issue 13, "Show"): the real gh, signed out,
reached through a plain shell tool (:mod:`unstuck.evals.shell_world`), under the names the
adapter tests use."""

from __future__ import annotations

from collections.abc import Iterator

from unstuck.evals.shell_world import (
    ANSWER,
    TASK,
    TASK_COMMAND,
    UNBLOCK,
    WORKAROUNDS,
    Behaviour,
    ShellWorld,
    commands_of,
)

__all__ = ["ANSWER", "TASK", "TASK_COMMAND", "UNBLOCK", "WORKAROUNDS", "GhWorld", "improviser_commands"]

class GhWorld(ShellWorld):
    """The signed-out gh (``ShellWorld("gh_logged_out")``)."""

    def __init__(self) -> None:
        super().__init__("gh_logged_out")


def improviser_commands() -> Iterator[str]:
    """The task's command, then the workarounds, for ever (an agent that never asks)."""
    return commands_of(Behaviour.IMPROVISER)
