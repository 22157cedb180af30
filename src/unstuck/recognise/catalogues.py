"""The system's own messages, in every language installed: gettext catalogues as signal rows.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Git, coreutils, bash, apt and the C library print their messages in the user's locale
(``LANGUAGE=de ls /x`` says "Zugriff auf '/x' nicht möglich"). A *message row*
(``unstuck/data/messages.yaml``) names one message by its gettext domain and exact msgid, as
the program's source passes it to ``gettext`` (format directives included), with the verdict
it carries. ``unstuck signals harvest`` (:func:`harvest`) reads the msgstr of every row's msgid
from every catalogue installed on the machine into ``unstuck/data/translations.jsonl``;
:func:`patterns_for` turns the msgid and its translations into google-re2 patterns that match
the message as the program prints it, in any of those languages.

How a message becomes a pattern (:func:`message_pattern`):

* literal text is lower-cased (the classifier matches lower-cased text) and escaped;
* every printf directive -- ``%s %d %i %u %c %lu %zu %.*s %1$s %-10s %'d %m`` and gettext's
  system-dependent ``%<PRIu64>`` -- becomes the one-line wildcard :data:`WILDCARD`;
  ``%%`` is a literal ``%`` and ``%n`` prints nothing;
* the directive that converts argument ``subject_arg`` (1-based, counted as printf counts
  them; in a msgstr, ``%2$s`` converts argument 2) becomes the one capture group: it stays on
  its line, does not start or end with a space or a quote, and stops at the delimiter the
  message puts after it (a quote or bracket, or ``:``/``,``/``;`` followed by a space, as in
  error(3)'s ``"PROGRAM: MESSAGE: STRERROR"``);
* a line break is ``\\r?\\n``.

Which part of a message is matched (:func:`patterns_for`): its *lead line*, the first line with
at least :data:`MIN_LITERAL_WEIGHT` of literal text, because programs prefix later lines
(git's ``hint: ``), re-wrap them per language and splice multi-line arguments between them.
A translation is skipped when its lead line carries less literal text than that (too short or
too generic to be safe: a lone ``"%s: %s"`` matches every error line), or when it converts an
argument the msgid does not (a broken translation).

Sources: the gettext manual, "The Format of GNU MO Files" and "c-format" (format directives,
system-dependent segments ``<PRIu64>``); POSIX printf (directive syntax, ``%n$`` argument
numbers); glibc ``stdio-common/vfprintf-internal.c`` (``%m``, the ``'`` and ``I`` flags).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import re
import struct
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import polib
import re2
import yaml

from unstuck.core.cache import bundled_document, load_or_derive
from unstuck.core.situations import Kind

__all__ = [
    "DEFAULT_LOCALE_DIRS",
    "MIN_LITERAL_WEIGHT",
    "WILDCARD",
    "MessageRow",
    "Translation",
    "bundled_patterns",
    "catalogue_files",
    "derive_patterns",
    "harvest",
    "language_dirs",
    "load_message_rows",
    "load_translations",
    "message_pattern",
    "patterns_for",
    "translations_jsonl",
]

#: What a printf directive that is not the subject becomes: any text on one line. Not a counted
#: repeat such as ``{0,200}``: re2 copies a counted repeat into its program once per count, and
#: a row's patterns joined as one alternation then overflow re2's DFA budget and fall back to
#: its NFA (measured: 15-20 s for one search of a 220 kB text, against 5 ms with ``*``). A line
#: is bounded by the classifier's scan window, and re2's cost is linear either way.
WILDCARD = "[^\\n]*"
#: The least literal text (letters and digits outside directives; a wide East Asian character
#: counts 2, as it takes two columns and carries a word) a pattern's line must carry.
MIN_LITERAL_WEIGHT = 8
#: Where gettext catalogues are installed on Debian and most Linux systems.
DEFAULT_LOCALE_DIRS: tuple[Path, ...] = (Path("/usr/share/locale"),)

_ROW_FIELDS = frozenset(
    {"domain", "msgid", "kind", "interactive", "retryable", "weak", "harmless", "subject_arg", "source"}
)
_TRANSLATION_FIELDS = ("domain", "msgid", "lang", "msgstr")

# A printf conversion specification (POSIX printf; glibc's ' and I flags and %m; gettext's
# system-dependent <PRI...> macros). Written for google-re2: no lookaround, no backreferences.
_DIRECTIVE = re2.compile(
    "%(?:(?P<percent>%)"
    "|(?:(?P<argnum>[1-9][0-9]*)\\$)?"
    "[-+ #0'I]*"
    "(?P<width>\\*(?:[1-9][0-9]*\\$)?|[0-9]+)?"
    "(?:\\.(?P<prec>\\*(?:[1-9][0-9]*\\$)?|[0-9]*))?"
    "(?:(?:hh|ll|[hlLqjzZt])?(?P<conv>[diouxXeEfFgGaAcsSCpnm])|<(?P<sysdep>PRI[A-Za-z0-9_]+)>))"
)
# Characters that open or close a quoted argument in the catalogues (ASCII, typographic,
# guillemets, CJK corner brackets); a subject never starts or ends with one.
_QUOTES = "'\"‘’‚“”„«»‹›「」『』"
# After the subject, these end it wherever they appear ...
_CLOSERS = _QUOTES + ")]}>）】"
# ... and these end it when a space follows them (error(3)'s ": ", a list's ", ").
_SEPARATORS = ":;,："
# White space a subject never starts or ends with, as the body of a character class: ASCII,
# and the no-break and thin spaces French catalogues put inside guillemets and before a colon
# (google-re2's \s is ASCII only).
_SPACES = " \\t\\r\\x0b\\x0c\u00a0\u2009\u202f\u3000"
_REGEX_META = frozenset("\\.^$|?*+()[]{}")
_CLASS_META = frozenset("\\]^-[")


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One program message that is a signal (a row of ``unstuck/data/messages.yaml``).

    Attributes:
        domain: the gettext text domain the program binds (``"libc"``, ``"git"``,
            ``"coreutils"``; PostgreSQL's domains without their ``-15`` major-version suffix).
        msgid: the exact msgid, as the source passes it to gettext (``"%s: command not found"``).
        kind: the verdict; ``None`` only when ``harmless``.
        interactive: the remedy needs a person at a keyboard.
        retryable: waiting and repeating the same call can succeed.
        weak: the message names where or what, but the cause is printed beside it (coreutils'
            ``"cannot access %s"`` is followed by the C library's reason); a row that is not
            weak and matches the same output should decide.
        harmless: the wording means nothing failed (git's "nothing to commit, working tree clean").
        subject_arg: the 1-based printf argument that names the subject (a path, a program),
            or ``None``.
        source: the program's source file that prints it, e.g. ``"bash execute_cmd.c"``.
    """

    domain: str
    msgid: str
    kind: Kind | None
    interactive: bool
    retryable: bool
    weak: bool
    harmless: bool
    subject_arg: int | None
    source: str


