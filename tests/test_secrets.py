"""Secrets never stored or shown, on every path (issue 23, deliver 3): tokens of every known
format (``tests/data/secret_samples.yaml``, each issuer's documented shape, kept apart from
:mod:`unstuck.core.redact`'s own table) are seeded into tool outputs, tool arguments, the task, the
model's messages, a declared blocker and the files a command reads; every command of the CLI
(enumerated from the typer app itself) runs, with ``--json`` and file outputs where it has them,
on both store engines; then every stream and every file the runs produced, the SQLite files'
bytes and every row of the PostgreSQL tables, are searched for every seeded secret.

What a test writes for a command to read (a scenario, a tool's output file, an events file, a
record) goes to an ``inputs`` folder that the search leaves out; everything else under the
test's folders (the stores, the outputs, ``HOME``, ``XDG_*``, ``TMPDIR``) is searched. The one
output that is not searched is the MCP proxy's standard output: it is the channel to the agent,
what the model reads, and the model may see what a tool returned (DESIGN.md). Nor is ``unstuck run
--sandbox DIR`` used: the folder it keeps is the scenario's own world, whose files hold the
samples because the scenario's setup wrote them there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from conftest import PlaybackModel, bare_env
from pg_fixtures import StoreTarget
from secret_samples import Sample, samples
from unstuck.cli.app import app
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind, Probe, Situation
from unstuck.core.tools import Effect
from unstuck.evals.chat_server import ChatServer
from unstuck.loop.turn import run_turn
from unstuck.store.events import JsonLinesSink, Tee
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore
from unstuck.store.urls import Engine
from unstuck.toolkit.specs import Toolset, tool

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = samples()
#: The samples written on one line (all but the PEM blocks): what fits in a shell argument.
ONE_LINE = [s.text for s in SAMPLES if "\n" not in s.text]

#: Every command the store test runs (on each engine) and every one the other test runs.
STORE_COMMANDS = frozenset({
    "run", "journal list", "journal show", "journal resume", "lessons list", "lessons show", "lessons forget",
    "lessons search", "report", "trace show",
})
OTHER_COMMANDS = frozenset({
    "eval", "classify", "bank harvest", "bank list", "bank stats", "rules list", "rules show", "rules disable",
    "rules enable", "rules prompt", "signals harvest", "scenarios", "scenarios new", "scenarios check",
    "mcp-proxy", "trace show",
})
#: Commands this test cannot run meaningfully, each with the reason.
NOT_RUN = {
    "mine": "its environments are the bundled ones (unstuck.mining.envs), whose tasks, tools and worlds are fixed "
            "code: no text of the test's reaches a rollout, so there is nothing to seed; the record it writes goes "
            "through unstuck.core.output.write_json, which `rules disable` runs here on a record holding every sample",
    **dict.fromkeys(("serve", "answer"),
                    "the guard server and its answers are run with every sample in hook payloads by "
                    "tests/integrations/coding_agents/test_guard_server.py::"
                    "test_secrets_in_hook_payloads_are_never_stored_logged_or_shown"),
    **dict.fromkeys(("hooks install", "hooks uninstall", "hooks status"),
                    "they write and read an agent's settings file, whose only text of unstuck's is the hook client's "
                    "command line (tests/integrations/coding_agents/test_hooks_install.py); no tool output reaches them"),
}


def cli_commands() -> set[str]:
    """Every command of the CLI, from the click tree typer builds (a group that runs without
    a sub-command, such as ``scenarios``, counts as a command itself)."""
    found: set[str] = set()

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found.add(" ".join(path))
            return
        if path and getattr(command, "invoke_without_command", False):
            found.add(" ".join(path))
        for name, sub in subcommands.items():
            if not getattr(sub, "hidden", False):
                walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def test_every_command_of_the_cli_is_run_by_the_secrets_tests_or_listed_with_a_reason() -> None:
    enumerated = cli_commands()
    covered = STORE_COMMANDS | OTHER_COMMANDS
    assert not covered & NOT_RUN.keys(), "a command is both run and listed as not run"
    assert all(reason.strip() for reason in NOT_RUN.values())
    assert enumerated - covered - NOT_RUN.keys() == set(), "commands neither run by the secrets tests nor listed"
    assert (covered | NOT_RUN.keys()) - enumerated == set(), "commands named here that the CLI does not have"


# -- finding secrets -----------------------------------------------------------------------------


def leaks(data: bytes | str) -> list[str]:
    """The names of the samples any of whose secret pieces occur in ``data``."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    return [s.name for s in SAMPLES if any(piece.encode() in raw for piece in s.secrets)]


def leaks_in_files(root: Path, *, skip: Sequence[Path] = ()) -> dict[str, list[str]]:
    """Every file under ``root`` (but ``skip``) that holds a seeded secret, with the samples found."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        if any(path.is_relative_to(s) for s in skip):
            continue
        names = leaks(path.read_bytes())
        if names:
            found[str(path.relative_to(root))] = names
    return found


def every_row(target: StoreTarget) -> str:
    """A dump of every table's rows in a PostgreSQL store (its SQLite files are read as bytes)."""
    return "\n".join(f"{table}: {target.rows(f'SELECT * FROM {table}')!r}" for table in sorted(target.tables()))


