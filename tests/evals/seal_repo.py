"""A small repository and a suite-like layout cut from it, for the seal's tests and benchmarks (not the generator's).

The "user's checkout" is a tiny package (``mathpkg``) with tests, two commits of history (the second adds
``weighted_mean``) and, when asked, the leftovers a developer's checkout has (bytecode from a test run, ``build/``,
``*.egg-info``, ``.coverage``, ``htmlcov/``). The suite folder beside it holds ``original/`` (the committed files,
a canary planted in ``weighted_mean``) and ``tasks/weighted-mean/repo`` (its body deleted; a fresh one-commit git
repository), as the suite format describes.
"""

from __future__ import annotations

import compileall
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from labbot.evals.seal.leak_probes import needles
from labbot.evals.suite import EvalTask

HOST_BODY = b"hello from the host\n"  # what the tests' HTTP server on the host answers
CANARY = "labbot-canary-" + "5e1f0c9a2b7d"
TASK_ID = "weighted-mean"

STATS_V1 = '''"""Small statistics."""


def mean(xs):
    """The arithmetic mean of xs."""
    return sum(xs) / len(xs)
'''
WEIGHTED = '''

def weighted_mean(xs, weights):
    """The mean of xs, each counted by its weight."""
    weighted_total = sum(value * weight for value, weight in zip(xs, weights))
    total_weight = sum(weights)
    return weighted_total / total_weight
'''
CANARY_LINE = f"    # {CANARY}\n"
DELETED = '''

def weighted_mean(xs, weights):
    """The mean of xs, each counted by its weight."""
    raise NotImplementedError
'''
TESTS = """from mathpkg.stats import mean, weighted_mean


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_weighted_mean():
    assert weighted_mean([1, 3], [3, 1]) == 1.5
"""
PYPROJECT = """[project]
name = "mathpkg"
version = "0.1.0"
"""
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin",
}


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _files(stats: str) -> dict[str, str]:
    return {
        "mathpkg/__init__.py": "",
        "mathpkg/stats.py": stats,
        "tests/test_stats.py": TESTS,
        "pyproject.toml": PYPROJECT,
    }


ORIGINAL_STATS = STATS_V1 + WEIGHTED
ORIGINAL_WITH_CANARY = STATS_V1 + WEIGHTED.replace('weight."""\n', 'weight."""\n' + CANARY_LINE)
TASK_STATS = STATS_V1 + DELETED


@dataclass(frozen=True)
class SealRepo:
    checkout: Path  # the user's repository: history, and leftovers when asked
    suite: Path  # original/ and tasks/TASK_ID/repo
    task: EvalTask

    @property
    def task_repo(self) -> Path:
        return self.suite / "tasks" / TASK_ID / "repo"

    @property
    def original(self) -> Path:
        return self.suite / "original"

    def needles(self) -> list[str]:
        from labbot.evals.seal.leak_probes import deleted_source

        return needles([CANARY], [deleted_source(self.original, self.task)], workspace=self.task_repo)


def leftovers(checkout: Path) -> None:
    """What a developer's checkout has beside its commits: bytecode of the original from a test run, a build, its
    metadata, coverage data and an HTML report."""
    compileall.compile_dir(str(checkout / "mathpkg"), quiet=1)
    compileall.compile_dir(str(checkout / "tests"), quiet=1)
    _write(checkout, {"build/lib/mathpkg/__init__.py": "", "build/lib/mathpkg/stats.py": ORIGINAL_STATS})
    _write(checkout, {"mathpkg.egg-info/PKG-INFO": "Name: mathpkg\n", "mathpkg.egg-info/top_level.txt": "mathpkg\n"})
    (checkout / ".coverage").write_bytes(b"SQLite format 3\x00" + b"mathpkg/stats.py")
    _write(checkout, {"htmlcov/index.html": "<html>mathpkg/stats.py 100%</html>\n"})


def build(root: Path, *, with_leftovers: bool = True) -> SealRepo:
    checkout = root / "checkout"
    checkout.mkdir(parents=True)
    git(checkout, "init", "-q", "-b", "main")
    _write(checkout, _files(STATS_V1))
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "mean")
    _write(checkout, _files(ORIGINAL_STATS))
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "weighted mean")
    git(checkout, "tag", "v0.1")
    if with_leftovers:
        leftovers(checkout)

    suite = root / "suite"
    _write(suite / "original", _files(ORIGINAL_WITH_CANARY))
    repo = suite / "tasks" / TASK_ID / "repo"
    repo.mkdir(parents=True)
    _write(repo, _files(TASK_STATS))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "task tree")
    task = EvalTask(
        id=TASK_ID,
        path="mathpkg/stats.py",
        symbol="weighted_mean",
        deletion="body",
        statement="Implement weighted_mean in mathpkg/stats.py.",
        fail_to_pass=["tests/test_stats.py::test_weighted_mean"],
        pass_to_pass=["tests/test_stats.py::test_mean"],
        canary=CANARY,
    )
    return SealRepo(checkout, suite, task)


def original_pyc(seal: SealRepo, dest_dir: Path) -> Path:
    """Bytecode compiled from the original ``stats.py`` (as a developer's test run leaves it), copied into
    ``dest_dir/__pycache__``."""
    tmp = dest_dir.parent / (dest_dir.name + "-pyc-src")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "stats.py").write_text(ORIGINAL_WITH_CANARY)
    compileall.compile_file(str(tmp / "stats.py"), quiet=1)
    built = next((tmp / "__pycache__").glob("stats.*.pyc"))
    (dest_dir / "__pycache__").mkdir(exist_ok=True)
    target = dest_dir / "__pycache__" / built.name
    shutil.copy2(built, target)
    shutil.rmtree(tmp)
    return target


def make_venv(path: Path, site_files: dict[str, str]) -> Path:
    """A bare venv (no pip) with ``site_files`` written into its site-packages; the venv is the sandbox's /venv."""
    import sys
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    lib = path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    _write(lib, site_files)
    return path
