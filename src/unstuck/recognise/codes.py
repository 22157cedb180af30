"""Code tables: the machine-readable codes tools print, mapped to a situation kind.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Tools name what went wrong with codes more often than with sentences: errno names (``EACCES``,
``ENOSPC``, ``EAI_AGAIN``), npm and Node.js codes (``E401``, ``EOTP``, ``ERR_MODULE_NOT_FOUND``),
gRPC status codes, PostgreSQL SQLSTATE, MySQL error numbers, AWS, Azure, Entra (AADSTS) and
Google error codes, OAuth 2.0 errors, Slack, GitHub, OpenAI, Anthropic, Stripe and Twilio
codes, JSON-RPC and MCP error numbers, Kubernetes Status reasons, Redis error prefixes and HTTP
statuses. The tables are data, in ``unstuck/data/codes.yaml`` (the file's header documents the
format); every table names the reference that defines its codes.

Three questions are answered here, all pure and bounded:

* :meth:`CodeTables.for_field`: the verdict for one field of a parsed envelope, a leaf name and
  its scalar value (``("code", "invalid_api_key")``, ``("sqlstate", "53300")``, ``("code", 403)``).
* :meth:`CodeTables.in_text`: every code found as a token in free text
  (``npm error code E401``, ``rpc error: code = Unavailable``, ``(SQLSTATE 28P01)``).
* :meth:`CodeTables.status_in_text`: the HTTP status a text states with context (``HTTP/1.1 403``,
  ``status code 429``, ``504 Gateway Time-out``), never a duration, a port, a line number or a date.

Every pattern is compiled by RE2 (``google-re2``), so matching costs time linear in the text.
``in_text`` makes one pass per table over the text (each table's shapes are one alternation), plus
one pass for a table's context when a code was found; ``status_in_text`` makes at most two
passes. Each pass reads at most :data:`MAX_HITS` matches, so the Python work per call is bounded
as well.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol, cast

import re2
import yaml

from unstuck.core.cache import bundled_document
from unstuck.core.situations import Kind

__all__ = [
    "HTTP_TABLE",
    "MAX_HITS",
    "CodeRow",
    "CodeTable",
    "CodeTables",
    "CodeVerdict",
    "load_code_tables",
    "merge_code_tables",
]

#: Matches read per table (and per status pass) in one call: a text repeating one shape a
#: million times costs one RE2 pass, not a million Python iterations.
MAX_HITS: Final = 256

#: The reserved name of the HTTP status table (rows are statuses; it may carry phrases and
#: status patterns).
HTTP_TABLE: Final = "http"

_BUNDLED_WHERE: Final = "unstuck/data/codes.yaml"
_TABLE_KEYS: Final = frozenset(
    {
        "name",
        "source",
        "fields",
        "number_fields",
        "value",
        "range",
        "context",
        "patterns",
        "rows",
        "status_patterns",
        "status_veto",
    }
)
_HTTP_ONLY_KEYS: Final = frozenset({"status_patterns", "status_veto"})
_ROW_KEYS: Final = frozenset({"kind", "interactive", "retryable", "weak", "aliases", "number", "source", "phrases"})
_FLAGS: Final = ("interactive", "retryable", "weak")
_CODES: Final = "{codes}"
_STATUS: Final = "{status}"
_ANY_STATUS: Final = "[1-5][0-9][0-9]"
_FAILURE_STATUS: Final = "[45][0-9][0-9]"
_NEVER: Final = "[^\\x00-\\x{10FFFF}]"  # RE2 has no (?!): an empty class matches nothing


@dataclass(frozen=True, slots=True)
class CodeVerdict:
    """What one code means.

    Attributes:
        kind: the situation kind the code's reference gives it.
        interactive: the remedy needs a person at a keyboard (sign-in, MFA, consent).
        retryable: waiting and repeating the same call can succeed.
        weak: a category-level code that says little about the cause (``invalid_request_error``,
            gRPC ``UNKNOWN``, HTTP 400/500); rank it below an HTTP status and specific wording.
        table: the table that read it, e.g. ``"sqlstate"``.
        code: the code, e.g. ``"53300"`` or ``"EACCES"``. An alias or a number found in the text
            is reported as the code it stands for (``[Errno 28]`` as ``ENOSPC``, Go's
            ``Unavailable`` as ``UNAVAILABLE``); a code read through a prefix row as found.
        source: where the meaning of this code is documented.
    """

    kind: Kind
    interactive: bool
    retryable: bool
    weak: bool
    table: str
    code: str
    source: str


@dataclass(frozen=True, slots=True)
class CodeRow:
    """One row of a code table: a code (or a prefix, ending in ``*``) and its verdict.

    ``aliases`` are other spellings of the same code; ``number`` its number (errno 13, an AADSTS
    number), looked up when a pattern captures digits or a field holds an integer; ``phrases``
    the reason phrases of an HTTP status (only in the ``http`` table); ``source`` the row's own
    reference, else the table's.
    """

    code: str
    kind: Kind
    interactive: bool = False
    retryable: bool = False
    weak: bool = False
    aliases: tuple[str, ...] = ()
    number: int | None = None
    phrases: tuple[str, ...] = ()
    source: str = ""

    @property
    def is_prefix(self) -> bool:
        """Whether the row stands for every code that starts with ``code`` minus its ``*``."""
        return self.code.endswith("*")


@dataclass(frozen=True, slots=True)
class CodeTable:
    """One code table as written in the data file (see the header of ``codes.yaml``).

    ``fields`` are the envelope leaf names it reads; ``number_fields`` those of them whose numbers
    it reads (by default all of them); ``value`` a pattern a string field value must match whole
    (its capture group, if any, is the code); ``range`` the inclusive bounds a number must fall in
    (no range: numbers are never read from fields); ``context`` a pattern that must occur in the
    text for the table to apply; ``patterns`` the token shapes for free text, each with one
    capture group; ``status_patterns`` and ``status_veto`` only in the ``http`` table.
    """

    name: str
    source: str
    rows: tuple[CodeRow, ...]
    fields: frozenset[str] = frozenset()
    number_fields: frozenset[str] | None = None
    value: str | None = None
    range: tuple[int, int] | None = None
    context: str | None = None
    patterns: tuple[str, ...] = ()
    status_patterns: tuple[str, ...] = ()
    status_veto: tuple[str, ...] = ()


class _Match(Protocol):
    def groups(self) -> tuple[bytes | None, ...]: ...

    def group(self, index: int) -> bytes | None: ...


class _Regex(Protocol):
    @property
    def groups(self) -> int: ...

    def search(self, text: bytes) -> _Match | None: ...

    def fullmatch(self, text: bytes) -> _Match | None: ...

    def finditer(self, text: bytes) -> Iterator[_Match]: ...


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A table ready to read: the row index, compiled patterns."""

    spec: CodeTable
    index: Mapping[str, CodeRow]
    numbers: Mapping[int, CodeRow]
    prefixes: tuple[CodeRow, ...]
    value_re: _Regex | None
    context_re: _Regex | None
    tokens_re: _Regex | None


