"""The turn journal: a durable record of each turn in SQLite (WAL), with effect intents.

Per turn the journal keeps the steps in order (tool, arguments and their digest, situation,
decision), a checkpoint of the conversation after each step, the validators' verdicts and
the status. For a call to a tool with ``effect="write"`` it keeps an *effect intent*,
written and synced to disk before the call, and a receipt after it (seed 002, "effect
journal"; DESIGN.md, "effect intent")::

    prepared ──(call returned)──────────────► committed   receipt = what the call returned
        │
        └─(crash; resume asks the resolver)─► committed   receipt = the resolver's word
                                           ─► executed again (absent: it never happened)
                                           ─► held        unknown, unreadable, no resolver

Unlike peers that re-run a step whose outcome is unknown (at-least-once), a held intent stops
the turn: it is ``interrupted`` and runs no later effect until a person decides.

Storage: one SQLite file (path configurable), ``journal_mode=WAL``; several processes may
share the file (``busy_timeout`` 10 s). Commits are of two kinds (a write call costs one
synced commit, the floor, where it used to cost four):

* *synced* (``PRAGMA synchronous = FULL``: the WAL is fsynced at the commit): an effect
  intent before its call, a resumed intent, a person's word (settle, a recorded decision),
  a claim, a hold, the turn's end;
* *riding* (``synchronous = NORMAL``): a receipt, a step checkpoint, the turn's start, a
  validator's verdict. They are written and committed at once (another process, and a
  process killed with SIGKILL, sees them: they are in the OS's page cache), but not fsynced
  on their own: the next synced commit fsyncs the WAL and so makes them durable with it.

In WAL mode a commit is an append to the WAL, and recovery after a power loss keeps the
longest prefix of frames whose cumulative checksums hold
(https://www.sqlite.org/pragma.html#pragma_synchronous, https://www.sqlite.org/wal.html,
https://www.sqlite.org/fileformat2.html#walformat): a power loss keeps every transaction up
to at least the last synced commit, in order, and never corrupts the file. Every such
prefix is also a state a SIGKILL between two commits leaves, so resume needs nothing new:
a receipt lost with the power is an intent without a receipt, asked of the resolver or held
exactly as after a crash at ``effect.returned``, never run again on its own.
``sync_window`` bounds how long riding commits may wait: a riding commit made when the
oldest unsynced one (itself included) is that many seconds old or more is synced itself
(group commit: at most one extra sync per window; 0 syncs every commit). The file is
marked with its own ``application_id``; a file that is not SQLite, or another program's
database, is refused with :class:`JournalError` naming the path, never recreated. A damaged
file (``PRAGMA quick_check`` finds a problem) is refused at open, before anything is written
to it; a file deleted or replaced while open (its path names another inode) fails the next
write with :class:`JournalError` ("replaced during the run"), so a turn is never reported
as journaled into a file nobody will read (:mod:`unstuck.sqlite_store`).

Schema (issue 12): ``PRAGMA user_version`` is the layout's version (2); a file with the
journal's tables and no version (``user_version`` 0) is of version 1 and gets its version
(and its ``application_id``) at its first writable open. Version 1 is the current tables as
written before journals were redacted; version 2 is the redacted journal: what the loop
redacts as it writes (:func:`unstuck.redact.redact`: a step's content, arguments and
situation detail, :meth:`unstuck.guard.Guard.checkpoint`; a message's text,
``unstuck.loop._stored``) and what the journal redacts itself (an effect receipt,
:func:`unstuck.redact.redact_value`) is redacted in the rows of a version-1 journal too.
Effect intents and the tool calls in messages keep their arguments exactly, as on write: a
resumed turn re-runs the very call. A journal of an older version opened for writing is
migrated in place (:func:`unstuck.sqlite_store.migrate`): a copy is kept first as
``<name>.schema<N>.bak`` (:meth:`Journal.backup_path`), then every step of
:data:`_MIGRATIONS` runs in one write transaction; the next layout change is one function
appended there. A journal of a newer version is refused, naming the file and both versions.
A read-only open never migrates and never writes: an older journal is read as it is, its
steps, messages, receipts and turns' texts redacted as they are read (:attr:`Journal.schema` tells).

Settling an intent (:meth:`Journal.settle`, a person's ``--committed``/``--absent``) takes
the same ownership test as :meth:`Journal.claim`: it is refused while the turn's owner runs,
so an owner that dies after the settle cannot run the effect twice.

Errors::

    JournalError (UnstuckError, RuntimeError)   unreadable, corrupt or foreign journal file; a
                                                failed SQLite operation (path and operation named,
                                                the sqlite3.Error as __cause__); unknown turn; a
                                                file replaced during the run; a live owner
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unstuck.errors import UnstuckError
from unstuck.leases import start_time
from unstuck.outcome import StepRecord
from unstuck.policy import Action
from unstuck.redact import redact, redact_value
from unstuck.situations import Situation, validate_situation
from unstuck.sqlite_store import (
    FileIdentity,
    Migration,
    backup_path,
    clean_text,
    connect,
    describe,
    migrate,
    open_failure,
    quick_check,
    store_errors,
    write,
)
from unstuck.tools import ToolCall

__all__ = [
    "APPLICATION_ID",
    "IntentState",
    "Journal",
    "JournalError",
    "JournalIntent",
    "JournalTurn",
    "arguments_digest",
    "host_identity",
    "process_alive",
    "process_identity",
    "situation_from_json",
    "situation_to_json",
]

#: ``PRAGMA application_id`` of an unstuck journal ("unsj").
APPLICATION_ID = 0x756E736A
_SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY, task TEXT NOT NULL, status TEXT NOT NULL, unattended INTEGER NOT NULL,
    guarded INTEGER NOT NULL, started_at REAL NOT NULL, ended_at REAL, answer TEXT, error TEXT,
    checkpoint_step INTEGER NOT NULL DEFAULT -1, config TEXT NOT NULL DEFAULT '{}',
    owner_pid INTEGER, owner_start INTEGER, owner_host TEXT
);
CREATE TABLE decisions (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), after_step INTEGER NOT NULL, action TEXT NOT NULL,
    subject TEXT NOT NULL
);
CREATE TABLE messages (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), seq INTEGER NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
CREATE TABLE steps (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), idx INTEGER NOT NULL, call_id TEXT NOT NULL,
    tool TEXT NOT NULL, arguments TEXT NOT NULL, arguments_digest TEXT NOT NULL, subject TEXT NOT NULL,
    interactive INTEGER NOT NULL, auto_retry INTEGER NOT NULL, dispatched INTEGER NOT NULL,
    probe INTEGER NOT NULL, retry INTEGER NOT NULL, ok INTEGER NOT NULL, situation TEXT, decision TEXT NOT NULL,
    exempt TEXT NOT NULL, injected TEXT, content TEXT NOT NULL, started_s REAL NOT NULL, duration_s REAL NOT NULL,
    PRIMARY KEY (turn_id, idx)
);
CREATE TABLE intents (
    effect_ref TEXT PRIMARY KEY, turn_id TEXT NOT NULL REFERENCES turns(turn_id), step INTEGER NOT NULL,
    call_id TEXT NOT NULL, reply_seq INTEGER NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
    state TEXT NOT NULL, prepared_at REAL NOT NULL, settled_at REAL, receipt TEXT, settled_by TEXT
);
CREATE TABLE validations (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), name TEXT NOT NULL, verdict TEXT NOT NULL,
    evidence TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX intents_by_turn ON intents (turn_id, step);
"""
#: The tables of the journal's layout (versions 1 and 2 alike).
_TABLES = frozenset({"turns", "decisions", "messages", "steps", "intents", "validations"})


