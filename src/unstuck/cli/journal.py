"""``unstuck journal``: list, show and settle journaled turns (a thin layer over
:mod:`unstuck.store.journal`). The journal is the one ``--store`` names (:mod:`unstuck.cli.stores`).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from unstuck.cli.common import STORE_EXIT_CODES, JsonOption, console, fail
from unstuck.cli.common import shown as _shown
from unstuck.cli.output import echo_json
from unstuck.cli.stores import JournalOption, StoreOption, deprecated, journal_store
from unstuck.core.readers import ReadError, parse_json

if TYPE_CHECKING:  # the journal (and the policy it records) loads only when a journal command runs
    from unstuck.store.journal import Journal, Lease

__all__ = ["journal_app"]

journal_app = typer.Typer(
    epilog=STORE_EXIT_CODES, help="The turn journal: steps, effect intents, receipts, status.", no_args_is_help=True)


def _open(store: str | None, old: str | None, *, readonly: bool = True) -> Journal:
    from unstuck.store.journal import Journal, JournalError

    if old is not None:
        deprecated("--journal")
    url = journal_store(store, old)
    if url.path is not None and not url.path.exists():
        raise fail(f"no journal at {url.path}")
    try:
        return Journal(url, readonly=readonly)
    except JournalError as exc:
        raise fail(str(exc)) from None


def _arguments(text: str) -> object:
    """A call's arguments as JSON when they are JSON (depth-limited, :mod:`unstuck.core.readers`),
    else the text itself: a model can send arguments that are not JSON, and the journal keeps
    them as sent."""
    try:
        return parse_json(text, where="arguments")
    except ReadError:
        return text


def _damaged(journal: Journal, exc: Exception) -> typer.Exit:
    return fail(f"{journal.where} is damaged: {exc}")


@journal_app.command("list", epilog=STORE_EXIT_CODES)
def _list(store: StoreOption = None, as_json: JsonOption = False, journal: JournalOption = None) -> None:
    """List the journal's turns, newest first."""
    from unstuck.store.journal import IntentState, JournalError

    with _open(store, journal) as j:
        try:
            turns = j.turns()
            rows = [(t, j.intents(t.turn_id), j.lease(t.turn_id) if j.schema >= 3 else None) for t in turns]
        except (JournalError, ValueError) as exc:
            raise _damaged(j, exc) from None
    if as_json:
        echo_json([
            {"turn": t.turn_id, "task": t.task, "status": t.status, "steps": t.checkpoint_step + 1,
             "intents": len(intents), "held": sum(i.state is IntentState.HELD for i in intents),
             "owner": None if lease is None or lease.owner_pid is None else {
                 "host": lease.owner_host, "pid": lease.owner_pid,
                 "lease_left_s": None if lease.expires_at is None else round(lease.expires_at - lease.now, 1)}}
            for t, intents, lease in rows
        ])
        return
    table = Table("turn", "status", "steps", "intents", "held", "owner", "task")
    for t, intents, lease in rows:
        held = sum(i.state is IntentState.HELD for i in intents)
        table.add_row(t.turn_id, t.status, str(t.checkpoint_step + 1), str(len(intents)), str(held),
                      _owner(lease), _shown(t.task[:70]))
    console.print(table)


def _owner(lease: Lease | None) -> str:
    """Who holds a turn's lease, for the list: ``pid 4242 on runner-7, 21 s left`` (the host's
    ``UNSTUCK_HOST_ID``, else ``boot`` and the start of its boot id), ``… ran out 3 s ago``
    (resumable), or ``-`` (nobody: the turn ended or let go)."""
    if lease is None or lease.owner_pid is None:
        return "-"
    named = lease.owner_host or "?"  # UNSTUCK_HOST_ID@boot/pid-namespace, or boot/pid-namespace
    host = _shown(named.split("@", 1)[0][:24] if "@" in named else f"boot {named[:8]}")
    if lease.expires_at is None:
        return f"pid {lease.owner_pid} on {host}"
    left = lease.expires_at - lease.now
    state = f"{left:.0f} s left" if left > 0 else f"ran out {-left:.0f} s ago"
    return f"pid {lease.owner_pid} on {host}, {state}"


