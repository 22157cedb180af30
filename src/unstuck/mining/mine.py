"""Mining one environment end to end (seed 003, "Minimal Causal Code", ``mine``).

1. **Eligibility**: a task enters only if its clean run has a verifiable solution (the
   ``careful`` profile at ``p_inj`` 0 passes the verifier) and its perturbed run a verifiable
   recovery (the ``careful`` profile passes under injection, with at least one injected
   failure, on one of :data:`RECOVERY_SEEDS` at :data:`RECOVERY_P_INJ` or ``p_inj`` if higher).
2. **Rollouts**: the pool (every scripted profile of :func:`unstuck.mining.agents.default_pool`
   and every ``--model``) attempts every eligible mining task under the same protocol and
   noise (``p_inj``, ``max_turns``, the same seeds), on the chosen backend.
3. **Joint labels**: the environment's verifier (on the rollout's final state, restored into a
   fresh session) and an analyzer (reading the trace only) label each rollout; a
   disagreement is discarded and counted.
4. **Contrast pairs** per task, capped by ``pair_cap``; fewer than five contributing tasks mine
   no rule, and the report says how many there were.
5. **Rules** from recurring patterns across pairs (:mod:`unstuck.mining.extract`).
6. **Interventions**: the held-out tasks (every third task, :func:`split_tasks`), the same
   pool and seeds, with no rule and with each rule alone: a rule is kept only if it fixes more
   rollouts than it breaks. Then all kept rules against none at each ``report_levels`` rate,
   on other seeds (:data:`LEVEL_SEED_OFFSET`), so the table is not measured on the runs that
   chose the rules.
7. The **environment record** (:class:`unstuck.mining.rules.EnvironmentRecord`) with the kept
   rules, the observed bad patterns and the run's measures, saved as a data file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from unstuck.core.tools import Effect
from unstuck.core.trees import temporary_tree
from unstuck.faults.bank import load_bank
from unstuck.mining.agents import ModelSpec, default_pool
from unstuck.mining.backends import run_rollouts
from unstuck.mining.contrast import ContrastSet, contrast_pairs
from unstuck.mining.environment import Environment, MiningError, Task, Verification
from unstuck.mining.extract import PairView, extract_rules
from unstuck.mining.labels import DeterministicAnalyzer, JointLabel, LabelStats, ModelAnalyzer, joint_label
from unstuck.mining.rollout import DEFAULT_MAX_TURNS, RolloutSpec
from unstuck.mining.rules import BadPatternCount, EnvironmentRecord, Rule, RuleEffect
from unstuck.mining.trace import Trace

__all__ = [
    "LEVEL_SEED_OFFSET",
    "RECOVERY_P_INJ",
    "RECOVERY_SEEDS",
    "REPORT_LEVELS",
    "Eligibility",
    "LevelResult",
    "MiningReport",
    "RuleResult",
    "check_models",
    "mine_environment",
    "report_to_dict",
    "split_tasks",
    "tool_effects",
    "verify_trace",
]

#: Seeds tried for a task's perturbed eligibility run, at :data:`RECOVERY_P_INJ` (a rate high
#: enough that a short task meets an injected failure within a few seeds).
RECOVERY_SEEDS = tuple(range(8))
RECOVERY_P_INJ = 0.3
#: The injection rates the report sets mined rules against none at (seed 003 sweeps 0 to 0.3).
REPORT_LEVELS = (0.0, 0.1, 0.3)
#: The report's levels run on seeds from here (rules are kept on seeds 0 to N-1), so the
#: with/without table is not measured on the runs that chose the rules.
LEVEL_SEED_OFFSET = 1000
#: The profile whose clean and perturbed runs decide eligibility (every habit).
_CAREFUL = "careful"
#: Progress: (stage, done, total).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Whether a task entered, and why not: ``clean`` and ``recovered`` with their evidence."""

    task: str
    clean: bool
    recovered: bool
    evidence: str

    @property
    def eligible(self) -> bool:
        """A verifiable solution and a verifiable recovery."""
        return self.clean and self.recovered


