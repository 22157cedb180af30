"""A scenario file is a program: what it runs, whether the user trusts it, and the rights it runs
with (issue 23, deliver 5; ``docs/scenarios.md``, "A scenario file runs commands").
Internal: not a supported import path (docs/reference/index.md lists those that are).

* :func:`scenario_commands` lists what a scenario runs on this machine: its ``setup.commands``,
  its stand-in ``setup.programs`` scripts, each ``setup.env`` variable that makes a program run
  or load code (:func:`unstuck.commands.plain.variable_rule`, the sourced table
  ``unstuck/data/environment_variables.yaml``: ``BASH_ENV``, ``PROMPT_COMMAND``,
  ``LD_PRELOAD``, ``PYTHONPATH``, ``NODE_OPTIONS``, ``GIT_SSH_COMMAND``, ``EDITOR`` …) and the
  ``setup.files`` its value names (a file or a folder of the workspace, so a ``BASH_ENV`` file
  is shown, not only its name), its ``tools.extra`` scripts, the shell commands and the
  installs or sign-ins of its ``plan``, ``fix`` and ``replay`` (the reference agents run
  them), and its ``expect.validators``.
* :func:`shown_commands` is that list as the trust question shows it: each on one line with
  terminal controls stripped and secrets masked (:func:`unstuck.core.redact.redact`: a secret is
  never shown), with the line of the file it is written on; a command the listing cannot show
  as it is (masked, or holding control characters) is marked, and the question then names its
  file and line and does not offer "yes" (``unstuck eval``: ``--trust`` or a digest only).
* Trust is by content: a scenario is trusted when it is bundled with unstuck, or when the
  SHA-256 of its file is listed in a digest file: the user's own
  (:func:`default_digests_file`, ``trusted-scenarios.sha256`` in the user config folder, where
  a "yes" at the question is recorded), the file :data:`TRUSTED_DIGESTS_ENV` names, or the one
  given as ``--trusted-digests``. A digest file has sha256sum(1)'s format (``HEX  NAME`` a
  line; a bare ``HEX`` too; ``#`` starts a comment), so CI can write it with
  ``sha256sum scenarios/*.yaml > trusted.sha256``. :func:`untrusted` is the decision, pure.
* :func:`confinement` is the account and network a scenario's commands run with: what the
  file states, else, for a user's file, the sandbox's own where this machine allows it: the
  ``nobody`` account (as root, with setpriv(1)) and no network (an empty network namespace,
  unshare(1), as root) unless the scenario's own state needs a network (local ``services`` on
  127.0.0.1, or gh signed in against the local API). A bundled scenario runs as it states.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import posixpath
import pwd
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import re2
import yaml

from unstuck.commands.plain import VariableEffect, variable_rule
from unstuck.core.errors import UnstuckError
from unstuck.core.redact import redact
from unstuck.core.text import for_terminal
from unstuck.evals.scenarios import GhState, Scenario, builtin_scenarios

__all__ = [
    "CONFINED_ACCOUNT",
    "DIGESTS_FILE_NAME",
    "TRUSTED_DIGESTS_ENV",
    "RunsCommand",
    "ShownCommand",
    "TrustError",
    "confinement",
    "default_digests_file",
    "describe_rights",
    "read_digests",
    "remember_trusted",
    "scenario_commands",
    "scenario_text",
    "shown_commands",
    "trusted_digests",
    "untrusted",
]

#: The variable that names one more digest file (CI sets it instead of passing --trusted-digests).
TRUSTED_DIGESTS_ENV = "UNSTUCK_TRUSTED_DIGESTS"
#: The user's digest file, in the user config folder.
DIGESTS_FILE_NAME = "trusted-scenarios.sha256"
#: The account a user's scenario runs as by default, where this machine allows it.
CONFINED_ACCOUNT = "nobody"

#: One line of a digest file: 64 hex digits, then (after white space, sha256sum's ``*`` for
#: binary mode allowed) the file's name, or nothing.
_DIGEST_LINE = re2.compile(r"^([0-9a-fA-F]{64})(?:\s+\*?(.*))?$")
#: Calls of the standard tools that run or install something, and the argument shown.
_RUNNING_CALLS = {"run_command": "command", "install_cli": "name", "sign_in_cli": "name"}


class TrustError(UnstuckError, ValueError):
    """A digest file cannot be read or holds a malformed line; the message names it."""


@dataclass(frozen=True, slots=True)
class RunsCommand:
    """One thing a scenario runs: ``where`` in the file (``setup.commands[0]``) and ``command``,
    the text that runs (a command line, a script, a variable's ``NAME=value``, a file's text).

    Attributes:
        field: the path of the YAML node that holds it (``("setup", "commands", 0)``), to find
            its line (:func:`shown_commands`); not compared.
        why: for a variable, what it makes a program do (the table's words); else empty; not
            compared.
    """

    where: str
    command: str
    field: tuple[str | int, ...] = dataclasses.field(default=(), compare=False)
    why: str = dataclasses.field(default="", compare=False)


#: The effects of a ``setup.env`` variable that make it something the file runs.
_RUNS_CODE = frozenset({VariableEffect.RUNS, VariableEffect.LOADS})
#: How a variable's value names files: separated by white space, ``:`` (a path list), ``=``
#: (``--require=./x.js``), ``,``, ``;`` or quotes.
_VALUE_PARTS = re2.compile(r"[\s:=,;'\"]+")


def _workspace_path(part: str) -> str | None:
    """A value's part as a workspace-relative path (``./x``, ``$PWD/x`` and ``x`` alike; ``.``
    is the whole workspace), or ``None`` for an absolute path or an option."""
    for prefix in ("$PWD/", "${PWD}/"):
        if part.startswith(prefix):
            part = part[len(prefix):]
    if not part or part.startswith(("/", "-", "~", "$")):
        return None
    return posixpath.normpath(part)


def _files_named(value: str, files: Iterable[str]) -> list[str]:
    """The workspace files (of ``files``) a variable's value names: as a file, or inside a
    folder it names."""
    named = {p for p in (_workspace_path(part) for part in _VALUE_PARTS.split(value)) if p is not None}
    found = []
    for name in files:
        path = posixpath.normpath(name)
        if any(path == p or p == "." or path.startswith(p.rstrip("/") + "/") for p in named):
            found.append(name)
    return found


def _environment_commands(scenario: Scenario) -> list[RunsCommand]:
    """Each ``setup.env`` variable that makes a program run or load code, and the workspace
    files its value names (their text runs too)."""
    plain = dict(scenario.files)
    texts = {**{name: data.decode("utf-8", "replace") for name, data in scenario.encoded_files}, **plain}
    found: list[RunsCommand] = []
    for name, value in scenario.state.env:
        rule = variable_rule(name)
        if rule is None or rule.effect not in _RUNS_CODE:
            continue
        found.append(RunsCommand(f"setup.env.{name}", f"{name}={value}", ("setup", "env", name), rule.what))
        for file in _files_named(value, texts):
            where_key = "files" if file in plain else "encoded_files"
            found.append(RunsCommand(f"setup.{where_key}.{file} (through setup.env.{name})", texts[file],
                                     ("setup", where_key, file), f"{name} names it"))
    return found


def scenario_commands(scenario: Scenario) -> tuple[RunsCommand, ...]:
    """Everything ``scenario`` runs on this machine, in the order of the file's fields (see the
    module doc). A stand-in program that replays a recorded output, a recorded extra tool and
    the read-only tools run nothing of the file's, and are not listed."""
    found = [RunsCommand(f"setup.commands[{i}]", command, ("setup", "commands", i))
             for i, command in enumerate(scenario.state.commands)]
    found += [RunsCommand(f"setup.programs.{program.name}", program.script, ("setup", "programs", program.name,
                                                                             "script"))
              for program in scenario.state.programs if program.script is not None]
    found += _environment_commands(scenario)
    found += [RunsCommand(f"tools.extra.{t.name}", t.script, ("tools", "extra", t.name, "script"))
              for t in scenario.tools.extra if t.script is not None]
    for field, calls in (("plan", scenario.plan), ("fix", scenario.fix), ("replay", scenario.replay)):
        for index, call in enumerate(calls):
            argument = _RUNNING_CALLS.get(call.tool)
            if argument is None:
                continue
            try:
                value = json.loads(call.arguments_json).get(argument, "")
            except (ValueError, AttributeError):
                value = call.arguments_json
            shown = str(value) if call.tool == "run_command" else f"{call.tool} {value}"
            found.append(RunsCommand(f"{field}[{index}] ({call.tool})", shown, (field, index, "args", argument)))
    found += [RunsCommand(f"expect.validators[{i}]", v.run, ("expect", "validators", i))
              for i, v in enumerate(scenario.expect.validators)]
    return tuple(found)


