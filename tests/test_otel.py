"""OpenTelemetry spans following the GenAI conventions, read back with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from conftest import PlaybackModel
from unstuck.core.clock import VirtualClock
from unstuck.loop.turn import run_turn
from unstuck.store.events import EventLog, Tee
from unstuck.store.otel import OtelSink
from unstuck.toolkit.specs import Toolset, tool


def test_a_blocked_turn_becomes_an_agent_span_with_execute_tool_children() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    @tool(subject="gh")
    def check_cli_setup(name: str) -> dict[str, Any]:
        """Check a CLI."""
        return {"status": "error", "situation": {"kind": "auth", "subject": name, "unblock": "gh auth login"}}

    @tool(subject="files")
    def list_files() -> list[str]:
        """List files."""
        return ["README.md"]

    log = EventLog()
    model = PlaybackModel([("list_files", {}), ("check_cli_setup", {"name": "gh"}),
                           ("check_cli_setup", {"name": "gh"}), ("check_cli_setup", {"name": "gh"}),
                           ("check_cli_setup", {"name": "gh"})])
    result = run_turn("x", model=model, tools=Toolset([check_cli_setup, list_files]), unattended=True,
                      clock=VirtualClock(), events=Tee(log, OtelSink(provider.get_tracer("test"))))
    spans = exporter.get_finished_spans()
    agent = [s for s in spans if s.name == "invoke_agent unstuck"]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert len(agent) == 1 and agent[0].status.status_code is StatusCode.ERROR
    assert agent[0].attributes is not None and agent[0].attributes["unstuck.turn.status"] == result.status.value
    dispatched = [e for e in log if e.name == "tool.called"]
    assert len(tools) == len(dispatched)
    for span in tools:
        assert span.parent is not None and span.parent.span_id == agent[0].context.span_id
        assert span.attributes is not None and span.attributes["gen_ai.operation.name"] == "execute_tool"
    first, second = tools[0], tools[1]
    assert first.name == "execute_tool list_files" and "error.type" not in (first.attributes or {})
    assert second.name == "execute_tool check_cli_setup" and (second.attributes or {})["error.type"] == "auth"
    assert second.status.status_code is StatusCode.ERROR
    names = [e.name for e in agent[0].events]
    assert "blocker.opened" in names and "turn.escalated" in names


def test_a_call_that_raised_ends_its_span_with_the_turn() -> None:
    import pytest

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    @tool(subject="x")
    def broken() -> dict[str, Any]:
        """Declares a kind that does not exist."""
        return {"status": "error", "situation": {"kind": "gremlins", "subject": "x"}}

    with pytest.raises(ValueError, match="gremlins"):
        run_turn("x", model=PlaybackModel([("broken", {})]), tools=Toolset([broken]), unattended=True,
                 clock=VirtualClock(), events=OtelSink(provider.get_tracer("test")))
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["execute_tool broken", "invoke_agent unstuck"]
