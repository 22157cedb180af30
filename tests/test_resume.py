"""Crash tests with real processes: SIGKILL at each journal crash point of each of three
write effects, then resume without and with resolvers. The ledger (an SQLite file) fails
the test if any effect commits twice."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from unstuck.store.journal import IntentState, Journal, JournalError

CHILD = Path(__file__).with_name("crash_child.py")
POINTS = ("intent.prepared", "effect.returned", "receipt.recorded", "checkpoint.saved")
#: Points where the crash leaves an intent without a receipt: nobody can say whether it happened.
UNSETTLED = ("intent.prepared", "effect.returned")


def child(journal: Path, ledger: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), str(journal), str(ledger), *args],
                          capture_output=True, text=True, timeout=120, check=False)


def booked(ledger: Path) -> list[int]:
    with sqlite3.connect(ledger) as db:
        return [row[0] for row in db.execute("SELECT order_id FROM ledger ORDER BY rowid")]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE ledger (order_id INTEGER NOT NULL)")
    return path


def last_json(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_an_uninterrupted_turn_books_each_order_once_with_an_intent_and_receipt_each(
    tmp_path: Path, ledger: Path
) -> None:
    result = last_json(child(tmp_path / "j.db", ledger, "run", "t1"))
    assert result["status"] == "done" and booked(ledger) == [1, 2, 3]
    with Journal(tmp_path / "j.db") as journal:
        intents = journal.intents("t1")
        assert [(i.effect_ref, i.state) for i in intents] == [(f"t1:{n}", IntentState.COMMITTED) for n in range(3)]
        assert [s.call.tool for s in journal.steps("t1")] == ["book_order"] * 3
        assert journal.turn("t1").status == "done"


@pytest.mark.parametrize("effect", [1, 2, 3])
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_then_resume_holds_without_resolvers_and_commits_exactly_once_with_them(
    tmp_path: Path, ledger: Path, point: str, effect: int
) -> None:
    journal = tmp_path / "j.db"
    crashed = child(journal, ledger, "run", "t1", point, str(effect))
    assert crashed.returncode == -9, crashed.stderr[-2000:]  # killed by SIGKILL at the point
    effect_happened = point != "intent.prepared"
    before = booked(ledger)
    assert before == list(range(1, effect + (1 if effect_happened else 0)))

    plain = last_json(child(journal, ledger, "resume", "t1"))
    if point in UNSETTLED:
        # nobody can say whether the effect happened: held, the intent untouched, nothing run
        assert plain["status"] == "interrupted" and plain["held"] == [f"t1:{effect - 1}"]
        assert booked(ledger) == before
        with Journal(journal) as j:
            held = [i for i in j.intents("t1") if i.state is IntentState.HELD]
            assert [i.effect_ref for i in held] == [f"t1:{effect - 1}"]
            assert j.turn("t1").status == "interrupted"
        resumed = last_json(child(journal, ledger, "resume", "t1", "--resolvers"))
    else:
        resumed = plain  # the receipt settled it: resuming needs no resolver
    assert resumed["status"] == "done", resumed
    assert booked(ledger) == [1, 2, 3]  # every effect exactly once
    with Journal(journal) as j:
        assert all(i.state is IntentState.COMMITTED for i in j.intents("t1"))
        assert len(j.intents("t1")) == 3


def test_a_resolver_that_cannot_read_the_world_holds_the_turn(tmp_path: Path, ledger: Path) -> None:
    journal = tmp_path / "j.db"
    assert child(journal, ledger, "run", "t1", "effect.returned", "2").returncode == -9
    ledger.rename(tmp_path / "moved.db")  # the resolver's query now fails: no such table
    sqlite3.connect(ledger).close()
    result = last_json(child(journal, ledger, "resume", "t1", "--resolvers"))
    assert result["status"] == "interrupted" and "resolver raised" in str(result["error"])
    assert booked(tmp_path / "moved.db") == [1, 2]


def test_resuming_a_finished_turn_is_refused(tmp_path: Path, ledger: Path) -> None:
    journal = tmp_path / "j.db"
    last_json(child(journal, ledger, "run", "t1"))
    proc = child(journal, ledger, "resume", "t1")
    assert proc.returncode != 0 and "already ended done" in proc.stderr


class Crash(BaseException):
    """Stands in for the process dying at a journal point (what is on disk stays)."""


def test_retry_attempts_are_counted_from_the_journal_across_a_crash(tmp_path: Path) -> None:
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.resume import resume_turn
    from unstuck.loop.turn import run_turn
    from unstuck.store.events import EventLog
    from unstuck.toolkit.specs import Toolset, tool

    runs: list[str] = []

    @tool(subject="api")
    def fetch() -> str:
        """A read that always times out."""
        runs.append("fetch")
        raise TimeoutError("read timed out")

    saves = {"n": 0}

    def crash_after_the_first_retry_wait(point: str, ref: str) -> None:
        if point == "checkpoint.saved":
            saves["n"] += 1
            if saves["n"] == 3:  # the opening messages, the reply asking for the call, then the first attempt
                raise Crash

    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("fetch", model=PlaybackModel([("fetch", {})]), tools=Toolset([fetch]), unattended=True,
                 clock=VirtualClock(), journal=Journal(path, on_point=crash_after_the_first_retry_wait), turn_id="t1")
    assert runs == ["fetch"]  # one attempt made, the retry's wait was on its way
    with Journal(path) as journal:
        assert [(s.call.tool, s.retry) for s in journal.steps("t1")] == [("fetch", False)]
        log = EventLog()
        result = resume_turn(journal, "t1", model=PlaybackModel(["gave up"]), tools=Toolset([fetch]),
                             clock=VirtualClock(), events=log)
    # timeout allows 2 attempts: the one before the crash counts, so the resumed call is the last
    assert runs == ["fetch", "fetch"] and log.named("retry.scheduled") == []
    # exhausted, the timeout blocks its subject (DESIGN: transient kinds that exhaust their retries become
    # blockers), and the answer without a success after it leaves the turn blocked
    assert result.status.value == "blocked" and result.escalation is not None and result.escalation.subject == "api"


def test_a_persons_absent_answer_is_spent_once_the_intent_runs_again(tmp_path: Path, ledger: Path) -> None:
    journal = tmp_path / "j.db"
    assert child(journal, ledger, "run", "t1", "intent.prepared", "1").returncode == -9
    settle = subprocess.run([sys.executable, "-m", "unstuck", "journal", "resume", "t1", "--journal", str(journal),
                             "--absent", "t1:0"], capture_output=True, text=True, timeout=120, check=False)
    assert settle.returncode == 0, settle.stderr
    # the resumed run dies again, after the effect and before its receipt
    again = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(CHILD.parent)!r})\n"
        "import crash_child\n"
        "from unstuck.core.clock import VirtualClock\nfrom unstuck.store.journal import Journal\nfrom unstuck.loop.resume import resume_turn\n"
        "def hook(point, ref):\n"
        "    if point == 'effect.returned' and ref == 't1:0':\n        os.kill(os.getpid(), signal.SIGKILL)\n"
        f"with Journal({str(journal)!r}, on_point=hook) as j:\n"
        f"    resume_turn(j, 't1', model=crash_child.LedgerModel(), tools=crash_child.ledger_tools({str(ledger)!r}),"
        " clock=VirtualClock())\n")], capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == -9, again.stderr
    assert booked(ledger) == [1]
    done = last_json(child(journal, ledger, "resume", "t1", "--resolvers"))
    assert done["status"] == "done" and booked(ledger) == [1, 2, 3]  # the old "absent" did not run it twice


def test_two_processes_resuming_one_turn_at_once_book_each_order_once(tmp_path: Path, ledger: Path) -> None:
    journal = tmp_path / "j.db"
    assert child(journal, ledger, "run", "t1", "intent.prepared", "1").returncode == -9
    env = {**__import__("os").environ, "BOOK_DELAY": "0.5"}
    racers = [subprocess.Popen([sys.executable, str(CHILD), str(journal), str(ledger), "resume", "t1", "--resolvers"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outcomes = [r.communicate(timeout=120) for r in racers]
    codes = sorted(r.returncode for r in racers)
    assert codes[0] == 0 and codes[1] != 0, outcomes
    loser = next(err for (out, err), r in zip(outcomes, racers, strict=True) if r.returncode != 0)
    assert "claimed by another process" in loser or "still owned by live process" in loser
    assert booked(ledger) == [1, 2, 3]


def test_a_turn_whose_process_still_runs_cannot_be_resumed(tmp_path: Path, ledger: Path) -> None:
    import os
    import time

    journal = tmp_path / "j.db"
    env = {**os.environ, "BOOK_DELAY": "1.5"}
    running = subprocess.Popen([sys.executable, str(CHILD), str(journal), str(ledger), "run", "t1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if journal.exists():
            with Journal(journal) as j:
                if j.turns():
                    break
        time.sleep(0.05)
    refused = child(journal, ledger, "resume", "t1", "--resolvers")
    running.communicate(timeout=120)
    assert refused.returncode != 0 and "still owned by live process" in refused.stderr
    assert booked(ledger) == [1, 2, 3]


def test_call_ids_repeated_across_replies_never_replay_another_calls_receipt(tmp_path: Path, ledger: Path) -> None:
    from collections.abc import Sequence

    from crash_child import ledger_tools
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import ToolCall
    from unstuck.loop.resume import resume_turn
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.models import Message, ModelReply, Role
    from unstuck.toolkit.specs import ToolSpec

    class SameIdModel:
        """Every reply's call has the id "call_0", as some servers send."""

        name = "same-id"

        def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
            done = sum(1 for m in messages if m.role is Role.TOOL)
            if done >= 3 or not tools:
                return ModelReply("booked")
            return ModelReply("", (ToolCall.of("call_0", "book_order", {"order": done + 1}),))

    def crash_before_the_second_intent(point: str, ref: str) -> None:
        if point == "checkpoint.saved" and ref == "t1:0":
            state["saves"] += 1
            if state["saves"] == 2:  # the first call's result saved, then the second reply saved
                raise Crash

    state = {"saves": 0}
    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("book", model=SameIdModel(), tools=ledger_tools(str(ledger)), unattended=True, clock=VirtualClock(),
                 journal=Journal(path, on_point=crash_before_the_second_intent), turn_id="t1")
    assert booked(ledger) == [1]
    with Journal(path) as journal:
        result = resume_turn(journal, "t1", model=SameIdModel(), tools=ledger_tools(str(ledger)), clock=VirtualClock())
    assert result.status.value == "done" and booked(ledger) == [1, 2, 3]


