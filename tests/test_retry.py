from __future__ import annotations

import pytest

from unstuck.core.situations import Kind, Situation, Source
from unstuck.decide.retry import CAP_S, RETRY_RULES, RetryRule, backoff_delay, next_retry


def waits(kind: Kind, retry_after_s: float | None = None) -> list[float]:
    situation = Situation(kind, "s", retryable=True, retry_after_s=retry_after_s, source=Source.INFERRED)
    found = []
    while (wait := next_retry(situation, len(found))) is not None:
        found.append(wait)
    return found


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (Kind.TIMEOUT, [5.0]),  # a two-attempt ceiling: one retry
        (Kind.UNAVAILABLE, [30.0, 60.0]),  # three attempts: two retries
        (Kind.NETWORK, [10.0, 20.0]),
        (Kind.QUOTA, [60.0, 120.0]),
    ],
)
def test_the_exact_delay_sequence_per_kind(kind: Kind, expected: list[float]) -> None:
    assert waits(kind) == expected


def test_backoff_is_capped_at_300_seconds() -> None:
    assert CAP_S == 300.0
    assert backoff_delay(RetryRule(10, 60.0), 4) == 300.0  # 60 · 2^3 = 480, capped


def test_retry_after_is_honoured_and_capped() -> None:
    assert waits(Kind.QUOTA, retry_after_s=42) == [42.0, 42.0]
    assert backoff_delay(RETRY_RULES[Kind.QUOTA], 1, retry_after_s=900) == 300.0
    assert waits(Kind.QUOTA, retry_after_s=3600) == [], "a reset beyond the cap is not slept through"


@pytest.mark.parametrize("kind", [Kind.AUTH, Kind.PERMISSION, Kind.NOT_INSTALLED, Kind.NOT_FOUND, Kind.INVALID_ARGS])
def test_kinds_that_waiting_cannot_fix_are_never_retried(kind: Kind) -> None:
    assert next_retry(Situation(kind, "s", retryable=True, source=Source.INFERRED), 0) is None


def test_a_spent_quota_is_not_retried() -> None:
    assert next_retry(Situation(Kind.QUOTA, "s", retryable=False), 0) is None


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError, match="count from 1"):
        backoff_delay(RETRY_RULES[Kind.NETWORK], 0)


def test_a_lock_held_by_another_process_is_waited_for_twice() -> None:
    assert waits(Kind.CONFLICT) == [5.0, 10.0]  # three attempts
    rejected_push = Situation(Kind.CONFLICT, "git", retryable=False, source=Source.INFERRED)
    assert next_retry(rejected_push, 0) is None, "a conflict waiting cannot fix is the agent's to resolve"


def test_full_jitter_is_a_uniform_share_of_the_backoff() -> None:
    from unstuck.decide.retry import full_jitter

    assert full_jitter(40.0, 0.0) == 0.0
    assert full_jitter(40.0, 0.25) == 10.0
    with pytest.raises(ValueError, match="within"):
        full_jitter(40.0, 1.0)


def test_the_loop_jitters_computed_backoff_but_never_a_servers_retry_after() -> None:
    import random

    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.turn import run_turn
    from unstuck.store.events import EventLog
    from unstuck.toolkit.specs import Toolset, tool

    replies: dict[str, list[object]] = {
        "backoff": [TimeoutError("read timed out")],
        "server": [{"status": "error", "http_status": 429, "situation": {
            "kind": "quota", "subject": "api", "retryable": True, "retry_after_s": 42.0}}],
    }

    def delays(which: str, jitter: random.Random | None) -> list[float]:
        calls = {"n": 0}

        @tool(subject="api")
        def fetch() -> object:
            """Fetch."""
            calls["n"] += 1
            if calls["n"] == 1:
                outcome = replies[which][0]
                if isinstance(outcome, BaseException):
                    raise outcome
                return outcome
            return "ok"

        log = EventLog()
        run_turn("x", model=PlaybackModel([("fetch", {}), "done"]), tools=Toolset([fetch]), unattended=True,
                 clock=VirtualClock(), events=log, jitter=jitter)
        return [float(e.get("delay_s")) for e in log.named("retry.scheduled")]  # type: ignore[arg-type]

    assert delays("backoff", None) == [5.0]  # timeout: base 5 s
    jittered = delays("backoff", random.Random(7))
    assert len(jittered) == 1 and 0.0 <= jittered[0] < 5.0
    assert jittered[0] == pytest.approx(5.0 * random.Random(7).random())
    assert delays("server", random.Random(7)) == [42.0]
