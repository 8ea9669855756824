"""Every package labbot's code imports is one its pyproject.toml declares, not one that merely came along with another
(mcp brings httpx2 and mcp_types, httpx brings anyio): a transitive dependency can change or vanish in any release.

Read from the source (every import statement, also those inside functions), mapped to distributions through the
installed metadata; the in-job client (client/) is held to its own pyproject.toml.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABBOT = tuple(sorted(p.name for p in (ROOT / "labbot").iterdir() if p.is_symlink()))  # its layers
OURS = {"labbot", "labbot_client"}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def declared(pyproject: Path) -> set[str]:
    """The distributions a pyproject.toml depends on, its extras included except dev (tests and tools)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = [r for extra, reqs in project.get("optional-dependencies", {}).items() if extra != "dev" for r in reqs]
    return {_name(r) for r in [*project.get("dependencies", []), *extras]}


def _optional(tree: ast.AST) -> set[int]:
    """The import statements tried under ``except ImportError`` (used when installed, like uvloop): not needed."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers
        ):
            guarded |= {
                id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)
            }
    return guarded


def imported(folders: list[Path]) -> dict[str, str]:
    """Each top-level module the code needs (absolute imports only), with one place that imports it."""
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            optional = _optional(tree)
            for node in ast.walk(tree):
                if id(node) in optional:
                    continue
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


@pytest.mark.parametrize(
    ("folders", "pyproject"),
    [(LABBOT, "pyproject.toml"), (("client/labbot_client",), "client/pyproject.toml")],
    ids=["labbot", "labbot-client"],
)
def test_every_imported_package_is_declared(folders: tuple[str, ...], pyproject: str) -> None:
    wanted = declared(ROOT / pyproject)
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, where in imported([ROOT / f for f in folders]).items():
        if module in sys.stdlib_module_names or module in OURS or module == "__future__":
            continue
        # an installed module maps to its distributions; one not installed here (torch) must be named as itself
        names = {_name(d) for d in distributions.get(module, [])} or {_name(module)}
        if not names & wanted:
            undeclared[module] = f"{where} (from {', '.join(sorted(names))})"
    assert not undeclared, f"imported but not declared in {pyproject}: {undeclared}"
