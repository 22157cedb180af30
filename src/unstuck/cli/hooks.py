"""``unstuck hooks``, ``unstuck serve`` and ``unstuck answer``: unstuck inside the coding agents
people run (Claude Code, Codex CLI, Gemini CLI) through their own hooks (issue 26).
Internal: not a supported import path (docs/reference/index.md lists those that are).

* ``unstuck hooks install|uninstall AGENT [--user|--project] [--unattended] [--fail-closed]
  [--dry-run]``: unstuck's hook entries merged into the agent's settings file, the user's own
  entries kept byte for byte (:mod:`unstuck.integrations.coding_agents.install`), and the hook
  client written to ``bin/unstuck-hook`` in the user data folder;
  ``unstuck hooks status [AGENT]``: what is installed where, and whether the guard server answers;
* ``unstuck serve [--detach] [--stop] [--restart]``: the guard server
  (:mod:`unstuck.integrations.coding_agents.server`), journaling into and learning from the
  stores ``--store`` names (:mod:`unstuck.cli.stores`);
* ``unstuck answer [SESSION done|skip|stop] [--watch]``: the open questions, the user's
  answer to one, or each question as it is asked.

Internal to the command line: not a supported API.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Annotated

import typer

from unstuck.cli.common import EXIT_BLOCKED, EXIT_FAILED, STORE_EXIT_CODES, JsonOption, console, err_console, fail
from unstuck.cli.common import shown as _shown
from unstuck.cli.output import echo_json
from unstuck.cli.stores import StoreOption

__all__ = ["answer_command", "client_path", "hooks_app", "install_command", "serve_command", "status_command",
           "uninstall_command"]

hooks_app = typer.Typer(epilog=STORE_EXIT_CODES, no_args_is_help=True,
                        help="Guard Claude Code, Codex CLI and Gemini CLI through their own hooks.")

AgentArgument = Annotated[str, typer.Argument(help="claude-code, codex or gemini.", show_default=False)]
ScopeOption = Annotated[bool, typer.Option(
    "--user/--project", help="The user's settings (under $HOME) or this project's (under the working folder).")]
SocketOption = Annotated[Path | None, typer.Option(
    "--socket", help="The guard server's unix socket (default: $UNSTUCK_GUARD_SOCKET, else guard.sock in "
                     "$XDG_RUNTIME_DIR/unstuck).", show_default=False)]


def _socket(given: Path | None) -> Path:
    from unstuck.integrations.coding_agents.server import socket_path

    return given if given is not None else socket_path()


def _agent(name: str) -> object:
    from unstuck.integrations.coding_agents.events import Agent
    from unstuck.integrations.coding_agents.sessions import hooks_for

    try:
        agent = Agent(name)
    except ValueError:
        raise fail(f"unknown agent {name!r}; known: {', '.join(a.value for a in Agent)}") from None
    try:
        return hooks_for(agent)
    except LookupError as exc:
        raise fail(str(exc)) from None


def _data_folder() -> Path:
    from unstuck.store.urls import default_store_folder

    return default_store_folder()


def client_path() -> Path:
    """Where ``unstuck hooks install`` writes the hook client: ``bin/unstuck-hook`` in the user
    data folder."""
    from unstuck.integrations.coding_agents.client import CLIENT_NAME

    return _data_folder() / "bin" / CLIENT_NAME


def _places(hooks: object, user: bool, project_dir: Path | None) -> Path:
    from unstuck.integrations.coding_agents.events import AgentHooks

    assert isinstance(hooks, AgentHooks)
    home = Path(os.environ.get("HOME") or Path.home())
    return hooks.settings_path("user" if user else "project", home, (project_dir or Path.cwd()).resolve())


ProjectDirOption = Annotated[Path | None, typer.Option(
    "--project-dir", help="The project folder for --project (default: the working folder).", show_default=False)]


@hooks_app.command("install")
def install_command(
    agent: AgentArgument,
    user: ScopeOption = True,
    unattended: Annotated[bool, typer.Option(
        "--unattended", help="Nobody answers in these sessions: interactive calls are refused and a blocker "
                             "stops the session (otherwise as the agent or a CI variable says).")] = False,
    fail_closed: Annotated[bool, typer.Option(
        "--fail-closed", help="Refuse the call when the guard server does not answer (default: let it run).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the change; write nothing.")] = False,
    project_dir: ProjectDirOption = None,
    socket: SocketOption = None,
) -> None:
    """Write unstuck's hook entries into the agent's settings, keeping the user's own."""
    from unstuck.integrations.coding_agents.client import write_client
    from unstuck.integrations.coding_agents.events import AgentHooks
    from unstuck.integrations.coding_agents.install import Receipts, SettingsError, install_change, write_change

    hooks = _agent(agent)
    assert isinstance(hooks, AgentHooks)
    path = _places(hooks, user, project_dir)
    client = client_path()
    words = [shlex.quote(str(client))]
    if unattended:
        words.append("--unattended")
    if fail_closed:
        words.append("--fail-closed")
    words.append(hooks.agent.value)
    try:
        change = install_change(hooks, path, " ".join(words))
    except SettingsError as exc:
        raise fail(str(exc)) from None
    if dry_run:
        console.print(change.diff() or f"{path}: nothing to change", markup=False, highlight=False, end="")
        return
    write_client(client, _socket(socket), pythonpath=os.environ.get("PYTHONPATH") or None)
    write_change(change)
    Receipts(_data_folder() / "hooks").record(path, hooks.agent.value, change.created)
    for line in change.done or ("unstuck's hooks were already installed",):
        console.print(f"{_shown(str(path))}: {line}", highlight=False)
    console.print(f"hook client: {_shown(str(client))}", highlight=False)


