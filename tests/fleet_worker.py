"""A fleet of agent workers sharing one PostgreSQL store (issue 16): the worker program, and
the functions that start a fleet and read back what it did. Used by tests/test_fleet.py (the
load test) and bench/bench_stores.py (turns per second).

A worker is its own process (``python tests/fleet_worker.py --index N ...``), its host named
by the environment variable ``UNSTUCK_HOST_ID`` (:data:`unstuck.store.urls.HOST_ENV`, set by
:func:`spawn`), with its own :class:`~unstuck.store.journal.Journal` and
:class:`~unstuck.store.lessons.LessonStore` on the one store URL. It runs ``turns`` turns through
:func:`unstuck.loop.turn.run_turn` with a scripted model (tests/conftest.py's ``PlaybackModel``).
Each turn makes ``writes`` calls of the write tool ``ship``, each inserting one row into the
``effects`` table of a separate database (:func:`prepare_effects`), keyed by
``w<worker>-t<turn>-s<call>`` (the key is in the call's arguments, so in its journaled intent).

One turn of a plan may call ``deploy`` (a write tool whose every run appends its key to the
file ``deploy-attempts`` in the fleet folder, ``O_APPEND``). ``deploy`` needs the token file
``deploy-token`` in the fleet folder, which nobody wrote: it declares an ``auth`` blocker on
the subject ``deploy-token`` with the unblock ``deployctl login`` and the read-only probe
``deploy_status``. The *learner* calls it and is blocked, and its turn stores the lesson;
then it creates the file ``lesson-stored`` (:data:`LESSON_MARK`). Every *follower* waits for
that file before its deploy turn, so that turn is the first it starts after the lesson was
stored.

Start gate: each worker, once its stores are open, creates ``ready-<index>`` in the fleet
folder and waits for ``go`` (:func:`run_fleet` creates it when all are ready), so process
start-up is outside the measured turns.

Each finished turn is one JSON line on the worker's standard output (:class:`TurnReport`).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from conftest import PlaybackModel  # noqa: E402
from unstuck.core.clock import RealClock  # noqa: E402
from unstuck.core.tools import Effect  # noqa: E402
from unstuck.loop.turn import run_turn  # noqa: E402
from unstuck.recognise.signals import load_signal_table  # noqa: E402
from unstuck.store.events import EventLog  # noqa: E402
from unstuck.store.journal import Journal  # noqa: E402
from unstuck.store.lessons import LessonStore  # noqa: E402
from unstuck.store.urls import HOST_ENV  # noqa: E402
from unstuck.toolkit.specs import Toolset, tool  # noqa: E402

#: The subject the deploy token blocks, its unblock, and the environment fingerprint every
#: worker of a fleet shares (one worker may be given another, :data:`OTHER_FINGERPRINT`).
DEPLOY_SUBJECT = "deploy-token"
DEPLOY_UNBLOCK = "deployctl login"
SHARED_FINGERPRINT = "/usr/bin/deployctl|deployctl 1.4.2"
OTHER_FINGERPRINT = "/opt/deployctl/bin/deployctl|deployctl 2.0.0"

#: Files in the fleet folder.
TOKEN_FILE = "deploy-token"
ATTEMPTS_FILE = "deploy-attempts"
LESSON_MARK = "lesson-stored"
GO_MARK = "go"

#: Seconds a worker waits for the start gate or the lesson mark before it fails.
WAIT_S = 120.0

EFFECTS_TABLE = ("CREATE TABLE effects (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key TEXT NOT NULL,"
                 " worker INTEGER NOT NULL, pid INTEGER NOT NULL)")


class Role(enum.StrEnum):
    """What a worker does about ``deploy``: nothing, meet the blocker first, or meet it after
    the learner stored the lesson."""

    NONE = "none"
    LEARNER = "learner"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """One worker: its index, host (``UNSTUCK_HOST_ID``), turns, ``ship`` calls per turn,
    fingerprint, role (:class:`Role`) and the turn (0-based) that calls ``deploy`` (-1: none)."""

    index: int
    host: str
    turns: int
    writes: int
    fingerprint: str = SHARED_FINGERPRINT
    role: Role = Role.NONE
    deploy_turn: int = -1


@dataclass(frozen=True, slots=True)
class TurnReport:
    """One finished turn as a worker saw it: status, wall-clock start and end (epoch
    seconds), the worker process's CPU seconds in the turn (``time.process_time``), the lesson
    ids of its ``lesson.shown``, ``lesson.applied`` and ``lesson.stored`` events, and its
    escalation's text (empty when none)."""

    worker: int
    turn_id: str
    status: str
    started_at: float
    ended_at: float
    cpu_s: float
    shown: tuple[int, ...]
    applied: tuple[int, ...]
    stored: tuple[int, ...]
    escalation: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, line: str) -> TurnReport:
        raw = json.loads(line)
        return cls(int(raw["worker"]), str(raw["turn_id"]), str(raw["status"]), float(raw["started_at"]),
                   float(raw["ended_at"]), float(raw["cpu_s"]), tuple(int(x) for x in raw["shown"]), tuple(int(x) for x in raw["applied"]),
                   tuple(int(x) for x in raw["stored"]), str(raw["escalation"]))


