"""Find the error envelopes in a tool's output text: the structures tools print, and their codes.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Tools print structures, and the codes and failure flags in them are the best evidence of what
went wrong. :func:`find_envelopes` finds them anywhere in a text and reports each one
faithfully: what kind of structure it is (:class:`Shape`), how it sat in the text
(:class:`Framing`), whether the structure itself says failure, the fields that carry codes
(:class:`CodeField`), the human messages, and an HTTP status the body states. It does not map
codes to kinds (that is :mod:`unstuck.recognise.codes`' job) and never raises on any text.

Shapes and the references they follow (each rule below names its source):

* JSON values anywhere in the text, after any prefix (``Error code: 401 - {...}``), on one line
  or pretty-printed (RFC 8259); JSON lines; a JSON body split over log lines that repeat a
  timestamp or log prefix (the prefix is stripped from each continuation line and the lines are
  joined with the newline, which a string may then hold); JSON escaped inside JSON string
  values (and a bare ``{\\"...`` body), up to :data:`MAX_ESCAPE_LEVELS` deep;
* Python ``repr`` of dicts (``{'error': None, 'ok': False}``), read with
  :func:`ast.literal_eval` on a bracket-balanced span of at most :data:`MAX_REPR_CHARS`;
* GraphQL responses (GraphQL spec, "Response" section: ``errors`` entries carry ``message``,
  ``locations``, ``path``, ``extensions``); JSON-RPC 2.0 error objects (jsonrpc.org
  specification, "Error object"); MCP ``CallToolResult`` with ``isError`` (MCP schema,
  ``CallToolResult``); a model API's tool-result block with ``is_error`` (Anthropic Messages
  API, "tool_result" content blocks: ``content`` a string or text blocks);
* Kubernetes ``Status`` (kubernetes.io API reference, ``meta/v1 Status``: ``status`` is
  ``Success`` or ``Failure``, ``reason`` machine-readable, ``code`` the suggested HTTP status,
  ``details.causes[]``);
* AWS errors: REST XML ``<Error><Code>`` (Amazon S3 API reference, "Error responses"; Azure
  Storage "Status and error codes" uses the same body), query XML ``<ErrorResponse><Error>``
  (AWS "Common Errors"), EC2 ``<Response><Errors><Error>`` (EC2 API reference, "Error codes");
  JSON ``__type`` and the ``x-amzn-ErrorType`` header, sanitised as the AWS SDKs do (AWS SDK
  for Go v2 ``restjson.SanitizeErrorCode``: keep what precedes ``:``, then what follows
  ``#``); Azure Storage's ``x-ms-error-code`` header; gRPC's ``grpc-status``/``grpc-message``
  (gRPC ``PROTOCOL-HTTP2.md``, message percent-encoded);
* generic REST bodies: ``{"error": {...}}``, ``{"error": "..."}``, Slack's ``{"ok": false,
  "error": "missing_scope"}`` (Slack Web API: "ok ... error property will contain a short
  machine-readable error code"), ``{"success": false}``, JSend ``{"status":
  "error"|"fail"}``, ``{"errors": [...]}`` (GitHub's validation errors and JSON:API), GitHub's
  ``{"message", "documentation_url"}`` (GitHub REST "Troubleshooting"), Google's
  ``error.status`` and ``google.rpc.ErrorInfo`` ``details[].reason`` (AIP-193), Azure's
  ``error.code``/``innererror`` (Microsoft REST API guidelines), OAuth 2.0 ``error`` and
  ``error_description`` (RFC 6749 §5.2; Entra ID adds ``error_codes``), Twilio's ``code``,
  ``message``, ``more_info``, ``status``, RFC 9457 problem details, FastAPI/Django REST
  framework ``{"detail": ...}``, Anthropic's and OpenAI's ``{"type": "error", "error":
  {"type", "message"}}`` / ``{"error": {"type", "code", "message"}}``;
* structured log records: logfmt lines (``level=error msg="..."``, the brandur/Heroku format
  that go-logfmt and logrus write) and JSON log lines with a level field (``level`` in zap,
  logrus, slog and pino, whose numbers follow bunyan's 10..60; ``severity`` in Google Cloud
  structured logging; ``levelname`` in python-json-logger; ``@l`` in Serilog's CLEF; ``@level``
  and ``@message`` in HashiCorp's hclog and Terraform's ``-json`` output (whose ``diagnostic``
  objects carry ``summary`` and ``detail``);
  ``log.level`` in the Elastic Common Schema; ``SeverityText`` in OpenTelemetry). The levels
  error, err, fatal, critical, crit, panic, dpanic, alert, emerg(ency) and severe (syslog RFC
  5424 names, zap, java.util.logging) are failures.

Bounded cost. All the work is capped by the constants below, whatever the text:

* at most :data:`MAX_SPAN` characters are read: the whole text, or its first three quarters
  and its last quarter of that many, each window with that share of every cap;
* every regular expression runs under ``google-re2`` (linear time), over the text's bytes when
  it is ASCII; one pass finds the candidates of each family (structures, logfmt lines, header
  lines), and at most :data:`MAX_CANDIDATES` candidate positions are visited;
* at most :data:`MAX_ATTEMPTS` parse attempts are made, with lower caps for the costlier kinds
  (:data:`MAX_REPR_ATTEMPTS`, :data:`MAX_SPLIT_ATTEMPTS`, ...), and at most
  :data:`MAX_SCAN_CHARS` characters are charged to them: a success what it consumed, a failure
  the distance to where it failed, a failure past the parser's nesting limit the rest of the
  text. Successes do not overlap (a candidate inside one is skipped), so ordinary text costs
  about its length; the rest of the charge is the cost of hostile text;
* a JSON value is parsed from a copy of 4,096 characters grown eightfold while the copy may
  cut it, so a failure costs its chunk, not the text before it (the standard decoder's error
  counts the lines up to the failure); its nesting is bounded by the interpreter's recursion
  limit (a ``RecursionError`` is a failed attempt) and walked to :data:`MAX_DEPTH`;
* a dict repr is bracket-balanced outside its string literals to :data:`MAX_REPR_DEPTH` within
  :data:`MAX_REPR_CHARS` before :func:`ast.literal_eval` sees it;
* once three quarters of a share are spent, the scan jumps towards the end of the text, far
  enough that the last quarter should reach it: a failure is most often printed last.

:func:`scan_envelopes` returns the counts, so tests and benchmarks check the caps, not times.
"""

from __future__ import annotations

import ast
import bisect
import enum
import functools
import itertools
import json
import urllib.parse
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from unstuck.core.text import valid_utf8

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_CANDIDATES",
    "MAX_DEPTH",
    "MAX_ENVELOPES",
    "MAX_ESCAPED_ATTEMPTS",
    "MAX_ESCAPE_LEVELS",
    "MAX_HEADER_ATTEMPTS",
    "MAX_LINE_ATTEMPTS",
    "MAX_REPR_ATTEMPTS",
    "MAX_REPR_CHARS",
    "MAX_REPR_DEPTH",
    "MAX_SCAN_CHARS",
    "MAX_SPAN",
    "MAX_SPLIT_ATTEMPTS",
    "MAX_WALK_NODES",
    "MAX_XML_ATTEMPTS",
    "CodeField",
    "Envelope",
    "EnvelopeScan",
    "Framing",
    "Shape",
    "find_envelopes",
    "sanitize_aws_error_type",
    "scan_envelopes",
]