def test_a_resumed_reply_obeys_the_policy_it_stopped_on(tmp_path: Path, ledger: Path) -> None:
    """A reply [failing write, second write] where the failure exhausts an open blocker: the
    control run asks and books nothing; a crash after the first receipt must not book the second."""

    from conftest import PlaybackModel
    from crash_child import ledger_tools
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import Effect, ToolCall
    from unstuck.loop.resume import resume_turn
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.models import ModelReply
    from unstuck.toolkit.specs import Toolset, tool

    @tool(subject="gh")
    def check() -> dict[str, Any]:
        """gh's sign-in."""
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    @tool(effect=Effect.WRITE, subject="gh")
    def push(n: int) -> dict[str, Any]:
        """A write on gh that fails while gh is signed out."""
        return {"status": "error", "exit_code": 1, "output": "gh: not logged in"}

    def tools() -> Toolset:
        return Toolset([check, push, *ledger_tools(str(ledger)).values()])

    reply = ModelReply("", (ToolCall.of("a", "push", {"n": 1}), ToolCall.of("b", "book_order", {"order": 9})))
    script: list[object] = [("check", {}), ("push", {"n": 0}), ("push", {"n": 0}), reply]
    control = run_turn("x", model=PlaybackModel(list(script)), tools=tools(), unattended=True, clock=VirtualClock())
    assert control.status.value == "blocked" and booked(ledger) == []

    def crash(point: str, ref: str) -> None:
        if point == "receipt.recorded" and ref == "t1:3":
            raise Crash

    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("x", model=PlaybackModel(list(script)), tools=tools(), unattended=True, clock=VirtualClock(),
                 journal=Journal(path, on_point=crash), turn_id="t1")
    with Journal(path) as journal:
        resumed = resume_turn(journal, "t1", model=PlaybackModel(["finished"]), tools=tools(), clock=VirtualClock())
    assert resumed.status.value == "blocked" and booked(ledger) == []