@hooks_app.command("uninstall")
def uninstall_command(
    agent: AgentArgument,
    user: ScopeOption = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the change; write nothing.")] = False,
    project_dir: ProjectDirOption = None,
) -> None:
    """Remove exactly unstuck's hook entries from the agent's settings."""
    from unstuck.integrations.coding_agents.events import AgentHooks
    from unstuck.integrations.coding_agents.install import Receipts, SettingsError, uninstall_change, write_change

    hooks = _agent(agent)
    assert isinstance(hooks, AgentHooks)
    path = _places(hooks, user, project_dir)
    receipts = Receipts(_data_folder() / "hooks")
    try:
        change = uninstall_change(hooks, path, receipts.created(path))
    except SettingsError as exc:
        raise fail(str(exc)) from None
    if dry_run:
        console.print(change.diff() or f"{path}: nothing to change", markup=False, highlight=False, end="")
        return
    write_change(change)
    receipts.forget(path)
    for line in change.done or ("no unstuck hooks were installed",):
        console.print(f"{_shown(str(path))}: {line}", highlight=False)


@hooks_app.command("status")
def status_command(
    agent: Annotated[str | None, typer.Argument(help="claude-code, codex or gemini (default: all).",
                                                show_default=False)] = None,
    project_dir: ProjectDirOption = None,
    socket: SocketOption = None,
    as_json: JsonOption = False,
) -> None:
    """Say what is installed where, and whether the guard server answers."""
    from unstuck.integrations.coding_agents.client import ping
    from unstuck.integrations.coding_agents.events import Agent, AgentHooks
    from unstuck.integrations.coding_agents.install import SettingsError, own_groups
    from unstuck.integrations.coding_agents.sessions import hooks_for

    names = [agent] if agent is not None else [a.value for a in Agent]
    rows: list[dict[str, object]] = []
    for name in names:
        if agent is not None:
            hooks = _agent(name)
        else:
            try:
                hooks = hooks_for(Agent(name))
            except LookupError:
                rows.append({"agent": name, "scope": "-", "settings": None, "installed": None,
                             "note": "not in this build"})
                continue
        assert isinstance(hooks, AgentHooks)
        for user in (True, False):
            path = _places(hooks, user, project_dir)
            row: dict[str, object] = {"agent": name, "scope": "user" if user else "project", "settings": str(path)}
            try:
                text = path.read_text(encoding="utf-8")
                row["installed"] = own_groups(hooks, text, path)
            except FileNotFoundError:
                row["installed"] = {}
            except (SettingsError, UnicodeDecodeError, OSError) as exc:
                row["installed"], row["note"] = None, str(exc)
            rows.append(row)
    where = _socket(socket)
    server = ping(where)
    client = client_path()
    document = {"hooks": rows, "client": str(client), "client_present": client.is_file(), "socket": str(where),
                "server": server}
    if as_json:
        echo_json(document)
        return
    for row in rows:
        installed = row.get("installed")
        what = ("installed: " + ", ".join(installed) if isinstance(installed, dict) and installed
                else "not installed" if installed == {} else f"unreadable: {row.get('note', '')}")
        console.print(f"{row['agent']} ({row['scope']}): {what}" + (f" — {row['settings']}" if row['settings'] else ""),
                      highlight=False, markup=False)
    console.print(f"hook client: {client}{'' if client.is_file() else ' (not written yet)'}", highlight=False,
                  markup=False)
    if server is None:
        console.print(f"guard server: not running on {where} (the first hook starts it)", highlight=False,
                      markup=False)
    else:
        console.print(f"guard server: answering on {where} (pid {server['pid']}, {server['sessions']} session(s))",
                      highlight=False, markup=False)


