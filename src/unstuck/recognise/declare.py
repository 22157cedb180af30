"""Declared situations for common channels, for tool authors to return.
Internal: not a supported import path (docs/reference/index.md lists those that are).

An ``unblock`` written here is an action in words, a sentence with a capital letter and a
full stop, which the escalation shows as is (anything else is a command: "Run: ...").

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
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from unstuck.core.situations import Kind, Probe, Situation
from unstuck.recognise.classify import Stage, explain_output

__all__ = ["LockHolder", "declare_http", "declare_lock", "declare_refusal", "retry_after_seconds"]


def _header(headers: Mapping[str, str] | Sequence[tuple[str, str]], name: str) -> str | None:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    wanted = name.lower()
    return next((value for key, value in pairs if key.lower() == wanted), None)


_NUMBER = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,9})?")
#: Epoch values above this are milliseconds (year 5138 in seconds).
_EPOCH_MS_ABOVE = 1e11
#: Reset values below this are a delay in seconds, not an epoch (2001-09-09 as an epoch).
_DELTA_BELOW = 1e9
#: Waits beyond this (ten years) are nonsense, and ignored.
_LONGEST_S = 10 * 365 * 86400.0


def _number(text: str) -> float | None:
    text = text.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


def retry_after_seconds(headers: Mapping[str, str] | Sequence[tuple[str, str]], *, now_s: float) -> float | None:
    """The server's requested wait in seconds, or ``None`` when it names none.

    Read in order: ``Retry-After`` as delay-seconds or as an HTTP-date (RFC 9110 §10.2.3;
    a decimal is accepted too), then ``X-RateLimit-Reset`` as an epoch in seconds (GitHub),
    in milliseconds (above 10^11), or as a delay in seconds (below 10^9, as some APIs send
    it). A time in the past gives 0. Malformed values and waits over ten years are ignored,
    never raised on.
    """
    wait: float | None = None
    retry_after = _header(headers, "retry-after")
    if retry_after is not None:
        wait = _number(retry_after)
        if wait is None:
            try:
                when = email.utils.parsedate_to_datetime(retry_after.strip())
            except (TypeError, ValueError, IndexError, OverflowError):
                when = None
            if when is not None:
                stamp = when.timestamp() if when.tzinfo is not None else when.replace(tzinfo=datetime.UTC).timestamp()
                wait = max(stamp - now_s, 0.0)
    if wait is None:
        reset = _number(_header(headers, "x-ratelimit-reset") or "")
        if reset is not None:
            epoch = reset / 1000 if reset > _EPOCH_MS_ABOVE else reset
            wait = reset if reset < _DELTA_BELOW else max(epoch - now_s, 0.0)
    if wait is None or not math.isfinite(wait) or wait > _LONGEST_S:
        return None
    return wait


def _resets_at(now_s: float, wait: float) -> str:
    """``"13:00 UTC"`` (or with the date when it is not within a day), never raising."""
    try:
        at = datetime.datetime.fromtimestamp(now_s + wait, tz=datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return f"in {wait:.0f} s"
    return f"{at:%H:%M} UTC" if wait < 86400 else f"{at:%Y-%m-%d %H:%M} UTC"


def _challenge(headers: Mapping[str, str] | Sequence[tuple[str, str]], name: str) -> str:
    value = _header(headers, name)
    return f" ({name}: {value})" if value else ""


def declare_http(
    status: int,
    headers: Mapping[str, str] | Sequence[tuple[str, str]],
    subject: str,
    *,
    now_s: float,
    body: str = "",
    probe: Probe | None = None,
) -> Situation | None:
    """The situation an HTTP response declares for a call on ``subject`` (a host or API
    name), or ``None`` for a status this function has no rule for (the classifier then
    infers from the body).

    The status and headers decide, except where the body names a more specific cause (a
    wording row or a machine code, :mod:`unstuck.recognise.classify`'s precedence): a 429 or 403 whose
    body reads as a spent balance (``insufficient_quota``, "credit balance is too low") is a
    quota that waiting will not fix; a 403 whose body reads as a rate limit ("secondary rate
    limit") is a retryable quota even without rate-limit headers; a 403 whose body names a
    sign-in (SAML single sign-on, an expired session) is ``auth``, interactive when the body's
    remedy needs a person; a 403 whose body names a missing scope or role stays
    ``permission``, interactive when the grant needs a person in a browser.

    Args:
        status: the response's status code.
        headers: its headers, as a mapping or (name, value) pairs.
        subject: what the call was about, e.g. ``api.github.com``; the situation's subject.
        now_s: the current time in epoch seconds (for ``X-RateLimit-Reset`` and HTTP-dates).
        body: the response body (text), when there is one.
        probe: a read-only call that re-checks the situation, if the tool has one.
    """
    found = explain_output("http", {}, body, http_status=status) if body else None
    # A body that names a specific cause (a wording row or a machine code, not the bare
    # status) beats the status: a 403 whose body names SAML single sign-on is a sign-in.
    worded = found.situation if found is not None else None
    specific = worded if found is not None and found.decided_by is not None and found.decided_by.stage in (
        Stage.CAUSE, Stage.CODE) else None
    if status in (401, 407) or (status == 403 and specific is not None and specific.kind is Kind.AUTH):
        challenge = _challenge(headers, "proxy-authenticate" if status == 407 else "www-authenticate")
        needs = "the proxy requires authentication" if status == 407 else f"{subject} requires authentication"
        said = f" ({specific.detail})" if specific is not None and specific.kind is Kind.AUTH else ""
        return Situation(
            Kind.AUTH, subject, probe=probe, detail=f"HTTP {status}: {needs}{challenge}{said}",
            interactive=specific is not None and specific.kind is Kind.AUTH and specific.interactive,
            unblock=f"Provide valid credentials for {'the proxy' if status == 407 else subject}.",
        )
    if status not in (403, 429):
        return None
    if worded is not None and worded.kind is Kind.QUOTA and not worded.retryable:
        return Situation(
            Kind.QUOTA, subject, probe=probe,
            unblock=f"Add credit to, or raise the quota of, the account on {subject}.",
            detail=f"HTTP {status}: {subject} says the account's quota or balance is spent ({worded.detail})",
        )
    wait = retry_after_seconds(headers, now_s=now_s)
    spent = (_header(headers, "x-ratelimit-remaining") or "").strip() == "0"
    limited = spent or _header(headers, "retry-after") is not None or (worded is not None and worded.kind is Kind.QUOTA)
    if status == 429 or limited:
        resets = f"; it resets at {_resets_at(now_s, wait)}, in {wait:.0f} s" if wait is not None else ""
        return Situation(
            Kind.QUOTA, subject, retryable=True, retry_after_s=wait, probe=probe,
            detail=f"HTTP {status}: {subject}'s rate limit is spent{resets}",
        )
    said = f" ({specific.detail})" if specific is not None and specific.kind is Kind.PERMISSION else ""
    return Situation(
        Kind.PERMISSION, subject, unblock=f"Grant this account access to the resource on {subject}.", probe=probe,
        interactive=specific is not None and specific.kind is Kind.PERMISSION and specific.interactive,
        detail=f"HTTP 403: {subject} refused access{said}",
    )


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
    named = ", ".join(f"{_holder(h)} holding a {h.lock_type} {h.access.lower()} lock" for h in holders)
    return Situation(
        Kind.CONFLICT, path, retryable=True, probe=probe,
        unblock=f"Let {_holder(holders[0])} finish, or stop it, so {path} is released.",
        detail=f"{path} is locked by {named}",
    )


def _holder(holder: LockHolder) -> str:
    """``pid 42 (python3)``; an open file description lock names no pid."""
    if holder.pid <= 0:
        return "the process holding an open-file-description lock (its pid is not shown)"
    return f"pid {holder.pid} ({holder.command})"
