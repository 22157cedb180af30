"""The public per-call guard, and the incident shapes it closes, through ``run_turn`` and
through :class:`unstuck.Guard` directly. Tools are real programs run by the standard
``run_command`` tool in a temporary workspace (stand-in CLIs are real scripts on ``PATH``)."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import PlaybackModel, bare_env
from unstuck import Action, Guard, GuardStateError, PolicyConfig, ToolCall, TurnStatus, tool
from unstuck.core.clock import VirtualClock
from unstuck.core.situations import Kind
from unstuck.core.tools import HttpResponse
from unstuck.decide import policy
from unstuck.decide.escalation import Answer
from unstuck.decide.outcome import Validator
from unstuck.loop.turn import run_turn
from unstuck.store.events import EventLog, EventName
from unstuck.toolkit.models import ModelReply
from unstuck.toolkit.workspace import Workspace, standard_tools

#: gh's own words when it has no credentials (cli/cli cmd/gh/main.go, authHelp), exit 4
#: (cmd/gh/main.go: exitAuth = 4).
GH_SIGNED_OUT = ("To get started with GitHub CLI, please run:  gh auth login\n"
                 "Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.")


def stand_in(bin_dir: Path, name: str, body: str) -> Path:
    """A real executable script called ``name`` in ``bin_dir``; every run appends its argv to
    ``bin_dir/NAME.log``, so a test can tell which calls really ran."""
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{bin_dir}/{name}.log"\n{body}\n', encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    found = tmp_path / "bin"
    found.mkdir()
    return found


def workspace(tmp_path: Path, bin_dir: Path, **options: Any) -> Workspace:
    env = bare_env(home=tmp_path / "home", PATH=f"{bin_dir}:/usr/bin:/bin", LANG="C.UTF-8")
    (tmp_path / "home").mkdir(exist_ok=True)
    return Workspace(tmp_path, env=env, **options)


def ran(bin_dir: Path, name: str) -> list[str]:
    log = bin_dir / f"{name}.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def command(text: str) -> tuple[str, dict[str, Any]]:
    return ("run_command", {"command": text})


# --- a blocker closes only on a success on its subject --------------------------------------


def nobody(tmp_path: Path, bin_dir: Path) -> Workspace:
    """Commands run as user nobody (setpriv), so reading /etc/shadow is really refused."""
    return workspace(tmp_path, bin_dir, argv_prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))


def test_unrelated_success_after_a_permission_blocker_does_not_make_the_answer_done(
        tmp_path: Path, bin_dir: Path) -> None:
    model = PlaybackModel([command("cat /etc/shadow"), command("id -u"), "Done: the file is read."])
    result = run_turn("read /etc/shadow", model=model, tools=standard_tools(nobody(tmp_path, bin_dir)),
                      unattended=True, clock=VirtualClock())
    assert result.steps[1].ok and result.steps[1].content.strip() == "65534"  # the unrelated success really ran
    assert result.status is TurnStatus.BLOCKED
    assert result.escalation is not None and result.escalation.kind is Kind.PERMISSION
    assert result.escalation.reason == "blocked" and "id -u" not in result.escalation.text


def test_answer_confirmed_as_done_without_the_subject_is_done_with_the_blocker_listed(
        tmp_path: Path, bin_dir: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    model = PlaybackModel([command("cat /etc/shadow"), command("cat notes.txt"), "The answer is 42."],
                          confirm="Yes. I read notes.txt instead, which holds the answer.")
    result = run_turn("what is the answer?", model=model, tools=standard_tools(nobody(tmp_path, bin_dir)),
                      unattended=True, clock=VirtualClock())
    assert result.status is TurnStatus.DONE and result.answer == "The answer is 42."
    assert result.open_blockers  # reported, not hidden


def test_validators_decide_an_answer_given_with_a_blocker_open(tmp_path: Path, bin_dir: Path) -> None:
    target = tmp_path / "out.txt"
    model = PlaybackModel([command("cat /etc/shadow"), command("echo ok > out.txt"), "Wrote out.txt."])
    result = run_turn("write out.txt", model=model, tools=standard_tools(workspace(tmp_path, bin_dir,
                      argv_prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))),
                      unattended=True, clock=VirtualClock(),
                      validators=[Validator("out.txt exists", lambda: target.exists())])
    # nobody cannot write into a root-owned temporary directory: the validator, not a question, decides
    assert result.status is TurnStatus.FAILED and "out.txt exists" in (result.error or "")
    assert not any(len(r[1]) == 0 for r in model.requests[1:])  # no route-around question was asked


# --- repetition has authority ------------------------------------------------------------------


def test_twelve_identical_failing_calls_escalate_as_stuck_after_three(tmp_path: Path, bin_dir: Path) -> None:
    model = PlaybackModel([command("false")] * 12 + ["done"])
    result = run_turn("t", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)), unattended=True,
                      clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED
    assert result.tool_calls == 3  # DESIGN.md "Defaults": 3 identical failing calls
    assert result.escalation is not None and result.escalation.reason == "repeated_failure"
    assert "3 times in a row" in result.escalation.blocked


def test_a_call_to_a_missing_tool_lists_the_tool_set_and_the_second_escalates(
        tmp_path: Path, bin_dir: Path) -> None:
    model = PlaybackModel([("browser_open", {"url": "https://github.com/login"})] * 12 + ["done"])
    tools = standard_tools(workspace(tmp_path, bin_dir))
    result = run_turn("t", model=model, tools=tools, unattended=True, clock=VirtualClock())
    assert "Available tools:" in result.steps[0].content and "run_command" in result.steps[0].content
    assert result.status is TurnStatus.BLOCKED and result.tool_calls == 2
    assert result.escalation is not None and result.escalation.reason == "unknown_tool"
    assert "browser_open" in result.escalation.blocked


def test_identical_calls_that_succeed_are_not_stuck(tmp_path: Path, bin_dir: Path) -> None:
    model = PlaybackModel([command("true")] * 6 + ["done"])
    result = run_turn("t", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)), unattended=True,
                      clock=VirtualClock())
    assert result.status is TurnStatus.DONE and result.tool_calls == 6


# --- the question is about the first real blocker -------------------------------------------------


def test_own_refusal_of_an_interactive_call_is_reported_beside_the_real_blocker(
        tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", f"cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4")
    model = PlaybackModel([command("gh repo view cli/cli"), command("gh auth login --web")] * 4)
    result = run_turn("t", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)), unattended=True,
                      clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.kind is Kind.AUTH  # what gh reported, not unstuck's refusal
    assert "gh auth login" in result.escalation.user_action
    assert result.escalation.refused and "waits for a person" in result.escalation.refused[0]
    assert "unstuck also refused" in result.escalation.text
    assert all("auth login" not in line for line in ran(bin_dir, "gh"))  # the sign-in never ran


# --- no credential tricks around a sign-in blocker --------------------------------------------------


def test_credential_changes_during_a_sign_in_blocker_are_refused_and_named(tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", f"cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4")
    model = PlaybackModel([
        command("gh repo view cli/cli"),
        command("gh auth refresh -h github.com -s admin:org"),
        command("GH_TOKEN=ghp_0123456789abcdef gh repo view cli/cli"),
        command("gh auth switch --user other"),
        "stop",
    ])
    result = run_turn("t", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)), unattended=True,
                      clock=VirtualClock())
    runs = ran(bin_dir, "gh")  # the setup probe's read-only checks ran; none of the changes did
    assert sum(line.endswith(" repo view cli/cli") for line in runs) == 1
    assert not any(" auth refresh" in line or " auth switch" in line for line in runs)
    assert [s.dispatched for s in result.steps if not s.probe][:4] == [True, False, False, False]
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.kind is Kind.AUTH
    assert any("gh auth refresh" in refusal for refusal in result.escalation.refused)


def test_a_credential_change_the_policy_allows_by_name_runs(tmp_path: Path, bin_dir: Path) -> None:
    from unstuck.commands.credentials import credential_changes

    stand_in(bin_dir, "gh", f"cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4")
    switch = "gh auth switch --user other"
    allowed = frozenset(change.name for change in credential_changes(switch))
    assert allowed
    model = PlaybackModel([command("gh repo view cli/cli"), command(switch), "stop"])
    run_turn("t", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)), unattended=True,
             clock=VirtualClock(), config=PolicyConfig(allowed_credential_changes=allowed))
    assert f"{bin_dir}/gh auth switch --user other" in ran(bin_dir, "gh")


def test_credential_changes_run_when_no_sign_in_blocker_is_open(tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", "echo ok")
    model = PlaybackModel([command("gh auth switch --user other"), "done"])
    result = run_turn("t", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)), unattended=True,
                      clock=VirtualClock())
    assert result.status is TurnStatus.DONE and ran(bin_dir, "gh")


# --- "not installed" looks outside PATH first ---------------------------------------------------------


def test_a_program_on_disk_but_not_on_path_is_reported_as_not_on_path(tmp_path: Path, bin_dir: Path) -> None:
    ws = workspace(tmp_path, bin_dir)
    local = Path(ws.env["HOME"]) / ".local" / "bin"
    local.mkdir(parents=True)
    stand_in(local, "mytool", "echo 1.0")
    model = PlaybackModel([command("mytool --version")] * 6)
    result = run_turn("t", model=model, tools=standard_tools(ws), unattended=True, clock=VirtualClock())
    assert result.escalation is not None and result.escalation.kind is Kind.NOT_INSTALLED
    assert str(local / "mytool") in result.escalation.blocked
    assert "not on this run's PATH" in result.escalation.blocked
    assert f"Add {local} to the PATH" in result.escalation.user_action


# --- the Guard itself -----------------------------------------------------------------------------------


def test_a_plain_string_result_is_classified_not_taken_as_success() -> None:
    @tool
    def deploy() -> str:
        return "unused"

    guard = Guard([deploy], unattended=True, clock=VirtualClock())
    call = ToolCall.of("1", "deploy", {})
    assert guard.before(call).action is Action.DISPATCH
    decision = guard.after(call, "Error: you are not logged in. Please run: deployctl login")
    assert decision.situation is not None and decision.situation.kind is Kind.AUTH
    assert decision.step is not None and not decision.step.ok  # a string is no success on its type


def test_the_same_failing_string_result_three_times_is_stuck() -> None:
    @tool(subject="deployctl")
    def deploy(target: str) -> str:
        return "Error: you are not logged in. Please run: deployctl login"

    guard = Guard([deploy], unattended=True, clock=VirtualClock())
    actions = [guard.call(ToolCall.of(str(n), "deploy", {"target": "prod"})).action for n in range(3)]
    assert actions[-1] is Action.ESCALATE and len(guard.steps) == 3


def test_the_call_that_escalates_hands_the_model_its_result_and_the_question() -> None:
    @tool(subject="gh")
    def gh(n: int) -> dict[str, Any]:
        return {"status": "error", "output": "gh: not signed in",
                "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    guard = Guard([gh], unattended=True, clock=VirtualClock(), task="t")
    decisions = [guard.call(ToolCall.of(str(n), "gh", {"n": n})) for n in range(4)]
    last = decisions[-1]
    assert last.action is Action.ESCALATE and not last.content.startswith("Not executed")
    assert "gh: not signed in" in last.content and "Run: gh auth login" in last.content


def escalated_guard() -> tuple[Guard, Any]:
    @tool(subject="gh")
    def gh(args: str) -> dict[str, Any]:
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login",
                                                 "probe": {"tool": "gh_status", "args": {}}}}

    state = {"signed_in": False}

    @tool(subject="gh")
    def gh_status() -> dict[str, Any]:
        if state["signed_in"]:
            return {"status": "ok"}
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    guard = Guard([gh, gh_status], unattended=False, clock=VirtualClock(), task="view the repo")
    for n in range(4):
        decision = guard.call(ToolCall.of(str(n), "gh", {"args": f"repo view {n}"}))
    return guard, (decision, state)


def test_the_latch_refuses_every_call_after_the_escalation() -> None:
    guard, (decision, _) = escalated_guard()
    assert decision.action is Action.ESCALATE and guard.latched
    later = guard.before(ToolCall.of("9", "gh_status", {}))
    assert later.action is Action.REFUSE and "stopped to ask the user" in later.content
    assert len(guard.steps) == 4  # the refused call is not a step, and ran nothing


def test_answer_done_runs_the_probe_and_unlatches_only_when_clean() -> None:
    guard, (_, state) = escalated_guard()
    still = guard.answer(Answer.DONE)
    assert still.action is Action.ESCALATE and guard.latched and "still blocked" in still.content
    assert still.content.split("still blocked:", 1)[1].strip()  # the probe's evidence is named
    state["signed_in"] = True
    clear = guard.answer(Answer.DONE)
    assert clear.action is Action.CONTINUE and not guard.latched and not guard.state.open_blockers


def _shell_guard(fn: Any) -> tuple[Guard, dict[str, bool], list[str]]:
    """A guard over a plain shell tool (as a framework describes one) that prints what the
    signed-out gh prints until ``state["signed_in"]``; ``ran``: every command it ran."""
    from unstuck.integrations.common import spec_for

    state = {"signed_in": False}
    ran: list[str] = []

    def run_command(command: str) -> str:
        ran.append(command)
        if state["signed_in"]:
            return '{"description": "GitHub\'s official command line tool"}'
        return "To get started with GitHub CLI, please run:  gh auth login\n(exit status 4)"

    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    spec = spec_for("run_command", parameters=schema, fn=run_command if fn is None else fn)
    guard = Guard([spec], unattended=True, clock=VirtualClock(), task="describe cli/cli")
    decision = None
    commands = ["gh repo view cli/cli --json description", "gh auth status", "gh api repos/cli/cli",
                "gh repo view cli/cli", "gh auth status", "gh api repos/cli/cli"]
    for n, command in enumerate(commands):
        call = ToolCall.of(str(n), "run_command", {"command": command})
        decision = guard.before(call)
        if decision.action is Action.DISPATCH:
            decision = guard.after(call, run_command(command))
        if guard.latched:
            break
    assert guard.latched, decision
    return guard, state, ran


def test_without_a_declared_probe_done_re_runs_the_call_that_opened_the_blocker() -> None:
    """A plain shell tool declares no probe; "I've done it" re-runs the read-only call that
    opened the blocker (gh repo view …), so a user who has not signed in yet is asked again."""
    guard, state, ran = _shell_guard(None)
    before = len(ran)
    still = guard.answer(Answer.DONE)
    assert still.action is Action.ESCALATE and guard.latched and "still blocked" in still.content
    assert ran[before:] == ["gh repo view cli/cli --json description"]
    state["signed_in"] = True
    clear = guard.answer(Answer.DONE)
    assert clear.action is Action.CONTINUE and not guard.latched and not guard.state.open_blockers


def test_a_tool_only_its_framework_runs_is_never_a_probe_the_answer_is_taken_at_its_word() -> None:
    from unstuck.toolkit.specs import run_elsewhere

    guard, _, ran = _shell_guard(run_elsewhere)
    before = list(ran)
    clear = guard.answer(Answer.DONE)
    assert clear.action is Action.CONTINUE and "no probe" in clear.content
    assert ran == before  # nothing was run for the answer


def test_answer_before_any_escalation_is_an_error() -> None:
    from unstuck.core.errors import UnstuckError

    guard = Guard([], unattended=False, clock=VirtualClock())
    with pytest.raises(UnstuckError, match="has not escalated"):
        guard.answer(Answer.DONE)


def test_state_round_trip_keeps_budgets_neither_lost_nor_counted_twice() -> None:
    @tool(subject="gh")
    def gh(args: str) -> dict[str, Any]:
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    whole = Guard([gh], unattended=True, clock=VirtualClock())
    outcomes = [whole.call(ToolCall.of(str(n), "gh", {"args": str(n)})).action for n in range(4)]
    paused = Guard([gh], unattended=True, clock=VirtualClock())
    for n in range(2):
        paused.call(ToolCall.of(str(n), "gh", {"args": str(n)}))
    text = paused.to_json()
    json.loads(text)  # plain JSON a checkpointer can hold
    resumed = Guard.from_json(text, [gh], unattended=True, clock=VirtualClock())
    assert resumed.state == paused.state and resumed.steps == paused.steps
    rest = [resumed.call(ToolCall.of(str(n), "gh", {"args": str(n)})).action for n in range(2, 4)]
    assert outcomes == [Action.CONTINUE, Action.CONTINUE, Action.CONTINUE, Action.ESCALATE]
    assert rest == outcomes[2:]
    assert Guard.from_json(resumed.to_json(), [gh], unattended=True).latched


def test_saved_state_of_another_version_or_garbage_is_refused_by_name() -> None:
    with pytest.raises(GuardStateError, match="schema version 99"):
        Guard.from_json(json.dumps({"version": 99}), [], unattended=True)
    with pytest.raises(GuardStateError, match="not JSON"):
        Guard.from_json("{not json", [], unattended=True)
    with pytest.raises(GuardStateError, match="malformed"):
        Guard.from_json(json.dumps({"version": 1, "turn_id": "t", "state": {"unattended": "x", "retries": 5}}), [],
                        unattended=True)


def parallel_tools() -> list[Any]:
    @tool(subject="svc")
    def svc(n: int) -> dict[str, Any]:
        return {"status": "error", "situation": {"kind": "auth", "subject": "svc", "unblock": "svc login"}}

    return [svc]


def test_calls_of_one_reply_reported_out_of_order_from_threads_are_charged_in_reply_order() -> None:
    guard = Guard(parallel_tools(), unattended=True, clock=VirtualClock())
    calls = [ToolCall.of(str(n), "svc", {"n": n}) for n in range(3)]
    guard.reply(calls)
    for call in calls:
        assert guard.before(call).action is Action.DISPATCH
    error = {"status": "error", "situation": {"kind": "auth", "subject": "svc", "unblock": "svc login"}}
    threads = [threading.Thread(target=guard.after, args=(calls[n], error)) for n in (2, 1)]
    for thread in threads:
        thread.start()
    guard.after(calls[0], error)
    for thread in threads:
        thread.join(timeout=10)
    assert [s.call.id for s in guard.steps] == ["0", "1", "2"]
    assert [s.opened for s in guard.steps] == [("svc",), (), ()]
    # the reply's later calls were chosen before the blocker's guidance: not charged (exempt)
    assert guard.state.open_blockers["svc"].workarounds == 0
    again = guard.after(calls[1], error)  # reported twice: assessed once
    assert again.step is guard.steps[1] and len(guard.steps) == 3


def test_async_calls_of_one_reply_are_charged_once_in_reply_order() -> None:
    guard = Guard(parallel_tools(), unattended=True, clock=VirtualClock())
    calls = [ToolCall.of(str(n), "svc", {"n": n}) for n in range(3)]
    error = {"status": "error", "situation": {"kind": "auth", "subject": "svc", "unblock": "svc login"}}

    async def main() -> None:
        guard.reply(calls)
        for call in calls:
            await guard.abefore(call)

        async def report(n: int, delay: float) -> None:
            await asyncio.sleep(delay)
            await guard.aafter(calls[n], error)

        await asyncio.gather(report(2, 0.0), report(1, 0.01), report(0, 0.05))

    asyncio.run(main())
    assert [s.call.id for s in guard.steps] == ["0", "1", "2"]


def test_a_refused_call_in_a_reply_is_charged_after_the_earlier_calls() -> None:
    @tool(subject="svc")
    def svc(n: int) -> str:
        return "ok"

    @tool(interactive=True, subject="browser")
    def open_browser() -> str:
        return "opened"

    guard = Guard([svc, open_browser], unattended=True, clock=VirtualClock())
    first, second = ToolCall.of("a", "svc", {"n": 1}), ToolCall.of("b", "open_browser", {})
    guard.reply([first, second])
    assert guard.before(first).action is Action.DISPATCH
    refused = guard.before(second)  # decided now, charged when its turn comes
    assert refused.action is Action.REFUSE and refused.step is None
    guard.after(first, "ok")
    assert [s.call.id for s in guard.steps] == ["a", "b"] and not guard.steps[1].dispatched


def test_the_escalation_event_carries_the_three_parts() -> None:
    log = EventLog()

    @tool(subject="gh")
    def gh() -> dict[str, Any]:
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    guard = Guard([gh], unattended=True, clock=VirtualClock(), events=log, task="t")
    for n in range(4):
        guard.call(ToolCall.of(str(n), "gh", {}))
    escalated = log.named(EventName.TURN_ESCALATED)[0]
    assert escalated.get("blocked") and escalated.get("user_action") == "Run: gh auth login"
    assert escalated.get("next_step")


def test_run_turn_model_reply_with_parallel_calls_still_stops_at_the_escalation(tmp_path: Path,
                                                                               bin_dir: Path) -> None:
    batch = ModelReply("", tuple(ToolCall.of(f"c{n}", "run_command", {"command": "false"}) for n in range(5)))
    result = run_turn("t", model=PlaybackModel([batch]), tools=standard_tools(workspace(tmp_path, bin_dir)),
                      unattended=True, clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED and result.tool_calls == 3
    stopped = [m.content for m in result.messages if m.tool_call_id in ("c3", "c4")]
    assert len(stopped) == 2 and all(re.fullmatch(r"\[unstuck [0-9a-f]{16}\] Not executed: the turn stopped to ask "
                                                  r"the user\.", text) for text in stopped)  # the latch, marked



# --- the same shapes through the Guard directly -----------------------------------------------------


def test_guard_check_answer_escalates_unless_the_model_says_yes(tmp_path: Path, bin_dir: Path) -> None:
    for said, expected in (("Yes. I used another file.", Action.CONTINUE), ("I think it worked", Action.ESCALATE)):
        guard = Guard(standard_tools(nobody(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
        guard.call(ToolCall.of("1", "run_command", {"command": "cat /etc/shadow"}))
        assert guard.call(ToolCall.of("2", "run_command", {"command": "id -u"})).step.ok  # type: ignore[union-attr]
        assert guard.state.open_blockers  # an unrelated success closes nothing
        assert guard.check_answer(lambda question, said=said: said).action is expected
    unasked = Guard(standard_tools(nobody(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    unasked.call(ToolCall.of("1", "run_command", {"command": "cat /etc/shadow"}))
    assert unasked.check_answer().action is Action.ESCALATE


def test_guard_stops_the_third_identical_failure_and_the_second_unknown_tool(tmp_path: Path, bin_dir: Path) -> None:
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    actions = [guard.call(ToolCall.of(str(n), "run_command", {"command": "false"})).action for n in range(3)]
    assert actions == [Action.CONTINUE, Action.CONTINUE, Action.ESCALATE]
    other = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    first = other.call(ToolCall.of("a", "open_browser", {}))
    assert first.action is Action.CONTINUE and "Available tools: run_command" in first.content
    assert other.call(ToolCall.of("b", "click", {})).action is Action.ESCALATE
    assert other.escalation is not None and other.escalation.reason == "unknown_tool"


def test_guard_warns_one_identical_failure_before_it_stops(tmp_path: Path, bin_dir: Path) -> None:
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", "run_command", {"command": "false"}))
    second = guard.call(ToolCall.of("2", "run_command", {"command": "false"}))
    assert "One more identical failure stops the turn" in second.content


def test_guard_refuses_a_credential_change_while_gh_is_signed_out(tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", f"cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4")
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", "run_command", {"command": "gh repo view cli/cli"}))
    refused = guard.before(ToolCall.of("2", "run_command", {"command": "export GH_TOKEN=ghp_abc; gh repo view"}))
    assert refused.action is Action.REFUSE and "GH_TOKEN" in refused.content
    assert "ghp_abc" not in refused.content  # the secret is masked in what unstuck repeats


def test_guard_keeps_the_tools_blocker_over_its_own_refusal(tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", f"cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4")
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", "run_command", {"command": "gh repo view cli/cli"}))
    refused = guard.call(ToolCall.of("2", "run_command", {"command": "gh auth login --web"}))
    assert refused.action is Action.REFUSE
    assert guard.state.open_blockers["gh"].situation.kind is Kind.AUTH  # not replaced by the refusal


def test_guard_locates_a_missing_program_outside_path(tmp_path: Path, bin_dir: Path) -> None:
    ws = workspace(tmp_path, bin_dir)
    local = Path(ws.env["HOME"]) / ".local" / "bin"
    local.mkdir(parents=True)
    stand_in(local, "mytool", "echo 1.0")
    guard = Guard(standard_tools(ws), unattended=True, clock=VirtualClock())
    decision = guard.call(ToolCall.of("1", "run_command", {"command": "mytool --version"}))
    assert decision.situation is not None and decision.situation.location == str(local / "mytool")


# --- a program that waits for input at its deadline ---------------------------------------------------


def test_a_pager_waiting_at_its_deadline_is_an_interactive_blocker_never_retried(
        tmp_path: Path, bin_dir: Path) -> None:
    ws = workspace(tmp_path, bin_dir, terminal=True)
    guard = Guard(standard_tools(ws), unattended=False, clock=VirtualClock())
    decision = guard.call(ToolCall.of("1", "run_command", {"command": "seq 1 500 | less", "timeout_s": 1.5}))
    situation = decision.situation
    assert situation is not None and situation.interactive and not situation.retryable
    assert "less" in situation.detail
    assert decision.action is Action.CONTINUE and len(guard.steps) == 1  # no retry
    assert "waiting may fix" not in decision.content
    assert guard.state.open_blockers["seq"].situation.interactive  # the command's subject is blocked


def test_a_prompt_waiting_under_a_terminal_stops_the_turn_instead_of_seven_retries(
        tmp_path: Path, bin_dir: Path) -> None:
    ws = workspace(tmp_path, bin_dir, terminal=True)
    prompt = command("python3 -c \"input('Proceed? [y/N] ')\"")
    prompt[1]["timeout_s"] = 1.0
    model = PlaybackModel([prompt] * 7 + ["done"])
    result = run_turn("t", model=model, tools=standard_tools(ws), unattended=True, clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED and result.tool_calls <= 3
    first = result.steps[0].situation
    assert first is not None and first.interactive and not first.retryable
    assert not any("waiting may fix" in m.content for m in result.messages)


# --- from the adversarial pass -----------------------------------------------------------------------


def test_a_command_not_found_with_an_odd_name_is_classified_not_raised(tmp_path: Path, bin_dir: Path) -> None:
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    for name in ("...", "café", "'-rf'", "x" * 300):
        decision = guard.call(ToolCall.of(name[:8], "run_command", {"command": name}))
        assert decision.situation is not None


def test_a_reused_call_id_in_a_later_reply_is_a_new_call() -> None:
    @tool(subject="echo")
    def echo(text: str) -> str:
        return text

    guard = Guard([echo], unattended=True, clock=VirtualClock())
    contents = [guard.call(ToolCall.of("call_0", "echo", {"text": t})).content for t in ("one", "two", "three")]
    assert contents == ["one", "two", "three"] and len(guard.steps) == 3


def test_duplicate_ids_in_one_reply_are_refused_by_name() -> None:
    from unstuck.core.errors import UnstuckError

    guard = Guard([], unattended=True, clock=VirtualClock())
    with pytest.raises(UnstuckError, match="repeated: a"):
        guard.reply([ToolCall.of("a", "x", {}), ToolCall.of("a", "y", {})])


def test_whitespace_and_key_order_do_not_make_a_failing_call_new(tmp_path: Path, bin_dir: Path) -> None:
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    variants = [ToolCall.of("1", "run_command", {"command": "false"}),
                ToolCall("2", "run_command", '{"command":  " false "}'),
                ToolCall.of("3", "run_command", {"command": "false  "})]
    assert [guard.call(c).action for c in variants] == [Action.CONTINUE, Action.CONTINUE, Action.ESCALATE]


def test_eight_different_failing_calls_in_a_row_escalate_as_a_failing_streak(tmp_path: Path, bin_dir: Path) -> None:
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    actions = [guard.call(ToolCall.of(str(n), "run_command", {"command": f"ls /nonexistent{n}"})).action
               for n in range(8)]
    assert actions[:7] == [Action.CONTINUE] * 7 and actions[7] is Action.ESCALATE
    assert guard.escalation is not None and guard.escalation.reason == "failing_streak"


def test_a_refused_call_asked_again_is_charged_once() -> None:
    @tool(subject="gh")
    def gh() -> dict[str, Any]:
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    @tool(interactive=True, subject="gh")
    def login() -> str:
        return "signed in"

    guard = Guard([gh, login], unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", "gh", {}))
    replayed = [guard.before(ToolCall.of("2", "login", {})).action for _ in range(3)]
    assert replayed == [Action.REFUSE] * 3
    assert guard.state.open_blockers["gh"].workarounds == 1


def test_a_result_for_a_tool_the_guard_does_not_know_is_assessed_as_given() -> None:
    guard = Guard([], unattended=True, clock=VirtualClock())
    handoff = ToolCall.of("h", "transfer_to_billing_agent", {})
    assert guard.before(handoff).action is Action.DISPATCH
    decision = guard.after(handoff, "Transferred to billing.")
    assert decision.content == "Transferred to billing." and decision.step is not None and decision.step.ok


def test_after_never_waits_on_a_frozen_turn_clock_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    import unstuck.guard.replies as guard_module

    monkeypatch.setattr(guard_module, "REPLY_WAIT_S", 0.2)
    guard = Guard(parallel_tools(), unattended=True, clock=VirtualClock())
    first, second = ToolCall.of("a", "svc", {"n": 1}), ToolCall.of("b", "svc", {"n": 2})
    guard.reply([first, second])
    guard.before(first)
    guard.before(second)
    assert guard.after(second, "ok").step is not None  # a waits forever; b goes on after the wait


def test_the_pager_refusal_names_the_way_to_run_it_without_a_pager(tmp_path: Path, bin_dir: Path) -> None:
    ws = workspace(tmp_path, bin_dir, terminal=True)
    guard = Guard(standard_tools(ws), unattended=True, clock=VirtualClock())
    refused = guard.before(ToolCall.of("1", "run_command", {"command": "git log"}))
    assert refused.action is Action.REFUSE
    assert "does not wait:" in refused.content and "in any form" not in refused.content
    assert "--no-pager" in refused.content or "GIT_PAGER=" in refused.content or "PAGER=" in refused.content


def test_hostile_saved_state_is_a_guard_state_error() -> None:
    good = json.loads(Guard([], unattended=True, clock=VirtualClock()).to_json())
    for field_name, value in (("state", []), ("state", None), ("retrying", [1]), ("elapsed_s", float("inf")),
                              ("guarded", ""), ("reply", {"ids": "abc", "begun": []})):
        with pytest.raises(GuardStateError):
            Guard.from_json(json.dumps({**good, field_name: value}), [], unattended=True)
    with pytest.raises(GuardStateError):
        Guard.from_json('{"version": ' + "9" * 5000 + "}", [], unattended=True)


def test_a_hedged_yes_is_no_yes(tmp_path: Path, bin_dir: Path) -> None:
    guard = Guard(standard_tools(nobody(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", "run_command", {"command": "cat /etc/shadow"}))
    assert guard.check_answer(lambda q: "Yes, but I could not read it.").action is Action.ESCALATE


def test_reading_a_credential_file_with_a_file_tool_is_refused_during_a_sign_in_blocker(
        tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", f"cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4")
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", "run_command", {"command": "gh repo view cli/cli"}))
    refused = guard.before(ToolCall.of("2", "read_file", {"path": "~/.config/gh/hosts.yml"}))
    assert refused.action is Action.REFUSE
    assert guard.before(ToolCall.of("3", "read_file", {"path": "./README.md"})).action is Action.DISPATCH


def test_coreutils_cannot_open_for_reading_names_the_file(tmp_path: Path, bin_dir: Path) -> None:
    guard = Guard(standard_tools(nobody(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    decision = guard.call(ToolCall.of("1", "run_command", {"command": "head -n1 /etc/shadow"}))
    assert decision.situation is not None and decision.situation.subject == "/etc/shadow"


# -- a mixed reply: a sign-in failure beside a transient one (issue 23) ------------------------


class _Unavailable(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)  # RFC 9110 section 15.6.4: 503 Service Unavailable
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"Service Unavailable\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def unavailable_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


#: Calls the model makes until the turn asks: the failing server's and gh's first (2), then
#: the budget after an inferred blocker (PolicyConfig: 4) and the one call past it.
_MIXED_LIMIT = 2 + PolicyConfig().max_workarounds_after_inferred_blocker + 1


def _mixed_guard(effect: str) -> Guard:
    from unstuck.integrations.common import spec_for
    shell = spec_for("shell", parameters={"type": "object", "properties": {"command": {"type": "string"}}},
                     effect=effect)
    return Guard([shell], unattended=True, clock=VirtualClock(), task="Show cli/cli's description.")


def _run(guard: Guard, world: Any, call: ToolCall) -> Action:
    decision = guard.before(call)
    while decision.action is Action.DISPATCH:
        decision = guard.after(call, world.shell(call.arguments["command"]))
        if decision.action is Action.RETRY:
            decision = guard.before(call)
    return decision.action


def _asks_about_the_sign_in(guard: Guard) -> None:
    model_calls = [s for s in guard.steps if not s.retry and not s.probe]
    assert guard.escalation is not None, "never asked"
    assert guard.escalation.subject == "gh" and guard.escalation.kind is Kind.AUTH
    assert "gh auth login" in guard.escalation.text
    assert len(model_calls) <= _MIXED_LIMIT


@pytest.mark.parametrize("effect", ["write", "read"])
def test_a_sign_in_failure_in_a_sequence_of_replies_alternating_with_a_503_opens_its_blocker_and_is_asked(
        unavailable_url: str, effect: str) -> None:
    from tests.framework_world import GhWorld
    guard = _mixed_guard(effect)
    commands = [f"curl -sSf {unavailable_url}", "gh repo view cli/cli --json description"]
    with GhWorld() as world:
        for n in range(64):
            call = ToolCall.of(f"c{n}", "shell", {"command": commands[n % 2]})
            guard.reply([call])
            if _run(guard, world, call) is Action.ESCALATE:
                break
    opened = [s for s in guard.steps if "gh" in s.opened]
    assert opened and opened[0].situation is not None and opened[0].situation.kind is Kind.AUTH
    _asks_about_the_sign_in(guard)


@pytest.mark.parametrize("effect", ["write", "read"])
@pytest.mark.parametrize("gh_first", [False, True])
def test_a_sign_in_failure_beside_a_503_in_one_reply_opens_its_blocker_and_is_asked(
        unavailable_url: str, effect: str, gh_first: bool) -> None:
    from tests.framework_world import GhWorld
    guard = _mixed_guard(effect)
    pair = [f"curl -sSf {unavailable_url}", "gh repo view cli/cli --json description"]
    if gh_first:
        pair.reverse()
    with GhWorld() as world:
        for n in range(32):
            calls = [ToolCall.of(f"r{n}-{i}", "shell", {"command": text}) for i, text in enumerate(pair)]
            guard.reply(calls)
            actions = [_run(guard, world, call) for call in calls]
            if Action.ESCALATE in actions or guard.latched:
                break
    first_gh = next(s for s in guard.steps if s.call.arguments["command"].startswith("gh"))
    assert "gh" in first_gh.opened  # the first reply opens it, whatever failed beside it
    _asks_about_the_sign_in(guard)


# -- saved state cannot grant itself rights (issue 23) -----------------------------------------


def _interactive_world() -> tuple[list[str], Any]:
    ran: list[str] = []

    @tool(interactive=True, subject="gh")
    def sign_in() -> str:
        """Sign in with a browser (a hand-off to a person)."""
        ran.append("sign_in")
        return "signed in"

    return ran, sign_in


def _tampered(text: str, **changes: Any) -> str:
    saved = json.loads(text)
    for path, value in changes.items():
        where = saved
        *parents, last = path.split("__")
        for part in parents:
            where = where[part]
        where[last] = value
    return json.dumps(saved)


@pytest.mark.parametrize("change", [{"guarded": False}, {"state__unattended": False},
                                    {"guarded": False, "state__unattended": False}])
def test_a_tampered_state_cannot_unguard_or_unattend_a_guard_built_unattended(change: dict[str, Any]) -> None:
    ran, sign_in = _interactive_world()
    events = EventLog()
    saved = Guard([sign_in], unattended=True, clock=VirtualClock()).to_json()
    loaded = Guard.from_json(_tampered(saved, **change), [sign_in], unattended=True, clock=VirtualClock(),
                             events=events)
    for n in range(3):
        assert loaded.call(ToolCall.of(f"s{n}", "sign_in", {})).action in (Action.REFUSE, Action.ESCALATE)
    assert ran == []  # refused before dispatch each time: the caller said unattended
    assert loaded.guarded and loaded.state.unattended
    (differs,) = [e for e in events if e.name == EventName.STATE_POLICY_DIFFERS]
    assert differs.get("unattended") is True and differs.get("guarded") is True


def test_loading_takes_the_stricter_of_the_callers_and_the_states_policy() -> None:
    _, sign_in = _interactive_world()
    wide = PolicyConfig(max_workarounds_after_blocker=9, max_workarounds_after_inferred_blocker=1, repetition=5,
                        allowed_credential_changes=frozenset({"sudo", "chmod"}))
    saved = Guard([sign_in], unattended=False, guarded=False, config=wide, clock=VirtualClock()).to_json()
    mine = PolicyConfig(allowed_credential_changes=frozenset({"sudo"}))
    loaded = Guard.from_json(saved, [sign_in], unattended=False, guarded=True, config=mine)
    assert loaded.guarded and not loaded.state.unattended  # guarded beats unguarded; both attended
    assert loaded.state.config == PolicyConfig(max_workarounds_after_blocker=2, max_workarounds_after_inferred_blocker=1,
                                               repetition=3, allowed_credential_changes=frozenset({"sudo"}))
    strict = Guard([sign_in], unattended=True, clock=VirtualClock()).to_json()
    assert Guard.from_json(strict, [sign_in], unattended=False).state.unattended  # unattended beats attended


def test_a_signed_state_loads_only_with_its_key_and_a_signed_guard_refuses_an_unsigned_or_edited_one() -> None:
    ran, sign_in = _interactive_world()
    key = b"the caller's secret"
    signed = Guard([sign_in], unattended=True, clock=VirtualClock(), state_key=key).to_json()
    again = Guard.from_json(signed, [sign_in], unattended=True, state_key=key).to_json()  # signed with it too
    assert "signature" in json.loads(again) and Guard.from_json(again, [sign_in], unattended=True, state_key=key)
    with pytest.raises(GuardStateError, match="signature does not verify"):
        Guard.from_json(signed, [sign_in], unattended=True, state_key=b"another key")
    with pytest.raises(GuardStateError, match="signature does not verify"):
        Guard.from_json(_tampered(signed, guarded=False), [sign_in], unattended=True, state_key=key)
    unsigned = Guard([sign_in], unattended=True, clock=VirtualClock()).to_json()
    with pytest.raises(GuardStateError, match="not signed"):
        Guard.from_json(unsigned, [sign_in], unattended=True, state_key=key)
    with pytest.raises(TypeError, match="state_key"):
        Guard.from_json(signed, [sign_in], unattended=True, state_key="text")  # type: ignore[arg-type]
    assert ran == []


def test_saved_state_keeps_no_secret_a_call_carried_or_a_tool_returned() -> None:
    # a checkpointer stores what to_json gives: the same rule as the journal
    from secret_samples import samples

    seeded = samples()[:6]

    @tool(subject="gh")
    def gh(args: str) -> str:
        return f"gh: HTTP 401: Bad credentials ({args})"  # the tool echoes what it was given

    guard = Guard([gh], unattended=True, clock=VirtualClock())
    for n, sample in enumerate(seeded):
        guard.call(ToolCall.of(str(n), "gh", {"args": sample.text}))
    saved = guard.to_json()
    assert [piece for sample in seeded for piece in sample.secrets if piece in saved] == []
    loaded = Guard.from_json(saved, [gh], unattended=True, clock=VirtualClock())
    assert loaded.state == guard.state and len(loaded.steps) == len(guard.steps)


# -- a tampered state's books lift no budget and free no held write (issue 23) ---------------


def _signed_out_gh(ran: list[str]) -> Any:
    @tool(subject="gh")
    def gh(args: str) -> dict[str, Any]:
        """gh, signed out: it declares so (its exit code 4, authHelp)."""
        ran.append(args)
        return {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}

    return gh


@pytest.mark.parametrize("change", [
    {"state__open_blockers__gh__budget": 10**6},
    {"state__open_blockers__gh__workarounds": -10**6},
    {"state__open_blockers__gh__workarounds": -10**6, "state__repeat": {"key": "", "failures": -10**6,
                                                                        "streak": -10**6}},
], ids=["budget", "workarounds", "workarounds-and-streak"])
def test_a_tampered_blocker_count_or_budget_in_saved_state_buys_no_extra_workaround(change: dict[str, Any]) -> None:
    """The declared sign-in blocker on gh is open (budget 2, DESIGN.md); the saved state is
    edited to a huge budget or counts far below zero. The loaded guard still lets exactly the
    budget's workarounds and the one that passes it run, then asks."""
    ran: list[str] = []
    gh = _signed_out_gh(ran)
    guard = Guard([gh], unattended=True, clock=VirtualClock())
    assert guard.call(ToolCall.of("0", "gh", {"args": "repo view"})).action is Action.CONTINUE
    events = EventLog()
    loaded = Guard.from_json(_tampered(guard.to_json(), **change), [gh], unattended=True, clock=VirtualClock(),
                             events=events)
    ran.clear()
    actions = [loaded.call(ToolCall.of(str(n), "gh", {"args": f"try {n}"})).action for n in range(1, 12)]
    allowed = PolicyConfig().max_workarounds_after_blocker + 1  # the budget's calls, and the one that passes it
    assert len(ran) == allowed and actions.index(Action.ESCALATE) == allowed - 1
    (differs,) = [e for e in events if e.name == EventName.STATE_POLICY_DIFFERS]
    fixed = str(differs.get("out_of_range"))
    assert all(f"{name}: {value}" in fixed for name, value in (
        (path.split("__", 1)[1].replace("__", "."), value) for path, value in change.items()
        if isinstance(value, int)))


