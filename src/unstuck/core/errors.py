"""The root of every error unstuck raises on purpose: ``except UnstuckError`` catches them all.

Each error class of the package derives from :class:`UnstuckError` *and* keeps the built-in
base it always had, so code that catches ``RuntimeError`` or ``ValueError`` still works.
A store never lets a raw ``sqlite3.Error`` out of a public method: it becomes the store's
own error, naming the file and the operation, with the SQLite error as its ``__cause__``
(:func:`unstuck.store.sqlite.translate_errors`).

Errors::

    UnstuckError (Exception)
    ├── JournalError (RuntimeError)        unstuck.store.journal: unreadable, corrupt or foreign
    │   │                                  journal file or database, a failed SQLite or
    │   │                                  PostgreSQL operation, unknown turn, a live lease
    │   └── LeaseLostError                 a write on a turn another owner took over
    ├── LessonStoreError (RuntimeError)    unstuck.store.lessons: unreadable, corrupt or foreign
    │                                      store file or database, a failed SQLite or
    │                                      PostgreSQL operation
    ├── OpinionCacheError (RuntimeError)   unstuck.store.second_opinion: an opinion cache file that
    │                                      cannot be opened as SQLite
    ├── StoreURLError (ValueError)         unstuck.store.urls: a store URL or UNSTUCK_STORE value that
    │                                      cannot be read (the bad part named, password masked)
    ├── StoreConnectionError (RuntimeError)   unstuck.store.urls: a PostgreSQL store that cannot be
    │                                      reached or refuses the login (hosts and ports named)
    ├── ModelError (RuntimeError)          unstuck.toolkit.models: a model server that failed or
    │                                      answered with something that is not a reply
    ├── SignalTableError (ValueError)      unstuck.recognise.signals: a malformed signal table
    ├── ConceptError (ValueError)          unstuck.recognise.concepts: a malformed concept lexicon
    ├── WindowsMessageError (ValueError)   unstuck.recognise.windows: a malformed Windows message file
    ├── CredentialCatalogueError (ValueError)   unstuck.commands.credentials: a malformed credential-change catalogue
    ├── GuardStateError (ValueError)       unstuck.guard.guard: saved guard state that does not read back
    ├── BankError (ValueError)             unstuck.faults.bank: a malformed failure bank
    ├── ScenarioError (ValueError)         unstuck.evals.scenarios: a malformed scenario file
    ├── SetupCommandError (RuntimeError)   unstuck.evals.sandbox: a scenario's setup command failed
    ├── TrustError (ValueError)            unstuck.evals.trust: a digest file of trusted scenario files
    │                                      that cannot be read or holds a malformed line
    ├── CaseError (ValueError)             unstuck.evals.casebook: a malformed case file
    ├── BaselineError (ValueError)         unstuck.evals.compare: an unreadable eval baseline
    ├── MiningError (ValueError)           unstuck.mining: an unknown environment, task or rule,
    │                                      a malformed environment record, a bad mining option
    ├── ReadError (ValueError)             unstuck.core.readers: a file or stream that is unreadable,
    │                                      not UTF-8, not JSON/YAML or nested too deeply
    ├── OutsideTreeError (ValueError)      unstuck.core.trees: a path to change that resolves outside
    │                                      the tree it must stay in
    ├── HookPayloadError (ValueError)      unstuck.integrations.coding_agents.events: a coding agent's
    │                                      hook payload that is not its documented shape (the agent,
    │                                      the event and the field named)
    ├── AlreadyRunning (RuntimeError)      unstuck.integrations.coding_agents.server: a guard server
    │                                      already holds the socket's lock
    ├── SettingsError (ValueError)         unstuck.integrations.coding_agents.install: an agent's settings
    │                                      file that is not JSON or not the shape hooks live in (file,
    │                                      line and column named; the file left as it is)
    └── Blocked (RuntimeError)             unstuck.integrations.common: a framework run that
                                           ended blocked, carrying the question and the guard's
                                           state (a status the host handles, not a failure;
                                           the OpenAI Agents SDK adapter's RunBlocked is one)

    ValueError (documented exception)      unstuck.core.situations.validate_situation: a malformed
                                           declared situation (unknown kind, missing subject,
                                           an inferred one with an unblock) is a plain
                                           ValueError naming the tool (DESIGN.md, "The
                                           situation taxonomy")

A new error class anywhere in the package derives from :class:`UnstuckError` too
(``tests/test_errors.py`` walks the package and fails on one that does not).
"""

from __future__ import annotations

__all__ = ["UnstuckError"]


class UnstuckError(Exception):
    """The root of every error unstuck raises on purpose (see the module doc for the tree).

    It carries nothing beyond its message: each subclass's message names what failed and
    where (a file path, a tool, a row)."""
