"""Text from tools, made safe to read and to show (DESIGN.md: tool text is untrusted).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Two transformations, each in one place:

* :func:`valid_utf8`: lone surrogates (undecodable bytes a tool passed on as
  ``surrogateescape``) become U+FFFD, one for one, so offsets stay valid and no encoder,
  regular expression (re2 reads UTF-8), parser or SQLite write can fail on the text;
* :func:`clean_terminal_text`: terminal control and escape sequences stripped, so a tool's
  text reaches a terminal, a question or a match without moving the cursor, hiding a line
  or writing the clipboard; and the characters Unicode says a renderer shows as nothing
  (:data:`DEFAULT_IGNORABLE`) removed, so no word can hide from a match or a reader behind a
  zero-width space, and no instruction can ride along in tag characters;
* :func:`for_terminal`: the same for text printed on a terminal, except that a zero-width
  joiner or non-joiner or a variation selector after a non-ASCII character stays (it shapes
  Arabic and Indic scripts and emoji; see :data:`_SHAPING`);
* :func:`match_form`: the form in which text is read for an instruction's wording: cleaned,
  every format character removed and NFKC-normalised, so ``Ｉｇｎｏｒｅ`` (fullwidth) and
  ``Ign\u00adore`` (a soft hyphen) read ``Ignore``.

Line and paragraph separators (U+2028, U+2029) become newlines in both: they end a line
(Unicode Standard, section 5.8 "Newline Guidelines", and UAX #14 classes BK), and a terminal
that does not break on them would join two lines a reader should see apart.
"""

from __future__ import annotations

import unicodedata

import re2

__all__ = ["DEFAULT_IGNORABLE", "EVIDENCE_CHARS", "clean_terminal_text", "for_terminal", "has_invisible",
           "match_form", "quote_evidence", "smuggled_text", "valid_utf8"]

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
#: A C1 control (U+0080-U+009F): an 8-bit introducer (CSI U+009B, OSC U+009D …) starts a sequence.
_C1 = re2.compile("[\u0080-\u009f]")
#: C0 controls but tab and newline, DEL, and C1 controls (U+0080-U+009F).
_CONTROLS = {code: None for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if code not in (0x09, 0x0A)}


#: The Default_Ignorable_Code_Point characters (Unicode's DerivedCoreProperties.txt, 15.1): the
#: format characters (general category Cf) but the visible prepended concatenation marks
#: (U+0600-U+0605 ...) and the interlinear annotation and Egyptian format controls, plus the
#: Hangul fillers, the Mongolian free variation selectors, the variation selectors and the
#: reserved ranges next to them. A renderer shows them as nothing (Unicode Standard, section
#: 5.21 "Ignoring Characters in Processing"), which is why UTS #39 ("Unicode Security
#: Mechanisms", section 3.1 and its General Security Profile) and Unicode TR #36 ("Unicode
#: Security Considerations", section 3.3 "Visual Security Issues") single them out for
#: removal before comparing or showing text. Among them: U+200B zero width space, U+2060 word
#: joiner, U+FEFF zero width no-break space (BOM), U+00AD soft hyphen, the bidirectional
#: formatting characters of UAX #9 (U+061C, U+200E/F, U+202A-E, U+2066-9; the "Trojan Source"
#: attack, CVE-2021-42574), and the tag characters U+E0000-U+E007F, which spell ASCII
#: invisibly and so carry hidden instructions to a model ("ASCII smuggling").
DEFAULT_IGNORABLE = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                     "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
                     "\U0001d173-\U0001d17a\U000e0000-\U000e0fff")
_IGNORABLE = re2.compile(f"[{DEFAULT_IGNORABLE}]+")
#: What a terminal would show as a line end: U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR.
_SEPARATORS = {0x2028: "\n", 0x2029: "\n"}
#: :func:`has_invisible`: an ignorable character or a separator.
_INVISIBLE = re2.compile(f"[{DEFAULT_IGNORABLE}\u2028\u2029]")
#: The ignorable characters that shape the character before them: U+200C ZERO WIDTH NON-JOINER,
#: U+200D ZERO WIDTH JOINER (required for correct display of Arabic, Persian and Indic scripts:
#: UAX #31 section 2.3 "Layout and Format Control Characters", which allows them only after
#: letters of those scripts) and the variation selectors U+FE00-U+FE0F (emoji presentation,
#: UTS #51; standardized variants). After an ASCII character (or at the start) none of them
#: shapes anything and each only hides a break inside a word, so :func:`for_terminal` removes
#: them there and keeps them after any other character.
_SHAPING = "\u200c\u200d\ufe00-\ufe0f"
#: :data:`DEFAULT_IGNORABLE` less :data:`_SHAPING`.
_NOT_SHAPING = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200e\u200f\u202a-\u202e"
                "\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                "\U000e0000-\U000e0fff")
_IGNORABLE_BUT_SHAPING = re2.compile(f"[{_NOT_SHAPING}]+")
_SHAPING_AFTER_ASCII = re2.compile(f"(\\A|[\\x00-\\x7f])[{_SHAPING}]+")


#: What :func:`clean_terminal_text` changes: a C0 control but tab and newline (ESC and CR among
#: them), DEL, a C1 control, an ignorable character or a line or paragraph separator.
_UNCLEAN = re2.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{DEFAULT_IGNORABLE}\u2028\u2029]")


