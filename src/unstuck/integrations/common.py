"""What every framework adapter shares: a framework's tool described to the guard, the blocked
status raised to the host application, and the user's answer read back.

A framework runs its own tools; the guard only needs to know what each one is (its name, the
subject a call affects, whether it runs a shell command line, whether it writes). A tool the
guard does not know would read as a call to a tool that does not exist, which stops a turn,
so every adapter describes the framework's tools with :func:`spec_for` before the first call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from unstuck.core.errors import UnstuckError
from unstuck.core.tools import Effect
from unstuck.decide.escalation import Answer, Escalation
from unstuck.toolkit.specs import SubjectRule, ToolSpec, run_elsewhere

__all__ = ["COMMAND_ARGUMENT_NAMES", "Blocked", "command_argument_of", "read_answer", "spec_for"]

#: Parameter names that hold a shell command line in the tools frameworks ship and their
#: examples (LangChain's ``ShellTool`` ``commands``, the OpenAI Agents SDK's ``LocalShellTool``
#: ``command``, MCP shell servers' ``command``/``cmd``): a string parameter so named makes the
#: tool a ``command_argument`` tool, whose subject is the program the line runs and whose
#: calls are checked against the interactive-call catalogue before dispatch.
COMMAND_ARGUMENT_NAMES = ("command", "cmd", "commands", "command_line", "commandline", "shell_command", "script")


class Blocked(UnstuckError, RuntimeError):  # noqa: N818  a status, named as the frameworks name theirs (MaxTurnsExceeded)
    """A guarded run ended blocked: it stopped to ask the user (the escalation's three parts,
    and the exact unblock when a tool gave one), distinct from a run that finished.

    Attributes:
        escalation: the question (:class:`unstuck.decide.escalation.Escalation`); its ``text`` is
            what the user reads.
        state: the guard's saved state (:meth:`unstuck.Guard.to_json`), so the host can
            resume the run once the user answered.
    """

    def __init__(self, escalation: Escalation, state: str = "") -> None:
        super().__init__(escalation.text)
        self.escalation = escalation
        self.state = state


def command_argument_of(parameters: Mapping[str, Any]) -> str | None:
    """The parameter of a JSON Schema ``object`` that holds a shell command line: the first of
    :data:`COMMAND_ARGUMENT_NAMES` that the schema declares as a string (or an array of
    strings, LangChain's ``commands``); ``None`` when it has none."""
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(properties, Mapping):
        return None
    for name in COMMAND_ARGUMENT_NAMES:
        schema = properties.get(name)
        if not isinstance(schema, Mapping):
            continue
        kind = schema.get("type")
        items = schema.get("items")
        if kind == "string" or (kind == "array" and isinstance(items, Mapping) and items.get("type") == "string"):
            return name
    return None


def spec_for(
    name: str,
    *,
    description: str = "",
    parameters: Mapping[str, Any] | None = None,
    fn: Callable[..., Any] | None = None,
    effect: Effect | str = Effect.READ,
    subject: SubjectRule = None,
    command_argument: str | None = None,
    interactive: bool = False,
    document_output: bool = False,
    idempotent: bool = False,
) -> ToolSpec:
    """A :class:`~unstuck.toolkit.specs.ToolSpec` for a tool a framework runs.

    Args:
        name: the name the model calls it by.
        description: its description, as the framework gives it to the model.
        parameters: its JSON Schema (``object``); the command argument is inferred from it
            (:func:`command_argument_of`) unless ``command_argument`` is given.
        fn: the callable, when the guard may run it itself (a probe: "I've done it" re-runs
            the call that opened the blocker when it is a read); by default
            :func:`unstuck.toolkit.specs.run_elsewhere`: the framework runs the tool, and the user's
            answer is taken at their word unless another probe is declared.
        effect: ``write`` for a tool with side effects (journaled as an effect intent, never
            repeated after a crash); ``read`` by default.
        subject: what a call affects (a string, or a function of the arguments); by default
            the program a command-line tool runs, else the tool's name.
        command_argument: the argument holding a shell command line, when the schema's names
            do not say it.
        interactive: the tool's whole job is a hand-off to a person.
        document_output: the tool returns a document from the world (a file's text, a page).
        idempotent: a write whose repeat has no further effect: the guard may retry it
            after a transient failure (:attr:`unstuck.toolkit.specs.ToolSpec.idempotent`).

    Raises:
        ValueError: for an empty name or an unknown effect.
    """
    if not name:
        raise ValueError("spec_for: a tool needs a name")
    schema = dict(parameters or {"type": "object", "properties": {}})
    return ToolSpec(
        name, fn or run_elsewhere, description=description, parameters=schema, interactive=interactive,
        effect=Effect(effect), subject=subject,
        command_argument=command_argument if command_argument is not None else command_argument_of(schema),
        document_output=document_output, idempotent=idempotent,
    )


#: How people say each answer (lower case, first words): the button labels of the question
#: (:class:`unstuck.decide.escalation.Answer`) and their plain forms.
_SAID: Mapping[Answer, tuple[str, ...]] = {
    Answer.DONE: ("i've done it", "ive done it", "i have done it", "done", "i did it", "fixed", "resolved", "yes"),
    Answer.SKIP: ("skip it", "skip"),
    Answer.STOP: ("stop", "cancel", "abort", "no"),
}


def read_answer(value: object) -> Answer:
    """The user's answer to an escalation from what a framework resumes with: an
    :class:`~unstuck.decide.escalation.Answer`, its name or label (``"DONE"``, ``"I've done it"``),
    a plain word (``"done"``, ``"skip"``, ``"stop"``), or a mapping with an ``answer`` or
    ``action`` key holding one of those (MCP elicitation's form content).

    Raises:
        ValueError: naming the value, when it is none of these.
    """
    if isinstance(value, Answer):
        return value
    if isinstance(value, Mapping):
        for key in ("answer", "action"):
            if key in value:
                return read_answer(value[key])
        raise ValueError(f"not an answer to the question: {dict(value)!r} (expected an 'answer' key)")
    if isinstance(value, str):
        said = " ".join(value.strip().lower().replace("\u2019", "'").rstrip(".!").split())
        for answer in Answer:
            if said in (answer.name.lower(), answer.value.lower()):
                return answer
        for answer, forms in _SAID.items():
            if said in forms:
                return answer
    raise ValueError(f"not an answer to the question: {value!r} (expected one of: "
                     f"{', '.join(a.value for a in Answer)})")
