"""Probes: the cheap read-only calls that re-check a blocker (DESIGN.md, "probe"), and the setup
probe a tool runs once when an inferred blocker opens on a program it reaches.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A probe naming a missing, interactive or writing tool is never run, whoever declared it. A
probe's step is recorded like any other but never charged.
"""

from __future__ import annotations

from collections.abc import Callable

from unstuck.core.situations import Kind, Probe, Situation
from unstuck.core.tools import Effect, ToolCall, ToolResult
from unstuck.decide import policy, prompts
from unstuck.guard.state import GuardState
from unstuck.store.events import EventName
from unstuck.toolkit.specs import Toolset, ToolSpec

__all__ = ["Probes"]

#: Assesses a probe's result as a step (the guard's pipeline, :class:`~unstuck.guard.decision.Origin` ``PROBE``):
#: given the call, its tool, the result and when it started; returns the result's situation.
ProbeStep = Callable[[ToolCall, ToolSpec, ToolResult, float], Situation | None]


class Probes:
    """The probes of one turn.

    Args:
        tools: the tool set.
        state: the guard's state (its steps, blockers and ``setup_checked``; setup probes run
            only when it is guarded).
        emit: records an event.
        at: seconds into the turn.
        step: assesses a probe's result as a step.
    """

    def __init__(self, tools: Toolset, state: GuardState, *, emit: Callable[..., None],
                 at: Callable[[], float], step: ProbeStep) -> None:
        self.tools, self.state = tools, state
        self.emit, self.at, self.step = emit, at, step

    def allowed(self, probe: Probe) -> bool:
        """A probe is a cheap read-only call (DESIGN.md): one naming a missing, interactive or
        writing tool is never run, whoever declared it."""
        spec = self.tools.get(probe.tool)
        return spec is not None and not spec.interactive and spec.effect is Effect.READ

    def for_blocker(self, blocker: policy.OpenBlocker) -> Probe | None:
        """The probe that re-checks ``blocker``: its situation's, else its tool's own, else the
        call that opened it, again, when that call is one the guard may run as a probe (a
        read-only, non-interactive tool the guard can run itself, :attr:`ToolSpec.runs_here`):
        ``gh repo view cli/cli`` through a plain shell tool is the most exact check that gh
        works now. ``None`` when there is none: the user's answer is then taken at its word."""
        if blocker.situation.probe is not None:
            return blocker.situation.probe
        spec = self.tools.get(blocker.subject)
        if spec is not None and spec.probe is not None:
            return spec.probe
        opening = next((step.call for step in self.state.steps
                        if not step.probe and step.dispatched and step.situation is not None
                        and step.situation.subject == blocker.subject), None)
        if opening is None:
            return None
        runner = self.tools.get(opening.tool)
        if runner is None or not runner.runs_here or runner.interactive_call(opening.arguments) is not None:
            return None
        probe = Probe(opening.tool, opening.arguments_json)
        return probe if self.allowed(probe) else None

    def run(self, probe: Probe) -> tuple[bool, str]:
        """Run ``probe`` as a step that is never charged; (clean, evidence)."""
        if not self.allowed(probe):
            self.emit(EventName.PROBE_REFUSED, tool=probe.tool, reason="missing, interactive or writing tool")
            return False, f"the probe {probe.tool} is not a read-only tool here, so it was not run"
        call = ToolCall(f"probe_{len(self.state.steps)}", probe.tool, probe.arguments_json)
        spec = self.tools[probe.tool]
        started = self.at()
        self.emit(EventName.TOOL_CALLED, tool=call.tool, subject=spec.subject_of(call.arguments), probe=True)
        result = spec.invoke(call.arguments)
        situation = self.step(call, spec, result, started)
        clean = result.ok and situation is None
        self.emit(EventName.PROBE_RUN, tool=probe.tool, clean=clean)
        evidence = (situation.detail if situation is not None else "") or result.content
        return clean, prompts.excerpt(evidence, 300)

    def check_setup(self, call: ToolCall, assessment: policy.Assessment) -> str | None:
        """An inferred auth, not_installed or permission blocker just opened on a program the
        tool reaches: run the tool's read-only setup probe once, so the blocker carries the
        tool's own declaration and exact unblock; the recovery guidance as it now stands."""
        spec = self.tools.get(call.tool)
        if not self.state.guarded or spec is None or spec.setup_probe is None:
            return None
        s = self.state
        for subject in assessment.opened:
            blocker = s.state.open_blockers.get(subject)
            if blocker is None or blocker.situation.is_declared or subject in s.setup_checked:
                continue
            if blocker.situation.kind not in (Kind.AUTH, Kind.NOT_INSTALLED, Kind.PERMISSION):
                continue
            probe = spec.setup_probe(subject)
            if probe is None or not self.allowed(probe):
                continue
            s.setup_checked.add(subject)
            self.emit(EventName.PROBE_SETUP, tool=probe.tool, subject=subject)
            self.run(probe)
            now = s.state.open_blockers.get(subject)
            if now is None:
                return None  # the setup check came back clean: the blocker closed
            return prompts.blocker_recovery(now.situation, now.remaining)
        return None