def _encode(text: str) -> bytes:
    # RE2 reads UTF-8; a lone surrogate (possible in any Python str) becomes "?".
    return text.encode("utf-8", "replace")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _compile(where: str, what: str, pattern: str, groups: int | None) -> _Regex:
    """Compile ``pattern`` with RE2; ``groups`` is the exact number of capture groups required."""
    try:
        compiled = cast(_Regex, re2.compile(pattern.encode("utf-8")))
    except re2.error as exc:
        raise ValueError(f"{where}: {what}: RE2 refuses the pattern {pattern!r}: {exc}") from None
    if groups is not None and compiled.groups != groups:
        raise ValueError(
            f"{where}: {what}: the pattern {pattern!r} must have exactly {groups} capture group(s), "
            f"it has {compiled.groups}"
        )
    return compiled


def _first_group(match: _Match) -> bytes | None:
    for group in match.groups():
        if group is not None:
            return group
    return None


def _is_integer(text: str) -> bool:
    digits = text[1:] if text[:1] in "+-" else text
    return digits.isascii() and digits.isdigit()


def _compile_table(where: str, spec: CodeTable) -> _Compiled:
    here = f"{where}: table {spec.name!r}"
    index: dict[str, CodeRow] = {}
    numbers: dict[int, CodeRow] = {}
    prefixes: list[CodeRow] = []
    for row in spec.rows:
        for name in (row.code, *row.aliases):
            if name in index:
                raise ValueError(
                    f"{here}, row {row.code!r}: {name!r} is already the code or an alias of row {index[name].code!r}"
                )
            index[name] = row
        if row.number is not None:
            if row.number in numbers:
                raise ValueError(
                    f"{here}, row {row.code!r}: number {row.number} is already row {numbers[row.number].code!r}"
                )
            numbers[row.number] = row
        if row.is_prefix:
            prefixes.append(row)
    prefixes.sort(key=lambda row: len(row.code), reverse=True)
    spellings = sorted((name for name, row in index.items() if not row.is_prefix), key=lambda name: (-len(name), name))
    alternation = "|".join(re2.escape(name) for name in spellings) or _NEVER
    token_parts: list[str] = []
    for number, pattern in enumerate(spec.patterns, start=1):
        expanded = pattern.replace(_CODES, alternation)
        _compile(where, f"table {spec.name!r}, pattern {number}", expanded, 1)
        token_parts.append(f"(?:{expanded})")
    tokens_re = _compile(where, f"table {spec.name!r}", "|".join(token_parts), None) if token_parts else None
    value_re = None
    if spec.value is not None:
        value_re = _compile(where, f"table {spec.name!r}, value", spec.value, None)
        if value_re.groups > 1:
            raise ValueError(f"{here}: the value pattern {spec.value!r} may have at most one capture group")
    context_re = _compile(where, f"table {spec.name!r}, context", spec.context, None) if spec.context else None
    return _Compiled(
        spec, MappingProxyType(index), MappingProxyType(numbers), tuple(prefixes), value_re, context_re, tokens_re
    )