@dataclass(frozen=True, slots=True)
class RuleResult:
    """A mined rule and its effect as an intervention; ``kept`` when it fixes more than it breaks."""

    rule: Rule
    effect: RuleEffect

    @property
    def kept(self) -> bool:
        """Fixes more than it breaks."""
        return self.effect.kept


@dataclass(frozen=True, slots=True)
class LevelResult:
    """Held-out success at one injection rate, same tasks and seeds: without rules and with the
    kept rules (rollouts that passed the verifier, of ``runs``)."""

    p_inj: float
    runs: int
    without_rules: int
    with_rules: int

    @property
    def without_rate(self) -> float:
        """Success without rules, 0 to 1."""
        return self.without_rules / self.runs if self.runs else 0.0

    @property
    def with_rate(self) -> float:
        """Success with the kept rules, 0 to 1."""
        return self.with_rules / self.runs if self.runs else 0.0


@dataclass(frozen=True, slots=True)
class MiningReport:
    """What ``unstuck mine`` measured and mined for one environment (see the module doc)."""

    environment: str
    p_inj: float
    pair_cap: int
    eligibility: tuple[Eligibility, ...]
    mining_tasks: tuple[str, ...]
    held_out: tuple[str, ...]
    rollouts: int
    labels: LabelStats
    contrast: ContrastSet
    rules: tuple[RuleResult, ...] = ()
    levels: tuple[LevelResult, ...] = ()
    record_path: str | None = None
    bad_patterns: tuple[BadPatternCount, ...] = field(default=())
    stopped: str | None = None
    pool: tuple[str, ...] = ()
    kept_disabled: tuple[str, ...] = ()

    @property
    def kept_rules(self) -> tuple[Rule, ...]:
        """The rules the record keeps."""
        return tuple(r.rule for r in self.rules if r.kept)


def split_tasks(tasks: Sequence[Task]) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """(mining tasks, held-out tasks): every third task is held out, so held-out tasks remain
    after pairs come from five (12 tasks: 8 for mining, 4 held out)."""
    held = tuple(task for index, task in enumerate(tasks) if index % 3 == 2)
    return tuple(task for task in tasks if task not in held), held


def tool_effects(environment: Environment) -> dict[str, Effect]:
    """Each tool's effect (read or write), read from a session of the first task."""
    if not environment.tasks:
        raise MiningError(f"environment {environment.name!r} has no task")
    with temporary_tree("unstuck-effects-") as folder:
        session = environment.open(environment.tasks[0], folder)
        try:
            return {name: spec.effect for name, spec in session.tools.items()}
        finally:
            session.close()


def verify_trace(environment: Environment, task: Task, trace: Trace) -> Verification:
    """The task's verifier on the rollout's end: the verdict taken in the live session
    (:attr:`Trace.verdict`), else the final state restored into a fresh session (a state
    made by hand, a trace from elsewhere)."""
    if trace.verdict is not None:
        return trace.verdict
    with temporary_tree("unstuck-verify-") as folder:
        session = environment.open(task, folder)
        try:
            session.restore(trace.final)
            return session.verify(task, trace.answer)
        finally:
            session.close()


def _task(environment: Environment, task_id: str) -> Task:
    return next(task for task in environment.tasks if task.id == task_id)


def _passed(environment: Environment, traces: Sequence[Trace]) -> list[bool]:
    return [verify_trace(environment, _task(environment, t.task), t).passed for t in traces]