def serve_command(
    socket: SocketOption = None,
    store: StoreOption = None,
    detach: Annotated[bool, typer.Option("--detach", help="Start it in the background and return once it answers.")
                      ] = False,
    stop: Annotated[bool, typer.Option("--stop", help="End the running server.")] = False,
    restart: Annotated[bool, typer.Option("--restart", help="End the running server (even a hung one), then start.")
                       ] = False,
    idle_exit: Annotated[float, typer.Option("--idle-exit", metavar="SECONDS",
                                             help="Exit after this long without a request.")] = 600.0,
    ask_wait: Annotated[float, typer.Option("--ask-wait", metavar="SECONDS",
                                            help="How long an attended session waits for its user's answer.")
                        ] = 300.0,
) -> None:
    """Run the guard server the coding agents' hooks talk to (one per user)."""
    from unstuck.integrations.coding_agents.client import start_detached, stop_server

    where = _socket(socket)
    if stop or restart:
        stopped = stop_server(where)
        if stop:
            console.print(f"{'stopped the' if stopped else 'no'} guard server on {where}", highlight=False,
                          markup=False)
            return
    if detach or restart:
        options = ["--idle-exit", f"{idle_exit:g}", "--ask-wait", f"{ask_wait:g}"]
        if store is not None:
            options += ["--store", store]
        try:
            found = start_detached(where, options)
        except RuntimeError as exc:
            raise fail(str(exc), EXIT_FAILED) from None
        console.print(f"guard server: pid {found['pid']} on {where}", highlight=False, markup=False)
        return
    _serve(where, store, idle_exit, ask_wait)