def _status_regex(where: str, spec: CodeTable, status_class: str) -> _Regex | None:
    """One alternation: veto shapes (no group), status shapes, then ``CODE Phrase`` shapes."""
    parts = []
    for number, veto in enumerate(spec.status_veto, start=1):
        _compile(where, f"table {spec.name!r}, status_veto {number}", veto, 0)
        parts.append(f"(?:{veto})")
    for number, pattern in enumerate(spec.status_patterns, start=1):
        if _STATUS not in pattern:
            raise ValueError(f"{where}: table {spec.name!r}, status pattern {number}: {pattern!r} has no {_STATUS}")
        expanded = pattern.replace(_STATUS, status_class)
        _compile(where, f"table {spec.name!r}, status pattern {number}", expanded, 1)
        parts.append(f"(?:{expanded})")
    for row in spec.rows:
        if row.phrases and (status_class == _ANY_STATUS or row.code[:1] in ("4", "5")):
            phrases = "|".join(re2.escape(phrase) for phrase in row.phrases)
            parts.append(f"(?:\\b({re2.escape(row.code)})[ \\t]+(?i:{phrases})\\b)")
    if not parts:
        return None
    return _compile(where, f"table {spec.name!r}, status patterns", "|".join(parts), None)


class CodeTables:
    """The code tables in priority order; immutable. Build with :func:`load_code_tables`.

    Raises:
        ValueError: (constructor) a pattern RE2 refuses or with the wrong number of capture
            groups, two rows that claim the same code, alias or number, two tables with one name.
    """

    __slots__ = ("_http", "_status_any", "_status_failure", "_tables")

    _tables: tuple[_Compiled, ...]
    _http: _Compiled | None
    _status_any: _Regex | None
    _status_failure: _Regex | None

    def __init__(self, tables: Sequence[CodeTable], *, where: str = "<code tables>") -> None:
        seen: set[str] = set()
        for spec in tables:
            if spec.name in seen:
                raise ValueError(f"{where}: table {spec.name!r} is defined twice")
            seen.add(spec.name)
        compiled = tuple(_compile_table(where, spec) for spec in tables)
        http = next((table for table in compiled if table.spec.name == HTTP_TABLE), None)
        object.__setattr__(self, "_tables", compiled)
        object.__setattr__(self, "_http", http)
        object.__setattr__(self, "_status_any", _status_regex(where, http.spec, _ANY_STATUS) if http else None)
        object.__setattr__(self, "_status_failure", _status_regex(where, http.spec, _FAILURE_STATUS) if http else None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CodeTables is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"CodeTables is immutable (cannot delete {name!r})")

    def __repr__(self) -> str:
        return f"CodeTables({', '.join(self.names)})"

    @property
    def names(self) -> tuple[str, ...]:
        """The table names in priority order."""
        return tuple(table.spec.name for table in self._tables)

    @property
    def tables(self) -> tuple[CodeTable, ...]:
        """The tables as written, in priority order."""
        return tuple(table.spec for table in self._tables)

    def for_field(self, leaf: str, value: str | int, *, text: str = "") -> CodeVerdict | None:
        """The verdict for one envelope field, or None when no table knows the value.

        Args:
            leaf: the field's last key as the envelope spells it (``"code"``, ``"__type"``).
            value: the scalar value: a string, or an int (a bool is never a code). A number (an
                int, or a string of digits) is read only by a table with a ``range`` that holds it,
                and only from its ``number_fields`` (Node's ``errno``, not its ``code``).
            text: the tool's output the field came from; a table with a ``context`` applies only
                when its context occurs in it (Twilio's numbers only where the text names Twilio).

        The first table, in priority order, that reads ``leaf``, accepts the value's shape and has
        a row for it decides.
        """
        if isinstance(value, bool) or not isinstance(value, str | int):
            return None
        data: bytes | None = None
        for table in self._tables:
            if leaf not in table.spec.fields:
                continue
            read = _field_code(table, leaf, value)
            if read is None:
                continue
            hit = _lookup(table, read[0], numeric=read[1])
            if hit is None:
                continue
            if table.context_re is not None:
                if data is None:
                    data = _encode(text)
                if table.context_re.search(data) is None:
                    continue
            return _verdict(table, *hit)
        return None

    def in_text(self, text: str) -> tuple[CodeVerdict, ...]:
        """Every code found as a token in ``text``: deduplicated per table, in table priority
        order, then order of appearance.

        ``text`` is the original case (codes are case sensitive). One RE2 pass per table, one more
        for a table's context once it found a code; at most :data:`MAX_HITS` matches are read per
        table. The ``http`` table has no tokens: see :meth:`status_in_text`.
        """
        data = _encode(text)
        found: list[CodeVerdict] = []
        for table in self._tables:
            if table.tokens_re is None:
                continue
            seen: set[str] = set()
            for count, match in enumerate(table.tokens_re.finditer(data)):
                if count >= MAX_HITS:
                    break
                raw = _first_group(match)
                if raw is None:
                    continue
                hit = _lookup(table, _decode(raw), numeric=True)
                if hit is None or hit[1] in seen:
                    continue
                if table.context_re is not None and not seen and table.context_re.search(data) is None:
                    break
                seen.add(hit[1])
                found.append(_verdict(table, *hit))
        return tuple(found)

    def http_status(self, status: int) -> CodeVerdict | None:
        """The verdict for an HTTP status (RFC 9110 section 15), or None for a status with no row
        (a success, a redirect, an unlisted code) or when no ``http`` table is loaded."""
        if self._http is None or isinstance(status, bool) or not isinstance(status, int):
            return None
        hit = _lookup(self._http, str(status), numeric=True)
        return _verdict(self._http, *hit) if hit is not None and not hit[0].is_prefix else None

    def status_in_text(self, text: str) -> int | None:
        """The HTTP status ``text`` states with context, else None.

        A status counts only in a shape that says it is one (``HTTP/1.1 403``, ``HTTP 403``,
        ``status code 429``, ``"status": 503``, ``Error code: 429``, ``returned error: 403``, a
        status followed by its reason phrase such as ``504 Gateway Time-out``), never a bare
        number (``took 503 ms``, ``port 5432``, ``line 404``, a date) or an exit status.
        When the text states several, the first failure status (4xx or 5xx) wins over an earlier
        success or redirect (``HTTP/1.1 301`` then ``HTTP/1.1 403`` is 403); else the first
        status stated. Returns an int in 100..599.
        """
        data = _encode(text)
        for regex in (self._status_failure, self._status_any):
            status = _first_status(regex, data) if regex is not None else None
            if status is not None:
                return status
        return None