class JournalError(UnstuckError, RuntimeError):
    """A journal file that cannot be used (named in the message), or an unknown turn."""


class IntentState(enum.StrEnum):
    """Where an effect intent stands."""

    PREPARED = "prepared"  # written before the call; no receipt yet
    COMMITTED = "committed"  # a receipt says the effect happened
    HELD = "held"  # after a crash nobody could say whether it happened: the turn waits for a person


def host_identity() -> str:
    """This machine's boot and pid namespace (``/proc/sys/kernel/random/boot_id`` and the
    inode of ``/proc/self/ns/pid``): pids mean something only where these match. Empty
    when ``/proc`` cannot tell."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}/{namespace}"


def process_identity(pid: int | None = None) -> tuple[int, int]:
    """(pid, start time in clock ticks since boot) of a process, this one by default; the
    start time tells a live owner from a later process that reused its pid."""
    pid = os.getpid() if pid is None else pid
    return pid, _start_time(pid) or 0


def _start_time(pid: int) -> int | None:
    return start_time(pid)


def process_alive(pid: int, start: int | None) -> bool:
    """Whether the process ``pid`` started at ``start`` (clock ticks since boot) still runs
    (not a zombie); ``start`` ``None`` or 0: any process with that pid."""
    found = start_time(pid)
    return found is not None and (start is None or start == 0 or found == start)


def arguments_digest(arguments_json: str) -> str:
    """SHA-256 of a call's canonical JSON arguments (hex, first 16 characters)."""
    return hashlib.sha256(arguments_json.encode("utf-8")).hexdigest()[:16]