def _eligibility(environment: Environment, p_inj: float, max_turns: int, run: Callable[[list[RolloutSpec]], list[Trace]]
                 ) -> tuple[Eligibility, ...]:
    rate = max(p_inj, RECOVERY_P_INJ)
    specs = [RolloutSpec(environment.name, task.id, _CAREFUL, seed=0, p_inj=0.0, max_turns=max_turns)
             for task in environment.tasks]
    specs += [RolloutSpec(environment.name, task.id, _CAREFUL, seed=f"recovery-{seed}", p_inj=rate, max_turns=max_turns)
              for task in environment.tasks for seed in RECOVERY_SEEDS]
    traces = run(specs)
    passed = _passed(environment, traces)
    found = []
    count = len(environment.tasks)
    for index, task in enumerate(environment.tasks):
        clean = passed[index]
        perturbed = [(traces[count + index * len(RECOVERY_SEEDS) + k], passed[count + index * len(RECOVERY_SEEDS) + k])
                     for k in range(len(RECOVERY_SEEDS))]
        recovered = any(ok and trace.injected > 0 for trace, ok in perturbed)
        evidence = ("clean run passes" if clean else "the clean run fails its verifier") + "; " + (
            "a perturbed run recovered" if recovered else
            f"no perturbed run (p_inj {rate:g}, {len(RECOVERY_SEEDS)} seeds) recovered from an injected failure")
        found.append(Eligibility(task.id, clean, recovered, evidence))
    return tuple(found)


def check_models(models: Sequence[ModelSpec], *, timeout_s: float = 20.0) -> None:
    """Ask each model for one short reply before any rollout: a model that cannot answer
    would otherwise join the pool as an agent that fails every task, and its failures would
    become contrast pairs and change the rules.

    Raises:
        MiningError: naming the model, its server and the client's error.
    """
    from unstuck.toolkit.models import Message, ModelError, OpenAIChatModel, Role

    for spec in models:
        client = OpenAIChatModel(spec.name, base_url=spec.base_url, timeout_s=timeout_s, max_retries=0)
        try:
            client.complete([Message(Role.USER, "Reply with the word OK.")], [])
        except ModelError as exc:
            where = spec.base_url or "the OpenAI client's default server (OPENAI_BASE_URL)"
            raise MiningError(f"--model {spec.name} at {where}: no reply ({exc}); mining did not start") from exc


def _pool(models: Sequence[ModelSpec]) -> list[str | ModelSpec]:
    return [profile.name for profile in default_pool()] + list(models)


def _specs(environment: Environment, tasks: Sequence[Task], pool: Sequence[str | ModelSpec], seeds: int,
           p_inj: float, max_turns: int, rules: tuple[Rule, ...] = ()) -> list[RolloutSpec]:
    return [RolloutSpec(environment.name, task.id, agent, seed=seed, p_inj=p_inj, max_turns=max_turns, rules=rules)
            for task in tasks for agent in pool for seed in range(seeds)]


def _label_all(environment: Environment, traces: Sequence[Trace], analyzer: DeterministicAnalyzer | ModelAnalyzer,
               effects: Mapping[str, Effect]) -> tuple[list[JointLabel], LabelStats]:
    stats = LabelStats()
    kept: list[JointLabel] = []
    for trace in traces:
        task = _task(environment, trace.task)
        verification = verify_trace(environment, task, trace)
        label = analyzer.label(trace, task, effects)
        stats = stats.counted(label, verification)
        joined = joint_label(label, verification, trace)
        if joined is not None:
            kept.append(joined)
    return kept, stats


