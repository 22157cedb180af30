"""Ownership across machines (issue 16): a turn's owner is a lease with an expiry and a
fencing token, not a local pid. Each "machine" is a separate process with its own host id
(``UNSTUCK_HOST_ID``), on both engines (``store_target``): an SQLite file, and a PostgreSQL
database as a fleet shares it.

tests/lease_child.py books order 1, waits in a read call (``check_stock``) until a file
appears, then books orders 2 and 3; the ledger (an SQLite file) is the outside world whose
effects must never be repeated.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pg_fixtures import StoreTarget
from unstuck.store.journal import IntentState, Journal, LeaseLostError
from unstuck.store.urls import HOST_ENV

CHILD = Path(__file__).with_name("lease_child.py")
#: Seconds a lease lasts in these tests (the child renews it every third of that): long enough
#: for a second process to start and be refused while it lives, on a loaded machine.
TTL = 4.0

pytestmark = pytest.mark.slow


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Path]]:
    ledger = tmp_path / "ledger.db"
    with sqlite3.connect(ledger) as db:
        db.execute("CREATE TABLE ledger (order_id INTEGER NOT NULL)")
    yield {"ledger": ledger, "ready": tmp_path / "ready", "go": tmp_path / "go"}


def _env(machine: str, world: dict[str, Path]) -> dict[str, str]:
    return {**os.environ, HOST_ENV: machine, "LEASE_TTL": str(TTL), "READY_FILE": str(world["ready"]),
            "GO_FILE": str(world["go"])}


def _start(store: StoreTarget, world: dict[str, Path], machine: str, mode: str,
           **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CHILD), store.url, str(world["ledger"]), mode, "t1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**_env(machine, world), **extra})


def _outcome(proc: subprocess.Popen[str]) -> tuple[int, dict[str, object]]:
    out, err = proc.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, f"no output; stderr: {err}"
    return proc.returncode, json.loads(lines[-1])


def _booked(world: dict[str, Path]) -> list[int]:
    with sqlite3.connect(world["ledger"]) as db:
        return [row[0] for row in db.execute("SELECT order_id FROM ledger ORDER BY rowid")]


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, f"the owner ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _wait_expired(store: StoreTarget) -> None:
    """Until the store's clock passes the turn's lease expiry (polled, read-only)."""
    deadline = time.monotonic() + 30
    with Journal(store.url, readonly=True) as journal:
        while True:
            lease = journal.lease("t1")
            if lease.expires_at is not None and lease.expires_at <= lease.now:
                return
            assert time.monotonic() < deadline, f"the lease never ran out: {lease}"
            time.sleep(0.05)


def test_a_turn_whose_owner_was_killed_on_one_machine_is_resumed_on_another_after_the_lease_expires(
        store_target: StoreTarget, world: dict[str, Path]) -> None:
    owner = _start(store_target, world, "machine-a", "run")
    try:
        _wait_for(world["ready"], owner)  # order 1 booked; the owner waits in its read call
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.communicate(timeout=30)
    world["go"].touch()
    code, early = _outcome(_start(store_target, world, "machine-b", "resume"))
    # machine b cannot see machine a's processes: it must wait for the lease, not guess
    assert code == 3 and "machine or pid namespace" in str(early["error"]) and "s more" in str(early["error"])
    listed = subprocess.run([sys.executable, "-m", "unstuck", "journal", "list", "-j", store_target.url, "--json"],
                            capture_output=True, text=True, timeout=60, check=True)
    (row,) = json.loads(listed.stdout)  # the dead owner still holds the lease until it runs out
    assert row["status"] == "running" and row["owner"]["pid"] == owner.pid
    assert row["owner"]["host"].startswith("machine-a@") and row["owner"]["lease_left_s"] <= TTL
    _wait_expired(store_target)
    code, resumed = _outcome(_start(store_target, world, "machine-b", "resume"))
    assert (code, resumed["status"]) == (0, "done"), resumed
    assert _booked(world) == [1, 2, 3]  # order 1 once, though its owner died after booking it
    with Journal(store_target.url, readonly=True) as journal:
        lease = journal.lease("t1")
        assert lease.token == 2 and lease.owner_pid is None  # one claim; the turn ended and let go
        assert [i.state for i in journal.intents("t1")] == [IntentState.COMMITTED] * 3
        assert journal.turn("t1").status == "done"


def test_a_stale_owner_woken_with_sigcont_after_a_takeover_writes_nothing(
        store_target: StoreTarget, world: dict[str, Path]) -> None:
    owner = _start(store_target, world, "machine-a", "run")
    try:
        _wait_for(world["ready"], owner)
        owner.send_signal(signal.SIGSTOP)  # stopped while holding the lease: it can renew nothing
        _wait_expired(store_target)
        world["go"].touch()
        code, resumed = _outcome(_start(store_target, world, "machine-b", "resume"))
        assert (code, resumed["status"]) == (0, "done"), resumed
        with Journal(store_target.url, readonly=True) as journal:
            before = (journal.turn("t1"), journal.steps("t1"), journal.intents("t1"), journal.messages("t1"))
            assert journal.lease("t1").token == 2
    finally:
        owner.send_signal(signal.SIGCONT)
    code, stale = _outcome(owner)  # its read call returns; its next write is a checkpoint
    assert code == 3 and stale["type"] == "LeaseLostError" and "taken over" in str(stale["error"])
    with Journal(store_target.url, readonly=True) as journal:
        after = (journal.turn("t1"), journal.steps("t1"), journal.intents("t1"), journal.messages("t1"))
    assert after == before  # not a step, message, receipt or status from the stale owner
    assert before[0].status == "done" and _booked(world) == [1, 2, 3]


def test_a_claim_increments_the_fencing_token_and_the_old_holder_is_refused_every_write(
        store_target: StoreTarget) -> None:
    with Journal(store_target.url, lease_ttl=60) as old:
        old.begin_turn("t1", "task", unattended=True, guarded=True)
        ref = old.prepare_intent("t1", 0, "c1", "book", "{}")
        assert old.lease("t1").token == 1 and old.lease("t1").held
        # another machine, after a person says the owner is gone (force: the lease has 60 s left)
        env = {**os.environ, HOST_ENV: "machine-b"}
        code = ("import sys; from unstuck.store.journal import Journal\n"
                "with Journal(sys.argv[1]) as j: j.claim('t1', force=True)\n")
        subprocess.run([sys.executable, "-c", code, store_target.url], check=True, env=env, timeout=60)
        assert not old.lease("t1").held and old.lease("t1").token == 2
        for write in (lambda: old.record_receipt(ref, "{}"), lambda: old.checkpoint("t1", steps=[], messages=["{}"],
                                                                                        first_seq=0),
                      lambda: old.record_validation("t1", "v", "passed", ""), lambda: old.hold([ref], "x"),
                      lambda: old.record_decision("t1", 0, "close", "gh"), lambda: old.renew("t1"),
                      lambda: old.prepare_intent("t1", 1, "c2", "book", "{}"),
                      lambda: old.end_turn("t1", "done", answer="mine")):
            with pytest.raises(LeaseLostError):
                write()
        assert old.intents("t1")[0].state is IntentState.PREPARED and old.messages("t1") == []
        assert old.validations("t1") == [] and old.decisions("t1") == [] and old.turn("t1").status == "running"


def test_a_live_lease_refuses_a_claim_and_a_settle_from_another_machine_until_it_runs_out(
        store_target: StoreTarget) -> None:
    with Journal(store_target.url, lease_ttl=TTL) as owner:
        owner.begin_turn("t1", "task", unattended=True, guarded=True)
        owner.prepare_intent("t1", 0, "c1", "book", "{}")
        owner.close()  # its keeper stops: the lease is no longer renewed
        env = {**os.environ, HOST_ENV: "machine-b"}
        claim = ("import sys; from unstuck.store.journal import Journal\n"
                 "with Journal(sys.argv[1]) as j: j.settle('t1', absent=['t1:0'])\n")
        refused = subprocess.run([sys.executable, "-c", claim, store_target.url], env=env, timeout=60,
                                 capture_output=True, text=True)
        assert refused.returncode != 0 and "leased to process" in refused.stderr
        _wait_expired(store_target)
        subprocess.run([sys.executable, "-c", claim, store_target.url], env=env, timeout=60, check=True)
    with Journal(store_target.url, readonly=True) as journal:
        (intent,) = journal.intents("t1")
        assert intent.settled_by == Journal.USER_ABSENT
        lease = journal.lease("t1")
        assert lease.token == 2 and lease.owner_pid is None  # the settle took the lease and let it go


def test_the_running_turn_renews_its_lease_so_it_never_runs_out_while_the_owner_lives(
        store_target: StoreTarget) -> None:
    with Journal(store_target.url, lease_ttl=0.6) as journal:
        journal.begin_turn("t1", "task", unattended=True, guarded=True)
        first = journal.lease("t1").expires_at
        for _ in range(8):  # 1.6 s, almost three times the lease, with no write of the turn's own
            time.sleep(0.2)
            lease = journal.lease("t1")
            assert lease.expires_at is not None and lease.expires_at > lease.now
        assert first is not None and lease.expires_at is not None and lease.expires_at > first
        claim = "import sys; from unstuck.store.journal import Journal\nJournal(sys.argv[1]).claim('t1')\n"
        refused = subprocess.run([sys.executable, "-c", claim, store_target.url], timeout=60, capture_output=True,
                                 text=True, env={k: v for k, v in os.environ.items() if k != HOST_ENV})
        assert refused.returncode != 0 and "still owned by live process" in refused.stderr  # same machine: pid lives


# -- a write effect under way when its owner stopped (issue 23) --------------------------------


def _owner_inside_its_first_booking(store: StoreTarget, world: dict[str, Path],
                                    machine: str) -> subprocess.Popen[str]:
    """The owner on ``machine``, once it is inside its first write effect (``book_order`` of
    order 1 has begun and sleeps before its insert): the intent is prepared, nothing booked."""
    started = world["ready"].parent / "started"
    started.mkdir()
    owner = _start(store, world, machine, "run", BOOK_DELAY="5", BOOK_STARTED=str(started))
    _wait_for(started / "1", owner)
    return owner


def _held(resumed: dict[str, object]) -> str:
    assert resumed.get("status") == "interrupted", resumed
    error = str(resumed["error"])
    assert "held effect intents: t1:0" in error and "the resolver says it did not happen" in error, error
    return error


def test_a_stopped_owners_write_effect_is_held_though_the_resolver_says_absent_and_booked_once_when_it_wakes(
        store_target: StoreTarget, world: dict[str, Path]) -> None:
    owner = _owner_inside_its_first_booking(store_target, world, "machine-a")
    try:
        owner.send_signal(signal.SIGSTOP)  # stopped inside the effect: alive, renewing nothing
        _wait_expired(store_target)
        world["go"].touch()
        code, resumed = _outcome(_start(store_target, world, "machine-a", "resume"))  # the same machine
        assert code == 0 and "still alive on this machine" in _held(resumed)
        assert _booked(world) == []  # the resolver was right that nothing was booked yet: still not run
        with Journal(store_target.url, readonly=True) as journal:
            assert [i.state for i in journal.intents("t1")] == [IntentState.HELD]
    finally:
        owner.send_signal(signal.SIGCONT)
    code, stale = _outcome(owner)  # it finishes its own call, then its receipt is refused
    assert code == 3 and stale["type"] == "LeaseLostError"
    assert _booked(world) == [1]  # booked once: by the owner that was running it
    code, done = _outcome(_start(store_target, world, "machine-a", "resume"))  # now the resolver sees it booked
    assert (code, done["status"]) == (0, "done"), done
    assert _booked(world) == [1, 2, 3]


@pytest.mark.parametrize("stop", [signal.SIGSTOP, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_write_effect_begun_on_another_machine_is_held_though_the_resolver_says_absent(
        store_target: StoreTarget, world: dict[str, Path], stop: signal.Signals) -> None:
    owner = _owner_inside_its_first_booking(store_target, world, "machine-a")
    try:
        owner.send_signal(stop)  # dead or not, its pid means nothing on machine b
        _wait_expired(store_target)
        world["go"].touch()
        code, resumed = _outcome(_start(store_target, world, "machine-b", "resume"))
        assert code == 0 and "on another machine or pid namespace" in _held(resumed)
        assert _booked(world) == []
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.communicate(timeout=30)
    with Journal(store_target.url) as journal:  # a person checks the ledger and says it did not happen
        journal.settle("t1", absent=["t1:0"])
    code, done = _outcome(_start(store_target, world, "machine-b", "resume"))
    assert (code, done["status"]) == (0, "done"), done
    assert _booked(world) == [1, 2, 3]


def test_a_write_effect_whose_owner_is_dead_on_this_machine_runs_again_on_the_resolvers_absent(
        store_target: StoreTarget, world: dict[str, Path]) -> None:
    owner = _owner_inside_its_first_booking(store_target, world, "machine-a")
    owner.send_signal(signal.SIGKILL)  # killed before its insert: the effect never happened
    owner.communicate(timeout=30)
    world["go"].touch()
    code, done = _outcome(_start(store_target, world, "machine-a", "resume"))  # fenced by the claim, owner dead here
    assert (code, done["status"]) == (0, "done"), done
    assert _booked(world) == [1, 2, 3]
    with Journal(store_target.url, readonly=True) as journal:
        assert journal.lease("t1").token == 2