@dataclass(frozen=True, slots=True)
class Translation:
    """One msgstr of one msgid in one installed catalogue (a line of ``translations.jsonl``).

    ``lang`` is the catalogue's locale directory name (``"de"``, ``"zh_CN"``, ``"sr@latin"``).
    """

    domain: str
    msgid: str
    lang: str
    msgstr: str


# --- format strings --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Slot:
    """Where a directive prints: ``arg`` is the argument it converts (``None`` for ``%m``)."""

    arg: int | None


_Token = str | _Slot


def _tokens(message: str) -> tuple[_Token, ...]:
    """Split a printf format into literal text and slots, numbering arguments as printf does."""
    if "%" not in message:  # no directive: one literal (most lines of most messages)
        return (message,) if message else ()
    tokens: list[_Token] = []
    literal: list[str] = []
    next_arg = 1
    position = 0
    for found in _DIRECTIVE.finditer(message):
        start, end = found.span()
        literal.append(message[position:start])
        position = end
        # the groups in pattern order, read at once (a lookup by name costs the wrapper a table each time)
        percent, argnum, width, prec, conv, _ = found.groups()
        if percent is not None:
            literal.append("%")
            continue
        for star in (width, prec):
            if star == "*":  # "*" alone takes the next argument; "*2$" names one
                next_arg += 1
        if conv == "m":  # glibc: strerror(errno), no argument
            slot = _Slot(None)
        else:
            if argnum is not None:
                arg = int(argnum)
            else:
                arg = next_arg
                next_arg += 1
            if conv == "n":  # stores a count, prints nothing
                continue
            slot = _Slot(arg)
        if literal:
            tokens.append("".join(literal))
            literal = []
        tokens.append(slot)
    literal.append(message[position:])
    text = "".join(literal)
    if text:
        tokens.append(text)
    return tuple(token for token in tokens if token != "")