def _first_status(regex: _Regex, data: bytes) -> int | None:
    for count, match in enumerate(regex.finditer(data)):
        if count >= MAX_HITS:
            break
        raw = _first_group(match)
        if raw is not None:
            status = int(raw)
            if 100 <= status <= 599:
                return status
    return None


def _field_code(table: _Compiled, leaf: str, value: str | int) -> tuple[str, bool] | None:
    """The code a field value spells for ``table`` and whether it is read as a number, or None
    when the table does not read the value."""
    spec = table.spec
    reads_numbers = spec.range is not None and (spec.number_fields is None or leaf in spec.number_fields)
    if isinstance(value, int):
        if not reads_numbers or spec.range is None or not spec.range[0] <= value <= spec.range[1]:
            return None
        return str(value), True
    text = value.strip()
    if not text:
        return None
    if reads_numbers and spec.range is not None and _is_integer(text):
        number = int(text)
        return (str(number), True) if spec.range[0] <= number <= spec.range[1] else None
    if table.value_re is None:
        return text, False
    match = table.value_re.fullmatch(_encode(text))
    if match is None:
        return None
    if table.value_re.groups == 1:
        group = match.group(1)
        return (_decode(group), False) if group else None
    return text, False


def _lookup(table: _Compiled, code: str, *, numeric: bool = False) -> tuple[CodeRow, str] | None:
    """The row for ``code`` and the code to report: an exact code or alias first, then (when
    ``numeric``) a row's number, then the longest prefix row."""
    row = table.index.get(code)
    if row is not None and not row.is_prefix:
        return row, row.code
    if numeric and _is_integer(code):
        number = int(code)
        row = table.index.get(str(number)) or table.numbers.get(number)
        if row is not None and not row.is_prefix:
            return row, row.code
    for prefix in table.prefixes:
        if code.startswith(prefix.code[:-1]) and len(code) > len(prefix.code) - 1:
            return prefix, code
    return None


