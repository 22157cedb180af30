"""The turn journal: a durable record of each turn (SQLite in WAL, or PostgreSQL), with
effect intents and leases.

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
as journaled into a file nobody will read (:mod:`unstuck.store.sqlite`).

Secrets (issues 12 and 23): nothing the journal writes holds a secret. Every string of every
statement passes the store boundary (:func:`unstuck.store.engines.clean_params`, which redacts it with
:func:`unstuck.core.redact.redact_document`), whatever the table: a turn's task, answer and error, a
step's content, arguments and situation, every message (its text and its tool calls'
arguments), an effect intent's arguments and receipt, a validator's evidence. A call whose
arguments held a secret is therefore journaled with ``***`` in its place: a resumed turn never
runs such a call again from the journal (:mod:`unstuck.loop.resume` tells the model instead).

Schema (issue 12): ``PRAGMA user_version`` is the layout's version (5); a file with the
journal's tables and no version (``user_version`` 0) is of version 1 and gets its version
(and its ``application_id``) at its first writable open. Version 1 is the current tables as
written before journals were redacted; version 2 redacted steps, messages' texts, receipts and
turns' texts; version 3 added leases; version 4 each intent's runner (below); version 5
redacts every string of every row, as the store boundary writes it now (the intents' and
messages' call arguments, kept exact before, and formats unknown before). A journal of an
older version opened for writing is migrated in place (:func:`unstuck.store.sqlite.migrate`): a copy is kept first as
``<name>.schema<N>.bak`` (:meth:`Journal.backup_path`; mode 0600, every string in it redacted
as the migration redacts it, a step's ``arguments_digest`` made of its arguments as kept:
:func:`_redact_rows`, so the copy keeps no secret either), then every step of
:data:`_MIGRATIONS` runs in one write transaction and the file is rewritten whole, its WAL
emptied (no old page keeps a secret); the next layout change is one function appended there.
A journal of a newer version is refused, naming the file and both versions.
A read-only open never migrates and never writes: an older journal is read as it is, every
string redacted as it is read (:func:`unstuck.store.engines.clean_row`; :attr:`Journal.schema` tells).

Version 4 (issue 23) adds each intent's *runner*: the process (machine, pid, start time) that
ran its call or was about to (:class:`Runner`), so a resume can tell whether that process may
still be running it (:func:`runner_gone`).

Engines (issue 16): the same journal lives in an SQLite file or in a PostgreSQL database a
fleet shares, chosen by a store URL (:mod:`unstuck.store.urls`, :mod:`unstuck.store.engines`). The
semantics are the same on both: synced and riding commits (PostgreSQL's
``synchronous_commit``), close-don't-delete, schema versions with migrations
(``unstuck_schema`` on PostgreSQL), the same errors.

Leases (issue 16): a turn's owner is a lease, not a local pid. The turn's row holds its
owner (host, pid, start time), a *fencing token* and an expiry by the store's clock. The
owner renews the lease every third of ``lease_ttl`` (a background thread) and with every
write; every write on a turn (checkpoint, intent, receipt, validation, hold, decision, end)
runs in one transaction with a compare-and-set on the token, so a stale owner (stopped,
cut off, then woken) whose turn was taken over writes nothing (:class:`LeaseLostError`).
:meth:`Journal.claim` takes a turn whose lease ran out, whose owner let go, or whose owner is
a dead process on this machine, and increments the token; a resumer on another machine
waits for the expiry. Settling an intent (:meth:`Journal.settle`, a person's
``--committed``/``--absent``) requires the lease the same way: it takes it (so an owner that
wakes after the settle cannot run the effect twice) and lets it go in one transaction.

Vocabularies (issue 24): every column that holds a word of a closed vocabulary is read as
its enum and written from it, as the same strings as before: a turn's ``status``
(:class:`~unstuck.decide.outcome.TurnStatus`), a step's ``decision``
(:class:`~unstuck.decide.policy.Action`, and the names stored before it), an intent's
``state`` (:class:`IntentState`) and ``settled_by`` (:class:`SettledBy`; a held intent keeps
the reason it was held there instead), a recorded decision's ``action``
(:class:`JournalDecision`), a validation's ``verdict``
(:class:`~unstuck.decide.outcome.Verdict`). A value outside its vocabulary is never read as a
default: it is a :class:`JournalError` naming the journal, the table and the row, and the row
is left as it is (a resume checks the whole turn before it claims it: :meth:`Journal.check_turn`).

Errors::

    JournalError (UnstuckError, RuntimeError)   unreadable, corrupt or foreign journal file or
                                                database; a failed SQLite or PostgreSQL operation
                                                (store and operation named, the engine's error as
                                                __cause__); unknown turn; a file replaced during
                                                the run; a live lease; a value outside its
                                                vocabulary (journal, table and row named)
        LeaseLostError                          a write on a turn another owner took over
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from unstuck.core.errors import UnstuckError
from unstuck.core.redact import redacted_prefix
from unstuck.core.situations import Situation, validate_situation
from unstuck.core.tools import ToolCall
from unstuck.decide.outcome import StepRecord, TurnStatus, Verdict
from unstuck.decide.policy import Action
from unstuck.processes.identity import host_identity, process_alive, process_identity
from unstuck.store.engines import (
    SQLiteEngine,
    StoreEngine,
    Transaction,
    clean_params,
    closed_value,
    open_postgres_store,
    redact_rows,
)
from unstuck.store.sqlite import (
    FileIdentity,
    Migration,
    backup_path,
    clean_text,
    connect,
    describe,
    engine_error,
    migrate,
    open_failure,
    quick_check,
    store_errors,
)
from unstuck.store.urls import ENV_VAR, StoreRole, StoreURL, store_for

__all__ = [
    "APPLICATION_ID",
    "LEASE_TTL",
    "IntentState",
    "Journal",
    "JournalDecision",
    "JournalError",
    "JournalIntent",
    "JournalTurn",
    "Lease",
    "LeaseLostError",
    "Runner",
    "SettledBy",
    "arguments_digest",
    "host_identity",
    "process_alive",
    "process_identity",
    "runner_gone",
    "situation_from_json",
    "situation_to_json",
]

#: ``PRAGMA application_id`` of an unstuck journal ("unsj").
APPLICATION_ID = 0x756E736A
_SCHEMA_VERSION = 5

#: Seconds a turn's lease lasts after each renewal; the running turn renews it every third of
#: that, so a resumer on another machine waits at most this long after the owner stopped.
LEASE_TTL = 30.0

_SCHEMA = """
CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY, task TEXT NOT NULL, status TEXT NOT NULL, unattended INTEGER NOT NULL,
    guarded INTEGER NOT NULL, started_at REAL NOT NULL, ended_at REAL, answer TEXT, error TEXT,
    checkpoint_step INTEGER NOT NULL DEFAULT -1, config TEXT NOT NULL DEFAULT '{}',
    owner_pid INTEGER, owner_start INTEGER, owner_host TEXT,
    lease_token INTEGER NOT NULL DEFAULT 0, lease_expires_at REAL
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
    state TEXT NOT NULL, prepared_at REAL NOT NULL, settled_at REAL, receipt TEXT, settled_by TEXT,
    runner_host TEXT, runner_pid BIGINT, runner_start BIGINT
);
CREATE TABLE validations (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id), name TEXT NOT NULL, verdict TEXT NOT NULL,
    evidence TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX intents_by_turn ON intents (turn_id, step);
