"""The issue's "must withstand": the control plane itself does not need torch (torch is the ``jobs`` extra, for the
reference job tiny-lm). Here torch is made unimportable before anything else runs, by a sitecustomize that puts
``sys.modules["torch"] = None``; then ``labbot --help`` runs, and every module of labbot but the reference jobs
imports (the composition root of ``labbot serve``, the console, the agents, the MCP servers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from venvs import ROOT

pytestmark = pytest.mark.subprocess  # fresh virtual environments, and labbot run from them

BLOCK = 'import sys\nsys.modules["torch"] = None  # `import torch` raises ImportError from here on\n'
JOBS = "labbot.training.jobs."  # what a job's environment runs; the jobs extra brings torch there

IMPORT_ALL = f"""
import importlib, pkgutil, sys
import labbot
names = [m.name for m in pkgutil.walk_packages(labbot.__path__, "labbot.") if not m.name.startswith({JOBS!r})]
for name in names:
    importlib.import_module(name)
assert {{"labbot.bot.serve", "labbot.bot.console.repl", "labbot.bot.agents_wiring"}} <= set(names), names
try:
    import torch
except ImportError:
    print(len(names), "modules imported without torch")
"""


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    blocker = tmp_path / "no-torch"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(BLOCK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LABBOT_", "RAY_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), str(ROOT), str(ROOT / "client")])
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)


def test_labbot_help_without_torch(tmp_path: Path) -> None:
    done = _run(tmp_path, "-m", "labbot.bot.cli.main", "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: labbot" in done.stdout and "serve" in done.stdout


def test_every_control_plane_module_imports_without_torch(tmp_path: Path) -> None:
    done = _run(tmp_path, "-c", IMPORT_ALL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "modules imported without torch" in done.stdout, done.stdout  # and the block held to the end


def test_the_reference_job_is_what_needs_torch(tmp_path: Path) -> None:
    """The check above has teeth: with the same block, the reference job fails to import."""
    done = _run(tmp_path, "-c", "import labbot.training.jobs.tiny_lm")
    assert done.returncode != 0 and "import of torch halted" in done.stderr, done.stderr
