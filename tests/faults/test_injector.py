"""The injector: seeded, independent per return, balanced across families, compatible with the
call, and never rolling back the real effect."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from conftest import PlaybackModel
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind
from unstuck.core.tools import CommandOutput, Effect
from unstuck.faults.bank import Channel, FailureBank, FailureForm, Family, Provenance, family_of, load_bank
from unstuck.faults.injector import Injector, call_targets
from unstuck.loop.turn import run_turn
from unstuck.store.events import EventLog
from unstuck.toolkit.specs import Toolset, tool
from unstuck.toolkit.workspace import Workspace, standard_tools


def form(form_id: str, kind: Kind, tools: tuple[str, ...] = ("shell",), channel: Channel = Channel.EXIT) -> FailureForm:
    family = family_of(kind)
    assert family is not None
    return FailureForm(
        form_id, family, kind, tools, channel, False, f"{form_id} failed", Provenance("harvest", "test"),
        exit_code=1 if channel is Channel.EXIT else None,
        exception_type="OSError" if channel is Channel.EXCEPTION else None,
    )


def shell_tools(log: list[str]) -> Toolset:
    @tool(subject="shell", effect=Effect.WRITE)
    def run_command(command: str) -> CommandOutput:
        log.append(command)
        return CommandOutput(command, 0, "ran\n")

    return Toolset([run_command])


def test_rate_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="p_inj must be within"):
        Injector(1.5, bank=FailureBank([]))


def test_rate_zero_never_replaces_a_return() -> None:
    injector = Injector(0.0, bank=FailureBank([form("a", Kind.TIMEOUT)]))
    tools = injector.wrap(shell_tools([]))
    results = [tools["run_command"].invoke({"command": f"echo {i}"}) for i in range(200)]
    assert all(r.ok and r.injected is None for r in results) and injector.injections == []


def test_rate_one_replaces_every_return_and_the_real_call_still_happens() -> None:
    ran: list[str] = []
    injector = Injector(1.0, bank=FailureBank([form("a", Kind.TIMEOUT)]))
    tools = injector.wrap(shell_tools(ran))
    result = tools["run_command"].invoke({"command": "make deploy"})
    assert ran == ["make deploy"]  # a write reported as failed may have happened: a lost response
    assert (result.ok, result.injected, result.exit_code) == (False, "a", 1)
    assert "a failed" in result.content


def test_a_write_that_the_injector_reports_as_failed_left_its_file(tmp_path: Path) -> None:
    tools = Injector(1.0, seed=3, bank=load_bank()).wrap(standard_tools(Workspace(tmp_path)))
    result = tools["run_command"].invoke({"command": "echo shipped > release.txt"})
    assert not result.ok and result.injected is not None
    assert (tmp_path / "release.txt").read_text() == "shipped\n"


def test_the_same_seed_gives_the_same_injections_and_another_seed_others() -> None:
    bank = load_bank()

    def injected(seed: int) -> list[tuple[int, str]]:
        injector = Injector(0.3, seed=seed, bank=bank)
        tools = injector.wrap(shell_tools([]))
        for i in range(300):
            tools["run_command"].invoke({"command": "git status" if i % 2 else "gh repo view"})
        return [(i.call_index, i.form.id) for i in injector.injections]

    assert injected(7) == injected(7)
    assert injected(7) != injected(8)


def test_each_return_is_replaced_independently_at_the_given_rate() -> None:
    injector = Injector(0.3, seed=1, bank=FailureBank([form("a", Kind.TIMEOUT)]))
    tools = injector.wrap(shell_tools([]))
    for i in range(4000):
        tools["run_command"].invoke({"command": f"echo {i}"})
    share = len(injector.injections) / 4000
    assert abs(share - 0.3) < 0.036  # five standard deviations of a binomial(4000, 0.3) share
    gaps = Counter(b.call_index - a.call_index for a, b in itertools.pairwise(injector.injections))
    assert gaps[1] > 0  # back-to-back injections happen: no spacing rule between them


def test_draws_are_balanced_across_families_not_forms() -> None:
    # nine timeout forms and one network form: a draw per form would pick network 10% of the time
    forms = [form(f"t{i}", Kind.TIMEOUT) for i in range(9)] + [form("n", Kind.NETWORK)]
    injector = Injector(1.0, seed=5, bank=FailureBank(forms))
    families = Counter(injector.draw({"shell"}, Channel.EXIT).family for _ in range(4000))  # type: ignore[union-attr]
    assert abs(families[Family.NETWORK] / 4000 - 0.5) < 0.04  # five standard deviations of binomial(4000, 0.5)


def test_only_forms_that_fit_the_program_and_channel_are_drawn() -> None:
    bank = load_bank()
    injector = Injector(1.0, seed=2, bank=bank)
    tools = injector.wrap(shell_tools([]))
    for _ in range(300):
        tools["run_command"].invoke({"command": "git push origin main"})
    used = {i.form for i in injector.injections}
    assert used and all(f.channel is Channel.EXIT and {"git", "shell"} & set(f.tools) for f in used)
    assert {"git"} <= {t for f in used for t in f.tools}


def test_file_and_web_tools_get_exceptions_and_http_responses(tmp_path: Path) -> None:
    spec_tools = standard_tools(Workspace(tmp_path))
    assert call_targets(spec_tools["read_file"], {"path": "x"}) == (frozenset({"filesystem"}), Channel.EXCEPTION)
    assert call_targets(spec_tools["web_search"], {"query": "x"}) == (frozenset({"http"}), Channel.HTTP)
    assert call_targets(spec_tools["check_cli_setup"], {"name": "gh"}) == (frozenset({"gh"}), Channel.EXIT)
    tools = Injector(1.0, seed=4, bank=load_bank()).wrap(spec_tools)
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    result = tools["read_file"].invoke({"path": "notes.txt"})
    assert result.error_type is not None and result.content.startswith(result.error_type + ": ")


def test_slots_name_the_program_and_path_of_the_call_a_form_stands_in_for(tmp_path: Path) -> None:
    bank = load_bank()
    missing = next(f for f in bank if f.id == "shell-command-not-found")
    denied = next(f for f in bank if f.id == "python-permission-error")
    only = Injector(1.0, bank=FailureBank([missing]))
    result = only.wrap(shell_tools([]))["run_command"].invoke({"command": "gh pr list --limit 5"})
    assert "gh: command not found" in result.content and "unstuck-no-such" not in result.content
    files = Injector(1.0, bank=FailureBank([denied])).wrap(standard_tools(Workspace(tmp_path)))
    result = files["read_file"].invoke({"path": "notes/todo.md"})
    assert result.content == "PermissionError: [Errno 13] Permission denied: 'notes/todo.md'"


def test_a_refused_call_keeps_its_refusal(tmp_path: Path) -> None:
    tools = Injector(1.0, bank=load_bank()).wrap(
        standard_tools(Workspace(tmp_path, denied_programs=frozenset({"rm"}))))
    result = tools["run_command"].invoke({"command": "rm -rf build"})
    assert not result.executed and result.injected is None and result.declared is not None


def test_no_fitting_form_keeps_the_real_return() -> None:
    injector = Injector(1.0, bank=FailureBank([form("h", Kind.AUTH, ("http",), Channel.HTTP)]))
    result = injector.wrap(shell_tools([]))["run_command"].invoke({"command": "ls"})
    assert result.ok and result.injected is None and injector.injections == []


def test_the_loop_marks_injected_failures_apart_from_organic_ones() -> None:
    injector = Injector(1.0, seed=1, bank=FailureBank([form("shell-timeout", Kind.TIMEOUT)]))
    log = EventLog()
    model = PlaybackModel([("run_command", {"command": "make test"}), "gave up"])
    result = run_turn("run the tests", model=model, tools=injector.wrap(shell_tools([])), unattended=True,
                      clock=VirtualClock(), events=log)
    first = result.steps[0]
    assert first.injected == "shell-timeout" and first.situation is not None
    # p_inj 1: every dispatched return was replaced, and each replacement is one event
    assert result.steps and all(s.injected == "shell-timeout" for s in result.steps)
    assert [e.get("form") for e in log.named("fault.injected")] == ["shell-timeout"] * len(result.steps)
    # the policy sees an injected failure as it would a real one: the execution_error is inferred
    assert first.situation.kind is Kind.EXECUTION_ERROR


def test_the_journal_marks_injected_steps_apart_from_organic_ones(tmp_path: Path) -> None:
    from unstuck.store.journal import Journal

    injector = Injector(1.0, seed=1, bank=FailureBank([form("shell-timeout", Kind.TIMEOUT)]))
    with Journal(tmp_path / "j.db") as journal:
        run_turn("run the tests", model=PlaybackModel([("run_command", {"command": "make test"}), "gave up"]),
                 tools=injector.wrap(shell_tools([])), unattended=True, clock=VirtualClock(), journal=journal,
                 turn_id="t1")
        steps = journal.steps("t1")
    assert steps and all(s.injected == "shell-timeout" for s in steps)


def test_a_return_replaced_at_a_low_rate_is_replaced_at_every_higher_rate() -> None:
    bank = load_bank()

    def replaced(p: float) -> set[int]:
        injector = Injector(p, seed=9, bank=bank)
        tools = injector.wrap(shell_tools([]))
        for i in range(300):
            tools["run_command"].invoke({"command": "git status" if i % 3 else "ls build"})
        return {i.call_index for i in injector.injections}

    low, mid, high = replaced(0.05), replaced(0.1), replaced(0.3)
    assert low and low <= mid <= high


def test_slots_name_the_program_the_command_runs_not_its_first_word() -> None:
    missing = next(f for f in load_bank() if f.id == "shell-command-not-found")
    tools = Injector(1.0, bank=FailureBank([missing])).wrap(shell_tools([]))
    for command in ("cd repo && gh pr list", "GH_TOKEN=x gh pr list", "sudo gh pr list"):
        content = tools["run_command"].invoke({"command": command}).content
        assert "gh: command not found" in content, (command, content)
