"""unstuck: keep tool-using LLM agents from getting stuck.

Classify every tool result into a situation, stop improvising around what needs the user
within a small budget, and end the turn with one precise question.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unstuck.core.clock import Clock, RealClock, VirtualClock
    from unstuck.core.errors import UnstuckError
    from unstuck.core.situations import Kind, KindClass, Probe, Situation, Source, validate_situation
    from unstuck.core.tools import CommandOutput, Effect, HttpResponse, ToolCall, ToolResult, normalize_result
    from unstuck.decide.escalation import Escalation, build_escalation
    from unstuck.decide.policy import (
        CallOutcome,
        OpenBlocker,
        PolicyConfig,
        RecoveryState,
        after_result,
        before_dispatch,
    )
    from unstuck.guard.guard import Action, Decision, Guard, GuardStateError
    from unstuck.loop.presence import Answer, Asker, ConsoleAsker
    from unstuck.loop.turn import StepRecord, TurnResult, TurnStatus, run_turn
    from unstuck.recognise.classify import classify_result
    from unstuck.store.events import EventName
    from unstuck.toolkit.models import Message, Model, ModelError, ModelReply, OpenAIChatModel, Role
    from unstuck.toolkit.specs import Toolset, ToolSpec, tool

from unstuck.core import aliases as _aliases

_aliases.install()

__version__ = "0.1.0"

__all__ = [
    "Action",
    "Answer",
    "Asker",
    "CallOutcome",
    "Clock",
    "CommandOutput",
    "ConsoleAsker",
    "Decision",
    "Effect",
    "Escalation",
    "EventName",
    "Guard",
    "GuardStateError",
    "HttpResponse",
    "Kind",
    "KindClass",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "OpenAIChatModel",
    "OpenBlocker",
    "PolicyConfig",
    "Probe",
    "RealClock",
    "RecoveryState",
    "Role",
    "Situation",
    "Source",
    "StepRecord",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Toolset",
    "TurnResult",
    "TurnStatus",
    "UnstuckError",
    "VirtualClock",
    "__version__",
    "after_result",
    "before_dispatch",
    "build_escalation",
    "classify_result",
    "normalize_result",
    "run_turn",
    "tool",
    "validate_situation",
]

#: Where each public name lives: imported on first use (PEP 562), so ``import unstuck`` (and
#: ``unstuck classify``) does not pay for the loop, the guard and their dependencies up front.
_LAZY: dict[str, str] = {
    "Action": "unstuck.guard.guard",
    "Answer": "unstuck.loop.presence",
    "Asker": "unstuck.loop.presence",
    "CallOutcome": "unstuck.decide.policy",
    "Clock": "unstuck.core.clock",
    "CommandOutput": "unstuck.core.tools",
    "ConsoleAsker": "unstuck.loop.presence",
    "Decision": "unstuck.guard.guard",
    "Effect": "unstuck.core.tools",
    "Escalation": "unstuck.decide.escalation",
    "EventName": "unstuck.store.events",
    "Guard": "unstuck.guard.guard",
    "GuardStateError": "unstuck.guard.guard",
    "HttpResponse": "unstuck.core.tools",
    "Kind": "unstuck.core.situations",
    "KindClass": "unstuck.core.situations",
    "Message": "unstuck.toolkit.models",
    "Model": "unstuck.toolkit.models",
    "ModelError": "unstuck.toolkit.models",
    "ModelReply": "unstuck.toolkit.models",
    "OpenAIChatModel": "unstuck.toolkit.models",
    "OpenBlocker": "unstuck.decide.policy",
    "PolicyConfig": "unstuck.decide.policy",
    "Probe": "unstuck.core.situations",
    "RealClock": "unstuck.core.clock",
    "RecoveryState": "unstuck.decide.policy",
    "Role": "unstuck.toolkit.models",
    "Situation": "unstuck.core.situations",
    "Source": "unstuck.core.situations",
    "StepRecord": "unstuck.loop.turn",
    "ToolCall": "unstuck.core.tools",
    "ToolResult": "unstuck.core.tools",
    "ToolSpec": "unstuck.toolkit.specs",
    "Toolset": "unstuck.toolkit.specs",
    "TurnResult": "unstuck.loop.turn",
    "TurnStatus": "unstuck.loop.turn",
    "UnstuckError": "unstuck.core.errors",
    "VirtualClock": "unstuck.core.clock",
    "after_result": "unstuck.decide.policy",
    "before_dispatch": "unstuck.decide.policy",
    "build_escalation": "unstuck.decide.escalation",
    "classify_result": "unstuck.recognise.classify",
    "normalize_result": "unstuck.core.tools",
    "run_turn": "unstuck.loop.turn",
    "tool": "unstuck.toolkit.specs",
    "validate_situation": "unstuck.core.situations",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'unstuck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
