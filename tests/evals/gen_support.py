"""Helpers for the task generator's tests: small git repositories written by the tests, a real project's sdist
fetched pinned by version and sha256, the wheel and venv cache shared by a session, and checks on a suite."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest
from real_repos import GIT_ENV

from labbot.evals.sandbox.bwrap import Limits, SandboxSpec
from labbot.evals.scoring.testrun import run_tests
from labbot.evals.suite import Suite, original_dir, task_repo


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=False
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def make_repo(root: Path, files: dict[str, str], *, commit: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_files(root, files)
    git(root, "init", "--quiet", "--initial-branch=main")
    if commit:
        git(root, "add", "--all")
        git(root, "commit", "--quiet", "-m", "the project")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (``.git`` included) and its bytes, links as their targets."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


# --- a package the tests write -------------------------------------------------------------------------------------

GEOMETRY = '''\
    """Plane geometry for the fixtures."""


    def area(w, h):
        """The area of a w by h rectangle."""
        if w < 0 or h < 0:
            raise ValueError("negative side")
        return w * h


    def perimeter(w, h):
        total = 2 * (w + h)
        return total


    def unused(x):
        y = x**2 + 3 * x
        return y - 1


    class Rect:
        def __init__(self, w, h):
            self.w = w
            self.h = h

        def scale(self, k):
            """This rectangle, k times as large along each side."""
            width = self.w * k
            height = self.h * k
            return Rect(width, height)

        def diagonal(self):
            squared = self.w**2 + self.h**2
            return round(squared**0.5, 6)
    '''
TEXT = '''\
    def slugify(text):
        """Lowercase words joined by dashes."""
        words = [w for w in text.lower().split() if w]
        return "-".join(words)
    '''
TEST_GEOMETRY = """\
    import pytest

    from shapes.geometry import Rect, area, perimeter


    @pytest.mark.parametrize(("w", "h", "expected"), [(2, 3, 6), (0.5, 4, 2.0)])
    def test_area(w, h, expected):
        assert area(w, h) == expected


    def test_area_refuses_negative_sides():
        with pytest.raises(ValueError):
            area(-1, 2)


    def test_perimeter():
        assert perimeter(2, 3) == 10


    class TestRect:
        def test_scale(self):
            r = Rect(2, 3).scale(2)
            assert (r.w, r.h) == (4, 6)

        def test_diagonal(self):
            assert Rect(3, 4).diagonal() == 5.0
    """
TEST_TEXT = """\
    from shapes.text import slugify


    def test_slugify():
        assert slugify("  Hello  World ") == "hello-world"
    """

#: which tests execute which symbol's body in the package above
COVERING = {
    "area": {"tests/test_geometry.py::test_area[2-3-6]", "tests/test_geometry.py::test_area[0.5-4-2.0]",
             "tests/test_geometry.py::test_area_refuses_negative_sides"},
    "perimeter": {"tests/test_geometry.py::test_perimeter"},
    "Rect.__init__": {"tests/test_geometry.py::TestRect::test_scale",
                      "tests/test_geometry.py::TestRect::test_diagonal"},
    "Rect.scale": {"tests/test_geometry.py::TestRect::test_scale"},
    "Rect.diagonal": {"tests/test_geometry.py::TestRect::test_diagonal"},
    "slugify": {"tests/test_text.py::test_slugify"},
}  # fmt: skip
ALL_TESTS = set().union(*COVERING.values())


def package(prefix: str = "") -> dict[str, str]:
    """The ``shapes`` package and its tests (``prefix="src/"`` for a src layout)."""
    return {
        f"{prefix}shapes/__init__.py": '"""Shapes."""\n',
        f"{prefix}shapes/geometry.py": GEOMETRY,
        f"{prefix}shapes/text.py": TEXT,
        "tests/test_geometry.py": TEST_GEOMETRY,
        "tests/test_text.py": TEST_TEXT,
        "README.md": "# shapes\n",
        "pyproject.toml": '[project]\nname = "shapes"\nversion = "0.1"\ndependencies = []\n',
    }


FLAKY_TEST = """\
    from pathlib import Path

    from shapes.geometry import perimeter

    RUNS = Path(__file__).with_name(".runs")


    def test_every_other_run():
        runs = int(RUNS.read_text()) if RUNS.exists() else 0
        RUNS.write_text(str(runs + 1))
        assert perimeter(1, 1) == 4
        assert runs % 2 == 0
    """
BROKEN_TEST = """\
    import shapes_helpers_that_do_not_exist


    def test_nothing():
        assert shapes_helpers_that_do_not_exist
    """
UNRELATED_TEST = """\
    def test_arithmetic():
        assert 1 + 1 == 2
    """


# --- the session's wheel and venv cache ------------------------------------------------------------------------------


def eval_cache(config: pytest.Config, factory: pytest.TempPathFactory) -> Path:
    """Wheels and venvs kept in pytest's cache folder between sessions (a temporary folder without it)."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("labbot-evals-generate"))
    return factory.mktemp("labbot-evals-cache")