def test_a_users_skip_is_replayed_on_resume(tmp_path: Path) -> None:

    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import Effect
    from unstuck.loop.presence import Answer, ScriptedAsker
    from unstuck.loop.resume import Resolution, resume_turn
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.specs import Toolset, tool

    opened: list[str] = []

    @tool(subject="gh")
    def check() -> dict[str, Any]:
        """gh's sign-in."""
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    @tool(effect=Effect.WRITE, subject="gh")
    def open_pr(title: str) -> str:
        """Open a pull request."""
        opened.append(title)
        return "opened"

    @tool(effect=Effect.WRITE, subject="notes")
    def note(text: str) -> str:
        """Write a note."""
        return "noted"

    def crash(point: str, ref: str) -> None:
        if point == "intent.prepared" and ref.endswith(":5"):
            raise Crash

    script: list[object] = [("check", {}), ("check", {}), ("check", {}), ("check", {}), ("note", {"text": "a"}),
                            ("note", {"text": "b"}), ("open_pr", {"title": "second"}), "done"]
    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("x", model=PlaybackModel(list(script)), tools=Toolset([check, open_pr, note]), unattended=False,
                 asker=ScriptedAsker([Answer.SKIP]), clock=VirtualClock(),
                 journal=Journal(path, on_point=crash), turn_id="t1")
    with Journal(path) as journal:
        assert journal.decisions("t1") == [(2, "skip", "gh")]  # the third identical failing check stops it
        result = resume_turn(journal, "t1", model=PlaybackModel([("open_pr", {"title": "second"}), "done"]),
                             tools=Toolset([check, open_pr, note]), asker=ScriptedAsker([Answer.STOP]),
                             clock=VirtualClock(), resolvers={"note": lambda arguments: Resolution.ABSENT})
    assert result.status.value != "interrupted" and "gh" in result.skipped_subjects
    assert opened == []  # gh was skipped before the crash: still refused after it
    refused = [s for s in result.steps if s.call.tool == "open_pr"]
    assert refused and not refused[-1].dispatched


