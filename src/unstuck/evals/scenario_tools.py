"""The tools a scenario's environment offers (``tools:`` in a scenario file): the standard
tools it keeps, ``run_command`` on a pseudo-terminal when it asks for one, and the extra tools
it declares, whose behaviour is a script run in the sandbox or a recorded result.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from unstuck.core.tools import CommandOutput, Effect, ToolResult
from unstuck.evals.scenarios import ExtraTool, Scenario
from unstuck.toolkit.specs import Toolset, ToolSpec, tool
from unstuck.toolkit.workspace import Workspace, standard_tools

__all__ = ["TOOL_ARGS_VARIABLE", "extra_tool", "scenario_tools"]

#: The environment variable that carries an extra tool's call arguments (JSON) to its script.
TOOL_ARGS_VARIABLE = "UNSTUCK_TOOL_ARGS"
_ANY_ARGUMENTS: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def extra_tool(extra: ExtraTool, workspace: Workspace, *, timeout_s: float = 60.0) -> ToolSpec:
    """The tool a scenario declares (:class:`unstuck.evals.scenarios.ExtraTool`), bound to
    ``workspace``: a script runs as ``/bin/bash -c`` through :meth:`Workspace.run` (a leased
    subprocess, ``timeout_s`` seconds; the call's arguments as JSON in ``UNSTUCK_TOOL_ARGS``;
    ``exit N`` appended when the scenario gives ``exit``) and its output is the result; a
    recorded result comes back as given (``ok`` as recorded). Either may change the world as
    far as the guard knows (``effect=write``), so the guard never re-runs one by itself.
    """
    description = extra.description or f"A tool of this environment: {extra.name}."

    def recorded(**arguments: Any) -> ToolResult:
        return ToolResult(extra.name, ok=extra.ok, content=extra.result or "")

    def scripted(**arguments: Any) -> CommandOutput:
        body = extra.script or ""
        if extra.exit_code is not None:
            body = f"{body.rstrip()}\nexit {extra.exit_code}"
        env = {**workspace.env, TOOL_ARGS_VARIABLE: json.dumps(arguments, sort_keys=True)}
        return dataclasses.replace(workspace, env=env).run(body, timeout_s=timeout_s)

    declare = tool(name=extra.name, description=description, parameters=_ANY_ARGUMENTS, effect=Effect.WRITE)
    return declare(scripted if extra.script is not None else recorded)


def scenario_tools(scenario: Scenario, workspace: Workspace) -> Toolset:
    """The tool set ``scenario`` states (:class:`unstuck.evals.scenarios.ToolChoice`): the
    standard tools it keeps (:func:`unstuck.toolkit.workspace.standard_tools`, in their order), with
    ``run_command`` on a pseudo-terminal of its own when ``pty_shell`` (``Workspace(terminal=True)``),
    then its extra tools (:func:`extra_tool`). A scenario without ``tools:`` gets the
    standard tools unchanged.

    Raises:
        ValueError: when ``workspace`` gives commands this process's terminal (``stdin_tty``)
            and the scenario asks for a pseudo-terminal shell.
    """
    choice = scenario.tools
    if choice.pty_shell:
        workspace = dataclasses.replace(workspace, terminal=True)
    standard = standard_tools(workspace)
    kept = [standard[name] for name in choice.standard_names]
    return Toolset([*kept, *(extra_tool(extra, workspace) for extra in choice.extra)])
