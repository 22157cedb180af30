"""Windows shells' own messages in every language Microsoft ships, as signal rows.
Internal: not a supported import path (docs/reference/index.md lists those that are).

cmd.exe and PowerShell print their messages in the Windows display language ("'npm' n'est pas
reconnu en tant que commande interne", "'ot.py' は、内部コマンドまたは外部コマンド"). Those
texts are not in any gettext catalogue (:mod:`unstuck.recognise.catalogues` harvests Debian's); they come
from Microsoft's own message texts: cmd.exe's message table, the Win32 system error messages,
PowerShell's resource strings. ``data/windows_messages.yaml`` holds, per message, its verdict,
its source and its lead line in each language; :func:`bundled_messages` turns each into
google-re2 patterns (:func:`message_pattern`) that :mod:`unstuck.recognise.signals` adds as message rows.

How a text becomes a pattern: lower-cased and escaped; ``%1`` (the name or path the message is
about) becomes the one capture group when the message has a subject, else any text on the line;
a run of white space matches any white space (consoles wrap at their width), optional between
characters of scripts written without spaces; any quote mark matches any other (translations
use ``' ’ " « » „ “ ”``), and a message's opening quote may be missing (reports cut it off).

A PowerShell error record's ``FullyQualifiedErrorId`` is an identifier, printed untranslated
in every language: the file's ``error_ids`` become rows that read it.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import re2

from unstuck.core.cache import bundled_document
from unstuck.core.errors import UnstuckError
from unstuck.core.readers import parse_yaml
from unstuck.core.situations import Kind
from unstuck.recognise.catalogues import MessageRow

__all__ = [
    "WindowsMessageError",
    "bundled_messages",
    "message_pattern",
    "parse_windows_messages",
]

_QUOTES = "'’‘`\"“”«»„‚「」"
_QUOTE = "[" + "".join(re2.escape(q) for q in _QUOTES) + "]"
#: The subject and the wildcard are unbounded repeats, never counted ones: re2 copies a counted
#: repeat into its program once per count, and the cause rows' sets then outgrow their DFA cache
#: (measured: 47 ms per non-ASCII text with ``{1,200}``, 0.08 ms without; see
#: :data:`unstuck.recognise.catalogues.WILDCARD`). A line bounds them.
_SUBJECT = "([^\\n" + "".join(re2.escape(q) for q in _QUOTES) + "]+)"
_WILDCARD = "[^\\n]*"
_MESSAGE_KEYS = frozenset({"id", "kind", "interactive", "retryable", "source", "subject", "texts", "seen"})


class WindowsMessageError(UnstuckError, ValueError):
    """The Windows message file is malformed; the message names the row and the field."""


def _latin(char: str) -> bool:
    return char.isalpha() and unicodedata.name(char, "").startswith(("LATIN", "CYRILLIC", "GREEK"))


def message_pattern(text: str, *, subject: bool) -> str:
    """The re2 pattern of one message text (see the module docstring).

    Args:
        text: the text as Windows prints it, ``%1`` for the name or path it is about.
        subject: whether ``%1`` becomes the capture group (else it matches any text on the line).
    """
    lowered = text.lower()
    # a message's closing full stop is optional: CPython prints a Windows error's text with its
    # trailing dots removed ("[WinError 5] Access is denied: 'C:\\x'", Python/errors.c,
    # PyErr_SetExcFromWindowsErrWithFilenameObjects), and so do other runtimes' wrappers
    stop = lowered.endswith((".", "。")) and len(lowered) > 1
    if stop:
        lowered = lowered[:-1]
    parts: list[str] = []
    index = 0
    while index < len(lowered):
        char = lowered[index]
        if lowered.startswith("%1", index):
            parts.append(_SUBJECT if subject else _WILDCARD)
            index += 2
        elif char in _QUOTES:
            parts.append(_QUOTE + ("?" if index == 0 else "") + "\\s*")
            index += 1
        elif char.isspace():
            end = index
            while end < len(lowered) and lowered[end].isspace():
                end += 1
            before = lowered[index - 1] if index else ""
            after = lowered[end] if end < len(lowered) else ""
            parts.append("\\s+" if _latin(before) and _latin(after) else "\\s*")
            index = end
        else:
            parts.append(re2.escape(char))
            index += 1
    return "".join(parts) + ("[.。]?" if stop else "")


def _fail(where: str, problem: str) -> WindowsMessageError:
    return WindowsMessageError(f"windows_messages.yaml {where}: {problem}")


def _verdict_fields(where: str, raw: Mapping[str, Any]) -> tuple[Kind, bool, bool, str]:
    try:
        kind = Kind(str(raw.get("kind")))
    except ValueError:
        raise _fail(where, f"unknown kind {raw.get('kind')!r}") from None
    flags = []
    for name in ("interactive", "retryable"):
        value = raw.get(name, False)
        if not isinstance(value, bool):
            raise _fail(where, f"{name} must be true or false")
        flags.append(value)
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise _fail(where, "needs a source (Microsoft's message text it comes from)")
    return kind, flags[0], flags[1], source.strip()


def parse_windows_messages(data: object) -> tuple[tuple[MessageRow, tuple[str, ...]], ...]:
    """Each message of a parsed Windows message file as a message row with its patterns, one
    per language, then one row per ``error_ids`` entry.

    Raises:
        WindowsMessageError: naming the row and the field, for a malformed file.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        raise WindowsMessageError("windows_messages.yaml: needs a list of messages")
    found: list[tuple[MessageRow, tuple[str, ...]]] = []
    for number, raw in enumerate(data["messages"], start=1):
        where = f"message {number}"
        if not isinstance(raw, Mapping):
            raise _fail(where, "must be a mapping")
        unknown = sorted(set(map(str, raw)) - _MESSAGE_KEYS)
        if unknown:
            raise _fail(where, f"unknown field(s) {', '.join(unknown)}")
        kind, interactive, retryable, source = _verdict_fields(where, raw)
        texts = raw.get("texts")
        if not isinstance(texts, Mapping) or not texts or not all(
                isinstance(t, str) and t.strip() for t in texts.values()):
            raise _fail(where, "texts must map language tags to texts")
        subject = raw.get("subject", False) is True
        if subject and not all("%1" in t for t in texts.values()):
            raise _fail(where, "a message with a subject has %1 in every text")
        patterns = tuple(dict.fromkeys(message_pattern(t, subject=subject) for t in texts.values()))
        row = MessageRow(domain="windows", msgid=str(raw.get("id", number)), kind=kind, interactive=interactive,
                         retryable=retryable, weak=False, harmless=False, subject_arg=1 if subject else None,
                         source=source)
        found.append((row, patterns))
    for number, raw in enumerate(data.get("error_ids") or [], start=1):
        where = f"error_ids {number}"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str) or not raw["id"].isidentifier():
            raise _fail(where, "needs an id (a FullyQualifiedErrorId)")
        kind, interactive, retryable, source = _verdict_fields(where, raw)
        pattern = "fullyqualifiederrorid\\s*:\\s*" + re2.escape(raw["id"].lower()) + "\\b"
        found.append((MessageRow("powershell", raw["id"], kind, interactive, retryable, False, False, None, source),
                      (pattern,)))
    return tuple(found)


def _document(text: str) -> object:
    return parse_yaml(text, where="windows_messages.yaml", error=WindowsMessageError)


@functools.cache
def bundled_messages() -> Sequence[tuple[MessageRow, tuple[str, ...]]]:
    """The bundled Windows messages (``data/windows_messages.yaml``) with their patterns."""
    return parse_windows_messages(bundled_document("windows_messages.yaml", _document))