#: Characters of the text read, and the most one parse attempt reads. A longer text is read as
#: its first ``3/4 * MAX_SPAN`` and its last ``1/4 * MAX_SPAN`` characters. The classifier hands
#: in at most 112,001 characters, so it is always read whole.
MAX_SPAN = 131_072
#: Parse attempts per call. Every JSON, repr, XML, unescape, split-log, logfmt-line and
#: header-line parse counts one; the kinds that cost most also have their own caps below, and the
#: last quarter of each pass's share is kept for the last quarter of the text, where a failure
#: is most often printed.
MAX_ATTEMPTS = 1_024
#: Characters charged to parse attempts per call; the scan stops when they are spent.
MAX_SCAN_CHARS = 4 * MAX_SPAN
#: Candidate positions visited per call (each costs a regex step even when it is skipped, e.g.
#: because its kind's cap is spent); the scan stops when they are spent.
MAX_CANDIDATES = 2 * MAX_ATTEMPTS
#: Of MAX_ATTEMPTS, the most that logfmt lines, header lines, dict reprs, split log bodies,
#: escaped bodies and XML bodies may each take.
MAX_LINE_ATTEMPTS = 256
MAX_HEADER_ATTEMPTS = 64
MAX_REPR_ATTEMPTS = 128
MAX_SPLIT_ATTEMPTS = 64
MAX_ESCAPED_ATTEMPTS = 128
MAX_XML_ATTEMPTS = 64
#: Nesting levels walked in a parsed value.
MAX_DEPTH = 32
#: The deepest bracket nesting a dict repr may have (error reprs are a few levels deep).
MAX_REPR_DEPTH = 16
#: Nodes (values) visited per parsed value.
MAX_WALK_NODES = 4_096
#: Levels of JSON held in JSON string values that are parsed (1: a JSON string inside the text's
#: JSON; a bare backslash-escaped body in the text is level 1 too).
MAX_ESCAPE_LEVELS = 4
#: Characters a Python dict repr may span.
MAX_REPR_CHARS = 32_768
#: Characters an XML error body may span.
MAX_XML_CHARS = 32_768
#: Lines a JSON body split over log lines may span.
MAX_SPLIT_LINES = 64
#: Characters of one logfmt or header line read.
MAX_LINE_CHARS = 8_192
#: Envelopes returned; past this, failed envelopes are kept before successful ones.
MAX_ENVELOPES = 256
#: Code fields and messages kept per envelope.
MAX_FIELDS = 64
#: Characters kept of one message.
MAX_MESSAGE_CHARS = 2_000
#: The first chunk a JSON value is parsed from (grown eightfold while it may cut the value).
_CHUNK_CHARS = 4_096
#: The first window in which a dict repr's closing bracket is sought.
_SHORT_REPR_CHARS = 1_024
#: A longer log prefix is not taken for a repeated log-line prefix.
_MAX_PREFIX_CHARS = 256
#: After a success that consumed more than this, the candidate search restarts past it instead
#: of skipping the candidates inside it one by one (over bytes a restart is cheap; over a str
#: the wrapper encodes the whole text again).
_RESTART_BYTES = 256
_RESTART_CHARS = 4_096


class Shape(enum.StrEnum):
    """What a structure is: the dialect its fields follow (see the module docstring)."""

    REST = "rest"  # a generic API body: error/errors/ok/success/status/message fields
    PROBLEM_DETAILS = "problem_details"  # RFC 9457 (type, title, status, detail)
    GRAPHQL = "graphql"
    JSON_RPC = "json_rpc"
    MCP_RESULT = "mcp_result"
    TOOL_RESULT = "tool_result"  # a model API's tool-result block: {"type": "tool_result", "is_error": true}
    K8S_STATUS = "k8s_status"
    AWS_XML = "aws_xml"  # <Error><Code>…; also Azure Storage and GCS XML errors
    AWS_JSON = "aws_json"  # {"__type": "…#Name", "message": …}
    JSON_LOG = "json_log"  # a structured log record in JSON (a level field)
    LOGFMT = "logfmt"  # a structured log record in logfmt (key=value pairs with a level)
    HEADER = "header"  # error-code response headers (x-amzn-ErrorType, x-ms-error-code, grpc-status)


class Framing(enum.StrEnum):
    """How a structure sat in the text."""

    JSON = "json"  # a JSON value, on one line or pretty-printed over many
    JSON_LINES = "json_lines"  # one JSON value per line, two or more such lines
    SPLIT_LOG_JSON = "split_log_json"  # a JSON body split over prefixed log lines
    ESCAPED_JSON = "escaped_json"  # inside a string value of another structure, or backslash-escaped
    DICT_REPR = "dict_repr"  # a Python literal (dict repr)
    XML = "xml"
    LOGFMT = "logfmt"
    HEADER = "header"


@dataclass(frozen=True, slots=True)
class CodeField:
    """A field that carries a code.

    Attributes:
        path: the keys from the envelope root joined with ``.``, list indices dropped
            (``"error.type"``, ``"errors.extensions.code"``, ``"Error.Code"``); a header's name.
        value: a string or an int, as the structure holds it (numeric strings stay strings;
            AWS ``__type`` and ``x-amzn-ErrorType`` values are sanitised, see
            :func:`sanitize_aws_error_type`).

    Raises:
        ValueError: for an empty path, or a value that is not a str or an int (bools and
            floats are never codes).
    """

    path: str
    value: str | int

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"CodeField: path must be a non-empty string, got {self.path!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, (str, int)):
            raise ValueError(f"CodeField {self.path!r}: value must be a str or an int, got {self.value!r}")

    @property
    def leaf(self) -> str:
        """The last key of the path: ``"type"``, ``"code"``, ``"reason"``, ``"Code"``, ``"__type"``."""
        return self.path.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class Envelope:
    """One structure found in a text.

    Attributes:
        shape: what the structure is.
        failed: the structure itself says failure: ``ok``/``success`` false; ``error`` present
            and not null, false, 0 or empty; ``errors`` not empty; ``status`` Failure, error,
            fail or an HTTP status of 400 or more; ``isError`` true; a ``type``/``code``/``name``
            naming an error (``*_error``, ``*Exception``, ``*Error``, ``*Fault``) or a ``code`` of
            400..599 beside a message; a problem-details body; an XML error body. A log record
            fails by its level alone.
        codes: the fields that carry codes, in the order met, without repeats.
        messages: the human messages, unescaped, each cut to ``MAX_MESSAGE_CHARS``.
        status: an HTTP status (100..599) the structure states, else ``None``.
        start, end: the span of the structure in the text handed in (``text[start:end]``); an
            envelope found inside a string value (``Framing.ESCAPED_JSON``) has the span of the
            outermost structure that held it.
        framing: how the structure sat in the text.
        escaped: how many JSON string values it was found inside (0: in the text itself).
    """

    shape: Shape
    failed: bool
    codes: tuple[CodeField, ...]
    messages: tuple[str, ...]
    status: int | None
    start: int
    end: int
    framing: Framing = Framing.JSON
    escaped: int = 0


@dataclass(frozen=True, slots=True)
class EnvelopeScan:
    """The envelopes of a text and what finding them cost.

    Attributes:
        envelopes: as :func:`find_envelopes` returns them.
        attempts: parse attempts made (at most ``MAX_ATTEMPTS``).
        scanned_chars: characters charged to parse attempts (at most ``MAX_SCAN_CHARS`` plus,
            in each of the at most two windows read, the charge of the one attempt that crossed
            the window's share, itself at most ``MAX_SPAN``).
        candidates: candidate positions visited (at most ``MAX_CANDIDATES``).
        exhausted: a cap stopped the scan, or moved it on to the text's last quarter, before
            every candidate was tried.
    """

    envelopes: tuple[Envelope, ...]
    attempts: int
    scanned_chars: int
    candidates: int
    exhausted: bool


#: Characters without one of which no shape can be in a text: a structure opens with ``{`` (a
#: JSON value, a dict repr, an array of objects, an escaped body) or ``<`` (an XML error body),
#: a logfmt pair holds ``=``, an error-code header line ``:`` (:data:`_CANDIDATE`,
#: :data:`_LOGFMT_LEVEL`, :data:`_HEADER_LINE`).
_SHAPE_CHARS = ("{", "<", "=", ":")


def find_envelopes(text: str) -> tuple[Envelope, ...]:
    """The envelopes in ``text``, in order of appearance (see the module docstring).

    A success body (``{"ok": true, ...}``, ``{"data": {...}}`` without errors, an info log line)
    is returned with ``failed=False``, so a caller can tell a success envelope from no envelope.
    A JSON value with no envelope field (a plain data document) is not an envelope, but
    envelopes inside its string values are found. A text holding none of the characters every
    shape needs (:data:`_SHAPE_CHARS`) is not scanned. Never raises on any ``str``; the cost is
    capped by the module's constants.

    Raises:
        ValueError: when ``text`` is not a ``str``.
    """
    if type(text) is str and not any(char in text for char in _SHAPE_CHARS):
        return ()
    return scan_envelopes(text).envelopes


