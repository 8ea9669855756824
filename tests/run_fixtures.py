"""A small eval suite built by hand (until the generator lands) and a venv with pytest, for the runner's tests.

The suite is one tiny package (``mathlib``) with one task: ``mul``'s body deleted. ``make_suite`` writes the suite
folder the way ``evals.suite`` describes it: ``suite.json``, ``original/`` (canary planted in the deleted body),
``tasks/mul/repo/`` (a fresh one-commit git repository with the body deleted) and no wheels (the venv is built
from the host's package index instead: ``build_pytest_venv``, once per test session).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from labbot.evals.suite import EvalTask, Suite, save, suite_id

CANARY = "LABBOT-CANARY-7f3a9c"
PYPROJECT = textwrap.dedent(
    """\
    [project]
    name = "mathlib"
    version = "0.1"

    [tool.pytest.ini_options]
    testpaths = ["tests"]
    """
)
OPS_ORIGINAL = textwrap.dedent(
    f"""\
    def add(a, b):
        return a + b


    def mul(a, b):
        # {CANARY}
        return a * b
    """
)
OPS_DELETED = textwrap.dedent(
    """\
    def add(a, b):
        return a + b


    def mul(a, b):
        raise NotImplementedError("mul")
    """
)
TESTS = textwrap.dedent(
    """\
    from mathlib.ops import add, mul


    def test_add():
        assert add(2, 3) == 5


    def test_mul():
        assert mul(3, 4) == 12


    def test_mul_zero():
        assert mul(7, 0) == 0
    """
)
F2P = ["tests/test_ops.py::test_mul", "tests/test_ops.py::test_mul_zero"]
P2P = ["tests/test_ops.py::test_add"]
HIDDEN = ["tests/test_ops.py::test_mul_zero"]  # a failing test the statement does not name


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def git_commit(repo: Path) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "task"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True)


def make_suite(folder: Path, *, tasks: int = 1) -> Suite:
    """A suite folder with ``tasks`` copies of the ``mul`` task (ids ``mul``, ``mul-2``, ...)."""
    base = {"pyproject.toml": PYPROJECT, "mathlib/__init__.py": "", "tests/test_ops.py": TESTS}
    write_tree(folder / "original", {**base, "mathlib/ops.py": OPS_ORIGINAL})
    made = []
    for i in range(tasks):
        task_id = "mul" if i == 0 else f"mul-{i + 1}"
        repo = folder / "tasks" / task_id / "repo"
        write_tree(repo, {**base, "mathlib/ops.py": OPS_DELETED})
        git_commit(repo)
        made.append(
            EvalTask(
                id=task_id,
                path="mathlib/ops.py",
                symbol="mul",
                deletion="body",
                statement=(
                    "Implement `mul(a, b)` in mathlib/ops.py: it returns the product of a and b. "
                    f"This test fails until it works: {F2P[0]} (and one more, not named here)."
                ),
                fail_to_pass=list(F2P),
                pass_to_pass=list(P2P),
                canary=CANARY,
                hidden=list(HIDDEN),
            )
        )
    (folder / "wheels").mkdir(exist_ok=True)
    doc = Suite(id="", source="mathlib", commit="0" * 40, seed=1, tasks=made, python="3.11").to_json()
    suite = Suite.from_json({**doc, "id": suite_id(doc)})
    save(suite, folder)
    return suite


def build_pytest_venv(venv: Path) -> Path:
    """A venv with pytest in it, from the host's package index (tests build it once per session)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "pytest"],
        check=True,
    )
    return venv