def _lines(tokens: Sequence[_Token]) -> list[list[_Token]]:
    lines: list[list[_Token]] = [[]]
    for token in tokens:
        if isinstance(token, _Slot):
            lines[-1].append(token)
            continue
        first, *rest = token.split("\n")
        if first:
            lines[-1].append(first)
        for piece in rest:
            lines.append([piece] if piece else [])
    return lines


#: A letter or digit (``str.isalnum``: ``re``'s word characters without the underscore).
_ALNUM = re.compile(r"[^\W_]")
#: The first character East Asian Width can call wide or fullwidth among letters and digits
#: (UAX #11: Hangul Jamo, U+1100); none before it counts twice.
_FIRST_WIDE = "\u1100"


def _weight(tokens: Iterable[_Token]) -> int:
    total = 0
    for token in tokens:
        if isinstance(token, str):
            letters = _ALNUM.findall(token)
            total += len(letters)
            if not token.isascii():
                total += sum(1 for ch in letters
                             if ch >= _FIRST_WIDE and unicodedata.east_asian_width(ch) in ("W", "F"))
    return total


def _args(tokens: Iterable[_Token]) -> frozenset[int]:
    return frozenset(t.arg for t in tokens if isinstance(t, _Slot) and t.arg is not None)


def _trimmed(message: str) -> tuple[_Token, ...]:
    return _tokens(message.strip())


def _lead(tokens: Sequence[_Token]) -> tuple[_Token, ...]:
    """The first line carrying enough literal text, or the whole message when none does."""
    for line in _lines(tokens):
        if _weight(line) >= MIN_LITERAL_WEIGHT:
            return _strip_line(line)
    return tuple(tokens)


def _strip_line(line: Sequence[_Token]) -> tuple[_Token, ...]:
    tokens = list(line)
    if tokens and isinstance(tokens[0], str):
        tokens[0] = tokens[0].lstrip()
    if tokens and isinstance(tokens[-1], str):
        tokens[-1] = tokens[-1].rstrip()
    return tuple(t for t in tokens if t != "")


# --- patterns --------------------------------------------------------------------------------


#: What :func:`_escape` writes for a character that is not itself in a pattern: a line break
#: (``\\r?\\n``), a regex metacharacter, a control character, a lone surrogate (it cannot be
#: UTF-8: what decoding gives).
_ESCAPES: dict[int, str] = {
    ord("\n"): "\\r?\\n",
    **{ord(ch): "\\" + ch for ch in _REGEX_META},
    **{code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F) if code != ord("\n")},
    **dict.fromkeys(range(0xD800, 0xE000), "\ufffd"),
}


def _escape(text: str) -> str:
    return text.translate(_ESCAPES)


def _class(chars: str) -> str:
    return "".join("\\" + ch if ch in _CLASS_META else ch for ch in chars)


def _capture(follow: str | None) -> str:
    """The subject's capture group; ``follow`` is the literal text after it (``None`` at the
    message's end, ``""`` when another directive follows).

    The subject is a run of characters that are not space, quote or the stop character,
    joined by single inner quotes, short runs of spaces and (when the message puts ``": "``
    after it) colons not followed by a space. It stops at the delimiter after it: a closing
    quote or bracket, or ``:``/``,``/``;`` followed by a space. At the message's end it stops
    at ``": "`` (error(3) appends ``": REASON"``) and at ``" -"`` or ``" ("`` (apt appends
    ``" - open (13: REASON)"``). Quotes around it stay outside the group.
    """
    at_end = follow is None
    follow = ": " if follow is None else follow
    rest = follow.lstrip()
    first, second = rest[:1], rest[1:2]
    stop = ""
    joiner = ""
    if first and first in _CLOSERS and rest == follow:
        stop = _class(first)
    elif first and first in _SEPARATORS and (not second or second.isspace()):
        stop = joiner = _class(first)
    quotes = _class(_QUOTES)
    plain = f"[^\\n{_SPACES}{quotes}{stop}]"
    after_space = f"[^\\n{_SPACES}{quotes}{stop}(\\-]" if at_end else plain
    units = [plain, f"[{quotes}]{plain}", f"[{_SPACES}]{{1,4}}{after_space}"]
    if joiner:
        units.append(f"{joiner}{plain}")
    # On one line (no unit matches a line break), not counted: see WILDCARD.
    body = f"{plain}(?:{'|'.join(units)})*"
    return f"[{quotes}]?({body})?[{quotes}]?"


