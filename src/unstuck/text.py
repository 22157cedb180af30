"""Text from tools, made safe to read and to show (DESIGN.md: tool text is untrusted).

Two transformations, each in one place:

* :func:`valid_utf8`: lone surrogates (undecodable bytes a tool passed on as
  ``surrogateescape``) become U+FFFD, one for one, so offsets stay valid and no encoder,
  regular expression (re2 reads UTF-8), parser or SQLite write can fail on the text;
* :func:`clean_terminal_text`: terminal control and escape sequences stripped, so a tool's
  text reaches a terminal, a question or a match without moving the cursor, hiding a line
  or writing the clipboard.
"""

from __future__ import annotations

import re2

__all__ = ["EVIDENCE_CHARS", "clean_terminal_text", "for_terminal", "quote_evidence", "valid_utf8"]

_SURROGATES = {code: 0xFFFD for code in range(0xD800, 0xE000)}


def valid_utf8(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (same length: offsets stay valid)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.translate(_SURROGATES)
    return text


#: ECMA-48 control sequences: CSI (ESC [ or U+009B) with parameter and intermediate bytes and
#: a final byte; OSC (ESC ] / U+009D), DCS (ESC P / U+0090), SOS (ESC X / U+0098), PM (ESC ^ /
#: U+009E) and APC (ESC _ / U+009F) strings up to BEL or ST (ESC \\ / U+009C), or to the end of
#: the text when unterminated (as a terminal would swallow them); other escape sequences
#: (ESC, intermediates, a final byte). Sources: ECMA-48 sections 5.3-5.6 and 8.3; xterm's
#: ctlseqs (OSC 8 hyperlinks, OSC 52 clipboard).
_ESCAPES = re2.compile(
    "(?:\x1b\\[|\u009b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    "|(?:\x1b[\\]PX^_]|[\u0090\u0098\u009d\u009e\u009f])[^\x07\x1b\u009c]*(?:\x07|\x1b\\\\|\u009c)?"
    "|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
#: C0 controls but tab and newline, DEL, and C1 controls (U+0080-U+009F).
_CONTROLS = {code: None for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if code not in (0x09, 0x0A)}


def clean_terminal_text(text: str) -> str:
    """``text`` with terminal control and escape sequences stripped (linear time).

    Removes CSI sequences, OSC strings (OSC 8 links, OSC 52 clipboard writes), DCS/SOS/PM/APC
    strings, other ESC sequences, C1 controls and C0 controls other than newline and tab. A
    carriage return becomes a line break (``\\r\\n`` one line break), so text a ``\\r`` would
    overwrite on a terminal stays visible; backspaces are dropped for the same reason.
    """
    text = valid_utf8(text)
    stripped = _ESCAPES.sub("", text) if ("\x1b" in text or any(0x80 <= ord(c) < 0xA0 for c in text)) else text
    stripped = stripped.replace("\r\n", "\n").replace("\r", "\n")
    return stripped.translate(_CONTROLS)


#: Unicode's explicit bidirectional formatting characters (embeddings, overrides, isolates, the
#: marks): they reorder how a terminal shows a line, so shown text can differ from the bytes
#: (Unicode Standard Annex #9, section 2, "Explicit Directional Formatting Characters"; the
#: "Trojan Source" attack, CVE-2021-42574).
_BIDI = {code: None for code in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def for_terminal(text: str) -> str:
    """``text`` as it may be printed on a terminal: :func:`clean_terminal_text`, and the
    bidirectional formatting characters (:data:`_BIDI`) removed. Newlines and tabs stay."""
    return clean_terminal_text(text).translate(_BIDI)


#: Characters at most in a quoted piece of tool text (:func:`quote_evidence`).
EVIDENCE_CHARS = 200

#: Quotation marks a tool's text could use to close unstuck's quotation early, and what they
#: become inside it (the ASCII apostrophe): U+0022, U+00AB/U+00BB, U+201C-U+201F, U+2033,
#: U+2036, U+301D-U+301F, U+FF02.
_QUOTES = {code: "'" for code in (0x22, 0xAB, 0xBB, *range(0x201C, 0x2020), 0x2033, 0x2036,
                                  *range(0x301D, 0x3020), 0xFF02)}


def quote_evidence(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """Tool text as quoted evidence: ``“…”`` around at most ``limit`` characters of it.

    The text is cleaned (:func:`for_terminal`), made one line (every run of whitespace one
    space), its quotation marks (:data:`_QUOTES`) become apostrophes, and it is cut to
    ``limit`` characters with a trailing ``…`` when longer. ``“”`` for empty text.

    Raises:
        ValueError: when ``limit`` is smaller than 1.
    """
    if limit < 1:
        raise ValueError(f"quote_evidence: limit must be at least 1, got {limit}")
    flat = " ".join(for_terminal(text).translate(_QUOTES).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f"“{flat}”"