"""
#: The same layout on PostgreSQL: 8-byte floats and integers (PostgreSQL's ``REAL`` has 4
#: bytes), and an identity column ``rowid`` where SQLite's implicit rowid keeps the order of
#: decisions and validations.
_POSTGRES_SCHEMA = (
    """CREATE TABLE turns (
        turn_id TEXT PRIMARY KEY, task TEXT NOT NULL, status TEXT NOT NULL, unattended INTEGER NOT NULL,
        guarded INTEGER NOT NULL, started_at DOUBLE PRECISION NOT NULL, ended_at DOUBLE PRECISION, answer TEXT,
        error TEXT, checkpoint_step BIGINT NOT NULL DEFAULT -1, config TEXT NOT NULL DEFAULT '{}',
        owner_pid BIGINT, owner_start BIGINT, owner_host TEXT,
        lease_token BIGINT NOT NULL DEFAULT 0, lease_expires_at DOUBLE PRECISION
    )""",
    """CREATE TABLE decisions (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, turn_id TEXT NOT NULL REFERENCES turns(turn_id),
        after_step BIGINT NOT NULL, action TEXT NOT NULL, subject TEXT NOT NULL
    )""",
    """CREATE TABLE messages (
        turn_id TEXT NOT NULL REFERENCES turns(turn_id), seq BIGINT NOT NULL, message TEXT NOT NULL,
        PRIMARY KEY (turn_id, seq)
    )""",
    """CREATE TABLE steps (
        turn_id TEXT NOT NULL REFERENCES turns(turn_id), idx BIGINT NOT NULL, call_id TEXT NOT NULL,
        tool TEXT NOT NULL, arguments TEXT NOT NULL, arguments_digest TEXT NOT NULL, subject TEXT NOT NULL,
        interactive INTEGER NOT NULL, auto_retry INTEGER NOT NULL, dispatched INTEGER NOT NULL,
        probe INTEGER NOT NULL, retry INTEGER NOT NULL, ok INTEGER NOT NULL, situation TEXT, decision TEXT NOT NULL,
        exempt TEXT NOT NULL, injected TEXT, content TEXT NOT NULL, started_s DOUBLE PRECISION NOT NULL,
        duration_s DOUBLE PRECISION NOT NULL, PRIMARY KEY (turn_id, idx)
    )""",
    """CREATE TABLE intents (
        effect_ref TEXT PRIMARY KEY, turn_id TEXT NOT NULL REFERENCES turns(turn_id), step BIGINT NOT NULL,
        call_id TEXT NOT NULL, reply_seq BIGINT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
        state TEXT NOT NULL, prepared_at DOUBLE PRECISION NOT NULL, settled_at DOUBLE PRECISION, receipt TEXT,
        settled_by TEXT, runner_host TEXT, runner_pid BIGINT, runner_start BIGINT
    )""",
    """CREATE TABLE validations (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, turn_id TEXT NOT NULL REFERENCES turns(turn_id),
        name TEXT NOT NULL, verdict TEXT NOT NULL, evidence TEXT NOT NULL, at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX intents_by_turn ON intents (turn_id, step)",
    "CREATE INDEX turns_by_start ON turns (started_at)",
)
#: The tables of the journal's layout (every version).
_TABLES = frozenset({"turns", "decisions", "messages", "steps", "intents", "validations"})
#: What :data:`_POSTGRES_SCHEMA` makes: a database holding any of them without the journal's
#: schema row is another program's.
_POSTGRES_RELATIONS = (*sorted(_TABLES), "intents_by_turn", "turns_by_start")
#: The statuses of a turn that is over, as SQL literals (a claim never takes such a turn).
_ENDED_SQL = ", ".join(f"'{status.value}'" for status in TurnStatus if status.ended)
#: A closed vocabulary a column is read as (:meth:`Journal._closed`).
_V = TypeVar("_V", bound=enum.StrEnum)
#: A turn header's columns, in :class:`JournalTurn`'s order.
_TURN_COLUMNS = ("turn_id, task, status, unattended, guarded, started_at, ended_at, answer, error, checkpoint_step")
_STEP_FIELDS = ("turn_id", "idx", "call_id", "tool", "arguments", "arguments_digest", "subject", "interactive",
                "auto_retry", "dispatched", "probe", "retry", "ok", "situation", "decision", "exempt", "injected",
                "content", "started_s", "duration_s")
_STEP_COLUMNS = ", ".join(_STEP_FIELDS)
_STEP_UPDATE = ", ".join(f"{name} = excluded.{name}" for name in _STEP_FIELDS[2:])


class JournalError(UnstuckError, RuntimeError):
    """A journal that cannot be used (named in the message), or an unknown turn."""


class LeaseLostError(JournalError):
    """A write on a turn whose lease this process does not hold: another owner took the turn
    over (its fencing token is newer), or the process never claimed it. Nothing was written."""


@dataclass(frozen=True, slots=True)
class Lease:
    """Who may write to a turn, as the store sees it: ``owner_host`` (:func:`host_identity`)
    and ``owner_pid`` (``None`` when nobody holds it), the fencing ``token`` (incremented by
    every claim), ``expires_at`` and ``now`` (epoch seconds by the store's clock; ``None``:
    no expiry, the turn ended or let go), and whether this journal object holds it."""

    turn_id: str
    owner_host: str | None
    owner_pid: int | None
    token: int
    expires_at: float | None
    now: float
    held: bool


def _store_url(target: Path | str | StoreURL | None) -> StoreURL:
    try:
        url = store_for(StoreRole.JOURNAL, target)
    except UnstuckError as exc:
        raise JournalError(f"journal {exc}") from None
    if url is None:
        raise JournalError(f"no journal named: give a path or a store URL, or set {ENV_VAR}")
    return url


class IntentState(enum.StrEnum):
    """Where an effect intent stands."""

    PREPARED = "prepared"  # written before the call; no receipt yet
    COMMITTED = "committed"  # a receipt says the effect happened
    HELD = "held"  # after a crash nobody could say whether it happened: the turn waits for a person


class SettledBy(enum.StrEnum):
    """Who settled an effect intent (its ``settled_by``), as the journal stores it. A held
    intent keeps the reason it was held in that column instead (free text:
    :attr:`JournalIntent.settled_by`, :attr:`JournalIntent.settler`)."""

    CALL = "call"  # committed: the call returned, and its receipt is what it returned
    RESOLVER = "resolver"  # committed: after a crash, the tool's resolver said it happened
    USER = "user"  # committed: a person said it happened (``unstuck journal resume --committed``)
    USER_ABSENT = "user:absent"  # prepared again: a person said it did not happen; a resume runs it