def _serve(where: Path, store: str | None, idle_exit: float, ask_wait: float) -> None:
    from unstuck.cli.stores import role_store, shared_location
    from unstuck.integrations.coding_agents.server import AlreadyRunning, GuardServer, ServerFiles
    from unstuck.integrations.coding_agents.sessions import SessionKeeper
    from unstuck.store.journal import Journal, JournalError
    from unstuck.store.lessons import LessonStore, LessonStoreError
    from unstuck.store.urls import StoreRole

    place = shared_location(store)
    try:
        journal = Journal(role_store(StoreRole.JOURNAL, place, named=False))
        lessons = LessonStore(role_store(StoreRole.LESSONS, place, named=False))
    except (JournalError, LessonStoreError, OSError) as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    keeper = SessionKeeper(journal, lessons, ask_wait_s=ask_wait)
    keeper.warm()  # before it listens: the first hook is answered as fast as the next
    server = GuardServer(ServerFiles(where), keeper, idle_s=idle_exit)
    try:
        server.bind()
    except AlreadyRunning as exc:
        journal.close()
        lessons.close()
        err_console.print(f"note: {exc}", highlight=False, markup=False)
        return
    server.install_signals()
    err_console.print(f"unstuck guard server: pid {os.getpid()} on {where}", highlight=False, markup=False)
    try:
        server.serve()
    finally:
        journal.close()
        lessons.close()


#: The words ``unstuck answer`` takes: "I've done it" (runs the blocker's check), "Skip it", "Stop".
ANSWER_WORDS = ("done", "skip", "stop")


def answer_command(
    session: Annotated[str | None, typer.Argument(help="The session (its id, or its journal turn id).",
                                                  show_default=False)] = None,
    answer: Annotated[str | None, typer.Argument(help="done (runs the blocker's check), skip or stop.",
                                                 show_default=False)] = None,
    watch: Annotated[bool, typer.Option("--watch", help="Print each question as it is asked (until Ctrl-C).")
                     ] = False,
    socket: SocketOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a guarded coding-agent session's question (or list the open ones)."""
    import httpx

    from unstuck.integrations.coding_agents.client import post

    where = _socket(socket)
    if not where.exists():
        raise fail(f"no guard server on {where}")
    transport = httpx.HTTPTransport(uds=os.fspath(where))
    if watch:
        _watch(transport)
        return
    if session is None or answer is None:
        with httpx.Client(transport=transport, base_url="http://unstuck", timeout=10.0) as client:
            sessions = client.get("/sessions").json()
        open_ones = [s for s in sessions if s.get("question")]
        if as_json:
            echo_json(open_ones)
            return
        if not open_ones:
            console.print("no open questions", highlight=False)
        for s in open_ones:
            console.print(f"{s['agent']} session {s['session']} (turn {s['turn']}):", highlight=False, markup=False)
            console.print(s["question"], highlight=False, markup=False, soft_wrap=True)
        return
    from unstuck.integrations.common import read_answer

    try:
        read_answer(answer)  # what the server takes; said here in the words this command documents
    except ValueError:
        raise fail(f"unknown answer {answer!r}: give one of {', '.join(ANSWER_WORDS)}") from None
    try:
        status, reply = post(where, f"/answer/{session}", {"answer": answer})
    except httpx.HTTPError as exc:
        raise fail(f"the guard server on {where} did not answer: {exc}", EXIT_FAILED) from None
    if status != 200:
        raise fail(reply.get("error", str(reply)) if isinstance(reply, dict) else str(reply))
    if as_json:
        echo_json(reply)
    else:
        console.print(reply.get("note", ""), highlight=False, markup=False, soft_wrap=True)
    if reply.get("still_blocked"):
        raise typer.Exit(EXIT_BLOCKED)


def _watch(transport: object) -> None:
    import httpx

    assert isinstance(transport, httpx.HTTPTransport)
    with httpx.Client(transport=transport, base_url="http://unstuck", timeout=None) as client, \
            client.stream("GET", "/events") as stream:
        for line in stream.iter_lines():
            if not line.startswith("data: "):
                continue
            item = json.loads(line[len("data: "):])
            if item.get("event") == "escalation":
                console.print(f"{item['agent']} session {item['session']} asks:", highlight=False, markup=False)
                console.print(item["text"], highlight=False, markup=False, soft_wrap=True)
                console.print(f"answer with: unstuck answer {item['session']} done|skip|stop", highlight=False,
                              markup=False)
            elif item.get("event") == "answered":
                console.print(f"{item['session']}: answered {item['answer']}", highlight=False, markup=False)
