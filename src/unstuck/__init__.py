"""unstuck: keep tool-using LLM agents from getting stuck.

Classify every tool result into a situation, stop improvising around what needs the user
within a small budget, and end the turn with one precise question.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unstuck.classify import classify_result
    from unstuck.clock import Clock, RealClock, VirtualClock
    from unstuck.errors import UnstuckError
    from unstuck.escalation import Escalation, build_escalation
    from unstuck.events import EventName
    from unstuck.guard import Action, Decision, Guard, GuardStateError
    from unstuck.loop import StepRecord, TurnResult, TurnStatus, run_turn
    from unstuck.models import Message, Model, ModelError, ModelReply, OpenAIChatModel, Role
    from unstuck.policy import CallOutcome, OpenBlocker, PolicyConfig, RecoveryState, after_result, before_dispatch
    from unstuck.presence import Answer, Asker, ConsoleAsker
    from unstuck.situations import Kind, KindClass, Probe, Situation, Source, validate_situation
    from unstuck.tools import (
        CommandOutput,
        Effect,
        HttpResponse,
        ToolCall,
        ToolResult,
        Toolset,
        ToolSpec,
        normalize_result,
        tool,
    )

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
    "Action": "unstuck.guard",
    "Answer": "unstuck.presence",
    "Asker": "unstuck.presence",
    "CallOutcome": "unstuck.policy",
    "Clock": "unstuck.clock",
    "CommandOutput": "unstuck.tools",
    "ConsoleAsker": "unstuck.presence",
    "Decision": "unstuck.guard",
    "Effect": "unstuck.tools",
    "Escalation": "unstuck.escalation",
    "EventName": "unstuck.events",
    "Guard": "unstuck.guard",
    "GuardStateError": "unstuck.guard",
    "HttpResponse": "unstuck.tools",
    "Kind": "unstuck.situations",
    "KindClass": "unstuck.situations",
    "Message": "unstuck.models",
    "Model": "unstuck.models",
    "ModelError": "unstuck.models",
    "ModelReply": "unstuck.models",
    "OpenAIChatModel": "unstuck.models",
    "OpenBlocker": "unstuck.policy",
    "PolicyConfig": "unstuck.policy",
    "Probe": "unstuck.situations",
    "RealClock": "unstuck.clock",
    "RecoveryState": "unstuck.policy",
    "Role": "unstuck.models",
    "Situation": "unstuck.situations",
    "Source": "unstuck.situations",
    "StepRecord": "unstuck.loop",
    "ToolCall": "unstuck.tools",
    "ToolResult": "unstuck.tools",
    "ToolSpec": "unstuck.tools",
    "Toolset": "unstuck.tools",
    "TurnResult": "unstuck.loop",
    "TurnStatus": "unstuck.loop",
    "UnstuckError": "unstuck.errors",
    "VirtualClock": "unstuck.clock",
    "after_result": "unstuck.policy",
    "before_dispatch": "unstuck.policy",
    "build_escalation": "unstuck.escalation",
    "classify_result": "unstuck.classify",
    "normalize_result": "unstuck.tools",
    "run_turn": "unstuck.loop",
    "tool": "unstuck.tools",
    "validate_situation": "unstuck.situations",
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
