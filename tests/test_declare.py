"""Declared situations from HTTP statuses and headers, shell refusals and file locks."""

from __future__ import annotations

import email.utils

import pytest

from unstuck.core.situations import Kind, Source
from unstuck.decide.prompts import user_action
from unstuck.recognise.declare import LockHolder, declare_http, declare_lock, declare_refusal, retry_after_seconds

NOW = 1_767_268_800.0  # 2026-01-01T12:00:00Z


def test_401_is_auth_naming_the_challenge() -> None:
    found = declare_http(401, {"WWW-Authenticate": 'Bearer realm="api"'}, "api.example.com", now_s=NOW)
    assert found is not None and (found.kind, found.subject, found.source) == (Kind.AUTH, "api.example.com", Source.DECLARED)
    assert 'Bearer realm="api"' in found.detail and found.unblock is not None


def test_407_is_auth_saying_the_proxy_wants_credentials_on_the_calls_subject() -> None:
    # the subject stays the call's, so a later success on it closes the blocker
    found = declare_http(407, [("Proxy-Authenticate", "Basic")], "api.example.com", now_s=NOW)
    assert found is not None and (found.kind, found.subject) == (Kind.AUTH, "api.example.com")
    assert "proxy" in found.detail and "proxy" in (found.unblock or "")


def test_403_without_rate_limit_headers_is_permission() -> None:
    found = declare_http(403, {}, "api.github.com", now_s=NOW)
    assert found is not None and found.kind is Kind.PERMISSION and not found.retryable


def test_403_with_a_spent_primary_limit_is_a_retryable_quota_until_the_reset() -> None:
    # GitHub: 403 with x-ratelimit-remaining 0 and x-ratelimit-reset in epoch seconds
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 3600)}
    found = declare_http(403, headers, "api.github.com", now_s=NOW)
    assert found is not None and (found.kind, found.retryable, found.retry_after_s) == (Kind.QUOTA, True, 3600.0)
    assert "resets at 13:00 UTC" in found.detail  # the user is told when, not only how long


def test_429_takes_retry_after_as_seconds() -> None:
    found = declare_http(429, {"Retry-After": "120"}, "api", now_s=NOW)
    assert found is not None and (found.kind, found.retryable, found.retry_after_s) == (Kind.QUOTA, True, 120.0)


def test_retry_after_as_an_http_date_is_the_seconds_until_then() -> None:
    when = email.utils.formatdate(NOW + 90, usegmt=True)  # RFC 9110 §10.2.3: an IMF-fixdate
    assert retry_after_seconds({"Retry-After": when}, now_s=NOW) == pytest.approx(90.0)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"X-RateLimit-Reset": str(int(NOW + 60) * 1000)}, 60.0),  # milliseconds since the epoch
        ({"X-RateLimit-Reset": "60"}, 60.0),  # a delay, as some APIs send it
        ({"X-RateLimit-Reset": f"{NOW + 30.5}"}, 30.5),  # a float epoch
        ({"Retry-After": "1.5"}, 1.5),
        ({"Retry-After": "9" * 12}, None),  # over ten years: nonsense
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "\u00b2"}, None),  # a digit to str.isdigit, not a number
        ({"Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"}, 0.0),  # past
    ],
)
def test_odd_wait_headers_are_read_or_ignored_never_raised_on(headers: dict[str, str], wait: float | None) -> None:
    assert retry_after_seconds(headers, now_s=NOW) == (pytest.approx(wait) if wait is not None else None)
    found = declare_http(429, headers, "api", now_s=NOW)
    assert found is not None and found.kind is Kind.QUOTA


def test_a_429_whose_body_says_the_balance_is_spent_is_a_quota_waiting_cannot_fix() -> None:
    body = '{"error": {"message": "You exceeded your current quota", "type": "insufficient_quota"}}'
    found = declare_http(429, {"Retry-After": "20"}, "api.openai.com", now_s=NOW, body=body)
    assert found is not None and (found.kind, found.retryable) == (Kind.QUOTA, False)
    assert found.is_blocker


def test_a_403_secondary_rate_limit_without_headers_is_a_retryable_quota() -> None:
    body = '{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}'
    found = declare_http(403, {}, "api.github.com", now_s=NOW, body=body)
    assert found is not None and (found.kind, found.retryable) == (Kind.QUOTA, True)


def test_a_reset_in_the_past_means_no_wait_and_garbage_means_unknown() -> None:
    assert retry_after_seconds({"X-RateLimit-Reset": str(int(NOW) - 5)}, now_s=NOW) == 0.0
    assert retry_after_seconds({"Retry-After": "soon-ish"}, now_s=NOW) is None
    found = declare_http(429, {"Retry-After": "soon-ish"}, "api", now_s=NOW)
    assert found is not None and found.retry_after_s is None


@pytest.mark.parametrize("status", [200, 304, 400, 404, 500, 502])
def test_statuses_without_a_rule_declare_nothing(status: int) -> None:
    assert declare_http(status, {}, "api", now_s=NOW) is None


def test_a_shell_refusal_is_permission_on_the_program_with_what_to_allow() -> None:
    found = declare_refusal("rm", "rm -rf build", "rm is denied in this workspace")
    assert (found.kind, found.subject) == (Kind.PERMISSION, "rm")
    assert user_action(found).startswith("Allow `rm`")  # an action in words is shown as is, not as "Run:"


def test_a_lock_is_a_retryable_conflict_on_the_file_naming_its_holder() -> None:
    found = declare_lock("data/app.db", [LockHolder(4242, "python3", "POSIX", "WRITE")])
    assert (found.kind, found.subject, found.retryable) == (Kind.CONFLICT, "data/app.db", True)
    assert "pid 4242 (python3) holding a POSIX write lock" in found.detail and "4242" in (found.unblock or "")
    ofd = declare_lock("data/app.db", [LockHolder(-1, "unknown", "OFDLCK", "WRITE")])
    assert "pid -1" not in (ofd.unblock or "") and "open-file-description lock" in (ofd.unblock or "")
    with pytest.raises(ValueError, match="at least one holder"):
        declare_lock("x", [])


def test_a_command_unblock_is_still_shown_as_run() -> None:
    from unstuck.core.situations import Situation

    assert user_action(Situation(Kind.AUTH, "gh", unblock="gh auth login")) == "Run: gh auth login"
    policy = Situation(Kind.PERMISSION, "powershell", unblock="Set-ExecutionPolicy RemoteSigned -Scope CurrentUser")
    assert user_action(policy) == "Run: Set-ExecutionPolicy RemoteSigned -Scope CurrentUser"
