"""One rollout: an agent attempts a task in a fresh session under injected noise (seed 003,
"Minimal Causal Code", ``rollout``).

The session's tools are wrapped twice: first so that the whole state is snapshotted *before*
every call (the trace keeps it), then by :class:`unstuck.faults.injector.Injector`, which lets
the real tool run and replaces its return with probability ``p_inj`` (replacing a return never
rolls back the tool's state). The turn runs through :func:`unstuck.loop.turn.run_turn` unguarded and
unattended on a virtual clock: the guard only observes and records the situation of every
result, so failures show.

A :class:`RolloutSpec` names everything a rollout needs (environment, task, agent, seed,
``p_inj``, ``max_turns``, rules) and is picklable; :func:`run_spec` rebuilds the rollout from
it in any process, so the same spec gives the same trace anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from unstuck.core.clock import VirtualClock
from unstuck.core.tools import ToolResult
from unstuck.decide.outcome import StepRecord
from unstuck.faults.bank import FailureBank, load_bank
from unstuck.faults.injector import Injector
from unstuck.loop.turn import run_turn
from unstuck.mining.agents import ModelSpec, build_agent, profile
from unstuck.mining.environment import Environment, MiningError, Session, Snapshot, Task
from unstuck.mining.rules import Rule
from unstuck.mining.trace import Trace, TraceStep
from unstuck.toolkit.models import Model
from unstuck.toolkit.specs import Toolset, ToolSpec

__all__ = ["DEFAULT_MAX_TURNS", "RolloutSpec", "check_spec", "find_task", "injection_seed", "resolve_environment",
           "rollout", "run_spec"]

#: Model replies a rollout may take before the turn fails (each scripted reply is one call).
DEFAULT_MAX_TURNS = 30


def injection_seed(seed: int | str, environment: str, task: str, agent: str) -> str:
    """The injector's seed for one rollout: ``"{seed}:{environment}:{task}:{agent}"``, so each
    (task, agent) pair gets its own noise, the same for the same seed anywhere."""
    return f"{seed}:{environment}:{task}:{agent}"


class _Snapshots:
    """Wraps a session's tools so that the state is snapshotted before every call runs."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.taken: list[tuple[str, Snapshot]] = []
        self.error: Exception | None = None

    def wrap(self, tools: Toolset) -> Toolset:
        return Toolset(self._wrap(spec) for spec in tools.values())

    def _wrap(self, spec: ToolSpec) -> ToolSpec:
        def snapshotted(**arguments: Any) -> ToolResult:
            try:
                before = self.session.snapshot()
            except Exception as exc:  # the machinery failed, not the tool: re-raised after the turn
                self.error = self.error or exc
                raise
            self.taken.append((spec.name, before))
            return spec.invoke(arguments)

        return replace(spec, fn=snapshotted)

    def pair(self, records: Sequence[StepRecord], final: Snapshot) -> tuple[TraceStep, ...]:
        """The trace steps of ``records``, each with the state before it: a dispatched call
        takes the next snapshot its tool took; a call that never ran gets the state then (the
        next snapshot, or the final state)."""
        taken = iter(self.taken)
        pending: tuple[str, Snapshot] | None = next(taken, None)
        steps: list[TraceStep] = []
        for record in records:
            if record.dispatched and pending is not None:
                name, before = pending
                if name != record.call.tool:
                    raise MiningError(f"rollout bookkeeping: step {record.index} called {record.call.tool!r} "
                                      f"but the snapshot was taken before {name!r}")
                pending = next(taken, None)
            else:
                before = pending[1] if pending is not None else final
            kind = None if record.situation is None else record.situation.kind.value
            steps.append(TraceStep(len(steps), record.call, record.content, record.ok, kind, record.injected, before))
        return tuple(steps)


