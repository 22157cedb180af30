"""A fleet on one PostgreSQL store (issue 16, deliverable 5): 16 worker processes, 8 named
``machine-a`` and 8 ``machine-b`` (``UNSTUCK_HOST_ID``), each with its own journal and lesson
store connections, run turns against one database (tests/fleet_worker.py). Nothing is lost,
no effect happens twice or without its intent, and a lesson one worker stored is used by the
others in their next turn, except by the one whose environment differs."""

from __future__ import annotations

import json
import secrets
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from fleet_worker import (
    ATTEMPTS_FILE,
    DEPLOY_SUBJECT,
    OTHER_FINGERPRINT,
    SHARED_FINGERPRINT,
    Role,
    deploy_key,
    effect_key,
    prepare_effects,
    run_fleet,
    standard_plans,
    turn_id,
)
from pg_cluster import PostgresCluster
from unstuck.core.situations import Kind
from unstuck.store.journal import IntentState, Journal
from unstuck.store.lessons import LessonStore

WORKERS = 16
TURNS = 6
WRITES = 2


@pytest.mark.slow
def test_sixteen_workers_on_two_machines_lose_nothing_repeat_nothing_and_share_a_lesson(
    pg_cluster: PostgresCluster,
    tmp_path: Path,
) -> None:
    suffix = secrets.token_hex(4)
    store_url = pg_cluster.create_database(f"fleet_store_{suffix}")
    effects_url = pg_cluster.create_database(f"fleet_effects_{suffix}")
    prepare_effects(effects_url)
    LessonStore(store_url).close()  # the schemas exist before sixteen processes race to make them
    Journal(store_url).close()
    plans = standard_plans(WORKERS, TURNS, WRITES)
    learner, *followers = plans
    other = followers[-1]
    assert (learner.role, other.fingerprint, other.host, learner.host) == (
        Role.LEARNER, OTHER_FINGERPRINT, "machine-b", "machine-a")

    run = run_fleet(plans, store_url, effects_url, tmp_path / "fleet")

    # Every turn is in the journal, once, ended as scripted.
    by_id = {report.turn_id: report for report in run.reports}
    expected_ids = {turn_id(plan.index, turn) for plan in plans for turn in range(TURNS)}
    assert len(run.reports) == WORKERS * TURNS and set(by_id) == expected_ids
    with Journal(store_url, readonly=True) as journal:
        turns = journal.turns()
        assert len(turns) == WORKERS * TURNS and {t.turn_id for t in turns} == expected_ids
        blocked = {turn_id(plan.index, plan.deploy_turn) for plan in plans}
        assert {t.turn_id: t.status for t in turns} == {
            tid: ("blocked" if tid in blocked else "done") for tid in expected_ids}
        intents = [intent for t in turns for intent in journal.intents(t.turn_id)]

    # Every intent was committed; each committed intent has exactly one effect, and no
    # effect exists without one.
    assert all(intent.state is IntentState.COMMITTED for intent in intents)
    intent_keys = Counter(json.loads(i.arguments_json)["key"] for i in intents if i.tool == "ship")
    with psycopg.connect(effects_url) as connection:
        effect_keys = Counter(str(row[0]) for row in connection.execute("SELECT key FROM effects"))
    expected_keys = Counter(effect_key(p.index, turn, call) for p in plans for turn in range(TURNS)
                            for call in range(WRITES))
    assert effect_keys == intent_keys == expected_keys
    deploy_intents = Counter(json.loads(i.arguments_json)["key"] for i in intents if i.tool == "deploy")
    attempts = Counter((tmp_path / "fleet" / ATTEMPTS_FILE).read_text(encoding="utf-8").split())
    # Only the learner and the worker whose environment differs ran deploy: the others were
    # stopped by the lesson's probe before the call.
    assert attempts == deploy_intents == Counter({deploy_key(learner.index, learner.deploy_turn): 1,
                                                  deploy_key(other.index, other.deploy_turn): 1})

    # The lesson was written once, by the learner, on machine-a.
    learned = by_id[turn_id(learner.index, learner.deploy_turn)]
    (lesson_id,) = learned.stored
    with LessonStore(store_url, readonly=True) as store:
        shared = [lesson for lesson in store.all() if lesson.signature.fingerprint == SHARED_FINGERPRINT]
        assert [(x.id, x.active, x.host) for x in shared] == [(lesson_id, True, "machine-a")]
        signature = shared[0].signature
        assert (signature.tool, signature.subject, signature.kind) == ("deploy", DEPLOY_SUBJECT, Kind.AUTH)
        assert shared[0].unblock == "deployctl login"

    # Every follower with the shared environment, on either machine, used it in the turn it
    # started after the lesson was stored: shown at turn start, probed, cited, never re-stored.
    for plan in followers:
        report = by_id[turn_id(plan.index, plan.deploy_turn)]
        assert report.started_at >= learned.ended_at
        if plan is other:
            continue
        assert lesson_id in report.shown and report.applied == (lesson_id,) and report.stored == ()
        assert f"lesson {lesson_id}" in report.escalation
    assert {p.host for p in followers if p is not other} == {"machine-a", "machine-b"}

    # The worker whose environment differs never saw it, met the blocker itself, and stored a
    # lesson of its own fingerprint, which left the learner's lesson active.
    for turn in range(TURNS):
        report = by_id[turn_id(other.index, turn)]
        assert lesson_id not in report.shown and lesson_id not in report.applied
    own = by_id[turn_id(other.index, other.deploy_turn)]
    assert len(own.stored) == 1 and own.stored[0] != lesson_id
    with LessonStore(store_url, readonly=True) as store:
        mine = store.get(own.stored[0])
        assert mine is not None and mine.signature.fingerprint == OTHER_FINGERPRINT and mine.host == "machine-b"
        kept = store.get(lesson_id)
        assert kept is not None and kept.active
