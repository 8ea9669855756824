"""The layering contracts (pyproject.toml, ``[tool.importlinter]``) hold on this tree, and an import that breaks
one fails ``lint-imports`` — the check ``make lint`` runs — naming the contract it breaks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
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
    if marker in text:
        path.write_text(text.replace(marker, f"{marker}\n{line}  # noqa\n", 1))
    else:  # a package's __init__ that is only a docstring
        assert text.rstrip().endswith('"""'), path
        path.write_text(f"{text}\n{line}  # noqa\n")


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
        # indirect: the run service is not named, what it imports is (storage, sqlalchemy)
        ("training/jobs/tiny_lm.py", "import labbot.training.service", "reference jobs run on cluster nodes"),
        ("mcp_servers/lab.py", "import labbot.training.specs", "MCP servers go through /api/v1"),
        ("mcp_servers/codebase.py", "import labbot.storage.db", "MCP servers go through /api/v1"),
        # what issue 26 found: the eval-incidents job reaching the database through the module that freezes cases
        ("evals/incidents/job.py", "import labbot.evals.incidents.page_cases", "eval jobs run on cluster nodes"),
        ("evals/scoring/testrun.py", "import labbot.training.service", "eval jobs run on cluster nodes"),
        ("evals/seal/leak_probes.py", "import sqlalchemy", "eval jobs run on cluster nodes"),
        ("evals/generation/job.py", "import labbot.evals.service", "eval jobs run on cluster nodes"),
        ("evals/__init__.py", "import labbot.evals.service", "the packages above in-job code stay import-light"),
        ("training/__init__.py", "import labbot.training.service", "the packages above in-job code stay import-light"),
        # inside bot (issue 26): the doors never import each other, what they share sits below them
        ("bot/slack/handlers/runs.py", "import labbot.bot.api.runs", "bot's front doors"),
        ("bot/api/plots.py", "import labbot.bot.slack.blocks", "bot's front doors"),
        ("bot/render/tables.py", "import labbot.bot.slack.handlers.common", "bot's front doors"),
        ("bot/web/errors.py", "import labbot.bot.api.deps", "bot's front doors"),
        ("bot/slack/app.py", "import labbot.bot.serve", "bot's front doors"),
        ("bot/cli/evals.py", "import labbot.bot.slack.blocks", "the CLI is an HTTP client"),
        ("bot/cli/compare.py", "import labbot.bot.api.compare", "the CLI is an HTTP client"),
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


def test_every_evals_module_is_in_job_or_the_control_planes() -> None:
    """Each module of ``labbot.evals`` is named by the in-job contract: a source (it may run in a job, so it imports
    nothing of the control plane) or a forbidden module (the control plane's side); a new module must be put on one
    side, not left outside both."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [jobs] = [c for c in contracts if c["name"].startswith("eval jobs run on cluster nodes")]
    [parents] = [c for c in contracts if c["name"].startswith("the packages above in-job code")]
    named = [*jobs["source_modules"], *(m for m in jobs["forbidden_modules"] if m.startswith("labbot.evals."))]
    modules = {
        ".".join(("labbot", *p.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
        for p in (ROOT / "evals").rglob("*.py")
    }
    assert len(modules) > 30
    outside = sorted(
        m
        for m in modules
        if m not in parents["source_modules"] and not any(m == n or m.startswith(n + ".") for n in named)
    )
    assert outside == [], "name these in the in-job contract's source_modules or forbidden_modules: " + ", ".join(
        outside
    )


# every eval job's entrypoint and what it runs (the jobs import their runners lazily, after checking arguments)
EVAL_JOB_MODULES = (
    "labbot.evals.running.job",
    "labbot.evals.running.runner",
    "labbot.evals.generation.job",
    "labbot.evals.generation.generator",
    "labbot.evals.incidents.job",
    "labbot.evals.incidents.runner",
)
CONTROL_PLANE = (
    "sqlalchemy",
    "alembic",
    "labbot.storage",
    "labbot.training",
    "labbot.bot",
    "labbot.agents",
    "labbot.mcp_servers",
    "labbot.evals.service",
    "labbot.evals.incidents.page_cases",
    "labbot.evals.incidents.feedback_cases",
)


def test_the_eval_jobs_load_nothing_of_the_control_plane() -> None:
    """What the contracts cannot see (a package's ``__init__``, an import made while a module loads) checked where it
    happens: a fresh interpreter imports the eval jobs as a cluster node does, and holds no control-plane module."""
    code = (
        "import importlib, sys\n"
        f"for name in {EVAL_JOB_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        f"held = [m for m in sys.modules if any(m == c or m.startswith(c + '.') for c in {CONTROL_PLANE!r})]\n"
        "print(sorted({m if m.startswith('labbot.') else m.split('.')[0] for m in held}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout
