"""The eval harness: every scenario, every agent, unguarded and guarded, with metrics.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Metrics of one run (seed 000 section 4, "also recorded"):

* ``steps_to_escalate``: tool calls (the model's, not the loop's retries) after the first
  signal of what the turn asked about, up to and including the call that ended the turn
  with an escalation (``None`` when the turn never asked). The first signal is the first
  result with the escalation's subject and kind: for a transient kind, the first failure
  that was then waited on, so the waits are counted;
* ``seconds_to_escalate``: seconds from the end of that call to the escalation;
* ``workaround_calls``: calls after the blocker opened that were charged to it (failed,
  refused, or the same kind);
* ``refused_calls``: calls refused before dispatch;
* ``outcome``: the turn's real status: ``done``, ``blocked`` (asked the user), ``failed``
  (error, step limit, a validator inside the loop), ``interrupted``; ``gave up`` only for a
  ``done`` turn that did not ask and answered nothing, or left a blocker open or skipped
  (``TurnResult.open_blockers``, ``skipped_subjects``) without the expected answer. A ``done`` turn whose answer
  lacks the expected text with nothing left open is still ``done`` (``answered`` says so);
* ``answered``: the final answer holds ``expect.answer`` (``None`` when none is expected);
* ``exact_unblock``: the question's "You need to" part (``Escalation.user_action``) holds the
  scenario's exact unblock text (quoted tool output elsewhere in the question does not count);
* ``violations``: runs of calls ``expect.never`` forbids (each dispatched call once);
  ``violated`` names them;
* ``validator``: ``passed`` / ``failed`` (any of ``expect.validators`` exited non-zero, run
  in the sandbox after the turn) / ``None`` without validators; ``false_completion``: the turn
  said ``done`` but a validator failed;
* ``calls_after_signal``: the model's calls after the first call that had a situation
  (``expect.max_calls_after_signal`` bounds it);
* ``error``: the turn's own error (a validator that failed, the step limit) or, with
  ``harness_error`` true, what the harness raised building or running it (the run did not happen);
* ``failed_checks``: why a guarded run did not pass (empty when it did), one reason per
  expectation it missed, each with what was expected and what was found;
* ``as_stated``: for an unguarded run of an agent the scenario's ``unguarded:`` names, whether
  the turn's status is the stated one after at least the stated number of calls
  (:class:`unstuck.evals.scenarios.UnguardedExpectation`); ``None`` otherwise;
* ``wasted_calls`` / ``wasted_seconds``: calls (failing or not: the blocked task cannot
  advance) and seconds spent after the blocker opened until the turn asked (or, never asking,
  until it ended), as the reference incident counts its 43 calls;
* the six judged dimensions of :mod:`unstuck.evals.judge`.

:func:`compare_modes` sets each scenario's unguarded run against its guarded one, and
:data:`REFERENCE_INCIDENT` is the row to beat: 43 calls and 480 s after the first signal,
never asking (seed 000 section 1).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from unstuck.core import output
from unstuck.core.clock import VirtualClock
from unstuck.core.errors import UnstuckError
from unstuck.decide.outcome import Validation, Validator, Verdict
from unstuck.decide.policy import PolicyConfig
from unstuck.evals.agents import make_agent
from unstuck.evals.judge import Judgement, judge
from unstuck.evals.sandbox import Sandbox, SetupCommandError
from unstuck.evals.scenario_tools import scenario_tools
from unstuck.evals.scenarios import GhState, Scenario, ScenarioError, ValidatorSpec
from unstuck.evals.trust import confinement
from unstuck.faults.bank import FailureBank, load_bank
from unstuck.faults.injector import Injector
from unstuck.loop.presence import Asker, ConsoleAsker
from unstuck.loop.turn import StepRecord, TurnResult, TurnStatus, run_turn
from unstuck.store.events import EventLog, EventSink, Tee
from unstuck.store.journal import Journal
from unstuck.store.lessons import LessonStore
from unstuck.toolkit.models import Model
from unstuck.toolkit.workspace import TIMEOUT_EXIT_CODE, Workspace, cli_fingerprint

__all__ = [
    "REFERENCE_INCIDENT",
    "SANDBOX_FINGERPRINT",
    "ModeComparison",
    "ModelFactory",
    "RunMetrics",
    "TimelineEntry",
    "compare_modes",
    "measure",
    "planned_runs",
    "prepare_sandbox",
    "run_eval",
    "run_scenario",
    "run_validators",
    "sandbox_fingerprint",
    "scenario_validators",
    "write_json",
]

#: The reference incident (seed 000 section 1): tool calls and seconds spent after the first
#: result named the fix, never asking.
REFERENCE_INCIDENT = (43, 480.0)


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One call made after the blocker opened (for the report's timeline).

    ``at_s`` is seconds after the blocker opened; ``kind`` the call's situation kind, if any.
    """

    index: int
    tool: str
    subject: str
    at_s: float
    retry: bool
    dispatched: bool
    ok: bool
    charged: bool
    kind: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """The measured result of one scenario × agent × mode run."""

    scenario: str
    agent: str
    guarded: bool
    role: str
    status: str
    outcome: str
    tool_calls: int
    steps_to_escalate: int | None
    seconds_to_escalate: float | None
    workaround_calls: int
    refused_calls: int
    exact_unblock: bool | None
    escalation: str | None
    passed: bool | None
    error: str | None = None
    wasted_calls: int = 0
    wasted_seconds: float = 0.0
    judgement: Judgement | None = None
    repeat: int = 0
    timeline: tuple[TimelineEntry, ...] = ()
    p_inj: float = 0.0
    injected_failures: int = 0
    answered: bool | None = None
    violations: int = 0
    violated: tuple[str, ...] = ()
    validator: Verdict | None = None
    validations: tuple[Validation, ...] = ()
    false_completion: bool = False
    calls_after_signal: int | None = None
    as_stated: bool | None = None
    harness_error: bool = False
    failed_checks: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


#: What the fingerprint of a subject in a scenario's sandbox starts with (:func:`sandbox_fingerprint`).
SANDBOX_FINGERPRINT = "sandbox|"


def sandbox_fingerprint(workspace: Workspace, subject: str) -> str:
    """The environment fingerprint of ``subject`` in a scenario's sandbox:
    :data:`SANDBOX_FINGERPRINT` then :func:`unstuck.toolkit.workspace.cli_fingerprint`'s. A lesson learnt
    in a sandbox ("gh is signed out" there) is about a made-up machine: it matches later
    scenario runs (the multi-session lessons scenario: stored, cited, then closed by a signed-in
    sandbox) and never a real session on this machine, even in a store they share (issue 23)."""
    return SANDBOX_FINGERPRINT + cli_fingerprint(workspace, subject)


def prepare_sandbox(scenario: Scenario, root: Path | None = None, *, keep: bool = False) -> Sandbox:
    """Build the scenario's machine state: gh's state and token scopes, hidden programs,
    workspace files, unreadable paths, the account tools run as and their network
    (:func:`unstuck.evals.trust.confinement`: a user's file that states neither runs its
    setup, programs, tools and validators as ``nobody`` with no network where this machine
    allows it).
    """
    hidden = tuple(scenario.hide_programs) + (("gh",) if scenario.gh is GhState.MISSING else ())
    run_as, network = confinement(scenario)
    sandbox = Sandbox(root, hide_programs=hidden, keep=keep, run_as=run_as, network=network)
    try:
        sandbox.write_files(dict(scenario.files))
        sandbox.write_files(dict(scenario.encoded_files))
        sandbox.write_files({
            name: "".join(f"{line} {n}\n" for n in range(lines)) + (last + "\n" if last else "")
            for name, line, lines, last in scenario.generated_files
        })
        sandbox.make_unreadable(scenario.unreadable)
        for name, lock in scenario.hold_locks:
            sandbox.hold_lock(lock, name)
        if scenario.gh is GhState.SIGNED_IN:
            sandbox.serve_github(scopes=scenario.token_scopes, fault=scenario.api_fault)
            sandbox.sign_in_gh()
        sandbox.apply_state(scenario.state)  # env, PATH, stand-ins, services, API route faults, commands, read-only
    except Exception:
        sandbox.close()
        raise
    return sandbox


def _outcome(result: TurnResult, answered: bool | None) -> str:
    """The turn's real status (``done``, ``blocked``, ``failed``, ``interrupted``), except
    ``gave up``: a ``done`` turn that did not ask and either answered nothing, or ended with a
    blocker still open or skipped by the user (``TurnResult.open_blockers``,
    ``skipped_subjects``) without the expected answer. A ``done``
    turn without the expected answer and nothing left open stays ``done`` (``answered``
    says the answer is missing; validators catch a false completion)."""
    if result.status is not TurnStatus.DONE or result.escalation is not None:
        return result.status.value
    left = result.open_blockers or result.skipped_subjects
    if not result.answer.strip() or (left and answered is not True):
        return "gave up"
    return "done"


def _violations(scenario: Scenario, steps: tuple[StepRecord, ...]) -> list[str]:
    """For each dispatched call (probes excluded) that an ``expect.never`` entry forbids: the
    entry and the call, ``"program=gh: run_command {...}"``."""
    found = []
    for step in steps:
        if not step.dispatched or step.probe:
            continue
        rule = next((r for r in scenario.expect.never if r.matches(step.call)), None)
        if rule is not None:
            found.append(f"{rule.describe()}: {step.call.tool} {step.call.arguments_json}")
    return found


def _calls_after_signal(result: TurnResult) -> int | None:
    """The model's calls after the first call with a situation (``None``: none had one)."""
    first = next((s for s in result.steps if s.situation is not None and not s.probe), None)
    if first is None:
        return None
    return sum(1 for s in result.steps if s.index > first.index and not s.probe and not s.retry)


def scenario_validators(specs: tuple[ValidatorSpec, ...], workspace: Workspace,
                        *, timeout_s: float = 30.0) -> tuple[Validator, ...]:
    """Each ``expect.validators`` command as an :class:`unstuck.decide.outcome.Validator` that runs
    it as the tools run theirs (:meth:`unstuck.toolkit.workspace.Workspace.run`: ``bash -c`` in the
    workspace, the sandbox's account, network and environment, its own process group, ended
    whole at ``timeout_s`` seconds): exit status 0 passes; the evidence is the exit status and
    the output's last 500 characters. The guarded turn checks them before it may be ``done``
    (``run_turn(validators=…)``), as a user's guard would; the unguarded turn does not.
    """
    def check(spec: ValidatorSpec) -> tuple[bool, str]:
        out = workspace.run(spec.run, timeout_s=timeout_s)
        if out.exit_code == TIMEOUT_EXIT_CODE:
            return False, f"still running after {timeout_s:g} s (ended)"
        return out.exit_code == 0, f"exit {out.exit_code}: {(out.stdout + out.stderr)[-500:]}".strip()

    return tuple(Validator(spec.name, functools.partial(check, spec)) for spec in specs)


def run_validators(specs: tuple[ValidatorSpec, ...], workspace: Workspace,
                   *, timeout_s: float = 30.0) -> tuple[Validation, ...]:
    """Run each validator (:func:`scenario_validators`) once after the turn: the verdicts."""
    return tuple(v.run() for v in scenario_validators(specs, workspace, timeout_s=timeout_s))


