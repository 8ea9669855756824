"""Contamination found by content at generation: a dependency installed in the suite's venv vendors a copy of the
project's module (no canary: labbot did not plant it), so the tasks whose deleted code it holds are left out and
named in ``suite.json`` with the path, and the task it does not hold is kept; a solver that searches everything its
sandbox shows for the kept task's deleted lines finds nothing."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from gen_support import GEOMETRY, make_repo, package, write_files

from labbot.evals.generation.generator import canary_for, generate_suite, task_id
from labbot.evals.sandbox import venvs
from labbot.evals.sandbox.bwrap import Sandbox, SandboxSpec
from labbot.evals.suite import load, original_dir, task_repo, wheels_dir

pytestmark = pytest.mark.subprocess

# a search of the whole visible filesystem for the deleted body's distinctive lines, as a cheating solver would run it
SEARCH = textwrap.dedent(
    """\
    import os, sys
    needles = [l for l in sys.argv[1:]]
    hits = []
    for top, dirs, files in os.walk("/"):
        if top.startswith(("/proc", "/sys", "/dev", "/workspace")):
            dirs[:] = []
            continue
        for name in files:
            path = os.path.join(top, name)
            try:
                with open(path, "rb") as f:
                    data = f.read(4_000_000)
            except OSError:
                continue
            if all(n.encode() in data for n in needles):
                hits.append(path)
    print("HITS", hits)
    """
)


def _vendoring_dependency(root: Path) -> Path:
    """A package that vendors a copy of ``shapes.geometry`` (reformatted, renamed module: a copy, not an import)."""
    copy = textwrap.dedent(GEOMETRY).replace('"""Plane geometry for the fixtures."""', "# vendored from shapes 0.1")
    write_files(
        root,
        {
            "pyproject.toml": """\
                [build-system]
                requires = ["setuptools"]
                build-backend = "setuptools.build_meta"

                [project]
                name = "bundler"
                version = "1.0"

                [tool.setuptools]
                packages = ["bundler", "bundler._vendor"]
                """,
            "bundler/__init__.py": "",
            "bundler/_vendor/__init__.py": "",
        },
    )
    (root / "bundler/_vendor/shapes_geometry.py").write_text(copy)
    return root


def test_a_vendored_copy_marks_its_tasks_contaminated_and_the_rest_stays_clean(cache: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shapes-repo", package())
    dependency = _vendoring_dependency(tmp_path / "bundler")
    said: list[str] = []
    suite = generate_suite(
        repo,
        tmp_path / "suite",
        count=10,
        seed=7,
        cache=cache,
        extra_requirements=[str(dependency)],
        progress=said.append,
    )
    left_out = {c["symbols"][0]: c for c in suite.contaminated}
    kept = {t.symbol for t in suite.tasks}
    assert "slugify" in kept  # shapes/text.py is vendored nowhere
    assert {"area", "Rect.scale"} <= set(left_out), (left_out, said)
    assert not kept & set(left_out)
    for found in left_out.values():
        assert any(p.endswith("bundler/_vendor/shapes_geometry.py") for p in found["paths"]), found
    doc = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert {c["task"] for c in doc["contaminated"]} == {c["task"] for c in suite.contaminated}
    assert load(tmp_path / "suite") == suite
    assert any("contaminated" in line for line in said)
    # one walk checked a round of tasks, yet each is numbered as if checked alone: the kept ones 01, 02... and a
    # left-out one the number the next kept one then takes; only the kept tasks' repositories remain, each committed
    # and canaried under its own id
    assert [t.id[:2] for t in suite.tasks] == [f"{i:02d}" for i in range(1, len(suite.tasks) + 1)]
    kept_before, renumbered = 0, False
    for line in said:
        if line.startswith("task "):
            kept_before += 1
            renumbered |= any("(contaminated:" in earlier for earlier in said[: said.index(line)])
        elif "(contaminated:" in line:
            where = line.removeprefix("skipped ").split(" (", 1)[0]
            entry = next(c for c in suite.contaminated if where.endswith("::" + c["symbols"][0]))
            assert entry["task"] == task_id(kept_before + 1, where.split("::")[0], entry["symbols"][0]), (entry, said)
    assert renumbered, said  # a task kept after one left out in the same round: the renumbering ran
    assert sorted(p.name for p in (tmp_path / "suite" / "tasks").iterdir()) == sorted(t.id for t in suite.tasks)
    for t in suite.tasks:
        repo = task_repo(tmp_path / "suite", t.id)
        log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, check=True)
        assert log.stdout.decode().strip() == f"task {t.id}"
        assert t.canary == canary_for(suite.commit, 7, t.id)

    # the kept task: its deleted lines are nowhere a solver's sandbox can read
    task = next(t for t in suite.tasks if t.symbol == "slugify")
    deleted = ["words = [w for w in text.lower().split() if w]", 'return "-".join(words)']
    assert all(line in (original_dir(tmp_path / "suite") / task.path).read_text() for line in deleted)
    venv = venvs.ensure_venv(wheels_dir(tmp_path / "suite"), cache / "venvs")
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "search.py").write_text(SEARCH)
    workspace = tmp_path / "work"
    workspace.mkdir()
    spec = SandboxSpec(workspace=workspace, venv=venv, ro_binds={"/probe": tmp_path / "probe"})
    with Sandbox(spec) as box:
        out = box.exec(["python", "/probe/search.py", *deleted], timeout_s=300)
    assert out.returncode == 0, out.stderr
    assert "HITS []" in out.stdout, out.stdout
    # and the same search does find the vendored geometry (the walk can see the venv: the test can fail)
    with Sandbox(spec) as box:
        seen = box.exec(["python", "/probe/search.py", "width = self.w * k", "height = self.h * k"], timeout_s=300)
    assert "shapes_geometry.py" in seen.stdout, seen.stdout
    assert task_repo(tmp_path / "suite", task.id).is_dir()
