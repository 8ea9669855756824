"""Generated suites of other shapes: whole functions removed, a ``src/`` layout, and flaky tests dropped from both
lists. A module of its own (split from test_generator.py), so it runs on a test worker beside the generator's other
modules (``make test`` spreads modules, not tests)."""

from __future__ import annotations

import pytest
from gen_support import COVERING, FLAKY_TEST, check_tasks_validate, make_repo, package

from labbot.evals.generation.generator import generate_suite
from labbot.evals.sandbox import venvs
from labbot.evals.suite import task_repo, wheels_dir

pytestmark = pytest.mark.subprocess


def test_whole_functions_removed(cache, tmp_path):
    repo = make_repo(tmp_path / "repo", package())
    suite = generate_suite(repo, tmp_path / "suite", count=2, seed=4, cache=cache, deletion="function")
    assert len(suite.tasks) == 2
    for task in suite.tasks:
        assert task.deletion == "function"
        text = (task_repo(tmp_path / "suite", task.id) / task.path).read_text()
        assert f"def {task.symbol.split('.')[-1]}(" not in text
        assert "has been removed from" in task.statement and "Signature:" in task.statement
        # a removed name fails more than the tests that ran its body: every test of a module that imports it
        assert COVERING[task.symbol] <= set(task.fail_to_pass)
    check_tasks_validate(tmp_path / "suite", suite, venvs.ensure_venv(wheels_dir(tmp_path / "suite"), cache / "venvs"))


def test_a_src_layout(cache, tmp_path):
    repo = make_repo(tmp_path / "repo", package("src/"))
    suite = generate_suite(repo, tmp_path / "suite", count=2, seed=1, cache=cache)
    assert suite.test_roots == ["src"] and len(suite.tasks) == 2
    assert all(t.path.startswith("src/shapes/") for t in suite.tasks)
    check_tasks_validate(tmp_path / "suite", suite, venvs.ensure_venv(wheels_dir(tmp_path / "suite"), cache / "venvs"))


def test_flaky_tests_are_dropped_from_both_lists_and_said(cache, tmp_path):
    repo = make_repo(tmp_path / "repo", {**package(), "tests/test_flaky.py": FLAKY_TEST})
    said: list[str] = []
    suite = generate_suite(repo, tmp_path / "suite", count=3, seed=2, cache=cache, progress=said.append)
    flaky = "tests/test_flaky.py::test_every_other_run"
    assert suite.flaky == [flaky]
    assert all(flaky not in t.fail_to_pass and flaky not in t.pass_to_pass for t in suite.tasks)
    assert any(line.startswith("flaky: 1 test changed") and flaky in line for line in said), said
    assert not (repo / "tests" / ".runs").exists()  # the tests ran in copies, never in the checkout


def test_a_deletion_that_breaks_the_whole_suite_is_no_task(cache, tmp_path):
    """``scale`` runs when the package is imported: deleted, every test fails — also those of ``add``, which never
    run it — so its tests would tell a restored feature from nothing more than a package that imports again."""
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc/__init__.py": "from calc.units import SCALE\n",
            "calc/units.py": "def scale():\n    return 2\n\n\nSCALE = scale()\n",
            "calc/ops.py": "def add(a, b):\n    return a + b\n",
            "tests/test_ops.py": (
                "from calc.ops import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                "def test_add_zero():\n    assert add(0, 0) == 0\n"
            ),
            "tests/test_units.py": "from calc.units import scale\n\n\ndef test_scale():\n    assert scale() == 2\n",
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\ndependencies = []\n',
        },
    )
    said: list[str] = []
    suite = generate_suite(repo, tmp_path / "suite", count=2, seed=0, cache=cache, progress=said.append)
    assert [t.symbol for t in suite.tasks] == ["add"]
    assert any(
        line.startswith("skipped calc/units.py::scale (deleted, it breaks the whole suite: all 3 tests fail, 2 of "
                        "them never run it)") for line in said
    ), said  # fmt: skip
