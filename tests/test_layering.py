"""The layering contracts (pyproject.toml, ``[tool.importlinter]``) hold on this tree, and an import that breaks
one fails ``lint-imports`` — the check ``make lint`` runs — naming the contract it breaks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # lint-imports runs as its own process, on a copy of the tree
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = tuple(sorted(p.name for p in (ROOT / "labbot").iterdir() if p.is_symlink()))  # its layers


def _tree(tmp: Path) -> Path:
    """A copy of what the contracts read: the packages, the ``labbot`` symlink package, the client, pyproject."""
    ignore = shutil.ignore_patterns("__pycache__")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp / name, ignore=ignore)
    shutil.copytree(ROOT / "labbot", tmp / "labbot", symlinks=True, ignore=ignore)
    shutil.copytree(ROOT / "client" / "labbot_client", tmp / "client" / "labbot_client", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    return tmp


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'client'}"}
    return subprocess.run(
        [str(exe), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _add_import(path: Path, line: str) -> None:
    text = path.read_text()
    marker = "from __future__ import annotations\n"
    assert marker in text, path
    path.write_text(text.replace(marker, f"{marker}\n{line}  # noqa\n", 1))


def _broken(report: str, contract: str) -> bool:
    """Whether lint-imports' report lists the contract whose name starts with ``contract`` as BROKEN (the report
    wraps long names, so white space is folded first)."""
    folded = " ".join(report.split())
    return re.search(re.escape(contract) + r"(?:(?!KEPT).)*?BROKEN", folded) is not None


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint_imports(_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "contract"),
    [
        ("storage/db.py", "import labbot.bot.config", "layers"),
        ("common/errors.py", "import labbot.training.specs", "layers"),
        ("mcp_servers/lab.py", "import labbot.agents.fleet.runtime", "layers"),
        ("agents/fleet/runtime.py", "import labbot.agents.babysitter.pager", "the LLM fleet and the babysitter"),
        ("training/service.py", "import torch", "the control plane does not need torch"),
        ("training/jobs/tiny_lm.py", "import labbot.storage.db", "reference jobs run on cluster nodes"),
    ],
)
def test_an_import_that_breaks_the_layering_fails_the_lint(
    tmp_path: Path, module: str, bad_import: str, contract: str
) -> None:
    tree = _tree(tmp_path)
    _add_import(tree / module, bad_import)
    result = _lint_imports(tree)
    assert result.returncode != 0
    assert _broken(result.stdout, contract), result.stdout


def test_the_client_importing_labbot_fails_the_lint(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    _add_import(tree / "client" / "labbot_client" / "telemetry.py", "import labbot.common.errors")
    result = _lint_imports(tree)
    assert result.returncode != 0
    assert _broken(result.stdout, "the in-job client imports nothing"), result.stdout
