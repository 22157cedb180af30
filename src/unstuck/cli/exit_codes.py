"""The exit statuses of every ``unstuck`` command, and the line each command's ``--help``
shows about them (one owner: the main command and every sub-command read them here)."""

from __future__ import annotations

__all__ = ["EXIT_BLOCKED", "EXIT_CODES", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "MINE_EXIT_CODES", "STORE_EXIT_CODES"]

#: Done: the task finished, the command did what it was asked.
EXIT_OK = 0
#: Failed: the turn, the harness, or the machine (a full or read-only file).
EXIT_FAILED = 1
#: A usage error: a bad option, a missing or malformed input file (typer's convention).
EXIT_USAGE = 2
#: ``unstuck run``: the turn ended blocked, asking the user.
EXIT_BLOCKED = 3

#: Under ``unstuck --help``, ``run``, ``eval``, ``classify`` and ``scenarios``.
EXIT_CODES = ("Exit status: 0 done; 1 failed (the turn, the harness, or the machine: a full or read-only "
              "file); 2 a usage error (a bad option, a missing or malformed input file, a scenario file not "
              "trusted to run); 3 the turn ended blocked (`unstuck run`).")
#: Under the sub-commands that read or write a file (``journal``, ``lessons``, ``bank``,
#: ``signals``, ``trace``).
STORE_EXIT_CODES = ("Exit status: 0 done; 1 failed (the machine: a full or read-only file); 2 a usage error "
                    "(a bad option, a missing, damaged or malformed file, or a refused request).")
#: Under ``unstuck mine``.
MINE_EXIT_CODES = ("Exit status: 0 done (whether or not rules were mined: the report says); 1 failed (a rollout "
                   "the harness could not make, or the machine: a full or read-only file); 2 a usage error (a bad "
                   "option, an unknown environment, a model that does not answer, a records path that is not a "
                   "folder).")