@journal_app.command("show", epilog=STORE_EXIT_CODES)
def _show(turn: Annotated[str, typer.Argument(help="A turn id (see `unstuck journal list`).")],
          store: StoreOption = None, as_json: JsonOption = False, journal: JournalOption = None) -> None:
    """Show one turn: its steps, effect intents and validations."""
    from unstuck.store.journal import JournalError

    with _open(store, journal) as j:
        try:
            header = j.turn(turn)
        except JournalError as exc:
            raise fail(str(exc)) from None
        try:
            steps, intents, validations = j.steps(turn), j.intents(turn), j.validations(turn)
        except (JournalError, ValueError) as exc:
            raise _damaged(j, exc) from None
    if as_json:
        echo_json({
            "turn": header.turn_id, "task": header.task, "status": header.status, "error": header.error,
            "steps": [{"index": s.index, "tool": s.call.tool, "arguments": _arguments(s.call.arguments_json),
                       "subject": s.subject, "ok": s.ok, "kind": s.situation.kind.value if s.situation else None,
                       "decision": s.decision.value, "injected": s.injected} for s in steps],
            "intents": [{"effect_ref": i.effect_ref, "tool": i.tool, "arguments": _arguments(i.arguments_json),
                         "state": i.state.value, "settled_by": i.settled_by} for i in intents],
            "validations": [{"name": n, "verdict": v, "evidence": e} for n, v, e in validations],
        })
        return
    console.print(f"turn {header.turn_id} · {header.status} · {_shown(header.task)}")
    if header.error:
        console.print(f"error: {_shown(header.error)}")
    table = Table("step", "tool", "subject", "ok", "situation", "decision", "arguments", title="steps")
    for s in steps:
        kind = s.situation.kind.value if s.situation else "-"
        table.add_row(str(s.index), s.call.tool, _shown(s.subject), "yes" if s.ok else "no", kind, s.decision.value,
                      _shown(s.call.arguments_json[:60]) + (" [injected]" if s.injected else ""))
    console.print(table)
    if intents:
        itable = Table("effect_ref", "tool", "state", "settled by", "arguments", title="effect intents")
        for i in intents:
            itable.add_row(i.effect_ref, i.tool, i.state.value, _shown(i.settled_by or "-"),
                           _shown(i.arguments_json[:60]))
        console.print(itable)
    for name, verdict, evidence in validations:
        console.print(f"validator {_shown(name)}: {verdict}" + (f" ({_shown(evidence)})" if evidence else ""))


@journal_app.command("resume", epilog=STORE_EXIT_CODES)
def _resume(
    turn: Annotated[str, typer.Argument(help="A held or crashed turn's id.")],
    store: StoreOption = None,
    committed: Annotated[list[str] | None, typer.Option(
        "--committed", help="An effect_ref whose effect you checked did happen (repeatable).")] = None,
    absent: Annotated[list[str] | None, typer.Option(
        "--absent", help="An effect_ref whose effect you checked did not happen (repeatable).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Settle although the turn's owner runs in another machine or pid namespace "
        "(only once you know it is gone).")] = False,
    journal: JournalOption = None,
) -> None:
    """Settle a turn's unsettled effect intents as you decide, then say what is left.

    unstuck never guesses whether an interrupted side effect happened: a person (or a
    resolver in code) says so. `--committed` records it as done, so it is never repeated;
    `--absent` lets the program that owns the tools run it again when it resumes the turn
    (`unstuck.loop.resume.resume_turn`). Refused while the turn's owner holds a live lease (it
    renews it while it runs, and may still be making the effect); once the lease has run out,
    or with --force once you know the owner is gone.
    """
    from unstuck.store.journal import IntentState, JournalError

    both = set(committed or []) & set(absent or [])
    if both:
        raise fail(f"{', '.join(sorted(both))} cannot be both committed and absent")
    with _open(store, journal, readonly=False) as j:
        try:
            header = j.turn(turn)
        except JournalError as exc:
            raise fail(str(exc)) from None
        open_intents = {i.effect_ref: i for i in j.intents(turn) if i.state is not IntentState.COMMITTED}
        for ref in [*(committed or []), *(absent or [])]:
            if ref not in open_intents:
                known = ", ".join(open_intents) or "none"
                raise fail(f"{ref} is not an unsettled intent of {turn}; unsettled: {known}")
        if header.status in ("done", "blocked", "failed") and not open_intents:
            console.print(f"turn {turn} ended {header.status}; it has no unsettled effect intent, nothing to resume")
            return
        committed, absent = sorted(set(committed or [])), sorted(set(absent or []))
        try:
            j.settle(turn, committed=committed, absent=absent, force=force)
        except JournalError as exc:
            raise fail(str(exc)) from None
        left = [i for i in j.intents(turn) if i.state is not IntentState.COMMITTED]
    console.print(f"turn {turn} ({header.status}): {len(committed or [])} marked committed, "
                  f"{len(absent or [])} marked absent")
    for i in left:
        console.print(f"  {i.effect_ref} {i.tool} {_shown(i.arguments_json[:60])}: {i.state.value}"
                      + (f" ({_shown(i.settled_by)})" if i.settled_by else ""))
    if not left:
        console.print("every effect intent is settled; the program that owns the tools can resume the turn")
