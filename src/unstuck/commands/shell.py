"""The import path of earlier releases for command lines (``unstuck.commands.shell``, and
``unstuck.shell`` before it): the public names of :mod:`unstuck.commands.parse` (the shell
parse), :mod:`unstuck.commands.interactive` (the calls that wait for a person),
:mod:`unstuck.commands.screen` (the command screen) and :mod:`unstuck.commands.plain` (plain
command lines), re-exported unchanged. New code imports those modules.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

from unstuck.commands.interactive import (
    InteractiveCall,
    InteractiveCatalogue,
    InteractiveRow,
    OptionSpec,
    TerminalStream,
    Waits,
    interactive_call,
    load_interactive_catalogue,
    parse_interactive_calls,
)
from unstuck.commands.parse import (
    MAX_NESTING,
    MAX_SCRIPT_DEPTH,
    CommandLine,
    Redirect,
    SimpleCommand,
    Stream,
    command_operators,
    command_programs,
    command_subject,
    is_setup,
    parse_command_line,
)
from unstuck.commands.plain import VariableEffect, VariableRule, plain_command_refusal, variable_rule
from unstuck.commands.screen import (
    SCREEN_MAX_CHARS,
    TOO_MANY_TO_SCREEN,
    Screened,
    find_download_and_run,
    screen_command,
)

__all__ = [
    "MAX_NESTING",
    "MAX_SCRIPT_DEPTH",
    "SCREEN_MAX_CHARS",
    "TOO_MANY_TO_SCREEN",
    "CommandLine",
    "InteractiveCall",
    "InteractiveCatalogue",
    "InteractiveRow",
    "OptionSpec",
    "Redirect",
    "Screened",
    "SimpleCommand",
    "Stream",
    "TerminalStream",
    "VariableEffect",
    "VariableRule",
    "Waits",
    "command_operators",
    "command_programs",
    "command_subject",
    "find_download_and_run",
    "interactive_call",
    "is_setup",
    "load_interactive_catalogue",
    "parse_command_line",
    "parse_interactive_calls",
    "plain_command_refusal",
    "screen_command",
    "variable_rule",
]
