"""The house rules of DESIGN.md ("Layers and the direction of imports"), read from the source
with ``ast`` (nothing is imported): no module reaches into another's private names, no import
cycle at module level, and every module-level import points to the same or a lower layer.

Each violation is printed as ``file:line: what``, e.g.
``src/unstuck/loop/resume.py:37: imports private name loop.turn._Turn``.
"""

from __future__ import annotations

import ast
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
    """``unstuck.loop.turn._Turn`` → ``loop._Turn`` (as a person names it)."""
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
    private_imports: tuple[str, ...]  # "file:line: imports private name loop.turn._Turn"
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
    module): ``shell._cache``, ``Journal._turn``, ``unstuck.loop.turn._Turn``. Dunders are fine."""
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


# -- layers: the folders (DESIGN.md, "Layers and the direction of imports") -------------------

#: DESIGN.md's figure of the layers as folders, top row first, as docs/development.md draws it
#: (the test below reads that figure and holds it to this). A module may import its own folder,
#: any folder on a lower row, and on its own row a folder to its right: never one above, never
#: one to its left.
ROWS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("integrations",),
    ("evals", "mining", "faults"),
    ("loop",),
    ("guard",),
    ("store",),
    ("decide",),
    ("toolkit", "processes"),
    ("recognise", "commands"),
    ("core",),
)
#: The package's own two files at the top: the front door re-exports up to the loop; ``python -m
#: unstuck`` is the command line.
TOP_FILES = {"unstuck": "loop", "unstuck.__main__": "cli"}


def rank(folder: str) -> tuple[int, int]:
    """(row from the bottom, place from the right): higher means higher in the figure."""
    for row, folders in enumerate(reversed(ROWS)):
        if folder in folders:
            return row, len(folders) - 1 - folders.index(folder)
    raise KeyError(folder)


def folder_of(module: str) -> str | None:
    """The layer folder of ``unstuck.<folder>.…``; the front door's for the two top files."""
    if module in TOP_FILES:
        return TOP_FILES[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_lives_in_a_layer_folder() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    known = {f for row in ROWS for f in row}
    assert folders == known, f"folders not in the figure: {sorted(folders - known)}; figure folders missing: {sorted(known - folders)}"
    loose = sorted(m.shown for m in MODULES.values() if m.name not in TOP_FILES and m.name.count(".") < 2
                   and not m.is_package)
    assert not loose, f"modules outside a layer folder: {loose}"


def test_every_import_points_to_its_own_folder_a_lower_row_or_the_right_on_its_row() -> None:
    violations = []
    for parsed in PARSED.values():
        mine = folder_of(parsed.module.name)
        for edge in parsed.edges:
            target = edge.target if edge.target in MODULES else edge.target.rsplit(".", 1)[0]
            theirs = folder_of(target)
            if mine is None or theirs is None or theirs == mine or target == "unstuck":
                continue
            if rank(theirs) > rank(mine):
                violations.append(f"{edge.importer.shown}:{edge.line}: {mine}/ imports {short(target)} "
                                  f"({theirs}/, {'to its left' if rank(theirs)[0] == rank(mine)[0] else 'a higher row'})")
    for violation in violations:
        print(violation)
    assert not violations, "\n".join(violations)


def test_the_development_page_draws_the_same_folders_in_the_same_order() -> None:
    page = (SRC.parent / "docs" / "development.md").read_text(encoding="utf-8")
    figure = page.split("```", 2)[1]
    drawn = tuple(tuple(word.strip().rstrip("/") for word in line.split("—")[0].split(" · "))
                  for line in figure.strip().splitlines() if line.strip() and not line.startswith(" "))
    assert tuple(tuple(f.strip() for f in row) for row in drawn) == ROWS


# -- the checker itself, on small sources ------------------------------------------------------

def parsed_from(tmp_path: Path, name: str, source: str) -> Parsed:
    path = tmp_path / (name.replace(".", "_") + ".py")
    path.write_text(source, encoding="utf-8")
    return parse(Module(name, path, is_package=False))


@pytest.mark.parametrize(("source", "expected"), [
    ("from unstuck.loop.turn import _Turn\n", "imports private name loop.turn._Turn"),
    ("from unstuck._wire import frame\n", "imports private module _wire"),
    ("import unstuck.loop.turn\nunstuck.loop._Turn\n", "uses private name loop._Turn"),
    ("from unstuck import shell\nshell._cache.clear()\n", "uses private name shell._cache"),
    ("from unstuck.store.journal import Journal\nJournal._turn(())\n", "uses private name store.journal.Journal._turn"),
    ("def f():\n    from unstuck.loop.turn import _Turn\n", "imports private name loop.turn._Turn"),
])
def test_the_checker_names_each_kind_of_reach_into_private_names(tmp_path: Path, source: str, expected: str) -> None:
    parsed = parsed_from(tmp_path, "unstuck.somewhere", source)
    found = [*parsed.private_imports, *private_attribute_uses(parsed)]
    assert len(found) == 1 and found[0].endswith(expected), found


@pytest.mark.parametrize("source", [
    "from unstuck.loop.turn import run_turn\nrun_turn.__doc__\n",
    "from unstuck import __version__\n",
    "import json\njson._default_encoder\n",  # not an unstuck module
    "from unstuck.store.journal import Journal\nclass Mine(Journal):\n    def f(self):\n        return self._db\n",
])
def test_the_checker_leaves_public_names_dunders_and_other_packages_alone(tmp_path: Path, source: str) -> None:
    parsed = parsed_from(tmp_path, "unstuck.somewhere", source)
    assert not [*parsed.private_imports, *private_attribute_uses(parsed)]


def test_imports_inside_functions_or_for_type_checking_are_not_module_level(tmp_path: Path) -> None:
    parsed = parsed_from(tmp_path, "unstuck.somewhere", (
        "from typing import TYPE_CHECKING\nimport unstuck.core.clock\n"
        "if TYPE_CHECKING:\n    import unstuck.loop.turn\n"
        "def f():\n    import unstuck.store.journal\n"))
    assert {(e.target, e.module_level) for e in parsed.edges} == {
        ("unstuck.core.clock", True), ("unstuck.loop.turn", False), ("unstuck.store.journal", False)}


def test_a_cycle_is_reported_as_a_closed_path() -> None:
    module = MODULES["unstuck"]
    graph = {"a": {"b": Edge(module, 1, "b", True)}, "b": {"c": Edge(module, 2, "c", True)},
             "c": {"a": Edge(module, 3, "a", True)}, "d": {"a": Edge(module, 4, "a", True)}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
