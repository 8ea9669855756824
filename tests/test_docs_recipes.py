"""The recipes' code is true to the code: every ```python snippet in docs/recipes/ parses, and every ``labbot`` or
``labbot_client`` import in it resolves (the module imports, the imported name is in it), but for the placeholders
a recipe is about to create (the ``weather`` server, the ``data_checker`` role, the ``my_job`` job)."""

from __future__ import annotations

import ast
import contextlib
import importlib
import re
import textwrap
from pathlib import Path

import pytest

RECIPES = sorted((Path(__file__).resolve().parents[1] / "docs" / "recipes").glob("*.md"))
# what the recipes add, so not in the tree: a module path with one of these parts, or an imported name among them
PLACEHOLDERS = {"weather", "data_checker", "my_job"}
FENCE = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)


def snippets(recipe: Path) -> list[str]:
    return [textwrap.dedent(m.group(2)) for m in FENCE.finditer(recipe.read_text())]


def labbot_imports(source: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each ``from labbot… import name`` and ``(module, None)`` for each ``import labbot…``."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in ("labbot", "labbot_client"):
                found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] in ("labbot", "labbot_client")]
    return found


def unresolved(module: str, name: str | None) -> str | None:
    """Why ``from module import name`` (or ``import module``) fails, or None when it works or is a placeholder."""
    if PLACEHOLDERS & set(module.split(".")) or name in PLACEHOLDERS:
        return None
    try:
        imported = importlib.import_module(module)
    except ImportError as e:
        return f"{module}: {e}"
    if name is None or hasattr(imported, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return f"{module} has no {name}"
    return None


def test_the_recipes_have_python_snippets_with_labbot_imports() -> None:
    assert len(RECIPES) >= 4
    imports: list[tuple[str, str | None]] = []
    for source in (source for recipe in RECIPES for source in snippets(recipe)):
        with contextlib.suppress(SyntaxError):  # the test below names a snippet that does not parse
            imports += labbot_imports(source)
    assert len(imports) >= 5, "the snippets' extraction found too few labbot imports: has the fence format changed?"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_every_snippet_parses_and_its_labbot_imports_resolve(recipe: Path) -> None:
    problems = []
    for i, source in enumerate(snippets(recipe), 1):
        try:
            imports = labbot_imports(source)
        except SyntaxError as e:
            problems.append(f"snippet {i} does not parse: {e}")
            continue
        problems += [f"snippet {i}: {why}" for m, n in imports if (why := unresolved(m, n))]
    assert not problems, f"{recipe.name}: " + "; ".join(problems)


ROOT = Path(__file__).resolve().parents[1]
DOCS = [*RECIPES, ROOT / "docs" / "architecture.md", ROOT / "README.md"]
MODULE = re.compile(r"`((?:[A-Za-z0-9_]+/)*[A-Za-z0-9_]+\.py)`")  # `bot/slack/app.py`, `runner.py`
NEW = {"my_job", "test_my_job", "test_weather", "NAME"}  # the files a recipe has its reader create


def test_every_module_the_docs_name_exists() -> None:
    """A module the recipes, the architecture or the README name is in the tree, so a rename that leaves a doc
    behind fails here: ``a/b.py`` is a file whose path ends so (the docs name a subpackage's modules relative to
    it), a bare ``b.py`` a file of that name; the placeholders a recipe is about to create are left out."""
    tree = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py") if not {".venv", ".git"} & set(p.parts)]
    names = {path.rsplit("/", 1)[-1] for path in tree}
    missing = []
    for doc in DOCS:
        for path in MODULE.findall(doc.read_text()):
            if (PLACEHOLDERS | NEW) & set(Path(path).with_suffix("").parts):
                continue
            found = path in names if "/" not in path else any(t == path or t.endswith("/" + path) for t in tree)
            if not found:
                missing.append(f"{doc.name}: {path}")
    assert len(DOCS) >= 6
    assert not missing, "named in the docs but not in the tree: " + ", ".join(sorted(set(missing)))
