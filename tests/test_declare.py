"""Declared situations from HTTP statuses and headers, shell refusals and file locks."""

from __future__ import annotations

import email.utils

import pytest

from unstuck.declare import LockHolder, declare_http, declare_lock, declare_refusal, retry_after_seconds
from unstuck.prompts import user_action
from unstuck.situations import Kind, Source

NOW = 1_767_268_800.0  # 2026-01-01T12:00:00Z


def test_401_is_auth_naming_the_challenge() -> None:
    found = declare_http(401, {"WWW-Authenticate": 'Bearer realm="api"'}, "api.example.com", now_s=NOW)
    assert found is not None and (found.kind, found.subject, found.source) == (Kind.AUTH, "api.example.com", Source.DECLARED)
    assert 'Bearer realm="api"' in found.detail and found.unblock is not None


def test_407_is_auth_on_the_proxy() -> None:
    found = declare_http(407, [("Proxy-Authenticate", "Basic")], "api.example.com", now_s=NOW)
    assert found is not None and (found.kind, found.subject) == (Kind.AUTH, "the proxy")


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
    assert "pid 4242 (python3, POSIX WRITE)" in found.detail and "4242" in (found.unblock or "")
    with pytest.raises(ValueError, match="at least one holder"):
        declare_lock("x", [])


def test_a_command_unblock_is_still_shown_as_run() -> None:
    from unstuck.situations import Situation

    assert user_action(Situation(Kind.AUTH, "gh", unblock="gh auth login")) == "Run: gh auth login"
