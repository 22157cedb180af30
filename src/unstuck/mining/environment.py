"""Environments for mining recovery rules: code and data (seed 003, "Why the Extracted Rule
Belongs to an Environment").

An environment is a description with its business objects, executable tools over a real
state, tasks each with a verifier that checks the final state, and a snapshot of the state
before every action. Its state lives in one folder per rollout (a SQLite database, files, the
data of a service it serves on 127.0.0.1), so each rollout gets its own state and its own local
services, and the same seed gives the same result anywhere.

Shapes:

* :class:`Environment`: ``name``, ``version``, ``description``, ``objects``, ``tasks``,
  ``tool_names``; :meth:`Environment.open` builds a fresh :class:`Session` in a folder.
* :class:`Session`: the rollout's ``tools`` (a :class:`unstuck.toolkit.specs.Toolset` of real tools),
  :meth:`Session.snapshot` / :meth:`Session.restore` of the whole state folder,
  :meth:`Session.verify` (the task's verifier on the final state and the final answer),
  :meth:`Session.close` (stops its services; the folder is the caller's).
* :class:`Task`: what the user asks, the steps that do it (each with what a careless agent
  would guess for its identifiers, how a careful one looks them up, and how a write is read
  back), and the text of a right answer.

Every environment has an ``ask_user`` tool (:data:`ASK_TOOL`): asking records the question in
the state (``questions.jsonl``), so a task that can only end by asking (``Task.blocker``) is
verified on the final state like any other.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from unstuck.core.errors import UnstuckError
from unstuck.core.tools import Effect, ToolCall
from unstuck.core.trees import OutsideTreeError, write_inside
from unstuck.toolkit.specs import Toolset, ToolSpec, tool

__all__ = [
    "ASK_TOOL",
    "QUESTIONS_FILE",
    "BusinessObject",
    "Environment",
    "FolderSession",
    "Lookup",
    "MiningError",
    "Session",
    "Snapshot",
    "Step",
    "Task",
    "Verification",
    "ask_tool",
    "asked_questions",
]

#: The tool every environment has for asking the user; its questions are state.
ASK_TOOL = "ask_user"
#: The file in a session's folder that holds the questions asked, one JSON object per line.
QUESTIONS_FILE = "questions.jsonl"


class MiningError(UnstuckError, ValueError):
    """Bad input to mining: an unknown environment or task, a malformed environment record or
    rule file, an option out of range; the message names what and where."""


@dataclass(frozen=True, slots=True)
class BusinessObject:
    """A kind of thing the environment's tasks are about (``comment``), and the argument that
    names one (``comment_id``)."""

    name: str
    identifier: str
    description: str


@dataclass(frozen=True, slots=True)
class Lookup:
    """How a careful agent resolves an identifier before a step.

    It makes ``call`` and reads its result as JSON: a list of records, or a mapping whose
    ``items`` is one. The record whose fields equal every ``(field, value)`` of ``match``
    gives ``field``'s value to the step's ``argument``. A lookup that finds no such record
    leaves the argument unresolved (the agent does not guess).
    """

    argument: str
    call: ToolCall
    match: tuple[tuple[str, Any], ...]
    field: str = "id"

    def resolve(self, content: str) -> Any | None:
        """The value for ``argument`` found in ``content`` (the lookup call's result), or
        ``None``."""
        try:
            data = json.loads(content)
        except ValueError:
            return None
        records = data.get("items") if isinstance(data, Mapping) else data
        if not isinstance(records, list):
            return None
        for record in records:
            if isinstance(record, Mapping) and all(record.get(k) == v for k, v in self.match):
                return record.get(self.field)
        return None


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a task's solution.

    ``call`` is the step with its right arguments. ``guess`` holds what an agent that does not
    check identifiers puts in their place (read off the task's words: a title, a name, a number
    it assumed), and ``lookup`` how one that checks resolves them. A write step
    (``effect`` write) may name ``read_back``, the call that shows it took effect, and
    ``read_back_holds``, text that call's result holds once it has.
    """

    call: ToolCall
    guess: tuple[tuple[str, Any], ...] = ()
    lookup: Lookup | None = None
    effect: Effect = Effect.READ
    read_back: ToolCall | None = None
    read_back_holds: str = ""


@dataclass(frozen=True, slots=True)
class Task:
    """A task of an environment: ``prompt`` (what the user asks), ``steps`` (a solution),
    ``answer`` (text a right final answer holds; empty when only the state counts), and
    ``blocker`` (only asking the user can end it right: the verifier checks the question)."""

    id: str
    prompt: str
    steps: tuple[Step, ...]
    answer: str = ""
    blocker: bool = False


@dataclass(frozen=True, slots=True)
class Verification:
    """The verifier's verdict on a rollout's final state, with its evidence (one line)."""

    passed: bool
    evidence: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A session's whole state: every file under its folder, as ``(relative path, bytes)``
    pairs in path order. Sizes are those of the files (bytes)."""

    files: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)

    @property
    def size(self) -> int:
        """Bytes held."""
        return sum(len(data) for _, data in self.files)

    def text(self, name: str) -> str | None:
        """The file ``name`` as UTF-8 text (errors replaced), or ``None`` when absent."""
        return next((data.decode("utf-8", "replace") for path, data in self.files if path == name), None)


class Session(Protocol):
    """One rollout's state and tools (see the module doc)."""

    root: Path
    tools: Toolset

    def snapshot(self) -> Snapshot:
        """The state now."""
        ...

    def restore(self, snapshot: Snapshot) -> None:
        """Put the state back as it was at ``snapshot``."""
        ...

    def verify(self, task: Task, answer: str) -> Verification:
        """The task's verifier on the final state (and the final answer, for a task that
        asks a question)."""
        ...

    def close(self) -> None:
        """Stop the session's services; idempotent."""
        ...


class Environment(Protocol):
    """An environment for mining (see the module doc). ``version`` changes when its tools or
    tasks change, so an environment record mined on another version is not reused."""

    name: str
    version: int
    description: str
    objects: tuple[BusinessObject, ...]
    tasks: tuple[Task, ...]

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools every session has, ``ask_user`` included."""
        ...

    def open(self, task: Task, root: Path) -> Session:
        """A fresh session for ``task`` with its state in the empty folder ``root``."""
        ...


def asked_questions(root: Path) -> list[str]:
    """The questions asked in the session whose folder is ``root``, in order."""
    path = root / QUESTIONS_FILE
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, Mapping) and isinstance(entry.get("question"), str):
            found.append(entry["question"])
    return found


def ask_tool(root: Path) -> ToolSpec:
    """The ``ask_user`` tool of a session whose folder is ``root``: it records the question
    (``questions.jsonl``) and answers that nobody is there to reply now (a rollout runs
    unattended), so asking ends what the agent can do."""

    @tool(name=ASK_TOOL, effect=Effect.WRITE)
    def ask_user(question: str) -> dict[str, Any]:
        """Ask the user a question (what they must do, and why). Nobody can answer during the run."""
        with (root / QUESTIONS_FILE).open("a", encoding="utf-8") as out:
            out.write(json.dumps({"question": question}) + "\n")
        return {"status": "ok", "recorded": True, "note": "the question is recorded; nobody can answer now"}

    return ask_user


class FolderSession:
    """A :class:`Session` whose whole state is the files under ``root``: snapshot and restore
    copy them. Subclasses set ``tools`` and implement :meth:`verify`; those with services stop
    them in :meth:`close`. A tool must not hold a file open between calls (a SQLite tool opens
    its connection per call), so a copy between calls is consistent.

    :attr:`kept` names what a subclass keeps as it is across a restore (links to the host's
    programs, a lock file a process holds): a snapshot leaves it out, a restore neither removes
    nor writes it. A restore never writes outside ``root``: a snapshot's name that is absolute
    or climbs out (``..``) is refused, and each file is written new, never through a link
    (:func:`unstuck.core.trees.write_inside`)."""

    #: Relative names (``/``-separated) a snapshot leaves out and a restore keeps as they are.
    kept: tuple[str, ...] = ()

    def __init__(self, root: Path, tools: Toolset) -> None:
        self.root = root
        self.tools = tools

    def _is_kept(self, name: str) -> bool:
        return any(name == kept or name.startswith(kept + "/") for kept in self.kept)

    def snapshot(self) -> Snapshot:
        """Every file under ``root`` but the :attr:`kept` ones, in path order."""
        files = sorted(p for p in self.root.rglob("*") if p.is_file() and not p.is_symlink()
                       and not self._is_kept(p.relative_to(self.root).as_posix()))
        return Snapshot(tuple((p.relative_to(self.root).as_posix(), p.read_bytes()) for p in files))

    def restore(self, snapshot: Snapshot) -> None:
        """Remove everything under ``root`` but the :attr:`kept` names (a link as a link, a
        folder that still holds a kept name left in place), then write the snapshot's files
        back.

        Raises:
            MiningError: a snapshot name that is absolute or climbs out of ``root``.
        """
        for path in sorted(self.root.rglob("*"), reverse=True):  # Python 3.11's rglob enters no link
            name = path.relative_to(self.root).as_posix()
            if self._is_kept(name):
                continue
            if path.is_dir() and not path.is_symlink():
                if any(self._is_kept(k) and k.startswith(name + "/") for k in self.kept):
                    continue
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for name, data in snapshot.files:
            if self._is_kept(name):
                continue
            try:
                write_inside(self.root, name, data)
            except OutsideTreeError as error:
                raise MiningError(f"{self.root}: snapshot file {name!r} is not restored: {error}") from error

    def verify(self, task: Task, answer: str) -> Verification:
        """Subclasses check the final state."""
        raise NotImplementedError

    def close(self) -> None:
        """Nothing to stop by default."""
