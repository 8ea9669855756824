"""The demo's codebase: a small Python project with tests, written by ``labbot console --demo`` when no
``LABBOT_CODEBASE_ROOT`` is set, so the demo's eval has a repository it can be generated from on any machine.

labbot's own checkout is no such repository (its tests need Ray, PostgreSQL and an index that has ``labbot-client``),
and a newcomer's first repository may not have tests at all. This one is a git repository of plain Python — a few
functions an ML researcher reads every day, each covered by its tests, no dependencies — kept under labbot's home
(``.labbot/demo-project``) and written once; what the codebase tools read and what an eval suite is made from.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["DEMO_PROJECT_FILES", "write_demo_project"]

_METRICS = '''\
"""Training-curve helpers."""

from __future__ import annotations

import math


def mean(values: list[float]) -> float:
    """The arithmetic mean; an empty list has none."""
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def perplexity(losses: list[float]) -> float:
    """exp of the mean cross-entropy loss (in nats)."""
    return math.exp(mean(losses))


def moving_average(values: list[float], window: int) -> list[float]:
    """The mean of each full window of ``window`` consecutive values."""
    if window < 1:
        raise ValueError("window must be at least 1")
    return [mean(values[i : i + window]) for i in range(len(values) - window + 1)]


def ema(values: list[float], alpha: float) -> list[float]:
    """Exponential moving average: each point ``alpha`` of the new value and ``1 - alpha`` of the last average."""
    if not 0 < alpha <= 1:
        raise ValueError("alpha must be in (0, 1]")
    out: list[float] = []
    for value in values:
        out.append(value if not out else alpha * value + (1 - alpha) * out[-1])
    return out


def best_step(losses: list[float]) -> int:
    """The index of the lowest loss (the first, on a tie)."""
    if not losses:
        raise ValueError("no losses")
    return min(range(len(losses)), key=lambda i: (losses[i], i))


def accuracy(predictions: list[int], labels: list[int]) -> float:
    """The fraction of predictions equal to their labels."""
    if len(predictions) != len(labels) or not labels:
        raise ValueError("predictions and labels must be the same non-zero length")
    return sum(p == y for p, y in zip(predictions, labels)) / len(labels)
'''

_TESTS = """\
import math

import pytest

from curves.metrics import accuracy, best_step, ema, mean, moving_average, perplexity


def test_mean() -> None:
    assert mean([1.0, 2.0, 6.0]) == 3.0
    with pytest.raises(ValueError):
        mean([])


def test_perplexity_of_a_uniform_model() -> None:
    assert math.isclose(perplexity([math.log(50.0)] * 4), 50.0)


def test_moving_average() -> None:
    assert moving_average([1.0, 2.0, 3.0, 4.0], 2) == [1.5, 2.5, 3.5]
    assert moving_average([1.0], 3) == []
    with pytest.raises(ValueError):
        moving_average([1.0], 0)


def test_ema() -> None:
    assert ema([4.0, 0.0, 0.0], 0.5) == [4.0, 2.0, 1.0]
    assert ema([1.0, 2.0], 1.0) == [1.0, 2.0]
    with pytest.raises(ValueError):
        ema([1.0], 0.0)


def test_best_step() -> None:
    assert best_step([3.0, 1.0, 2.0, 1.0]) == 1
    with pytest.raises(ValueError):
        best_step([])


def test_accuracy() -> None:
    assert accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    with pytest.raises(ValueError):
        accuracy([1], [1, 0])
"""

DEMO_PROJECT_FILES: dict[str, str] = {
    "README.md": "# curves\n\nTraining-curve helpers: the demo project of `labbot console --demo`.\n",
    "pyproject.toml": '[project]\nname = "curves"\nversion = "0.1.0"\ndependencies = []\n',
    "curves/__init__.py": '"""Training-curve helpers."""\n',
    "curves/metrics.py": _METRICS,
    "tests/test_metrics.py": _TESTS,
}

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "labbot",
    "GIT_AUTHOR_EMAIL": "labbot@localhost",
    "GIT_COMMITTER_NAME": "labbot",
    "GIT_COMMITTER_EMAIL": "labbot@localhost",
}


def write_demo_project(root: Path) -> Path:
    """The demo project at ``root``: written and committed the first time, left as it is after (a suite generated
    from it names its commit). Returns ``root``."""
    env = {**os.environ, **_GIT_ENV}
    committed = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=root, env=env,
                               capture_output=True, check=False) if (root / ".git").is_dir() else None  # fmt: skip
    if committed is not None and committed.returncode == 0:
        return root
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in DEMO_PROJECT_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for args in (["init", "--quiet", "--initial-branch=main"], ["add", "--all"], ["commit", "--quiet", "-m", "curves"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root
