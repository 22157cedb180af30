"""Secrets of every known format, made from ``tests/data/secret_samples.yaml`` (each issuer's
documented prefix and shape, with its source), for the tests that check no secret is stored or
shown. Built from that file only, never from :mod:`unstuck.core.redact`'s own patterns.

:func:`samples` gives each sample's text (its template with every ``{ALPHABET:N}`` piece filled
with random characters of the alphabet, from a fixed seed, so a failure repeats) and its
secret material: every random piece of 8 or more characters, which nothing unstuck writes or
prints may contain.
"""

from __future__ import annotations

import functools
import random
import re
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

__all__ = ["SAMPLES_FILE", "Sample", "samples"]

#: The sourced list.
SAMPLES_FILE = Path(__file__).parent / "data" / "secret_samples.yaml"

_ALPHABETS = {
    "base62": string.ascii_letters + string.digits,
    "base64url": string.ascii_letters + string.digits + "_-",
    "base64": string.ascii_letters + string.digits + "+/",
    "hex": "0123456789abcdef",
    "upper_digits": string.ascii_uppercase + string.digits,
    "lower_digits": string.ascii_lowercase + string.digits,
    "alpha": string.ascii_letters,
    "digits": string.digits,
    "bech32": "023456789ACDEFGHJKLMNPQRSTUVWXYZ",  # BIP 173's data characters, upper case (age)
}
_PIECE = re.compile(r"\{(" + "|".join(_ALPHABETS) + r"):(\d+)\}")
#: Random pieces this long or longer are secret material (shorter ones, such as the two digits of
#: a Mailchimp data centre, are not).
_SECRET_MIN = 8


@dataclass(frozen=True, slots=True)
class Sample:
    """One secret as it appears: ``text``; ``secrets``, its random pieces that must never be
    found anywhere unstuck writes or prints; the issuer's ``source``."""

    name: str
    text: str
    secrets: tuple[str, ...]
    source: str


def _fill(rng: random.Random, match: re.Match[str], kept: list[str]) -> str:
    """One ``{ALPHABET:N}`` piece made; kept when it is secret material (8+ characters)."""
    alphabet, length = _ALPHABETS[match.group(1)], int(match.group(2))
    piece = "".join(rng.choice(alphabet) for _ in range(length))
    if length >= _SECRET_MIN:
        kept.append(piece)
    return piece


@functools.cache
def samples(seed: int = 23) -> tuple[Sample, ...]:
    """Every sample of :data:`SAMPLES_FILE`, filled from ``seed``.

    Raises:
        ValueError: a sample without a name, an ``https://`` source or a secret piece, or with
            an unknown ``{…}`` piece, naming the sample.
    """
    rng = random.Random(seed)
    raw = yaml.safe_load(SAMPLES_FILE.read_text(encoding="utf-8"))["samples"]
    made: list[Sample] = []
    for entry in raw:
        name, template, source = entry.get("name"), entry.get("template"), entry.get("source")
        if not (isinstance(name, str) and isinstance(template, str) and isinstance(source, str)
                and source.startswith("https://")):
            raise ValueError(f"{SAMPLES_FILE}: sample {entry!r} needs a name, a template and an https:// source")
        pieces: list[str] = []
        text = _PIECE.sub(lambda match, kept=pieces: _fill(rng, match, kept), template)
        if re.search(r"\{[a-z_0-9]+:\d+\}", text):
            raise ValueError(f"{SAMPLES_FILE}: sample {name!r} has an unknown piece in {template!r}")
        if not pieces:
            raise ValueError(f"{SAMPLES_FILE}: sample {name!r} has no random piece of {_SECRET_MIN}+ characters")
        made.append(Sample(name, text, tuple(pieces), source))
    return tuple(made)