def test_the_policy_config_is_journaled_and_used_on_resume(tmp_path: Path) -> None:
    from unstuck.decide.policy import PolicyConfig

    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal.begin_turn("t1", "x", unattended=True, guarded=True,
                           config_json='{"max_workarounds_after_blocker": 6, "max_workarounds_after_inferred_blocker": 8}')
        assert PolicyConfig(**__import__("json").loads(journal.config("t1"))).max_workarounds_after_blocker == 6


def test_an_owner_in_another_pid_namespace_is_not_taken_for_dead(tmp_path: Path) -> None:
    from unstuck.store.journal import JournalError

    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal.begin_turn("t1", "x", unattended=True, guarded=True)
    with sqlite3.connect(path) as db:  # as a container sharing the journal volume would have written it
        db.execute("UPDATE turns SET owner_pid = 1, owner_start = 42, owner_host = 'other-boot/4026531836'")
    with Journal(path) as journal:
        with pytest.raises(JournalError, match="another machine or pid namespace"):
            journal.claim("t1")
        journal.claim("t1", force=True)


def test_an_interrupted_turn_lets_go_of_its_owner(tmp_path: Path, ledger: Path) -> None:
    journal = tmp_path / "j.db"
    assert child(journal, ledger, "run", "t1", "effect.returned", "1").returncode == -9
    held = last_json(child(journal, ledger, "resume", "t1"))
    assert held["status"] == "interrupted"
    with sqlite3.connect(journal) as db:
        assert db.execute("SELECT owner_pid FROM turns").fetchone()[0] is None
    assert last_json(child(journal, ledger, "resume", "t1", "--resolvers"))["status"] == "done"


def test_a_turn_that_died_before_its_first_reply_resumes_with_its_task(tmp_path: Path) -> None:
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.resume import resume_turn
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.specs import Toolset

    class DiesAsked:
        name = "dies"

        def complete(self, messages: object, tools: object) -> object:
            raise Crash

    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("book order 7", model=DiesAsked(), tools=Toolset([]), unattended=True,  # type: ignore[arg-type]
                 clock=VirtualClock(), journal=Journal(path), turn_id="t1")
    model = PlaybackModel(["booked"])
    with Journal(path) as journal:
        resume_turn(journal, "t1", model=model, tools=Toolset([]), clock=VirtualClock())
    sent = model.requests[0][0]
    assert [m.role.value for m in sent[:2]] == ["system", "user"] and sent[1].content == "book order 7"


def test_two_calls_with_one_id_in_a_reply_are_both_run_once(tmp_path: Path, ledger: Path) -> None:
    from collections.abc import Sequence

    from crash_child import ledger_tools
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import ToolCall
    from unstuck.loop.resume import Resolution, resume_turn
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.models import Message, ModelReply
    from unstuck.toolkit.specs import ToolSpec

    class SameIdsInOneReply:
        name = "same-ids"

        def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
            if any(m.role.value == "tool" for m in messages) or not tools:
                return ModelReply("booked")
            return ModelReply("", (ToolCall.of("x", "book_order", {"order": 1}),
                                   ToolCall.of("x", "book_order", {"order": 2})))

    def crash(point: str, ref: str) -> None:
        if point == "effect.returned" and ref == "t1:0":
            raise Crash

    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("book", model=SameIdsInOneReply(), tools=ledger_tools(str(ledger)), unattended=True,
                 clock=VirtualClock(), journal=Journal(path, on_point=crash), turn_id="t1")

    def booked_already(arguments: Any) -> Resolution:
        return Resolution.COMMITTED if arguments["order"] in booked(ledger) else Resolution.ABSENT

    with Journal(path) as journal:
        result = resume_turn(journal, "t1", model=SameIdsInOneReply(), tools=ledger_tools(str(ledger)),
                             clock=VirtualClock(), resolvers={"book_order": booked_already})
    assert result.status.value == "done" and booked(ledger) == [1, 2]


