"""Every adapter emits the events and OpenTelemetry spans a run of ``unstuck.run_turn`` emits
(issue 13: "the same events and OpenTelemetry spans are emitted"): the same guard emits them,
through the ``events`` sink each adapter passes on. One blocked improviser run per framework on
the real signed-out gh, with an :class:`unstuck.store.events.EventLog` and an
:class:`unstuck.store.otel.OtelSink` side by side."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from unstuck.evals.shell_world import Behaviour, ShellWorld
from unstuck.integrations.peers import FRAMEWORKS
from unstuck.store.events import EventLog, EventName, Tee
from unstuck.store.otel import OtelSink

pytestmark = pytest.mark.slow

#: What any guarded run that stops to ask emits, whoever drives the guard.
EVERY_BLOCKED_RUN = (EventName.TURN_STARTED, EventName.TOOL_CALLED, EventName.TOOL_RETURNED,
                     EventName.SITUATION_INFERRED, EventName.BLOCKER_OPENED, EventName.TURN_ESCALATED)


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_a_blocked_run_emits_the_guards_events_and_execute_tool_spans(framework: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    log = EventLog()
    with ShellWorld("gh_logged_out") as world:
        run = FRAMEWORKS[framework](world, Behaviour.IMPROVISER, guarded=True, cap=30,
                                    events=Tee(log, OtelSink(provider.get_tracer("test"))))
    assert run.error is None and run.status == "blocked", run
    names = [e.name for e in log]
    assert all(name.value in names for name in EVERY_BLOCKED_RUN), names
    (escalated,) = [e for e in log if e.name == EventName.TURN_ESCALATED.value]
    assert dict(escalated.fields)["subject"] == "gh"
    called = [e for e in log if e.name == EventName.TOOL_CALLED.value]
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]
    assert len(spans) == len(called) == run.tool_calls  # one span per call that ran, none for refusals
    assert all(s.name == "execute_tool run_command" for s in spans)
    assert (spans[0].attributes or {}).get("error.type") == "auth"  # the signed-out gh's answer
    turn_ids = {e.turn_id for e in log}
    assert len(turn_ids) == 1, "one guard, one turn"


@pytest.mark.parametrize("framework", ["openai-agents", "langgraph", "mcp"])
def test_a_run_handed_back_blocked_ends_its_turn_blocked_and_its_agent_span(framework: str) -> None:
    """A run that returns the question to the host ends the turn ``blocked`` (as ``unstuck run``
    does unattended); a resume is a ``turn.resumed``. Pydantic AI's toolset keeps the turn open
    across its runs instead (the next run carries on the same turn: docs/frameworks/pydantic-ai.md)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    log = EventLog()
    with ShellWorld("gh_logged_out") as world:
        FRAMEWORKS[framework](world, Behaviour.IMPROVISER, guarded=True, cap=30,
                              events=Tee(log, OtelSink(provider.get_tracer("test"))))
    ended = [dict(e.fields) for e in log if e.name == EventName.TURN_ENDED.value]
    assert [e["status"] for e in ended] == ["blocked"]
    agents = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent unstuck"]
    assert len(agents) == 1
    tools = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]
    assert tools and all(s.parent is not None and s.parent.span_id == agents[0].context.span_id for s in tools)
