"""Reading one call: the situation its result declares or shows, and the credentials its
arguments touch.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A tool's own declaration wins (validated: a malformed one is the tool's bug, never guessed
around); else classification (:func:`unstuck.recognise.classify.explain_result`), a second opinion
for a failure no signal recognises, and for "not installed" a look on disk outside ``PATH``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import re2

from unstuck.commands.credentials import credential_changes, credential_changes_in_arguments
from unstuck.commands.installed import locate_off_path
from unstuck.core.situations import Kind, KindClass, Situation, validate_situation
from unstuck.core.tools import Effect, ToolCall, ToolResult, normalize_result
from unstuck.recognise.classify import explain_result
from unstuck.store.events import EventName
from unstuck.store.second_opinion import SecondOpinion
from unstuck.toolkit.specs import Toolset, ToolSpec

__all__ = ["NO_SUCH_TOOL", "UNKNOWN_TOOL", "ResultReader", "credential_changes_of", "reads_as_failure"]

#: What :meth:`Guard.call <unstuck.guard.guard.Guard.call>` reports for a call to a tool that is
#: not in the tool set (a result a framework reports for a tool the guard does not know, a
#: hand-off say, is assessed as given).
NO_SUCH_TOOL = object()
#: The ``error_type`` of the result of a call to a tool the tool set lacks.
UNKNOWN_TOOL = "UnknownTool"
#: A word of a task: a tool name's characters (OpenAI function names: letters, digits, ``_``, ``-``).
_TASK_WORD = re2.compile(r"[A-Za-z0-9_-]+")


def _absent_tool(name: str, task: str) -> Situation:
    """The situation of a call to a tool the tool set lacks.

    A tool the task itself names (``"post the comment with mcp_github_add_issue_comment"``) is
    one the user's setup should provide but does not: ``not_installed``, a blocker on that
    tool, so the workaround budget applies (incident i037 in ``shared/cases``: a GitHub MCP
    server failed to start, its tools were simply absent, and the agent improvised with a
    scraped credential). Only a compound name (with ``_``, ``-`` or ``.``, as tool
    identifiers are) counts, matched as a whole word in any case: "search the notes" names no
    tool. A tool nobody named is the model's own invention: ``invalid_args``,
    self-fixable (the unknown-tool limit of :class:`unstuck.decide.policy.PolicyConfig` stops a
    model that keeps inventing).
    """
    compound = any(mark in name for mark in "_-.")  # a tool's identifier, not a word of prose ("search")
    if compound and name.lower() in {word.lower() for word in _TASK_WORD.findall(task)}:
        return Situation(Kind.NOT_INSTALLED, name, detail=f"the task names the tool {name!r}, but this session has "
                         "no tool by that name (a tool server that failed to start leaves its tools out)",
                         unblock=f"Make the tool {name} available to this session; if an MCP server provides it, "
                                 "check that the server starts.")
    return Situation(Kind.INVALID_ARGS, name, detail=f"unknown tool {name!r}")


def reads_as_failure(situation: Situation | None) -> bool:
    """A result whose situation says the call failed, whatever its type said (a plain string
    "you are not logged in" is no success); an empty or truncated result, or one carrying
    instructions, did run."""
    return situation is not None and situation.kind_class not in (KindClass.DEGENERATE, KindClass.ADVERSARIAL)


def credential_changes_of(arguments: Mapping[str, Any], spec: ToolSpec | None) -> tuple[Any, ...]:
    """What a call changes in credentials: its command line read as a shell would; for
    other tools, credentials in its arguments, and the files its path arguments name
    read (or, for a writing tool, written) as ``cat``/``tee`` would (``read_file`` of
    ``~/.config/gh/hosts.yml`` prints a token as ``cat`` of it does)."""
    line = spec.command_line(arguments) if spec is not None else None
    if line is not None:
        return credential_changes(line)
    found = list(credential_changes_in_arguments(arguments))
    verb = "tee" if spec is not None and spec.effect is Effect.WRITE else "cat"
    for value in arguments.values():
        if isinstance(value, str) and 0 < len(value) < 4096 and value[:1] in "/~." and "\n" not in value:
            found.extend(credential_changes(f"{verb} {shlex.quote(value)}"))
    return tuple(found)


class ResultReader:
    """Reads the results of one turn's calls.

    Args:
        tools: the tool set.
        task: the turn's task (a tool it names and the set lacks is ``not_installed``).
        second_opinion: the user's model, asked about failures no signal recognises.
        emit: records an event.
    """

    def __init__(self, tools: Toolset, task: str, second_opinion: SecondOpinion | None,
                 emit: Callable[..., None]) -> None:
        self.tools, self.task, self.second_opinion, self.emit = tools, task, second_opinion, emit

    def result_of(self, call: ToolCall, spec: ToolSpec | None, raw: object) -> ToolResult:
        """``raw`` as a :class:`~unstuck.core.tools.ToolResult` (:func:`unstuck.core.tools.normalize_result`);
        :data:`NO_SUCH_TOOL` becomes the failure that lists the tool set."""
        if spec is None and raw is NO_SUCH_TOOL:
            known = ", ".join(self.tools) or "none"
            return ToolResult(call.tool, False, f"No tool named {call.tool!r}. Available tools: {known}.",
                              error_type=UNKNOWN_TOOL, declared=_absent_tool(call.tool, self.task))
        return normalize_result(call.tool, raw, document=spec is not None and spec.document_output)

    def situation_of(self, call: ToolCall, spec: ToolSpec | None, result: ToolResult,
                     arguments: Mapping[str, Any] | None = None) -> Situation | None:
        """The situation ``result`` declares or shows, if any (see the module doc).

        Raises:
            ValueError: naming the tool, when it declared a malformed situation.
        """
        if not result.executed and result.declared is not None and result.declared.is_refusal:
            return result.declared
        declared = validate_situation(call.tool, result.declared)
        if declared is not None:
            self.emit(EventName.SITUATION_DECLARED, tool=call.tool, kind=declared.kind.value, subject=declared.subject,
                      interactive=declared.interactive, retryable=declared.retryable, unblock=declared.unblock)
            return declared
        found = explain_result(spec or call.tool, call.arguments if arguments is None else arguments, result,
                               thorough=False)
        inferred = found.situation
        if inferred is not None and not found.recognised and self.second_opinion is not None:
            opinion = self.second_opinion.review(call.tool, result.content, inferred)
            self.emit(EventName.SITUATION_SECOND_OPINION, tool=call.tool, kind=(
                opinion.situation.kind.value if opinion.situation is not None else None),
                cached=opinion.cached, problem=opinion.problem)
            inferred = opinion.situation or inferred
        if inferred is not None and inferred.kind is Kind.NOT_INSTALLED and inferred.location is None:
            inferred = self._locate(inferred, spec)
        if inferred is not None:
            self.emit(EventName.SITUATION_INFERRED, tool=call.tool, kind=inferred.kind.value, subject=inferred.subject,
                      interactive=inferred.interactive, retryable=inferred.retryable)
        return inferred

    def _locate(self, situation: Situation, spec: ToolSpec | None) -> Situation:
        """"Not installed" first looks on disk outside ``PATH`` (:func:`unstuck.commands.installed.locate_off_path`)."""
        environment = spec.environ if spec is not None and spec.environ is not None else os.environ
        try:
            found = locate_off_path(situation.subject, environment.get("PATH", ""), environment.get("HOME"))
        except ValueError:  # not a program name ("foo bar", "-rf"): nothing to look for
            return situation
        if found is None:
            return situation
        self.emit(EventName.SITUATION_LOCATED, subject=situation.subject, location=found)
        return replace(situation, location=found)
