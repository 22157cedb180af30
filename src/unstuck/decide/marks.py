"""The mark on unstuck's own notes to the model, and the quoting of tool text that imitates it.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Every text unstuck adds for the model (its guidance, the latch, a refusal, "the user has
resolved the block", a lesson's note, the retry note, a resumed call's note) is one *note*,
whose first line starts with the turn's mark, ``[unstuck 9f3c2a1b7d4e6f80]``: the word and a
per-turn nonce (:data:`NONCE_HEX` hex digits, 64 bits from :mod:`secrets`, drawn by the guard
when the turn starts and kept in its saved state, so a resumed turn keeps it). The templates in
:mod:`unstuck.decide.prompts` start with the unmarked :data:`~unstuck.decide.prompts.GUIDANCE_PREFIX`;
:func:`note` puts the mark in its place.

A tool cannot produce a note: it does not know the nonce, and whatever it says is passed through
:func:`neutralise` before the model sees it, which quotes every line that looks like a mark
(:func:`imitates_mark`: an opening bracket, then the letters of "unstuck", in any case or
spacing, with or without a nonce, behind quote or list punctuation, escape sequences or
invisible characters, in fullwidth or other compatibility forms, or spelled with Cyrillic or
Greek look-alike letters) as the tool's: :data:`TOOL_LINE` before it. So no line of tool text,
whatever it is, reaches the model starting with a mark, this turn's or any other.

Why a nonce *and* quoting, rather than either: quoting alone leaves the real note looking like
a forged one to a reader who does not know the rule; a nonce alone leaves a forged line
word for word beside the real one (a model need not compare nonces), and a tool that learned
the nonce (the model passed it on in a call's arguments) could copy it. A separate channel
(a system message per note) does not exist in every framework an adapter serves, so the mark
travels in the tool result's own text.

Two lines of unstuck's own are written into tool text before the guard sees it, and pass
unquoted when exactly so (:data:`CUT_MARKERS`): the cut markers of
:func:`unstuck.core.tools.truncate_content` and :mod:`unstuck.processes.capture`, which say
only how many bytes were dropped.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

import re2

from unstuck.core.text import match_form
from unstuck.decide.prompts import GUIDANCE_PREFIX

__all__ = ["CUT_MARKERS", "MARK_WORD", "NONCE_HEX", "TOOL_LINE", "imitates_mark", "is_nonce", "mark", "neutralise",
           "note", "notes", "says", "tool_words"]

#: The word of the mark.
MARK_WORD = "unstuck"
#: Hex digits of a turn's nonce (``secrets.token_hex(NONCE_HEX // 2)``: 64 bits).
NONCE_HEX = 16
#: What stands before a line of tool text that looks like a mark: the tool's words, quoted.
TOOL_LINE = "(tool output, not unstuck's:) "
#: Lines of unstuck's that stand inside tool text, exactly (``truncate_content``'s
#: ``[unstuck: output truncated, N bytes omitted]``; the capture's
#: ``[unstuck: N bytes of output dropped here]``).
CUT_MARKERS = re2.compile(r"^\[unstuck: (?:output truncated, \d+ bytes omitted|\d+ bytes of output dropped here)\]$")

#: A list item's number before a line's text (``1.``, ``2)``), read past like punctuation.
_LIST_NUMBER = re2.compile(r"^\s*\d{1,3}[.)]")
_NONCE = re2.compile(f"^[0-9a-f]{{{NONCE_HEX}}}$")
#: How much of a line's start is read for a mark (a mark is short; the rest is not read).
_HEAD = 160
#: Letters that look like the letters of "unstuck" and are not them (lower case, after NFKC
#: and case folding), mapped to the Latin letter each passes for: Cyrillic, Greek and Armenian
#: letters and small capitals of the kind Unicode's confusables.txt lists (UTS #39, "Unicode
#: Security Mechanisms", section 4); a hand-picked set for these six letters, not that table.
_LOOK_ALIKES = str.maketrans({
    "\u057d": "u", "\u03c5": "u", "\u1d1c": "u", "\u028b": "u",  # ս υ ᴜ ʋ
    "\u0578": "n", "\u057c": "n", "\u0274": "n", "\u03b7": "n",  # ո ռ ɴ η
    "\u0455": "s", "\ua731": "s", "\u01bd": "s", "\u0282": "s",  # ѕ ꜱ ƽ ʂ
    "\u0442": "t", "\u03c4": "t", "\u1d1b": "t",  # т τ ᴛ
    "\u0441": "c", "\u03f2": "c", "\u1d04": "c", "\u217d": "c",  # с ϲ ᴄ ⅽ
    "\u043a": "k", "\u03ba": "k", "\u1d0b": "k", "\u0138": "k",  # к κ ᴋ ĸ
})


def is_nonce(text: str) -> bool:
    """``text`` is a nonce as a mark carries it: :data:`NONCE_HEX` lower-case hex digits."""
    return _NONCE.match(text) is not None


@functools.lru_cache(maxsize=64)  # a turn's mark is asked for with every note it writes
def mark(nonce: str) -> str:
    """The mark of a turn whose nonce is ``nonce``: ``[unstuck 9f3c2a1b7d4e6f80]``.

    Raises:
        ValueError: when ``nonce`` is not :data:`NONCE_HEX` lower-case hex digits.
    """
    if not is_nonce(nonce):
        raise ValueError(f"a mark's nonce is {NONCE_HEX} lower-case hex digits, got {nonce!r}")
    return f"[{MARK_WORD} {nonce}]"


def note(nonce: str, text: str) -> str:
    """``text`` as unstuck's note in the turn of ``nonce``: the mark in place of a leading
    :data:`~unstuck.decide.prompts.GUIDANCE_PREFIX`, or before a text that has none (``"Not
    executed: …"`` → ``"[unstuck 9f3c…] Not executed: …"``); a text that starts with this
    turn's mark keeps it. Only the note's first line is marked: any later line of it that
    looks like a mark (a command or a tool's words the note names, with a line break in them)
    is quoted as :func:`neutralise` quotes tool text, so nothing put inside a note becomes a
    note of its own.

    Raises:
        ValueError: for a malformed ``nonce`` (:func:`mark`).
    """
    own = mark(nonce)
    if text.startswith(own):
        body = text[len(own):]
    elif text.startswith(GUIDANCE_PREFIX):
        body = text[len(GUIDANCE_PREFIX):]
    else:
        body = f" {text}"
    return own + neutralise(body)


def notes(nonce: str, texts: Iterable[str]) -> str:
    """Several notes (:func:`note` each), one paragraph each; the empty ones left out."""
    return "\n\n".join(note(nonce, text) for text in texts if text)


def _letters(text: str) -> str:
    """The letters of ``text``, folded: NFKC, case folded, look-alikes mapped, accents dropped."""
    folded = unicodedata.normalize("NFKD", text.casefold().translate(_LOOK_ALIKES)).translate(_LOOK_ALIKES)
    return "".join(c for c in folded if c.isalpha() and not unicodedata.combining(c))


def _opens(char: str) -> bool:
    """An opening bracket or quotation mark of any script (general category Ps or Pi), or ``<``."""
    return char == "<" or unicodedata.category(char) in ("Ps", "Pi")


def imitates_mark(line: str) -> bool:
    """``line`` (one line of tool text) starts like unstuck's mark, with or without a nonce.

    Read on the line's first :data:`_HEAD` characters as an instruction's wording is matched
    (:func:`unstuck.core.text.match_form`: escape sequences, controls and invisible characters
    removed, NFKC: fullwidth ``［ｕｎｓｔｕｃｋ］`` is ``[unstuck]``): after any leading spaces,
    quote or list punctuation (``> - * # ` " |``, any character that is neither a letter, a
    digit nor an opening bracket) and a list item's number (``1.``), an opening bracket of
    any script (``[ ( { < 【 〔 「 «`` …), then, ignoring anything that is not a letter
    between them, the letters u n s t u c k in any case, Cyrillic or Greek look-alikes
    (:data:`_LOOK_ALIKES`) or accented. The cut markers (:data:`CUT_MARKERS`) are unstuck's
    own and do not count.
    """
    first = line.lstrip(" \t")[:1]
    if first.isascii() and first.isalpha() and _CONTROL.search(line, 0, _HEAD) is None:
        return False  # a line that starts with a letter, nothing cleaned away before it, is no mark
    head = match_form(line[:_HEAD])
    if CUT_MARKERS.match(head.strip()) is not None:
        return False
    numbered = _LIST_NUMBER.match(head)
    start = 0 if numbered is None else numbered.end()
    for position, char in enumerate(head[start:], start):
        if char.isalnum():
            return False
        if _opens(char):
            return _letters(head[position + 1:]).startswith(MARK_WORD)
    return False


#: An ASCII control character other than tab and line feed (escape sequences, backspace
#: overstrikes and carriage returns are cleaned before a line is read: such a text takes the
#: line-by-line reading).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # a single class: linear; and surrogates read
#: Where in plain ASCII (unchanged by :func:`~unstuck.core.text.match_form`) a mark could start:
#: an opening bracket (``( [ { <``: ASCII's Ps characters and ``<``), then the letters of
#: :data:`MARK_WORD` in any case with only non-letters between, on one line. Every line
#: :func:`imitates_mark` accepts holds such a run, so a text without one needs no line read.
_MAYBE_MARK = re2.compile(r"[(\[{<][^A-Za-z\n]*" + r"[^A-Za-z\n]*".join(f"[{c}{c.upper()}]" for c in MARK_WORD))


def neutralise(text: str) -> str:
    """Tool text as the model may read it: every line that imitates a mark
    (:func:`imitates_mark`) quoted as the tool's, :data:`TOOL_LINE` before it; every other
    character as it was. Lines are split where any reader may break them (``str.splitlines``:
    ``\\n``, ``\\r``, form feed, U+2028 …). Idempotent; a text without such a line comes back as
    it is."""
    if not text or (text.isascii() and _CONTROL.search(text) is None and _MAYBE_MARK.search(text) is None):
        return text  # plain ASCII with no bracket before the letters of the mark: no line can imitate it
    lines = text.splitlines(keepends=True)
    if not any(imitates_mark(line) for line in lines):
        return text
    return "".join(TOOL_LINE + line if imitates_mark(line) else line for line in lines)


#: A marked note's start, as a paragraph of content: the tool's words end before it.
_NOTE_START = re2.compile(r"\n\n\[" + MARK_WORD + r"(?: [0-9a-f]{" + str(NONCE_HEX) + r"})?\]")


def tool_words(content: str) -> str:
    """The part of a decision's ``content`` before unstuck's first note paragraph (a line
    starting with a mark, marked or not, after a blank line): what the tool said."""
    found = _NOTE_START.search(content)
    return content if found is None else content[:found.start()]


def says(content: str, words: str) -> bool:
    """A line of ``content`` is a marked note (a mark with a nonce) whose text starts with
    ``words`` (``says(content, "BLOCKED")``): how a reader of decisions (a scripted agent)
    tells unstuck's note from the tool's text, which never starts so (:func:`neutralise`)."""
    prefix = f"[{MARK_WORD} "
    for line in content.split("\n"):
        if line.startswith(prefix) and is_nonce(line[len(prefix):len(prefix) + NONCE_HEX]) \
                and line[len(prefix) + NONCE_HEX:].startswith(f"] {words}"):
            return True
    return False