def rollout(
    environment: Environment,
    task: Task,
    agent_name: str,
    model: Model,
    *,
    p_inj: float,
    seed: int | str,
    max_turns: int = DEFAULT_MAX_TURNS,
    root: Path,
    bank: FailureBank | None = None,
) -> Trace:
    """Run ``model`` (named ``agent_name``) on ``task`` in a fresh session in ``root``.

    Args:
        environment: the environment.
        task: one of its tasks.
        agent_name: the agent's name (in the trace and the injection seed).
        model: the agent.
        p_inj: probability in [0, 1] that one tool return is replaced by a compatible failure.
        seed: the run's seed; the injector's is :func:`injection_seed`.
        max_turns: model replies allowed (``run_turn``'s ``max_steps``).
        root: an empty folder for the session's state.
        bank: the failure bank (the bundled one by default).

    Returns:
        The :class:`~unstuck.mining.trace.Trace`: every call with what the agent was shown,
        the guard's situation kind, the injected form, the state before it, the answer, the
        turn's status and the final state. The session is closed however the turn ends.

    Raises:
        MiningError: for ``p_inj`` outside [0, 1] or ``max_turns`` below 1, or when the
            session's state could not be snapshotted before a call.
    """
    if not 0.0 <= p_inj <= 1.0:
        raise MiningError(f"p_inj must be within [0, 1], got {p_inj!r}")
    if max_turns < 1:
        raise MiningError(f"max_turns must be at least 1, got {max_turns!r}")
    noise_seed = injection_seed(seed, environment.name, task.id, agent_name)
    session = environment.open(task, root)
    try:
        snapshots = _Snapshots(session)
        injector = Injector(p_inj, seed=noise_seed, bank=bank if bank is not None else load_bank())
        result = run_turn(
            task.prompt, model=model, tools=injector.wrap(snapshots.wrap(session.tools)), unattended=True,
            guarded=False, max_steps=max_turns, clock=VirtualClock(follow_real_time=False), turn_id=noise_seed,
            stall_after_s=None,
        )
        if snapshots.error is not None:
            raise MiningError(f"rollout of {task.id!r} in {environment.name!r}: the state could not be "
                              f"snapshotted before a call: {snapshots.error}") from snapshots.error
        final = session.snapshot()
        steps = snapshots.pair(result.steps, final)
        verdict = session.verify(task, result.answer)  # in the live session: its processes are state too
    finally:
        session.close()
    return Trace(environment.name, task.id, agent_name, noise_seed, p_inj, steps, result.answer, result.status.value,
                 final, verdict)


# -- specs ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RolloutSpec:
    """Everything one rollout needs, by name (picklable).

    Attributes:
        environment: the environment's name (:func:`unstuck.mining.envs.environment`).
        task: the task's id.
        agent: a pool profile's name (:func:`unstuck.mining.agents.default_pool`) or a
            :class:`~unstuck.mining.agents.ModelSpec`.
        seed: the run's seed.
        p_inj: the injection rate in [0, 1].
        max_turns: model replies allowed.
        rules: rules the agent is given (scripted agents match their triggers; models read
            them).
        factory: makes the environment instead of looking its name up (an environment that
            is not shipped, e.g. a test's); a module-level function, so the spec stays
            picklable.
    """

    environment: str
    task: str
    agent: str | ModelSpec
    seed: int | str = 0
    p_inj: float = 0.0
    max_turns: int = DEFAULT_MAX_TURNS
    rules: tuple[Rule, ...] = ()
    factory: Callable[[], Environment] | None = field(default=None, compare=False)

    @property
    def agent_name(self) -> str:
        """The agent's name: the profile's, or the model's."""
        return self.agent.name if isinstance(self.agent, ModelSpec) else self.agent


def resolve_environment(spec: RolloutSpec) -> Environment:
    """The environment a spec names (its factory's, else the shipped one of that name).

    Raises:
        MiningError: for an unknown environment name, or a factory whose environment has
            another name.
    """
    if spec.factory is not None:
        made = spec.factory()
        if made.name != spec.environment:
            raise MiningError(f"the spec names environment {spec.environment!r} but its factory made {made.name!r}")
        return made
    from unstuck.mining.envs import environment

    return environment(spec.environment)


def find_task(environment: Environment, task_id: str) -> Task:
    """The task ``task_id`` of ``environment``.

    Raises:
        MiningError: naming the environment's task ids.
    """
    found = next((task for task in environment.tasks if task.id == task_id), None)
    if found is None:
        known = ", ".join(task.id for task in environment.tasks)
        raise MiningError(f"environment {environment.name!r} has no task {task_id!r}; its tasks: {known}")
    return found


def check_spec(spec: RolloutSpec, environments: Mapping[str, Environment] | None = None) -> None:
    """Check that the spec's environment, task and agent profile exist (before any process
    is started).

    Raises:
        MiningError: naming what does not exist.
    """
    made = environments.get(spec.environment) if environments is not None else None
    find_task(made if made is not None else resolve_environment(spec), spec.task)
    if not isinstance(spec.agent, ModelSpec):
        profile(spec.agent)


def run_spec(spec: RolloutSpec, root: Path, *, bank: FailureBank | None = None) -> Trace:
    """Rebuild the rollout ``spec`` names and run it with its state in the empty folder ``root``.

    Raises:
        MiningError: for an unknown environment, task or agent profile, or bad ``p_inj`` /
            ``max_turns``.
    """
    made = resolve_environment(spec)
    task = find_task(made, spec.task)
    agent = spec.agent
    if isinstance(agent, ModelSpec) and agent.seed is None and isinstance(spec.seed, int):
        agent = replace(agent, seed=spec.seed)  # the rollout's seed samples the model too
    model = build_agent(agent, task, spec.rules, environment=made.name)
    return rollout(made, task, spec.agent_name, model, p_inj=spec.p_inj, seed=spec.seed, max_turns=spec.max_turns,
                   root=root, bank=bank)
