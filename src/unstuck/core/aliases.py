"""The import paths of earlier releases, kept working: ``unstuck.policy``, ``unstuck.tools``,
``unstuck.journal`` and the other modules that lived at the package's top before its layers
became folders (issue 24) are the same module objects as their new homes
(``unstuck.decide.policy``…); an old name that was split (``unstuck.tools``, ``unstuck.leases``)
is a module holding the public names of all its parts. Installed by ``unstuck/__init__.py`` as a meta path finder
(importlib's ``sys.meta_path`` protocol, PEP 451), so nothing is imported until an old path is.
New code imports the new paths; :data:`MOVED` lists them all (``docs/reference/index.md``).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from collections.abc import Sequence

__all__ = ["MOVED", "install"]

#: Old dotted path → the new module or modules (the first is the module's main home).
MOVED: dict[str, tuple[str, ...]] = {
    "unstuck.situations": ("unstuck.core.situations",),
    "unstuck.errors": ("unstuck.core.errors",),
    "unstuck.clock": ("unstuck.core.clock",),
    "unstuck.text": ("unstuck.core.text",),
    "unstuck.readers": ("unstuck.core.readers",),
    "unstuck.cache": ("unstuck.core.cache",),
    "unstuck.trees": ("unstuck.core.trees",),
    "unstuck.redact": ("unstuck.core.redact",),
    "unstuck.output": ("unstuck.core.output",),
    "unstuck.classify": ("unstuck.recognise.classify",),
    "unstuck.declare": ("unstuck.recognise.declare",),
    "unstuck.signals": ("unstuck.recognise.signals",),
    "unstuck.codes": ("unstuck.recognise.codes",),
    "unstuck.catalogues": ("unstuck.recognise.catalogues",),
    "unstuck.envelopes": ("unstuck.recognise.envelopes",),
    "unstuck.instructions": ("unstuck.recognise.instructions",),
    "unstuck.shell": ("unstuck.commands.shell",),
    "unstuck.credentials": ("unstuck.commands.credentials",),
    "unstuck.installed": ("unstuck.commands.installed",),
    "unstuck.waiting": ("unstuck.commands.waiting",),
    "unstuck.leases": ("unstuck.processes.leases", "unstuck.processes.capture", "unstuck.processes.terminal",
                       "unstuck.processes.members", "unstuck.processes.ending", "unstuck.processes.registry",
                       "unstuck.processes.containment"),
    "unstuck.supervisor": ("unstuck.processes.supervisor",),
    "unstuck.cgroups": ("unstuck.processes.cgroups",),
    "unstuck.filelocks": ("unstuck.processes.filelocks",),
    "unstuck.tools": ("unstuck.toolkit.specs", "unstuck.core.tools",),
    "unstuck.models": ("unstuck.toolkit.models",),
    "unstuck.policy": ("unstuck.decide.policy",),
    "unstuck.retry": ("unstuck.decide.retry",),
    "unstuck.escalation": ("unstuck.decide.escalation",),
    "unstuck.prompts": ("unstuck.decide.prompts",),
    "unstuck.outcome": ("unstuck.decide.outcome",),
    "unstuck.journal": ("unstuck.store.journal",),
    "unstuck.lessons": ("unstuck.store.lessons",),
    "unstuck.engines": ("unstuck.store.engines",),
    "unstuck.sqlite_store": ("unstuck.store.sqlite",),
    "unstuck.stores": ("unstuck.store.urls",),
    "unstuck.events": ("unstuck.store.events",),
    "unstuck.otel": ("unstuck.store.otel",),
    "unstuck.diagnostics": ("unstuck.store.diagnostics",),
    "unstuck.second_opinion": ("unstuck.store.second_opinion",),
    "unstuck.report_costs": ("unstuck.store.report_costs",),
    "unstuck.remember": ("unstuck.guard.lessons",),
    "unstuck.resume": ("unstuck.loop.resume",),
    "unstuck.presence": ("unstuck.loop.presence",),
    "unstuck.mcp_proxy": ("unstuck.integrations.mcp_proxy",),
    "unstuck.cli_bank": ("unstuck.cli.bank",),
    "unstuck.cli_exit": ("unstuck.cli.common",),
    "unstuck.cli_journal": ("unstuck.cli.journal",),
    "unstuck.cli_lessons": ("unstuck.cli.lessons",),
    "unstuck.cli_mining": ("unstuck.cli.mining",),
    "unstuck.cli_output": ("unstuck.cli.output",),
    "unstuck.cli_report": ("unstuck.cli.report",),
    "unstuck.cli_signals": ("unstuck.cli.signals",),
    "unstuck.cli_trace": ("unstuck.cli.trace",),
}


# The finder and loader follow the protocols of PEP 451 without subclassing importlib.abc's
# classes: importing importlib.abc imports importlib.resources too (Python 3.11), a cost every
# `import unstuck` would pay.
class _Loader:
    def __init__(self, targets: tuple[str, ...]) -> None:
        self.targets = targets

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        homes = [importlib.import_module(target) for target in self.targets]
        if len(homes) == 1:
            return homes[0]
        merged = types.ModuleType(spec.name, homes[0].__doc__)
        names: list[str] = []
        for home in homes:
            for name in getattr(home, "__all__", ()):
                setattr(merged, name, getattr(home, name))
                names.append(name)
        merged.__all__ = names  # type: ignore[attr-defined]
        return merged

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _Finder:
    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        targets = MOVED.get(fullname)
        if targets is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(targets))  # type: ignore[arg-type]


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
