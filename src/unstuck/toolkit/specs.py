"""Tool specs: what the policy knows about a tool itself (seed 000 section 3.2).

A tool is a plain Python callable wrapped by :func:`tool`. The wrapper records:

* ``interactive=True``: the tool's whole job is a hand-off to a person (a browser sign-in,
  a question to the user). Rule 1 refuses it when the run is unattended.
* ``effect="read" | "write"``: whether calling it changes the world.
* ``probe=``: an optional cheap read-only call that re-checks a blocker on this tool.
* ``subject=``: what a call affects (a fixed string, or a function of the arguments);
  by default the tool's name.

What a call returns becomes a :class:`unstuck.core.tools.ToolResult`
(:func:`unstuck.core.tools.normalize_result`).
"""


from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from unstuck.commands.interactive import InteractiveCall, interactive_call
from unstuck.commands.parse import command_subject
from unstuck.core.situations import Probe
from unstuck.core.tools import Effect, ToolResult, normalize_result
from unstuck.recognise.signals import load_signal_table

__all__ = [
    "SubjectRule",
    "ToolSpec",
    "Toolset",
    "run_elsewhere",
    "tool",
]

_T = TypeVar("_T")

_JSON_TYPES: Mapping[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if origin in (list, tuple, Iterable):
        (item, *_) = typing.get_args(annotation) or (str,)
        return {"type": "array", "items": _json_type(item)}
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_type(members[0]) if len(members) == 1 else {}
    return {}


def _parameters_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[name] = _json_type(hints.get(name, str))
        if param.default is param.empty:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


SubjectRule = str | Callable[[Mapping[str, Any]], str | None] | None


def run_elsewhere(**_: Any) -> Any:
    """The ``fn`` of a tool that its framework runs (an agent framework's tool described to
    the guard): the guard never runs it itself, so it is never used as a probe.

    Raises:
        RuntimeError: always.
    """
    raise RuntimeError("this tool is run by its framework; the guard only assesses its calls")


@dataclass(frozen=True)
class ToolSpec:
    """A callable tool and what the policy knows about it.

    Attributes:
        name: the name the model calls it by.
        fn: the callable; it receives the call's arguments as keywords.
        description: one paragraph for the model.
        parameters: a JSON Schema object for the arguments (derived from ``fn``'s signature
            when not given).
        interactive: the tool's whole job is a hand-off to a person.
        effect: ``read`` or ``write``.
        idempotent: calling it again with the same arguments has no effect beyond the first
            call's (MCP's ``idempotentHint``): the guard may retry such a write after a
            transient failure, as it retries a read. ``False`` by default: a write that timed
            out may have happened, so it is handed to the model, never sent again by unstuck.
        probe: the call that re-checks a blocker on this tool, if any.
        subject: what a call affects: a fixed string, or a function of the arguments returning
            one (``None`` from it falls back to the tool's name). Without one, a
            ``command_argument`` tool's subject is the program its command line runs.
        document_output: the tool returns a document from the world (a file's text, a fetched
            page): its success is data, never read for failure wording (only for truncation,
            emptiness and injected instructions), and a ``situation`` key in a mapping it
            returns is data, never a declaration (:func:`normalize_result`).
        command_argument: the argument holding a shell command line the tool runs
            (``run_command``'s ``command``): each call is checked against the interactive-call
            catalogue before dispatch (:func:`unstuck.commands.interactive.interactive_call`).
        terminal: the tool gives the commands it runs a terminal (its stdin is a TTY), so a
            command that prompts only with a terminal (ssh, sudo, a pager) waits.
        setup_probe: for a program this tool's calls reach, the read-only call that checks its
            setup (``check_cli_setup``), or ``None``; run when an inferred ``auth``,
            ``not_installed`` or ``permission`` blocker opens on the program.
        environ: the environment the tool's commands run with (``PATH``, ``HOME``), when it
            is not this process's: where a program reported missing is looked for outside
            ``PATH`` (:func:`unstuck.commands.installed.locate_off_path`).
    """

    name: str
    fn: Callable[..., Any]
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    interactive: bool = False
    effect: Effect = Effect.READ
    probe: Probe | None = None
    subject: SubjectRule = None
    document_output: bool = False
    command_argument: str | None = None
    terminal: bool = False
    setup_probe: Callable[[str], Probe | None] | None = None
    environ: Mapping[str, str] | None = None
    idempotent: bool = False

    @property
    def retry_safe(self) -> bool:
        """Whether the guard may send a call of this tool again by itself after a transient
        failure: a read, or an idempotent write, and not an interactive tool."""
        return not self.interactive and (self.effect is Effect.READ or self.idempotent)

    @property
    def runs_here(self) -> bool:
        """Whether the guard can run this tool itself (a probe), not only its framework
        (``fn`` is not :func:`run_elsewhere`)."""
        return self.fn is not run_elsewhere

    def subject_of(self, arguments: Mapping[str, Any]) -> str:
        """The subject a call with ``arguments`` affects: the ``subject`` rule's, else the
        program a ``command_argument`` tool's command line runs, else the tool's name."""
        rule = self.subject
        found = rule(arguments) if callable(rule) else rule
        if not found and rule is None and self.command_argument is not None:
            command = self.command_line(arguments)
            found = command_subject(command) if command else None
        return found or self.name

    def command_line(self, arguments: Mapping[str, Any]) -> str | None:
        """The shell command line a call runs (``command_argument``'s value), or ``None``."""
        if self.command_argument is None:
            return None
        value = arguments.get(self.command_argument)
        return value if isinstance(value, str) else None

    def interactive_call(self, arguments: Mapping[str, Any]) -> InteractiveCall | None:
        """The part of this call's command line that would wait for a person (a sign-in, a
        password prompt, an editor, a pager), judged with this tool's terminal; ``None`` when
        nothing would (or the tool runs no command lines). Read with a real shell parser
        (:func:`unstuck.commands.interactive.interactive_call`) against the signal table's catalogue (a
        user's own ``calls:`` rows first, :func:`unstuck.recognise.signals.load_signal_table`)."""
        command = self.command_line(arguments)
        if not command:
            return None
        return interactive_call(command, terminal=self.terminal, catalogue=load_signal_table().calls)

    def invoke(self, arguments: Mapping[str, Any]) -> ToolResult:
        """Call the tool and normalise what it returned or raised.

        Exceptions from the tool become failed results (never propagate), except a malformed
        declared situation, which raises ``ValueError`` naming the tool.
        """
        try:
            raw: object = self.fn(**arguments)
        except Exception as exc:  # a tool that raises is an ordinary failed result
            raw = exc
        return normalize_result(self.name, raw, document=self.document_output)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (the spec stays usable as a function)."""
        return self.fn(*args, **kwargs)


@typing.overload
def tool(fn: Callable[..., Any], /) -> ToolSpec: ...


@typing.overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    interactive: bool = False,
    effect: Effect | str = Effect.READ,
    probe: Probe | None = None,
    subject: SubjectRule = None,
    parameters: Mapping[str, Any] | None = None,
    document_output: bool = False,
    command_argument: str | None = None,
    terminal: bool = False,
    setup_probe: Callable[[str], Probe | None] | None = None,
    environ: Mapping[str, str] | None = None,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], ToolSpec]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    interactive: bool = False,
    effect: Effect | str = Effect.READ,
    probe: Probe | None = None,
    subject: SubjectRule = None,
    parameters: Mapping[str, Any] | None = None,
    document_output: bool = False,
    command_argument: str | None = None,
    terminal: bool = False,
    setup_probe: Callable[[str], Probe | None] | None = None,
    environ: Mapping[str, str] | None = None,
    idempotent: bool = False,
) -> ToolSpec | Callable[[Callable[..., Any]], ToolSpec]:
    """Declare a tool: ``@tool`` or ``@tool(interactive=True, effect="write", ...)``.

    The description defaults to the function's docstring; ``parameters`` to a JSON Schema
    built from the signature's type hints (str, int, float, bool, list[...]).

    Raises:
        ValueError: for an ``effect`` other than ``"read"`` or ``"write"``.
    """

    def wrap(func: Callable[..., Any]) -> ToolSpec:
        return ToolSpec(
            name=name or func.__name__,
            fn=func,
            description=description if description is not None else inspect.getdoc(func) or "",
            parameters=dict(parameters) if parameters is not None else _parameters_schema(func),
            interactive=interactive,
            effect=Effect(effect),
            probe=probe,
            subject=subject,
            document_output=document_output,
            command_argument=command_argument,
            terminal=terminal,
            setup_probe=setup_probe,
            environ=environ,
            idempotent=idempotent,
        )

    return wrap(fn) if fn is not None else wrap


class Toolset(Mapping[str, ToolSpec]):
    """An immutable, ordered set of tools by name.

    Raises:
        ValueError: when two tools share a name.
    """

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"two tools are named {spec.name!r}")
            self._specs[spec.name] = spec

    def __getitem__(self, name: str) -> ToolSpec:
        return self._specs[name]

    @typing.overload
    def get(self, name: str, /) -> ToolSpec | None: ...

    @typing.overload
    def get(self, name: str, default: ToolSpec | _T, /) -> ToolSpec | _T: ...

    def get(self, name: str, default: object = None, /) -> object:
        """The tool called ``name``, else ``default`` (a dict lookup: the guard asks on every call)."""
        return self._specs.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)