@dataclass(frozen=True, slots=True)
class ShownCommand:
    """One listed command (:class:`RunsCommand`) as the trust question shows it.

    Attributes:
        where: where in the file, as :attr:`RunsCommand.where`.
        text: the command on one line (every run of white space one space), terminal controls
            and invisible characters stripped (:func:`unstuck.core.text.for_terminal`) and secrets
            masked (:func:`unstuck.core.redact.redact`).
        exact: ``text`` is the command as it runs, but for its layout; ``False`` when a part
            is masked or a control character was removed: the user cannot read it here.
        line: the line of the scenario file (from 1) where it is written, or ``None`` when the
            file's text is not at hand or the field is not found.
        why: :attr:`RunsCommand.why`.
    """

    where: str
    text: str
    exact: bool
    line: int | None
    why: str = ""


def scenario_text(scenario: Scenario) -> str | None:
    """The text of ``scenario``'s file, when it can be read and is still the file that was
    loaded (its SHA-256 is :attr:`Scenario.digest`), else ``None``."""
    try:
        data = Path(scenario.source).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != scenario.digest:
        return None
    return data.decode("utf-8", "replace")


def _field_line(document: yaml.Node | None, field: Sequence[str | int]) -> int | None:
    """The line (from 1) of the node at ``field`` in a composed YAML document; a validator
    written as a mapping is found at its ``run``."""
    node = document
    for step in field:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            node = next((value for key, value in node.value if isinstance(key, yaml.ScalarNode)
                         and key.value == step), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
        else:
            return None
    if isinstance(node, yaml.MappingNode):
        node = next((value for key, value in node.value if isinstance(key, yaml.ScalarNode)
                     and key.value in ("run", "script")), node)
    return None if node is None else int(node.start_mark.line) + 1


def shown_commands(scenario: Scenario, text: str | None) -> tuple[ShownCommand, ...]:
    """:func:`scenario_commands` as the trust question shows them (see :class:`ShownCommand`),
    with their lines found in ``text``, the scenario file's text (:func:`scenario_text`), when
    given. Never raises: a text that is not YAML gives no lines."""
    document: yaml.Node | None = None
    if text is not None:
        try:
            document = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            document = None
    shown = []
    for item in scenario_commands(scenario):
        flat = " ".join(item.command.split())
        text_shown = " ".join(redact(for_terminal(item.command)).split())
        exact = text_shown == flat and redact(f"{item.where}: {flat}") == f"{item.where}: {flat}"
        shown.append(ShownCommand(item.where, text_shown, exact, _field_line(document, item.field), item.why))
    return tuple(shown)


def default_digests_file() -> Path:
    """The user's digest file: ``trusted-scenarios.sha256`` in ``platformdirs.user_config_path
    ("unstuck")`` (``$XDG_CONFIG_HOME/unstuck`` or ``~/.config/unstuck`` on Linux)."""
    import platformdirs

    return platformdirs.user_config_path("unstuck") / DIGESTS_FILE_NAME


def read_digests(path: Path, *, missing_ok: bool = False) -> frozenset[str]:
    """The digests a digest file lists (lower-case hex).

    Raises:
        TrustError: naming the file, when it cannot be read (a missing file too, unless
            ``missing_ok``), or naming the line, when a line is not ``HEX [NAME]``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return frozenset()
        raise TrustError(f"{path}: no such digest file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TrustError(f"{path}: cannot read the digest file: {getattr(exc, 'strerror', None) or exc}") from None
    digests: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = _DIGEST_LINE.match(line)
        if found is None:
            raise TrustError(f"{path}, line {number}: not a SHA-256 digest line (64 hex digits, then the file's name)")
        digests.add(found.group(1).lower())
    return frozenset(digests)


def trusted_digests(given: Path | None = None, environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The digests trusted here: the user's digest file (if it exists), the file
    :data:`TRUSTED_DIGESTS_ENV` names in ``environ`` (default ``os.environ``) and ``given``
    (``--trusted-digests``); a file named by the variable or the option must exist.

    Raises:
        TrustError: naming the file, for one that cannot be read or holds a malformed line.
    """
    env = os.environ if environ is None else environ
    found = set(read_digests(default_digests_file(), missing_ok=True))
    named = env.get(TRUSTED_DIGESTS_ENV)
    for path in ([Path(named)] if named else []) + ([given] if given is not None else []):
        found |= read_digests(path)
    return frozenset(found)


def untrusted(scenarios: Iterable[Scenario], digests: Iterable[str], *,
              bundled: Sequence[Scenario] | None = None) -> list[Scenario]:
    """The scenarios not trusted: neither bundled (nor a copy of a bundled file, byte for
    byte: ``bundled``, default :func:`builtin_scenarios`) nor listed by digest."""
    trusted = set(digests) | {s.digest for s in (builtin_scenarios() if bundled is None else bundled)}
    return [s for s in scenarios if not s.bundled and s.digest not in trusted]


def remember_trusted(scenario: Scenario, path: Path | None = None) -> Path:
    """Record ``scenario``'s digest in the user's digest file (``path``, default
    :func:`default_digests_file`; folders made), so it is not asked about again; returns the
    file. A line ``HEX  SOURCE`` is appended.

    Raises:
        TrustError: when the file cannot be written.
    """
    target = path if path is not None else default_digests_file()
    name = " ".join(scenario.source.split())  # one line, whatever the file's name holds
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as out:
            out.write(f"{scenario.digest}  {name}\n")
    except OSError as exc:
        raise TrustError(f"{target}: cannot record the trusted scenario: {exc.strerror or exc}") from None
    return target


@functools.cache
def _can_run_as(account: str) -> bool:
    """Whether this process can run commands as ``account``: it is root, the account exists,
    and setpriv(1) is installed (what :meth:`unstuck.evals.sandbox.Sandbox.workspace` uses)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    try:
        pwd.getpwnam(account)
    except KeyError:
        return False
    return True


@functools.cache
def _can_unshare_network() -> bool:
    """Whether an empty network namespace can be made here (root, and ``unshare --net`` works:
    a container without ``CAP_SYS_ADMIN`` refuses it)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "--net", "--", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _own_account() -> str | None:
    """The name of this process's account, or ``None`` when it has none."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return None


def _needs_network(scenario: Scenario) -> bool:
    """The scenario's own state is reached over a network an empty namespace does not have:
    local HTTP services on 127.0.0.1, or gh signed in against the local API (whose socket
    setting the sandbox writes only with a network)."""
    return bool(scenario.state.services) or scenario.gh is GhState.SIGNED_IN


def confinement(scenario: Scenario) -> tuple[str | None, str]:
    """The account (``None``: this process's own) and the network state (one of
    :data:`unstuck.evals.sandbox.NETWORKS`) ``scenario`` runs with: as stated by a bundled
    scenario or by the file's ``setup.run_as`` / ``setup.network`` (a ``run_as`` naming this
    process's own account keeps it: a file that must reach outside its sandbox says so); otherwise
    :data:`CONFINED_ACCOUNT` where this machine can run as it, and ``none`` where it can make
    an empty network namespace and the scenario needs no network of its own (see the module
    doc), else this process's account and ``ok``."""
    run_as, network = scenario.run_as, scenario.network
    if run_as is not None and run_as == _own_account():
        run_as = None  # "run as me": no change of account (root or not)
    if scenario.bundled:
        return run_as, network
    if "run_as" not in scenario.setup_keys and _can_run_as(CONFINED_ACCOUNT):
        run_as = CONFINED_ACCOUNT
    if "network" not in scenario.setup_keys and not _needs_network(scenario) and _can_unshare_network():
        network = "none"
    return run_as, network


def describe_rights(scenario: Scenario) -> str:
    """In words, the account and network :func:`confinement` gives ``scenario``."""
    run_as, network = confinement(scenario)
    who = f"as {run_as}" if run_as is not None else f"as you (uid {os.geteuid()}), with all your rights"
    where = {"none": "with no network (an empty network namespace)",
             "refused": "with its API socket refusing connections",
             "ok": "with this machine's network (its proxy variables refuse connections; a program that ignores "
                   "them can still connect)"}[network]
    return f"{who}, {where}"
