"""Bounded, capped retries of what waiting can fix (DESIGN.md, "Defaults").
Internal: not a supported import path (docs/reference/index.md lists those that are).

Only transient situations that are ``retryable`` are retried, each kind a fixed number of
times with exponential backoff capped at :data:`CAP_S`::

    delay(attempt) = min(base · 2^(attempt − 1), 300 s)          attempt = 1, 2, ...

A server's wait (``retry_after_s``, from a Retry-After header or the wording) is honoured up
to the cap; a wait beyond the cap is not slept through: the situation becomes a blocker on
its subject instead ("rate limit resets in 3600 s"), as does a kind whose retries ran out.
Auth, permission, not_installed, a spent quota and every self-fixable kind are never
retried. Pure: no clock is read and nothing sleeps here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from unstuck.core.situations import Kind, KindClass, Situation

__all__ = ["CAP_S", "RETRY_RULES", "RetryRule", "backoff_delay", "full_jitter", "next_retry", "waitable"]

#: The longest single wait, in seconds.
CAP_S = 300.0


@dataclass(frozen=True, slots=True)
class RetryRule:
    """A kind's attempt ceiling (the first call included) and its first wait in seconds."""

    attempts: int
    base_s: float


#: Per-kind attempt ceilings and bases (DESIGN.md; seed 002 section 1: "Timeout has a
#: two-attempt ceiling; capacity, overload, rate-limit and transport failures have a
#: three-attempt ceiling"): timeout 2 attempts, base 5 s; unavailable 3, 30 s; network 3,
#: 10 s; a rate-limited (retryable) quota 3, 60 s. Added here: a retryable conflict, i.e. a
#: lock another process holds ("database is locked"), 3 attempts, 5 s: the one self-fixable
#: kind that waiting can fix, and that blocks its subject when waiting does not.
RETRY_RULES: Mapping[Kind, RetryRule] = {
    Kind.TIMEOUT: RetryRule(2, 5.0),
    Kind.UNAVAILABLE: RetryRule(3, 30.0),
    Kind.NETWORK: RetryRule(3, 10.0),
    Kind.QUOTA: RetryRule(3, 60.0),
    Kind.CONFLICT: RetryRule(3, 5.0),
}


def backoff_delay(rule: RetryRule, attempt: int, retry_after_s: float | None = None, *, cap_s: float = CAP_S) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based).

    The server's ``retry_after_s``, when given, replaces the computed backoff; both are
    capped at ``cap_s``.

    Raises:
        ValueError: for an attempt below 1.
    """
    if attempt < 1:
        raise ValueError(f"retry attempts count from 1, got {attempt}")
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), cap_s)
    return float(min(rule.base_s * 2 ** (attempt - 1), cap_s))


def full_jitter(delay_s: float, draw: float) -> float:
    """Full jitter: a uniformly random wait in [0, ``delay_s``), given a ``draw`` in [0, 1)
    from the caller's random source (so this stays pure and testable).

    Source: "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015): ``sleep =
    random_between(0, min(cap, base · 2^attempt))``; it spreads the retries of many clients
    hitting one limit. Off by default; a server's own Retry-After is never jittered.

    Raises:
        ValueError: when ``draw`` is outside [0, 1).
    """
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"a jitter draw is within [0, 1), got {draw!r}")
    return delay_s * draw


def waitable(situation: Situation | None) -> bool:
    """True when waiting may fix ``situation``: it is retryable and of a kind with a rule
    (a transient kind, or a lock another process holds).
    """
    if situation is None or not situation.retryable or situation.kind not in RETRY_RULES:
        return False
    return situation.kind_class in (KindClass.TRANSIENT, KindClass.SELF_FIXABLE)


def next_retry(situation: Situation | None, retries_so_far: int, *, cap_s: float = CAP_S) -> float | None:
    """The wait before retrying a call whose result was ``situation``, or ``None`` when it
    must not be retried (not transient, retries used up, or a server wait beyond the cap).

    ``retries_so_far`` counts the retries already made (so attempt ``retries_so_far + 1``
    just failed); the kind's attempt ceiling includes the first call.
    """
    if not waitable(situation):
        return None
    assert situation is not None
    rule = RETRY_RULES.get(situation.kind)
    if rule is None or retries_so_far + 1 >= rule.attempts:
        return None
    if situation.retry_after_s is not None and situation.retry_after_s > cap_s:
        return None
    return backoff_delay(rule, retries_so_far + 1, situation.retry_after_s, cap_s=cap_s)