class JournalDecision(enum.StrEnum):
    """An answer the journal keeps because it changed a turn's recovery state (the
    ``decisions`` table), so a resumed turn and the cost report replay it after the step it
    followed (:func:`unstuck.loop.resume.rebuild_state`)."""

    CLOSE = "close"  # the user said "I've done it" and the probe (if any) agreed: the blocker closed
    SKIP = "skip"  # the user chose "Skip it": the subject is skipped, calls on it are refused
    KNOWN = "known"  # a lesson's probe said its blocker still holds: the blocker opened as known


@dataclass(frozen=True, slots=True)
class Runner:
    """The process that ran an effect intent's call, or was about to (it prepared the intent,
    or resumed it): its machine (:func:`host_identity`), pid and start time (clock ticks since
    boot, :func:`process_identity`)."""

    host: str
    pid: int
    start: int


def runner_gone(runner: Runner | None) -> tuple[bool, str]:
    """Whether the process that ran an intent's call is known not to be running it now, and
    why (or why that cannot be known), for a resumer that already holds the turn's lease (so
    that process, fenced, can write nothing more, but its call may still be under way).

    Known gone: a process on this machine and pid namespace (the same :func:`host_identity`)
    whose pid is gone or now belongs to a later process (another start time,
    :func:`process_alive`); or this very process, whose run of the turn has ended (a turn
    resumed by the process that ran it). Not known: a process on this machine that is still
    alive (stopped with SIGSTOP, or cut off: woken, it may still finish the call), one on
    another machine or pid namespace (whose pids mean nothing here), or a runner not recorded
    (an intent written before schema 4).
    """
    if runner is None:
        return False, "which process ran it was not recorded (an intent from before journal schema 4)"
    here = host_identity()
    if not here or runner.host != here:
        return False, (f"it ran in process {runner.pid} on another machine or pid namespace (host {runner.host}), "
                       "which cannot be checked from here: that process may still finish the call")
    if (runner.pid, runner.start) == process_identity():
        return True, "it ran in this process, whose run of the turn has ended"
    if process_alive(runner.pid, runner.start):
        return False, (f"the process that ran it ({runner.pid}) is still alive on this machine (stopped or cut off; "
                       "woken, it may still finish the call)")
    return True, f"the process that ran it ({runner.pid}) is gone"


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


#: Decisions as journals written before :class:`unstuck.decide.policy.Action` stored them.
_LEGACY_DECISIONS = {"Continue": Action.CONTINUE, "Escalate": Action.ESCALATE, "RetryAfter": Action.RETRY}


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
    #: Who settled it, a :class:`SettledBy` (``None``: nobody yet); for a held intent, the
    #: reason it is held (the column keeps that instead): see :attr:`settler`.
    settled_by: str | None = None
    reply_seq: int = -1  # the model reply (its message's position) that asked for the call
    runner: Runner | None = None  # the process that ran the call, or was about to (schema 4)

    @property
    def settler(self) -> SettledBy | None:
        """Who settled it; ``None`` when nobody has, or it is held (:attr:`settled_by` then
        says why)."""
        if self.settled_by is None or self.state is IntentState.HELD:
            return None
        return SettledBy(self.settled_by)


