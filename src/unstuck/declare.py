"""Declared situations for common channels, for tool authors to return.

An ``unblock`` written here is an action in words, so it starts with a capital letter (the
escalation shows it as is; a lower-case unblock is a command and is shown as "Run: ...").

A tool knows more than its output shows: an HTTP tool has the status and headers, a shell
tool knows when its own permission rules refused a command, a file tool can see who holds a
lock. These pure functions turn that knowledge into a declared :class:`Situation` (which the
loop prefers to anything inferred from the text):

* :func:`declare_http`: 401 and 407 → ``auth``; 403 → ``permission``, or a retryable
  ``quota`` when rate-limit headers say the limit is spent; 429 → a retryable ``quota`` with
  the server's wait. Sources: RFC 9110 §15.5.2 (401, with ``WWW-Authenticate``), §15.5.4
  (403), §15.5.8 (407), §10.2.3 (``Retry-After``: delay-seconds or an HTTP-date); RFC 6585
  §4 (429); GitHub's REST API docs, "Rate limits" (403 or 429 with ``x-ratelimit-remaining:
  0`` and ``x-ratelimit-reset`` in epoch seconds, or ``retry-after`` for secondary limits).
* :func:`declare_refusal`: a shell tool's permission rules refused a command (it never
  ran) → ``permission`` on the program, with what to allow.
* :func:`declare_lock`: another live process holds a lock on a file → a retryable
  ``conflict`` on that file naming the holders (waiting may fix it; the retry table bounds
  the wait, then the file is a blocker).

Nothing here reads a clock: the current time comes in as ``now_s`` (epoch seconds).
"""

from __future__ import annotations

import datetime
import email.utils
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from unstuck.situations import Kind, Probe, Situation

__all__ = ["LockHolder", "declare_http", "declare_lock", "declare_refusal", "retry_after_seconds"]


def _header(headers: Mapping[str, str] | Sequence[tuple[str, str]], name: str) -> str | None:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    wanted = name.lower()
    return next((value for key, value in pairs if key.lower() == wanted), None)


def retry_after_seconds(headers: Mapping[str, str] | Sequence[tuple[str, str]], *, now_s: float) -> float | None:
    """The server's requested wait in seconds, or ``None`` when it names none.

    Read in order: ``Retry-After`` as delay-seconds or as an HTTP-date (RFC 9110 §10.2.3),
    then ``X-RateLimit-Reset`` as epoch seconds (GitHub, and many APIs after it). A time in
    the past gives 0. Malformed values are ignored, never raised.
    """
    retry_after = _header(headers, "retry-after")
    if retry_after is not None:
        text = retry_after.strip()
        if text.isdigit():
            return float(text)
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None and when.tzinfo is not None:
            return max(when.timestamp() - now_s, 0.0)
    reset = _header(headers, "x-ratelimit-reset")
    if reset is not None and reset.strip().isdigit():
        return max(float(reset.strip()) - now_s, 0.0)
    return None


def _challenge(headers: Mapping[str, str] | Sequence[tuple[str, str]], name: str) -> str:
    value = _header(headers, name)
    return f" ({name}: {value})" if value else ""


def declare_http(
    status: int,
    headers: Mapping[str, str] | Sequence[tuple[str, str]],
    subject: str,
    *,
    now_s: float,
    probe: Probe | None = None,
) -> Situation | None:
    """The situation an HTTP response declares for a call on ``subject`` (a host or API
    name), or ``None`` for a status this function has no rule for (the classifier then
    infers from the body).

    Args:
        status: the response's status code.
        headers: its headers, as a mapping or (name, value) pairs.
        subject: what the call was about, e.g. ``api.github.com``.
        now_s: the current time in epoch seconds (for ``X-RateLimit-Reset`` and HTTP-dates).
        probe: a read-only call that re-checks the situation, if the tool has one.
    """
    if status in (401, 407):
        proxy = status == 407
        where = "the proxy" if proxy else subject
        challenge = _challenge(headers, "proxy-authenticate" if proxy else "www-authenticate")
        return Situation(
            Kind.AUTH, where if proxy else subject, unblock=f"Provide valid credentials for {where}.", probe=probe,
            detail=f"HTTP {status}: {where} requires authentication{challenge}",
        )
    wait = retry_after_seconds(headers, now_s=now_s)
    spent = (_header(headers, "x-ratelimit-remaining") or "").strip() == "0"
    if status == 429 or (status == 403 and (spent or _header(headers, "retry-after") is not None)):
        resets = ""
        if wait is not None:
            at = datetime.datetime.fromtimestamp(now_s + wait, tz=datetime.UTC)
            resets = f"; it resets at {at:%H:%M} UTC, in {wait:.0f} s"
        return Situation(
            Kind.QUOTA, subject, retryable=True, retry_after_s=wait, probe=probe,
            detail=f"HTTP {status}: {subject}'s rate limit is spent{resets}",
        )
    if status == 403:
        return Situation(
            Kind.PERMISSION, subject, unblock=f"Grant this account access to the resource on {subject}.", probe=probe,
            detail=f"HTTP 403: {subject} refused access",
        )
    return None


def declare_refusal(program: str, command: str, rule: str) -> Situation:
    """A shell tool refused to run ``command`` under its own permission ``rule`` (it never
    ran): ``permission`` on ``program``, with what the user must allow.
    """
    return Situation(
        Kind.PERMISSION, program, unblock=f"Allow `{program}` in the shell tool's permissions ({rule}).",
        detail=f"the shell tool refused `{command}`: {rule}",
    )


@dataclass(frozen=True, slots=True)
class LockHolder:
    """A process holding a lock: its pid, its command name, and the lock's type as
    ``/proc/locks`` names it (``FLOCK``, ``POSIX``, ``OFDLCK``) and access (``READ``/``WRITE``)."""

    pid: int
    command: str
    lock_type: str = "FLOCK"
    access: str = "WRITE"


def declare_lock(path: str, holders: Sequence[LockHolder], *, probe: Probe | None = None) -> Situation:
    """Another live process holds a lock on ``path``: a retryable ``conflict`` on the path,
    naming the holders, with the user's two ways out (wait, or end the holder).

    Raises:
        ValueError: when ``holders`` is empty (no lock, nothing to declare).
    """
    if not holders:
        raise ValueError(f"declare_lock({path!r}) needs at least one holder")
    named = ", ".join(f"pid {h.pid} ({h.command}, {h.lock_type} {h.access})" for h in holders)
    first = holders[0]
    return Situation(
        Kind.CONFLICT, path, retryable=True, probe=probe,
        unblock=f"Let pid {first.pid} ({first.command}) finish, or stop it, so {path} is released.",
        detail=f"{path} is locked by {named}",
    )
