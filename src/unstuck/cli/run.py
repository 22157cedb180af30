"""``unstuck run``: one scenario turn, headless or attended, journaled and learning in the
stores ``--store`` names (:mod:`unstuck.cli.stores`); its outcome, its escalation, its exit status.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from unstuck.cli.common import EXIT_BLOCKED, EXIT_FAILED, console, err_console, fail
from unstuck.cli.scenarios import TrustedDigestsOption, TrustOption, check_trust, chosen_scenarios, scenario_paths
from unstuck.cli.stores import StoreOption
from unstuck.core.text import for_terminal
from unstuck.evals.agents import AGENTS

if TYPE_CHECKING:
    from unstuck.store.events import Event
    from unstuck.store.urls import StoreURL

__all__ = ["run_command"]


def _run_stores(journal: str | None, lessons: str | None,
                store: str | None) -> tuple[StoreURL | None, StoreURL | None]:
    """The journal and lesson store of ``unstuck run``. With neither deprecated option, both in
    the one place (:func:`unstuck.cli.stores.shared_location`: ``--store``, else
    ``UNSTUCK_STORE``, else the user data folder). With ``--journal`` or ``--lessons``, as
    before: each option given, else the shared location of ``--store`` or ``UNSTUCK_STORE``, else
    none. A bad URL is a usage error naming its option."""
    from unstuck.cli.stores import deprecated, role_store, shared_location
    from unstuck.store.urls import StoreRole, StoreURLError, parse_store_url, store_for, store_url_for

    if journal is None and lessons is None:
        place = shared_location(store)
        return role_store(StoreRole.JOURNAL, place, named=False), role_store(StoreRole.LESSONS, place, named=False)
    for old, given in (("--journal", journal), ("--lessons", lessons)):
        if given is not None:
            deprecated(old)
    chosen: list[StoreURL | None] = []
    for role, given, option in ((StoreRole.JOURNAL, journal, "--journal"), (StoreRole.LESSONS, lessons, "--lessons")):
        try:
            if given is not None:
                chosen.append(parse_store_url(given))
            elif store is not None:
                option = "--store"
                chosen.append(store_url_for(role, parse_store_url(store)))
            else:
                option = ""  # store_for's message names ENV_VAR
                chosen.append(store_for(role))
        except StoreURLError as exc:
            raise fail(f"{option}: {exc}" if option else str(exc)) from None
    return chosen[0], chosen[1]



def run_command(
    scenario: Annotated[str, typer.Argument(
        help="A scenario name (see `unstuck scenarios`) or a scenario file (.yaml, .yml).")],
    agent: Annotated[str | None, typer.Option(
        help="Reference agent: " + ", ".join(AGENTS) + " (default: the scenario's first agent)",
        show_default=False)] = None,
    unguarded: Annotated[bool, typer.Option("--unguarded", help="Run the bare loop, no policy.")] = False,
    attended: Annotated[
        bool | None,
        typer.Option("--attended/--unattended", help="Whether a person can answer (default: a terminal that can ask)."),
    ] = None,
    scenario_dir: Annotated[Path | None, typer.Option(
        help="Deprecated: also load the scenarios in this folder.", hidden=True)] = None,
    sandbox: Annotated[Path | None, typer.Option(help="Build the sandbox in this folder and keep it.")] = None,
    events: Annotated[Path | None, typer.Option(help="Append the turn's events here as JSON lines.")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the run's metrics as JSON here.")] = None,
    store: StoreOption = None,
    journal: Annotated[str | None, typer.Option(
        metavar="URL", hidden=True, help="Deprecated: use --store. Record the turn in this journal only.")] = None,
    lessons: Annotated[str | None, typer.Option(
        metavar="URL", hidden=True, help="Deprecated: use --store. Use and update this lesson store only.")] = None,
    trust: TrustOption = False,
    trusted_digests: TrustedDigestsOption = None,
) -> None:
    """Run one scenario turn headless (or attended) and print its outcome and escalation."""
    from unstuck.evals.runner import run_scenario, write_json
    from unstuck.loop.presence import ConsoleAsker, console_can_ask
    from unstuck.loop.turn import TurnStatus
    from unstuck.processes.containment import install_containment
    from unstuck.store.journal import Journal, JournalError
    from unstuck.store.lessons import LessonStore, LessonStoreError

    as_file = Path(scenario)
    extra = scenario_paths([as_file] if as_file.suffix in (".yaml", ".yml") or as_file.is_file() else [], scenario_dir)
    if as_file in extra:
        from unstuck.evals.scenarios import ScenarioError, load_scenario

        try:
            scenario = load_scenario(as_file).name
        except ScenarioError as exc:
            raise fail(str(exc)) from exc
    (chosen,) = chosen_scenarios(extra, [scenario])
    check_trust([chosen], trust=trust, digests=trusted_digests, attended=attended)
    if agent is None:
        agent = chosen.agents[0]
    if agent not in AGENTS:
        raise fail(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    if agent not in chosen.agents:
        raise fail(f"scenario {chosen.name} ({chosen.source}) does not list the agent {agent}; "
                    f"it lists: {', '.join(chosen.agents)}")
    sandbox = sandbox.resolve() if sandbox is not None else None  # the tools run inside it: a relative path would move
    if sandbox is not None and sandbox.exists() and (not sandbox.is_dir() or any(sandbox.iterdir())):
        raise fail(f"--sandbox {sandbox}: must be a new or empty directory (the scenario builds its state there)")
    for option, path in (("--events", events), ("--json", json_path)):
        if path is not None and path.is_dir():
            raise fail(f"{option} {path}: is a directory; give a file path")
    is_attended = console_can_ask() if attended is None else attended
    try:
        sink = _EventsFile(events) if events is not None else None
    except OSError as exc:
        raise fail(f"--events {events}: {exc.strerror or exc}", EXIT_FAILED) from exc
    journal_url, lessons_url = _run_stores(journal, lessons, store)
    try:  # the stores' errors name the store (a URL's password masked)
        journal_store = Journal(journal_url) if journal_url is not None else None
    except (JournalError, OSError) as exc:
        raise fail(str(exc) if isinstance(exc, JournalError) else f"{journal_url}: {exc}", EXIT_FAILED) from exc
    try:
        memory = LessonStore(lessons_url) if lessons_url is not None else None
    except (LessonStoreError, OSError) as exc:
        if journal_store is not None:
            journal_store.close()
        raise fail(str(exc) if isinstance(exc, LessonStoreError) else f"{lessons_url}: {exc}",
                    EXIT_FAILED) from exc
    install_containment()  # tool processes end with this command, SIGTERM, SIGINT or SIGKILL (issue 12)
    try:
        result, metrics = run_scenario(
            chosen, agent, guarded=not unguarded, unattended=not is_attended,
            asker=ConsoleAsker(console) if is_attended else None, events=sink,
            sandbox_root=sandbox, keep_sandbox=sandbox is not None, journal=journal_store, lessons=memory,
        )
    except OSError as exc:
        where = (f"--events {events}: " if sink is not None and exc.filename == sink.path
                 else f"{exc.filename}: " if exc.filename else "could not build the sandbox: ")
        raise fail(f"{where}{exc.strerror or exc}", EXIT_FAILED) from exc
    except (JournalError, LessonStoreError) as exc:  # a store damaged, full or replaced during the turn
        raise fail(str(exc), EXIT_FAILED) from exc
    finally:
        if sink is not None:
            sink.close()
        if journal_store is not None:
            journal_store.close()
        if memory is not None:
            memory.close()
    for failure in memory.failures if memory is not None else ():  # the turn went on without its lessons
        err_console.print(f"[red]error:[/red] {'--lessons' if lessons is not None else 'lessons'}: {escape(failure)}")
    if journal_url is not None:
        where = str(journal_url.path) if journal_url.path is not None else journal_url.shown
        console.print(f"journaled as turn {result.turn_id} in {escape(where)}", highlight=False)
    retries = sum(1 for s in result.steps if s.retry)
    console.print(
        f"turn: {result.status.value} · task: {metrics.outcome} · {result.tool_calls} tool call(s)"
        + (f" · validator: {metrics.validator}" if metrics.validator else "")
        + (f" · {metrics.violations} forbidden call(s)" if metrics.violations else "")
        + (f" (+{retries} retried by unstuck)" if retries else ""),
        highlight=False,
    )
    if result.escalation is not None:
        if not is_attended:  # an attended user has just read it in the question
            console.print(for_terminal(result.escalation.text), markup=False, highlight=False, soft_wrap=True)
        if result.cost_line:
            console.print(result.cost_line, highlight=False)
    elif result.answer:
        console.print(for_terminal(result.answer), markup=False, highlight=False, soft_wrap=True)
    if result.error:
        err_console.print(f"[red]error:[/red] {escape(for_terminal(result.error))}")
    if json_path is not None:
        write_json([metrics], json_path)
    if result.status is TurnStatus.BLOCKED:
        raise typer.Exit(EXIT_BLOCKED)
    if (result.status is not TurnStatus.DONE or metrics.outcome != "done" or metrics.answered is False
            or metrics.validator == "failed" or metrics.violations or (memory is not None and memory.failures)):
        raise typer.Exit(EXIT_FAILED)



class _EventsFile:
    """A :class:`JsonLinesSink` whose write failures say they were the events file's (a
    full device is not a sandbox that could not be built)."""

    def __init__(self, path: Path) -> None:
        from unstuck.store.events import JsonLinesSink

        self._sink = JsonLinesSink(path)
        self.path = str(path)

    def emit(self, item: Event) -> None:
        try:
            self._sink.emit(item)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self.path) from exc

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the failed write was reported already
            self._sink.close()