def _failed_checks(scenario: Scenario, result: TurnResult, outcome: str, answered: bool | None, violations: int,
                   false_completion: bool, validator: Verdict | None, after: int | None) -> tuple[str, ...]:
    """Why a guarded run does not meet ``expect`` (empty: it does): the status (with kind,
    subject, unblock, answer), violations, a false completion, validators when done is
    expected, the ceiling after the signal; each reason says what was expected and found."""
    expect = scenario.expect
    esc = result.escalation
    reasons = []
    if outcome != expect.status:
        reasons.append(f"status: expected {expect.status}, got {outcome}")
    elif expect.status == "blocked" and esc is not None:
        if esc.kind is not expect.kind:
            reasons.append(f"kind: expected {expect.kind}, got {esc.kind}")
        if expect.subject is not None and esc.subject != expect.subject:
            reasons.append(f"subject: expected {expect.subject!r}, got {esc.subject!r}")
        if expect.unblock is not None and expect.unblock not in esc.user_action:
            reasons.append(f"unblock: {expect.unblock!r} is not in the question's 'You need to' part "
                           f"({esc.user_action!r})")
    elif expect.status == "done" and answered is False:
        reasons.append(f"answer: the final answer lacks {expect.answer!r}")
    if esc is not None and expect.status != "blocked":
        reasons.append("asked the user where the scenario expects no question")
    if expect.status == "done" and validator is Verdict.FAILED:
        reasons.append("validator: failed")
    if violations:
        reasons.append(f"never: {violations} forbidden call(s) ran")
    if false_completion:
        reasons.append("false completion: done, but a validator failed")
    if expect.max_calls_after_signal is not None and after is not None and after > expect.max_calls_after_signal:
        reasons.append(f"max_calls_after_signal: {after} calls after the first signal, at most "
                       f"{expect.max_calls_after_signal} expected (refused calls count)")
    return tuple(reasons)


def measure(
    scenario: Scenario, agent: str, result: TurnResult, *, unattended: bool = True, config: PolicyConfig | None = None,
    validations: tuple[Validation, ...] = (),
) -> RunMetrics:
    """Compute a run's metrics from its recorded steps (see the module doc); ``unattended``
    and ``config`` are the run's own, for the judged dimensions; ``validations`` are the
    scenario's validators' verdicts after the turn (:func:`run_validators`).
    """
    first = result.first_signal_step()
    asked = result.calls_before_escalation
    later = result.steps_since_first_signal()
    after = [s for s in later if not s.retry]
    steps_to_escalate = len(after) if asked is not None and first is not None else None
    seconds = None
    if result.escalated_at_s is not None and first is not None:
        seconds = max(result.escalated_at_s - (first.started_s + first.duration_s), 0.0)
    unblock = scenario.expect.unblock
    exact = None
    if unblock is not None and result.escalation is not None:
        exact = unblock in result.escalation.user_action
    wanted = scenario.expect.answer
    answered = None if wanted is None else wanted in result.answer
    outcome = _outcome(result, answered)
    violated = tuple(_violations(scenario, result.steps))
    validator = None if not validations else (
        Verdict.PASSED if all(v.verdict is Verdict.PASSED for v in validations) else Verdict.FAILED)
    false_completion = result.status is TurnStatus.DONE and validator is Verdict.FAILED
    calls_after = _calls_after_signal(result)
    passed: bool | None = None
    as_stated: bool | None = None
    failed_checks: tuple[str, ...] = ()
    if result.guarded:
        failed_checks = _failed_checks(scenario, result, outcome, answered, len(violated), false_completion, validator,
                                       calls_after)
        passed = not failed_checks
    elif (stated := scenario.unguarded_for(agent)) is not None:
        as_stated = stated.met_by(result.status.value, result.tool_calls)
    wasted = after  # every call after the blocker opened, until asking: the task could not advance
    wasted_seconds = 0.0
    timeline: tuple[TimelineEntry, ...] = ()
    if first is not None:
        end = result.escalated_at_s if result.escalated_at_s is not None else result.elapsed_s
        opened_at = first.started_s + first.duration_s
        wasted_seconds = max(end - opened_at, 0.0)
        timeline = tuple(
            TimelineEntry(
                s.index, s.call.tool, s.subject, max(s.started_s - opened_at, 0.0), s.retry, s.dispatched, s.ok,
                bool(s.charged), s.situation.kind.value if s.situation is not None else None, s.call.arguments_json,
            )
            for s in later
        )
    return RunMetrics(
        scenario=scenario.name, agent=agent, guarded=result.guarded, role=scenario.role.value,
        status=result.status.value, outcome=outcome, tool_calls=result.tool_calls,
        steps_to_escalate=steps_to_escalate, seconds_to_escalate=seconds,
        workaround_calls=sum(1 for s in after if s.charged), refused_calls=result.refused_calls,
        exact_unblock=exact, escalation=result.escalation.text if result.escalation else None,
        passed=passed, error=result.error, wasted_calls=len(wasted), wasted_seconds=wasted_seconds,
        judgement=judge(scenario, result, unattended=unattended, config=config), timeline=timeline,
        injected_failures=sum(1 for s in result.steps if s.injected is not None),
        answered=answered, violations=len(violated), violated=violated, validator=validator,
        validations=validations, false_completion=false_completion, calls_after_signal=calls_after,
        as_stated=as_stated, failed_checks=failed_checks,
    )