# -- running the CLI -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """One CLI run: its command path (``journal show``), arguments, exit status and streams."""

    command: str
    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")


@dataclass(frozen=True)
class Command:
    """One ``python -m unstuck`` command line for :meth:`Cli.each`: its arguments, the exit
    statuses it may end with, and its standard input."""

    args: tuple[str, ...]
    ok: tuple[int, ...] = (0,)
    stdin: bytes | None = None


@dataclass
class Cli:
    """Runs ``python -m unstuck`` as a user would, with ``HOME``, ``XDG_*`` and ``TMPDIR`` in
    the test's folder, and keeps every run."""

    root: Path
    ran: list[Ran] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("home", "tmp", "work", "inputs", "out", "config", "data", "cache", "state"):
            (self.root / name).mkdir(exist_ok=True)

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def env(self) -> dict[str, str]:
        return bare_env(PATH=os.environ.get("PATH", "/usr/bin:/bin"), PYTHONPATH=ROOT / "src", COLUMNS="200",
                        HOME=self.root / "home", TMPDIR=self.root / "tmp", LANG="C.UTF-8",
                        XDG_CONFIG_HOME=self.root / "config", XDG_DATA_HOME=self.root / "data",
                        XDG_CACHE_HOME=self.root / "cache", XDG_STATE_HOME=self.root / "state")

    def __call__(self, *args: str, ok: Sequence[int] = (0,), stdin: bytes | None = None, timeout: float = 300) -> Ran:
        return self.each(Command(args, tuple(ok), stdin), timeout=timeout)[0]

    def each(self, *commands: Command | Sequence[str], timeout: float = 300) -> list[Ran]:
        """Run ``commands`` (an argument list: exit status 0 expected) at once, one process each,
        as many at a time as there are CPUs: for commands that only read what the ones before
        wrote, so their order does not matter. Kept in the order given; each exit status checked."""
        chosen = [c if isinstance(c, Command) else Command(tuple(c)) for c in commands]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            ran = list(pool.map(lambda c: self._run(c, timeout), chosen))
        self.ran.extend(ran)
        for command, r in zip(chosen, ran, strict=True):
            assert r.returncode in command.ok, f"{' '.join(r.args)} exited {r.returncode}:\n{r.out}\n{r.stderr.decode()}"
        return ran

    def _run(self, command: Command, timeout: float) -> Ran:
        args = command.args
        name = next(c for c in sorted(cli_commands(), key=len, reverse=True)
                    if tuple(args[:len(c.split())]) == tuple(c.split()))
        done = subprocess.run([sys.executable, "-m", "unstuck", *args], input=command.stdin, capture_output=True,
                              env=self.env(), cwd=self.root / "work", timeout=timeout, check=False)
        return Ran(name, tuple(args), done.returncode, done.stdout, done.stderr)

    def commands(self) -> set[str]:
        return {r.command for r in self.ran}

    def stream_leaks(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for r in self.ran:
            for name, data in (("stdout", r.stdout), ("stderr", r.stderr)):
                names = leaks(data)
                if names:
                    found[f"{' '.join(r.args)[:120]} ({name})"] = names
        return found


# -- what the commands read ----------------------------------------------------------------------


def _by_name(name: str) -> Sample:
    return next(s for s in SAMPLES if s.name == name)


def _printf(texts: Sequence[str]) -> str:
    return "printf '%s\\n' " + " ".join(shlex.quote(t) for t in texts)


def write_scenario(folder: Path) -> Path:
    """A blocker scenario with every sample in its world, task, plan, replay, answer and validator:
    gh is signed out, a file holds every sample, the tools' environment two more, the plan and the
    replay print samples given as arguments, the replay agent's answer quotes them all."""
    half = len(ONE_LINE) // 2
    document = {
        "name": "secrets_everywhere",
        "title": f"secrets in every field, even the title {_by_name('GitHub OAuth access token').text}",
        "role": "blocker",
        "tags": ["secrets"],
        "setup": {
            "gh": "logged_out",
            "files": {"secrets.txt": "\n".join(s.text for s in SAMPLES) + "\n"},
            "env": {"DEPLOY_TOKEN": _by_name("Slack bot token").text,
                    "SHOP_DSN": _by_name("URL userinfo password").text},
        },
        "task": f"Check these credentials, then give the description of cli/cli: {' ; '.join(ONE_LINE[:half])}",
        "plan": [
            {"tool": "read_file", "args": {"path": "secrets.txt"}},
            {"tool": "run_command", "args": {"command": _printf(ONE_LINE[:half])}},
            {"tool": "run_command", "args": {"command": "gh repo view cli/cli --json description"}},
        ],
        "replay": [
            {"tool": "run_command", "args": {"command": _printf(ONE_LINE[half:])}},
            {"tool": "run_command", "args": {"command": "cat secrets.txt; env"}},
            {"tool": "run_command", "args": {"command": "gh repo view cli/cli"}},
        ],
        "replay_answer": "Here is what I found: " + " ".join(ONE_LINE),
        "agents": ["compliant", "improviser", "replay"],
        "expect": {
            "status": "blocked", "kind": "auth", "subject": "gh", "unblock": "gh auth login",
            "validators": [{"name": f"keys {_by_name('npm access token').text}",
                            "run": f"echo {shlex.quote(_by_name('Google API key').text)}"}],
        },
    }
    path = folder / "secrets_everywhere.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=10**6), encoding="utf-8")
    return path


def _mo_file(path: Path, messages: dict[str, str]) -> None:
    """A gettext catalogue (GNU gettext manual, "The Format of GNU MO Files"), made with msgfmt."""
    po = path.with_suffix(".po")
    body = 'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n' + "".join(
        f"msgid {json.dumps(k)}\nmsgstr {json.dumps(v)}\n\n" for k, v in messages.items())
    po.write_text(body, encoding="utf-8")
    subprocess.run(["msgfmt", "-o", str(path), str(po)], check=True)
    po.unlink()


# -- the store test --------------------------------------------------------------------------------


def _store_location(target: StoreTarget, root: Path) -> str:
    """Where ``--store`` keeps both stores: the PostgreSQL database, or a folder of two SQLite files."""
    if target.engine is Engine.POSTGRESQL:
        return target.url
    folder = root / "stores"
    folder.mkdir()
    return str(folder)


def _seed_held_turn(journal_at: Path | str) -> None:
    """A turn whose write intent, task and hold reason hold secrets, interrupted and let go, as a
    crashed run leaves one (written through the journal, so through its store boundary)."""
    arguments = json.dumps({"token": _by_name("Stripe live secret key").text, "dsn": _by_name("URL userinfo password").text,
                            "note": " ".join(ONE_LINE[:6])})
    with Journal(journal_at) as journal:
        journal.begin_turn("held-1", f"deploy with {_by_name('DigitalOcean personal access token').text}",
                           unattended=True, guarded=True)
        ref = journal.prepare_intent("held-1", 0, "c1", "deploy", arguments)
        journal.hold([ref], f"nobody knows; the key was {_by_name('Databricks personal access token').text}")
        journal.end_turn("held-1", "interrupted", error=f"held: {_by_name('age secret key').text}")


def _seed_lesson(lessons_at: Path | str) -> int:
    """A lesson from a declared blocker whose subject, detail, unblock, probe, content and metadata hold secrets."""
    situation = Situation(
        Kind.AUTH, f"deploy@{_by_name('URL userinfo password').text}",
        detail=" ".join(ONE_LINE[:10]),
        unblock=f"deploy login --token {_by_name('GitHub personal access token (classic)').text}",
        probe=Probe.of("deploy_check", {"token": _by_name("npm access token").text,
                                        "header": _by_name("OAuth 2.0 bearer token").text}),
    )
    with LessonStore(lessons_at) as store:
        return store.record(situation, tool="deploy", fingerprint="deploy 1.0", source="declared",
                            content="\n".join(s.text for s in SAMPLES),
                            metadata={"api_key": _by_name("SendGrid API key").text, "seen": ONE_LINE[10:14]}).id


@pytest.mark.slow
def test_no_command_stores_or_shows_a_seeded_secret_on_either_store(store_target: StoreTarget, tmp_path: Path,
                                                                    gh_path: str) -> None:
    cli = Cli(tmp_path)
    scenario = write_scenario(cli.inputs)
    store = _store_location(store_target, tmp_path)
    journal_at = store_target.url if store_target.engine is Engine.POSTGRESQL else Path(store) / "journal.db"
    lessons_at = store_target.url if store_target.engine is Engine.POSTGRESQL else Path(store) / "lessons.db"

    for agent in ("compliant", "improviser", "replay"):
        cli("run", str(scenario), "--trust", "--agent", agent, "--unattended", "--store", store,
            "--events", str(cli.out / f"events-{agent}.jsonl"), "--json", str(cli.out / f"run-{agent}.json"),
            ok=(0, 1, 3))
    _seed_held_turn(journal_at)
    lesson_id = _seed_lesson(lessons_at)
    journal, lessons = str(journal_at), str(lessons_at)

    listed = json.loads(cli("journal", "list", "--journal", journal, "--json").out)
    assert len(listed) == 4
    turns = [t["turn"] for t in listed]
    # what only reads runs at once (Cli.each); what writes (resume, forget) after it, alone
    shown = cli.each(("journal", "list", "--journal", journal),
                     *[("journal", "show", turn, "--journal", journal, *extra) for turn in turns
                       for extra in (("--json",), ())])[1::2]
    for turn, ran in zip(turns, shown, strict=True):
        if turn != "held-1":
            assert json.loads(ran.out)["steps"] and "***" in ran.out  # the seeds reached the journal, masked
    cli("journal", "resume", "held-1", "--journal", journal, "--absent", "held-1:0", "--force")

    read = cli.each(("lessons", "show", str(lesson_id), "--store", lessons, "--json"),
                    ("lessons", "show", str(lesson_id), "--store", lessons),
                    *[("lessons", "list", "--store", lessons, *extra)
                      for extra in ((), ("--json",), ("--all",), ("--all", "--json"))],
                    *[("lessons", "search", "deploy", "--store", lessons, *extra) for extra in ((), ("--json",))],
                    ("report", "--journal", journal, "--json", str(cli.out / "costs.json"), "--html",
                     str(cli.out / "costs.html")),
                    ("report", "--journal", journal, "--json", "-"),
                    *[("trace", "show", str(cli.out / f"events-{agent}.jsonl")) for agent in ("compliant", "replay")])
    assert "***" in json.dumps(json.loads(read[0].out))
    cli("lessons", "forget", str(lesson_id), "--store", lessons)

    assert cli.commands() >= STORE_COMMANDS, f"not run: {sorted(STORE_COMMANDS - cli.commands())}"
    assert cli.stream_leaks() == {}
    assert leaks_in_files(tmp_path, skip=[cli.inputs]) == {}  # the SQLite files (and WAL) too, as bytes
    if store_target.engine is Engine.POSTGRESQL:
        dump = every_row(store_target)
        assert "knowledge" in dump and "intents" in dump and leaks(dump) == []


# -- the other commands ----------------------------------------------------------------------------


def _raw_events(path: Path) -> None:
    """An events file as another program (or an older unstuck) might have written it: secrets raw."""
    lines = [{"event": "turn.started", "turn": "t1", "at_s": 0.0, "task": " ".join(ONE_LINE[:8])},
             {"event": "tool.called", "turn": "t1", "at_s": 0.1, "tool": "run_command", "subject": ONE_LINE[8]},
             {"event": "turn.ended", "turn": "t1", "at_s": 0.2, "status": "failed", "error": " ".join(ONE_LINE[8:])}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _raw_record(path: Path) -> None:
    """A mined environment record holding secrets in its description, rule text and objects, written
    raw (as a record mined from a rollout that printed them would have been before redaction)."""
    from unstuck.mining.environment import BusinessObject
    from unstuck.mining.rules import (
        RECORD_SCHEMA,
        ActionKind,
        EnvironmentRecord,
        Moment,
        Rule,
        RuleAction,
        Trigger,
    )
    from unstuck.mining.trace import BadPattern

    rule = Rule("r1", BadPattern.WORKED_AROUND_BLOCKER, Trigger(Moment.AFTER_RESULT, "deploy", "auth"),
                RuleAction(ActionKind.ASK, "ask_user"), f"When deploy fails with {ONE_LINE[0]}, ask the user "
                f"instead of trying {ONE_LINE[1]}", support=3)
    record = EnvironmentRecord("secret_env", 1, f"an environment whose description says {ONE_LINE[2]}",
                               (BusinessObject("deployment", "deploy_id", f"named by {ONE_LINE[3]}"),),
                               ("deploy", "ask_user"), rules=(rule,))
    document = {"schema": RECORD_SCHEMA, **asdict(record), "stats": {}}
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


def _cases(path: Path) -> None:
    """A labelled corpus (the shared/cases/tool_outputs.jsonl format) whose outputs print secrets."""
    lines = [{"id": f"secret-{i}", "tool": "deploy", "expected_kind": "auth", "exit_code": 1,
              "output": f"error: authentication failed for {text}", "source": "test"}
             for i, text in enumerate(s.text for s in SAMPLES)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _secret_agent(request: dict[str, Any]) -> dict[str, Any]:
    """A model that prints secrets with its first call, reads the file of them with its second,
    then answers quoting them."""
    answered = sum(1 for m in request["messages"] if m["role"] == "tool")
    if answered == 0:
        return {"content": f"Let me check {ONE_LINE[0]}", "tool_calls": [("run_command", {"command": _printf(ONE_LINE)})]}
    if answered == 1:
        return {"tool_calls": [("read_file", {"path": "secrets.txt"})]}
    return {"content": "Done; the keys were " + " ".join(ONE_LINE)}


_UPSTREAM = textwrap.dedent("""\
    import sys
    sys.stderr.write({said!r} + "\\n")
    sys.stderr.flush()
    from unstuck.integrations.shell_server import main
    main()
""")


async def _through_the_proxy(cli: Cli, task: str, command: str) -> str:
    """One tool call through ``unstuck mcp-proxy`` (its standard error kept in the outputs): the
    text the agent got back."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    upstream = cli.inputs / "upstream.py"
    upstream.write_text(_UPSTREAM.format(said=f"upstream starting with {' '.join(ONE_LINE[:5])}"), encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "unstuck", "mcp-proxy", "--task", task, "--", sys.executable, str(upstream)],
        env=cli.env(), cwd=str(cli.root / "work"))
    with (cli.out / "mcp-proxy.stderr").open("w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("run_command", {"command": command})
    return "\n".join(str(getattr(item, "text", "")) for item in result.content)


@pytest.mark.slow
def test_no_other_command_stores_or_shows_a_seeded_secret(tmp_path: Path, gh_path: str) -> None:
    import anyio

    cli = Cli(tmp_path)
    scenarios = cli.inputs / "scenarios"
    scenarios.mkdir()
    scenario = write_scenario(scenarios)

    cli("eval", str(scenario), "--trust", "--only", "--agents", "compliant,replay", "--no-sessions", "--workers", "1",
        "--json", str(cli.out / "eval.json"), "--html", str(cli.out / "eval.html"))
    assert "***" in (cli.out / "eval.json").read_text(encoding="utf-8")

    # what the commands read, written first; then those that only read run at once (Cli.each)
    output = cli.inputs / "output.txt"
    output.write_text("error: the request failed\n" + "\n".join(s.text for s in SAMPLES) + "\n", encoding="utf-8")
    cases = cli.inputs / "cases.jsonl"
    _cases(cases)
    bank = cli.out / "bank.jsonl"
    records = cli.out / "records"
    records.mkdir()
    _raw_record(records / "secret_env.json")
    locale = cli.inputs / "locale" / "de" / "LC_MESSAGES"
    locale.mkdir(parents=True)
    _mo_file(locale / "libc.mo", {"Permission denied": f"Keine Berechtigung ({ONE_LINE[0]})"})
    translations = cli.out / "translations.jsonl"
    bad = cli.inputs / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "bad", "role": ONE_LINE[0], "task": ONE_LINE[1], "agents": [ONE_LINE[2]]}),
                   encoding="utf-8")
    events = cli.inputs / "events.jsonl"
    _raw_events(events)
    cli.each(*[("classify", str(output), "--exit-code", "1", *extra)
               for extra in ((), ("--json",), ("--explain",), ("--json", "--explain"))],
             Command(("classify", "--exit-code", "1", "--explain"), stdin=output.read_bytes()),
             ("bank", "harvest", "--cases", str(cases), "--only", "gh-logged-out", "--out", str(bank)),
             ("rules", "list", "secret_env", "--records", str(records)),
             ("rules", "show", "secret_env", "r1", "--records", str(records)),
             ("rules", "prompt", "secret_env", "--records", str(records)),
             ("signals", "harvest", "--locale-dir", str(cli.inputs / "locale"), "--out", str(translations)),
             ("scenarios", "--scenario-dir", str(scenarios)),
             ("scenarios", "new", "my_scenario", "--out", str(cli.out / "my_scenario.yaml")),
             ("scenarios", "check", str(scenario)),
             Command(("scenarios", "check", str(bad)), ok=(2,)),
             ("trace", "show", str(events)))
    assert len(bank.read_text(encoding="utf-8").splitlines()) > len(SAMPLES)
    assert "Keine Berechtigung" in translations.read_text(encoding="utf-8")
    cli.each(*[("bank", "list", "--bank", str(bank), "--tool", "deploy", *extra) for extra in ((), ("--json",))],
             ("bank", "stats", "--bank", str(bank), "--json"))
    cli("rules", "disable", "secret_env", "r1", "--records", str(records))  # writes the record again
    cli("rules", "enable", "secret_env", "r1", "--records", str(records))

    # a model over the OpenAI wire (a loopback server): its tool calls' arguments and its answers hold
    # secrets, and so do the API key and the second opinion's verdict
    with ChatServer([], responder=_secret_agent, closing=json.dumps({
            "kind": "conflict", "interactive": False, "retryable": False, "detail": " ".join(ONE_LINE[:6])})) as server:
        cli.each(("eval", str(scenario), "--trust", "--only", "--model", "scripted", "--base-url", server.base_url,
                  "--api-key", _by_name("OpenAI project API key").text, "--agents", "model:scripted",
                  "--no-sessions", "--workers", "1", "--json", str(cli.out / "eval-model.json")),
                 *[("classify", str(output), "--exit-code", "3", "--second-opinion", "judge", "--base-url",
                    server.base_url, *extra) for extra in ((), ("--json",))])  # a server of threads
        asked = [r for r in server.requests if r.get("tools")]
    assert asked and any(ONE_LINE[0] in json.dumps(r["messages"]) for r in asked)  # the model saw them, by design

    said = anyio.run(_through_the_proxy, cli, f"deploy with {ONE_LINE[4]}", _printf(ONE_LINE[5:9]) + " >&2")
    assert ONE_LINE[5] in said  # the agent (the model) got the tool's output as it was: by design
    cli.ran.append(Ran("mcp-proxy", ("mcp-proxy",), 0, b"", (cli.out / "mcp-proxy.stderr").read_bytes()))

    assert cli.commands() >= OTHER_COMMANDS, f"not run: {sorted(OTHER_COMMANDS - cli.commands())}"
    assert cli.stream_leaks() == {}
    assert leaks_in_files(tmp_path, skip=[cli.inputs]) == {}


# -- the library: journal, lessons, events, traces ---------------------------------------------------


def _spans_text(exporter: Any) -> str:
    """Every finished span as text: name, attributes, events and their attributes, status."""
    parts = []
    for span in exporter.get_finished_spans():
        parts.append(f"{span.name} {dict(span.attributes or {})!r} {span.status.description!r}")
        parts.extend(f"{e.name} {dict(e.attributes or {})!r}" for e in span.events)
    return "\n".join(parts)


def _declaring_tools(seen: list[str]) -> Toolset:
    """A CLI's check (declares a signed-out blocker whose detail, unblock and probe hold
    secrets), a write tool whose receipt holds secrets, and a reader that prints every sample."""

    @tool(subject=lambda a: a.get("name"))
    def check(name: str) -> dict[str, Any]:
        """Check the CLI's sign-in."""
        return {"status": "error", "situation": {
            "kind": "auth", "subject": name, "interactive": True,
            "unblock": f"{name} auth login --with-token {_by_name('GitLab personal access token').text}",
            "probe": {"tool": "check", "args": {"name": name, "token": _by_name("Hugging Face user access token").text}},
            "detail": f"not logged in: {' '.join(ONE_LINE[:8])}"}}

    @tool(subject=lambda a: "deploy", effect=Effect.WRITE)
    def deploy(token: str, target: str) -> str:
        """Deploy with a token."""
        seen.append(token)
        return f"deployed to {target} with {token}; config:\n" + "\n".join(s.text for s in SAMPLES)

    @tool(subject="files")
    def read_env() -> str:
        """Print the environment."""
        return "\n".join(s.text for s in SAMPLES)

    return Toolset([check, deploy, read_env])


def test_a_library_turn_keeps_seeded_secrets_out_of_its_journal_lessons_events_and_traces(
        store_target: StoreTarget, tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from unstuck.store.otel import OtelSink

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen: list[str] = []
    token = _by_name("GitHub fine-grained personal access token").text
    model = PlaybackModel([
        ("read_env", {}),
        ("deploy", {"token": token, "target": ONE_LINE[3]}),
        ("check", {"name": "cli"}),
        ("deploy", {"token": ONE_LINE[4], "target": "prod"}),
        f"I deployed with {token} and saw {' '.join(ONE_LINE)}",
    ], closing=f"Closing: {' '.join(ONE_LINE[10:20])}")
    if store_target.engine is Engine.POSTGRESQL:
        journal_at: Path | str = store_target.url
        lessons_at: Path | str = store_target.url
    else:
        journal_at, lessons_at = tmp_path / "journal.db", tmp_path / "lessons.db"
    events = tmp_path / "events.jsonl"
    sink = JsonLinesSink(events)
    with Journal(journal_at) as journal, LessonStore(lessons_at) as lessons:
        result = run_turn(f"deploy {ONE_LINE[5]} and check {ONE_LINE[6]}", model=model,
                          tools=_declaring_tools(seen), unattended=True, clock=VirtualClock(), journal=journal,
                          lessons=lessons, events=Tee(sink, OtelSink(provider.get_tracer("test"))),
                          fingerprint=lambda subject: f"/usr/bin/{subject}|1.0")
        steps = journal.steps(result.turn_id)
        intents = journal.intents(result.turn_id)
        stored_lessons = lessons.all()
    sink.close()
    provider.shutdown()

    # the design: the model and the tools saw the secrets whole
    assert seen and seen[0] == token
    assert any(token in m.content for request in model.requests for m in request[0])
    # and the seeds reached every store, masked
    assert intents and all("***" in i.arguments_json for i in intents)
    assert len(steps) >= 3 and stored_lessons and "***" in (stored_lessons[0].unblock or "")
    assert events.read_text(encoding="utf-8") and exporter.get_finished_spans()

    assert leaks(_spans_text(exporter)) == []
    assert leaks(events.read_bytes()) == []
    if store_target.engine is Engine.POSTGRESQL:
        assert leaks(every_row(store_target)) == []
    else:
        assert leaks_in_files(tmp_path) == {}



def test_a_secret_used_as_a_json_key_or_a_declared_subject_is_kept_out_of_the_journal_and_saved_guard_state(
        tmp_path: Path) -> None:
    """A token as a JSON document's key and a URL password in a declared blocker's subject (the
    key of the saved state's open blockers): the journal's files and ``Guard.to_json`` hold
    neither, masked keys keep the documents whole (RFC 8259 section 4)."""
    from unstuck import Guard, ToolCall

    token = _by_name("GitHub personal access token (classic)").text
    password = _by_name("URL userinfo password").secrets[0]
    subject = f"https://bot:{password}@git.example"

    @tool(subject="deploy")
    def deploy(target: str) -> dict[str, Any]:
        """Deploy."""
        return {"status": "error", "situation": {"kind": "auth", "subject": subject, "unblock": "deploy login"}}

    @tool
    def read_keys() -> str:
        """Read the key file."""
        return json.dumps({token: {"scopes": ["repo"]}, f"https://ci:{password}@registry.example": {}})

    with Journal(tmp_path / "journal.db") as journal:
        run_turn("read the keys", model=PlaybackModel([("read_keys", {}), ("deploy", {"target": "prod"}), "done"]),
                 tools=[read_keys, deploy], unattended=True, clock=VirtualClock(), journal=journal, turn_id="t1")
        kept = [json.loads(m) for m in journal.messages("t1")]
    assert leaks_in_files(tmp_path) == {}
    tool_output = next(json.loads(m["content"]) for m in kept if m["role"] == "tool" and "scopes" in m["content"])
    assert tool_output == {"***": {"scopes": ["repo"]}, "https://ci:***@registry.example": {}}

    guard = Guard([deploy, read_keys], unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", "deploy", {"target": "prod"}))
    guard.call(ToolCall.of(f"id-{token}", "read_keys", {}))
    saved = guard.to_json()
    assert leaks(saved) == [] and "https://bot:***@git.example" in json.loads(saved)["state"]["open_blockers"]


# -- a store an older unstuck wrote, migrated --------------------------------------------------------

#: A schema-4 process that wrote rows and died before any checkpoint: its frames stay in ``-wal``
#: (``wal_autocheckpoint`` off; ``os._exit`` closes no connection), as a crash leaves them; with
#: ``secure_delete`` off, SQLite's default (sqlite.org, "Pragma statements"; some distributions
#: build it on), so what it deleted stays in the file's free space.
_CRASHED_WRITER = textwrap.dedent("""\
    import json, os, sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("PRAGMA secure_delete = OFF")
    for sql, params in json.loads(sys.stdin.read()):
        db.execute(sql, params)
    os._exit(0)
""")


def _write_as_schema_4(path: Path, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """Stamp the store at ``path`` (made by the current code: schema 5's layout is schema 4's,
    version 5 only redacts again) as schema 4 and write ``statements`` raw, as schema-4 code
    wrote what it did not redact (call arguments, formats it did not know), past the boundary."""
    statements = [("PRAGMA user_version = 4", []), *statements]
    subprocess.run([sys.executable, "-c", _CRASHED_WRITER, str(path)], input=json.dumps(statements).encode(),
                   check=True, timeout=60)
    assert Path(f"{path}-wal").stat().st_size > 0


def _old_journal(path: Path) -> None:
    """A schema-4 journal: a turn whose task, answer, error, step, message, intent, receipt,
    decision and validation hold every sample, and a turn deleted after it held them (its pages
    free, as old code left them)."""
    from unstuck.store.journal import situation_to_json

    Journal(path).close()
    arguments = json.dumps({"token": _by_name("Stripe live secret key").text, "note": " ".join(ONE_LINE[:8])})
    every = "\n".join(s.text for s in SAMPLES)
    message = json.dumps({"role": "assistant", "content": f"I will use {' '.join(ONE_LINE[8:16])}",
                          "tool_calls": [["c1", "deploy", arguments]], "tool_call_id": None, "name": None})
    situation = situation_to_json(Situation(Kind.AUTH, "deploy", detail=" ".join(ONE_LINE[16:24])))
    turn = ("INSERT INTO turns (turn_id, task, status, unattended, guarded, started_at, answer, error) VALUES"
            " (?, ?, 'failed', 1, 1, 1.0, ?, ?)")
    _write_as_schema_4(path, [
        (turn, ["old-1", f"deploy with {ONE_LINE[0]}", f"done: {ONE_LINE[1]}", f"Authorization: Bearer {ONE_LINE[2]}"]),
        ("INSERT INTO steps VALUES ('old-1', 0, 'c1', 'deploy', ?, ?, 'deploy', 0, 0, 1, 0, 0, 0, ?, 'escalate',"
         " '[]', NULL, ?, 1.0, 0.5)", [arguments, hashlib.sha256(arguments.encode()).hexdigest()[:16], situation, every]),
        ("INSERT INTO messages VALUES ('old-1', 0, ?)", [message]),
        ("INSERT INTO intents (effect_ref, turn_id, step, call_id, reply_seq, tool, arguments, state, prepared_at,"
         " settled_at, receipt, settled_by, runner_host) VALUES ('old-1:0', 'old-1', 0, 'c1', 0, 'deploy', ?,"
         " 'committed', 1.0, 2.0, ?, 'call', ?)",
         [arguments, json.dumps({"ok": False, "content": every}), f"ci:{_by_name('npm access token').text}"]),
        ("INSERT INTO decisions VALUES ('old-1', 0, 'close', ?)", [ONE_LINE[24]]),
        ("INSERT INTO validations VALUES ('old-1', ?, 'failed', ?, 2.0)", [f"keys {ONE_LINE[25]}", ONE_LINE[26]]),
        (turn, ["gone-1", "\n".join(ONE_LINE) * 3, every, every]),
        ("DELETE FROM turns WHERE turn_id = 'gone-1'", []),
    ])


def _old_lessons(path: Path) -> None:
    """A schema-4 lesson store: a lesson whose every text column holds samples (its FTS segments
    too), and one invalidated."""
    LessonStore(path).close()
    insert = ("INSERT INTO knowledge (domain, tool, subject, kind, fingerprint, unblock, probe, content, confidence,"
              " created_at, last_verified_at, invalidated_at, source, metadata, host)"
              " VALUES ('', 'deploy', ?, 'auth', 'deploy 1.0', ?, ?, ?, 0.5, 1.0, 1.0, ?, 'declared', ?, ?)")
    _write_as_schema_4(path, [
        (insert, [f"deploy@{_by_name('URL userinfo password').text}",
                  f"deploy login --token {_by_name('GitHub personal access token (classic)').text}",
                  json.dumps({"tool": "deploy_check", "args": {"token": _by_name("npm access token").text}}),
                  "\n".join(s.text for s in SAMPLES), None,
                  json.dumps({"api_key": _by_name("SendGrid API key").text, "seen": ONE_LINE[10:14]}), "ci"]),
        (insert, ["deploy", "deploy login", None, f"refused {' '.join(ONE_LINE[14:30])}", 2.0, "{}", ONE_LINE[30]]),
    ])


def _every_row_of(path: Path) -> str:
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(f"{t}: {db.execute(f'SELECT * FROM {t}').fetchall()!r}" for t in tables)


def _read_the_stores(cli: Cli, journal: Path, lessons: Path) -> None:
    """``unstuck journal``, ``lessons`` and ``report`` on the stores, each with what it shows."""
    listing, shown, _, lessons_listed, found, *_ = cli.each(  # they only read: at once (Cli.each)
        ("journal", "list", "--journal", str(journal)),
        ("journal", "show", "old-1", "--journal", str(journal), "--json"),
        ("journal", "show", "old-1", "--journal", str(journal)),
        ("lessons", "list", "--store", str(lessons), "--all", "--json"),
        ("lessons", "search", "refused", "--store", str(lessons), "--json"),
        ("report", "--journal", str(journal), "--json", "-"),
        ("report", "--journal", str(journal), "--html", str(cli.out / "report.html")))
    assert "old-1" in listing.out
    assert json.loads(shown.out)["steps"] and "***" in shown.out  # the rows are shown, masked
    listed = json.loads(lessons_listed.out)
    assert len(listed) == 2
    assert "***" in found.out
    cli.each(*[("lessons", "show", str(lesson["id"]), "--store", str(lessons)) for lesson in listed])


def test_a_store_migrated_from_schema_4_keeps_no_seeded_secret_in_any_file_its_backup_rows_or_what_the_cli_shows(
        tmp_path: Path) -> None:
    """Issue 23: a migration redacts old rows; the backup it keeps (``.schema4.bak``), the store's
    own pages (free ones too), its ``-wal`` and ``-shm``, and every row keep none of what it
    redacts, and the CLI shows none, before or after the migration."""
    (tmp_path / "cli").mkdir()
    cli = Cli(tmp_path / "cli")
    folder = tmp_path / "stores"
    folder.mkdir()
    journal, lessons = folder / "journal.db", folder / "lessons.db"
    _old_journal(journal)
    _old_lessons(lessons)
    before = leaks_in_files(folder)
    assert {"journal.db-wal", "lessons.db-wal"} <= before.keys()  # the old stores do hold the samples, as bytes
    _read_the_stores(cli, journal, lessons)  # read-only opens: shown redacted, nothing migrated
    assert cli.stream_leaks() == {}

    # another process has each store open meanwhile: the -wal is not removed when the migration's connection closes
    others = [sqlite3.connect(path, isolation_level=None) for path in (journal, lessons)]
    try:
        for other in others:
            other.execute("SELECT count(*) FROM sqlite_master").fetchone()  # SQLite opens the file at a first read
        with Journal(journal) as opened:
            assert opened.schema == 5
        with LessonStore(lessons) as store:
            assert store.schema == 5
            assert [x.id for x in store.search("refused")]  # the full-text index still finds the lesson, as kept
        assert Path(f"{journal}-wal").exists() and Path(f"{lessons}-shm").exists()
        backups = {p.name for p in folder.iterdir() if ".bak" in p.name}
        assert backups == {"journal.db.schema4.bak", "lessons.db.schema4.bak"}
        assert all((folder / name).stat().st_mode & 0o777 == 0o600 for name in backups)
        assert leaks_in_files(folder) == {}  # every file's bytes: the stores, -wal, -shm, the backups
    finally:
        for other in others:
            other.close()
    for path in (journal, lessons, *(folder / name for name in backups)):
        rows = _every_row_of(path)
        assert "***" in rows and leaks(rows) == []
    with sqlite3.connect(folder / "journal.db.schema4.bak") as backup:
        assert backup.execute("PRAGMA user_version").fetchone()[0] == 4
        ((arguments, digest),) = backup.execute("SELECT arguments, arguments_digest FROM steps").fetchall()
    assert digest == hashlib.sha256(arguments.encode()).hexdigest()[:16]  # of the arguments as kept, not the secret's

    _read_the_stores(cli, journal, lessons)
    assert cli.stream_leaks() == {}
    assert leaks_in_files(tmp_path) == {}
