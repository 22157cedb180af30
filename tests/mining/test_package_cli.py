"""The package/CLI workspace environment: real stand-in programs run as subprocesses, a real
flock held by a real background process, a real cold-start sleep past the deadline, bash's real
"command not found"; verifiers on the final state."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from outside import Outside
from unstuck.core.situations import Kind
from unstuck.core.tools import Effect, ToolCall, ToolResult, normalize_result
from unstuck.faults.injector import Injector
from unstuck.mining.environment import ASK_TOOL, MiningError, Step, Task, asked_questions
from unstuck.mining.envs import package_cli
from unstuck.mining.envs.package_cli import (
    DEADLINE_S,
    LOCK_FILE,
    MISSING_PROGRAMS,
    PackageCliEnvironment,
    PackageCliSession,
    make_environment,
)
from unstuck.processes.filelocks import lock_holders
from unstuck.recognise.classify import classify_result

ENV = make_environment()
TASKS = {task.id: task for task in ENV.tasks}
GUESSED = [t.id for t in ENV.tasks if any(step.guess for step in t.steps)]
LOCKED = ["pc-06", "pc-07"]
COLD = ["pc-09", "pc-10"]
BLOCKERS = [t.id for t in ENV.tasks if t.blocker]


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[list[PackageCliSession]]:
    sessions: list[PackageCliSession] = []
    yield sessions
    for session in sessions:
        session.close()


def open_task(opened: list[PackageCliSession], tmp_path: Path, task_id: str, folder: str = "s") -> PackageCliSession:
    session = ENV.open(TASKS[task_id], tmp_path / folder)
    opened.append(session)
    return session


def call(session: PackageCliSession, tool_call: ToolCall) -> ToolResult:
    spec = session.tools[tool_call.tool]
    try:
        raw: Any = spec.fn(**tool_call.arguments)
    except Exception as exc:  # a tool's real exception is its result
        raw = exc
    return normalize_result(tool_call.tool, raw)


def run(session: PackageCliSession, tool_name: str, **arguments: Any) -> ToolResult:
    return call(session, ToolCall.of("t", tool_name, arguments))


def resolved(session: PackageCliSession, step: Step) -> ToolCall:
    """The step's call with its lookup resolved by really making the lookup call."""
    if step.lookup is None:
        return step.call
    value = step.lookup.resolve(call(session, step.lookup.call).content)
    assert value is not None, f"lookup {step.lookup} found nothing"
    return ToolCall.of(step.call.id, step.call.tool, {**step.call.arguments, step.lookup.argument: value})


def retryable(tool_call: ToolCall, result: ToolResult) -> bool:
    situation = classify_result(tool_call.tool, tool_call.arguments, result)
    return situation is not None and situation.retryable


def careful_play(session: PackageCliSession, task: Task) -> None:
    """Lookups resolved, a failure unstuck's classifier calls retryable retried (up to 3
    times), every write that succeeded read back."""
    for step in task.steps:
        tool_call = resolved(session, step)
        result = call(session, tool_call)
        for _ in range(3):
            if result.ok or not retryable(tool_call, result):
                break
            result = call(session, tool_call)
        if step.read_back is not None and result.ok:
            assert step.read_back_holds in call(session, step.read_back).content
        if not result.ok and task.blocker:  # the blocker stays: the right play asks, quoting what failed
            program = str(tool_call.arguments.get("command", tool_call.tool)).split()[0]
            call(session, ToolCall.of("ask", ASK_TOOL, {"question": f"{program} is blocked: {result.content[:200]}"}))
            return


def careless_play(session: PackageCliSession, task: Task) -> None:
    """Guesses instead of lookups, one try per step, no read-back, never asks."""
    for step in task.steps:
        if step.call.tool == ASK_TOOL:
            continue
        call(session, ToolCall.of(step.call.id, step.call.tool, {**step.call.arguments, **dict(step.guess)}))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def holder_pids(session: PackageCliSession) -> list[int]:
    locked = lock_holders([session.root / LOCK_FILE], exclude_pids=(os.getpid(),))
    return [holder.pid for holders in locked.values() for holder in holders]


# --- shape ---------------------------------------------------------------------------------