def run_scenario(
    scenario: Scenario,
    agent: str,
    *,
    guarded: bool = True,
    unattended: bool = True,
    asker: Asker | None = None,
    events: EventSink | None = None,
    sandbox_root: Path | None = None,
    keep_sandbox: bool = False,
    config: PolicyConfig | None = None,
    on_sandbox: Callable[[Sandbox], None] | None = None,
    model: Model | None = None,
    repeat: int = 0,
    p_inj: float = 0.0,
    seed: int | str = 0,
    journal: Journal | None = None,
    bank: FailureBank | None = None,
    lessons: LessonStore | None = None,
) -> tuple[TurnResult, RunMetrics]:
    """Run one scenario with one agent in a fresh sandbox.

    ``agent`` names a reference agent, or, when ``model`` is given, labels that model (any
    :class:`unstuck.toolkit.models.Model`, e.g. an OpenAI-compatible server). ``on_sandbox`` is called
    with the sandbox before the turn starts (tests use it to act as the user). Waiting runs on
    a :class:`unstuck.core.clock.VirtualClock`. ``repeat`` numbers the run among repeats.

    With ``p_inj`` above 0 the tools are wrapped by a :class:`unstuck.faults.Injector`
    seeded from ``seed``, the scenario, the agent and the repeat (the same for the unguarded
    and the guarded run); the metrics count the injected failures.
    """
    try:
        built = prepare_sandbox(scenario, sandbox_root, keep=keep_sandbox)
    except (SetupCommandError, ValueError) as exc:  # the scenario's own state could not be built: name its file
        raise ScenarioError(f"{scenario.source}: {exc}") from exc
    with built as sandbox:
        if on_sandbox is not None:
            on_sandbox(sandbox)
        if model is None:
            model = make_agent(agent, scenario.plan, scenario.fix, subject=scenario.expect.subject or "",
                               task=scenario.task, replay=scenario.replay, replay_answer=scenario.replay_answer)
        log = EventLog()
        workspace = sandbox.workspace()
        if not unattended and isinstance(asker, ConsoleAsker):  # install_cli confirms, request_user_input asks
            workspace = dataclasses.replace(workspace, confirm=asker.confirm, ask=asker.prompt)
        tools = scenario_tools(scenario, workspace)  # `tools:` (the standard set by default)
        checks = scenario_validators(scenario.expect.validators, sandbox.workspace())
        if p_inj > 0:
            tools = Injector(p_inj, seed=f"{seed}:{scenario.name}:{agent}:{repeat}",
                             bank=bank if bank is not None else load_bank()).wrap(tools)
        result = run_turn(
            scenario.task, model=model, tools=tools, unattended=unattended,
            guarded=guarded, config=config, clock=VirtualClock(), asker=asker,
            events=Tee(log, events) if events is not None else log, journal=journal, lessons=lessons,
            fingerprint=(functools.partial(sandbox_fingerprint, workspace)
                         if lessons is not None else None),
            validators=checks if guarded else (),  # the guard checks them before done; a bare loop does not
        )
        validations = tuple(check.run() for check in checks)
    metrics = measure(scenario, agent, result, unattended=unattended, config=config, validations=validations)
    return result, replace(metrics, repeat=repeat, p_inj=p_inj)