def situation_to_json(situation: Situation | None) -> str | None:
    """A situation as JSON (every field; the probe as ``{"tool", "args"}``), or ``None``."""
    return None if situation is None else json.dumps(situation.to_dict())


def situation_from_json(text: str | None) -> Situation | None:
    """The inverse of :func:`situation_to_json` (validated as a tool's declaration is).

    Raises:
        JournalError: for text that is not a valid situation.
    """
    if text is None:
        return None
    try:
        return validate_situation("journal", json.loads(text), allow_refusal=True)
    except (ValueError, TypeError) as exc:
        raise JournalError(f"a journaled situation does not read back: {exc}") from None


#: Decisions as journals written before :class:`unstuck.policy.Action` stored them.
_LEGACY_DECISIONS = {"Continue": Action.CONTINUE, "Escalate": Action.ESCALATE, "RetryAfter": Action.RETRY}


def _decision(text: str) -> Action:
    try:
        return _LEGACY_DECISIONS.get(text) or Action(text)
    except ValueError:
        raise JournalError(f"a journaled step has an unknown decision {text!r}") from None


@dataclass(frozen=True, slots=True)
class JournalIntent:
    """An effect intent: ``effect_ref`` is ``{turn_id}:{step}``."""

    effect_ref: str
    turn_id: str
    step: int
    call_id: str
    tool: str
    arguments_json: str
    state: IntentState
    receipt: str | None = None
    settled_by: str | None = None
    reply_seq: int = -1  # the model reply (its message's position) that asked for the call


@dataclass(frozen=True, slots=True)
class JournalTurn:
    """A turn's header: its task, status and the last step checkpointed."""

    turn_id: str
    task: str
    status: str
    unattended: bool
    guarded: bool
    started_at: float
    ended_at: float | None
    answer: str | None
    error: str | None
    checkpoint_step: int


#: A test-mode switch: called with (point, effect_ref) at the journal's crash points
#: ``intent.prepared``, ``effect.returned``, ``receipt.recorded``, ``checkpoint.saved``.
PointHook = Callable[[str, str], None]