@dataclass(frozen=True, slots=True)
class JournalTurn:
    """A turn's header: its task, status and the last step checkpointed."""

    turn_id: str
    task: str
    status: TurnStatus
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
    """An open journal: an SQLite file, or a PostgreSQL database a fleet shares. Use as a
    context manager, or call :meth:`close`.

    Args:
        path: where the journal lives: a :class:`~unstuck.store.urls.StoreURL`, a store URL
            (``sqlite:///path``, ``postgresql://…``: :func:`unstuck.store.urls.parse_store_url`)
            or a path of an SQLite file (made, with its folder, when missing, unless
            ``readonly``); ``None``: the journal of ``UNSTUCK_STORE``
            (:func:`unstuck.store.urls.store_for`), an error when it is unset.
        on_point: a test hook called at each crash point (see :data:`PointHook`); ``None``
            in normal use.
        readonly: open for reading only (a read-only file or mount works; nothing is made).
        sync_window: seconds a riding commit (receipt, checkpoint) may stay unsynced before
            a riding commit is synced itself; ``None`` (the default): until the next synced
            commit (the next intent, the turn's end). Must be >= 0.
        lease_ttl: seconds a turn's lease lasts after each renewal (:data:`LEASE_TTL`); the
            turn renews it every third of that while it runs. Must be > 0.

    Attributes:
        path: the SQLite file, ``None`` for PostgreSQL.
        where: the journal for messages (the path, or the URL with its password masked).
        engine: :class:`unstuck.store.urls.Engine` of the store.
        commits: synced commits made through this object (``synchronous = FULL``, or
            PostgreSQL's ``synchronous_commit`` on).
        riding_commits: commits made without their own sync.
        schema: the layout version (SQLite's ``PRAGMA user_version``, 1 for a file without
            one; PostgreSQL's ``unstuck_schema`` row): 4 once a writable open migrated it;
            older only in a read-only open of an older file, which reads steps, messages
            and receipts redacted (version 1).

    Raises:
        JournalError: when the file is not SQLite, is another program's database, is
            damaged (``PRAGMA quick_check``; refused before anything is written), or is a
            journal of a newer schema; when a PostgreSQL database cannot be reached, holds
            another program's tables or a newer journal; from any public method, when the
            engine fails (an SQLite file damaged or removed while open, a full disk, a lost
            server): the message names the store and the method, the ``sqlite3.Error`` or
            ``psycopg.Error`` is its ``__cause__`` (:func:`unstuck.store.sqlite.store_errors`);
            from a write, when the SQLite path no longer names the file opened ("replaced
            during the run"); :class:`LeaseLostError` from a write on a turn another owner
            took over.
    """

    def __init__(self, path: Path | str | StoreURL | None, *, on_point: PointHook | None = None, readonly: bool = False,
                 sync_window: float | None = None, lease_ttl: float = LEASE_TTL) -> None:
        if sync_window is not None and not sync_window >= 0:
            raise ValueError(f"Journal sync_window must be None or seconds >= 0, not {sync_window!r}")
        if not lease_ttl > 0:
            raise ValueError(f"Journal lease_ttl must be seconds > 0, not {lease_ttl!r}")
        url = _store_url(path)
        self.path: Path | None = url.path
        self.where = url.shown if url.path is None else str(url.path)
        self.engine = url.engine
        self.on_point = on_point
        self.readonly = readonly
        self.sync_window = sync_window
        self.lease_ttl = float(lease_ttl)
        self.commits = 0
        self.riding_commits = 0
        self._unsynced_since: float | None = None  # monotonic seconds of the oldest riding commit not yet synced
        self._leases: dict[str, int] = {}  # turn id -> the fencing token this object holds
        self._lost: dict[str, int] = {}  # turn id -> the token this object held when another owner took the turn
        self._lease_lock = threading.Lock()  # the turn's thread and the lease keeper both change the two
        self._keeper: _LeaseKeeper | None = None
        self._db: StoreEngine
        if url.path is None:
            self._open_postgres(url)
        else:
            self._open_sqlite(url.path)

    def _open_sqlite(self, path: Path) -> None:
        if self.readonly and not path.is_file():
            raise JournalError(f"no journal at {path}")
        if self.readonly and path.stat().st_size == 0:
            raise JournalError(f"{path} is empty, not an unstuck journal")
        if not self.readonly:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise JournalError(f"{path}: cannot make its folder {path.parent}: {exc.strerror or exc}") from exc
        try:
            problems = quick_check(path)
        except sqlite3.Error as exc:
            raise JournalError(open_failure(path, exc, "journal")) from exc
        if problems:
            raise JournalError(f"{path} is damaged (PRAGMA quick_check: {'; '.join(problems)}); "
                               "it was left untouched")
        try:
            connection = connect(path, readonly=self.readonly)
        except sqlite3.Error as exc:
            raise JournalError(open_failure(path, exc, "journal")) from exc
        try:
            self._identity = FileIdentity.of(path)
            self._db = self._sqlite = SQLiteEngine(connection, str(path), before_commit=self._still_in_place,
                                                   readonly=self.readonly)
            self._open(connection, path)
        except (sqlite3.Error, OSError) as exc:
            connection.close()
            raise JournalError(open_failure(path, exc, "journal")) from exc
        except BaseException:
            connection.close()
            raise

    def _open(self, db: sqlite3.Connection, path: Path) -> None:
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == 0 and tables == 0 and not self.readonly:
            db.execute("PRAGMA journal_mode = WAL")
            with self._write() as tx:
                # checked again inside the write lock: another process may have made it meanwhile
                if tx.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                    tx.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    tx.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            tx.execute(statement)
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        unversioned = version == 0 and app_id in (0, APPLICATION_ID) and names == _TABLES
        if app_id != APPLICATION_ID and not unversioned:
            what = describe(db, app_id)
            raise JournalError(f"{path} is {what}, not an unstuck journal; it was left untouched")
        if version > _SCHEMA_VERSION:
            raise JournalError(f"{path} is a journal of schema {version}; this unstuck reads schemas 1 to "
                               f"{_SCHEMA_VERSION}; it was left untouched")
        if version == 0 and not unversioned:
            raise JournalError(f"{path} is marked as a journal but has no schema version and not the journal's "
                               f"tables; it was left untouched")
        if not self.readonly:
            migrate(db, path, _MIGRATIONS, transaction=self._sqlite.transaction, unversioned=1,
                    application_id=APPLICATION_ID, scrub=_redact_rows)
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")
        self.schema: int = db.execute("PRAGMA user_version").fetchone()[0] or 1

    def _open_postgres(self, url: StoreURL) -> None:
        try:
            self._db, self.schema = open_postgres_store(url, "journal", _SCHEMA_VERSION, _POSTGRES_SCHEMA,
                                                        _POSTGRES_RELATIONS, _MIGRATIONS, readonly=self.readonly)
        except UnstuckError as exc:  # it names the server and the URL (password masked) already
            raise JournalError(f"cannot open the journal: {exc}") from exc
        except ValueError as exc:
            raise JournalError(str(exc)) from None
        except Exception as exc:
            if not engine_error(exc):
                raise
            raise JournalError(f"cannot open the journal at {url.shown}: {type(exc).__name__}: {exc}") from exc

    def backup_path(self, version: int) -> Path:
        """Where the copy of a version-``version`` journal is kept when it is migrated in
        place: ``<name>.schema<version>.bak`` beside it (:func:`unstuck.store.sqlite.backup_path`).

        Raises:
            JournalError: for a journal on PostgreSQL (migrations run in one transaction
                there; back the database up with pg_dump first).
        """
        if self.path is None:
            raise JournalError(f"{self.where} is on PostgreSQL: migrations keep no file copy")
        return backup_path(self.path, version)

    @contextmanager
    def _write(self, *, sync: bool = True) -> Iterator[Transaction]:
        """One write transaction, synced or riding on the next synced commit (synced all the
        same when ``sync_window`` has passed)."""
        now = time.monotonic()
        oldest = now if self._unsynced_since is None else self._unsynced_since  # this commit counts too
        if not sync and self.sync_window is not None and now - oldest >= self.sync_window:
            sync = True
        with self._db.transaction(sync=sync) as tx:
            yield tx
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
        """Stop renewing this object's leases (they run out after ``lease_ttl``; a turn that
        ended let go of its lease already) and close the store."""
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None
        self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- leases --------------------------------------------------------------------------------

    def _fence(self, tx: Transaction, turn_id: str) -> None:
        """Inside a write transaction: require this object's lease on ``turn_id`` (its fencing
        token still the turn's) and extend it by ``lease_ttl`` (a write is a sign of life).
        The row is locked until the transaction ends, so a claim waits for it.

        Raises:
            LeaseLostError: another owner took the turn over (its token is newer), or this
                object never held it.
        """
        token = self._leases.get(turn_id)
        if token is not None:
            changed = tx.execute(
                f"UPDATE turns SET lease_expires_at = {self._db.now_sql} + ? WHERE turn_id = ? AND lease_token = ?",
                (self.lease_ttl, turn_id, token)).rowcount
            if changed == 1:
                return
        row = tx.execute("SELECT lease_token, owner_host, owner_pid FROM turns WHERE turn_id = ?",
                         (turn_id,)).fetchone()
        if row is None:
            raise JournalError(f"no turn {turn_id!r} in {self.where}")
        token = token if token is not None else self._lost.get(turn_id)
        if token is None:
            raise LeaseLostError(f"turn {turn_id} is not leased to this process (lease token {row[0]}); claim it "
                                 "first: only the lease holder writes to a turn")
        with self._lease_lock:  # a claim by this object may have replaced the token meanwhile: keep that one
            if self._leases.get(turn_id) == token:
                del self._leases[turn_id]
                self._lost[turn_id] = token
        now = (f"now owned by process {row[2]} on host {row[1]}" if row[2] is not None
               else "since let go: a person settled its intents, or its new owner ended it")
        raise LeaseLostError(f"turn {turn_id} was taken over (lease token {row[0]}, this process held {token}; "
                             f"{now}): this process writes nothing more to it")

    def _fence_ref(self, tx: Transaction, ref: str) -> None:
        row = tx.execute("SELECT turn_id FROM intents WHERE effect_ref = ?", (ref,)).fetchone()
        if row is not None:
            self._fence(tx, str(row[0]))

    def _hold_lease(self, turn_id: str, token: int) -> None:
        with self._lease_lock:
            self._leases[turn_id] = token
            self._lost.pop(turn_id, None)
        if self._keeper is None:
            self._keeper = _LeaseKeeper(self)

    def renew(self, turn_id: str) -> None:
        """Extend this object's lease on ``turn_id`` by ``lease_ttl`` seconds (the turn's lease
        keeper calls it every third of that; a write renews too).

        Raises:
            LeaseLostError: another owner took the turn over.
        """
        with self._db.transaction(sync=False) as tx:  # not counted: a lost renewal only ends the lease sooner
            self._fence(tx, turn_id)

    def lease(self, turn_id: str) -> Lease:
        """The turn's current lease as the store sees it.

        Raises:
            JournalError: for an unknown turn.
        """
        row = self._db.one(f"SELECT owner_host, owner_pid, lease_token, lease_expires_at, {self._db.now_sql}"
                           " FROM turns WHERE turn_id = ?", (turn_id,))
        if row is None:
            raise JournalError(f"no turn {turn_id!r} in {self.where}")
        return Lease(turn_id, row[0], row[1], int(row[2]), row[3], float(row[4]), row[2] == self._leases.get(turn_id))

    # -- writing -----------------------------------------------------------------------------

    def begin_turn(self, turn_id: str, task: str, *, unattended: bool, guarded: bool, config_json: str = "{}") -> None:
        """Record a new turn, status ``running``, leased to this process (its host, pid and
        start time; lease token 1, expiring ``lease_ttl`` seconds from now by the store's
        clock and renewed while the turn runs), with the policy's settings as JSON (a riding
        commit)."""
        pid, start = process_identity()
        with self._write(sync=False) as tx:  # rides on the first intent or the turn's end
            tx.execute(
                "INSERT INTO turns (turn_id, task, status, unattended, guarded, started_at, config, owner_pid,"
                f" owner_start, owner_host, lease_token, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1,"
                f" {self._db.now_sql} + ?)",
                (turn_id, clean_text(task), TurnStatus.RUNNING.value, int(unattended), int(guarded), time.time(),
                 config_json, pid, start, host_identity(), self.lease_ttl),
            )
        self._hold_lease(turn_id, 1)

    def claim(self, turn_id: str, *, force: bool = False) -> None:
        """Take a turn over to resume it: it must not have ended, and its lease must be free
        (the owner let go when its turn ended or was held), run out (the owner stopped
        renewing it: dead, stopped, or cut off, on any machine), or be held by a process known
        to be gone (a dead process on this machine and pid namespace, a shortcut that spares
        the wait). A live lease elsewhere is refused unless ``force``, which a person uses
        once they know the owner is gone. The claim is a compare-and-set on the lease's
        fencing token, which it increments: of two processes resuming at once exactly one
        wins, and the old owner, should it wake up, can write nothing more to the turn
        (:class:`LeaseLostError`). A process may resume its own turn.

        Raises:
            JournalError: for an unknown turn, one that ended, one whose lease is live (or
                may be: a journal of schema 2 has no lease expiry), or one another process
                claimed first.
        """
        status, token, condition = self._lease_free(turn_id, force=force, doing="resume it")
        if status.ended:
            raise JournalError(f"turn {turn_id} already ended {status}; there is nothing to resume")
        me, my_start = process_identity()
        with self._write() as tx:
            changed = tx.execute(
                "UPDATE turns SET owner_pid = ?, owner_start = ?, owner_host = ?, status = ?, ended_at = NULL,"
                f" lease_token = lease_token + 1, lease_expires_at = {self._db.now_sql} + ?"
                f" WHERE turn_id = ? AND lease_token = ? AND status NOT IN ({_ENDED_SQL}) AND {condition}",
                (me, my_start, host_identity(), TurnStatus.RUNNING.value, self.lease_ttl, turn_id, token),
            ).rowcount
        if changed != 1:
            raise JournalError(f"turn {turn_id} was claimed by another process first, its owner renewed its lease, "
                               "or it ended meanwhile")
        self._hold_lease(turn_id, token + 1)

    def _lease_free(self, turn_id: str, *, force: bool, doing: str) -> tuple[TurnStatus, int, str]:
        """The turn's (status, lease token, SQL condition the compare-and-set adds) once its
        lease may be taken; ``doing`` names the refused act.

        Raises:
            JournalError: for an unknown turn, or a live lease (an owner elsewhere whose
                lease has no expiry counts as live unless ``force``).
        """
        row = self._db.one("SELECT status, owner_pid, owner_start, owner_host, lease_token, lease_expires_at,"
                           f" {self._db.now_sql} FROM turns WHERE turn_id = ?", (turn_id,))
        if row is None:
            raise JournalError(f"no turn {turn_id!r} in {self.where}")
        stored, pid, start, host, token, expires, now = row
        status = self._closed(TurnStatus, stored, "turns", f"turn_id={turn_id!r}", "status")
        token = int(token)
        here = host_identity()
        if pid is None or force or ((pid, start) == process_identity() and host == here):
            return status, token, "1 = 1"
        if expires is not None and expires <= now:
            return status, token, f"lease_expires_at <= {self._db.now_sql}"
        local = bool(here) and host == here
        if local and not process_alive(pid, start):
            return status, token, "1 = 1"
        if local:
            raise JournalError(f"turn {turn_id} is still owned by live process {pid}; {doing} once that process "
                               "has ended")
        if expires is not None:
            raise JournalError(
                f"turn {turn_id} is leased to process {pid} in another machine or pid namespace (host {host}) for "
                f"{expires - now:.1f} s more (it renews the lease while it runs); {doing} once the lease has run out, "
                "or with force (--force) once you know that process is gone")
        raise JournalError(f"turn {turn_id} is owned by process {pid} in another machine or pid namespace, "
                           f"which cannot be checked from here, and holds no lease that runs out (a journal of "
                           f"schema 2); {doing} with force (--force) once you know that process is gone")

    def settle(self, turn_id: str, *, committed: Sequence[str] = (), absent: Sequence[str] = (),
               force: bool = False) -> None:
        """A person's word on intents of ``turn_id``: the effects of ``committed`` happened
        (a receipt by :attr:`SettledBy.USER`: never repeated), those of ``absent`` did not
        (:attr:`SettledBy.USER_ABSENT`: a resume runs them again). Settling requires the turn's lease,
        as :meth:`claim` takes it: it is refused while the owner holds a live lease (an owner
        that went on after the settle could otherwise run the effect a second time), unless
        ``force``. The lease is taken (its fencing token incremented, so an old owner that
        wakes up can write nothing more) and let go in the same transaction as the refs are
        settled: a resumer that claimed the turn meanwhile wins and nothing is settled.

        Raises:
            JournalError: for an unknown turn, a live lease, a ref that is in both lists, not
                an intent of this turn, or already committed; a lease taken meanwhile.
        """
        both = sorted(set(committed) & set(absent))
        if both:
            raise JournalError(f"{', '.join(both)} cannot be both committed and absent")
        _, token, condition = self._lease_free(turn_id, force=force, doing="settle its intents")
        by_user = SettledBy.USER.value
        receipt = json.dumps({"resolved": "committed", "by": by_user})
        with self._write() as tx:
            changed = tx.execute(
                "UPDATE turns SET lease_token = lease_token + 1, owner_pid = NULL, owner_start = NULL,"
                f" owner_host = NULL, lease_expires_at = NULL WHERE turn_id = ? AND lease_token = ? AND {condition}",
                (turn_id, token)).rowcount
            if changed != 1:
                raise JournalError(f"turn {turn_id} was claimed by another process meanwhile; nothing was settled")
            for ref in [*committed, *absent]:
                row = tx.execute("SELECT state FROM intents WHERE effect_ref = ? AND turn_id = ?",
                                 (ref, turn_id)).fetchone()
                if row is None:
                    raise JournalError(f"{ref} is not an effect intent of turn {turn_id} in {self.where}")
                if row[0] == IntentState.COMMITTED.value:
                    raise JournalError(f"{ref} is already committed; it is never repeated")
            now = time.time()
            for ref in committed:
                tx.execute("UPDATE intents SET state = ?, receipt = ?, settled_at = ?, settled_by = ?"
                           " WHERE effect_ref = ?", (IntentState.COMMITTED.value, receipt, now, by_user, ref))
            for ref in absent:
                tx.execute("UPDATE intents SET state = ?, settled_by = ? WHERE effect_ref = ?",
                           (IntentState.PREPARED.value, SettledBy.USER_ABSENT.value, ref))
        self._leases.pop(turn_id, None)

    def record_decision(self, turn_id: str, after_step: int, action: JournalDecision, subject: str) -> None:
        """Record an answer that changed the recovery state (:class:`JournalDecision`: a
        user's ``close`` or ``skip`` of a subject, a lesson's ``known`` blocker) after step
        ``after_step``, so a resumed turn replays it (requires the lease).

        Raises:
            ValueError: ``action`` is not a :class:`JournalDecision` value (nothing is written).
        """
        decision = JournalDecision(action)
        with self._write() as tx:
            self._fence(tx, turn_id)
            tx.execute("INSERT INTO decisions (turn_id, after_step, action, subject) VALUES (?, ?, ?, ?)",
                       (turn_id, after_step, decision.value, clean_text(subject)))

    def decisions(self, turn_id: str) -> list[tuple[int, JournalDecision, str]]:
        """A turn's recorded answers: (after_step, action, subject), in order.

        Raises:
            JournalError: a row whose action is not a :class:`JournalDecision`, naming the
                journal, the table and the row (``rowid``); it is left as it is.
        """
        rows = self._db.all("SELECT rowid, after_step, action, subject FROM decisions WHERE turn_id = ?"
                            " ORDER BY rowid", (turn_id,))
        return [(r[1], self._closed(JournalDecision, r[2], "decisions", f"rowid={r[0]}", "action"), r[3])
                for r in rows]

    def _closed(self, vocabulary: type[_V], value: object, table: str, row: str, column: str) -> _V:
        """``value`` of ``table``'s ``column`` at ``row`` as a member of ``vocabulary``; an
        unknown value is a :class:`JournalError` naming this journal, the table and the row
        (:func:`unstuck.store.engines.closed_value`)."""
        return closed_value(vocabulary, value, store=self.where, table=table, row=row, column=column,
                            error=JournalError)

    def check_turn(self, turn_id: str) -> None:
        """Read every row of turn ``turn_id`` as :func:`unstuck.loop.resume.resume_turn` reads it
        (header, steps, intents, decisions, validations), writing nothing: a
        resume calls it before it claims the turn, so a turn that does not read back is left
        exactly as it was.

        Raises:
            JournalError: for an unknown turn, or the first row holding a value outside its
                vocabulary (naming the journal, the table and the row) or a situation that
                does not read back.
        """
        self.turn(turn_id)
        self.steps(turn_id)
        self.intents(turn_id)
        self.decisions(turn_id)
        self.validations(turn_id)

    def config(self, turn_id: str) -> str:
        """The policy settings the turn was started with (JSON)."""
        row = self._db.one("SELECT config FROM turns WHERE turn_id = ?", (turn_id,))
        return str(row[0]) if row is not None else "{}"

    def resume_intent(self, ref: str) -> None:
        """A prepared intent is about to run again on resume: whatever a person said of it
        is spent (so a second crash asks again, never re-runs on an old answer), and this
        process is its runner now (:class:`Runner`). Requires the lease."""
        pid, start = process_identity()
        with self._write() as tx:
            self._fence_ref(tx, ref)
            tx.execute("UPDATE intents SET settled_by = NULL WHERE effect_ref = ? AND state = ?",
                       (ref, IntentState.PREPARED.value))
            tx.execute("UPDATE intents SET runner_host = ?, runner_pid = ?, runner_start = ? WHERE effect_ref = ?",
                       (host_identity(), pid, start, ref))

    def prepare_intent(
        self, turn_id: str, step: int, call_id: str, tool: str, arguments_json: str, *, reply_seq: int = -1
    ) -> str:
        """Write the intent of a side-effecting call and sync it, before the call; returns
        its ``effect_ref`` (``{turn_id}:{step}``), with this process as its :class:`Runner`.
        Requires the lease.

        Raises:
            JournalError: when that ref exists already (two effects must never share one).
            LeaseLostError: another owner took the turn over: the call must not run.
        """
        ref = f"{turn_id}:{step}"
        pid, start = process_identity()
        with self._write() as tx:
            if tx.execute("SELECT 1 FROM intents WHERE effect_ref = ?", (ref,)).fetchone() is not None:
                raise JournalError(f"effect intent {ref} already exists in {self.where}")
            self._fence(tx, turn_id)
            tx.execute(
                "INSERT INTO intents (effect_ref, turn_id, step, call_id, reply_seq, tool, arguments, state,"
                " prepared_at, runner_host, runner_pid, runner_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (ref, turn_id, step, clean_text(call_id), reply_seq, clean_text(tool), clean_text(arguments_json),
                 IntentState.PREPARED.value, time.time(), host_identity(), pid, start),
            )
        self._point("intent.prepared", ref)
        return ref

    def effect_returned(self, ref: str) -> None:
        """The call of ``ref`` returned (nothing is written: a crash point for tests)."""
        self._point("effect.returned", ref)

    def record_receipt(self, ref: str, receipt: str, *, settled_by: SettledBy = SettledBy.CALL) -> None:
        """Mark ``ref`` committed with ``receipt`` (what the call returned, or who said so;
        redacted at the store boundary, as every string). A riding commit: visible at once and kept through a
        SIGKILL, durable through a power loss with the next synced commit; a receipt lost
        with the power leaves the intent ``prepared``, which resume asks about or holds
        (never runs again on its own). Requires the lease: a stale owner's receipt is
        refused (:class:`LeaseLostError`) and the intent stays as the new owner sees it."""
        with self._write(sync=False) as tx:
            self._fence_ref(tx, ref)
            tx.execute(
                "UPDATE intents SET state = ?, receipt = ?, settled_at = ?, settled_by = ? WHERE effect_ref = ?",
                (IntentState.COMMITTED.value, clean_text(receipt), time.time(), SettledBy(settled_by).value, ref),
            )
        self._point("receipt.recorded", ref)

    #: ``settled_by`` of an intent a person said did not happen: a resume runs it again
    #: (:attr:`SettledBy.USER_ABSENT`, kept here for callers of earlier releases).
    USER_ABSENT = SettledBy.USER_ABSENT

    def mark_absent(self, ref: str, *, force: bool = False) -> None:
        """A person checked that ``ref``'s effect did not happen: back to ``prepared``, so a
        resumed turn runs the same intent (:attr:`SettledBy.USER_ABSENT`). :meth:`settle` of its
        turn: refused while the turn's lease is live.

        Raises:
            JournalError: for an unknown ref, and as :meth:`settle`.
        """
        row = self._db.one("SELECT turn_id FROM intents WHERE effect_ref = ?", (ref,))
        if row is None:
            raise JournalError(f"no effect intent {ref!r} in {self.where}")
        self.settle(str(row[0]), absent=[ref], force=force)

    def hold(self, refs: Sequence[str], reason: str) -> None:
        """Mark intents held (nobody could say whether they happened), with the reason.
        Requires the lease of their turns."""
        with self._write() as tx:
            for ref in refs:
                self._fence_ref(tx, ref)
                tx.execute("UPDATE intents SET state = ?, settled_by = ? WHERE effect_ref = ?",
                           (IntentState.HELD.value, reason, ref))

    def checkpoint(
        self, turn_id: str, *, steps: Sequence[StepRecord], messages: Sequence[str], first_seq: int, ref: str = ""
    ) -> None:
        """In one transaction (a riding commit: durable with the next synced one): new steps,
        the conversation's new messages (JSON, numbered from ``first_seq``) and the
        checkpoint mark. A resumed turn continues from the last checkpoint that reached the
        disk. ``ref`` names the effect for the crash-point hook. Requires the lease."""
        with self._write(sync=False) as tx:
            self._fence(tx, turn_id)
            for step in steps:
                tx.execute(
                    f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES ({', '.join('?' * len(_STEP_FIELDS))})"
                    f" ON CONFLICT (turn_id, idx) DO UPDATE SET {_STEP_UPDATE}",
                    (turn_id, step.index, clean_text(step.call.id), clean_text(step.call.tool),
                     clean_text(step.call.arguments_json), _stored_digest(step.call.arguments_json),
                     clean_text(step.subject), int(step.interactive),
                     int(step.auto_retry), int(step.dispatched), int(step.probe), int(step.retry), int(step.ok),
                     situation_to_json(step.situation), step.decision.value, json.dumps(list(step.exempt)),
                     step.injected, redacted_prefix(step.content, 4000), step.started_s, step.duration_s),
                )
                tx.execute("UPDATE turns SET checkpoint_step = ? WHERE turn_id = ?", (step.index, turn_id))
            if messages:
                tx.executemany(
                    "INSERT INTO messages (turn_id, seq, message) VALUES (?, ?, ?)"
                    " ON CONFLICT (turn_id, seq) DO UPDATE SET message = excluded.message",
                    [(turn_id, first_seq + i, clean_text(message)) for i, message in enumerate(messages)],
                )
        self._point("checkpoint.saved", ref)

    def record_validation(self, turn_id: str, name: str, verdict: Verdict, evidence: str) -> None:
        """Record one validator's verdict (:class:`unstuck.decide.outcome.Verdict`: ``passed``,
        ``failed`` or ``not required``); a riding commit (the turn's end, next, is synced).
        Requires the lease.

        Raises:
            ValueError: ``verdict`` is not a :class:`~unstuck.decide.outcome.Verdict` value.
        """
        value = Verdict(verdict).value
        with self._write(sync=False) as tx:
            self._fence(tx, turn_id)
            tx.execute("INSERT INTO validations (turn_id, name, verdict, evidence, at) VALUES (?, ?, ?, ?, ?)",
                       (turn_id, clean_text(name), value, clean_text(evidence), time.time()))

    def end_turn(self, turn_id: str, status: TurnStatus, *, answer: str = "", error: str | None = None) -> None:
        """Record the turn's final (or, for ``interrupted``, current) status (a synced commit,
        which makes every riding commit before it durable too) and let go of its lease (the
        token stays, so a stale owner stays fenced off). Requires the lease.

        Raises:
            ValueError: ``status`` is not a :class:`~unstuck.decide.outcome.TurnStatus` value,
                or is ``running`` (a turn that ends is not running).
        """
        value = TurnStatus(status)
        if value is TurnStatus.RUNNING:
            raise ValueError(f"turn {turn_id}: end_turn needs the status it ended with, not {value.value!r}")
        with self._write() as tx:
            self._fence(tx, turn_id)
            tx.execute("UPDATE turns SET status = ?, ended_at = ?, answer = ?, error = ?, owner_pid = NULL,"
                       " owner_start = NULL, owner_host = NULL, lease_expires_at = NULL WHERE turn_id = ?",
                       (value.value, time.time(), clean_text(answer), clean_text(error) if error else error,
                        turn_id))
        self._leases.pop(turn_id, None)

    # -- reading -----------------------------------------------------------------------------

    def turns(self) -> list[JournalTurn]:
        """Every turn, newest first.

        Raises:
            JournalError: a turn whose status is not a :class:`~unstuck.decide.outcome.TurnStatus`,
                naming the journal, the table and the row (``turn_id``).
        """
        rows = self._db.all(f"SELECT {_TURN_COLUMNS} FROM turns ORDER BY started_at DESC")
        return [self._turn(row) for row in rows]

    def turn(self, turn_id: str) -> JournalTurn:
        """One turn's header and checkpoint.

        Raises:
            JournalError: for an unknown turn id (the message lists none; see :meth:`turns`), or
                one whose status is not a :class:`~unstuck.decide.outcome.TurnStatus` (as :meth:`turns`).
        """
        row = self._db.one(f"SELECT {_TURN_COLUMNS} FROM turns WHERE turn_id = ?", (turn_id,))
        if row is None:
            raise JournalError(f"no turn {turn_id!r} in {self.where}")
        return self._turn(row)

    def _turn(self, row: Sequence[Any]) -> JournalTurn:
        status = self._closed(TurnStatus, row[2], "turns", f"turn_id={row[0]!r}", "status")
        return JournalTurn(row[0], row[1], status, bool(row[3]), bool(row[4]), row[5], row[6], row[7], row[8], row[9])

    def steps(self, turn_id: str) -> list[StepRecord]:
        """A turn's steps in order (content as journaled: its first 4,000 characters; the
        per-step ``charged``/``opened``/``closed`` lists are not kept: folding the policy over
        the steps gives them again).

        Raises:
            JournalError: a row whose decision is not an :class:`unstuck.decide.policy.Action`
                (nor one of the names journals stored before it) or whose situation does not
                read back, naming the journal, the table and the row (``turn_id``, ``idx``).
        """
        rows = self._db.all(
            "SELECT idx, call_id, tool, arguments, subject, interactive, auto_retry, dispatched, probe, retry, ok,"
            " situation, decision, exempt, injected, content, started_s, duration_s FROM steps"
            " WHERE turn_id = ? ORDER BY idx", (turn_id,),
        )
        return [
            StepRecord(r[0], ToolCall(r[1], r[2], r[3]), r[4], dispatched=bool(r[7]), probe=bool(r[8]), ok=bool(r[10]),
                       situation=self._situation(r[11], turn_id, r[0]), started_s=r[16], duration_s=r[17],
                       content=r[15],
                       retry=bool(r[9]), injected=r[14], interactive=bool(r[5]), auto_retry=bool(r[6]),
                       exempt=tuple(json.loads(r[13])),
                       decision=_LEGACY_DECISIONS.get(r[12]) or self._closed(
                           Action, r[12], "steps", f"turn_id={turn_id!r}, idx={r[0]}", "decision"))
            for r in rows
        ]

    def _situation(self, text: str | None, turn_id: str, idx: int) -> Situation | None:
        try:
            return situation_from_json(text)
        except JournalError as exc:
            raise JournalError(f"{self.where}: table steps, row turn_id={turn_id!r}, idx={idx}: {exc}") from None

    def intents(self, turn_id: str) -> list[JournalIntent]:
        """A turn's effect intents in step order.

        Raises:
            JournalError: a row whose ``state`` is not an :class:`IntentState`, or (an intent
                not held) whose ``settled_by`` is not a :class:`SettledBy`, naming the journal,
                the table and the row (``effect_ref``).
        """
        runner = "runner_host, runner_pid, runner_start" if self.schema >= 4 else "NULL, NULL, NULL"
        rows = self._db.all(
            "SELECT effect_ref, turn_id, step, call_id, tool, arguments, state, receipt, settled_by, reply_seq,"
            f" {runner} FROM intents WHERE turn_id = ? ORDER BY step", (turn_id,),
        )
        return [self._intent(r) for r in rows]

    def _intent(self, r: Sequence[Any]) -> JournalIntent:
        """An intents row as :class:`JournalIntent`: its state and (unless it is held, when the
        column keeps the reason) its ``settled_by`` read as their vocabularies."""
        row = f"effect_ref={r[0]!r}"
        state = self._closed(IntentState, r[6], "intents", row, "state")
        settled: str | None = r[8]
        if settled is not None and state is not IntentState.HELD:
            settled = self._closed(SettledBy, settled, "intents", row, "settled_by")
        runner = Runner(str(r[10]), int(r[11]), int(r[12] or 0)) if r[10] and r[11] is not None else None
        return JournalIntent(r[0], r[1], r[2], r[3], r[4], r[5], state, r[7], settled, r[9], runner)

    def messages(self, turn_id: str) -> list[str]:
        """A turn's conversation as checkpointed: one JSON message per item, in order."""
        rows = self._db.all("SELECT message FROM messages WHERE turn_id = ? ORDER BY seq", (turn_id,))
        return [r[0] for r in rows]

    def validations(self, turn_id: str) -> list[tuple[str, Verdict, str]]:
        """A turn's validator verdicts: (name, verdict, evidence), in order.

        Raises:
            JournalError: a row whose verdict is not a :class:`~unstuck.decide.outcome.Verdict`,
                naming the journal, the table and the row (``rowid``).
        """
        rows = self._db.all("SELECT rowid, name, verdict, evidence FROM validations WHERE turn_id = ?"
                            " ORDER BY rowid", (turn_id,))
        return [(r[1], self._closed(Verdict, r[2], "validations", f"rowid={r[0]}", "verdict"), r[3]) for r in rows]