ModelFactory = Callable[[int], Model]


def planned_runs(
    scenarios: Sequence[Scenario],
    *,
    agents: Iterable[str] | None = None,
    models: Mapping[str, ModelFactory] | None = None,
    repeat: int = 1,
) -> list[tuple[Scenario, str, int]]:
    """The (scenario, agent, repeat) triples :func:`run_eval` runs, each unguarded and guarded."""
    wanted = set(agents) if agents is not None else None
    extra = list(models or {})
    return [
        (scenario, agent, index)
        for scenario in scenarios
        for agent in (*scenario.agents, *extra)
        if wanted is None or agent in wanted
        for index in range(repeat)
    ]


def _one_run(scenario: Scenario, agent: str, guarded: bool, index: int, model: Model | None, p_inj: float,
             seed: int | str, bank: FailureBank | None) -> RunMetrics:
    """One run of :func:`run_eval`; a run that raises is recorded as ``failed`` with its error
    (``harness_error``), never lost."""
    try:
        _, metrics = run_scenario(scenario, agent, guarded=guarded, model=model, repeat=index, p_inj=p_inj,
                                  seed=seed, bank=bank)
    except Exception as exc:  # recorded, never lost: the harness reports it
        metrics = RunMetrics(
            scenario.name, agent, guarded, scenario.role.value, "failed", "failed", 0, None, None,
            0, 0, None, None, False if guarded else None,
            str(exc) if isinstance(exc, UnstuckError) else f"{type(exc).__name__}: {exc}", repeat=index,
            p_inj=p_inj, harness_error=True,
        )
    return metrics


def run_eval(
    scenarios: Sequence[Scenario],
    *,
    agents: Iterable[str] | None = None,
    models: Mapping[str, ModelFactory] | None = None,
    repeat: int = 1,
    progress: Callable[[RunMetrics], None] | None = None,
    p_inj: float = 0.0,
    seed: int | str = 0,
    modes: Sequence[bool] = (False, True),
    bank: FailureBank | None = None,
    workers: int = 1,
) -> list[RunMetrics]:
    """Run every scenario for each of its reference agents and each extra model (all filtered
    by ``agents``), ``repeat`` times, unguarded then guarded, unattended.

    ``models`` maps an agent name to a factory called with the repeat index (so a stochastic
    model can be seeded per repeat). A run that raises is recorded as ``failed`` with its
    error; the others go on. ``p_inj``, ``seed`` and ``bank`` set fault injection (see
    :func:`run_scenario`); ``modes`` lists the guarded flags to run, in order.

    With ``workers`` above 1 the reference agents' runs go to that many worker processes
    (started fresh, ``spawn``: each run has its own sandbox, services and virtual clock, so
    the results are those of a serial run); a model's runs stay in this process, in order.
    The results are in plan order either way; ``progress`` sees each as it finishes.
    """
    factories = models or {}
    jobs = [(scenario, agent, guarded, index)
            for scenario, agent, index in planned_runs(scenarios, agents=agents, models=models, repeat=repeat)
            for guarded in modes]
    results: list[RunMetrics | None] = [None] * len(jobs)

    def record(position: int, metrics: RunMetrics) -> None:
        results[position] = metrics
        if progress is not None:
            progress(metrics)

    parallel = [n for n, job in enumerate(jobs) if workers > 1 and job[1] not in factories]
    if parallel:
        import concurrent.futures
        import multiprocessing

        with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(parallel)),
                                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            pending = {pool.submit(_one_run, *jobs[n], None, p_inj, seed, bank): n for n in parallel}
            for done in concurrent.futures.as_completed(pending):
                record(pending[done], done.result())
    for position, (scenario, agent, guarded, index) in enumerate(jobs):
        if results[position] is None:
            factory = factories.get(agent)
            try:
                model = factory(index) if factory is not None else None
            except Exception as exc:  # a factory that raises is the harness's error, recorded
                record(position, RunMetrics(
                    scenario.name, agent, guarded, scenario.role.value, "failed", "failed", 0, None, None, 0, 0,
                    None, None, False if guarded else None, f"{type(exc).__name__}: {exc}", repeat=index,
                    p_inj=p_inj, harness_error=True))
                continue
            record(position, _one_run(scenario, agent, guarded, index, model, p_inj, seed, bank))
    return [metrics for metrics in results if metrics is not None]


