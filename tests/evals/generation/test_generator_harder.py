"""Harder tasks: ``deletions=2`` removes two features of one file per task. A module of its own (split from
test_generator.py): generating and validating ten candidates is long, so it runs on a test worker beside the
generator's other modules (``make test`` spreads modules, not tests)."""

from __future__ import annotations

import pytest
from gen_support import COVERING, check_tasks_validate, make_repo, package

from labbot.evals.generation.generator import generate_suite
from labbot.evals.generation.job import TASK_MADE
from labbot.evals.sandbox import venvs
from labbot.evals.suite import original_dir, task_repo, wheels_dir

pytestmark = pytest.mark.subprocess


def test_harder_tasks_delete_several_features_of_one_file(cache, tmp_path):
    """``deletions=2``: each task removes two functions of one file (a file with fewer is skipped, and said), the
    statement names both, the tests of both fail, the original holds the task's canary in each; ``prefer="deep"``
    takes the largest bodies first."""
    repo = make_repo(tmp_path / "repo", package())
    said: list[str] = []
    suite = generate_suite(
        repo, tmp_path / "suite", count=10, seed=4, cache=cache, deletion="function", deletions=2, prefer="deep",
        progress=said.append,
    )  # fmt: skip
    assert len(suite.tasks) == 5  # one for each of geometry.py's five functions and methods, each with a partner
    original = (original_dir(tmp_path / "suite") / "shapes/geometry.py").read_text()
    for task in suite.tasks:
        assert task.path == "shapes/geometry.py" and len(task.symbols) == 2 and len(set(task.symbols)) == 2
        text = (task_repo(tmp_path / "suite", task.id) / task.path).read_text()
        for symbol in task.symbols:
            assert f"def {symbol.split('.')[-1]}(" not in text
            assert f"`{symbol.split('.')[-1]}`" in task.statement
        assert "2 functions have been removed from `shapes/geometry.py`" in task.statement
        assert COVERING[task.symbol] | COVERING[task.also[0]] <= set(task.fail_to_pass)
        assert original.count(task.canary) == 2
    assert any("its file has 1 of the 2 features a task deletes" in line for line in said)  # text.py: slugify only
    made = [m.group(1) for line in said if (m := TASK_MADE.match(line))]  # what the eval-generate job reports
    assert made == [str(i) for i in range(1, len(suite.tasks) + 1)]
    check_tasks_validate(tmp_path / "suite", suite, venvs.ensure_venv(wheels_dir(tmp_path / "suite"), cache / "venvs"))