def _pattern(tokens: Sequence[_Token], subject_arg: int | None) -> str:
    parts: list[str] = []
    captured = False
    for index, token in enumerate(tokens):
        if isinstance(token, str):
            parts.append(_escape(token.lower()))
            continue
        if not captured and subject_arg is not None and token.arg == subject_arg:
            after = tokens[index + 1] if index + 1 < len(tokens) else None
            follow = None if after is None else (after.lower() if isinstance(after, str) else "")
            parts.append(_capture(follow))
            captured = True
        else:
            parts.append(WILDCARD)
    return "".join(parts)


def message_pattern(message: str, *, subject_arg: int | None = None) -> str:
    """A google-re2 pattern source that matches ``message`` as the program prints it.

    Args:
        message: a printf format string: a msgid or a msgstr, as the catalogue has it (curly
            and straight quotes are kept). Leading and trailing white space is dropped (a
            message printed last has no trailing newline).
        subject_arg: the 1-based printf argument whose directive becomes the capture group
            (``%s: command not found`` with 1 captures the missing program). Arguments are
            numbered as printf numbers them: in order, a ``*`` width or precision taking one
            too, or as ``%2$s`` names them.

    Returns:
        The pattern, in lower case (the classifier lower-cases the text it matches): literal
        parts escaped, each directive :data:`WILDCARD` (any text on one line),
        the subject directive at most one capture group, line breaks ``\\r?\\n``. A directive
        that does not parse stays literal text. Never raises; the result always compiles
        under google-re2 and Python's ``re``.
    """
    return _pattern(_trimmed(message), subject_arg)


def patterns_for(row: MessageRow, translations: Sequence[Translation]) -> tuple[str, ...]:
    """The patterns that recognise ``row``'s message in English and every harvested language.

    Args:
        row: a message row.
        translations: any translations; those of other messages (another domain or msgid)
            are ignored, so the whole harvested table can be passed.

    Returns:
        The pattern of the msgid's lead line first, then each translation's, sorted by
        language, without repeats. A translation is skipped when its lead line has fewer than
        :data:`MIN_LITERAL_WEIGHT` of literal text, or when it converts an argument the msgid
        does not. See the module docstring for the lead line.
    """
    msgid_tokens = _trimmed(row.msgid)
    arguments = _args(msgid_tokens)
    found = [_pattern(_lead(msgid_tokens), row.subject_arg)]
    mine = sorted(
        (t for t in translations if t.domain == row.domain and t.msgid == row.msgid),
        key=lambda t: (t.lang, t.msgstr),
    )
    for translation in mine:
        tokens = _trimmed(translation.msgstr)
        if not _args(tokens) <= arguments:
            continue
        lead = _lead(tokens)
        if _weight(lead) < MIN_LITERAL_WEIGHT:
            continue
        pattern = _pattern(lead, row.subject_arg)
        if pattern not in found:
            found.append(pattern)
    return tuple(found)


# --- loading ---------------------------------------------------------------------------------


def _row_error(where: str, line: int, index: int, field: str, problem: str) -> ValueError:
    return ValueError(f"{where} line {line} (row {index + 1}): {field}: {problem}")


def _flag(raw: Mapping[str, object], name: str, fail: Callable[[str, str], ValueError]) -> bool:
    value = raw.get(name, False)
    if not isinstance(value, bool):
        raise fail(name, f"must be true or false, got {value!r}")
    return value