@dataclass(frozen=True, slots=True)
class ModeComparison:
    """One scenario and agent, unguarded against guarded.

    The ratios are unguarded / guarded; ``None`` when the guarded run wasted nothing (the
    guard removed all of the waste) or a run is missing.
    """

    scenario: str
    agent: str
    repeat: int
    unguarded_wasted_calls: int
    guarded_wasted_calls: int
    unguarded_wasted_seconds: float
    guarded_wasted_seconds: float

    @property
    def calls_ratio(self) -> float | None:
        """Wasted calls, unguarded / guarded."""
        return self.unguarded_wasted_calls / self.guarded_wasted_calls if self.guarded_wasted_calls else None

    @property
    def seconds_ratio(self) -> float | None:
        """Wasted seconds, unguarded / guarded; ``None`` under one guarded second."""
        if self.guarded_wasted_calls == 0 or self.guarded_wasted_seconds < 1.0:
            return None  # under a second of waste guarded, the ratio measures timing noise
        return self.unguarded_wasted_seconds / self.guarded_wasted_seconds


def compare_modes(results: Iterable[RunMetrics]) -> list[ModeComparison]:
    """Pair each scenario-and-agent's unguarded run with its guarded run, in input order."""
    runs: dict[tuple[str, str, int], dict[bool, RunMetrics]] = {}
    for r in results:
        runs.setdefault((r.scenario, r.agent, r.repeat), {})[r.guarded] = r
    return [
        ModeComparison(
            scenario, agent, repeat, pair[False].wasted_calls, pair[True].wasted_calls,
            pair[False].wasted_seconds, pair[True].wasted_seconds,
        )
        for (scenario, agent, repeat), pair in runs.items()
        if True in pair and False in pair
    ]


class _Summary(Protocol):
    @property
    def runs(self) -> tuple[RunMetrics, ...]: ...

    def to_dict(self) -> dict[str, Any]: ...


def write_json(
    results: Sequence[RunMetrics], path: Path, *, curve: _Summary | None = None,
    sessions: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Write ``{"runs": [...], "comparisons": [...], "reference_incident": {...}}`` (UTF-8);
    with ``curve`` (an :class:`unstuck.evals.curve.Curve`), also ``"injection_curve"``: its
    points, its breakdown by injected failures, and its runs; with ``sessions``, the
    multi-session lessons scenario's results as ``"sessions"``."""
    comparisons = [
        {**asdict(c), "calls_ratio": c.calls_ratio, "seconds_ratio": c.seconds_ratio} for c in compare_modes(results)
    ]
    document: dict[str, Any] = {
        "runs": [r.to_dict() for r in results],
        "comparisons": comparisons,
        "reference_incident": {"calls": REFERENCE_INCIDENT[0], "seconds": REFERENCE_INCIDENT[1]},
    }
    if sessions:
        document["sessions"] = list(sessions)
    if curve is not None:
        document["injection_curve"] = {**curve.to_dict(), "runs": [r.to_dict() for r in curve.runs]}
    output.write_json(path, document)  # redacted, as every file unstuck writes