@store_errors(JournalError)
class Journal:
    """An open journal file. Use as a context manager, or call :meth:`close`.

    Args:
        path: the SQLite file (made, with its folder, when missing, unless ``readonly``).
        on_point: a test hook called at each crash point (see :data:`PointHook`); ``None``
            in normal use.
        readonly: open for reading only (a read-only file or mount works; nothing is made).
        sync_window: seconds a riding commit (receipt, checkpoint) may stay unsynced before
            a riding commit is synced itself; ``None`` (the default): until the next synced
            commit (the next intent, the turn's end). Must be >= 0.

    Attributes:
        commits: synced commits made through this object (``synchronous = FULL``).
        riding_commits: commits made without their own sync (``synchronous = NORMAL``).
        schema: the file's layout version (``PRAGMA user_version``; 1 for a file without
            one): 2 once a writable open migrated it; 1 only in a read-only open, which
            reads steps, messages and receipts redacted.

    Raises:
        JournalError: when the file is not SQLite, is another program's database, is
            damaged (``PRAGMA quick_check``; refused before anything is written), or is a
            journal of a newer schema; from any public method, when SQLite fails (the file
            damaged or removed while open, a full disk): the message names the path and the
            method, the ``sqlite3.Error`` is its ``__cause__`` (:func:`unstuck.sqlite_store.store_errors`);
            from a write, when the path no longer names the file opened ("replaced during
            the run").
    """

    def __init__(self, path: Path | str, *, on_point: PointHook | None = None, readonly: bool = False,
                 sync_window: float | None = None) -> None:
        if sync_window is not None and not sync_window >= 0:
            raise ValueError(f"Journal sync_window must be None or seconds >= 0, not {sync_window!r}")
        self.path = Path(path)
        self.on_point = on_point
        self.readonly = readonly
        self.sync_window = sync_window
        self.commits = 0
        self.riding_commits = 0
        self._synchronous = "FULL"
        self._unsynced_since: float | None = None  # monotonic seconds of the oldest riding commit not yet synced
        if readonly and not self.path.is_file():
            raise JournalError(f"no journal at {self.path}")
        if readonly and self.path.stat().st_size == 0:
            raise JournalError(f"{self.path} is empty, not an unstuck journal")
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            problems = quick_check(self.path)
        except sqlite3.Error as exc:
            raise JournalError(open_failure(self.path, exc, "journal")) from exc
        if problems:
            raise JournalError(f"{self.path} is damaged (PRAGMA quick_check: {'; '.join(problems)}); "
                               "it was left untouched")
        try:
            self._db = connect(self.path, readonly=readonly)
        except sqlite3.Error as exc:
            raise JournalError(open_failure(self.path, exc, "journal")) from exc
        try:
            self._identity = FileIdentity.of(self.path)
            self._open()
        except (sqlite3.Error, OSError) as exc:
            self._db.close()
            raise JournalError(open_failure(self.path, exc, "journal")) from exc
        except BaseException:
            self._db.close()
            raise

    def _open(self) -> None:
        app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
        tables = self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == 0 and tables == 0 and not self.readonly:
            self._db.execute("PRAGMA journal_mode = WAL")
            with self._write() as db:
                # checked again inside the write lock: another process may have made it meanwhile
                if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
            app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        unversioned = version == 0 and app_id in (0, APPLICATION_ID) and names == _TABLES
        if app_id != APPLICATION_ID and not unversioned:
            what = describe(self._db, app_id)
            raise JournalError(f"{self.path} is {what}, not an unstuck journal; it was left untouched")
        if version > _SCHEMA_VERSION:
            raise JournalError(f"{self.path} is a journal of schema {version}; this unstuck reads schemas 1 to "
                               f"{_SCHEMA_VERSION}; it was left untouched")
        if version == 0 and not unversioned:
            raise JournalError(f"{self.path} is marked as a journal but has no schema version and not the journal's "
                               f"tables; it was left untouched")
        if not self.readonly:
            migrate(self._db, self.path, _MIGRATIONS, transaction=self._write, unversioned=1,
                    application_id=APPLICATION_ID)
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
        self.schema: int = self._db.execute("PRAGMA user_version").fetchone()[0] or 1

    def backup_path(self, version: int) -> Path:
        """Where the copy of a version-``version`` journal is kept when it is migrated in
        place: ``<name>.schema<version>.bak`` beside it (:func:`unstuck.sqlite_store.backup_path`)."""
        return backup_path(self.path, version)

    @contextmanager
    def _write(self, *, sync: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction, synced (``synchronous = FULL``) or riding on the next
        synced commit (``NORMAL``; synced all the same when ``sync_window`` has passed)."""
        now = time.monotonic()
        oldest = now if self._unsynced_since is None else self._unsynced_since  # this commit counts too
        if not sync and self.sync_window is not None and now - oldest >= self.sync_window:
            sync = True
        mode = "FULL" if sync else "NORMAL"
        if mode != self._synchronous:  # a connection setting, read at each commit: set between transactions
            self._db.execute(f"PRAGMA synchronous = {mode}")
            self._synchronous = mode
        with write(self._db, before_commit=self._still_in_place) as db:
            yield db
        if sync:
            self.commits += 1
            self._unsynced_since = None
        else:
            self.riding_commits += 1
            if self._unsynced_since is None:
                self._unsynced_since = now

    def _still_in_place(self) -> None:
        self._identity.require_unchanged(
            JournalError, "what this process wrote since is not in any journal a later command will read")

    def _point(self, name: str, ref: str) -> None:
        if self.on_point is not None:
            self.on_point(name, ref)

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------

    def begin_turn(self, turn_id: str, task: str, *, unattended: bool, guarded: bool, config_json: str = "{}") -> None:
        """Record a new turn, status ``running``, owned by this process (its pid and start
        time), with the policy's settings as JSON (a riding commit)."""
        pid, start = process_identity()
        with self._write(sync=False) as db:  # rides on the first intent or the turn's end
            db.execute(
                "INSERT INTO turns (turn_id, task, status, unattended, guarded, started_at, config, owner_pid,"
                " owner_start, owner_host) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (turn_id, redact(clean_text(task)), "running", int(unattended), int(guarded), time.time(), config_json,
                 pid, start, host_identity()),
            )

    def claim(self, turn_id: str, *, force: bool = False) -> None:
        """Take a turn over to resume it: it must not have ended, and its owner must be gone
        (a dead process on this machine and pid namespace, or one that let go when its turn
        ended or was held). An owner elsewhere (another container, another machine, no
        ``/proc`` to ask) cannot be seen: it is taken as alive unless ``force``, which a
        person uses once they know it is gone. Compare-and-set on the owner, so of two
        processes resuming at once exactly one wins. A process may resume its own turn.

        Raises:
            JournalError: for an unknown turn, one that ended, one whose owner still runs
                (or may), or one another process claimed first.
        """
        status, pid, start = self._owner_gone(turn_id, force=force, doing="resume it")
        if status in ("done", "blocked", "failed"):
            raise JournalError(f"turn {turn_id} already ended {status}; there is nothing to resume")
        me, my_start = process_identity()
        with self._write() as db:
            changed = db.execute(
                "UPDATE turns SET owner_pid = ?, owner_start = ?, owner_host = ?, status = 'running', ended_at = NULL"
                " WHERE turn_id = ? AND owner_pid IS ? AND owner_start IS ?",
                (me, my_start, host_identity(), turn_id, pid, start),
            ).rowcount
        if changed != 1:
            raise JournalError(f"turn {turn_id} was claimed by another process first")

    def _owner_gone(self, turn_id: str, *, force: bool, doing: str) -> tuple[str, int | None, int | None]:
        """The turn's (status, owner pid, owner start) once its owner is known to be gone
        (or is this process, or there is none); ``doing`` names the refused act.

        Raises:
            JournalError: for an unknown turn, or an owner that runs (or may: another
                machine or pid namespace, unless ``force``).
        """
        row = self._db.execute("SELECT status, owner_pid, owner_start, owner_host FROM turns WHERE turn_id = ?",
                               (turn_id,)).fetchone()
        if row is None:
            raise JournalError(f"no turn {turn_id!r} in {self.path}")
        status, pid, start, host = row
        mine = (pid, start) == process_identity() and host == host_identity()
        if pid is not None and not mine and not force:
            here = host_identity()
            if not here or host != here:
                raise JournalError(f"turn {turn_id} is owned by process {pid} in another machine or pid namespace, "
                                   f"which cannot be checked from here; {doing} with force once you know that process "
                                   "is gone")
            if process_alive(pid, start):
                raise JournalError(f"turn {turn_id} is still owned by live process {pid}; {doing} once that process "
                                   "has ended")
        return str(status), pid, start

    def settle(self, turn_id: str, *, committed: Sequence[str] = (), absent: Sequence[str] = (),
               force: bool = False) -> None:
        """A person's word on intents of ``turn_id``: the effects of ``committed`` happened
        (a receipt by ``"user"``: never repeated), those of ``absent`` did not
        (:data:`USER_ABSENT`: a resume runs them again). Like :meth:`claim`, it requires
        that nobody else owns the turn: it is refused while the owner's process runs (an
        owner that died after the settle could otherwise run the effect a second time), and
        an owner elsewhere is taken as alive unless ``force``. All refs are settled in one
        transaction, under a compare-and-set on the owner: a resumer that claimed the turn
        meanwhile wins and nothing is settled.

        Raises:
            JournalError: for an unknown turn, a live (or uncheckable) owner, a ref that is
                in both lists, not an intent of this turn, or already committed; an owner
                that changed meanwhile.
        """
        both = sorted(set(committed) & set(absent))
        if both:
            raise JournalError(f"{', '.join(both)} cannot be both committed and absent")
        _, pid, start = self._owner_gone(turn_id, force=force, doing="settle its intents")
        receipt = json.dumps({"resolved": "committed", "by": "user"})
        with self._write() as db:
            owner = db.execute("SELECT owner_pid, owner_start FROM turns WHERE turn_id = ?", (turn_id,)).fetchone()
            if owner is None or (owner[0], owner[1]) != (pid, start):
                raise JournalError(f"turn {turn_id} was claimed by another process meanwhile; nothing was settled")
            for ref in [*committed, *absent]:
                row = db.execute("SELECT state FROM intents WHERE effect_ref = ? AND turn_id = ?",
                                 (ref, turn_id)).fetchone()
                if row is None:
                    raise JournalError(f"{ref} is not an effect intent of turn {turn_id} in {self.path}")
                if row[0] == IntentState.COMMITTED.value:
                    raise JournalError(f"{ref} is already committed; it is never repeated")
            now = time.time()
            for ref in committed:
                db.execute("UPDATE intents SET state = ?, receipt = ?, settled_at = ?, settled_by = ?"
                           " WHERE effect_ref = ?", (IntentState.COMMITTED.value, receipt, now, "user", ref))
            for ref in absent:
                db.execute("UPDATE intents SET state = ?, settled_by = ? WHERE effect_ref = ?",
                           (IntentState.PREPARED.value, self.USER_ABSENT, ref))

    def record_decision(self, turn_id: str, after_step: int, action: str, subject: str) -> None:
        """Record a user's answer that changed the recovery state (``close`` or ``skip`` of a
        subject) after step ``after_step``, so a resumed turn replays it."""
        with self._write() as db:
            db.execute("INSERT INTO decisions VALUES (?, ?, ?, ?)", (turn_id, after_step, action, subject))

    def decisions(self, turn_id: str) -> list[tuple[int, str, str]]:
        """A turn's recorded answers: (after_step, action, subject), in order."""
        rows = self._db.execute("SELECT after_step, action, subject FROM decisions WHERE turn_id = ? ORDER BY rowid",
                                (turn_id,)).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def config(self, turn_id: str) -> str:
        """The policy settings the turn was started with (JSON)."""
        row = self._db.execute("SELECT config FROM turns WHERE turn_id = ?", (turn_id,)).fetchone()
        return str(row[0]) if row is not None else "{}"

    def resume_intent(self, ref: str) -> None:
        """A prepared intent is about to run again on resume: whatever a person said of it
        is spent (so a second crash asks again, never re-runs on an old answer)."""
        with self._write() as db:
            db.execute("UPDATE intents SET settled_by = NULL WHERE effect_ref = ? AND state = ?",
                       (ref, IntentState.PREPARED.value))

    def prepare_intent(
        self, turn_id: str, step: int, call_id: str, tool: str, arguments_json: str, *, reply_seq: int = -1
    ) -> str:
        """Write the intent of a side-effecting call and sync it, before the call; returns
        its ``effect_ref`` (``{turn_id}:{step}``).

        Raises:
            JournalError: when that ref exists already (two effects must never share one).
        """
        ref = f"{turn_id}:{step}"
        with self._write() as db:
            if db.execute("SELECT 1 FROM intents WHERE effect_ref = ?", (ref,)).fetchone() is not None:
                raise JournalError(f"effect intent {ref} already exists in {self.path}")
            db.execute(
                "INSERT INTO intents (effect_ref, turn_id, step, call_id, reply_seq, tool, arguments, state,"
                " prepared_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (ref, turn_id, step, clean_text(call_id), reply_seq, clean_text(tool), clean_text(arguments_json),
                 IntentState.PREPARED.value, time.time()),
            )
        self._point("intent.prepared", ref)
        return ref

    def effect_returned(self, ref: str) -> None:
        """The call of ``ref`` returned (nothing is written: a crash point for tests)."""
        self._point("effect.returned", ref)

    def record_receipt(self, ref: str, receipt: str, *, settled_by: str = "call") -> None:
        """Mark ``ref`` committed with ``receipt`` (what the call returned, or who said so),
        redacted (JSON: every string, :func:`unstuck.redact.redact_value`; other text:
        :func:`unstuck.redact.redact`). A riding commit: visible at once and kept through a
        SIGKILL, durable through a power loss with the next synced commit; a receipt lost
        with the power leaves the intent ``prepared``, which resume asks about or holds
        (never runs again on its own)."""
        with self._write(sync=False) as db:
            db.execute(
                "UPDATE intents SET state = ?, receipt = ?, settled_at = ?, settled_by = ? WHERE effect_ref = ?",
                (IntentState.COMMITTED.value, _redacted_json(clean_text(receipt)), time.time(), settled_by, ref),
            )
        self._point("receipt.recorded", ref)

    #: ``settled_by`` of an intent a person said did not happen: a resume runs it again.
    USER_ABSENT = "user:absent"

    def mark_absent(self, ref: str, *, force: bool = False) -> None:
        """A person checked that ``ref``'s effect did not happen: back to ``prepared``, so a
        resumed turn runs the same intent (:data:`USER_ABSENT`). :meth:`settle` of its
        turn: refused while the turn's owner runs.

        Raises:
            JournalError: for an unknown ref, and as :meth:`settle`.
        """
        row = self._db.execute("SELECT turn_id FROM intents WHERE effect_ref = ?", (ref,)).fetchone()
        if row is None:
            raise JournalError(f"no effect intent {ref!r} in {self.path}")
        self.settle(str(row[0]), absent=[ref], force=force)

    def hold(self, refs: Sequence[str], reason: str) -> None:
        """Mark intents held (nobody could say whether they happened), with the reason."""
        with self._write() as db:
            for ref in refs:
                db.execute("UPDATE intents SET state = ?, settled_by = ? WHERE effect_ref = ?",
                           (IntentState.HELD.value, reason, ref))

    def checkpoint(
        self, turn_id: str, *, steps: Sequence[StepRecord], messages: Sequence[str], first_seq: int, ref: str = ""
    ) -> None:
        """In one transaction (a riding commit: durable with the next synced one): new steps,
        the conversation's new messages (JSON, numbered from ``first_seq``) and the
        checkpoint mark. A resumed turn continues from the last checkpoint that reached the
        disk. ``ref`` names the effect for the crash-point hook."""
        with self._write(sync=False) as db:
            for step in steps:
                db.execute(
                    "INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (turn_id, step.index, clean_text(step.call.id), clean_text(step.call.tool),
                     clean_text(step.call.arguments_json), arguments_digest(clean_text(step.call.arguments_json)),
                     clean_text(step.subject), int(step.interactive),
                     int(step.auto_retry), int(step.dispatched), int(step.probe), int(step.retry), int(step.ok),
                     situation_to_json(step.situation), step.decision.value, json.dumps(list(step.exempt)),
                     step.injected, clean_text(step.content[:4000]), step.started_s, step.duration_s),
                )
                db.execute("UPDATE turns SET checkpoint_step = ? WHERE turn_id = ?", (step.index, turn_id))
            db.executemany(
                "INSERT OR REPLACE INTO messages VALUES (?, ?, ?)",
                [(turn_id, first_seq + i, message) for i, message in enumerate(messages)],
            )
        self._point("checkpoint.saved", ref)

    def record_validation(self, turn_id: str, name: str, verdict: str, evidence: str) -> None:
        """Record one validator's verdict (``passed``, ``failed`` or ``not required``); a
        riding commit (the turn's end, next, is synced)."""
        with self._write(sync=False) as db:
            db.execute("INSERT INTO validations VALUES (?, ?, ?, ?, ?)",
                       (turn_id, name, verdict, evidence, time.time()))

    def end_turn(self, turn_id: str, status: str, *, answer: str = "", error: str | None = None) -> None:
        """Record the turn's final (or, for ``interrupted``, current) status (a synced commit,
        which makes every riding commit before it durable too)."""
        with self._write() as db:
            db.execute("UPDATE turns SET status = ?, ended_at = ?, answer = ?, error = ?, owner_pid = NULL,"
                       " owner_start = NULL, owner_host = NULL WHERE turn_id = ?",  # the owner lets go
                       (status, time.time(), redact(clean_text(answer)), redact(clean_text(error)) if error else error,
                        turn_id))

    # -- reading -----------------------------------------------------------------------------

    def turns(self) -> list[JournalTurn]:
        """Every turn, newest first."""
        rows = self._db.execute("SELECT * FROM turns ORDER BY started_at DESC").fetchall()
        return [self._turn(row) for row in rows]

    def turn(self, turn_id: str) -> JournalTurn:
        """One turn's header and checkpoint.

        Raises:
            JournalError: for an unknown turn id (the message lists none; see :meth:`turns`).
        """
        row = self._db.execute("SELECT * FROM turns WHERE turn_id = ?", (turn_id,)).fetchone()
        if row is None:
            raise JournalError(f"no turn {turn_id!r} in {self.path}")
        return self._turn(row)

    def _turn(self, row: Sequence[Any]) -> JournalTurn:
        task, answer, error = row[1], row[7], row[8]
        if self.schema < _SCHEMA_VERSION:  # a version-1 journal read without migrating: redacted as it is read
            task, answer, error = (redact(v) if isinstance(v, str) else v for v in (task, answer, error))
        return JournalTurn(row[0], task, row[2], bool(row[3]), bool(row[4]), row[5], row[6], answer, error, row[9])

    def steps(self, turn_id: str) -> list[StepRecord]:
        """A turn's steps in order (content as journaled: its first 4,000 characters; the
        per-step ``charged``/``opened``/``closed`` lists are not kept: folding the policy over
        the steps gives them again)."""
        rows = self._db.execute(
            "SELECT idx, call_id, tool, arguments, subject, interactive, auto_retry, dispatched, probe, retry, ok,"
            " situation, decision, exempt, injected, content, started_s, duration_s FROM steps"
            " WHERE turn_id = ? ORDER BY idx", (turn_id,),
        ).fetchall()
        if self.schema < _SCHEMA_VERSION:  # a version-1 journal read without migrating: redacted as it is read
            rows = [(*r[:3], redact(r[3]), *r[4:11], _redacted_situation(r[11]), *r[12:15], redact(r[15]), *r[16:])
                    for r in rows]
        return [
            StepRecord(r[0], ToolCall(r[1], r[2], r[3]), r[4], dispatched=bool(r[7]), probe=bool(r[8]), ok=bool(r[10]),
                       situation=situation_from_json(r[11]), started_s=r[16], duration_s=r[17], content=r[15],
                       retry=bool(r[9]), injected=r[14], interactive=bool(r[5]), auto_retry=bool(r[6]),
                       exempt=tuple(json.loads(r[13])), decision=_decision(r[12]))
            for r in rows
        ]

    def intents(self, turn_id: str) -> list[JournalIntent]:
        """A turn's effect intents in step order."""
        rows = self._db.execute(
            "SELECT effect_ref, turn_id, step, call_id, tool, arguments, state, receipt, settled_by, reply_seq"
            " FROM intents WHERE turn_id = ? ORDER BY step", (turn_id,),
        ).fetchall()
        if self.schema < _SCHEMA_VERSION:
            rows = [(*r[:7], _redacted_json(r[7]), *r[8:]) for r in rows]
        return [JournalIntent(r[0], r[1], r[2], r[3], r[4], r[5], IntentState(r[6]), r[7], r[8], r[9]) for r in rows]

    def messages(self, turn_id: str) -> list[str]:
        """A turn's conversation as checkpointed: one JSON message per item, in order."""
        rows = self._db.execute("SELECT message FROM messages WHERE turn_id = ? ORDER BY seq", (turn_id,)).fetchall()
        if self.schema < _SCHEMA_VERSION:
            return [_redacted_message(r[0]) for r in rows]
        return [r[0] for r in rows]

    def validations(self, turn_id: str) -> list[tuple[str, str, str]]:
        """A turn's validator verdicts: (name, verdict, evidence)."""
        rows = self._db.execute("SELECT name, verdict, evidence FROM validations WHERE turn_id = ? ORDER BY rowid",
                                (turn_id,)).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]


