"""unstuck: keep tool-using LLM agents from getting stuck.

Classify every tool result into a situation, stop improvising around what needs the user
within a small budget, and end the turn with one precise question.
"""

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