def scan_envelopes(text: str) -> EnvelopeScan:
    """Like :func:`find_envelopes`, also reporting what the scan cost: the parse attempts made,
    the characters charged to them and the candidate positions visited, each under its cap.

    Raises:
        ValueError: when ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise ValueError(f"find_envelopes: text must be a str, got {type(text).__name__}")
    scanner = _Scanner()
    if len(text) <= MAX_SPAN:
        scanner.begin(_Budget(1.0))
        scanner.scan_text(valid_utf8(text), 0, None, 0)
    else:
        head = MAX_SPAN * 3 // 4
        tail = MAX_SPAN - head
        scanner.begin(_Budget(0.75))
        scanner.scan_text(valid_utf8(text[:head]), 0, None, 0)
        scanner.begin(_Budget(0.25))
        scanner.scan_text(valid_utf8(text[-tail:]), len(text) - tail, None, 0)
    return EnvelopeScan(scanner.result(), scanner.attempts, scanner.charged, scanner.visits, scanner.exhausted)


def sanitize_aws_error_type(value: str) -> str:
    """An AWS error type as the SDKs read it: what precedes the first ``:``, then what follows
    the first ``#`` (AWS SDK for Go v2, ``aws/protocol/restjson.SanitizeErrorCode``).

    ``"com.amazon.coral.service#ExpiredTokenException"`` → ``"ExpiredTokenException"``;
    ``"ValidationException:http://internal.amazon.com/coral/..."`` → ``"ValidationException"``.
    """
    value = value.split(":", 1)[0]
    if "#" in value:
        value = value.split("#", 1)[1]
    return value.strip()


# --- vocabulary of fields -------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _norm(key: str) -> str:
    """A key compared case-, underscore- and hyphen-blind: ``errorCode`` = ``error_code``."""
    return key.lower().replace("_", "").replace("-", "")


#: Keys whose scalar value is a code (normalised). ``name`` only inside an error object or a
#: failed body (exception class names: ``{"name": "HttpError"}``).
_CODE_KEYS = frozenset({
    "code", "type", "error", "reason", "status", "errorcode", "errcode", "name", "errortype", "errorcodes",
    "subcode", "errorsubcode", "faultcode", "errno",
    "statuscode", "httpstatus", "httpstatuscode", "httpcode",  # HTTP statuses
    "sqlstate", "pgcode", "sqlerrno", "mysqlerrno",  # PostgreSQL SQLSTATE (node-postgres: code), MySQL
    "grpcstatus", "grpccode", "xamznerrortype", "xmserrorcode",  # gRPC, AWS and Azure header fields
})
#: Keys whose string value is a human message (normalised).
_MESSAGE_KEYS = frozenset({
    "message", "msg", "errordescription", "detail", "details", "description", "errmsg",
    "errormessage", "faultstring", "hint", "summary", "@m", "@mt", "@x", "@message",
})
#: Keys whose object or list value is an error object, walked for codes and messages.
_ERROR_KEYS = frozenset({
    "error", "errors", "err", "exception", "fault", "innererror", "cause", "detail", "diagnostic",
})
#: Keys that state an HTTP status (100..599).
_STATUS_KEYS = frozenset({"status", "statuscode", "httpstatus", "httpstatuscode", "httpcode"})
#: Keys that hold an HTTP status only when it is an error status (400..599): vendors also use
#: ``code`` for their own numbers (Graph API's 190, Twilio's 20003).
_ERROR_STATUS_KEYS = frozenset({"code", "errorcode"})
_STATUS_WORDS_FAILED = frozenset({"error", "fail", "failure", "failed"})
_STATUS_WORDS_OK = frozenset({"ok", "success", "succeeded", "successful"})
#: Level keys of structured logs (normalised; ``log.level`` is also read nested).
_LEVEL_KEYS = frozenset({
    "level", "lvl", "severity", "levelname", "loglevel", "log.level", "@l", "@level", "severitytext",
})
_FAILED_LEVELS = frozenset({
    "error", "err", "fatal", "critical", "crit", "panic", "dpanic", "alert", "emerg", "emergency", "severe",
})
_OTHER_LEVELS = frozenset({
    "trace", "debug", "info", "information", "informational", "notice", "warn", "warning", "verbose",
    "default", "fine", "finer", "finest", "config",
})
#: bunyan/pino numeric levels: 10 trace .. 60 fatal; 50 and 60 are failures.
_NUMERIC_LEVEL_MIN, _NUMERIC_LEVEL_MAX, _NUMERIC_LEVEL_FAILED = 10, 60, 50
#: Response headers that carry an error code, by lower-case name.
_HEADER_NAMES = {"x-amzn-errortype": "x-amzn-ErrorType", "x-ms-error-code": "x-ms-error-code",
                 "grpc-status": "grpc-status", "grpc-message": "grpc-message"}

# --- regular expressions (all google-re2: linear time) --------------------------------------


class _Pattern:
    """A google-re2 pattern compiled twice: for ASCII text it runs over the bytes, where the
    wrapper maps no offsets (4x cheaper per match); otherwise over the str. Offsets are
    character offsets either way."""

    __slots__ = ("_bytes", "_str")

    def __init__(self, pattern: str) -> None:
        self._str = re2.compile(pattern)
        self._bytes = re2.compile(pattern.encode("ascii"))

    def finditer(self, text: str, data: bytes | None, pos: int = 0) -> Iterator[Any]:
        """Matches in ``text`` from ``pos``; ``data`` is ``text`` encoded when it is ASCII."""
        if data is not None:
            return iter(self._bytes.finditer(data, pos))
        return iter(self._str.finditer(text, pos))


def _ascii(text: str) -> bytes | None:
    return text.encode("ascii") if text.isascii() else None


#: Where a structure may start: 1 a JSON object (``{"``), 2 a dict repr (``{'``), 3 an array of
#: objects (``[{``), 4 a backslash-escaped JSON object (``{\\"``), 5 an XML error body
#: ``<Error>``/``<ErrorResponse>`` (6 its tag), 7 EC2's ``<Response><Errors>``.
_CANDIDATE = _Pattern(
    r'(\{\s*")|(\{\s*\')|(\[\s*\{)|(\{\\+")|(<(Error|ErrorResponse)[\s>])|(<Response>\s*<Errors>)'
)
#: Tokens that matter for the bracket balance of a Python literal.
_REPR_TOKEN = _Pattern(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|[\[\](){}]""")
#: The inside of a JSON string: up to the first unescaped double quote.
_STRING_BODY = re2.compile(r'(?:[^"\\]|\\.)*')
_STRING_BODY_BYTES = re2.compile(rb'(?:[^"\\]|\\.)*')
#: A level field of a logfmt line.
_LOGFMT_LEVEL = _Pattern(r"(?i)(?:^|\s)(?:level|lvl|severity|loglevel)=")
#: One logfmt pair: 1 a key (no space, ``=`` or ``"``), 2 a bare or double-quoted value.
_LOGFMT_PAIR = _Pattern(r'([^\s="]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)')
#: An error-code response header line (curl -i/-v prints them, ``< `` before each under -v):
#: 1 the name, 2 the value.
_HEADER_LINE = _Pattern(
    r"(?im)^[ \t]*(?:<[ \t]*)?(x-amzn-errortype|x-ms-error-code|grpc-status|grpc-message)[ \t]*:[ \t]*([^\r\n]*)"
)

#: Keys that mark an envelope or say failure (normalised), read in every dialect.
_MARKER_KEYS = frozenset({
    "ok", "success", "error", "errors", "err", "exception", "fault", "errorcode", "errcode", "errortype",
    "errormessage", "documentationurl", "moreinfo", "xamznerrortype", "xmserrorcode", "iserror", "data",
    "detail", *_STATUS_KEYS,
})
#: Keys whose scalar value is recorded at all (normalised).
_FIELD_KEYS = _CODE_KEYS | _MESSAGE_KEYS | _STATUS_KEYS | _ERROR_STATUS_KEYS | _LEVEL_KEYS | {"title", "err"}
#: isinstance() tuples (cheaper than building a union type on every call).
_CONTAINERS = (dict, list, tuple)
_SEQUENCES = (list, tuple)