def test_a_pending_retry_the_saved_steps_do_not_show_skips_no_check_before_dispatch() -> None:
    """Saved state says call ``s0`` is a retry in progress (a pending retry is dispatched
    without the checks before dispatch); no step of the state retried it. An interactive
    sign-in with that id is still refused in the unattended guard."""
    ran, sign_in = _interactive_world()
    saved = Guard([sign_in], unattended=True, clock=VirtualClock()).to_json()
    events = EventLog()
    loaded = Guard.from_json(_tampered(saved, retrying={"s0": 0}), [sign_in], unattended=True,
                             clock=VirtualClock(), events=events)
    assert loaded.call(ToolCall.of("s0", "sign_in", {})).action is Action.REFUSE
    assert ran == []
    (differs,) = [e for e in events if e.name == EventName.STATE_POLICY_DIFFERS]
    assert "retrying.s0: no retry of it is pending" in str(differs.get("out_of_range"))


def test_a_blocker_a_saved_reply_calls_fresh_exempts_its_calls_only_when_that_reply_opened_it() -> None:
    """gh's blocker opened in the first reply. The second reply's state is edited to say gh
    opened in it (``reply.fresh``: its later calls were chosen before the guidance, so they
    would not be charged). They are charged: the third workaround passes the budget and asks."""
    ran: list[str] = []
    gh = _signed_out_gh(ran)
    guard = Guard([gh], unattended=True, clock=VirtualClock())
    guard.reply([ToolCall.of("0", "gh", {"args": "repo view"})])
    guard.call(ToolCall.of("0", "gh", {"args": "repo view"}))
    calls = [ToolCall.of(f"r{n}", "gh", {"args": f"try {n}"}) for n in range(6)]
    guard.reply(calls)
    guard.call(calls[0])  # workaround 1
    loaded = Guard.from_json(_tampered(guard.to_json(), reply__fresh=["gh"]), [gh], unattended=True,
                             clock=VirtualClock())
    actions = [loaded.call(call).action for call in calls[1:]]
    budget = PolicyConfig().max_workarounds_after_blocker
    assert actions.index(Action.ESCALATE) == budget - 1  # workarounds 2 and 3: the third passes the budget of 2