def _verdict(table: _Compiled, row: CodeRow, code: str) -> CodeVerdict:
    return CodeVerdict(
        kind=row.kind,
        interactive=row.interactive,
        retryable=row.retryable,
        weak=row.weak,
        table=table.spec.name,
        code=code,
        source=row.source or table.spec.source,
    )


# --- loading ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Duplicate:
    """Stands in for a mapping value whose key was written twice."""

    line: int


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # libyaml when present
    """Safe YAML with mapping keys read as written (``01000`` stays ``"01000"``) and duplicate
    keys marked instead of silently overwritten."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[str, object]:
    loader.flatten_mapping(node)
    result: dict[str, object] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise yaml.constructor.ConstructorError(None, None, "a key must be a plain value", key_node.start_mark)
        key = str(key_node.value)
        if key in result:
            result[key] = _Duplicate(key_node.start_mark.line + 1)
            continue
        result[key] = loader.construct_object(value_node, deep=True)
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _check_keys(here: str, mapping: Mapping[str, object], allowed: frozenset[str], what: str) -> None:
    for key, value in mapping.items():
        if isinstance(value, _Duplicate):
            raise ValueError(f"{here}: {key!r} is written twice (again on line {value.line})")
        if key not in allowed:
            raise ValueError(f"{here}: unknown {what} field {key!r} (known: {', '.join(sorted(allowed))})")


def _string(here: str, mapping: Mapping[str, object], key: str, *, required: bool = False) -> str | None:
    value = mapping.get(key)
    if value is None:
        if required:
            raise ValueError(f"{here}: {key} is missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{here}: {key} must be a non-empty string, got {value!r}")
    return value


def _strings(here: str, mapping: Mapping[str, object], key: str) -> tuple[str, ...]:
    value = mapping.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"{here}: {key} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _parse_row(here: str, code: str, body: object, table_source: str, is_http: bool) -> CodeRow:
    here = f"{here}, row {code!r}"
    if isinstance(body, _Duplicate):
        raise ValueError(f"{here}: duplicate code (written again on line {body.line})")
    if not isinstance(body, dict):
        raise ValueError(f"{here}: a row must be a mapping such as {{kind: auth}}, got {body!r}")
    _check_keys(here, body, _ROW_KEYS, "row")
    if not code.strip() or code != code.strip():
        raise ValueError(f"{here}: a code must be non-empty without surrounding spaces")
    if code.endswith("*") and len(code) < 2:
        raise ValueError(f"{here}: a prefix row needs at least one character before *")
    kind_name = body.get("kind")
    if kind_name is None:
        raise ValueError(f"{here}: kind is missing")
    try:
        kind = Kind(kind_name)
    except ValueError:
        raise ValueError(f"{here}: unknown kind {kind_name!r} (known: {', '.join(k.value for k in Kind)})") from None
    flags = {}
    for flag in _FLAGS:
        flag_value = body.get(flag, False)
        if not isinstance(flag_value, bool):
            raise ValueError(f"{here}: {flag} must be true or false, got {flag_value!r}")
        flags[flag] = flag_value
    number = body.get("number")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
        raise ValueError(f"{here}: number must be an integer, got {number!r}")
    phrases = _strings(here, body, "phrases")
    if is_http:
        if not _is_integer(code) or not 100 <= int(code) <= 599 or code.startswith(("+", "-")):
            raise ValueError(f"{here}: an HTTP status must be a number from 100 to 599")
    elif phrases:
        raise ValueError(f"{here}: phrases belong to the {HTTP_TABLE!r} table only")
    return CodeRow(
        code=code,
        kind=kind,
        interactive=flags["interactive"],
        retryable=flags["retryable"],
        weak=flags["weak"],
        aliases=_strings(here, body, "aliases"),
        number=number,
        phrases=phrases,
        source=_string(here, body, "source") or table_source,
    )


def _parse_table(where: str, position: int, raw: object) -> CodeTable:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: table {position} must be a mapping, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.isidentifier() or not name.islower() or name.startswith("_"):
        raise ValueError(f"{where}: table {position}: name must be a lower-case identifier, got {name!r}")
    here = f"{where}: table {name!r}"
    _check_keys(here, raw, _TABLE_KEYS, "table")
    is_http = name == HTTP_TABLE
    if not is_http:
        for key in _HTTP_ONLY_KEYS & raw.keys():
            raise ValueError(f"{here}: {key} belongs to the {HTTP_TABLE!r} table only")
    source = _string(here, raw, "source", required=True)
    assert source is not None
    span = raw.get("range")
    bounds: tuple[int, int] | None = None
    if span is not None:
        if (
            not isinstance(span, list)
            or len(span) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in span)
            or span[0] > span[1]
        ):
            raise ValueError(f"{here}: range must be [low, high], two integers with low <= high, got {span!r}")
        bounds = (span[0], span[1])
    rows_raw = raw.get("rows")
    if not isinstance(rows_raw, dict) or not rows_raw:
        raise ValueError(f"{here}: rows must be a non-empty mapping of code: verdict")
    rows = tuple(_parse_row(here, code, body, source, is_http) for code, body in rows_raw.items())
    fields = frozenset(_strings(here, raw, "fields"))
    number_fields: frozenset[str] | None = None
    if "number_fields" in raw:
        number_fields = frozenset(_strings(here, raw, "number_fields"))
        if not number_fields <= fields:
            raise ValueError(f"{here}: number_fields {sorted(number_fields - fields)} are not among the fields")
    return CodeTable(
        name=name,
        source=source,
        rows=rows,
        fields=fields,
        number_fields=number_fields,
        value=_string(here, raw, "value"),
        range=bounds,
        context=_string(here, raw, "context"),
        patterns=_strings(here, raw, "patterns"),
        status_patterns=_strings(here, raw, "status_patterns"),
        status_veto=_strings(here, raw, "status_veto"),
    )


def _parse(text: str, where: str) -> tuple[CodeTable, ...]:
    return _tables_of(_yaml_document(text, where), where)


def _yaml_document(text: str, where: str = _BUNDLED_WHERE) -> object:
    try:
        return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: not valid YAML: {exc}") from None


def _tables_of(data: object, where: str) -> tuple[CodeTable, ...]:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: the file must be a mapping with a 'tables' list")
    _check_keys(where, data, frozenset({"tables"}), "top-level")
    tables = data.get("tables")
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"{where}: 'tables' must be a non-empty list")
    return tuple(_parse_table(where, position, raw) for position, raw in enumerate(tables, start=1))


@functools.cache
def _bundled() -> CodeTables:
    document = bundled_document("codes.yaml", _yaml_document)
    return CodeTables(_tables_of(document, _BUNDLED_WHERE), where=_BUNDLED_WHERE)


def load_code_tables(text: str | None = None, *, where: str = "codes.yaml") -> CodeTables:
    """Load code tables from YAML ``text`` (the format of ``unstuck/data/codes.yaml``), or the
    bundled tables when ``text`` is None (parsed once, then cached).

    Args:
        text: the YAML document; None for the bundled tables.
        where: the file name used in error messages.

    Raises:
        ValueError: naming ``where``, the table and the row: text that is not YAML, an unknown
            field, a table without a source or rows, a row with an unknown kind or a flag that is
            not a boolean, a code, alias or number written twice in one table, a pattern RE2
            refuses (lookaround, backreferences) or without exactly one capture group.
    """
    if text is None:
        return _bundled()
    return CodeTables(_parse(text, where), where=where)


def merge_code_tables(base: CodeTables, extra: CodeTables) -> CodeTables:
    """``extra``'s tables (a user's own, same format) ahead of ``base``'s, so that their verdicts
    come first.

    Raises:
        ValueError: a table name in both (name a user's table differently from the bundled ones).
    """
    clash = sorted(set(base.names) & set(extra.names))
    if clash:
        raise ValueError(f"merge_code_tables: table(s) {', '.join(map(repr, clash))} in both; rename the user's table")
    return CodeTables((*extra.tables, *base.tables), where="merged code tables")
