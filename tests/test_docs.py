"""The documentation site builds with MkDocs in strict mode (every page in the nav exists, every
link resolves, every docstring the API reference renders parses), and the README stays the
front door: under 250 lines, linking into the site."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                            "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300,
                           cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "guard" / "index.html").read_text(encoding="utf-8").count("Guard") > 5
    for page in ("openai-agents", "langgraph", "pydantic-ai", "mcp"):
        assert (tmp_path / "site" / "frameworks" / page / "index.html").is_file()


def test_the_readme_is_the_front_door() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    for section in ("## Quickstart", "## The eval", "## Guard your own loop", "## Frameworks", "## Documentation"):
        assert section in text
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert len(links) >= 10
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, f"the README links to pages that do not exist: {missing}"


def test_every_doc_page_is_in_the_nav() -> None:
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [page for item in node for page in pages(item)]
        if isinstance(node, dict):
            return [page for value in node.values() for page in pages(value)]
        return []

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk <= listed, f"pages no reader can reach: {sorted(on_disk - listed)}"


def supported_modules() -> set[str]:
    """The modules the table of ``docs/reference/index.md`` lists as supported."""
    table = (ROOT / "docs" / "reference" / "index.md").read_text(encoding="utf-8").split("## Supported modules", 1)[1]
    return set(re.findall(r"`(unstuck(?:\.\w+)*)`", table.split("Every other module", 1)[0]))


def test_the_supported_modules_are_the_ones_the_reference_renders() -> None:
    reference = ROOT / "docs" / "reference"
    rendered = {name for page in reference.glob("*.md")
                for name in re.findall(r"^::: ([\w.]+)", page.read_text(encoding="utf-8"), re.MULTILINE)}
    listed = supported_modules()
    assert listed == rendered, f"listed, not rendered: {sorted(listed - rendered)}; rendered, not listed: " \
                               f"{sorted(rendered - listed)}"


#: The line that ends the first paragraph of every module the reference does not list: the
#: generic form, or one naming the supported module to use instead.
INTERNAL = re.compile(r"^Internal: not a supported import path(?: \(docs/reference/index\.md lists those that are\)"
                      r"|; use ``(unstuck(?:\.\w+)*)``)\.$")


def test_every_module_is_supported_or_says_it_is_internal() -> None:
    import ast

    supported = supported_modules()
    package = ROOT / "src" / "unstuck"
    wrong: list[str] = []
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        first = (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").split("\n\n", 1)[0]
        says = INTERNAL.match(first.strip().split("\n")[-1])
        if name in supported and says:
            wrong.append(f"{name}: listed as supported, yet says it is internal")
        elif name not in supported and not says:
            wrong.append(f"{name}: not in docs/reference/index.md, and its docstring's first paragraph does not "
                         f"end with 'Internal: not a supported import path …'")
        elif says and says.group(1) and says.group(1) not in supported:
            wrong.append(f"{name}: points to {says.group(1)}, which is not supported")
    assert not wrong, "\n".join(wrong)