# --- checks on a generated suite ---------------------------------------------------------------------------------


def check_tasks_validate(folder: Path, suite: Suite, venv: Path) -> None:
    """Independently of the generator: each task's tree fails its fail_to_pass and passes its pass_to_pass, and the
    original passes fail_to_pass (each in a scratch copy)."""
    with tempfile.TemporaryDirectory(prefix="check-") as tmp:
        for task in suite.tasks:
            work = Path(tmp) / task.id
            shutil.copytree(task_repo(folder, task.id), work, ignore=shutil.ignore_patterns(".git"))
            spec = SandboxSpec(work, venv=venv, limits=Limits(timeout_s=300))
            run = run_tests(spec, [*task.fail_to_pass, *task.pass_to_pass], test_roots=suite.test_roots)
            assert all(run.outcomes[t] != "passed" for t in task.fail_to_pass), (task.id, run.outcomes)
            assert all(run.outcomes[t] == "passed" for t in task.pass_to_pass), (task.id, run.result.stdout[-2000:])
            restored = Path(tmp) / f"{task.id}-restored"
            shutil.copytree(original_dir(folder), restored)
            spec = SandboxSpec(restored, venv=venv, limits=Limits(timeout_s=300))
            run = run_tests(spec, task.fail_to_pass, test_roots=suite.test_roots)
            assert all(o == "passed" for o in run.outcomes.values()), (task.id, run.outcomes)


def check_history_is_clean(folder: Path, suite: Suite, original_bodies: dict[str, list[str]]) -> None:
    """Each task repository: one commit, no reflog, no remote, and no object holding a canary or a deleted body."""
    for task in suite.tasks:
        repo = task_repo(folder, task.id)
        assert git(repo, "log", "--all", "--format=%H %an %ad").strip().count("\n") == 0
        assert git(repo, "reflog", "--all").strip() == ""
        assert git(repo, "remote").strip() == ""
        assert git(repo, "status", "--porcelain").strip() == ""
        assert git(repo, "fsck", "--unreachable", "--no-reflogs", "--no-progress").strip() == ""
        objects = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True, check=True
        ).stdout.decode(errors="replace")
        everything = objects + "".join(
            p.read_text(errors="replace") for p in repo.rglob("*") if p.is_file() and ".git/objects" not in str(p)
        )
        for other in suite.tasks:
            assert other.canary not in everything, (task.id, other.canary)
        for line in original_bodies[task.symbol]:
            assert line not in everything, (task.id, line)


def body_segments(source: str, symbol: str, *, min_chars: int = 30) -> list[str]:
    """The statements of ``symbol``'s body as source text, those long enough to occur nowhere else in ``source``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == symbol.split(".")[-1]:
            out = []
            for stmt in node.body[1:] if ast.get_docstring(node) is not None else node.body:
                segment = ast.get_source_segment(source, stmt) or ""
                if len(segment) >= min_chars and source.count(segment) == 1:
                    out.append(segment)
            return out
    raise AssertionError(f"no {symbol} in the source")