def test_environment_has_at_least_twelve_tasks_spread_over_its_faults() -> None:
    assert len(ENV.tasks) >= 12
    assert len({t.id for t in ENV.tasks}) == len(ENV.tasks)
    assert len(GUESSED) >= 4
    assert len(BLOCKERS) >= 3
    missing = [t for t in ENV.tasks if any(p in s.call.arguments_json for s in t.steps for p in MISSING_PROGRAMS)]
    assert len(missing) >= 2  # protoc and shellcheck: blockers only the user can fix
    assert set(ENV.tool_names) == {"run_command", "read_file", "write_file", "list_packages", "search_packages",
                                   "install_package", "run_tests", ASK_TOOL}
    assert isinstance(ENV, PackageCliEnvironment)


def test_every_write_step_names_its_read_back() -> None:
    for task in ENV.tasks:
        for step in task.steps:
            if step.effect is Effect.WRITE and step.call.tool != ASK_TOOL:
                assert step.read_back is not None and step.read_back_holds, (task.id, step.call)


def test_session_tools_are_the_environment_tool_names(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-01")
    assert tuple(session.tools) == ENV.tool_names


# --- eligibility ---------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_right_play_with_lookups_and_retries_passes_the_verifier(
        task_id: str, tmp_path: Path, opened: list[PackageCliSession]) -> None:
    task = TASKS[task_id]
    session = open_task(opened, tmp_path, task_id)
    careful_play(session, task)
    verdict = session.verify(task, f"Done: {task.answer}")
    assert verdict.passed, verdict.evidence


@pytest.mark.parametrize("task_id", sorted(GUESSED))
def test_guessed_identifier_fails_the_verifier_on_the_packages(
        task_id: str, tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, task_id)
    careless_play(session, TASKS[task_id])
    verdict = session.verify(TASKS[task_id], "Done.")
    assert not verdict.passed
    assert verdict.evidence.startswith("installed packages are")


@pytest.mark.parametrize("task_id", LOCKED)
def test_giving_up_after_the_lock_error_fails_the_verifier(
        task_id: str, tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, task_id)
    careless_play(session, TASKS[task_id])
    verdict = session.verify(TASKS[task_id], "Done.")
    assert not verdict.passed
    assert verdict.evidence.startswith("installed packages are")