def test_held_writes_given_to_from_json_stay_held_whatever_the_state_says() -> None:
    """The caller (a resumed turn) holds a write already made; the saved state's own list of
    held writes was emptied. The write is refused, never made again."""
    made: list[str] = []

    @tool(effect="write", subject="ledger")
    def pay(order: str) -> str:
        """Book a payment for an order."""
        made.append(order)
        return "booked"

    write = ToolCall.of("p1", "pay", {"order": "42"})
    held = {policy.call_key(write): "intent-1"}
    saved = Guard([pay], unattended=True, clock=VirtualClock(), held_writes=held).to_json()
    loaded = Guard.from_json(_tampered(saved, held_writes={}), [pay], unattended=True, clock=VirtualClock(),
                             held_writes=held)
    assert loaded.call(write).action is Action.REFUSE and made == []


# -- a write that timed out may have taken effect: held, never sent again (issue 23) ----------


def test_a_write_that_timed_out_is_never_sent_again_and_the_model_is_told_it_may_have_taken_effect(
        tmp_path: Path, bin_dir: Path) -> None:
    """``run_command`` is a write (toolkit). A payment is appended to a ledger, then the
    command outlives its deadline: no result came back, yet the effect was made. The model is
    told it may have taken effect and not to send it again; the identical call asked again is
    refused before it runs, so the ledger holds one line. Another call still runs."""
    ledger = tmp_path / "ledger"
    pay = {"command": f"echo 'order 42: 10 EUR' >> {ledger}; sleep 30", "timeout_s": 1.0}
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    first = guard.call(ToolCall.of("1", "run_command", pay))
    assert first.situation is not None and first.situation.kind is Kind.TIMEOUT
    assert first.action is Action.CONTINUE and len(guard.steps) == 1  # never retried by the guard
    assert "may have taken effect" in first.content and "Do not send it again" in first.content
    assert "waiting may fix" not in first.content  # the transient guidance invites a resend
    again = guard.call(ToolCall.of("2", "run_command", pay))
    assert again.action is Action.REFUSE and "may have taken effect already" in again.content
    assert ledger.read_text(encoding="utf-8").splitlines() == ["order 42: 10 EUR"]
    check = guard.call(ToolCall.of("3", "run_command", {"command": f"cat {ledger}"}))
    assert check.action is Action.CONTINUE and "order 42" in check.content