class _LeaseKeeper:
    """A daemon thread renewing a journal's leases every third of its ``lease_ttl`` while the
    journal holds any; a lease found taken over is dropped (the turn's next write raises
    :class:`LeaseLostError`). Store errors are left for the turn's own writes to report."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="unstuck-lease-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10.0)

    def _run(self) -> None:
        journal = self._journal
        while not self._stop.is_set():
            self._wake.wait(journal.lease_ttl / 3)
            self._wake.clear()
            if self._stop.is_set():
                return
            for turn_id in list(journal._leases):
                # lost (dropped by _fence), or a store error the turn's next write reports
                with contextlib.suppress(UnstuckError):
                    journal.renew(turn_id)


# -- schema versions ---------------------------------------------------------------------------


def _stored_digest(arguments_json: str) -> str:
    """:func:`arguments_digest` of a call's arguments as the journal keeps them (redacted at the
    store boundary, :func:`unstuck.store.engines.clean_params`): never a digest of a secret."""
    return arguments_digest(clean_params((arguments_json,))[0])


#: Every table's key and text columns: what :func:`_redact_rows` writes again.
_TEXT_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "turns": (("turn_id",), ("task", "answer", "error", "config", "owner_host")),
    "decisions": (("rowid",), ("action", "subject")),
    "messages": (("turn_id", "seq"), ("message",)),
    "steps": (("turn_id", "idx"), ("call_id", "tool", "arguments", "subject", "situation", "exempt", "injected",
                                   "content")),
    "intents": (("effect_ref",), ("call_id", "tool", "arguments", "receipt", "settled_by")),
    "validations": (("rowid",), ("name", "verdict", "evidence")),
}


def _redact_rows(db: Transaction) -> None:
    """Every row whose text holds a secret written again through the store boundary
    (:func:`unstuck.store.engines.redact_rows`), a step's ``arguments_digest`` made of its
    arguments as kept."""
    for table, (keys, columns) in _TEXT_COLUMNS.items():
        digest = (lambda values: {"arguments_digest": _stored_digest(values[2])}) if table == "steps" else None
        redact_rows(db, table, keys, columns, also=digest)


def _redact_2(db: Transaction) -> None:
    """Version 1 -> 2: the rows of a journal written before redaction, redacted
    (:func:`_redact_rows`, as every later write is)."""
    _redact_rows(db)


def _leases_3(db: Transaction) -> None:
    """Version 2 -> 3: leases (issue 16): each turn gets a fencing token (0) and a lease
    expiry (``NULL``: a turn begun before leases keeps the owner test by process, and an
    owner elsewhere needs ``force``)."""
    db.execute("ALTER TABLE turns ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE turns ADD COLUMN lease_expires_at REAL")


def _runners_4(db: Transaction) -> None:
    """Version 3 -> 4: each effect intent names the process that ran its call (issue 23:
    a resolver's "absent" is acted on only once that process is known gone); intents
    written before have none (``NULL``: not known, so "absent" holds them for a person)."""
    for column, kind in (("runner_host", "TEXT"), ("runner_pid", "BIGINT"), ("runner_start", "BIGINT")):
        db.execute(f"ALTER TABLE intents ADD COLUMN {column} {kind}")


def _redact_5(db: Transaction) -> None:
    """Version 4 -> 5 (issue 23): every string of every row redacted as the store boundary
    writes it now (:func:`_redact_rows`): the arguments of intents and of the tool calls in
    messages, which versions 2 to 4 kept exact, and tokens of formats added since."""
    _redact_rows(db)
    redact_rows(db, "intents", ("effect_ref",), ("runner_host",))  # version 4's column


#: The layout steps, in order: step ``i`` turns version ``i + 1`` into ``i + 2``
#: (:func:`unstuck.store.sqlite.migrate`); the last gives :data:`_SCHEMA_VERSION`. A layout
#: change is one function appended here (and :data:`_SCHEMA` and :data:`_SCHEMA_VERSION`).
_MIGRATIONS: tuple[Migration, ...] = (_redact_2, _leases_3, _runners_4, _redact_5)