def _parse_row(raw: object, fail: Callable[[str, str], ValueError]) -> MessageRow:
    if not isinstance(raw, Mapping):
        raise fail("row", f"must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(map(str, raw)) - _ROW_FIELDS)
    if unknown:
        raise fail(unknown[0], f"unknown field (known: {', '.join(sorted(_ROW_FIELDS))})")
    texts: dict[str, str] = {}
    for name in ("domain", "msgid", "source"):
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise fail(name, f"must be a non-empty string, got {value!r}")
        texts[name] = value
    if "/" in texts["domain"] or texts["domain"].startswith("."):
        raise fail("domain", f"is a catalogue file name, not a path: {texts['domain']!r}")
    interactive, retryable = _flag(raw, "interactive", fail), _flag(raw, "retryable", fail)
    weak, harmless = _flag(raw, "weak", fail), _flag(raw, "harmless", fail)
    raw_kind = raw.get("kind")
    kind: Kind | None
    if harmless:
        if raw_kind is not None:
            raise fail("kind", "a harmless row has no kind (nothing failed)")
        if interactive or retryable or weak:
            raise fail("harmless", "a harmless row is not interactive, retryable or weak")
        kind = None
    else:
        try:
            kind = Kind(raw_kind) if isinstance(raw_kind, str) else None
        except ValueError:
            kind = None
        if kind is None:
            raise fail("kind", f"unknown or missing kind {raw_kind!r} (known: {', '.join(Kind)})")
    tokens = _trimmed(texts["msgid"])
    lead = _lead(tokens)
    if _weight(lead) < MIN_LITERAL_WEIGHT:
        raise fail("msgid", f"has less than {MIN_LITERAL_WEIGHT} letters of literal text on its lead line; "
                            "its pattern would match unrelated lines")
    subject_arg = raw.get("subject_arg")
    if subject_arg is not None:
        if isinstance(subject_arg, bool) or not isinstance(subject_arg, int) or subject_arg < 1:
            raise fail("subject_arg", f"must be a 1-based argument number, got {subject_arg!r}")
        if subject_arg not in _args(lead):
            raise fail("subject_arg", f"argument {subject_arg} is not printed on the msgid's lead line")
    return MessageRow(
        domain=texts["domain"], msgid=texts["msgid"], kind=kind, interactive=interactive,
        retryable=retryable, weak=weak, harmless=harmless, subject_arg=subject_arg, source=texts["source"],
    )


#: libyaml's parser when PyYAML has it (the same safe constructor, several times faster).
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_rows(text: str, where: str) -> tuple[MessageRow, ...]:
    data, lines = _read_document(text, where)
    return _rows_of(data, lines, where)


def _read_document(text: str, where: str) -> tuple[Any, list[int]]:
    """The YAML document and the line of each of its ``messages`` rows (for errors)."""
    loader = _SafeLoader(text)
    try:
        node = loader.get_single_node()
        data: Any = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        raise ValueError(f"{where}: expected a mapping with a 'messages' list")
    extra = sorted(set(map(str, data)) - {"messages"})
    if extra:
        raise ValueError(f"{where}: unknown top-level key {extra[0]!r}")
    assert isinstance(node, yaml.MappingNode)
    items = next(value.value for key, value in node.value if key.value == "messages")
    return data, [item.start_mark.line + 1 for item in items]


def _rows_of(data: Any, lines: Sequence[int], where: str) -> tuple[MessageRow, ...]:
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list) \
            or len(lines) != len(data["messages"]):
        raise ValueError(f"{where}: expected a mapping with a 'messages' list")
    rows: list[MessageRow] = []
    seen: dict[tuple[str, str], int] = {}
    for index, (raw, line) in enumerate(zip(data["messages"], lines, strict=True)):

        def fail(field: str, problem: str, line: int = line, index: int = index) -> ValueError:
            return _row_error(where, line, index, field, problem)

        row = _parse_row(raw, fail)
        key = (row.domain, row.msgid)
        if key in seen:
            raise fail("msgid", f"repeats the row on line {seen[key]} ({row.domain} {row.msgid!r})")
        seen[key] = line
        rows.append(row)
    return tuple(rows)


@functools.cache
def _bundled_rows() -> tuple[MessageRow, ...]:
    document = bundled_document("messages.yaml", _message_document)
    assert isinstance(document, dict)
    return _rows_of(document.get("data"), document.get("lines") or [], "messages.yaml")


