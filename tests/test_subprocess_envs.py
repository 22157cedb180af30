"""Every environment a test builds for a subprocess carries the session's temporary home and
cache (tests/host_guard.py fails the session when the real home or ``~/.cache/unstuck`` changes).

An environment built from scratch (a dict display naming ``PATH``, or an ``env=`` dict display
spreading no other environment) leaves ``HOME`` out unless someone remembers it, and a program
started without ``HOME`` writes the real one (getpwuid(3)). The rule, checked on the source of
every module under tests/ (Python's own ``ast``) and of every string constant there that parses
as Python (the code a test hands ``python -c``): such an environment is built with
``conftest.bare_env`` instead, or spreads ``os.environ``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: Where the helper itself builds the environment it hands out, and this module (its examples of
#: what the rule refuses are strings of code).
EXEMPT = (TESTS / "conftest.py", Path(__file__).resolve())
#: Calls whose dict argument is laid over an environment, never one in its own right:
#: ``CliRunner.invoke(env=...)`` (click's testing sets the variables over this process's own
#: for the call), ``env.update({...})`` and the Claude Agent SDK's ``ClaudeAgentOptions(env=...)``
#: (its transport starts the CLI with ``{**os.environ, **options.env}``:
#: ``claude_agent_sdk/_internal/transport/subprocess_cli.py``).
ADDITIVE = frozenset({"invoke", "update", "ClaudeAgentOptions"})


def _spreads(node: ast.Dict) -> list[ast.expr]:
    """The ``**`` entries of a dict display (their key is ``None``: Python's ast module)."""
    return [value for key, value in zip(node.keys, node.values, strict=True) if key is None]


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a call of ``bare_env``."""
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bare_env"


#: The keys that make a dict display an environment: where programs are found, and the home.
ENV_KEYS = frozenset({"PATH", "HOME"})


def _names_path(node: ast.Dict) -> bool:
    return any(isinstance(key, ast.Constant) and key.value in ENV_KEYS for key in node.keys)


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope`` down to the functions defined in it (those yielded, not entered)."""
    for child in ast.iter_child_nodes(scope):
        yield child
        if not isinstance(child, FUNCTIONS):
            yield from _own_nodes(child)


def _bound(scope: ast.AST) -> dict[str, ast.Dict]:
    """Names ``scope`` itself binds to a dict display."""
    return {target.id: node.value for node in _own_nodes(scope) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict) for target in node.targets if isinstance(target, ast.Name)}


def _scan(scope: ast.AST, where: str, outer: dict[str, ast.Dict]) -> Iterator[str]:
    bound = {**outer, **_bound(scope)}
    overlays = {id(arg) for node in _own_nodes(scope) if isinstance(node, ast.Call) and _callee(node) in ADDITIVE
                for arg in node.args}
    for node in _own_nodes(scope):
        if isinstance(node, ast.Dict) and id(node) not in overlays and _names_path(node) and not any(map(_is_environ, _spreads(node))):
            yield f"{where}:{node.lineno}: an environment naming PATH or HOME built without bare_env or os.environ"
        if not isinstance(node, ast.Call) or _callee(node) in ADDITIVE:
            continue
        if _callee(node) == "dict" and any(k.arg in ENV_KEYS for k in node.keywords):
            yield f"{where}:{node.lineno}: dict(PATH=... or HOME=...) built without bare_env"
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg == "env" and isinstance(value, ast.Name) and value.id in bound:
                value = bound[value.id]  # its own line is reported above when it names PATH
            if keyword.arg == "env" and isinstance(value, ast.Dict) and not _spreads(value) and not _names_path(value):
                yield f"{where}:{keyword.value.lineno}: env= a dict display spreading no environment"
    for node in _own_nodes(scope):
        if isinstance(node, FUNCTIONS):
            yield from _scan(node, where, bound)


def violations(source: str, where: str) -> Iterator[str]:
    """Each environment built from scratch in ``source`` without :func:`conftest.bare_env`, as
    ``where:line: what``; then those in its string constants that parse as Python. A name passed
    as ``env=`` is looked up in its function, then in the module."""
    tree = ast.parse(source)
    yield from _scan(tree, where, {})
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "env" in node.value:
            try:
                code = ast.parse(node.value)
            except (SyntaxError, ValueError):
                continue
            yield from _scan(code, f"{where}:{node.lineno} (code in a string)", {})


def test_every_subprocess_environment_the_tests_build_carries_the_session_home() -> None:
    found = [line for path in sorted(TESTS.rglob("*.py")) if path not in EXEMPT
             for line in violations(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS)))]
    assert not found, "build these with conftest.bare_env (or spread os.environ):\n" + "\n".join(found)


def test_the_scan_finds_each_shape_of_a_bare_environment() -> None:
    """The rule itself, on one source of each shape it refuses and of each it lets pass."""
    refused = {
        'subprocess.run(["x"], env={"PATH": "/usr/bin:/bin"})': 1,
        'ENV = {"LANG": "C.UTF-8"}\nsubprocess.run(["x"], env=ENV)': 1,
        'ENV = {"PATH": "/bin", "LANG": "C"}': 1,
        'Workspace(root, env={"HOME": str(root)})': 1,
        'env = {**PLAIN, "PATH": "/bin"}': 1,
        'env = dict(PATH="/bin")': 1,
        'CODE = "run_leased([\\"true\\"], env={\\"PATH\\": \\"/bin\\"})"': 1,
    }
    allowed = (
        'subprocess.run(["x"], env={**os.environ, "PATH": "/bin"})',
        'subprocess.run(["x"], env=bare_env(LANG="C.UTF-8"))',
        'env = {**bare_env(), "PATH": "/bin"}',
        'subprocess.run(["x"], env={**world.env, "LOG": "x"})',
        'CliRunner().invoke(app, ["x"], env={"COLUMNS": "200"})',
        'subprocess.run(["x"], env=dict(os.environ))',
        'env = dict(os.environ)\nenv.update({"HOME": str(tmp_path)})',
    )
    for source, count in refused.items():
        assert len(list(violations(source, "t"))) == count, source
    for source in allowed:
        assert not list(violations(source, "t")), source
