"""OpenTelemetry spans for a turn, following the GenAI semantic conventions (install the
``otel`` extra: ``pip install 'unstuck[otel]'``).
Internal: not a supported import path (docs/reference/index.md lists those that are).

:class:`OtelSink` is an event sink: pass it (or a :class:`unstuck.store.events.Tee` holding it) as
``run_turn(events=...)``. It turns the loop's events into spans:

* a turn is a span ``invoke_agent unstuck`` (``gen_ai.operation.name = invoke_agent``);
* each dispatched tool call is a child span ``execute_tool {tool}`` with
  ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name`` and, when the result carried
  a situation, ``error.type`` set to its kind and an error status (OpenTelemetry semantic
  conventions for GenAI, "Execute tool span"; ``error.type`` from the general conventions);
* every other decision (blocker opened, budget charged, retry scheduled, escalated, intent
  prepared, ...) is a span event on the turn span, with its fields as attributes.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from unstuck.decide.outcome import TurnStatus
from unstuck.store.events import Event, EventName

#: The turn statuses a turn's span ends in error with (``done`` is not one; a turn ends with no other).
_FAILED = frozenset({TurnStatus.BLOCKED, TurnStatus.FAILED, TurnStatus.INTERRUPTED})

__all__ = ["OtelSink"]


class OtelSink:
    """Events to spans (see the module doc).

    Args:
        tracer: the tracer to use; the global provider's ``unstuck`` tracer by default.
    """

    def __init__(self, tracer: Tracer | None = None) -> None:
        self.tracer = tracer or trace.get_tracer("unstuck")
        self._turns: dict[str, Span] = {}
        self._calls: dict[str, Span] = {}

    def emit(self, item: Event) -> None:
        fields = {key: value for key, value in item.fields if value is not None}
        if item.name in (EventName.TURN_STARTED, EventName.TURN_RESUMED):
            span = self.tracer.start_span("invoke_agent unstuck", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "unstuck",
                "unstuck.turn.id": item.turn_id, **_attributes(fields, "unstuck.")})
            self._turns[item.turn_id] = span
            return
        turn = self._turns.get(item.turn_id)
        if item.name == EventName.TOOL_CALLED and not fields.get("probe"):
            tool = str(fields.get("tool", "tool"))
            context = trace.set_span_in_context(turn) if turn is not None else None
            self._calls[item.turn_id] = self.tracer.start_span(f"execute_tool {tool}", context=context, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                "unstuck.subject": str(fields.get("subject", ""))})
            return
        if item.name == EventName.TOOL_RETURNED and item.turn_id in self._calls:
            span = self._calls.pop(item.turn_id)
            kind = fields.get("kind")
            if kind is not None:
                span.set_attribute("error.type", str(kind))
                span.set_status(Status(StatusCode.ERROR, str(kind)))
            span.end()
            return
        if turn is None:
            return
        turn.add_event(item.name, _attributes(fields, ""))
        if item.name == EventName.TURN_ENDED:
            unfinished = self._calls.pop(item.turn_id, None)
            if unfinished is not None:  # the call raised (a malformed declaration): it ends with its turn
                unfinished.set_status(Status(StatusCode.ERROR, str(fields.get("error") or "no result")))
                unfinished.end()
            status = str(fields.get("status", ""))
            turn.set_attribute("unstuck.turn.status", status)
            if status in _FAILED:
                turn.set_status(Status(StatusCode.ERROR, status))
            turn.end()
            del self._turns[item.turn_id]


def _attributes(fields: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {f"{prefix}{key}": value for key, value in fields.items() if isinstance(value, str | bool | int | float)}