def turn_id(worker: int, turn: int) -> str:
    return f"w{worker:02d}-t{turn:03d}"


def effect_key(worker: int, turn: int, call: int) -> str:
    return f"w{worker:02d}-t{turn:03d}-s{call}"


def deploy_key(worker: int, turn: int) -> str:
    return f"w{worker:02d}-t{turn:03d}-deploy"


def standard_plans(workers: int, turns: int, writes: int, *, lesson: bool = True) -> list[WorkerPlan]:
    """The load test's fleet: workers 0 to 7 on ``machine-a``, the rest on ``machine-b``. With
    ``lesson``: worker 0 learns in its middle turn; every other worker follows in the turn
    after, the last one with :data:`OTHER_FINGERPRINT` (its environment differs)."""
    middle = turns // 2
    plans: list[WorkerPlan] = []
    for index in range(workers):
        host = "machine-a" if index < workers // 2 or workers == 1 else "machine-b"
        if not lesson:
            plans.append(WorkerPlan(index, host, turns, writes))
        elif index == 0:
            plans.append(WorkerPlan(index, host, turns, writes, role=Role.LEARNER, deploy_turn=middle))
        else:
            fingerprint = OTHER_FINGERPRINT if index == workers - 1 else SHARED_FINGERPRINT
            plans.append(WorkerPlan(index, host, turns, writes, fingerprint, Role.FOLLOWER, middle + 1))
    return plans


def prepare_effects(effects_url: str) -> None:
    """Create the ``effects`` table (no unique key on ``key``: a duplicate effect must show
    as a second row, not as a refused insert)."""
    with psycopg.connect(effects_url, autocommit=True) as connection:
        connection.execute(EFFECTS_TABLE)