def _message_document(text: str) -> dict[str, Any]:
    data, lines = _read_document(text, "messages.yaml")
    return {"data": data, "lines": lines}


def load_message_rows(text: str | None = None, *, where: str = "messages.yaml") -> tuple[MessageRow, ...]:
    """Read message rows from YAML text (a mapping whose ``messages`` is a list of rows).

    Args:
        text: the YAML; ``None`` reads the bundled ``unstuck/data/messages.yaml`` (cached).
        where: the file name used in errors.

    Returns:
        The rows, in file order.

    Raises:
        ValueError: naming ``where``, the line and row, and the field: text that is not YAML,
            an unknown field, a missing domain, msgid or source, an unknown kind, a kind on a
            harmless row, a flag that is not a boolean, a subject_arg that names no argument
            printed on the msgid's lead line, a msgid too generic to match safely, a repeated
            (domain, msgid).
    """
    if text is None:
        return _bundled_rows()
    return _parse_rows(text, where)


def _parse_translations(text: str, where: str) -> tuple[Translation, ...]:
    found: list[Translation] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{where} line {number}: expected an object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(_TRANSLATION_FIELDS))
        if unknown:
            raise ValueError(f"{where} line {number}: {unknown[0]}: unknown field")
        for name in _TRANSLATION_FIELDS:
            value = raw.get(name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{where} line {number}: {name}: must be a non-empty string, got {value!r}")
        found.append(Translation(raw["domain"], raw["msgid"], raw["lang"], raw["msgstr"]))
    return tuple(found)


@functools.cache
def _bundled_translations() -> tuple[Translation, ...]:
    text = resources.files("unstuck").joinpath("data/translations.jsonl").read_text(encoding="utf-8")
    return _parse_translations(text, "translations.jsonl")


def load_translations(text: str | None = None, *, where: str = "translations.jsonl") -> tuple[Translation, ...]:
    """Read translations from JSON lines (``{"domain", "msgid", "lang", "msgstr"}`` per line).

    Args:
        text: the JSON lines; ``None`` reads the bundled ``unstuck/data/translations.jsonl``
            (cached). Blank lines are skipped.
        where: the file name used in errors.

    Raises:
        ValueError: naming ``where``, the line and the field, for a line that is not a JSON
            object, an unknown field, or a field that is missing or not a non-empty string.
    """
    if text is None:
        return _bundled_translations()
    return _parse_translations(text, where)


def translations_jsonl(translations: Iterable[Translation]) -> str:
    """The JSON-lines text :func:`load_translations` reads, one translation a line, UTF-8 kept."""
    return "".join(
        json.dumps({"domain": t.domain, "msgid": t.msgid, "lang": t.lang, "msgstr": t.msgstr},
                   ensure_ascii=False) + "\n"
        for t in translations
    )


#: Bumped when the derivation's output changes shape.
_PATTERN_CACHE_LAYOUT = 1


def _inputs_digest() -> str:
    """SHA-256 over everything the bundled patterns are derived from: the two data files and
    this module's own source (the derivation), so an edit to any of them is a cache miss."""
    digest = hashlib.sha256(f"layout {_PATTERN_CACHE_LAYOUT}\n".encode())
    data = resources.files("unstuck").joinpath("data")
    for name in ("messages.yaml", "translations.jsonl"):
        digest.update(data.joinpath(name).read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()


def _parse_cached(raw: object, count: int) -> list[tuple[str, ...]] | None:
    if not isinstance(raw, list) or len(raw) != count:
        return None
    if not all(isinstance(row, list) and row and all(isinstance(p, str) and p for p in row) for row in raw):
        return None
    return [tuple(row) for row in raw]


@functools.cache
def bundled_patterns() -> tuple[tuple[MessageRow, tuple[str, ...]], ...]:
    """Every bundled row with its patterns (:func:`patterns_for` over the bundled translations),
    in file order; cached in memory and on disk.

    Deriving them reads every translation (about 0.7 s), so the result is kept by
    :func:`unstuck.core.cache.load_or_derive` as ``message-patterns`` under a SHA-256 of its inputs
    (the data files and this module's source): a later process reads it instead (a few ms).
    """
    rows = load_message_rows()
    patterns = load_or_derive(
        "message-patterns", _inputs_digest(),
        lambda: [list(found) for _, found in derive_patterns(rows, load_translations())],
        lambda raw: _parse_cached(raw, len(rows)))
    return tuple(zip(rows, patterns, strict=True))


def derive_patterns(
    rows: Sequence[MessageRow], translations: Iterable[Translation]
) -> tuple[tuple[MessageRow, tuple[str, ...]], ...]:
    """Each row with its patterns (:func:`patterns_for`), in row order: one pass over the
    translations, no per-row scan of the whole table."""
    by_message: dict[tuple[str, str], list[Translation]] = {}
    for translation in translations:
        by_message.setdefault((translation.domain, translation.msgid), []).append(translation)
    return tuple((row, patterns_for(row, by_message.get((row.domain, row.msgid), []))) for row in rows)


# --- harvesting ------------------------------------------------------------------------------


def language_dirs(locale_dirs: Sequence[Path]) -> tuple[Path, ...]:
    """The ``<dir>/<lang>`` directories that hold an ``LC_MESSAGES`` folder, sorted per dir."""
    found: list[Path] = []
    for root in locale_dirs:
        if root.is_dir():
            found.extend(sorted(p for p in root.iterdir() if (p / "LC_MESSAGES").is_dir()))
    return tuple(found)


def catalogue_files(lang_dir: Path, domain: str) -> tuple[Path, ...]:
    """The catalogues of ``domain`` in one language directory.

    ``LC_MESSAGES/<domain>.mo``, and ``LC_MESSAGES/<domain>-<major>.mo`` for a numeric major
    version (PostgreSQL installs ``libpq5-15.mo``, ``psql-15.mo``: its ``PG_TEXTDOMAIN`` macro
    appends the major version), sorted.
    """
    folder = lang_dir / "LC_MESSAGES"
    exact = folder / f"{domain}.mo"
    found = [exact] if exact.is_file() else []
    for path in sorted(folder.glob(f"{glob.escape(domain)}-*.mo")):
        if path.stem[len(domain) + 1:].isdigit():
            found.append(path)
    return tuple(found)


def _read_mo(path: Path) -> Any:
    try:
        return polib.mofile(str(path))
    except (OSError, ValueError, IndexError, struct.error, UnicodeDecodeError, LookupError) as exc:
        raise ValueError(f"{path}: not a readable gettext catalogue ({exc})") from None


def harvest(
    rows: Sequence[MessageRow],
    locale_dirs: Sequence[Path],
    *,
    on_language: Callable[[Path], None] | None = None,
) -> tuple[Translation, ...]:
    """Read every row's msgstr from every installed catalogue of its domain.

    Args:
        rows: the message rows whose msgids to look up.
        locale_dirs: directories laid out as ``<dir>/<lang>/LC_MESSAGES/<domain>.mo``
            (:data:`DEFAULT_LOCALE_DIRS`); a missing directory is skipped.
        on_language: called with each language directory after it is read (a progress bar).

    Returns:
        The translations, sorted by (domain, msgid, lang, msgstr), without repeats. A row's
        msgid is looked up as an entry's msgid or msgid_plural, under any msgctxt; every
        non-empty plural form is a translation; fuzzy and empty entries are skipped. A msgid
        no catalogue has simply has no translation.

    Raises:
        ValueError: naming the file, when a catalogue exists but cannot be read.
    """
    wanted: dict[str, set[str]] = {}
    for row in rows:
        wanted.setdefault(row.domain, set()).add(row.msgid)
    found: set[Translation] = set()
    for lang_dir in language_dirs(locale_dirs):
        for domain, msgids in sorted(wanted.items()):
            for path in catalogue_files(lang_dir, domain):
                for entry in _read_mo(path):
                    if "fuzzy" in entry.flags or getattr(entry, "obsolete", False):
                        continue
                    hits = {entry.msgid, entry.msgid_plural} & msgids
                    if not hits:
                        continue
                    forms = [entry.msgstr] if not entry.msgstr_plural else list(entry.msgstr_plural.values())
                    for msgid in hits:
                        found.update(
                            Translation(domain, msgid, lang_dir.name, form) for form in forms if form
                        )
        if on_language is not None:
            on_language(lang_dir)
    return tuple(sorted(found, key=lambda t: (t.domain, t.msgid, t.lang, t.msgstr)))
