"""The task generator on a real project labbot did not write: inflection 0.5.1 (pure Python, no runtime
dependencies, its sdist ships its pytest suite: 455 parametrized tests), fetched pinned by version and sha256."""

from __future__ import annotations

import pytest
from gen_support import (
    body_segments,
    check_history_is_clean,
    check_tasks_validate,
    eval_cache,
    git,
    snapshot,
)
from real_repos import INFLECTION, fetch_sdist, unpack_sdist

from labbot.evals.generation.generator import generate_suite
from labbot.evals.sandbox import venvs
from labbot.evals.suite import original_dir, wheels_dir


@pytest.mark.subprocess
def test_three_validated_tasks_from_a_real_project(request: pytest.FixtureRequest, tmp_path_factory, tmp_path):
    cache = eval_cache(request.config, tmp_path_factory)
    root = unpack_sdist(fetch_sdist(*INFLECTION, cache / "sdists"), tmp_path / "unpacked")
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "inflection 0.5.1 from its sdist")
    before = snapshot(root)
    said: list[str] = []

    suite = generate_suite(root, tmp_path / "suite", count=3, seed=5, cache=cache, progress=said.append)

    assert len(suite.tasks) == 3, said
    assert suite.flaky == [] and suite.test_roots == []
    source = (root / "inflection" / "__init__.py").read_text()
    for task in suite.tasks:
        assert task.path == "inflection/__init__.py" and task.id.startswith(("01-inflection-", "02-", "03-"))
        assert task.fail_to_pass and not set(task.fail_to_pass) & set(task.pass_to_pass)
        assert len(task.fail_to_pass) + len(task.pass_to_pass) > 400  # the whole stable suite, split in two
        assert all(t.startswith("test_inflection.py::test_") for t in task.fail_to_pass)
        assert task.canary in (original_dir(tmp_path / "suite") / task.path).read_text()
    check_tasks_validate(tmp_path / "suite", suite, venvs.ensure_venv(wheels_dir(tmp_path / "suite"), cache / "venvs"))
    check_history_is_clean(tmp_path / "suite", suite, {t.symbol: body_segments(source, t.symbol) for t in suite.tasks})
    assert snapshot(root) == before
    assert git(root, "status", "--porcelain", "--ignored").strip() == ""