# -- issue 25: the incident holes closed as rules -------------------------------------------------


def test_different_writes_into_a_place_that_refused_the_first_stop_at_the_declared_budget(
        tmp_path: Path, bin_dir: Path) -> None:
    # as user nobody, /etc refuses every write: five different ways of writing one file there
    target = "/etc/unstuck-issue-25-probe"
    writes = [f"sh -c 'echo 1 > {target}'", f"cp /dev/null {target}", f"touch {target}",
              f"python3 -c \"open('{target}', 'w')\"", f"echo 1 | tee {target}", f"install /dev/null {target}"]
    model = PlaybackModel([command(w) for w in writes] + ["done"])
    result = run_turn("write the file", model=model, tools=standard_tools(nobody(tmp_path, bin_dir)),
                      unattended=True, clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.subject == target and result.escalation.kind is Kind.PERMISSION
    # the opening call, then the declared budget, then the call past it (PolicyConfig)
    assert result.tool_calls == 1 + PolicyConfig().max_workarounds_after_blocker + 1


def test_the_same_write_failing_again_is_no_second_reading_of_the_blocker(tmp_path: Path, bin_dir: Path) -> None:
    target = "/etc/unstuck-issue-25-probe"
    again = command(f"touch {target}")
    guard = Guard(standard_tools(nobody(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    for n in range(2):
        guard.call(ToolCall.of(str(n), *again))
    blocker = guard.state.open_blockers[target]
    assert blocker.budget == PolicyConfig().max_workarounds_after_inferred_blocker  # one call, one reading


def test_a_version_success_keeps_the_sign_in_blocker_open_so_workarounds_after_it_are_charged(
        tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", 'case "$1" in --version) echo "gh version 2.23.0 (2023-02-27)";; '
                            f"*) cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4;; esac")
    workarounds = [command(f"curl -sS http://127.0.0.1:1/{n}") for n in range(8)]
    model = PlaybackModel([command("gh pr create --fill"), command("gh --version"), *workarounds, "done"])
    events = EventLog()
    result = run_turn("open the pull request", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)),
                      unattended=True, clock=VirtualClock(), events=events)
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.subject == "gh" and result.escalation.kind is Kind.AUTH
    assert not events.named(EventName.BLOCKER_CLOSED)
    # the opening call and the free --version, then the declared budget (gh's setup probe
    # declares the sign-in) and the one call past it; closed by --version, the curl calls
    # were charged to nothing and ran until the failing streak stopped them
    assert result.tool_calls == 2 + PolicyConfig().max_workarounds_after_blocker + 1


def test_a_help_success_keeps_the_sign_in_blocker_open_so_a_token_slipped_in_after_it_is_refused(
        tmp_path: Path, bin_dir: Path) -> None:
    stand_in(bin_dir, "gh", 'case "$1" in help|--help) echo "Work seamlessly with GitHub from the command line.";; '
                            f"*) cat >&2 <<'EOF'\n{GH_SIGNED_OUT}\nEOF\nexit 4;; esac")
    model = PlaybackModel([command("gh pr create --fill"), command("gh help"),
                           command("GH_TOKEN=ghp_0123456789abcdef0123 gh pr create --fill"), "stop"])
    result = run_turn("open the pull request", model=model, tools=standard_tools(workspace(tmp_path, bin_dir)),
                      unattended=True, clock=VirtualClock())
    assert [s.dispatched for s in result.steps if not s.probe] == [True, True, False]
    assert sum(line.endswith(" pr create --fill") for line in ran(bin_dir, "gh")) == 1


def test_the_agents_own_sign_in_that_exits_0_does_not_close_the_blocker(tmp_path: Path, bin_dir: Path) -> None:
    # a CLI the setup probe does not know: "acme login" exits 0 but signs nothing in
    stand_in(bin_dir, "acme", 'case "$1" in login) echo "Logged in.";; '
                              "*) echo 'Error: not logged in. Run acme login first.' >&2; exit 1;; esac")
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", *command("acme deploy --env prod")))
    assert "acme" in guard.state.open_blockers
    guard.call(ToolCall.of("2", *command("acme login")))
    assert "acme" in guard.state.open_blockers and not guard.steps[-1].closed
    guard.call(ToolCall.of("3", *command("acme deploy --env staging")))  # the deploy itself, working again
    assert guard.state.open_blockers["acme"].workarounds == 1


def test_a_success_of_the_refused_call_itself_closes_the_blocker(tmp_path: Path, bin_dir: Path) -> None:
    flag = tmp_path / "signed-in"
    stand_in(bin_dir, "acme", f'if [ -e "{flag}" ]; then echo deployed; else '
                              "echo 'Error: not logged in. Run acme login first.' >&2; exit 1; fi")
    guard = Guard(standard_tools(workspace(tmp_path, bin_dir)), unattended=True, clock=VirtualClock())
    guard.call(ToolCall.of("1", *command("acme deploy --env prod")))
    assert "acme" in guard.state.open_blockers
    flag.touch()  # the user signed in
    guard.call(ToolCall.of("2", *command("acme deploy --env prod")))
    assert "acme" not in guard.state.open_blockers and guard.steps[-1].closed == ("acme",)


def _git(repo: Path, *args: str) -> str:
    env = bare_env(home=repo.parent / "home", GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="a",
                   GIT_AUTHOR_EMAIL="a@example.com", GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@example.com")
    import subprocess
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize("bypass", [
    "git -c commit.gpgsign=false commit --amend --no-edit",
    "git commit --amend --no-edit --no-gpg-sign",
    "git push --no-verify origin HEAD:main",
    "GIT_SSL_NO_VERIFY=1 git push origin HEAD:main",
])
def test_turning_signing_or_verification_off_while_a_push_is_refused_is_itself_refused(
        tmp_path: Path, bin_dir: Path, bypass: str) -> None:
    # a real remote whose pre-receive hook refuses unsigned commits in GitHub's words
    # (GitHub docs, "About protected branches": GH006 ... Commits must have verified signatures)
    remote = tmp_path / "remote.git"
    (tmp_path / "home").mkdir(exist_ok=True)
    remote.mkdir()
    _git(remote, "init", "-q", "--bare")
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'error: GH006: Protected branch update failed for refs/heads/main.' >&2\n"
                    "echo 'error: Commits must have verified signatures.' >&2\nexit 1\n", encoding="utf-8")
    hook.chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "remote", "add", "origin", str(remote))
    (repo / "f").write_text("x\n", encoding="utf-8")
    _git(repo, "add", "f")
    _git(repo, "commit", "-q", "-m", "x")
    head = _git(repo, "rev-parse", "HEAD")
    ws = workspace(tmp_path, bin_dir)
    ws = Workspace(repo, env={**ws.env, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com",
                              "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.com"})
    model = PlaybackModel([command("git push origin HEAD:main"), command(bypass), "stop"])
    result = run_turn("push the change", model=model, tools=standard_tools(ws), unattended=True, clock=VirtualClock())
    first = result.steps[0].situation
    assert first is not None and first.kind is Kind.PERMISSION
    assert [s.dispatched for s in result.steps if not s.probe] == [True, False]
    assert _git(repo, "rev-parse", "HEAD") == head  # nothing was re-committed
    assert result.escalation is not None and any(bypass.split()[0] in r or "git" in r for r in result.escalation.refused)


def test_a_refused_pager_is_asked_with_its_non_interactive_form(tmp_path: Path, bin_dir: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "home").mkdir(exist_ok=True)
    _git(repo, "init", "-q")
    ws = Workspace(repo, env=workspace(tmp_path, bin_dir).env, terminal=True)
    model = PlaybackModel([command("git log"), command("git log --oneline"), command("git log -5"),
                           command("git log -3"), command("git log -2"), "done"])
    result = run_turn("show the history", model=model, tools=standard_tools(ws), unattended=True,
                      clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    # git(1): -P, --no-pager "Do not pipe Git output into a pager", an option before the subcommand
    assert "`git --no-pager log`" in result.escalation.user_action
    assert "Grant the permission" not in result.escalation.user_action


class _Challenge(http.server.BaseHTTPRequestHandler):
    """A challenge page as Cloudflare serves one (Cloudflare docs, "Detect a Challenge Page
    response": status 403 with the ``cf-mitigated: challenge`` header; the page titled "Just a
    moment...")."""

    def do_GET(self) -> None:
        self.send_response(403)
        self.send_header("Content-Type", "text/html; charset=UTF-8")
        self.send_header("cf-mitigated", "challenge")
        self.end_headers()
        self.wfile.write(b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
                         b"<noscript>Enable JavaScript and cookies to continue</noscript></body></html>\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def challenge_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Challenge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


def _browse_tool() -> Any:
    import urllib.error
    import urllib.request

    @tool(subject=lambda a: "browser")
    def browse(url: str) -> HttpResponse:
        """Open a page and return what the server sent."""
        try:
            with urllib.request.urlopen(url, timeout=10) as response:  # the test serves it on loopback
                return HttpResponse(response.status, response.read().decode(), dict(response.headers))
        except urllib.error.HTTPError as refused:
            return HttpResponse(refused.code, refused.read().decode(), dict(refused.headers))

    return browse


def test_a_challenge_page_asks_a_person_to_complete_it(challenge_url: str) -> None:
    model = PlaybackModel([*(("browse", {"url": f"{challenge_url}{n}"}) for n in range(6)), "done"])
    result = run_turn("read the page", model=model, tools=[_browse_tool()], unattended=True, clock=VirtualClock())
    assert result.status is TurnStatus.BLOCKED and result.escalation is not None
    assert result.escalation.interactive
    assert "challenge" in result.escalation.user_action and "person" in result.escalation.user_action
    assert "Grant the permission" not in result.escalation.user_action