def settle_cli(journal: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "unstuck", "journal", "resume", "t1", "--journal", str(journal),
                           *options], capture_output=True, text=True, timeout=120, check=False)


def test_settling_an_intent_is_refused_while_the_turn_owner_runs_its_effect(tmp_path: Path, ledger: Path) -> None:
    import os
    import signal
    import time

    journal = tmp_path / "j.db"
    env = {**os.environ, "BOOK_DELAY": "60"}  # the first effect is under way (asleep before its insert)
    owner = subprocess.Popen([sys.executable, str(CHILD), str(journal), str(ledger), "run", "t1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        prepared: list[str] = []
        while not prepared and time.monotonic() < deadline:
            if journal.exists():
                try:
                    with Journal(journal, readonly=True) as j:
                        prepared = [i.effect_ref for t in j.turns() for i in j.intents(t.turn_id)]
                except JournalError:  # the owner made the file and has not written its schema yet
                    prepared = []
            time.sleep(0.05)
        assert prepared == ["t1:0"]
        refused = settle_cli(journal, "--absent", "t1:0")
        assert refused.returncode == 2
        assert "still owned by live process" in refused.stderr and str(owner.pid) in refused.stderr
        with Journal(journal, readonly=True) as j:
            (intent,) = j.intents("t1")
        assert intent.state is IntentState.PREPARED and intent.settled_by is None  # nothing was settled
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.communicate(timeout=30)
    assert booked(ledger) == []  # killed while asleep: the effect never happened
    settled = settle_cli(journal, "--absent", "t1:0")  # the owner is gone: a person's word is taken
    assert settled.returncode == 0, settled.stderr
    done = last_json(child(journal, ledger, "resume", "t1"))
    assert done["status"] == "done" and booked(ledger) == [1, 2, 3]


def test_settling_in_the_library_takes_the_same_ownership_test_as_claim(tmp_path: Path) -> None:
    import os

    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal.begin_turn("t1", "book", unattended=True, guarded=True)
        journal.prepare_intent("t1", 0, "c1", "book_order", '{"order": 1}')
    with sqlite3.connect(path) as db:  # an owner in another pid namespace cannot be checked from here: taken as alive
        db.execute("UPDATE turns SET owner_host = 'elsewhere/1', owner_pid = ?", (os.getppid(),))
    with Journal(path) as journal:
        with pytest.raises(JournalError, match="another machine or pid namespace"):
            journal.settle("t1", absent=["t1:0"])
        with pytest.raises(JournalError, match="another machine or pid namespace"):
            journal.mark_absent("t1:0")
        with pytest.raises(JournalError, match="cannot be both committed and absent"):
            journal.settle("t1", committed=["t1:0"], absent=["t1:0"], force=True)
        journal.settle("t1", committed=["t1:0"], force=True)
        (intent,) = journal.intents("t1")
        assert intent.state is IntentState.COMMITTED and intent.settled_by == "user"
        with pytest.raises(JournalError, match="already committed"):
            journal.settle("t1", absent=["t1:0"], force=True)


class AsksAgainModel:
    """Books order 1, then, whatever it is told, asks for the identical write once more
    (its arguments spaced otherwise: the same canonical call), then answers."""

    name = "asks-again"

    def complete(self, messages: Any, tools: Any) -> Any:
        from unstuck.core.tools import ToolCall
        from unstuck.toolkit.models import ModelReply, Role

        answered = sum(1 for m in messages if m.role is Role.TOOL)
        if answered == 0:
            return ModelReply("", (ToolCall.of("call_1", "book_order", {"order": 1}),))
        if answered == 1:
            return ModelReply("", (ToolCall("call_again", "book_order", '{ "order" :  1 }'),))
        return ModelReply("booked order 1")


@pytest.mark.parametrize(("point", "resolved"), [("receipt.recorded", False), ("effect.returned", True)])
def test_a_write_reported_not_repeated_is_refused_when_the_model_asks_for_it_again(
    tmp_path: Path, ledger: Path, point: str, resolved: bool,
) -> None:
    from crash_child import ledger_tools, resolvers
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.resume import resume_turn
    from unstuck.toolkit.models import Role

    journal = tmp_path / "j.db"
    assert child(journal, ledger, "run", "t1", point, "1").returncode == -9
    assert booked(ledger) == [1]
    with Journal(journal) as j:
        result = resume_turn(j, "t1", model=AsksAgainModel(), tools=ledger_tools(str(ledger)), clock=VirtualClock(),
                             resolvers=resolvers(str(ledger)) if resolved else None)
        intents = j.intents("t1")
    assert booked(ledger) == [1]  # the effect was made once, before the crash, and never again
    replies = {m.tool_call_id: m.content for m in result.messages if m.role is Role.TOOL}
    assert "not repeated" in replies["call_1"]
    assert "already took effect before an interruption (effect t1:0)" in replies["call_again"]
    again = next(s for s in result.steps if s.call.id == "call_again")
    assert not again.dispatched and again.situation is not None and again.situation.is_refusal
    assert [i.effect_ref for i in intents] == ["t1:0"]  # no intent was even prepared for the repeat


def test_an_identical_write_asked_for_in_an_uninterrupted_turn_runs(tmp_path: Path, ledger: Path) -> None:
    from crash_child import ledger_tools
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.turn import run_turn

    with Journal(tmp_path / "j.db") as j:  # the model saw the first result: asking again is its own choice
        run_turn("book order 1", model=AsksAgainModel(), tools=ledger_tools(str(ledger)), unattended=True,
                 clock=VirtualClock(), journal=j, turn_id="t1")
    assert booked(ledger) == [1, 1]


class _PowerLoss(BaseException):
    """Ends a turn in the middle, as a power loss would: nothing after it runs."""


@pytest.mark.parametrize("resolved", [False, True])
def test_a_receipt_lost_with_the_power_is_held_or_resolved_never_repeated(
    tmp_path: Path, ledger: Path, resolved: bool
) -> None:
    """The receipt and the step's checkpoint ride on the next synced commit: a power loss
    after them, before the next intent, keeps only what was on disk at the intent's synced
    commit. That copy of the files (the journal and its WAL) is what resume then reads."""
    import shutil

    from crash_child import LedgerModel, ledger_tools, resolvers
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.resume import resume_turn
    from unstuck.loop.turn import run_turn

    live, durable = tmp_path / "live", tmp_path / "durable"
    live.mkdir()
    durable.mkdir()

    def on_point(name: str, ref: str) -> None:
        if ref != "t1:1":
            return
        if name == "intent.prepared":  # just after a synced commit: the files are what the disk keeps
            for part in ("j.db", "j.db-wal"):
                shutil.copy2(live / part, durable / part)
        if name == "checkpoint.saved":  # the receipt and the checkpoint rode; the power goes now
            raise _PowerLoss

    with Journal(live / "j.db", on_point=on_point) as journal, pytest.raises(_PowerLoss):
        run_turn("book orders 1 to 3", model=LedgerModel(), tools=ledger_tools(str(ledger)), unattended=True,
                 clock=VirtualClock(), journal=journal, turn_id="t1")
    assert booked(ledger) == [1, 2]
    with Journal(durable / "j.db") as journal:
        assert [(i.effect_ref, i.state) for i in journal.intents("t1")] == [
            ("t1:0", IntentState.COMMITTED), ("t1:1", IntentState.PREPARED)]  # the receipt of t1:1 was lost
        result = resume_turn(journal, "t1", model=LedgerModel(), tools=ledger_tools(str(ledger)),
                             resolvers=resolvers(str(ledger)) if resolved else None, clock=VirtualClock())
    if resolved:  # the resolver reads the ledger: order 2 happened, order 3 runs once
        assert result.status.value == "done" and booked(ledger) == [1, 2, 3]
    else:  # nobody can say: held, order 2 never booked twice
        assert result.status.value == "interrupted" and result.held_intents == ("t1:1",)
        assert booked(ledger) == [1, 2]


def test_a_resumed_turn_runs_with_the_stricter_of_the_callers_and_the_journaled_policy(tmp_path: Path) -> None:
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.decide.policy import PolicyConfig
    from unstuck.loop.resume import resume_turn
    from unstuck.toolkit.specs import Toolset, tool

    ran: list[str] = []

    @tool(interactive=True, subject="gh")
    def sign_in() -> str:
        """Sign in with a browser (a hand-off to a person)."""
        ran.append("sign_in")
        return "signed in"

    path = tmp_path / "j.db"
    with Journal(path) as journal:  # journaled attended, with a wide budget
        journal.begin_turn("t1", "sign in", unattended=False, guarded=True,
                           config_json='{"max_workarounds_after_blocker": 6}')
    with Journal(path) as journal:
        result = resume_turn(journal, "t1", model=PlaybackModel([("sign_in", {}), "done"]), tools=Toolset([sign_in]),
                             clock=VirtualClock(), unattended=True, config=PolicyConfig(max_workarounds_after_blocker=9))
    assert ran == []  # the caller runs it unattended: the interactive call is refused before dispatch
    assert result.steps and not result.steps[0].dispatched


# -- secrets the journal never keeps (issue 23) ------------------------------------------------------

#: A token in GitHub's documented shape (``ghp_`` and 36 letters or digits; github.blog changelog
#: 2021-03-31, "Authentication token format updates"): the journal keeps ``***`` in its place.
DEPLOY_TOKEN = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"


class DeploysWithATokenModel:
    """Deploys with a token (the call's arguments hold it), then, whatever it is told, asks for
    the identical deploy once more, then answers."""

    name = "deploys"

    def complete(self, messages: Any, tools: Any) -> Any:
        from unstuck.core.tools import ToolCall
        from unstuck.toolkit.models import ModelReply, Role

        answered = sum(1 for m in messages if m.role is Role.TOOL)
        if answered < 2:
            call_id = "call_1" if answered == 0 else "call_again"
            return ModelReply("", (ToolCall.of(call_id, "deploy", {"token": DEPLOY_TOKEN, "env": "prod"}),))
        return ModelReply("deployed")


def _deploy_turn(tmp_path: Path, crash_at: str) -> tuple[Path, list[str], Any]:
    """A turn whose first deploy dies at the journal point ``crash_at``; the journal, the tokens
    each deploy ran with, and the tools."""
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import Effect
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.specs import Toolset, tool

    ran: list[str] = []

    @tool(subject="prod", effect=Effect.WRITE)
    def deploy(token: str, env: str) -> str:
        """Deploy with a token."""
        ran.append(token)
        return f"deployed to {env}"

    def crash(point: str, ref: str) -> None:
        if point == crash_at and ref.endswith(":0"):
            raise Crash

    path = tmp_path / "j.db"
    with pytest.raises(Crash):
        run_turn("deploy", model=DeploysWithATokenModel(), tools=Toolset([deploy]), unattended=True,
                 clock=VirtualClock(), journal=Journal(path, on_point=crash), turn_id="t1")
    return path, ran, Toolset([deploy])


def test_a_resumed_write_whose_arguments_held_a_secret_is_not_run_with_the_mask(tmp_path: Path) -> None:
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.resume import Resolution, resume_turn
    from unstuck.toolkit.models import Role

    path, ran, tools = _deploy_turn(tmp_path, "intent.prepared")
    assert ran == []  # it died before the call
    with Journal(path) as journal:
        (intent,) = journal.intents("t1")
        assert DEPLOY_TOKEN not in intent.arguments_json and "***" in intent.arguments_json
        result = resume_turn(journal, "t1", model=DeploysWithATokenModel(), tools=tools, clock=VirtualClock(),
                             resolvers={"deploy": lambda arguments: Resolution.ABSENT})
    replies = {m.tool_call_id: m.content for m in result.messages if m.role is Role.TOOL}
    assert "was not run after an interruption" in replies["call_1"]
    assert ran == [DEPLOY_TOKEN]  # never with ***: only the model's own new call ran, with the real token


def test_a_write_made_before_a_crash_is_refused_when_the_model_asks_again_with_its_secret(tmp_path: Path) -> None:
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.resume import resume_turn
    from unstuck.toolkit.models import Role

    path, ran, tools = _deploy_turn(tmp_path, "receipt.recorded")
    assert ran == [DEPLOY_TOKEN]  # the effect was made, its receipt written, then the process died
    with Journal(path) as journal:
        result = resume_turn(journal, "t1", model=DeploysWithATokenModel(), tools=tools, clock=VirtualClock())
    replies = {m.tool_call_id: m.content for m in result.messages if m.role is Role.TOOL}
    assert "not repeated" in replies["call_1"]
    assert "already took effect before an interruption (effect t1:0)" in replies["call_again"]
    assert ran == [DEPLOY_TOKEN]  # the identical call, asked with the secret the journal masked, did not run again


def test_a_timed_out_write_the_user_let_run_again_is_not_held_again_on_resume() -> None:
    """A write timed out (it may have taken effect) and its resend was refused until the turn
    asked; the user answered "I've done it", so the guard lets it run again. The state a resume
    rebuilds from the journaled steps and that answer (``rebuild_state``) lets it run too,
    as the guard did: it is not held a second time."""
    from unstuck import Guard
    from unstuck.core.clock import VirtualClock
    from unstuck.core.tools import Effect, ToolCall
    from unstuck.decide.escalation import Answer
    from unstuck.decide.policy import Dispatch, RecoveryState, before_dispatch
    from unstuck.loop.resume import rebuild_state
    from unstuck.toolkit.specs import tool

    @tool(effect=Effect.WRITE, subject="ledger")
    def pay(order: int) -> str:
        """Book a payment: the server took it, and the answer never came back."""
        raise TimeoutError("read timed out")

    guard = Guard([pay], unattended=False, clock=VirtualClock())
    for n in range(4):  # the write, then three refused resends: the same failing call 3 times (DESIGN.md)
        guard.call(ToolCall.of(str(n), "pay", {"order": 42}))
    assert guard.escalation is not None and guard.escalated_blocker is not None
    subject = guard.escalated_blocker.subject
    assert guard.answer(Answer.DONE).action.value == "continue"
    resend = ToolCall.of("9", "pay", {"order": 42})
    assert isinstance(before_dispatch(guard.state, resend, subject="ledger", interactive=False)[0], Dispatch)
    rebuilt = rebuild_state(guard.steps, RecoveryState(unattended=False),
                            [(len(guard.steps) - 1, "close", subject)], tools=["pay"])
    assert isinstance(before_dispatch(rebuilt, resend, subject="ledger", interactive=False)[0], Dispatch)


# -- an unknown decision in the journal (issue 24): an error, never a closed blocker ---------------


def _blocked_turn_that_crashed(path: Path) -> tuple[list[int], Any]:
    """A turn whose first call met a declared sign-in blocker on ``gh``, then whose process died
    (the model's next request raised): status ``running``, the blocker open in its steps."""
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.turn import run_turn
    from unstuck.toolkit.specs import Toolset, tool

    calls: list[int] = []

    @tool(subject="gh")
    def gh(n: int) -> dict[str, Any]:
        """View a repository: signed out."""
        calls.append(n)
        return {"status": "error", "output": "gh: not signed in",
                "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    journal = Journal(path)
    try:
        with pytest.raises(Crash):
            run_turn("view the repo", model=PlaybackModel([("gh", {"n": 1}), Crash()]), tools=Toolset([gh]),
                     unattended=True, clock=VirtualClock(), journal=journal, turn_id="t1")
    finally:
        journal.close()
    return calls, Toolset([gh])


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as db:
        return {table: db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
                for table in ("turns", "steps", "intents", "decisions", "validations", "messages")}


def test_resuming_a_journal_with_an_unknown_decision_fails_naming_the_row_and_changes_nothing(
        tmp_path: Path) -> None:
    """Before issue 24 any recorded action but ``skip`` replayed as ``close``: a word nobody
    recorded closed the sign-in blocker, and the resumed turn ran ``gh`` again. Now the resume
    stops before it claims the turn, naming the journal, the table and the row."""
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.resume import resume_turn

    path = tmp_path / "j.db"
    calls, tools = _blocked_turn_that_crashed(path)
    assert calls == [1]
    with sqlite3.connect(path) as db:  # another program's, or a later release's, word
        rowid = db.execute("INSERT INTO decisions (turn_id, after_step, action, subject) VALUES ('t1', 0, 'dismiss',"
                           " 'gh')").lastrowid
    before = _rows(path)
    assert before["turns"][0][2] == "running"
    model = PlaybackModel([("gh", {"n": 2}), "done"])
    with Journal(path) as journal, pytest.raises(JournalError) as caught:
        resume_turn(journal, "t1", model=model, tools=tools, clock=VirtualClock())
    assert f"{path}: table decisions, row rowid={rowid}: action 'dismiss' is not one of" in str(caught.value)
    assert calls == [1] and model.requests == []  # the blocker was not closed: gh never ran again
    assert _rows(path) == before  # not claimed, nothing recorded: the turn is as the crash left it


def test_rebuilding_the_state_never_reads_an_unknown_decision_as_close(tmp_path: Path) -> None:
    from unstuck.decide.policy import RecoveryState
    from unstuck.loop.resume import rebuild_state
    from unstuck.store.journal import JournalDecision

    path = tmp_path / "j.db"
    _blocked_turn_that_crashed(path)
    with Journal(path, readonly=True) as journal:
        steps = journal.steps("t1")
    start = RecoveryState(unattended=True)
    assert "gh" in rebuild_state(steps, start).open_blockers  # the blocker the turn met
    assert "gh" not in rebuild_state(steps, start, [(0, JournalDecision.CLOSE, "gh")]).open_blockers
    with pytest.raises(ValueError, match="action 'dismiss', not one of 'close', 'skip', 'known'"):
        rebuild_state(steps, start, [(0, "dismiss", "gh")])  # type: ignore[list-item]
