"""The concept lexicon: causes said in plain words, matched as terms that meet in a sentence.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A wording row (``data/signals.yaml``) lists phrases; a *concept* (``data/concepts.yaml``) lists
the words of a kind of fault and the negations or modalities that make them a failure, so "you
must be authenticated to view this", "sign-in required", "authorisation required" and "please
log in again" are one concept (a sign-in demanded) without one row each. The classifier reads
concepts after the wording rows, the code tables, the status and the weak rows, and before the
``execution_error`` fallback (:mod:`unstuck.recognise.classify`); ``unstuck classify --explain`` names
the concept and the words that matched.

How a concept matches (:meth:`Lexicon.find`): the text is lower-cased, ``_`` read as a space,
and cut into sentences (lines, cut again after ``.``, ``;``, ``!`` or ``?`` followed by a
space). A concept matches the first sentence that holds a term of every one of its groups and
none of its ``unless`` terms (nor the lexicon's shared ones). Terms match as whole words;
:func:`term_forms` gives each term its inflections and spelling variants (see the data file's
header). Every pattern compiles under google-re2, so the cost is linear in the text.

Sources of the vocabulary are named per group in the data file (RFC 9110/7235/6749/6750, vendor
error references, the message catalogues).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from unstuck.core.cache import bundled_document
from unstuck.core.errors import UnstuckError
from unstuck.core.readers import parse_yaml
from unstuck.core.situations import Kind

__all__ = [
    "Concept",
    "ConceptError",
    "ConceptMatch",
    "Lexicon",
    "load_lexicon",
    "parse_lexicon",
    "term_forms",
]

#: A sentence longer than this is read only up to it (a JSON document on one line).
_SENTENCE_CHARS = 2_000
#: At most this many sentences are read (the classifier's window already bounds the text).
_MAX_SENTENCES = 4_000

_CONCEPT_KEYS = frozenset({"name", "kind", "interactive", "retryable", "source", "groups", "unless"})
_GROUP_KEYS = frozenset({"name", "terms", "source"})


class ConceptError(UnstuckError, ValueError):
    """The concept file is malformed; the message names the concept and the field."""


@dataclass(frozen=True, slots=True)
class Concept:
    """One concept: its verdict, its groups of terms (each compiled to one re2 pattern) and
    what voids it.

    Attributes:
        name: a short name (``"sign-in required"``).
        kind, interactive, retryable: the verdict it gives.
        source: the documents its pairing of groups comes from.
        groups: ``(group name, source, terms)`` for each group, terms as written.
        unless: terms that void a match in the same sentence.
    """

    name: str
    kind: Kind
    interactive: bool
    retryable: bool
    source: str
    groups: tuple[tuple[str, str, tuple[str, ...]], ...]
    unless: tuple[str, ...]
    patterns: tuple[Any, ...]
    unless_pattern: Any


@dataclass(frozen=True, slots=True)
class ConceptMatch:
    """Where a concept matched: the sentence (as lower-cased) and the words each group matched."""

    concept: Concept
    start: int
    end: int
    words: tuple[str, ...]

    def describe(self) -> str:
        """``"must + authenticated"``: the words that matched, one per group."""
        return " + ".join(self.words)


# --------------------------------------------------------------------------- morphology

_VOWELS = frozenset("aeiou")


def _inflections(word: str) -> set[str]:
    """A word's regular inflections (English): -s/-es, -ed/-d, -ing, -ies/-ied for a consonant
    + y, a doubled final consonant for a short word (``log`` → ``logged``, ``logging``), and the
    nouns of -ate and -ize verbs (``authenticate`` → ``authentication``; ``authorize`` →
    ``authorization``)."""
    forms = {word}
    if not word.isalpha() or len(word) < 3:
        return forms | ({word + "s"} if word.isalpha() else set())
    if word.endswith("e"):
        forms |= {word + "s", word + "d", word[:-1] + "ing"}
        if word.endswith(("ate", "ize", "ise")):
            forms |= {word[:-1] + "ion", word[:-1] + "ions"} if word.endswith("ate") else {
                word[:-1] + "ation", word[:-1] + "ations"}
    elif word.endswith("y") and word[-2] not in _VOWELS:
        forms |= {word[:-1] + "ies", word[:-1] + "ied", word + "ing"}
    elif word.endswith(("s", "x", "z", "ch", "sh")):
        forms |= {word + "es", word + "ed", word + "ing"}
    elif (len(word) <= 4 and word[-1] not in _VOWELS and word[-1] not in "wxy"
          and word[-2] in _VOWELS and word[-3] not in _VOWELS):
        forms |= {word + "s", word + word[-1] + "ed", word + word[-1] + "ing"}
    else:
        forms |= {word + "s", word + "ed", word + "ing"}
    return forms


#: Second words that make a two-word term a phrasal verb, whose first word inflects
#: (``sign in`` → ``signed in``); any other phrase is matched as written (``read only``).
_PARTICLES = frozenset({"in", "on", "out", "up", "off", "into"})


def _spellings(form: str) -> set[str]:
    """British and American spellings of a form: -ize/-ise (and -ization/-isation), -yze/-yse,
    licence/license (Oxford and Merriam-Webster spelling notes)."""
    found = {form}
    for american, british in (("iz", "is"), ("yz", "ys"), ("licens", "licenc")):
        for spelled in list(found):
            if american in spelled and (american != "iz" or any(spelled.find(a) != -1 for a in ("ize", "iza", "izi"))):
                found.add(spelled.replace(american, british))
            if british in spelled and american in ("licens",):
                found.add(spelled.replace(british, american))
    if "licenc" in form:
        found.add(form.replace("licenc", "licens"))
    return found


def term_forms(term: str) -> tuple[str, ...]:
    """Every form of ``term`` that matches (sorted, longest first): its inflections (of a
    one-word term, or of a phrase's first word), spelling variants, and, for a two-word
    phrase, its hyphenated and joined forms. A term written ``=word`` is itself only."""
    if term.startswith("="):
        return (term[1:],)
    words = term.split()
    firsts = _inflections(words[0]) if len(words) == 1 or (len(words) == 2 and words[1] in _PARTICLES) else {
        words[0]}
    phrases = {" ".join([first, *words[1:]]) for first in firsts}
    if len(words) == 2:
        phrases |= {p.replace(" ", "-", 1) for p in phrases} | {p.replace(" ", "", 1) for p in phrases}
    forms: set[str] = set()
    for phrase in phrases:
        forms |= _spellings(phrase)
    return tuple(sorted(forms, key=lambda f: (-len(f), f)))


def _pattern(terms: Iterable[str]) -> str:
    alternatives: dict[str, None] = {}
    for term in terms:
        for form in term_forms(term):
            escaped = re2.escape(form).replace("\\ ", "[ \\t-]+").replace("\\-", "[ \\t-]*")
            alternatives[escaped] = None
    return r"\b(" + "|".join(alternatives) + r")\b"


# --------------------------------------------------------------------------- loading


def _fail(where: str, problem: str) -> ConceptError:
    return ConceptError(f"concepts.yaml {where}: {problem}")


def _terms(where: str, raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(t, str) and t.strip() for t in raw):
        raise _fail(where, "terms must be a non-empty list of words")
    terms = tuple(str(t).strip() for t in raw)
    for term in terms:
        if term != term.lower():
            raise _fail(where, f"term {term!r} has an upper-case letter; text is matched in lower case")
    return terms


def _text(where: str, raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"{key} must be a non-empty string")
    return value.strip()


def _flag(where: str, raw: Mapping[str, Any], key: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise _fail(where, f"{key} must be true or false, got {value!r}")
    return value


def _concept(index: int, raw: object, shared: tuple[str, ...]) -> Concept:
    where = f"concept {index}"
    if not isinstance(raw, Mapping):
        raise _fail(where, "must be a mapping")
    name = _text(where, raw, "name")
    where = f"concept {index} ({name})"
    unknown = sorted(set(map(str, raw)) - _CONCEPT_KEYS)
    if unknown:
        raise _fail(where, f"unknown field(s) {', '.join(unknown)}")
    try:
        kind = Kind(str(raw.get("kind")))
    except ValueError:
        raise _fail(where, f"unknown kind {raw.get('kind')!r}") from None
    groups_raw = raw.get("groups")
    if not isinstance(groups_raw, list) or not groups_raw:
        raise _fail(where, "groups must be a non-empty list")
    groups: list[tuple[str, str, tuple[str, ...]]] = []
    for number, group in enumerate(groups_raw, start=1):
        at = f"{where} group {number}"
        if not isinstance(group, Mapping):
            raise _fail(at, "must be a mapping")
        extra = sorted(set(map(str, group)) - _GROUP_KEYS)
        if extra:
            raise _fail(at, f"unknown field(s) {', '.join(extra)}")
        groups.append((_text(at, group, "name"), _text(at, group, "source"), _terms(at, group.get("terms"))))
    own = _terms(f"{where} unless", raw["unless"]) if "unless" in raw else ()
    unless = (*own, *shared)
    return Concept(
        name=name, kind=kind, interactive=_flag(where, raw, "interactive"), retryable=_flag(where, raw, "retryable"),
        source=_text(where, raw, "source"), groups=tuple(groups), unless=unless,
        patterns=tuple(re2.compile(_pattern(terms)) for _, _, terms in groups),
        unless_pattern=re2.compile(_pattern(unless)) if unless else None,
    )


def _sentences(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` byte offsets of each sentence of ``data``: its lines, cut again after
    ``.``, ``;``, ``!`` or ``?`` followed by a space."""
    spans: list[tuple[int, int]] = []
    position = 0
    length = len(data)
    while position < length and len(spans) < _MAX_SENTENCES:
        line_end = data.find(b"\n", position)
        line_end = length if line_end == -1 else line_end
        start = position
        while start < line_end:
            cut = line_end
            for mark in (b". ", b"; ", b"! ", b"? "):
                found = data.find(mark, start, line_end)
                if found != -1 and found < cut:
                    cut = found + 1
            spans.append((start, min(cut, start + _SENTENCE_CHARS)))
            start = cut if cut > start else line_end
        position = line_end + 1
    return spans


#: At most this many matches of one group are read (a term repeated down a long log).
_MAX_HITS = 512


class Lexicon:
    """The compiled concepts, in order, with one pattern of every term to skip a text that
    holds none. Text is matched as UTF-8 bytes (every term is ASCII), each group's pattern
    once over the whole text, its matches assigned to sentences."""

    def __init__(self, concepts: Sequence[Concept]) -> None:
        self.concepts = tuple(concepts)
        terms = [term for concept in self.concepts for _, _, group in concept.groups[:1] for term in group]
        self._any = re2.compile(_pattern(terms).encode()) if terms else None
        self._bytes = {id(p): re2.compile(p.pattern.encode()) for c in self.concepts for p in c.patterns}
        self._unless = {c.name: re2.compile(c.unless_pattern.pattern.encode()) for c in self.concepts
                        if c.unless_pattern is not None}

    def find(self, lowered: str) -> ConceptMatch | None:
        """The first concept that matches a sentence of ``lowered`` (lower-cased text), by
        concept order, then sentence order; ``None`` when none does. Offsets are characters
        of ``lowered``."""
        if self._any is None:
            return None
        data = lowered.replace("_", " ").encode("utf-8")
        if self._any.search(data) is None:
            return None
        spans = _sentences(data)
        starts = [start for start, _ in spans]
        hits: dict[int, dict[int, str]] = {}

        def sentences_of(pattern: Any) -> dict[int, str]:
            key = id(pattern)
            if key not in hits:
                found: dict[int, str] = {}
                for count, match in enumerate(self._bytes[key].finditer(data)):
                    if count >= _MAX_HITS:
                        break
                    index = bisect.bisect_right(starts, match.start()) - 1
                    if index >= 0 and match.end() <= spans[index][1]:
                        found.setdefault(index, match.group(1).decode("utf-8", "replace"))
                hits[key] = found
            return hits[key]

        for concept in self.concepts:
            groups: list[dict[int, str]] = []
            common: set[int] | None = None
            for pattern in concept.patterns:
                found = sentences_of(pattern)
                common = set(found) if common is None else common & found.keys()
                if not common:
                    break
                groups.append(found)
            if not common:
                continue
            unless = self._unless.get(concept.name)
            for index in sorted(common):
                start, end = spans[index]
                if unless is not None and unless.search(data[start:end]) is not None:
                    continue
                first = len(data[:start].decode("utf-8", "ignore"))
                last = first + len(data[start:end].decode("utf-8", "ignore"))
                return ConceptMatch(concept, first, last, tuple(group[index] for group in groups))
        return None


def parse_lexicon(text: str, *, where: str = "concepts.yaml") -> Lexicon:
    """A lexicon from the text of a concept file (the format of ``data/concepts.yaml``).

    Raises:
        ConceptError: naming the concept and the field, for a malformed file.
    """
    return _lexicon(parse_yaml(text, where=where, error=ConceptError), where)


def _lexicon(data: object, where: str) -> Lexicon:
    if not isinstance(data, Mapping) or not isinstance(data.get("concepts"), list):
        raise ConceptError(f"{where}: needs a list of concepts")
    shared_raw = data.get("unless")
    shared: tuple[str, ...] = ()
    if shared_raw is not None:
        if not isinstance(shared_raw, Mapping):
            raise ConceptError(f"{where}: unless must be a mapping with terms and a source")
        _text("unless", shared_raw, "source")
        shared = _terms("unless", shared_raw.get("terms"))
    concepts = [_concept(index, raw, shared) for index, raw in enumerate(data["concepts"], start=1)]
    names = [c.name for c in concepts]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConceptError(f"{where}: concept names repeated: {', '.join(repeated)}")
    return Lexicon(concepts)


@functools.cache
def load_lexicon() -> Lexicon:
    """The bundled lexicon (``data/concepts.yaml``), compiled once per process."""
    return _lexicon(bundled_document("concepts.yaml", _document), "concepts.yaml")


def _document(text: str) -> object:
    return parse_yaml(text, where="concepts.yaml", error=ConceptError)
