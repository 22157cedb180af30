"""unstuck: keep tool-using LLM agents from getting stuck.

Classify every tool result into a situation, stop improvising around what needs the user
within a small budget, and end the turn with one precise question.

The package's public face is :data:`_PUBLIC`, written once: each name and the module it lives
in. ``__all__`` and the lazy loader (PEP 562: a name is imported on first use, so ``import
unstuck`` and ``unstuck classify`` do not pay for the loop, the guard and their dependencies up
front) are read from it; the ``TYPE_CHECKING`` imports say the same to type checkers, and
``tests/test_public_api.py`` fails when they differ from it. The supported modules are listed in
``docs/reference/index.md``; every other module is internal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers only: the names of _PUBLIC, each from its module (checked by a test)
    from unstuck.core.clock import Clock as Clock
    from unstuck.core.clock import RealClock as RealClock
    from unstuck.core.clock import VirtualClock as VirtualClock
    from unstuck.core.errors import UnstuckError as UnstuckError
    from unstuck.core.situations import Kind as Kind
    from unstuck.core.situations import KindClass as KindClass
    from unstuck.core.situations import Probe as Probe
    from unstuck.core.situations import Situation as Situation
    from unstuck.core.situations import Source as Source
    from unstuck.core.situations import validate_situation as validate_situation
    from unstuck.core.tools import CommandOutput as CommandOutput
    from unstuck.core.tools import Effect as Effect
    from unstuck.core.tools import HttpResponse as HttpResponse
    from unstuck.core.tools import ToolCall as ToolCall
    from unstuck.core.tools import ToolResult as ToolResult
    from unstuck.core.tools import normalize_result as normalize_result
    from unstuck.decide.escalation import Escalation as Escalation
    from unstuck.decide.escalation import build_escalation as build_escalation
    from unstuck.decide.policy import CallOutcome as CallOutcome
    from unstuck.decide.policy import OpenBlocker as OpenBlocker
    from unstuck.decide.policy import PolicyConfig as PolicyConfig
    from unstuck.decide.policy import RecoveryState as RecoveryState
    from unstuck.decide.policy import after_result as after_result
    from unstuck.decide.policy import before_dispatch as before_dispatch
    from unstuck.guard.guard import Action as Action
    from unstuck.guard.guard import Decision as Decision
    from unstuck.guard.guard import Guard as Guard
    from unstuck.guard.guard import GuardStateError as GuardStateError
    from unstuck.loop.presence import Answer as Answer
    from unstuck.loop.presence import Asker as Asker
    from unstuck.loop.presence import ConsoleAsker as ConsoleAsker
    from unstuck.loop.turn import StepRecord as StepRecord
    from unstuck.loop.turn import TurnResult as TurnResult
    from unstuck.loop.turn import TurnStatus as TurnStatus
    from unstuck.loop.turn import run_turn as run_turn
    from unstuck.recognise.classify import classify_result as classify_result
    from unstuck.store.events import EventName as EventName
    from unstuck.toolkit.models import Message as Message
    from unstuck.toolkit.models import Model as Model
    from unstuck.toolkit.models import ModelError as ModelError
    from unstuck.toolkit.models import ModelReply as ModelReply
    from unstuck.toolkit.models import OpenAIChatModel as OpenAIChatModel
    from unstuck.toolkit.models import Role as Role
    from unstuck.toolkit.specs import Toolset as Toolset
    from unstuck.toolkit.specs import ToolSpec as ToolSpec
    from unstuck.toolkit.specs import tool as tool

from unstuck.core import aliases as _aliases

_aliases.install()

__version__ = "0.1.0"

#: The public names of ``import unstuck`` → the module each lives in (the one place to add one).
_PUBLIC: dict[str, str] = {
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

__all__ = sorted(["__version__", *_PUBLIC])


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'unstuck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