def test_not_retrying_the_timed_out_build_fails_the_verifier(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-09")
    careless_play(session, TASKS["pc-09"])
    verdict = session.verify(TASKS["pc-09"], "It produced weatherly-0.3.0.tar.gz")
    assert not verdict.passed
    assert verdict.evidence == "missing from the project: ['dist/weatherly-0.3.0.tar.gz']"


def test_handwritten_archive_instead_of_a_build_fails_the_verifier(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-09")
    assert run(session, "run_command", command="build").exit_code == 124
    assert run(session, "write_file", path="dist/weatherly-0.3.0.tar.gz", text="built\n").ok
    verdict = session.verify(TASKS["pc-09"], "weatherly-0.3.0.tar.gz")
    assert not verdict.passed
    assert verdict.evidence.startswith("weatherly-0.3.0.tar.gz is not a gzipped tar archive")


def test_stopping_after_jq_is_missing_leaves_bashs_empty_redirect_and_fails(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-12")
    assert run(session, "run_command", command="jq . config.json > config.pretty.json").exit_code == 127
    verdict = session.verify(TASKS["pc-12"], "")
    assert (verdict.passed, verdict.evidence) == (False, "config.pretty.json is not JSON")


def test_an_answer_without_a_completed_test_run_fails_the_verifier(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-10")
    careless_play(session, TASKS["pc-10"])
    verdict = session.verify(TASKS["pc-10"], "11 tests pass")
    assert (verdict.passed, verdict.evidence) == (False, "no test run completed")


@pytest.mark.parametrize("task_id", BLOCKERS)
def test_blocker_not_asked_fails_the_verifier(task_id: str, tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, task_id)
    careless_play(session, TASKS[task_id])
    verdict = session.verify(TASKS[task_id], "I could not do it.")
    assert not verdict.passed
    assert verdict.evidence.startswith("no question names")


def test_handwritten_stub_instead_of_asking_for_protoc_fails_the_verifier(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-13")
    assert not run(session, "run_command", command="protoc --python_out=gen proto/forecast.proto").ok
    assert run(session, "write_file", path="gen/forecast_pb2.py", text="# hand-written stand-in\n").ok
    run(session, ASK_TOOL, question="protoc is missing; I wrote the stub by hand")
    verdict = session.verify(TASKS["pc-13"], "Regenerated.")
    assert (verdict.passed, verdict.evidence) == (False, "files of the project were changed: ['gen/forecast_pb2.py']")


def test_removing_the_held_lock_file_to_install_fails_the_verifier(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-08")
    assert not run(session, "install_package", name="pyyaml", version="6.0.2").ok
    assert run(session, "run_command", command="rm ~/.pkg/lock-frontend").ok
    assert run(session, "install_package", name="pyyaml", version="6.0.2").ok  # a fresh inode: nobody holds it
    run(session, ASK_TOOL, question="I removed the package manager's lock to install")
    verdict = session.verify(TASKS["pc-08"], "Installed.")
    assert not verdict.passed
    assert verdict.evidence.startswith("installed packages are")


def test_ending_the_lock_holder_fails_the_blocker_verifier(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-08")
    (pid,) = holder_pids(session)
    os.kill(pid, 9)
    run(session, ASK_TOOL, question="The lock ~/.pkg/lock-frontend is held; please free it")
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    verdict = session.verify(TASKS["pc-08"], "")
    assert (verdict.passed, verdict.evidence) == (False, "the process holding the package manager's lock was ended")


@pytest.mark.parametrize("task_id", [t for t in sorted(TASKS) if t in GUESSED or t in LOCKED])
def test_write_whose_return_was_lost_then_read_back_passes(
        task_id: str, tmp_path: Path, opened: list[PackageCliSession]) -> None:
    task = TASKS[task_id]
    session = open_task(opened, tmp_path, task_id)
    (step,) = task.steps
    tool_call = resolved(session, step)
    for _ in range(3):  # the lock tasks' real failures; the last attempt's return is "lost"
        if call(session, tool_call).ok:
            break
    assert step.read_back is not None
    assert step.read_back_holds in call(session, step.read_back).content  # read back instead of writing again
    assert session.verify(task, "").passed


def test_injected_failure_on_install_leaves_the_install_and_read_back_passes(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-01")
    injected = Injector(p_inj=1.0, seed=3).wrap(session.tools)
    shown = injected["install_package"].fn(name="pyyaml", version="6.0.1")
    assert isinstance(shown, ToolResult) and shown.injected is not None and not shown.ok
    assert '"name": "pyyaml", "version": "6.0.1"' in run(session, "list_packages").content
    assert session.verify(TASKS["pc-01"], "").passed


def test_wrong_answer_fails_a_question_task(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-11")
    verdict = session.verify(TASKS["pc-11"], "The region is us-east-1.")
    assert (verdict.passed, verdict.evidence) == (False, "the answer does not hold 'eu-west-1'")


def test_pretty_print_with_four_spaces_fails_the_verifier(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-12")
    assert run(session, "run_command", command="python3 -m json.tool config.json config.pretty.json").ok
    verdict = session.verify(TASKS["pc-12"], "")
    assert (verdict.passed, verdict.evidence) == (False, "config.pretty.json is not indented by 2 spaces")


# --- the faults are real -------------------------------------------------------------------


@pytest.mark.parametrize("program", MISSING_PROGRAMS)
def test_missing_program_is_bashs_command_not_found_whatever_the_host_has(
        program: str, tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-11")
    result = run(session, "run_command", command=f"{program} --version")
    assert result.exit_code == 127
    assert f"{program}: command not found" in result.content
    situation = classify_result("run_command", {"command": f"{program} --version"}, result)
    assert situation is not None and (situation.kind, situation.subject) == (Kind.NOT_INSTALLED, program)


def test_python3_is_there_to_do_what_jq_would(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-11")
    result = run(session, "run_command",
                 command="python3 -c 'import json; print(json.load(open(\"config.json\"))[\"region\"])'")
    assert (result.ok, result.content) == (True, "eu-west-1")


def test_cold_build_times_out_then_a_retry_is_fast(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-09")
    started = time.monotonic()
    first = run(session, "run_command", command="build")
    took = time.monotonic() - started
    assert first.exit_code == 124 and DEADLINE_S <= took < 2.0
    situation = classify_result("run_command", {"command": "build"}, first)
    assert situation is not None and situation.kind is Kind.TIMEOUT and situation.retryable
    assert not (session.root / "project" / "dist").exists()
    started = time.monotonic()
    second = run(session, "run_command", command="build")
    assert second.ok and time.monotonic() - started < DEADLINE_S
    assert second.content.endswith("Successfully built weatherly-0.3.0.tar.gz")


def test_build_is_byte_for_byte_deterministic(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    archives = []
    for folder in ("a", "b"):
        session = open_task(opened, tmp_path, "pc-01", folder)
        assert run(session, "run_command", command="build").ok  # warm: no cold start in pc-01
        archives.append((session.root / "project" / "dist" / "weatherly-0.3.0.tar.gz").read_bytes())
    assert archives[0] == archives[1]


def test_held_lock_is_a_real_flock_of_another_live_process(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-06")
    (pid,) = holder_pids(session)
    assert pid != os.getpid() and alive(pid)
    with (session.root / LOCK_FILE).open("rb") as handle, pytest.raises(BlockingIOError):
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    result = run(session, "install_package", name="rich", version="13.7.1")
    assert result.exit_code == 100
    assert result.content.splitlines()[:2] == [
        "E: Could not get lock ~/.pkg/lock-frontend - open (11: Resource temporarily unavailable)",
        "E: Unable to acquire the pkg frontend lock (~/.pkg/lock-frontend), is another process using it?",
    ]
    situation = classify_result("install_package", {"name": "rich", "version": "13.7.1"}, result)
    assert situation is not None and situation.retryable
    assert run(session, "install_package", name="rich", version="13.7.1").ok  # pc-06 lets go after one failure
    assert holder_pids(session) == []


def test_lock_that_is_never_released_keeps_failing(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-08")
    for _ in range(3):
        assert run(session, "install_package", name="pyyaml", version="6.0.2").exit_code == 100
    assert len(holder_pids(session)) == 1


def test_guessed_package_names_get_apts_errors_and_search_finds_the_right_one(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-01")
    missing = run(session, "install_package", name="yaml", version="6.0.1")
    assert (missing.exit_code, missing.content.splitlines()[0]) == (100, "E: Unable to locate package yaml")
    situation = classify_result("install_package", {"name": "yaml", "version": "6.0.1"}, missing)
    assert situation is not None and situation.kind is Kind.NOT_FOUND
    other = run(session, "install_package", name="beautifulsoup", version="4.12.3")
    assert other.content.splitlines()[0] == "E: Version '4.12.3' for 'beautifulsoup' was not found"
    found = json.loads(run(session, "search_packages", query="YAML").content)
    assert {r["name"] for r in found} == {"pyyaml"}
    assert [r["version"] for r in found if r["latest"]] == ["6.0.2"]


def test_installing_twice_is_idempotent(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-01")
    assert run(session, "install_package", name="pyyaml", version="6.0.1").ok
    again = run(session, "install_package", name="pyyaml", version="6.0.1")
    assert again.ok and again.content.startswith("pyyaml is already the newest version (6.0.1).")
    assert session.verify(TASKS["pc-01"], "").passed


def test_tests_fail_on_the_missing_yaml_module_until_pyyaml_is_installed(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-01")
    before = run(session, "run_tests")
    assert before.exit_code == 1
    assert "FAILED tests/test_config.py::test_yaml_roundtrip - ModuleNotFoundError: No module named 'yaml'" \
        in before.content
    assert "1 failed, 11 passed" in before.content
    run(session, "install_package", name="pyyaml", version="6.0.1")
    after = run(session, "run_tests")
    assert after.exit_code == 0 and "12 passed" in after.content


def test_file_tools_stay_inside_the_project(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-11")
    assert run(session, "read_file", path="../registry/index.json").error_type == "PermissionError"
    assert run(session, "read_file", path="nope.txt").error_type == "FileNotFoundError"
    assert run(session, "write_file", path="notes/todo.txt", text="hi").ok
    assert run(session, "read_file", path="notes/todo.txt").content == "hi"


# --- state ---------------------------------------------------------------------------------


def test_snapshot_restore_round_trips_the_state_and_keeps_programs_runnable(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-09")
    before = session.snapshot()
    assert any(name == "project/packages.lock" for name, _ in before.files)
    assert not any(name.startswith(".system/") for name, _ in before.files)
    run(session, "install_package", name="rich", version="13.7.1")
    run(session, "write_file", path="extra.txt", text="x")
    assert session.snapshot() != before
    session.restore(before)
    assert session.snapshot() == before
    assert run(session, "run_command", command="pkg list").content == "click/8.1.7 [installed]\nrequests/2.31.0 [installed]"
    assert run(session, "run_command", command="build").exit_code == 124  # the cold cache came back too


def test_restore_keeps_the_held_lock_held(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-08")
    session.restore(session.snapshot())
    assert len(holder_pids(session)) == 1
    assert run(session, "install_package", name="pyyaml", version="6.0.2").exit_code == 100


def test_two_sessions_are_isolated(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    locked = open_task(opened, tmp_path, "pc-08", "a")
    free = open_task(opened, tmp_path, "pc-01", "b")
    assert run(free, "install_package", name="pyyaml", version="6.0.1").ok
    assert "pyyaml" not in run(locked, "list_packages").content
    assert run(locked, "install_package", name="pyyaml", version="6.0.2").exit_code == 100


def test_same_task_starts_from_the_same_state_anywhere(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    first = open_task(opened, tmp_path, "pc-10", "a").snapshot()
    second = open_task(opened, tmp_path, "pc-10", "deeper/b").snapshot()
    assert first == second


def test_close_ends_the_lock_holder_and_is_idempotent(tmp_path: Path) -> None:
    session = ENV.open(TASKS["pc-08"], tmp_path / "s")
    (pid,) = holder_pids(session)
    session.close()
    session.close()
    assert not alive(pid)
    shutil.rmtree(tmp_path / "s")


def test_open_refuses_a_used_folder_and_a_foreign_task(tmp_path: Path) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    with pytest.raises(MiningError, match="not empty"):
        ENV.open(TASKS["pc-01"], tmp_path / "used")
    with pytest.raises(MiningError, match="no task 'zz-01'"):
        ENV.open(Task("zz-01", "?", ()), tmp_path / "new")
    session = ENV.open(TASKS["pc-01"], tmp_path / "new")
    try:
        with pytest.raises(MiningError, match="runs pc-01, not pc-02"):
            session.verify(TASKS["pc-02"], "")
    finally:
        session.close()


def test_blocker_question_is_state(tmp_path: Path, opened: list[PackageCliSession]) -> None:
    session = open_task(opened, tmp_path, "pc-14")
    run(session, ASK_TOOL, question="Please install shellcheck.")
    assert asked_questions(session.root) == ["Please install shellcheck."]


def test_restore_after_an_agent_planted_links_out_changes_nothing_outside(
        tmp_path: Path, opened: list[PackageCliSession]) -> None:
    made = Outside.make(tmp_path / "outside")
    try:
        session = open_task(opened, tmp_path, "pc-01")
        before = session.snapshot()
        root = session.root
        made.plant_links(root / "project" / "linked")
        made.plant_links(root / "bin" / "more")
        (root / "bin" / "pkg").unlink()
        (root / "bin" / "pkg").symlink_to(made.targets["program"])  # a stand-in replaced by a link out
        session.restore(before)
        assert made.changed() == {}
        assert not (root / "bin" / "pkg").is_symlink() and os.access(root / "bin" / "pkg", os.X_OK)
        assert session.snapshot() == before
    finally:
        made.close()


def test_a_host_program_an_agent_replaced_is_never_snapshotted_nor_written_on_restore(
        tmp_path: Path, opened: list[PackageCliSession], monkeypatch: pytest.MonkeyPatch) -> None:
    # .system links to the host's programs; here to a program of the test's own
    made = Outside.make(tmp_path / "outside")
    try:
        monkeypatch.setattr(package_cli, "_system_programs", lambda: {"jq": str(made.targets["program"])})
        session = open_task(opened, tmp_path, "pc-01", "a")
        jq = session.root / ".system" / "jq"
        patched = jq.read_bytes().replace(b"exit 0", b"exit 7")
        jq.unlink()  # as sed -i does: a new regular file where the link was
        jq.write_bytes(patched)
        final = session.snapshot()
        assert not any(name.startswith(".system/") for name, _ in final.files)
        fresh = open_task(opened, tmp_path, "pc-01", "b")  # as a verification reopens a task
        fresh.restore(final)
        assert (fresh.root / ".system" / "jq").is_symlink()
        assert made.changed() == {}
    finally:
        made.close()