def mine_environment(
    environment: Environment,
    *,
    p_inj: float = 0.1,
    pair_cap: int = 3,
    seeds: int = 2,
    models: Sequence[ModelSpec] = (),
    analyzer: ModelAnalyzer | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    backend: str = "local",
    workers: int | None = None,
    report_levels: Sequence[float] = REPORT_LEVELS,
    records: Path | None = None,
    progress: Progress | None = None,
) -> MiningReport:
    """Mine ``environment`` (see the module doc) and, with ``records``, save its record there
    as ``ENV.json`` when rules were mined (a run with too few contributing tasks writes none).

    Raises:
        MiningError: for ``p_inj`` or a report level outside [0, 1], ``pair_cap`` or ``seeds`` below 1, an
            unknown backend, or an environment with fewer than 6 tasks.
    """
    if not 0.0 <= p_inj <= 1.0:
        raise MiningError(f"p_inj {p_inj!r}: an injection rate is from 0 to 1")
    if any(not 0.0 <= level <= 1.0 for level in report_levels):
        raise MiningError(f"report level {next(lv for lv in report_levels if not 0.0 <= lv <= 1.0)!r}: "
                          "an injection rate is from 0 to 1")
    if pair_cap < 1 or seeds < 1:
        raise MiningError(f"pair_cap {pair_cap} and seeds {seeds}: each must be 1 or more")
    if len(environment.tasks) < 6:
        raise MiningError(f"environment {environment.name!r} has {len(environment.tasks)} tasks; mining needs "
                          "at least 6 (pairs from 5 tasks and held-out tasks beside them)")
    if records is not None and records.exists() and not records.is_dir():
        raise MiningError(f"--records {records}: not a folder (records are written there as ENV.json)")
    check_models(models)
    tick = progress or (lambda stage, done, total: None)

    def run(stage: str) -> Callable[[list[RolloutSpec]], list[Trace]]:
        def go(specs: list[RolloutSpec]) -> list[Trace]:
            return run_rollouts(specs, backend=backend, workers=workers,
                                progress=lambda done, total: tick(stage, done, total))
        return go

    effects = tool_effects(environment)
    eligibility = _eligibility(environment, p_inj, max_turns, run("eligibility"))
    entered = {e.task for e in eligibility if e.eligible}
    mining, held = split_tasks([task for task in environment.tasks if task.id in entered])
    if not held:
        empty = ContrastSet(environment.name, (), (), ())
        return MiningReport(environment.name, p_inj, pair_cap, eligibility, tuple(t.id for t in mining), (), 0,
                            LabelStats(), empty, stopped=f"{len(entered)} task(s) eligible: none is left to hold "
                            "out, so no rule could be tested; no rollouts were made")
    pool = _pool(models)
    traces = run("rollouts")(_specs(environment, mining, pool, seeds, p_inj, max_turns))
    chosen = analyzer if analyzer is not None else DeterministicAnalyzer.for_objects(environment.objects,
                                                                                  bank=load_bank())
    labeled, stats = _label_all(environment, traces, chosen, effects)
    contrast = contrast_pairs(labeled, pair_cap) if labeled else ContrastSet(environment.name, (), (), ())
    bad = Counter((label.pattern, label.trace.steps[label.first_error_turn].call.tool
                   if label.first_error_turn is not None and label.first_error_turn < len(label.trace.steps)
                   else "final answer")
                  for label in labeled if not label.correct and label.pattern is not None)
    patterns = tuple(BadPatternCount(pattern, tool, count) for (pattern, tool), count in sorted(
        bad.items(), key=lambda item: (-item[1], item[0][0].value, item[0][1])))
    pool_names = tuple(a.name if isinstance(a, ModelSpec) else a for a in pool)
    report = MiningReport(environment.name, p_inj, pair_cap, eligibility, tuple(t.id for t in mining),
                          tuple(t.id for t in held), len(traces), stats, contrast, bad_patterns=patterns,
                          pool=pool_names)
    if not contrast.enough:
        return report
    views = [PairView(p.task, p.success, p.failure, p.pattern, p.first_error_turn) for p in contrast.pairs]
    candidates = extract_rules(views, effects=effects, objects=environment.objects)
    if not candidates or not held:
        return report
    intervene = run("interventions")
    baseline_specs = _specs(environment, held, pool, seeds, p_inj, max_turns)
    baseline = _passed(environment, intervene(baseline_specs))
    results = []
    for rule in candidates:
        treated = _passed(environment, intervene([replace(s, rules=(rule,)) for s in baseline_specs]))
        fixed = sum(1 for before, after in zip(baseline, treated, strict=True) if after and not before)
        broke = sum(1 for before, after in zip(baseline, treated, strict=True) if before and not after)
        effect = RuleEffect(fixed, broke, len(baseline))
        results.append(RuleResult(replace(rule, effect=effect, enabled=effect.kept), effect))
    kept = tuple(r.rule for r in results if r.kept)
    levels = []
    for level in report_levels:  # other seeds than the ones rules were kept on: not in-sample
        specs = [replace(spec, seed=LEVEL_SEED_OFFSET + int(spec.seed))
                 for spec in _specs(environment, held, pool, seeds, level, max_turns)]
        without = _passed(environment, intervene(specs))
        with_rules = _passed(environment, intervene([replace(s, rules=kept) for s in specs])) if kept else without
        levels.append(LevelResult(level, len(specs), sum(without), sum(with_rules)))
    report = replace(report, rules=tuple(results), levels=tuple(levels))
    if records is not None and kept:
        from unstuck.mining.rules import load_record, record_path, save_record

        path = record_path(environment.name, records)
        disabled: set[str] = set()
        if path.exists():  # a rule the user disabled stays disabled when it is mined again
            try:
                disabled = {rule.id for rule in load_record(path).rules if not rule.enabled}
            except MiningError:
                disabled = set()  # an unreadable old record is replaced
        kept = tuple(replace(rule, enabled=rule.id not in disabled) for rule in kept)
        report = replace(report, kept_disabled=tuple(sorted(disabled & {rule.id for rule in kept})))
        save_record(EnvironmentRecord(
            environment=environment.name, version=environment.version, description=environment.description,
            objects=environment.objects, tools=tuple(environment.tool_names), bad_patterns=patterns, rules=kept,
            stats=(("p_inj", p_inj), ("pair_cap", float(pair_cap)), ("seeds", float(seeds)),
                   ("rollouts", float(len(traces))), ("models", float(len(models))),
                   ("agreement_rate", stats.agreement_rate), ("discard_rate", stats.discard_rate),
                   ("contrast_pairs", float(len(contrast.pairs))), ("contributing_tasks", float(len(contrast.tasks)))),
        ), path)
        report = replace(report, record_path=str(path))
    return report


