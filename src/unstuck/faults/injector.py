"""Fault injection: replace tool returns with observed failures from the bank (seed 003).
Internal: not a supported import path (docs/reference/index.md lists those that are).

"Each tool-return position is independently selected for replacement with probability
p_inj. A selected response is replaced with a compatible observed failure; otherwise the
true response is retained" (seed 003). The injector wraps a :class:`~unstuck.toolkit.specs.Toolset`:

* the real tool always runs first, so its state change stands even when its return is
  replaced (a write reported as failed may have happened: that is what a lost response
  looks like);
* a replacement is drawn among the forms that fit the call (its tags and channel, see
  :func:`call_targets`), balanced across families: first a family uniformly among the
  families that have a fitting form, then a form uniformly within it, so rare families
  appear as often as common ones;
* every draw comes from one ``random.Random`` seeded with ``seed``: the same seed and the
  same sequence of calls give the same injections;
* the replaced result carries ``ToolResult.injected`` (the form's id), which the loop turns
  into a ``fault.injected`` event and a marked step; the classifier and the policy never read
  it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from unstuck.core.tools import ToolResult
from unstuck.faults.bank import Channel, FailureBank, FailureForm, load_bank
from unstuck.toolkit.specs import Toolset, ToolSpec
from unstuck.toolkit.workspace import command_subject, path_words

__all__ = ["DEFAULT_P_INJ", "Injection", "Injector", "call_targets"]

#: The injection rate ``unstuck eval --p-inj`` suggests in its help (seed 003 sweeps 0 to 0.3).
DEFAULT_P_INJ = 0.1

#: What each standard tool's returns are: tags a form must share, and the channel.
_TOOL_TARGETS: Mapping[str, tuple[frozenset[str], Channel]] = {
    "read_file": (frozenset({"filesystem"}), Channel.EXCEPTION),
    "search_files": (frozenset({"filesystem"}), Channel.EXCEPTION),
    "web_search": (frozenset({"http"}), Channel.HTTP),
    "fetch_url": (frozenset({"http"}), Channel.HTTP),
}


def call_targets(spec: ToolSpec, arguments: Mapping[str, Any]) -> tuple[frozenset[str], Channel]:
    """The tags and channel a replacement for this call must fit.

    * a call with a ``command`` argument is a shell command: its program (``gh``, ``git``,
      ``curl`` ...) and ``shell`` (what any command can meet: not found, killed, timed out),
      channel ``exit``;
    * a call with a CLI ``name`` argument (``check_cli_setup``, ``sign_in_cli``): that
      program, channel ``exit``;
    * the standard file and web tools: ``filesystem`` exceptions and ``http`` responses;
    * any other tool: exceptions tagged with its name or ``python`` (a Python tool can raise
      any of Python's own errors).
    """
    command = arguments.get("command")
    if isinstance(command, str):
        program = command_subject(command)
        return frozenset({program, "shell"} if program else {"shell"}), Channel.EXIT
    name = arguments.get("name")
    if isinstance(name, str) and name and spec.name in ("check_cli_setup", "sign_in_cli", "install_cli"):
        return frozenset({name}), Channel.EXIT
    if spec.name in _TOOL_TARGETS:
        return _TOOL_TARGETS[spec.name]
    return frozenset({spec.name, "python"}), Channel.EXCEPTION


@dataclass(frozen=True, slots=True)
class Injection:
    """One replaced return: which call (0-based, counting every wrapped call), which tool,
    and the form that replaced it."""

    call_index: int
    tool: str
    form: FailureForm


@dataclass
class Injector:
    """Wrap tools so each return is replaced with probability ``p_inj`` by a fitting failure.

    Args:
        p_inj: probability in [0, 1] that one return is replaced.
        seed: seeds the one random stream all draws come from.
        bank: the forms to draw from (the bundled bank by default).
        targets: what a call's replacement must fit (:func:`call_targets` by default).

    Attributes:
        injections: every replacement made so far, in order.

    Raises:
        ValueError: when ``p_inj`` is outside [0, 1].
    """

    p_inj: float
    seed: int | str = 0
    bank: FailureBank = field(default_factory=load_bank)
    targets: Callable[[ToolSpec, Mapping[str, Any]], tuple[frozenset[str], Channel]] = call_targets
    injections: list[Injection] = field(default_factory=list)
    calls: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_inj <= 1.0:
            raise ValueError(f"p_inj must be within [0, 1], got {self.p_inj!r}")
        # two streams: the coin of call i is the same whatever happened at other calls and
        # whatever the rate, so at a higher rate the replaced calls are a superset (common
        # random numbers); the forms are drawn from the other stream
        self._coin = random.Random(f"{self.seed}:coin")
        self._random = random.Random(f"{self.seed}:pick")

    def draw(self, tags: Iterable[str], channel: Channel) -> FailureForm | None:
        """A fitting form, balanced across families; ``None`` when none fits."""
        fitting = self.bank.compatible(tags, channel)
        if not fitting:
            return None
        families = sorted({form.family for form in fitting})
        family = families[self._random.randrange(len(families))]
        members = [form for form in fitting if form.family is family]
        return members[self._random.randrange(len(members))]

    def replace_return(self, spec: ToolSpec, arguments: Mapping[str, Any], real: ToolResult) -> ToolResult:
        """Decide for one return: the real result, or a fitting failure marked ``injected``.

        The coin is tossed for every return, refused calls included, so whether one call is
        replaced does not depend on the earlier calls' results; a call that never ran keeps
        its refusal.
        """
        index = self.calls
        self.calls += 1
        if self._coin.random() >= self.p_inj or not real.executed:
            return real  # a call that never ran (refused) has no return to lose
        tags, channel = self.targets(spec, arguments)
        form = self.draw(tags, channel)
        if form is None:
            return real
        self.injections.append(Injection(index, spec.name, form))
        command = arguments.get("command")
        command = command if isinstance(command, str) else ""
        path = arguments.get("path")
        if not isinstance(path, str) or not path:
            path = next(iter(path_words(command)), "")
        return form.to_result(spec.name, command, path, program=command_subject(command) or "")

    def wrap_spec(self, spec: ToolSpec) -> ToolSpec:
        """``spec`` with its returns passed through :meth:`replace_return` (same name,
        schema, effect, interactivity, probe and subject)."""

        def injected(**arguments: Any) -> ToolResult:
            return self.replace_return(spec, arguments, spec.invoke(arguments))

        return replace(spec, fn=injected)

    def wrap(self, tools: Toolset) -> Toolset:
        """Every tool of ``tools`` wrapped (see :meth:`wrap_spec`)."""
        return Toolset(self.wrap_spec(spec) for spec in tools.values())
