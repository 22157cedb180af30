"""The failure bank: observed failure forms, grouped into the eight families of seed 003.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Each form is one failure a real tool was seen to return: what it printed (or raised, or
answered over HTTP or MCP), the channel it arrived by, the tools it fits, its family and kind,
whether waiting can fix it, and where it was observed. The bundled bank
(``unstuck/data/failure_bank.jsonl``) is made by ``unstuck bank harvest``, which runs real
programs on the machine in failure states, plus forms from the public reports in
``shared/cases``. The injector (:mod:`unstuck.faults.injector`) draws replacements from it.

One JSON object per line::

    {"id": "gh-logged-out", "family": "auth_permission", "kind": "auth",
     "tools": ["gh"], "channel": "exit", "transient": false, "interactive": true,
     "exit_code": 4, "output": "To get started with GitHub CLI, please run:  gh auth login ...",
     "provenance": {"source": "harvest", "reference": "gh repo view cli/cli", "version": "gh version 2.23.0"}}

Slots: a harvested form's text may hold ``{program}`` (the program that failed), ``{path}``
(the file it failed on) or ``{command}`` (the command line). They were the scratch names the
harvest used; when a form stands in for a real call, they are filled from that call (its
program, its path argument or a path its command names, its command), so an injected
"command not found" names the program the agent ran, not a made-up one.

Fields by channel: ``exit`` needs ``exit_code`` (``output`` is what the program printed,
stderr after stdout); ``http`` needs ``http_status`` and may carry ``headers`` (name/value
pairs) with ``output`` as the body; ``exception`` needs ``exception_type`` with ``output`` as
the message; ``mcp`` has ``output`` as the text of an ``isError: true`` tool result.

Families map onto kinds as DESIGN.md states (unavailable server → unavailable, authentication
or permission → auth/permission, timeout → timeout, missing resource → not_found, invalid
arguments → invalid_args, execution exception → execution_error, rate limit → quota, network
error → network). Three kinds the seed's families do not name are filed under the nearest
family: not_installed under missing resource (a missing program), conflict under execution
exception (a lock or a clash the call ran into), and a spent quota under rate limit.

Errors::

    BankError (UnstuckError, ValueError)   a malformed line: names the file, the line and the field
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from unstuck.core.errors import UnstuckError
from unstuck.core.output import json_text, write_text
from unstuck.core.readers import parse_json, read_text
from unstuck.core.situations import Kind
from unstuck.core.tools import CommandOutput, HttpResponse, ToolResult, normalize_result

__all__ = [
    "FAMILY_KINDS",
    "BankError",
    "Channel",
    "FailureBank",
    "FailureForm",
    "Family",
    "Provenance",
    "bundled_bank_path",
    "family_of",
    "load_bank",
    "parse_form",
]


class BankError(UnstuckError, ValueError):
    """A failure-bank file that cannot be read: the message names the file, line and field."""


class Family(enum.StrEnum):
    """The eight actionable failure families of seed 003 ("Collected errors are grouped into
    eight actionable families")."""

    UNAVAILABLE_SERVER = "unavailable_server"
    AUTH_PERMISSION = "auth_permission"
    TIMEOUT = "timeout"
    MISSING_RESOURCE = "missing_resource"
    INVALID_ARGUMENTS = "invalid_arguments"
    EXECUTION_EXCEPTION = "execution_exception"
    RATE_LIMIT = "rate_limit"
    NETWORK = "network"


class Channel(enum.StrEnum):
    """How a failure reaches the agent."""

    EXIT = "exit"  # a subprocess: exit code, stdout and stderr
    HTTP = "http"  # an HTTP response: status, headers, body
    EXCEPTION = "exception"  # a raised exception: type and message
    MCP = "mcp"  # an MCP tool result with isError: true


#: The kinds each family holds (DESIGN.md, "The eight failure families ... map onto kinds",
#: with not_installed, conflict and a spent quota filed as the module docstring says).
FAMILY_KINDS: Mapping[Family, frozenset[Kind]] = {
    Family.UNAVAILABLE_SERVER: frozenset({Kind.UNAVAILABLE}),
    Family.AUTH_PERMISSION: frozenset({Kind.AUTH, Kind.PERMISSION}),
    Family.TIMEOUT: frozenset({Kind.TIMEOUT}),
    Family.MISSING_RESOURCE: frozenset({Kind.NOT_FOUND, Kind.NOT_INSTALLED}),
    Family.INVALID_ARGUMENTS: frozenset({Kind.INVALID_ARGS}),
    Family.EXECUTION_EXCEPTION: frozenset({Kind.EXECUTION_ERROR, Kind.CONFLICT}),
    Family.RATE_LIMIT: frozenset({Kind.QUOTA}),
    Family.NETWORK: frozenset({Kind.NETWORK}),
}

_FAMILY_OF_KIND: Mapping[Kind, Family] = {kind: family for family, kinds in FAMILY_KINDS.items() for kind in kinds}


def family_of(kind: Kind) -> Family | None:
    """The family a failure of ``kind`` belongs to; ``None`` for kinds that are not failures
    of a call (empty, truncated, injected_instruction)."""
    return _FAMILY_OF_KIND.get(kind)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a form was observed.

    Attributes:
        source: ``harvest`` (run on a machine by ``unstuck bank harvest``) or ``report`` (a
            public report, as collected in ``shared/cases``).
        reference: the command run, or the case id and the report it came from.
        version: the program's ``--version`` line when harvested, else ``None``.
    """

    source: str
    reference: str
    version: str | None = None


@dataclass(frozen=True, slots=True)
class FailureForm:
    """One observed failure. See the module docstring for the fields by channel."""

    id: str
    family: Family
    kind: Kind
    tools: tuple[str, ...]
    channel: Channel
    transient: bool
    output: str
    provenance: Provenance
    interactive: bool = False
    exit_code: int | None = None
    http_status: int | None = None
    headers: tuple[tuple[str, str], ...] = ()
    exception_type: str | None = None

    def fits(self, tools: Iterable[str], channel: Channel) -> bool:
        """Whether this form can stand in for a return of ``channel`` from a tool tagged
        with any of ``tools``."""
        return self.channel is channel and not set(self.tools).isdisjoint(tools)

    def render(self, *, program: str, path: str, command: str) -> str:
        """The output with its slots filled (see the module doc)."""
        return self.output.replace("{program}", program).replace("{path}", path).replace("{command}", command)

    def to_result(self, tool_name: str, command: str = "", path: str = "", *, program: str = "") -> ToolResult:
        """The form as the tool's normalised result, marked ``injected`` with the form's id.

        The content is exactly what the real return would normalise to: an exit form goes
        through :class:`CommandOutput`, an HTTP form through :class:`HttpResponse`, an MCP
        form through an ``isError`` result, an exception form as ``"{type}: {message}"``.
        Slots are filled from ``program`` (the program the command runs, as
        :func:`unstuck.toolkit.workspace.command_subject` reads it; the tool's name by default),
        ``path`` (else ``data.txt``) and ``command``.
        """
        text = self.render(program=program or tool_name, path=path or "data.txt", command=command or tool_name)
        raw: object
        match self.channel:
            case Channel.EXIT:
                code = self.exit_code if self.exit_code is not None else 1  # some failures exit 0
                raw = CommandOutput(command or tool_name, code, "", text)
            case Channel.HTTP:
                raw = HttpResponse(self.http_status or 500, text, self.headers)
            case Channel.MCP:
                raw = {"content": [{"type": "text", "text": text}], "isError": True}
            case Channel.EXCEPTION:
                name = self.exception_type or "Exception"
                return ToolResult(tool_name, False, f"{name}: {text}", error_type=name, injected=self.id)
        result = normalize_result(tool_name, raw)
        return ToolResult(
            result.tool, False, result.content, True, result.exit_code, result.http_status,
            result.headers, result.error_type, None, self.id,
        )

    def to_json(self) -> dict[str, Any]:
        """The form as one JSON object of the bank file (fields a channel does not use omitted)."""
        data: dict[str, Any] = {
            "id": self.id, "family": self.family.value, "kind": self.kind.value, "tools": list(self.tools),
            "channel": self.channel.value, "transient": self.transient, "interactive": self.interactive,
        }
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        if self.http_status is not None:
            data["http_status"] = self.http_status
        if self.headers:
            data["headers"] = [list(pair) for pair in self.headers]
        if self.exception_type is not None:
            data["exception_type"] = self.exception_type
        data["output"] = self.output
        data["provenance"] = {
            key: value for key, value in (
                ("source", self.provenance.source), ("reference", self.provenance.reference),
                ("version", self.provenance.version),
            ) if value is not None
        }
        return data


_SOURCES = ("harvest", "report")
_FIELDS = frozenset({
    "id", "family", "kind", "tools", "channel", "transient", "interactive", "exit_code", "http_status", "headers",
    "exception_type", "output", "provenance",
})


def _field(
    where: str, data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = True
) -> Any:
    value = data.get(name)
    if value is None and not required:
        return None
    if value is None:
        raise BankError(f"{where}: missing field {name!r}")
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        raise BankError(f"{where}: field {name!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _enum(where: str, data: Mapping[str, Any], name: str, cls: type[enum.StrEnum]) -> Any:
    value = _field(where, data, name, str)
    try:
        return cls(value)
    except ValueError:
        known = ", ".join(member.value for member in cls)
        raise BankError(f"{where}: field {name!r} is {value!r}; known: {known}") from None


def parse_form(where: str, data: object) -> FailureForm:
    """Build and check one form from its JSON object.

    Raises:
        BankError: naming ``where`` and the field, for a missing or mistyped field, an unknown
            family, kind, channel or source, a kind outside its family, or a channel's field
            missing (exit_code, http_status, exception_type).
    """
    if not isinstance(data, Mapping):
        raise BankError(f"{where}: expected a JSON object, got {type(data).__name__}")
    form_id = _field(where, data, "id", str)
    where = f"{where} ({form_id})"
    family = _enum(where, data, "family", Family)
    kind = _enum(where, data, "kind", Kind)
    if kind not in FAMILY_KINDS[family]:
        allowed = ", ".join(sorted(k.value for k in FAMILY_KINDS[family]))
        raise BankError(f"{where}: kind {kind.value!r} is not in family {family.value!r} (it holds {allowed})")
    tools = _field(where, data, "tools", list)
    if not tools or not all(isinstance(t, str) and t for t in tools):
        raise BankError(f"{where}: field 'tools' must be a non-empty list of names")
    channel = _enum(where, data, "channel", Channel)
    needed = {Channel.EXIT: "exit_code", Channel.HTTP: "http_status", Channel.EXCEPTION: "exception_type"}.get(channel)
    if needed is not None and data.get(needed) is None:
        raise BankError(f"{where}: channel {channel.value!r} needs field {needed!r}")
    unknown = sorted(set(map(str, data)) - _FIELDS)
    if unknown:
        raise BankError(f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(_FIELDS))}")
    status = data.get("http_status")
    if isinstance(status, int) and not isinstance(status, bool) and status < 400:
        raise BankError(f"{where}: http_status {status} is not an error status (400 and above)")
    headers = _field(where, data, "headers", list, required=False) or []
    if not all(isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h) for h in headers):
        raise BankError(f"{where}: field 'headers' must be a list of [name, value] pairs")
    provenance = _field(where, data, "provenance", Mapping)
    source = _field(f"{where} provenance", provenance, "source", str)
    if source not in _SOURCES:
        raise BankError(f"{where}: provenance source {source!r}; known: {', '.join(_SOURCES)}")
    return FailureForm(
        id=form_id, family=family, kind=kind, tools=tuple(tools), channel=channel,
        transient=_field(where, data, "transient", bool), output=_field(where, data, "output", str),
        provenance=Provenance(
            source, _field(f"{where} provenance", provenance, "reference", str),
            _field(f"{where} provenance", provenance, "version", str, required=False),
        ),
        interactive=bool(_field(where, data, "interactive", bool, required=False)),
        exit_code=_field(where, data, "exit_code", int, required=False),
        http_status=_field(where, data, "http_status", int, required=False),
        headers=tuple((h[0], h[1]) for h in headers),
        exception_type=_field(where, data, "exception_type", str, required=False),
    )


class FailureBank(Sequence[FailureForm]):
    """An ordered, read-only collection of forms with unique ids."""

    def __init__(self, forms: Iterable[FailureForm]) -> None:
        self._forms = tuple(forms)
        seen: set[str] = set()
        for form in self._forms:
            if form.id in seen:
                raise BankError(f"duplicate failure form id {form.id!r}")
            seen.add(form.id)

    def __getitem__(self, index: int) -> FailureForm:  # type: ignore[override]
        return self._forms[index]

    def __len__(self) -> int:
        return len(self._forms)

    def __iter__(self) -> Iterator[FailureForm]:
        return iter(self._forms)

    def get(self, form_id: str) -> FailureForm | None:
        """The form with ``form_id``, or ``None``."""
        return next((form for form in self._forms if form.id == form_id), None)

    def compatible(self, tools: Iterable[str], channel: Channel) -> tuple[FailureForm, ...]:
        """Forms that fit a return of ``channel`` from a tool tagged with any of ``tools``."""
        tags = frozenset(tools)
        return tuple(form for form in self._forms if form.fits(tags, channel))

    def families(self) -> dict[Family, int]:
        """How many forms each family holds (families with none are left out)."""
        counts: dict[Family, int] = {}
        for form in self._forms:
            counts[form.family] = counts.get(form.family, 0) + 1
        return counts

    def write(self, path: Path) -> None:
        """Write the bank as JSON lines (UTF-8), replacing ``path`` atomically; each form's
        text redacted as every file unstuck writes (:func:`unstuck.core.output.json_text`)."""
        write_text(path, "".join(json_text(form.to_json(), ensure_ascii=False) + "\n" for form in self._forms))


def bundled_bank_path() -> Path:
    """The path of the failure bank shipped with the package."""
    return Path(str(resources.files("unstuck") / "data" / "failure_bank.jsonl"))


def load_bank(path: Path | str | None = None) -> FailureBank:
    """Read a failure bank from JSON lines (the bundled one by default).

    Raises:
        BankError: naming the file (and line), for a file that cannot be read or is not
            UTF-8, a line that is not JSON, nested too deeply (:mod:`unstuck.core.readers`) or
            not a valid form, or a duplicate id.
    """
    source = Path(path) if path is not None else bundled_bank_path()
    forms: list[FailureForm] = []
    seen: dict[str, int] = {}
    lines = read_text(source, what="the failure bank", error=BankError).splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        data = parse_json(line, where=where, error=BankError)
        form = parse_form(where, data)
        if form.id in seen:
            raise BankError(f"{where}: duplicate failure form id {form.id!r} (first on line {seen[form.id]})")
        seen[form.id] = number
        forms.append(form)
    return FailureBank(forms)
