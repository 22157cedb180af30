"""A tool call and its result as records: the call, and the one result type every tool return is
normalised into.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Whatever a tool's callable returns (a string, a dict, ``None``, a list, bytes, an exception it
raised, a :class:`CommandOutput`, an :class:`HttpResponse`, or a ready :class:`ToolResult`)
becomes one :class:`ToolResult` through :func:`normalize_result`. A dict may carry a declared
situation next to its status: ``{"status": "error", "situation": {...}}``. What a tool *is*
(its spec, the ``@tool`` decorator) lives in :mod:`unstuck.toolkit.specs`; classification
reads a tool through :class:`ToolDescription`, which every spec satisfies.
"""


from __future__ import annotations

import dataclasses
import enum
import json
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unstuck.core.records import cheap
from unstuck.core.situations import Situation, validate_situation

__all__ = [
    "TRUNCATION_MARKER",
    "CommandOutput",
    "Effect",
    "HttpResponse",
    "ToolCall",
    "ToolDescription",
    "ToolResult",
    "normalize_result",
    "truncate_content",
    "unique_call_ids",
]

#: The marker a tool puts where it cut a large output; the classifier reads it as ``truncated``.
TRUNCATION_MARKER = "[unstuck: output truncated"


def truncate_content(text: str, limit_bytes: int = 64_000) -> str:
    """Cut ``text`` to at most about ``limit_bytes`` UTF-8 bytes, marking the cut.

    The head and tail are kept; the marker names how many bytes were dropped, e.g.
    ``[unstuck: output truncated, 12345 bytes omitted]``.
    """
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= limit_bytes:
        return text
    keep = max(limit_bytes // 2, 1)
    head = raw[:keep].decode("utf-8", errors="ignore")
    tail = raw[-keep:].decode("utf-8", errors="ignore")
    dropped = len(raw) - 2 * keep
    return f"{head}\n{TRUNCATION_MARKER}, {dropped} bytes omitted]\n{tail}"


class Effect(enum.StrEnum):
    """Whether a tool call changes the world."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class CommandOutput:
    """What a finished subprocess left: the command, its exit code and its two streams
    (decoded text); and, when its deadline passed, the program that was waiting for input
    then (``"less"``: a pager or a prompt waiting for a person; :mod:`unstuck.processes.leases`).

    Raises:
        TypeError: when ``exit_code`` is not an int or a stream is not a string.
    """

    command: str
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    waiting_for_input: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.exit_code, bool) or not isinstance(self.exit_code, int):
            raise TypeError(f"CommandOutput.exit_code must be an int, got {self.exit_code!r}")
        if not isinstance(self.stdout, str) or not isinstance(self.stderr, str):
            raise TypeError("CommandOutput.stdout and .stderr must be decoded strings")


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """An HTTP response: status code, the decoded body, and headers.

    ``headers`` may be given as a mapping or as (name, value) pairs; it is stored as pairs.

    Raises:
        TypeError: when ``status`` is not an int.
    """

    status: int
    body: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise TypeError(f"HttpResponse.status must be an int, got {self.status!r}")
        raw: Any = self.headers
        pairs = raw.items() if isinstance(raw, Mapping) else raw
        object.__setattr__(self, "headers", tuple((str(k), str(v)) for k, v in pairs))

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


@cheap
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One request to a tool: an id (from the model, or made by the loop), a name, arguments.

    ``arguments_json`` holds the arguments as canonical JSON (sorted keys), so two identical
    calls compare equal. Build one with :meth:`of`.
    """

    id: str
    tool: str
    arguments_json: str = "{}"

    @classmethod
    def of(cls, call_id: str, tool_name: str, arguments: Mapping[str, Any] | None = None) -> ToolCall:
        """Build a call; ``arguments`` must be JSON-serialisable."""
        return cls(call_id, tool_name, json.dumps(dict(arguments or {}), sort_keys=True))

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments as a fresh dict (parsed once per arguments text: a call is read
        before it runs and again after; arguments of plain values are copied from the
        parse, any other is parsed again, so no caller shares a nested value)."""
        text = self.arguments_json
        parsed = _PARSED.get(text)
        if parsed is not None:
            return dict(parsed)
        loaded: dict[str, Any] = json.loads(text)
        if len(text) <= _PARSED_CHARS and type(loaded) is dict and all(type(v) in _PLAIN for v in loaded.values()):
            if len(_PARSED) >= _PARSED_KEPT:
                _PARSED.clear()  # a bounded memory of the calls in flight, not a history
            _PARSED[text] = loaded
            return dict(loaded)
        return loaded


#: The types of argument values that :attr:`ToolCall.arguments` may copy from one parse.
_PLAIN = frozenset({str, int, float, bool, type(None)})
#: Arguments texts parsed already (plain values only), at most :data:`_PARSED_KEPT`.
_PARSED: dict[str, dict[str, Any]] = {}
_PARSED_KEPT = 512
#: Longer arguments texts are parsed each time (a large payload is not kept twice).
_PARSED_CHARS = 4096


@cheap
@dataclass(frozen=True, slots=True)
class ToolResult:
    """One normalised tool result.

    Attributes:
        tool: the tool's name.
        ok: the call did what was asked.
        content: the text the model sees.
        executed: ``False`` when the call never ran (refused by a permission tier or policy).
        exit_code: a subprocess's exit status, when there was one.
        http_status: an HTTP status code, when there was one.
        headers: HTTP response headers as (name, value) pairs.
        error_type: the exception class name, when the tool raised.
        declared: the situation the tool itself returned, already validated.
        injected: the id of the failure-bank form that replaced the tool's real return
            (fault injection, :mod:`unstuck.faults`), else ``None``. Only observers read it:
            the classifier and the policy see an injected failure as they would a real one.
        status_stated: the tool itself said whether the call succeeded (a ``status`` field,
            an MCP ``isError`` flag), so ``ok`` is its word, not a guess from the content.
        waiting_for_input: the program that was waiting for input (a pager, a prompt) when
            the call's deadline passed (:attr:`CommandOutput.waiting_for_input`), else ``None``.
        sent: ``False`` when the request never left for the tool (a transport that failed
            before sending it, e.g. an MCP connection already closed): the call had no
            effect, so the guard may retry it whatever the tool's effect. Its failure is
            classified as any other.
    """

    tool: str
    ok: bool
    content: str
    executed: bool = True
    exit_code: int | None = None
    http_status: int | None = None
    headers: tuple[tuple[str, str], ...] = ()
    error_type: str | None = None
    declared: Situation | None = None
    injected: str | None = None
    status_stated: bool = False
    waiting_for_input: str | None = None
    sent: bool = True

    def header(self, name: str) -> str | None:
        """The first response header called ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


_OK_STATUSES = frozenset({"ok", "success", "succeeded", "done"})


def _from_command(tool_name: str, out: CommandOutput) -> ToolResult:
    parts = [p for p in (out.stdout.rstrip("\n"), out.stderr.rstrip("\n")) if p]
    if out.exit_code != 0:
        parts.append(f"(exit code {out.exit_code})")
    return ToolResult(tool_name, out.exit_code == 0, "\n".join(parts), exit_code=out.exit_code,
                      waiting_for_input=out.waiting_for_input)


def _from_http(tool_name: str, resp: HttpResponse) -> ToolResult:
    return ToolResult(
        tool_name,
        200 <= resp.status < 400,
        f"HTTP {resp.status}\n{resp.body}",
        http_status=resp.status,
        headers=resp.headers,
    )


def _from_exception(tool_name: str, exc: BaseException) -> ToolResult:
    try:
        message = str(exc)
    except Exception:  # an exception whose __str__ itself raises still becomes a result
        message = f"<{type(exc).__name__} with an unprintable message>"
    errno = getattr(exc, "errno", None)
    if isinstance(exc, OSError) and errno is not None and f"Errno {errno}" not in message:
        message = f"[Errno {errno}] {message}"
    return ToolResult(tool_name, False, f"{type(exc).__name__}: {message}", error_type=type(exc).__name__)


def _mcp_text(content: object) -> str | None:
    """The text items of an MCP ``CallToolResult.content`` list, joined; ``None`` when it is
    not such a list."""
    if not isinstance(content, list):
        return None
    texts = [str(item.get("text", "")) for item in content if isinstance(item, Mapping) and item.get("type") == "text"]
    return "\n".join(texts)


def _from_mcp(tool_name: str, raw: Mapping[Any, Any]) -> ToolResult | None:
    """An MCP tool result (``{"content": [...], "isError": bool}``, MCP specification
    2025-06-18, "Tools: error handling"): ``isError: true`` is a failed call whose text the
    model sees. ``None`` when ``raw`` is not shaped like one."""
    is_error = raw.get("isError")
    text = _mcp_text(raw.get("content"))
    if not isinstance(is_error, bool) or text is None:
        return None
    return ToolResult(tool_name, not is_error, text, status_stated=True)


def _json_default(value: object) -> object:
    """How a tool's mapping shows what JSON cannot hold: a situation as its fields, the rest
    as text."""
    return value.to_dict() if isinstance(value, Situation) else str(value)


#: ``json.dumps(raw, default=_json_default, ensure_ascii=False)``, with the encoder made once.
_MAPPING_ENCODER = json.JSONEncoder(default=_json_default, ensure_ascii=False)


def _mapping_text(raw: Mapping[Any, Any]) -> str:
    """``json.dumps(raw, default=_json_default, ensure_ascii=False)``: what
    :meth:`json.JSONEncoder.encode` does for a mapping, calling the C encoder it would
    build directly (``json.encoder.c_make_encoder``; the encoder itself where the C
    accelerator is missing). Raises what ``json.dumps`` raises."""
    make = getattr(json.encoder, "c_make_encoder", None)  # not in typeshed: the accelerator's own name
    if make is None:
        return _MAPPING_ENCODER.encode(raw)
    return "".join(make({}, _json_default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)(
        raw, 0))


def _from_mapping(tool_name: str, raw: Mapping[Any, Any], document: bool = False) -> ToolResult:
    if "situation" not in raw and (mcp := _from_mcp(tool_name, raw)) is not None:
        return mcp
    situation = validate_situation(tool_name, _declaration(raw, document))
    status = raw.get("status")
    executed = raw.get("executed", True) is not False
    exit_code = raw.get("exit_code")
    http_status = raw.get("http_status")
    if isinstance(status, str):
        ok = status.lower() in _OK_STATUSES
    elif isinstance(exit_code, int) and not isinstance(exit_code, bool):
        ok = exit_code == 0
    elif isinstance(http_status, int) and not isinstance(http_status, bool):
        ok = 200 <= http_status < 400
    else:
        ok = situation is None and executed and "error" not in raw
    try:
        content = _mapping_text(raw)
    except (TypeError, ValueError):
        content = repr(dict(raw))
    return ToolResult(
        tool_name,
        ok and executed,
        content,
        executed=executed,
        exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        http_status=(
            http_status if isinstance(http_status, int) and not isinstance(http_status, bool) else None
        ),
        declared=situation,
        status_stated=isinstance(status, str),
    )


def unique_call_ids(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """One reply's calls with ids unique within it (a repeated id gets ``#2``, ``#3`` ...):
    each call's result, effect intent and receipt must be told apart."""
    seen: dict[str, int] = {}
    unique: list[ToolCall] = []
    for call in calls:
        seen[call.id] = seen.get(call.id, 0) + 1
        n = seen[call.id]
        unique.append(call if n == 1 else ToolCall(f"{call.id}#{n}", call.tool, call.arguments_json))
    return tuple(unique)


def _declaration(raw: Mapping[Any, Any], document: bool) -> object:
    """A mapping's ``situation`` as a declaration: ``None`` from a document tool unless the
    tool's code built a :class:`Situation` (a data payload is content, never a declaration)."""
    declared = raw.get("situation")
    return None if document and not isinstance(declared, Situation) else declared


def normalize_result(tool_name: str, raw: object, *, document: bool = False) -> ToolResult:
    """Turn whatever a tool returned (or raised) into a :class:`ToolResult`.

    Rules: ``None`` and strings are successes; bytes are decoded as UTF-8 with replacement;
    lists and tuples are JSON content; a :class:`CommandOutput` succeeds on exit code 0; an
    :class:`HttpResponse` succeeds on 2xx/3xx; an exception is a failure whose content is
    ``"{ExceptionType}: {message}"``; a mapping succeeds when its ``status`` is ``ok`` /
    ``success`` (else by ``exit_code``, ``http_status``, or the absence of ``error`` and of a
    situation), and ``executed: false`` marks a call that never ran; an MCP tool result
    (``content`` items and a boolean ``isError``) fails when ``isError`` is true and shows
    its text items.

    Only a tool's own code declares (DESIGN.md: a data payload is content, never a
    declaration). With ``document=True`` (the tool's :attr:`ToolSpec.document_output`: it
    returns documents from the world, such as a fetched JSON object), a mapping's
    ``situation`` key is content like any other key unless its value is a :class:`Situation`
    the tool's code built; a :class:`ToolResult`'s ``declared`` is kept. Without it a tool's
    own dict cannot be told from a document it passes on, so a tool that returns fetched JSON
    as a dict must be declared ``document_output=True``.

    Anything else it cannot turn into text (a structure nested past the recursion limit, a
    list that contains itself, an object whose ``__str__`` raises) becomes a failed result
    (a ``str`` subclass is read as the plain text it holds, whatever its methods do)
    saying so, with ``error_type`` the name of the exception met; this never raises for it.

    Raises:
        ValueError: naming the tool, when a mapping carries a malformed ``situation``
            (see :func:`unstuck.core.situations.validate_situation`).
    """
    if isinstance(raw, str) and type(raw) is not str:  # a str subclass's own methods may raise: read its text only
        raw = str.__str__(raw)
    try:  # a malformed declaration raises ValueError (documented); nothing else may escape
        if isinstance(raw, ToolResult):
            validate_situation(tool_name, raw.declared)
        elif type(raw) is dict or isinstance(raw, Mapping):
            validate_situation(tool_name, _declaration(raw, document))
    except ValueError:
        raise
    except Exception:  # an unreadable return becomes a failed result just below
        pass
    try:
        return _normalize(tool_name, raw, document)
    except Exception as exc:  # any return the loop cannot read becomes a failed result
        return _unreadable(tool_name, raw, exc)


def _unreadable(tool_name: str, raw: object, exc: Exception) -> ToolResult:
    reason = ("is nested too deeply to show" if isinstance(exc, RecursionError)
              else "contains itself" if isinstance(exc, ValueError) and "ircular" in str(exc)
              else f"could not be turned into text ({type(exc).__name__})")
    return ToolResult(tool_name, False, f"unstuck could not read what {tool_name} returned: a "
                      f"{type(raw).__name__} that {reason}", error_type=type(exc).__name__)


def _normalize(tool_name: str, raw: object, document: bool = False) -> ToolResult:
    if type(raw) is dict:  # a plain dict is none of the types matched before a Mapping below
        return _from_mapping(tool_name, raw, document)
    match raw:
        case ToolResult():
            declared = validate_situation(tool_name, raw.declared)
            return raw if declared is raw.declared else _replace_declared(raw, declared)
        case None:
            return ToolResult(tool_name, True, "")
        case str():
            return ToolResult(tool_name, True, raw)
        case bytes() | bytearray():
            return ToolResult(tool_name, True, bytes(raw).decode("utf-8", errors="replace"))
        case CommandOutput():
            return _from_command(tool_name, raw)
        case HttpResponse():
            return _from_http(tool_name, raw)
        case BaseException():
            return _from_exception(tool_name, raw)
        case Mapping():
            return _from_mapping(tool_name, raw, document)
        case list() | tuple():
            return ToolResult(tool_name, True, json.dumps(list(raw), default=str, ensure_ascii=False))
        case _:
            return ToolResult(tool_name, True, str(raw))


def _replace_declared(result: ToolResult, declared: Situation | None) -> ToolResult:
    return dataclasses.replace(result, declared=declared)




@typing.runtime_checkable
class ToolDescription(typing.Protocol):
    """What classification reads of a tool (:class:`unstuck.toolkit.specs.ToolSpec` has it
    all): its name, whether its output is a document from the world, the command line a call
    runs, and the subject a call affects."""

    @property
    def name(self) -> str: ...

    @property
    def document_output(self) -> bool: ...

    def command_line(self, arguments: Mapping[str, Any]) -> str | None: ...

    def subject_of(self, arguments: Mapping[str, Any]) -> str: ...