def has_invisible(text: str) -> bool:
    """Whether ``text`` holds a :data:`DEFAULT_IGNORABLE` character or a line or paragraph
    separator (U+2028/U+2029): what :func:`clean_terminal_text` would remove or turn into a
    newline besides control and escape sequences. ASCII text never does (fast path)."""
    if text.isascii():
        return False
    return _INVISIBLE.search(valid_utf8(text)) is not None


def _plain(text: str) -> bool:
    """ASCII with no control character but tab and newline: what every function here gives
    back as it is (checked in C: ``str.isprintable`` is false for exactly the other C0
    controls and DEL in ASCII), so most tool text costs no regular expression."""
    return text.isascii() and (text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable())


def _strip_controls(text: str) -> str:
    text = valid_utf8(text)
    stripped = _ESCAPES.sub("", text) if ("\x1b" in text or _C1.search(text) is not None) else text
    stripped = stripped.replace("\r\n", "\n").replace("\r", "\n")
    return stripped.translate(_CONTROLS)


def clean_terminal_text(text: str) -> str:
    """``text`` with terminal control and escape sequences and invisible characters stripped
    (linear time): what a tool said, as a match or a model should read it.

    Removes CSI sequences, OSC strings (OSC 8 links, OSC 52 clipboard writes), DCS/SOS/PM/APC
    strings, other ESC sequences, C1 controls and C0 controls other than newline and tab. A
    carriage return becomes a line break (``\\r\\n`` one line break), so text a ``\\r`` would
    overwrite on a terminal stays visible; backspaces are dropped for the same reason. Every
    :data:`DEFAULT_IGNORABLE` character is removed (zero-width spaces and joiners, tag
    characters, bidirectional controls, the BOM: "Authenti\\u200bcation" reads
    "Authentication"), and U+2028/U+2029 become newlines.
    """
    if _plain(text):
        return text
    text = valid_utf8(text)
    if _UNCLEAN.search(text) is None:  # nothing to strip (fast path: str.translate is slow on non-ASCII text)
        return text
    stripped = _strip_controls(text)
    if stripped.isascii():
        return stripped
    cleaned: str = _IGNORABLE.sub("", stripped.translate(_SEPARATORS))
    return cleaned


def for_terminal(text: str) -> str:
    """``text`` as it may be printed on a terminal: control and escape sequences stripped as by
    :func:`clean_terminal_text`, U+2028/U+2029 newlines, and every :data:`DEFAULT_IGNORABLE`
    character removed (among them the bidirectional formatting characters, which reorder how
    a terminal shows a line: UAX #9 section 2; CVE-2021-42574) but for the joiners and
    variation selectors that shape the non-ASCII character before them (:data:`_SHAPING`).
    Newlines and tabs stay."""
    if _plain(text):
        return text
    stripped = _strip_controls(text)
    if stripped.isascii():
        return stripped
    kept = _IGNORABLE_BUT_SHAPING.sub("", stripped.translate(_SEPARATORS))
    shown: str = _SHAPING_AFTER_ASCII.sub(r"\1", kept)
    return shown


#: A format character (general category Cf; re2 reads Unicode's categories).
_FORMAT = re2.compile(r"\p{Cf}")


def match_form(text: str) -> str:
    """``text`` as an instruction's wording is matched in: cleaned as by
    :func:`clean_terminal_text`, every remaining format character (general category Cf: the
    prepended concatenation marks, the interlinear annotation and Egyptian format controls
    :data:`DEFAULT_IGNORABLE` leaves out) removed, then normalised to NFKC (UAX #15, "Unicode
    Normalization Forms": compatibility characters such as the fullwidth forms U+FF01-U+FF5E,
    ligatures and circled or styled letters become the letters they stand for; UAX #31 section 5
    normalises identifiers to NFKC before comparing them for the same reason). Lines stay lines (no
    character is normalised into a line break), so the n-th line of the result is the n-th line
    of the cleaned text. ASCII text without controls comes back as it is (fast path)."""
    cleaned = clean_terminal_text(text)
    if cleaned.isascii():
        return cleaned
    visible = _FORMAT.sub("", cleaned) if _FORMAT.search(cleaned) else cleaned
    if unicodedata.is_normalized("NFKC", visible):
        return visible
    return unicodedata.normalize("NFKC", visible)


#: A run of tag characters that spell printable ASCII (U+E0020-U+E007E), with the spaces and
#: line breaks between runs: how "ASCII smuggling" writes text no renderer shows.
_TAG_RUN = re2.compile("[\U000e0020-\U000e007e]+")
#: The shortest run read as smuggled text: an emoji tag sequence (UTS #51 section 2.1.1: a
#: black flag, the tag letters of an ISO 3166-2 subdivision such as "gbsct", U+E007F CANCEL
#: TAG) spells at most six letters.
_TAG_RUN_MIN = 8


def smuggled_text(text: str) -> str | None:
    """The text that runs of Unicode tag characters spell in ``text``, one run a line, or
    ``None`` when it holds none longer than an emoji tag sequence. Tag characters U+E0020-
    U+E007E mirror printable ASCII (The Unicode Standard, section 23.9 "Tag Characters"); they
    are deprecated for language tags and render as nothing, so a run of them is a message a
    model reads and a person does not see (the "ASCII smuggling" of hidden prompt injections;
    OWASP Top 10 for LLM Applications 2025, LLM01: hidden instructions). Never raises."""
    if text.isascii():
        return None
    runs = ["".join(chr(ord(char) - 0xE0000) for char in found)
            for found in _TAG_RUN.findall(valid_utf8(text)) if len(found) >= _TAG_RUN_MIN]
    return "\n".join(runs) if runs else None


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