# -- schema versions ---------------------------------------------------------------------------


def _redacted_json(text: str | None) -> str | None:
    """JSON text with every string in it redacted (:func:`unstuck.redact.redact_value`), the
    same text when nothing changed; text that is not JSON redacted as text."""
    if not text:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return redact(text)
    clean = redact_value(value)
    return text if clean == value else json.dumps(clean)


def _redacted_field(text: str | None, name: str) -> str | None:
    """A JSON object's text with its string field ``name`` redacted (the rest kept as is);
    text that is not such an object redacted as text."""
    if not text:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return redact(text)
    if not isinstance(value, dict) or not isinstance(value.get(name), str):
        return text
    clean = redact(value[name])
    return text if clean == value[name] else json.dumps({**value, name: clean})


def _redacted_message(text: str) -> str:
    """A journaled message (:func:`unstuck.models.message_to_json`) as the loop writes it
    since version 2: its text redacted, its tool calls' arguments exact."""
    return _redacted_field(text, "content") or text


def _redacted_situation(text: str | None) -> str | None:
    """A journaled situation as the guard writes it since version 2: its detail redacted."""
    return _redacted_field(text, "detail")


def _redact_2(db: sqlite3.Connection) -> None:
    """Version 1 -> 2: the rows of a journal written before redaction redacted as they are
    written now (see the module doc): each step's content, arguments (and their digest, of
    the redacted arguments, as :meth:`Journal.checkpoint` takes it) and situation detail;
    each message's text; each receipt; each turn's task, final answer and error. Only changed
    rows are updated."""
    for turn_id, idx, arguments, situation, content in db.execute(
            "SELECT turn_id, idx, arguments, situation, content FROM steps").fetchall():
        new = (redact(arguments), _redacted_situation(situation), redact(content))
        if new != (arguments, situation, content):
            db.execute("UPDATE steps SET arguments = ?, arguments_digest = ?, situation = ?, content = ?"
                       " WHERE turn_id = ? AND idx = ?", (new[0], arguments_digest(new[0]), *new[1:], turn_id, idx))
    for turn_id, seq, message in db.execute("SELECT turn_id, seq, message FROM messages").fetchall():
        clean = _redacted_message(message)
        if clean != message:
            db.execute("UPDATE messages SET message = ? WHERE turn_id = ? AND seq = ?", (clean, turn_id, seq))
    for ref, receipt in db.execute("SELECT effect_ref, receipt FROM intents WHERE receipt IS NOT NULL").fetchall():
        clean_receipt = _redacted_json(receipt)
        if clean_receipt != receipt:
            db.execute("UPDATE intents SET receipt = ? WHERE effect_ref = ?", (clean_receipt, ref))
    for turn_id, task, answer, error in db.execute("SELECT turn_id, task, answer, error FROM turns").fetchall():
        cleaned = (redact(task or ""), redact(answer or ""), redact(error) if error else error)
        if cleaned != (task or "", answer or "", error):
            db.execute("UPDATE turns SET task = ?, answer = ?, error = ? WHERE turn_id = ?", (*cleaned, turn_id))


#: The layout steps, in order: step ``i`` turns version ``i + 1`` into ``i + 2``
#: (:func:`unstuck.sqlite_store.migrate`); the last gives :data:`_SCHEMA_VERSION`. A layout
#: change is one function appended here (and :data:`_SCHEMA` and :data:`_SCHEMA_VERSION`).
_MIGRATIONS: tuple[Migration, ...] = (_redact_2,)