def report_to_dict(report: MiningReport) -> dict[str, Any]:
    """The report as JSON-ready data: the run's settings, eligibility, label measures
    (agreement and discard rate), contrast pairs per task, each rule with its effect, and
    held-out success with and without the kept rules per injection rate (rates 0 to 1)."""
    return {
        "environment": report.environment, "p_inj": report.p_inj, "pair_cap": report.pair_cap,
        "eligibility": [{"task": e.task, "eligible": e.eligible, "evidence": e.evidence} for e in report.eligibility],
        "mining_tasks": list(report.mining_tasks), "held_out": list(report.held_out), "rollouts": report.rollouts,
        "labels": {"agreed": report.labels.agreed, "disagreed": report.labels.disagreed,
                   "analyzer_errors": report.labels.errors, "agreement_rate": report.labels.agreement_rate,
                   "discard_rate": report.labels.discard_rate},
        "contrast": {"pairs": len(report.contrast.pairs), "tasks": list(report.contrast.tasks),
                     "per_task": dict(report.contrast.per_task), "enough": report.contrast.enough,
                     "message": report.contrast.message},
        "bad_patterns": [{"pattern": b.pattern.value, "tool": b.tool, "count": b.count} for b in report.bad_patterns],
        "rules": [{"id": r.rule.id, "text": r.rule.text, "pattern": r.rule.pattern.value, "support": r.rule.support,
                   "trigger": {"moment": r.rule.trigger.moment.value, "tool": r.rule.trigger.tool,
                               "kind": r.rule.trigger.kind, "argument": r.rule.trigger.argument},
                   "action": {"kind": r.rule.action.kind.value, "tool": r.rule.action.tool},
                   "fixed": r.effect.fixed, "broke": r.effect.broke, "runs": r.effect.runs, "kept": r.kept}
                  for r in report.rules],
        "levels": [{"p_inj": level.p_inj, "runs": level.runs, "success_without_rules": level.without_rate,
                    "success_with_rules": level.with_rate} for level in report.levels],
        "record": report.record_path,
        "pool": list(report.pool),
        "stopped": report.stopped,
        "kept_disabled": list(report.kept_disabled),
    }