def fleet_tools(index: int, folder: Path, effects: psycopg.Connection[Any]) -> Toolset:
    token = folder / TOKEN_FILE

    def missing_token() -> dict[str, Any]:
        return {"status": "error", "situation": {
            "kind": "auth", "subject": DEPLOY_SUBJECT, "unblock": DEPLOY_UNBLOCK,
            "probe": {"tool": "deploy_status", "args": {}}, "detail": f"no deploy token at {token}"}}

    @tool(effect=Effect.WRITE, subject="effects")
    def ship(key: str) -> str:
        """Record one shipment (a row in the effects table)."""
        effects.execute("INSERT INTO effects (key, worker, pid) VALUES (%s, %s, %s)", (key, index, os.getpid()))
        return f"shipped {key}"

    @tool(effect=Effect.WRITE, subject=DEPLOY_SUBJECT)
    def deploy(key: str) -> dict[str, Any] | str:
        """Deploy the service (needs the deploy token)."""
        fd = os.open(folder / ATTEMPTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{key}\n".encode())
        finally:
            os.close(fd)
        return f"deployed {key}" if token.is_file() else missing_token()

    @tool(subject=DEPLOY_SUBJECT)
    def deploy_status() -> dict[str, Any] | str:
        """Whether a deploy token is present (read-only)."""
        return "signed in" if token.is_file() else missing_token()

    return Toolset([ship, deploy, deploy_status])


def script(plan: WorkerPlan, turn: int) -> list[object]:
    """The model's replies for one turn: ``writes`` ``ship`` calls, ``deploy`` in the deploy
    turn, then an answer."""
    replies: list[object] = [("ship", {"key": effect_key(plan.index, turn, call)}) for call in range(plan.writes)]
    if turn == plan.deploy_turn:
        replies.append(("deploy", {"key": deploy_key(plan.index, turn)}))
    replies.append("done")
    return replies


def wait_for(path: Path, seconds: float = WAIT_S) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {seconds} s")
        time.sleep(0.005)


def touch(path: Path) -> None:
    path.touch()


def run_worker(plan: WorkerPlan, store_url: str, effects_url: str, folder: Path) -> list[TurnReport]:
    """Run one worker's turns in this process (its host is this process's ``UNSTUCK_HOST_ID``),
    printing each :class:`TurnReport` as it finishes; returns them."""
    reports: list[TurnReport] = []
    with (Journal(store_url) as journal, LessonStore(store_url) as lessons,
          psycopg.connect(effects_url, autocommit=True) as effects):
        tools = fleet_tools(plan.index, folder, effects)
        clock = RealClock()
        load_signal_table()  # read once per process (run_turn's first step); start-up, not a turn's cost
        touch(folder / f"ready-{plan.index}")
        wait_for(folder / GO_MARK)
        for turn in range(plan.turns):
            if plan.role == Role.FOLLOWER and turn == plan.deploy_turn:
                wait_for(folder / LESSON_MARK)
            log = EventLog()
            started, cpu = time.time(), time.process_time()
            result = run_turn(f"ship batch {turn}", model=PlaybackModel(script(plan, turn), closing="I stopped."),
                              tools=tools, unattended=True, clock=clock, events=log, turn_id=turn_id(plan.index, turn),
                              journal=journal, lessons=lessons, fingerprint=lambda subject: plan.fingerprint,
                              stall_after_s=None)
            ended, cpu = time.time(), time.process_time() - cpu

            def ids(name: str, events: EventLog = log) -> tuple[int, ...]:
                return tuple(int(str(e.get("lesson"))) for e in events.named(name))

            report = TurnReport(plan.index, result.turn_id, result.status.value, started, ended, cpu, ids("lesson.shown"),
                                ids("lesson.applied"), ids("lesson.stored"),
                                result.escalation.text if result.escalation is not None else "")
            print(report.to_json(), flush=True)
            reports.append(report)
            if plan.role == Role.LEARNER and turn == plan.deploy_turn:
                touch(folder / LESSON_MARK)
    return reports


def spawn(plan: WorkerPlan, store_url: str, effects_url: str, folder: Path) -> subprocess.Popen[str]:
    """Start one worker process (this Python, this file) with ``UNSTUCK_HOST_ID`` set to its host."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--index", str(plan.index), "--turns", str(plan.turns),
            "--writes", str(plan.writes), "--fingerprint", plan.fingerprint, "--role", plan.role.value,
            "--deploy-turn", str(plan.deploy_turn), "--store", store_url, "--effects", effects_url,
            "--dir", str(folder)]
    env = {**os.environ, HOST_ENV: plan.host, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@dataclass(frozen=True, slots=True)
class FleetRun:
    """What a fleet did: every turn's report, and the wall-clock window from the gate's
    opening to the last turn's end (seconds)."""

    reports: tuple[TurnReport, ...]
    seconds: float


def run_fleet(plans: Sequence[WorkerPlan], store_url: str, effects_url: str, folder: Path,
              timeout: float = WAIT_S) -> FleetRun:
    """Start a worker process per plan, open the gate once all are ready, wait for them.

    Raises:
        RuntimeError: a worker exited non-zero (its standard error in the message) or did not
            finish within ``timeout`` seconds (all are killed then).
    """
    folder.mkdir(parents=True, exist_ok=True)
    workers = [spawn(plan, store_url, effects_url, folder) for plan in plans]
    try:
        deadline = time.monotonic() + timeout
        while not all((folder / f"ready-{plan.index}").exists() for plan in plans):
            failed = [w for w in workers if w.poll() not in (None, 0)]
            if failed:
                raise RuntimeError(f"a worker failed before the gate: {failed[0].communicate()[1][-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers were not ready within {timeout} s")
            time.sleep(0.01)
        opened = time.time()
        touch(folder / GO_MARK)
        reports: list[TurnReport] = []
        for plan, worker in zip(plans, workers, strict=True):
            out, err = worker.communicate(timeout=max(deadline - time.monotonic(), 1.0))
            if worker.returncode != 0:
                raise RuntimeError(f"worker {plan.index} exited {worker.returncode}: {err[-3000:]}")
            reports.extend(TurnReport.from_json(line) for line in out.splitlines() if line.strip())
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"the fleet did not finish within {timeout} s") from exc
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    last = max((r.ended_at for r in reports), default=opened)
    return FleetRun(tuple(reports), last - opened)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="One fleet worker (tests/fleet_worker.py).")
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--writes", type=int, required=True)
    parser.add_argument("--fingerprint", default=SHARED_FINGERPRINT)
    parser.add_argument("--role", type=Role, choices=list(Role), default=Role.NONE)
    parser.add_argument("--deploy-turn", type=int, default=-1)
    parser.add_argument("--store", required=True, help="the journal's and the lessons' store URL")
    parser.add_argument("--effects", required=True, help="the effects database's URL")
    parser.add_argument("--dir", type=Path, required=True, help="the fleet folder")
    args = parser.parse_args(argv)
    plan = WorkerPlan(args.index, os.environ.get(HOST_ENV, ""), args.turns, args.writes, args.fingerprint, args.role,
                      args.deploy_turn)
    run_worker(plan, args.store, args.effects, args.dir)


if __name__ == "__main__":
    main()