_STRICT = json.JSONDecoder()
_LENIENT = json.JSONDecoder(strict=False)  # a raw newline inside a string, where a log split it
_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")
_PREFIX_SEPARATORS = frozenset(" \t]|:>)")


def _is_token(value: str) -> bool:
    """A code-like string: 1..128 characters, no whitespace (``missing_scope``, ``404``)."""
    return 0 < len(value) <= 128 and len(value.split()) == 1 and value.strip() == value


def _int_like(value: object) -> int | None:
    """An int, or a string of 1..3 digits, as an int; else None (bools are not numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and 0 < len(value) <= 3 and value.isascii() and value.isdigit():
        return int(value)
    return None


# --- reading one parsed value ---------------------------------------------------------------


def _whole_json_object(text: str) -> bool:
    """A string value that is, whole, a JSON object (the body of a wrapped response)."""
    stripped = text.strip()
    return len(stripped) >= 2 and stripped[0] == "{" and stripped[-1] == "}"


class _Fields:
    """Codes, messages, status and nested strings gathered from one structure (bounded)."""

    __slots__ = ("codes", "messages", "nested", "nodes", "seen", "status", "want_nested")

    def __init__(self, nested: bool = True) -> None:
        self.want_nested = nested
        self.codes: list[CodeField] = []
        self.messages: list[str] = []
        self.status: int | None = None
        self.nested: list[str] = []
        self.nodes = 0
        self.seen: set[tuple[str, str | int]] = set()

    def code(self, path: str, value: str | int) -> None:
        if len(self.codes) < MAX_FIELDS and (path, value) not in self.seen:
            self.seen.add((path, value))
            self.codes.append(CodeField(path, value))

    def message(self, text: str) -> None:
        text = text.strip()
        if text and len(self.messages) < MAX_FIELDS and text[:MAX_MESSAGE_CHARS] not in self.messages:
            self.messages.append(text[:MAX_MESSAGE_CHARS])

    def maybe_nested(self, text: str) -> None:
        if len(self.nested) >= MAX_FIELDS:
            return
        if self.want_nested and ("{" in text or "<" in text):
            self.nested.append(text)
        elif not self.want_nested and _whole_json_object(text):
            # a success wrapping another response whole (an API gateway's 200 around the
            # application's body, as AWS Lambda proxy integrations return it): its body is read
            self.nested.append(text)

    def http_status(self, norm: str, value: object, error_scope: bool) -> None:
        if self.status is not None or (norm not in _STATUS_KEYS and norm not in _ERROR_STATUS_KEYS):
            return
        number = _int_like(value)
        if number is None:
            return
        stated = norm in _STATUS_KEYS and 100 <= number <= 599
        if stated or (norm in _ERROR_STATUS_KEYS and error_scope and 400 <= number <= 599):
            self.status = number


def _scalar_field(fields: _Fields, path: str, key: str, value: object, *, error_scope: bool,
                  sanitize: bool, names: bool) -> None:
    """Record one scalar: as a code, a message, a status, or a nested-structure candidate."""
    norm = _norm(key.rsplit(".", 1)[-1])
    if isinstance(value, str):
        fields.maybe_nested(value)
    fields.http_status(norm, value, error_scope)
    if norm in _CODE_KEYS and (names or norm != "name"):
        if isinstance(value, bool) or value is None or isinstance(value, float):
            return
        if isinstance(value, int):
            fields.code(path, value)
        elif isinstance(value, str):
            if sanitize or norm == "xamznerrortype" or key == "__type":
                value = sanitize_aws_error_type(value)
            if _is_token(value):
                fields.code(path, value)
            elif norm in {"error", "reason", "type", "code", "status"}:
                fields.message(value)  # a sentence in a code field is a message
    elif norm in _MESSAGE_KEYS and isinstance(value, str):
        fields.message(value)


def _walk_error(fields: _Fields, value: object, path: str, depth: int, *, sanitize: bool,
                texts: bool = True) -> None:
    """Walk an error object or list: every code field, message and status inside it.

    ``texts``: the strings of a list here are messages (``{"errors": ["..."]}``), as under an
    error or message key; not under other keys (a GraphQL ``path``).
    """
    fields.nodes += 1
    if depth > MAX_DEPTH or fields.nodes > MAX_WALK_NODES:
        return
    if isinstance(value, dict):
        for key, item in itertools.islice(value.items(), MAX_WALK_NODES):
            if not isinstance(key, str) or not key:
                continue
            sub = f"{path}.{key}" if path else key
            if isinstance(item, _CONTAINERS):
                norm = _norm(key)
                if norm in _CODE_KEYS and isinstance(item, _SEQUENCES):
                    _code_list(fields, sub, key, item, sanitize=sanitize)
                else:
                    _walk_error(fields, item, sub, depth + 1, sanitize=sanitize,
                                texts=norm in _ERROR_KEYS or norm in _MESSAGE_KEYS)
            else:
                _scalar_field(fields, sub, key, item, error_scope=True, sanitize=sanitize, names=True)
    elif isinstance(value, _SEQUENCES):
        for item in value[:MAX_WALK_NODES]:
            if isinstance(item, str):
                if texts:
                    fields.message(item)  # {"errors": ["..."]} (GitHub's simple validation errors)
                fields.maybe_nested(item)
            else:
                _walk_error(fields, item, path, depth + 1, sanitize=sanitize, texts=texts)
    elif isinstance(value, str):
        leaf = path.rsplit(".", 1)[-1]
        _scalar_field(fields, path, leaf, value, error_scope=True, sanitize=sanitize, names=True)


def _code_list(fields: _Fields, path: str, key: str, items: Sequence[object], *, sanitize: bool) -> None:
    """A code key holding a list of scalars (Entra ID's ``error_codes: [700082]``)."""
    for item in items[:MAX_FIELDS]:
        if isinstance(item, _CONTAINERS):
            _walk_error(fields, item, path, 1, sanitize=sanitize)
        else:
            _scalar_field(fields, path, key, item, error_scope=True, sanitize=sanitize, names=True)


def _strings(fields: _Fields, value: object, depth: int) -> None:
    """Collect, for a nested scan, the strings of a value that is not an envelope."""
    fields.nodes += 1
    if depth > MAX_DEPTH or fields.nodes > MAX_WALK_NODES:
        return
    if isinstance(value, str):
        fields.maybe_nested(value)
    elif isinstance(value, dict):
        for item in itertools.islice(value.values(), MAX_WALK_NODES):
            _strings(fields, item, depth + 1)
    elif isinstance(value, _SEQUENCES):
        for item in value[:MAX_WALK_NODES]:
            _strings(fields, item, depth + 1)


@dataclass(frozen=True, slots=True)
class _Reading:
    shape: Shape
    failed: bool
    fields: _Fields = field(compare=False)


def _level(value: object) -> bool | None:
    """Whether a log level is a failure; None when the value is no known level."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if _NUMERIC_LEVEL_MIN <= value <= _NUMERIC_LEVEL_MAX and value % 10 == 0:
            return value >= _NUMERIC_LEVEL_FAILED
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _FAILED_LEVELS:
            return True
        if word in _OTHER_LEVELS:
            return False
    return None


def _log_level(d: Mapping[str, object], keys: Mapping[str, str]) -> bool | None:
    for norm in keys.keys() & _LEVEL_KEYS:
        found = _level(d[keys[norm]])
        if found is not None:
            return found
    nested = d.get("log")
    if isinstance(nested, dict) and "level" in nested:  # ECS nested form {"log": {"level": ...}}
        return _level(nested["level"])
    return None


def _names_an_error(value: object) -> bool:
    """A type or code that names an error: OpenAI's and Anthropic's ``*_error`` types, Smithy's
    (AWS) ``*Exception`` shapes, JavaScript's ``*Error`` names, SOAP's ``*Fault``."""
    return isinstance(value, str) and _is_token(value) and value.lower().endswith(("error", "exception", "fault"))


def _nonempty(value: object) -> bool:
    return value is not None and value is not False and value != 0 and value != "" and value != {} and value != []


def _is_graphql(d: Mapping[str, object], keys: Mapping[str, str]) -> bool:
    """GraphQL spec, "Response": ``data`` and/or ``errors`` (entries with ``message``), ``extensions``."""
    errors = d.get("errors")
    if isinstance(errors, list) and errors:
        sample = errors[:MAX_FIELDS]
        if all(isinstance(e, dict) and "message" in e for e in sample) and ("data" in d or any(
                isinstance(e, dict) and {"locations", "path", "extensions"} & e.keys() for e in sample)):
            return True
    return "data" in d and set(keys) <= {"data", "errors", "extensions"}


def _read(d: Mapping[str, object]) -> _Reading | None:
    """Read one object: its shape, whether it says failure, and its fields; None when it has no
    envelope field at all (a plain data document)."""
    keys: dict[str, str] = {}
    for key in itertools.islice(d, MAX_WALK_NODES):
        if isinstance(key, str):
            keys.setdefault(_norm(key), key)
    marked = False
    failed = False
    shape = Shape.REST
    level = _log_level(d, keys)
    result = d.get("result")

    if d.get("jsonrpc") == "2.0" and ("error" in d or "result" in d):
        shape, marked = Shape.JSON_RPC, True
        if isinstance(result, dict) and isinstance(result.get("isError"), bool):
            shape = Shape.MCP_RESULT
            failed = bool(result["isError"])
    elif isinstance(d.get("isError"), bool) and isinstance(d.get("content"), list):
        shape, marked, failed = Shape.MCP_RESULT, True, bool(d["isError"])
    elif d.get("type") == "tool_result" and isinstance(d.get("is_error"), bool):
        shape, marked, failed = Shape.TOOL_RESULT, True, bool(d["is_error"])
    elif d.get("kind") == "Status" and isinstance(d.get("status"), str):
        shape, marked = Shape.K8S_STATUS, True
    elif isinstance(d.get("__type"), str):
        shape, marked, failed = Shape.AWS_JSON, True, True
    elif _is_graphql(d, keys):
        shape, marked = Shape.GRAPHQL, True
    elif "title" in keys and ("type" in keys or "status" in keys) and "error" not in keys:
        shape, marked, failed = Shape.PROBLEM_DETAILS, True, True  # RFC 9457: a problem is an error
    elif level is not None:
        shape, marked = Shape.JSON_LOG, True
    if level is not None:
        failed = failed or level

    # generic failure and success fields, in every dialect
    for norm in keys.keys() & _MARKER_KEYS:
        value = d[keys[norm]]
        if norm in {"ok", "success"} and isinstance(value, bool):
            marked = True
            failed = failed or not value
        elif norm in _STATUS_KEYS:
            number = _int_like(value)
            if number is not None and 100 <= number <= 599:
                marked = True
                failed = failed or number >= 400
            elif isinstance(value, str) and value.strip().lower() in _STATUS_WORDS_FAILED:
                marked, failed = True, True
            elif isinstance(value, str) and value.strip().lower() in _STATUS_WORDS_OK:
                marked = True
        elif norm in {"error", "errors", "err", "exception", "fault", "errorcode", "errcode"}:
            marked = True  # an error code of 0 means no error (WeChat: {"errcode": 0, "errmsg": "ok"})
            failed = failed or _nonempty(value)
        elif norm in {"errortype", "errormessage", "documentationurl", "moreinfo", "xamznerrortype",
                      "xmserrorcode"}:
            marked, failed = True, True  # Lambda, GitHub, Twilio, AWS/Azure header keys
        elif norm == "iserror" and isinstance(value, bool):
            marked = True
            failed = failed or value
        elif norm == "data" and (value is None or isinstance(value, (dict, list))):
            marked = True
        elif norm == "detail" and len(keys) <= 2:
            marked, failed = True, True  # FastAPI / Django REST framework error bodies
    if not failed and "code" in keys and ("message" in keys or "msg" in keys):
        number = _int_like(d[keys["code"]])
        if number is not None and 400 <= number <= 599:
            marked, failed = True, True  # {"code": 404, "message": "Not Found"}: an error object at the root
    if not failed and ("message" in keys or "msg" in keys) and any(_names_an_error(d.get(keys.get(k, "")))
                                                                for k in ("type", "code", "name", "errortype")):
        marked, failed = True, True  # {"message": ..., "type": "invalid_request_error"}: an error object
    if shape is Shape.JSON_LOG:
        failed = bool(level)  # a log record fails by its level; its other fields describe what it logs
    if not marked and len(keys) <= 4 and any(isinstance(d.get(keys.get(k, "")), str)
                                             for k in ("message", "msg")):
        marked = True  # {"message": "Forbidden"} (API gateways): a body that only speaks
    if not marked:
        return None
    fields = _Fields(nested=failed)  # a success's strings are content, not evidence (but a whole response)
    _collect(fields, d, keys, shape, failed)
    return _Reading(shape, failed, fields)


def _collect(fields: _Fields, d: Mapping[str, object], keys: Mapping[str, str], shape: Shape,
             failed: bool) -> None:
    """Gather the fields of an envelope: root scalars, then error objects and dialect parts."""
    sanitize = shape is Shape.AWS_JSON
    logs = shape in (Shape.JSON_LOG, Shape.LOGFMT)
    names = failed and not logs
    error_scope = failed or shape is Shape.K8S_STATUS
    for norm, key in keys.items():
        value = d[key]
        if isinstance(value, _CONTAINERS):
            continue
        if shape is Shape.TOOL_RESULT and norm == "content" and isinstance(value, str):
            fields.message(value)
            fields.maybe_nested(value)
            continue
        if norm not in _FIELD_KEYS and "." not in key:
            if isinstance(value, str):
                fields.maybe_nested(value)
            continue
        if logs and (norm in _LEVEL_KEYS or norm in {"name", "type"}):
            continue  # a log record's own fields: its level, its logger's name, its record type
        if norm == "title" and shape is Shape.PROBLEM_DETAILS:
            if isinstance(value, str):
                fields.message(value)
            continue
        if "." in key and _norm(key.split(".", 1)[0]) in _ERROR_KEYS:
            _scalar_field(fields, key, key, value, error_scope=True, sanitize=sanitize, names=True)
            continue  # ECS flat keys: "error.type", "error.message"
        if isinstance(value, str) and (norm == "err" or (norm == "error" and not _is_token(value))):
            fields.message(value)
            fields.maybe_nested(value)
            continue
        _scalar_field(fields, key, key, value, error_scope=error_scope, sanitize=sanitize, names=names)
    for norm, key in keys.items():
        value = d[key]
        if not isinstance(value, _CONTAINERS):
            continue
        if norm in _ERROR_KEYS:
            _walk_error(fields, value, key, 1, sanitize=sanitize)
        elif norm in _CODE_KEYS and isinstance(value, _SEQUENCES):
            _code_list(fields, key, key, value, sanitize=sanitize)
        elif shape is Shape.K8S_STATUS and norm == "details" and isinstance(value, dict):
            causes = value.get("causes")
            if isinstance(causes, _SEQUENCES):
                _walk_error(fields, causes, f"{key}.causes", 2, sanitize=False)
        elif shape is Shape.MCP_RESULT and norm in {"content", "result"}:
            _mcp_content(fields, value if norm == "content" else _get(value, "content"))
            if norm == "result" and isinstance(value, dict) and value.get("isError") is True:
                structured = value.get("structuredContent")
                if isinstance(structured, dict):
                    _walk_error(fields, structured, f"{key}.structuredContent", 2, sanitize=False)
        elif shape is Shape.TOOL_RESULT and norm == "content":
            _mcp_content(fields, value)
        elif shape is Shape.MCP_RESULT and norm == "structuredcontent" and failed:
            _walk_error(fields, value, key, 1, sanitize=False)
        elif failed:
            _strings(fields, value, 1)  # a success's payload is content, not evidence


def _get(value: object, key: str) -> object:
    return value.get(key) if isinstance(value, dict) else None


def _mcp_content(fields: _Fields, content: object) -> None:
    """MCP content blocks: the text of each ``{"type": "text", "text": ...}``."""
    if not isinstance(content, _SEQUENCES):
        return
    for block in content[:MAX_FIELDS]:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text = block["text"]
            fields.message(text)
            fields.maybe_nested(text)


# --- the scan -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Found:
    order: int
    envelope: Envelope


class _Budget:
    """The caps of one call (or of one of its two windows): attempts in all and per kind, and
    characters charged."""

    __slots__ = ("attempts", "chars", "kinds", "visits")

    def __init__(self, share: float) -> None:
        self.attempts = int(MAX_ATTEMPTS * share)
        self.chars = int(MAX_SCAN_CHARS * share)
        self.visits = int(MAX_CANDIDATES * share)
        self.kinds = {
            "line": int(MAX_LINE_ATTEMPTS * share), "header": int(MAX_HEADER_ATTEMPTS * share),
            "repr": int(MAX_REPR_ATTEMPTS * share), "split": int(MAX_SPLIT_ATTEMPTS * share),
            "escaped": int(MAX_ESCAPED_ATTEMPTS * share), "xml": int(MAX_XML_ATTEMPTS * share),
        }


class _Scanner:
    """One call's state: the budget spent and the envelopes found."""

    def __init__(self) -> None:
        self.attempts = 0
        self.charged = 0
        self.visits = 0
        self.exhausted = False
        self.found: list[_Found] = []
        self._kinds: dict[str, int] = {}
        self._budget = _Budget(1.0)
        self._base: tuple[int, int, int, dict[str, int]] = (0, 0, 0, {})  # spent when the window began
        self._data: bytes | None = None  # the text being scanned, encoded, when it is ASCII

    # budget --------------------------------------------------------------------------------
    def begin(self, budget: _Budget) -> None:
        """Start a window whose spending is capped by ``budget`` on top of what was spent."""
        self._budget = budget
        self._base = (self.attempts, self.charged, self.visits, dict(self._kinds))

    def _used(self, kind: str | None = None) -> int:
        if kind is None:
            return self.attempts - self._base[0]
        return self._kinds.get(kind, 0) - self._base[3].get(kind, 0)

    def _cap(self, kind: str | None = None) -> int:
        return self._budget.attempts if kind is None else self._budget.kinds[kind]

    def _open(self, kind: str | None = None) -> bool:
        """Whether one more attempt (of ``kind``) is within the caps."""
        if (self._used() >= self._budget.attempts or self.charged - self._base[1] >= self._budget.chars
                or (kind is not None and self._used(kind) >= self._cap(kind))):
            self.exhausted = True
            return False
        return True

    def _head_spent(self, kind: str | None) -> bool:
        """Three quarters of the share are spent: the rest is kept for the end of the text."""
        return (self._used(kind) >= self._cap(kind) * 3 // 4
                or self.visits - self._base[2] >= self._budget.visits * 3 // 4)

    def _tail_start(self, text: str, position: int, kind: str | None) -> int:
        """Where to go on once the head's share is spent at ``position``: far enough from the
        end that the remaining share should cover the rest, at the density of candidates met so
        far; at a line start."""
        used = max(self._used(kind), self.visits - self._base[2], 1)
        left = max(min(self._cap(kind) - self._used(kind), self._budget.visits - (self.visits - self._base[2])), 0)
        reach = int(position / used * left * 0.8)
        start = max(position, len(text) - reach)
        return max(position, text.rfind("\n", 0, start) + 1)

    def _visit(self) -> bool:
        """Count one candidate visited; False, counting nothing, when the visits are spent."""
        if self.visits - self._base[2] >= self._budget.visits:
            self.exhausted = True
            return False
        self.visits += 1
        return True

    def _charge(self, chars: int, kind: str | None = None) -> None:
        self.attempts += 1
        self.charged += max(chars, 1)
        if kind is not None:
            self._kinds[kind] = self._kinds.get(kind, 0) + 1

    # results -------------------------------------------------------------------------------
    def _emit(self, reading: _Reading, span: tuple[int, int], framing: Framing, level: int) -> None:
        fields = reading.fields
        if level > 0 and framing is Framing.JSON:
            framing = Framing.ESCAPED_JSON
        self.found.append(_Found(len(self.found), Envelope(
            reading.shape, reading.failed, tuple(fields.codes), tuple(fields.messages), fields.status,
            span[0], span[1], framing, level,
        )))

    def result(self) -> tuple[Envelope, ...]:
        found = sorted(self.found, key=lambda f: (f.envelope.start, f.order))
        if len(found) > MAX_ENVELOPES:
            failed = [f for f in found if f.envelope.failed][:MAX_ENVELOPES]
            rest = [f for f in found if not f.envelope.failed][: MAX_ENVELOPES - len(failed)]
            found = sorted(failed + rest, key=lambda f: (f.envelope.start, f.order))
        return tuple(f.envelope for f in found)

    # driver --------------------------------------------------------------------------------
    def scan_text(self, text: str, offset: int, outer: tuple[int, int] | None, level: int) -> None:
        """Scan ``text``: a window of the input at ``offset``, or, with ``outer``, a string value
        found ``level`` levels deep inside the structure spanning ``outer``. Lines first
        (logfmt, headers), then structures outside those lines."""
        data = _ascii(text)
        reserve = outer is None  # a string value is read whole, with no share kept for its end
        saved, self._data = self._data, data
        lines: list[tuple[int, int]] = []
        self._logfmt(text, data, reserve, offset, outer, level, lines)
        self._headers(text, data, reserve, offset, outer, level, lines)
        lines.sort()
        first = len(self.found)
        whole: set[int] = set()
        self._structures(text, data, reserve, offset, outer, level, lines, whole)
        self._data = saved
        if outer is None and len(whole) >= 2:
            for f in self.found[first:]:
                env = f.envelope
                if env.framing is Framing.JSON and env.escaped == 0 and env.start in whole:
                    f.envelope = Envelope(env.shape, env.failed, env.codes, env.messages, env.status,
                                          env.start, env.end, Framing.JSON_LINES, 0)

    def _span(self, start: int, end: int, offset: int, outer: tuple[int, int] | None) -> tuple[int, int]:
        return outer if outer is not None else (offset + start, offset + end)

    def _structures(self, text: str, data: bytes | None, reserve: bool, offset: int, outer: tuple[int, int] | None,
                    level: int, lines: list[tuple[int, int]], whole: set[int]) -> None:
        """JSON, repr, escaped and XML candidates in order; a success hides what it contains."""
        pos = 0
        jumped = not reserve
        matches = _CANDIDATE.finditer(text, data)
        while True:
            match = next(matches, None)
            if match is None:
                return
            start = match.start()
            if not self._visit():
                return
            if start < pos or _inside(lines, start):
                continue
            if not jumped and self._head_spent(None):
                jumped, self.exhausted = True, True
                skip_to = self._tail_start(text, start, None)
                if skip_to > start:
                    pos = skip_to
                    matches = _CANDIDATE.finditer(text, data, skip_to)
                    continue
            if not self._open():
                return
            end = self._try(text, match, offset, outer, level, whole)
            if end is not None:
                pos = end
                if end - match.end() > (_RESTART_BYTES if data is not None else _RESTART_CHARS):
                    matches = _CANDIDATE.finditer(text, data, end)

    def _try(self, text: str, match: Any, offset: int, outer: tuple[int, int] | None, level: int,
             whole: set[int]) -> int | None:
        """Try one candidate; return the end of what it consumed, or None."""
        start = match.start()
        group = match.lastindex
        if group == 1:
            return self._try_json(text, start, offset, outer, level, whole)
        if group == 2:
            return self._try_repr(text, start, offset, outer, level)
        if group == 3:
            end = self._try_json(text, start, offset, outer, level, whole)
            if end is None and self._open():  # the array failed: its first object may not
                inner = match.end() - 1
                after = text[inner + 1 : inner + 64].lstrip()[:1]
                if after == '"':
                    return self._try_json(text, inner, offset, outer, level, whole)
                if after == "'":
                    return self._try_repr(text, inner, offset, outer, level)
            return end
        if group == 4:
            return self._try_escaped(text, start, offset, outer, level)
        tag = text[match.start(6) : match.end(6)] if group in (5, 6) else "Response"
        return self._try_xml(text, start, tag, offset, outer, level)

    # JSON ----------------------------------------------------------------------------------
    def _try_json(self, text: str, start: int, offset: int, outer: tuple[int, int] | None, level: int,
                  whole: set[int]) -> int | None:
        value, end, error = _decode(text, start)
        if end < 0:
            self._charge((error if error >= 0 else len(text)) - start + 1)
            return None if error < 0 else self._after_json_failure(text, start, error, offset, outer, level)
        self._charge(end - start)
        if outer is None and _whole_line(text, start, end):
            whole.add(offset + start)
        self._value(value, self._span(start, end, offset, outer), Framing.JSON, level)
        return end

    def _after_json_failure(self, text: str, start: int, error: int, offset: int,
                            outer: tuple[int, int] | None, level: int) -> int | None:
        """A JSON candidate that failed at ``error`` may be a repr with Python literals, or a body
        split over log lines."""
        head = text[error : error + 5]
        if head[:1] == "'" or head.startswith(("None", "True", "False")):
            return self._try_repr(text, start, offset, outer, level)
        line_end = text.find("\n", start)
        if line_end != -1 and error >= line_end:
            return self._try_split(text, start, line_end, offset, outer, level)
        return None

    def _try_split(self, text: str, start: int, line_end: int, offset: int, outer: tuple[int, int] | None,
                   level: int) -> int | None:
        """A JSON body whose continuation lines repeat the first line's log prefix.

        The prefix is compared with digits made equal (timestamps change from line to line),
        cut back to a separator (space, tab, ``]``, ``|``, ``:``, ``>``, ``)``), and stripped
        from each continuation line; the lines are joined with a newline and parsed leniently
        (a raw newline inside a string is kept as one).
        """
        line_start = text.rfind("\n", 0, start) + 1
        prefix = text[line_start:start]
        if not prefix.strip() or len(prefix) > _MAX_PREFIX_CHARS or not self._open("split"):
            return None  # no prefix to strip: the raw multi-line parse already failed
        shape = prefix.translate(_DIGITS_TO_ZERO)
        second_start = line_end + 1
        second = text[second_start : second_start + len(shape)]
        second_shape = second.translate(_DIGITS_TO_ZERO)
        width = 0
        while width < len(second_shape) and shape[width] == second_shape[width]:
            width += 1
        while width > 0 and second[width - 1] not in _PREFIX_SEPARATORS:
            width -= 1
        repeated = second_shape[:width]
        if width < 3 or not repeated.strip():
            self._charge(width + 1, "split")
            return None
        pieces = [text[start:line_end]]
        origins = [(0, start)]  # (offset in the joined text, offset in text) of each piece
        joined_len = len(pieces[0])
        cursor = second_start
        while cursor < len(text) and len(pieces) < MAX_SPLIT_LINES:
            if text[cursor : cursor + width].translate(_DIGITS_TO_ZERO) != repeated:
                break
            stop = text.find("\n", cursor)
            stop = len(text) if stop == -1 else stop
            if joined_len + 1 + stop - cursor - width > MAX_SPAN:
                break
            joined_len += 1
            origins.append((joined_len, cursor + width))
            pieces.append(text[cursor + width : stop])
            joined_len += stop - cursor - width
            cursor = stop + 1
        joined = "\n".join(pieces)
        try:
            value, end = _LENIENT.raw_decode(joined, 0)
        except json.JSONDecodeError as exc:
            self._charge(exc.pos + 1, "split")
            return None
        except (ValueError, RecursionError, MemoryError):
            self._charge(len(joined), "split")
            return None
        self._charge(end, "split")
        index = bisect.bisect_right([j for j, _ in origins], end - 1) - 1
        joined_at, text_at = origins[index]
        text_end = text_at + (end - joined_at)
        self._value(value, self._span(start, text_end, offset, outer), Framing.SPLIT_LOG_JSON, level)
        return text_end

    def _try_escaped(self, text: str, start: int, offset: int, outer: tuple[int, int] | None,
                     level: int) -> int | None:
        """A JSON body written as the inside of a JSON string (``{\\"type\\":...}``): read up to
        the first unescaped double quote, unescape as a JSON string, scan the result one level
        deeper."""
        if level + 1 > MAX_ESCAPE_LEVELS or not self._open("escaped"):
            return None
        data = self._data
        stop = _string_end(text, data, start, min(len(text), start + MAX_SPAN))
        self._charge(stop - start, "escaped")
        try:
            unescaped = _LENIENT.decode('"' + text[start:stop] + '"')
        except (ValueError, RecursionError, MemoryError):
            return None
        if not isinstance(unescaped, str):
            return None
        before = len(self.found)
        self.scan_text(valid_utf8(unescaped), 0, self._span(start, stop, offset, outer), level + 1)
        return stop if len(self.found) > before else None

    # Python literals -----------------------------------------------------------------------
    def _try_repr(self, text: str, start: int, offset: int, outer: tuple[int, int] | None,
                  level: int) -> int | None:
        """A dict repr: balance brackets outside strings (depth ≤ MAX_REPR_DEPTH), then literal_eval.

        The balance is sought in a short window first and in ``MAX_REPR_CHARS`` only when the
        short one ends inside the literal; each window read is charged.
        """
        end: int | None = None
        for size in (_SHORT_REPR_CHARS, MAX_REPR_CHARS):
            if not self._open("repr"):
                return None
            window = text[start : start + size]
            end, open_ended = _balanced_end(window)
            self._charge(end if end is not None else len(window), "repr")
            if end is not None or not open_ended or len(window) < size:
                break
        if end is None:
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escape sequences in the literal's strings
                value = ast.literal_eval(text[start : start + end])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        self._value(value, self._span(start, start + end, offset, outer), Framing.DICT_REPR, level)
        return start + end

    # XML -----------------------------------------------------------------------------------
    def _try_xml(self, text: str, start: int, tag: str, offset: int, outer: tuple[int, int] | None,
                 level: int) -> int | None:
        """An XML error body (``<Error>``, ``<ErrorResponse>``, ``<Response><Errors>``).

        The span starts at the element, so no DOCTYPE (and no entity definition) can be in it;
        expat reads only the predefined entities.
        """
        if not self._open("xml"):
            return None
        close = f"</{tag}>"
        limit = min(len(text), start + MAX_XML_CHARS)
        stop = text.find(close, start, limit)
        if stop == -1:
            self._charge(limit - start, "xml")
            return None
        end = stop + len(close)
        self._charge(end - start, "xml")
        try:
            root = ElementTree.fromstring(text[start:end])
        except (ElementTree.ParseError, ValueError, RecursionError, MemoryError):
            return None
        fields = _Fields()
        _walk_xml(fields, root, "", 0)
        self._emit(_Reading(Shape.AWS_XML, True, fields), self._span(start, end, offset, outer), Framing.XML, level)
        return end

    # a parsed value ------------------------------------------------------------------------
    def _value(self, value: object, span: tuple[int, int], framing: Framing, level: int) -> None:
        """Emit the envelopes of a parsed value, then scan the strings it holds (one level deeper)."""
        nested: list[str] = []
        objects: Sequence[object] = value[:MAX_FIELDS] if isinstance(value, _SEQUENCES) else [value]
        for item in objects:
            if not isinstance(item, dict):
                continue
            reading = _read(item)
            if reading is None:
                fields = _Fields()
                _strings(fields, item, 0)
                nested.extend(fields.nested)
                continue
            self._emit(reading, span, framing, level)
            nested.extend(reading.fields.nested)
        self._nested(nested, span, level)

    def _nested(self, texts: list[str], span: tuple[int, int], level: int) -> None:
        if level + 1 > MAX_ESCAPE_LEVELS:
            return
        for text in texts[:MAX_FIELDS]:
            if not self._open():
                return
            self.scan_text(valid_utf8(text), 0, span, level + 1)

    # logfmt --------------------------------------------------------------------------------
    def _logfmt(self, text: str, data: bytes | None, reserve: bool, offset: int, outer: tuple[int, int] | None,
                level: int, lines: list[tuple[int, int]]) -> None:
        """Lines of ``key=value`` pairs with a level field (logfmt)."""
        last_line = -1
        jumped = not reserve
        matches = _LOGFMT_LEVEL.finditer(text, data)
        while True:
            match = next(matches, None)
            if match is None:
                return
            if not self._visit():
                return
            line_start = text.rfind("\n", 0, match.start() + 1) + 1
            if line_start == last_line:
                continue
            last_line = line_start
            if not jumped and self._head_spent("line"):
                jumped, self.exhausted = True, True
                skip_to = self._tail_start(text, line_start, "line")
                if skip_to > line_start:
                    matches = _LOGFMT_LEVEL.finditer(text, data, skip_to)
                    continue
            if not self._open("line"):
                return
            line_end = text.find("\n", line_start)
            line_end = len(text) if line_end == -1 else line_end
            line = text[line_start : min(line_end, line_start + MAX_LINE_CHARS)]
            self._charge(len(line), "line")
            reading = _read_logfmt(line)
            if reading is not None:
                lines.append((line_start, line_end))
                span = self._span(line_start, line_end, offset, outer)
                self._emit(reading, span, Framing.LOGFMT, level)
                self._nested(reading.fields.nested, span, level)

    # headers -------------------------------------------------------------------------------
    def _headers(self, text: str, data: bytes | None, reserve: bool, offset: int, outer: tuple[int, int] | None,
                 level: int, lines: list[tuple[int, int]]) -> None:
        """Error-code response headers; adjacent header lines make one envelope."""
        block: list[tuple[int, int, str, str]] = []
        jumped = not reserve
        matches = _HEADER_LINE.finditer(text, data)
        while True:
            match = next(matches, None)
            if match is None:
                break
            if not self._visit():
                break
            start, end = match.start(), match.end()
            if block and (start - block[-1][1] > MAX_LINE_CHARS or "\n\n" in text[block[-1][1] : start]
                          or "\n\r\n" in text[block[-1][1] : start]):
                self._emit_headers(block, offset, outer, level, lines)
                block = []
            if not jumped and self._head_spent("header"):
                jumped, self.exhausted = True, True
                skip_to = self._tail_start(text, start, "header")
                if skip_to > start:
                    matches = _HEADER_LINE.finditer(text, data, skip_to)
                    continue
            if not self._open("header"):
                break
            self._charge(end - start, "header")
            name = text[match.start(1) : match.end(1)].lower()
            block.append((start, end, name, text[match.start(2) : min(match.end(2), match.start(2) + MAX_LINE_CHARS)]))
        if block:
            self._emit_headers(block, offset, outer, level, lines)

    def _emit_headers(self, block: list[tuple[int, int, str, str]], offset: int,
                      outer: tuple[int, int] | None, level: int, lines: list[tuple[int, int]]) -> None:
        fields = _Fields()
        failed = False
        for _, _, name, raw in block:
            value = raw.strip()
            if name == "grpc-message":
                fields.message(urllib.parse.unquote(value))  # percent-encoded (PROTOCOL-HTTP2.md)
                continue
            if name == "x-amzn-errortype":
                value = sanitize_aws_error_type(value)
            if not value:
                continue
            failed = failed or name != "grpc-status" or value != "0"
            if _is_token(value):
                fields.code(_HEADER_NAMES[name], value)
        lines.append((block[0][0], block[-1][1]))
        self._emit(_Reading(Shape.HEADER, failed, fields), self._span(block[0][0], block[-1][1], offset, outer),
                   Framing.HEADER, level)


def _decode(text: str, start: int) -> tuple[object, int, int]:
    """Parse the JSON value at ``text[start]``: ``(value, end, -1)``, or ``(None, -1, error)``
    with the position where it failed (-1 when it overflowed the nesting limit or held a huge
    number).

    The value is read from a copy of at most ``_CHUNK_CHARS`` characters, grown eightfold while
    the failure may come from the copy's end: the standard decoder's error counts the lines of
    everything before the failure, so a failure costs the chunk, not the whole text.
    """
    size = _CHUNK_CHARS
    while True:
        stop = min(len(text), start + size)
        chunk = text[start:stop]
        try:
            value, end = _STRICT.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            cut = stop < len(text) and (exc.pos >= len(chunk) - 8 or exc.msg.startswith("Unterminated string"))
            if cut:
                size *= 8
                continue
            return None, -1, start + exc.pos
        except (ValueError, RecursionError, MemoryError):
            return None, -1, -1
        return value, start + end, -1


def _string_end(text: str, data: bytes | None, start: int, limit: int) -> int:
    """The index of the first double quote at or after ``start`` not escaped by a backslash, or
    ``limit``: where the inside of a JSON string ends (one linear re2 match)."""
    if data is not None:
        found = _STRING_BODY_BYTES.match(data, start, limit)
        return start if found is None else int(found.end())
    found = _STRING_BODY.match(text[start:limit])
    return start if found is None else start + int(found.end())


def _balanced_end(window: str) -> tuple[int | None, bool]:
    """Where the bracket that opens ``window`` closes, counting only brackets outside string
    literals: ``(end, True)``; ``(None, True)`` when the window ends first (a longer one may
    close it); ``(None, False)`` when it can never close here (mismatch, or deeper than
    ``MAX_REPR_DEPTH``)."""
    stack: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for token in _REPR_TOKEN.finditer(window, _ascii(window)):
        begin, end = token.span()
        if end - begin != 1:
            continue  # a string literal
        char = window[begin]
        if char in "([{":
            stack.append(char)
            if len(stack) > MAX_REPR_DEPTH:
                return None, False
        elif char in pairs:
            if not stack or stack.pop() != pairs[char]:
                return None, False
            if not stack:
                return end, True
    return None, True


def _inside(consumed: list[tuple[int, int]], position: int) -> bool:
    index = bisect.bisect_right(consumed, (position, 1 << 62)) - 1
    return index >= 0 and consumed[index][0] <= position < consumed[index][1]


def _whole_line(text: str, start: int, end: int) -> bool:
    """The value at ``text[start:end]`` is alone on one line (JSON lines)."""
    if text.find("\n", start, end) != -1:
        return False
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    return (start - line_start <= _MAX_PREFIX_CHARS and not text[line_start:start].strip()
            and line_end - end <= _MAX_PREFIX_CHARS and not text[end:line_end].strip())


def _walk_xml(fields: _Fields, element: ElementTree.Element, path: str, depth: int) -> None:
    """Codes (``Code``, ``Type``), messages (``Message``, ``*Detail``) of an XML error body."""
    fields.nodes += 1
    if depth > MAX_DEPTH or fields.nodes > MAX_WALK_NODES:
        return
    name = element.tag.rsplit("}", 1)[-1] if isinstance(element.tag, str) else ""
    sub = f"{path}.{name}" if path else name
    children = list(element)
    if not children:
        text = (element.text or "").strip()
        norm = _norm(name)
        if norm in {"code", "type"} and _is_token(text):
            fields.code(sub, text)
        elif norm in _MESSAGE_KEYS or norm.endswith(("message", "detail")):
            fields.message(text)
        return
    for child in children[:MAX_WALK_NODES]:
        _walk_xml(fields, child, sub, depth + 1)


def _unquote_logfmt(raw: str) -> str:
    """A logfmt value: bare, or double-quoted with JSON-compatible escapes (go-logfmt)."""
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        try:
            value = _LENIENT.decode(raw)
        except ValueError:
            return raw[1:-1].replace('\\"', '"')
        return value if isinstance(value, str) else raw[1:-1]
    return raw


def _read_logfmt(line: str) -> _Reading | None:
    """A logfmt line with at least two pairs and a known level."""
    pairs = [(line[m.start(1) : m.end(1)], _unquote_logfmt(line[m.start(2) : m.end(2)]))
             for m in _LOGFMT_PAIR.finditer(line, _ascii(line))]
    if len(pairs) < 2:
        return None
    record: dict[str, object] = {}
    for key, value in pairs[:MAX_WALK_NODES]:
        record.setdefault(key, value)
    keys = {_norm(k): k for k in record}
    level = _log_level(record, keys)
    if level is None:
        return None
    fields = _Fields(nested=level)
    _collect(fields, record, keys, Shape.LOGFMT, level)
    return _Reading(Shape.LOGFMT, level, fields)
