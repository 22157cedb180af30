"""The house rules of DESIGN.md ("Layers and the direction of imports"), read from the source
with ``ast`` (nothing is imported): no module reaches into another's private names, no import
cycle at module level, and every module-level import points to the same or a lower layer.

Each violation is printed as ``file:line: what``, e.g.
``src/unstuck/resume.py:37: imports private name loop._Turn``.
"""

from __future__ import annotations

import ast
import enum
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "unstuck"


@dataclass(frozen=True, slots=True)
class Module:
    name: str  # dotted: unstuck.evals.runner; a package is its __init__ (unstuck.faults)
    path: Path
    is_package: bool

    @property
    def shown(self) -> str:
        return self.path.relative_to(SRC.parent).as_posix() if self.path.is_relative_to(SRC.parent) else self.path.name


@dataclass(frozen=True, slots=True)
class Edge:
    """One import of an unstuck module by another."""

    importer: Module
    line: int
    target: str  # the module imported (or imported from)
    module_level: bool  # not inside a function, nor under ``if TYPE_CHECKING:``


def discover() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = Module(".".join(parts), path, is_package)
    return found


MODULES = discover()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def short(dotted: str) -> str:
    """``unstuck.loop._Turn`` → ``loop._Turn`` (as a person names it)."""
    return dotted.removeprefix("unstuck.")


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_nodes(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it runs when the module is imported (not inside a
    function or lambda, not under ``if TYPE_CHECKING:``)."""

    def walk(node: ast.AST, module_level: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, module_level
            return
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for statement in node.body:
                yield from walk(statement, False)
            for statement in node.orelse:
                yield from walk(statement, module_level)
            return
        inner = module_level and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            yield from walk(child, inner)

    yield from walk(tree, True)


def resolve(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module of ``from ... import``, relative imports included."""
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    base = base if module.is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


@dataclass(frozen=True, slots=True)
class Parsed:
    module: Module
    tree: ast.Module
    edges: tuple[Edge, ...]
    private_imports: tuple[str, ...]  # "file:line: imports private name loop._Turn"
    bindings: dict[str, str]  # a local name → the unstuck module or name it was imported as


def private_module_allowed(importer: Module, target: str) -> bool:
    """A private module (``unstuck._foo``, ``unstuck.evals._bar``) may be imported only by its
    own package's ``__init__`` or from inside itself."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if is_private(part):
            private, parent = ".".join(parts[: i + 1]), ".".join(parts[:i])
            inside = importer.name == private or importer.name.startswith(private + ".")
            if not (inside or (importer.is_package and importer.name == parent)):
                return False
    return True


def parse(module: Module) -> Parsed:
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    edges: list[Edge] = []
    private: list[str] = []
    bindings: dict[str, str] = {}
    for node, module_level in import_nodes(tree):
        where = f"{module.shown}:{node.lineno}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name != "unstuck" and not alias.name.startswith("unstuck."):
                    continue
                edges.append(Edge(module, node.lineno, alias.name, module_level))
                if not private_module_allowed(module, alias.name):
                    private.append(f"{where}: imports private module {short(alias.name)}")
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:
                    bindings[alias.name.split(".")[0]] = alias.name.split(".")[0]
            continue
        source = resolve(module, node)
        if source != "unstuck" and not source.startswith("unstuck."):
            continue
        if not private_module_allowed(module, source):
            private.append(f"{where}: imports private module {short(source)}")
        for alias in node.names:
            full = f"{source}.{alias.name}"
            submodule = full in MODULES
            edges.append(Edge(module, node.lineno, full if submodule else source, module_level))
            if is_private(alias.name) and not (submodule and private_module_allowed(module, full)):
                private.append(f"{where}: imports private name {short(full)}")
            bindings[alias.asname or alias.name] = full
    return Parsed(module, tree, tuple(edges), tuple(private), bindings)


PARSED = {name: parse(module) for name, module in MODULES.items()}


def dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; ``None`` when the chain does not start at a name."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(names)]


def private_attribute_uses(parsed: Parsed) -> Iterator[str]:
    """``x._name`` where ``x`` was imported from unstuck (a module, or a name of another
    module): ``shell._cache``, ``Journal._turn``, ``unstuck.loop._Turn``. Dunders are fine."""
    for node in ast.walk(parsed.tree):
        if not isinstance(node, ast.Attribute) or not is_private(node.attr):
            continue
        chain = dotted(node)
        if chain is None or chain[0] not in parsed.bindings:
            continue
        full = ".".join([parsed.bindings[chain[0]], *chain[1:]])
        owner = full.rsplit(".", 1)[0]
        if owner == parsed.module.name:
            continue  # its own module, imported under another name
        yield f"{parsed.module.shown}:{node.lineno}: uses private name {short(full)}"


def test_no_module_imports_or_uses_another_modules_private_names() -> None:
    violations = [v for parsed in PARSED.values() for v in (*parsed.private_imports, *private_attribute_uses(parsed))]
    for violation in violations:
        print(violation)
    assert not violations, "private names reached across modules:\n" + "\n".join(violations)


def module_graph() -> dict[str, dict[str, Edge]]:
    """importer → {imported module → the first module-level edge}, unstuck modules only."""
    graph: dict[str, dict[str, Edge]] = {name: {} for name in MODULES}
    for parsed in PARSED.values():
        for edge in parsed.edges:
            if edge.module_level and edge.target in MODULES and edge.target != parsed.module.name:
                graph[parsed.module.name].setdefault(edge.target, edge)
    return graph


def cycles(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan's
    algorithm, then a path around the component from its first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)

    found: list[list[str]] = []
    for component in components:
        members, start = set(component), component[0]
        path, seen = [start], {start}
        while True:  # walk inside the component until the path closes on a module already on it
            inside = [n for n in sorted(graph[path[-1]]) if n in members]  # never empty in a component
            nxt = start if start in inside else next((n for n in inside if n not in seen), inside[0])
            if nxt in seen:
                found.append([*path[path.index(nxt):], nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return found


def test_no_import_cycle_among_modules_at_module_level() -> None:
    graph = module_graph()
    violations = []
    for cycle in cycles(graph):
        steps = [graph[a][b] for a, b in itertools.pairwise(cycle)]
        where = ", ".join(f"{e.importer.shown}:{e.line}" for e in steps)
        violations.append(f"import cycle {' -> '.join(short(m) for m in cycle)} ({where})")
    for violation in violations:
        print(violation)
    assert not violations, "\n".join(violations)


class Layer(enum.IntEnum):
    """DESIGN.md, "Layers and the direction of imports", lowest first."""

    VOCABULARY = 0  # situations · classify · tools, and the modules they use
    DECISIONS = 1  # policy · retry · escalation · prompts: pure decisions
    STORES = 2  # lessons · journal · events · diagnostics: stores and observers
    GUARD = 3  # one tool call: before/after, state, latch
    LOOP = 4  # the agent loop: model ↔ tools, presence
    EVALS = 5  # evals · faults · mining
    INTEGRATIONS = 6  # mcp, openai-agents, langgraph, pydantic-ai
    CLI = 7


#: Every module's layer. The modules DESIGN.md names sit where it puts them; the others where
#: their own module-level imports put them (the lowest layer that holds everything they import).
LAYERS: dict[str, Layer] = {
    # vocabulary: the words and the tools, and what they are built from
    "unstuck.situations": Layer.VOCABULARY,
    "unstuck.classify": Layer.VOCABULARY,
    "unstuck.tools": Layer.VOCABULARY,
    "unstuck.errors": Layer.VOCABULARY,  # imports nothing: the root of every error
    "unstuck.text": Layer.VOCABULARY,  # imports nothing: tool text made safe
    "unstuck.clock": Layer.VOCABULARY,  # imports nothing: time comes in as an argument
    "unstuck.trees": Layer.VOCABULARY,  # errors: file trees changed and removed without following a link
    "unstuck.shell": Layer.VOCABULARY,  # text
    "unstuck.envelopes": Layer.VOCABULARY,  # text
    "unstuck.codes": Layer.VOCABULARY,  # situations
    "unstuck.catalogues": Layer.VOCABULARY,  # situations
    "unstuck.signals": Layer.VOCABULARY,  # catalogues, codes, shell, situations, windows
    "unstuck.concepts": Layer.VOCABULARY,  # cache, errors, readers, situations: causes said in plain words
    "unstuck.windows": Layer.VOCABULARY,  # cache, catalogues, errors, readers, situations: Windows shells' messages
    "unstuck.declare": Layer.VOCABULARY,  # classify, situations
    "unstuck.instructions": Layer.VOCABULARY,  # classify, shell, text: what tool text may become
    "unstuck.leases": Layer.VOCABULARY,  # imports nothing: tool processes and their deadline
    "unstuck.supervisor": Layer.VOCABULARY,  # leases: ends what a dead process's leases left
    "unstuck.filelocks": Layer.VOCABULARY,  # declare
    "unstuck.toolkit": Layer.VOCABULARY,  # classify, declare, filelocks, leases, shell, tools
    "unstuck.models": Layer.VOCABULARY,  # tools: messages and the Model protocol
    "unstuck.readers": Layer.VOCABULARY,  # errors: bounded, depth-limited reading of files and streams
    "unstuck.redact": Layer.VOCABULARY,  # cache: secrets masked in stored and shown text
    "unstuck.output": Layer.VOCABULARY,  # redact: the output boundary (streams, JSON, files, HTML) shows no secret
    "unstuck.credentials": Layer.VOCABULARY,  # shell, text: credential-changing command lines
    "unstuck.waiting": Layer.VOCABULARY,  # shell: the non-interactive fix of a call that waited
    "unstuck.installed": Layer.VOCABULARY,  # imports nothing: programs on disk outside PATH
    "unstuck.cache": Layer.VOCABULARY,  # imports nothing of ours: derived data kept between processes
    "unstuck.cgroups": Layer.VOCABULARY,  # imports nothing of ours: a cgroup v2 subtree per lease
    # pure decisions
    "unstuck.policy": Layer.DECISIONS,
    "unstuck.retry": Layer.DECISIONS,
    "unstuck.escalation": Layer.DECISIONS,
    "unstuck.prompts": Layer.DECISIONS,
    "unstuck.outcome": Layer.DECISIONS,  # escalation, models: a turn's status and records
    # stores and observers
    "unstuck.lessons": Layer.STORES,
    "unstuck.journal": Layer.STORES,
    "unstuck.events": Layer.STORES,
    "unstuck.diagnostics": Layer.STORES,
    "unstuck.sqlite_store": Layer.STORES,  # redact: what the two stores share
    "unstuck.engines": Layer.STORES,  # sqlite_store, stores: one SQL interface over SQLite and PostgreSQL
    "unstuck.stores": Layer.STORES,  # errors, redact: store URLs (sqlite/postgresql) and PostgreSQL connections
    "unstuck.otel": Layer.STORES,  # events: an observer
    "unstuck.remember": Layer.STORES,  # journal, lessons, events, policy, outcome: lessons for a turn
    "unstuck.second_opinion": Layer.STORES,  # engines, models, sqlite_store: an adviser with a cache
    "unstuck.report_costs": Layer.STORES,  # journal, policy, outcome: the cost of blockers across sessions
    # one call, then the loop
    "unstuck.guard": Layer.GUARD,
    "unstuck.loop": Layer.LOOP,
    "unstuck.presence": Layer.LOOP,  # DESIGN.md names it with the loop
    "unstuck.resume": Layer.LOOP,  # loop
    "unstuck": Layer.LOOP,  # the package's front door re-exports up to the loop
    # evals · faults · mining
    "unstuck.evals": Layer.EVALS,
    "unstuck.evals.agents": Layer.EVALS,
    "unstuck.evals.casebook": Layer.EVALS,
    "unstuck.evals.compare": Layer.EVALS,
    "unstuck.evals.curve": Layer.EVALS,
    "unstuck.evals.fake_github": Layer.EVALS,
    "unstuck.evals.harvest": Layer.EVALS,
    "unstuck.evals.judge": Layer.EVALS,
    "unstuck.evals.report": Layer.EVALS,
    "unstuck.evals.runner": Layer.EVALS,
    "unstuck.evals.sandbox": Layer.EVALS,
    "unstuck.evals.scenario_state": Layer.EVALS,
    "unstuck.evals.scenario_tools": Layer.EVALS,
    "unstuck.evals.scenarios": Layer.EVALS,
    "unstuck.evals.sessions": Layer.EVALS,
    "unstuck.evals.shell_world": Layer.EVALS,
    "unstuck.evals.trust": Layer.EVALS,
    "unstuck.faults": Layer.EVALS,
    "unstuck.faults.bank": Layer.EVALS,
    "unstuck.faults.injector": Layer.EVALS,
    "unstuck.mining": Layer.EVALS,
    "unstuck.mining.environment": Layer.EVALS,
    "unstuck.mining.trace": Layer.EVALS,
    "unstuck.mining.rules": Layer.EVALS,
    "unstuck.mining.envs": Layer.EVALS,
    "unstuck.mining.envs.package_cli": Layer.EVALS,
    "unstuck.mining.agents": Layer.EVALS,
    "unstuck.mining.rollout": Layer.EVALS,
    "unstuck.mining.backends": Layer.EVALS,
    "unstuck.mining.envs.files_comments": Layer.EVALS,
    "unstuck.mining.labels": Layer.EVALS,
    "unstuck.mining.contrast": Layer.EVALS,
    "unstuck.mining.envs.issue_tracker": Layer.EVALS,
    "unstuck.mining.extract": Layer.EVALS,
    "unstuck.mining.mine": Layer.EVALS,
    # the command line
    "unstuck.integrations": Layer.INTEGRATIONS,
    "unstuck.integrations.common": Layer.INTEGRATIONS,
    "unstuck.integrations.mcp": Layer.INTEGRATIONS,
    "unstuck.mcp_proxy": Layer.INTEGRATIONS,
    "unstuck.integrations.langgraph": Layer.INTEGRATIONS,
    "unstuck.integrations.openai_agents": Layer.INTEGRATIONS,
    "unstuck.integrations.pydantic_ai": Layer.INTEGRATIONS,
    "unstuck.integrations.peers": Layer.INTEGRATIONS,
    "unstuck.integrations.shell_server": Layer.INTEGRATIONS,
    "unstuck.cli": Layer.CLI,
    "unstuck.cli_bank": Layer.CLI,
    "unstuck.cli_exit": Layer.CLI,
    "unstuck.cli_output": Layer.CLI,
    "unstuck.cli_journal": Layer.CLI,
    "unstuck.cli_lessons": Layer.CLI,
    "unstuck.cli_mining": Layer.CLI,
    "unstuck.cli_report": Layer.CLI,
    "unstuck.cli_signals": Layer.CLI,
    "unstuck.cli_trace": Layer.CLI,
    "unstuck.__main__": Layer.CLI,
}


def test_every_module_has_a_layer() -> None:
    missing = [f"{m.shown}: has no layer in tests/test_architecture.py LAYERS" for m in MODULES.values()
               if m.name not in LAYERS]
    for violation in missing:
        print(violation)
    assert not missing, "\n".join(missing)


def test_module_level_imports_point_to_the_same_or_a_lower_layer() -> None:
    violations = []
    for importer, targets in module_graph().items():
        for target, edge in sorted(targets.items()):
            if importer in LAYERS and target in LAYERS and LAYERS[target] > LAYERS[importer]:
                violations.append(f"{edge.importer.shown}:{edge.line}: {short(importer)} ({LAYERS[importer].name.lower()})"
                                  f" imports {short(target)} ({LAYERS[target].name.lower()}), a higher layer")
    for violation in violations:
        print(violation)
    assert not violations, "\n".join(violations)


# -- the checker itself, on small sources ------------------------------------------------------

def parsed_from(tmp_path: Path, name: str, source: str) -> Parsed:
    path = tmp_path / (name.replace(".", "_") + ".py")
    path.write_text(source, encoding="utf-8")
    return parse(Module(name, path, is_package=False))


@pytest.mark.parametrize(("source", "expected"), [
    ("from unstuck.loop import _Turn\n", "imports private name loop._Turn"),
    ("from unstuck._wire import frame\n", "imports private module _wire"),
    ("import unstuck.loop\nunstuck.loop._Turn\n", "uses private name loop._Turn"),
    ("from unstuck import shell\nshell._cache.clear()\n", "uses private name shell._cache"),
    ("from unstuck.journal import Journal\nJournal._turn(())\n", "uses private name journal.Journal._turn"),
    ("def f():\n    from unstuck.loop import _Turn\n", "imports private name loop._Turn"),
])
def test_the_checker_names_each_kind_of_reach_into_private_names(tmp_path: Path, source: str, expected: str) -> None:
    parsed = parsed_from(tmp_path, "unstuck.somewhere", source)
    found = [*parsed.private_imports, *private_attribute_uses(parsed)]
    assert len(found) == 1 and found[0].endswith(expected), found


@pytest.mark.parametrize("source", [
    "from unstuck.loop import run_turn\nrun_turn.__doc__\n",
    "from unstuck import __version__\n",
    "import json\njson._default_encoder\n",  # not an unstuck module
    "from unstuck.journal import Journal\nclass Mine(Journal):\n    def f(self):\n        return self._db\n",
])
def test_the_checker_leaves_public_names_dunders_and_other_packages_alone(tmp_path: Path, source: str) -> None:
    parsed = parsed_from(tmp_path, "unstuck.somewhere", source)
    assert not [*parsed.private_imports, *private_attribute_uses(parsed)]


def test_imports_inside_functions_or_for_type_checking_are_not_module_level(tmp_path: Path) -> None:
    parsed = parsed_from(tmp_path, "unstuck.somewhere", (
        "from typing import TYPE_CHECKING\nimport unstuck.clock\n"
        "if TYPE_CHECKING:\n    import unstuck.loop\n"
        "def f():\n    import unstuck.journal\n"))
    assert {(e.target, e.module_level) for e in parsed.edges} == {
        ("unstuck.clock", True), ("unstuck.loop", False), ("unstuck.journal", False)}


def test_a_cycle_is_reported_as_a_closed_path() -> None:
    module = MODULES["unstuck"]
    graph = {"a": {"b": Edge(module, 1, "b", True)}, "b": {"c": Edge(module, 2, "c", True)},
             "c": {"a": Edge(module, 3, "a", True)}, "d": {"a": Edge(module, 4, "a", True)}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
