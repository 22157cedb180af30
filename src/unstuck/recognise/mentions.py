"""Whether an injection shape in a text is used or only mentioned: quoted or cited as an example
by a text about injections.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A security advisory, a README of an injection tester or a blog post about prompt injection
quotes the very words an attack uses ("Ignore previous instructions and ..."): the words are
the subject of the text, not an order to its reader. The classifier
(:mod:`unstuck.recognise.classify`) reads a successful result's adversarial rows through
:func:`is_mention` and reads a text as an injection only where one is used; the prose screen
(:func:`unstuck.recognise.instructions.find_instruction`) does not: what is stored or shown
refuses any instruction-shaped text, quoted or not.

A match is a mention when both hold (linguistics' use-mention distinction, marked in writing
by quotation marks or a citing phrase; The Chicago Manual of Style, 7.58 "words used as
words"):

* the text is about the subject: it names prompt injection, a jailbreak, an attack, an
  attacker or a payload, a vulnerability or an advisory (:data:`_TOPIC`; the vocabulary of
  OWASP Top 10 for LLM Applications 2025, LLM01 Prompt Injection, and of CVE advisories);
* the match is quoted or cited on its line: it lies inside quotation marks or a code span
  (straight, curly, guillemets, backticks) that close after it, or a citing phrase comes just
  before it ("such as", "like", "e.g.", "phrases", "containing", "says", or a reported order:
  "tells the model to").

Every pattern compiles under google-re2 (linear time).
"""

from __future__ import annotations

import re2

__all__ = ["about_injections", "is_mention"]

#: Words that make a text one about injections (OWASP LLM01's and advisories' vocabulary).
_TOPIC = re2.compile(
    r"\b(prompt[ -]?injections?|injection attacks?|indirect injections?|injected instructions?|jailbreak(s|ing)?|"
    r"jailbroken|adversarial (prompts?|instructions?|inputs?)|malicious (prompts?|instructions?|inputs?|payloads?)|"
    r"security advisory|cve-\d{4}-\d+|ghsa(-[a-z0-9]{4}){3}|red[ -]team(ing)?|owasp|llm01)\b")
#: A citing phrase just before a quoted or cited example, then at most a few words.
_CITING = re2.compile(
    r"(\b(such as|like|e\.g\.,?|for example,?|for instance,?|i\.e\.,?|phrases?|strings?|sentences?|texts?|"
    r"words|payloads?|prompts?|containing|contains?|saying|says|said|reads|called|known as|examples?|"
    r"instructions? (like|such as))\b|\b(tells?|told|instructs?|instructed|asks?|asked|tricks?|tricked|"
    r"convinces?|convinced|makes?|made|causes?|caused|forces?|forced|persuades?|persuaded|gets?|got)\b"
    r"[^.!?\n]{0,40}\bto)\s*[:\"'`“‘«*_]*\s*$")
#: Quotation marks that open and the marks that close them; a straight mark closes itself.
_PAIRS = {"\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb", "\u201e": "\u201c", '"': '"', "`": "`"}
#: Words before "to" that make it an order to the reader, not an infinitive of purpose.
_ADDRESSEES = frozenset({"you", "u", "ya", "agent", "assistant", "ai", "model", "llm", "bot", "yourself"})
#: How far back on its line a citing phrase may stand (characters).
_CITING_CHARS = 60


#: What stands before the opening quote of a JSON string (a member's value, an array's item):
#: a JSON document delivers its strings, it does not quote them (RFC 8259 section 7).
_JSON_OPENERS = ":,[{"


def _quoted(line: str, start: int, end: int) -> bool:
    """Whether ``line[start:end]`` lies inside a quotation that opens before it and closes at or
    after its end, on the same line: prose quotation marks, or a JSON string's escaped ones
    (``\\"``), never the quotes that delimit a JSON string itself."""
    escaped = line.replace('\\"', "\x01\x01")  # same length: offsets stay
    if escaped.count("\x01\x01", 0, start) % 2 == 1 and escaped.find("\x01\x01", end) != -1:
        return True
    for opener, closer in _PAIRS.items():
        if opener == closer:
            if escaped.count(opener, 0, start) % 2 == 1 and escaped.find(closer, end) != -1:
                before = escaped[:escaped.rfind(opener, 0, start)].rstrip()
                if not before or before[-1] not in _JSON_OPENERS:
                    return True
            continue
        opened_at = line.rfind(opener, 0, start)
        if opened_at != -1 and line.rfind(closer, opened_at + 1, start) == -1 and line.find(closer, end) != -1:
            return True
    # a single straight quote only right before the match (an apostrophe is no quotation mark)
    return start > 0 and line[start - 1] == "'" and line.find("'", end) != -1


def about_injections(lowered: str) -> bool:
    """Whether ``lowered`` (a text in lower case) names prompt injection, a jailbreak or an
    advisory: a text about the subject (see the module doc)."""
    return _TOPIC.search(lowered) is not None


def is_mention(lowered: str, start: int, end: int, *, about: bool | None = None) -> bool:
    """Whether the match at ``start:end`` of ``lowered`` (a text in lower case) is mentioned,
    not used: the text is about injections (``about``, when the caller already knows:
    :func:`about_injections`) and the match is quoted or cited on its line (see the module
    doc). Never raises."""
    if start < 0 or end > len(lowered) or start >= end:
        return False
    if not (about if about is not None else about_injections(lowered)):
        return False
    if lowered[start] == "\n":  # a row anchored on the line break before its line
        start += 1
    first = lowered.rfind("\n", 0, start) + 1
    last = lowered.find("\n", end)
    line = lowered[first:last if last != -1 else len(lowered)]
    at, to = start - first, min(end, first + len(line)) - first
    if _quoted(line, at, to):
        return True
    before = line[max(0, at - _CITING_CHARS):at]
    if _CITING.search(before) is not None:
        return True
    # an infinitive of purpose describes what the words do ("used ... to override the system
    # prompt"); "you to" is an order ("I want you to ignore ...")
    words = before.split()
    return len(words) >= 2 and words[-1] == "to" and words[-2] not in _ADDRESSEES
