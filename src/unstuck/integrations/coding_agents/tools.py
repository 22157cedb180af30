"""The coding agents' tools as the guard knows them: one :class:`~unstuck.toolkit.specs.ToolSpec`
per kind of tool, whatever each agent calls it (issue 26, deliver 4).
Internal: not a supported import path (docs/reference/index.md lists those that are).

* **shell tools** (Claude Code ``Bash``, Codex ``shell``, Gemini CLI ``run_shell_command``):
  :func:`shell_spec`: the command line is read with the shell parser
  (:func:`unstuck.commands.parse.command_subject`: the program it runs is the subject), checked
  against the interactive-call catalogue before it runs (``command_argument``), and a
  sign-in, missing-program or permission blocker on a known CLI is checked with
  ``check_cli_setup`` (:data:`SETUP_PROBE_TOOL`, run by the guard server on this machine);
* **file tools**: :func:`file_spec`: the path is the subject; a read returns a document;
* **web fetch and web search**: :func:`fetch_spec`: the URL's host (or ``web``) is the subject;
  a page is a document;
* **MCP tools**: :func:`mcp_spec`: the server is the subject (``mcp:github``); a write by MCP's
  defaults (a tool without annotations may be destructive);
* anything else: :func:`other_spec`, a read named as the agent names it.

The agents run their tools; the guard only assesses their calls, so every spec's function is
:func:`unstuck.toolkit.specs.run_elsewhere`.

:class:`AgentToolset` is the tool set of one hook session: the agent's tools by name, each
spec made the first time its name is seen (an MCP tool's name is known only when it is
called), plus the tools the guard runs itself (the setup probe).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from unstuck.commands.parse import command_subject
from unstuck.core.situations import Probe
from unstuck.core.tools import Effect
from unstuck.toolkit.specs import Toolset, ToolSpec, run_elsewhere
from unstuck.toolkit.workspace import KNOWN_CLIS

__all__ = [
    "SETUP_PROBE_TOOL",
    "AgentToolset",
    "fetch_spec",
    "file_spec",
    "mcp_spec",
    "other_spec",
    "setup_probe",
    "shell_spec",
]

#: The read-only tool the guard server runs itself to check a CLI's setup (installed, signed
#: in, scopes): :func:`unstuck.toolkit.workspace.standard_tools`' ``check_cli_setup``, bound to
#: the session's working folder and environment.
SETUP_PROBE_TOOL = "check_cli_setup"


def setup_probe(program: str) -> Probe | None:
    """The setup probe of ``program`` when it is a CLI unstuck knows how to check
    (:data:`unstuck.toolkit.workspace.KNOWN_CLIS`), else ``None``."""
    return Probe.of(SETUP_PROBE_TOOL, {"name": program}) if program in KNOWN_CLIS else None


def shell_spec(name: str, argument: str = "command", *, description: str = "") -> ToolSpec:
    """A shell tool whose ``argument`` holds a command line: a write (a command line may change
    anything), its subject the program the line runs, checked against the interactive-call
    catalogue before dispatch, with the setup probe of known CLIs. The agents give their shell
    commands no terminal (their stdin is not a TTY), so ``terminal`` is ``False``."""

    def subject(arguments: Mapping[str, Any]) -> str | None:
        value = arguments.get(argument)
        line = " ".join(str(v) for v in value) if isinstance(value, list) else str(value or "")
        return command_subject(line)

    return ToolSpec(name, run_elsewhere, description=description or f"{name}: runs a shell command line",
                    parameters={"type": "object", "properties": {argument: {"type": "string"}}},
                    effect=Effect.WRITE, subject=subject, command_argument=argument, setup_probe=setup_probe)


def file_spec(name: str, argument: str, *, write: bool, description: str = "") -> ToolSpec:
    """A file tool whose ``argument`` holds the path: the subject; a read returns a document
    (its success is data, never read for failure wording)."""
    return ToolSpec(name, run_elsewhere, description=description or f"{name}: a file tool",
                    parameters={"type": "object", "properties": {argument: {"type": "string"}}},
                    effect=Effect.WRITE if write else Effect.READ,
                    subject=lambda a: str(a.get(argument) or "") or None, document_output=not write)


def fetch_spec(name: str, argument: str = "url", *, search: bool = False, description: str = "") -> ToolSpec:
    """A web tool: a fetch's subject is its URL's host, a search's ``web``; both return documents."""

    def subject(arguments: Mapping[str, Any]) -> str | None:
        if search:
            return "web"
        url = str(arguments.get(argument) or "")
        return urllib.parse.urlsplit(url).hostname or url or None

    return ToolSpec(name, run_elsewhere, description=description or f"{name}: a web tool",
                    parameters={"type": "object", "properties": {argument: {"type": "string"}}},
                    subject=subject, document_output=True)


def mcp_spec(name: str, server: str, *, description: str = "") -> ToolSpec:
    """An MCP tool of ``server``: the subject is ``mcp:SERVER`` (a blocker such as a sign-in is
    the server's, whichever of its tools met it); a write, as MCP's defaults make a tool
    without annotations (``destructiveHint`` true, ``readOnlyHint`` false: MCP specification
    2025-11-25, "Tool annotations")."""
    return ToolSpec(name, run_elsewhere, description=description or f"{name}: a tool of the MCP server {server}",
                    effect=Effect.WRITE, subject=f"mcp:{server}")


def other_spec(name: str, *, interactive: bool = False, write: bool = False) -> ToolSpec:
    """Any other tool of an agent: named as the agent names it, the subject its name;
    ``interactive`` when its whole job is a hand-off to a person (a question to the user)."""
    return ToolSpec(name, run_elsewhere, description=f"{name}: a tool of the agent", interactive=interactive,
                    effect=Effect.WRITE if write else Effect.READ)


class AgentToolset(Toolset):
    """One hook session's tool set: ``own`` (the tools the guard runs itself: the setup probe),
    and each agent tool's spec, made by ``spec_of`` the first time its name is looked up and
    kept (a name always gives the same spec, so the set is as immutable as a
    :class:`~unstuck.toolkit.specs.Toolset`: it only learns names). ``known`` names the agent's
    tools to list before any call (the lessons shown at session start are those their tools
    declared).

    Raises:
        ValueError: when two of ``own`` share a name.
    """

    def __init__(self, own: Iterable[ToolSpec], spec_of: Callable[[str], ToolSpec], known: Iterable[str] = ()) -> None:
        super().__init__(own)
        self._spec_of = spec_of
        for name in known:
            self[name]

    def __getitem__(self, name: str) -> ToolSpec:
        found = self._specs.get(name)
        if found is None:
            if not isinstance(name, str) or not name:
                raise KeyError(name)
            found = self._specs[name] = self._spec_of(name)
        return found

    def get(self, name: str, default: object = None, /) -> Any:
        """The spec of ``name`` (made on first look-up, as :meth:`__getitem__`), else ``default``
        for a name that is no tool's (empty or not a string): the guard asks this on every call."""
        return self[name] if isinstance(name, str) and name else default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._specs))
