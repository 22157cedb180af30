"""The shipped mining environments, by name.

Each is a module of this package with a ``make_environment()`` factory; :func:`environment`
imports only the one asked for (a rollout process builds its environment by name).
"""

from __future__ import annotations

import importlib

from unstuck.mining.environment import Environment, MiningError

__all__ = ["ENVIRONMENT_MODULES", "environment", "environment_names"]

#: Environment name -> the module that makes it.
ENVIRONMENT_MODULES = {
    "files_comments": "unstuck.mining.envs.files_comments",
    "issue_tracker": "unstuck.mining.envs.issue_tracker",
    "package_cli": "unstuck.mining.envs.package_cli",
}


def environment_names() -> tuple[str, ...]:
    """The shipped environments' names."""
    return tuple(ENVIRONMENT_MODULES)


def environment(name: str) -> Environment:
    """The shipped environment ``name``, freshly made.

    Raises:
        MiningError: for an unknown name, listing the known ones.
    """
    module = ENVIRONMENT_MODULES.get(name)
    if module is None:
        raise MiningError(f"unknown environment {name!r}; the environments are {', '.join(ENVIRONMENT_MODULES)}")
    made: Environment = importlib.import_module(module).make_environment()
    return made
