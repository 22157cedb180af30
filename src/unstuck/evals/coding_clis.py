"""Running the real coding-agent CLIs offline against a scripted model server on 127.0.0.1
(:mod:`unstuck.evals.model_servers`), in a home folder of their own (issue 26).
Internal: not a supported import path (docs/reference/index.md lists those that are).

* :func:`locate`: where a CLI is installed: ``./bootstrap`` puts them under the project's
  ``.agents/node_modules/.bin`` (npm, pinned versions), else ``PATH``;
* Codex CLI (``@openai/codex``): :func:`codex_config` writes ``~/.codex/config.toml`` naming a
  model provider whose ``base_url`` is the server, with ``wire_api = "responses"`` and the key in
  the variable ``env_key`` names (Codex's "Custom model providers" configuration: ``name``,
  ``base_url``, ``wire_api``, ``env_key``); :func:`codex_exec` runs ``codex exec
  --skip-git-repo-check`` (no git repository needed) with
  ``--dangerously-bypass-approvals-and-sandbox`` (every command runs, as in a CI job) and,
  where asked, ``--dangerously-bypass-hook-trust`` (Codex runs a non-managed hook only once it
  is trusted; the flag is its documented way for automation that vetted its hooks);
* Gemini CLI (``@google/gemini-cli``): :func:`gemini_settings` writes
  ``~/.gemini/settings.json`` with ``security.auth.selectedType: "gemini-api-key"``;
  :func:`gemini_prompt` runs ``gemini -p`` with ``GEMINI_API_KEY``,
  ``GOOGLE_GEMINI_BASE_URL`` (the server), ``GEMINI_CLI_TRUST_WORKSPACE=true`` (a headless run
  trusts its folder), ``--approval-mode=yolo`` (without it ``gemini -p`` offers the model no
  shell tool at all: measured on 0.61.0) and ``--model`` (a named model skips the router's
  side request).

Each run gets the environment it is given (``HOME`` and the rest: nothing is read from this
process's own beyond what the caller passes), no standard input, and a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CODEX_KEY_VARIABLE",
    "CODEX_VERSION",
    "GEMINI_MODEL",
    "GEMINI_VERSION",
    "CliRun",
    "agents_bin",
    "codex_config",
    "codex_exec",
    "gemini_prompt",
    "gemini_settings",
    "locate",
]

#: The pinned versions ``./bootstrap`` installs (``.agents/package.json``).
CODEX_VERSION = "0.171.0"
GEMINI_VERSION = "0.61.0"
#: The variable the scripted Codex provider's key is read from (its ``env_key``).
CODEX_KEY_VARIABLE = "UNSTUCK_SCRIPTED_MODEL_KEY"
#: The comment that ends the scripted provider's lines in ``config.toml`` (:func:`codex_config`).
_PROVIDER_END = "# (end of the scripted model provider)"
#: The model Gemini CLI is told to use (any name the scripted server answers for).
GEMINI_MODEL = "gemini-2.5-pro"


@dataclass(frozen=True, slots=True)
class CliRun:
    """One finished CLI run: the command, its exit status, its two streams and its wall time
    (seconds)."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float


def agents_bin() -> Path:
    """The project's ``.agents/node_modules/.bin`` (where ``./bootstrap`` installs the CLIs),
    found beside the source tree unstuck was imported from."""
    return Path(__file__).resolve().parents[3] / ".agents" / "node_modules" / ".bin"


def locate(program: str, path: str | None = None) -> Path | None:
    """The ``program`` CLI (``codex``, ``gemini``, ``claude``): the project's installed copy
    (:func:`agents_bin`) first, else the first on ``path`` (default ``$PATH``); ``None`` when
    neither has it."""
    local = agents_bin() / program
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which(program, path=path)
    return Path(found) if found else None


def _run(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float) -> CliRun:
    started = time.monotonic()
    done = subprocess.run(list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, check=False)
    return CliRun(tuple(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def _program(name: str, env: Mapping[str, str]) -> str:
    found = locate(name, env.get("PATH"))
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (./bootstrap installs it under {agents_bin()})")
    return str(found)


def codex_config(home: Path, base_url: str, *, model: str = "scripted-model", extra: str = "") -> Path:
    """Write ``HOME/.codex/config.toml`` pointing Codex at ``base_url`` (a Responses API,
    :class:`~unstuck.evals.model_servers.openai_responses.ResponsesServer`), with TOML ``extra``
    appended (an MCP server, a trusted project). What Codex itself wrote into the file since (the
    hooks the user trusted, ``[hooks.state]``) is kept: only the provider's lines, above
    :data:`_PROVIDER_END`, are written again. Returns the file."""
    folder = home / ".codex"
    folder.mkdir(parents=True, exist_ok=True)
    text = (
        f"model = {json.dumps(model)}\n"
        'model_provider = "scripted"\n\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f"base_url = {json.dumps(base_url)}\n"
        'wire_api = "responses"\n'
        f"env_key = {json.dumps(CODEX_KEY_VARIABLE)}\n"
        f"{_PROVIDER_END}\n"
    )
    path = folder / "config.toml"
    kept = ""
    if path.exists():
        _, found, rest = path.read_text(encoding="utf-8").partition(_PROVIDER_END + "\n")
        kept = rest if found else ""
    if extra and extra not in kept:
        kept = f"{extra}\n{kept}"
    path.write_text(text + kept, encoding="utf-8")
    return path


def codex_exec(prompt: str, *, cwd: Path, env: Mapping[str, str], bypass_hook_trust: bool = False,
               args: Sequence[str] = (), timeout: float = 180) -> CliRun:
    """``codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox [ARGS] PROMPT``
    in ``cwd`` with ``env`` (which must hold ``HOME`` with a :func:`codex_config`); the
    provider's key is set when ``env`` lacks it.

    Raises:
        FileNotFoundError: when Codex is not installed.
        subprocess.TimeoutExpired: past ``timeout`` seconds.
    """
    argv = [_program("codex", env), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    if bypass_hook_trust:
        argv.append("--dangerously-bypass-hook-trust")
    argv += [*args, prompt]
    return _run(argv, cwd=cwd, env={CODEX_KEY_VARIABLE: "scripted", **env}, timeout=timeout)


def gemini_settings(home: Path, settings: Mapping[str, Any] | None = None) -> Path:
    """Write ``HOME/.gemini/settings.json``: the API-key sign-in plus ``settings`` (merged at the
    top level). Returns the file."""
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"security": {"auth": {"selectedType": "gemini-api-key"}}, **(settings or {})}
    path = folder / "settings.json"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def gemini_prompt(prompt: str, *, cwd: Path, env: Mapping[str, str], base_url: str, model: str = GEMINI_MODEL,
                  args: Sequence[str] = (), timeout: float = 180) -> CliRun:
    """``gemini --approval-mode=yolo --model MODEL [ARGS] -p PROMPT`` in ``cwd`` with ``env`` (which
    must hold ``HOME`` with :func:`gemini_settings`) plus the API key, ``base_url`` and workspace
    trust.

    Raises:
        FileNotFoundError: when Gemini CLI is not installed.
        subprocess.TimeoutExpired: past ``timeout`` seconds.
    """
    argv = [_program("gemini", env), "--approval-mode=yolo", f"--model={model}", *args, "-p", prompt]
    full = {"GEMINI_API_KEY": "scripted", **env, "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    return _run(argv, cwd=cwd, env=full, timeout=timeout)
