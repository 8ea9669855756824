"""Bad input to an experiment is refused at once, naming what was wrong and what would be right, and nothing is
created: no experiment, no run, no study."""

from __future__ import annotations

from pathlib import Path

import pytest
from experiment_lab import Lab
from sqlalchemy import func, select

from labbot.common.errors import BadRequest
from labbot.storage.models import Experiment, Run


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    return Lab(tmp_path, monkeypatch)


def _count(lab: Lab, model: type) -> int:
    with lab.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"space": ["depth=int(1,4)"]}, "unknown parameter depth for job toy; accepted: "),
        ({"space": ["lr=0.001"]}, "the space searches nothing"),
        ({"space": []}, "the space searches nothing"),
        (
            {"space": ["lr=loguniform(1e-4,1e-2)"], "metric": "val_loss"},
            "never reports 'val_loss'; it reports: loss, acc",
        ),
        ({"space": ["lr=loguniform(1e-4,1e-2)"], "seeds": 0}, "seeds=0 must be a whole number from 1 to 20"),
        ({"space": ["lr=loguniform(1e-4,1e-2)"], "budget": "0.01cpu-h"}, "is smaller than one trial (0.025 CPU-h"),
        ({"space": ["lr=loguniform(1e-4,1e-2)"], "budget": "1gpu-h"}, "uses no GPU"),
        ({"space": ["lr=loguniform(1e-4,1e-2)"], "budget": "lots"}, "write it in GPU- or CPU-hours"),
        ({"space": ["lr=loguniform(0,1e-2)"]}, "loguniform needs bounds above 0"),
        ({"space": ["lr=uniform(1e-2,1e-4)"]}, "the low bound must be below the high one"),
        ({"space": ["width=uniform(16,64)"]}, "width is a whole number; use width=int(LOW,HIGH)"),
        ({"space": ["lr=normal(0,1)"]}, "unknown distribution 'normal'"),
        ({"space": ["seed=0,1"]}, "seed is the seed"),
        ({"space": ["lr=loguniform(1e-4,1e-2)"], "search": "grid"}, "a grid cannot walk lr=loguniform"),
        ({"space": ["lr=1e-4,1e-3"], "search": "grid", "trials": 3}, "the grid has 2 configs"),
        ({"space": ["lr=1e-4,1e-3"], "search": "bayes"}, "searches: grid, random, tpe, cmaes"),
        ({"space": ["lr=1e-4,1e-3"], "prune": "pbt"}, "pruners: asha, hyperband, median, none"),
        ({"space": ["lr=1e-4,1e-3"], "goal": "lower"}, "goal 'lower' must be min or max"),
        ({"space": ["lr=1e-4,1e-3"], "at": "step 500"}, "the runs take at most 90 steps"),
        ({"space": ["lr=1e-4,1e-3"], "concurrency": 0}, "concurrency=0 must be a whole number from 1 to 64"),
        ({"space": ["width=8,x"]}, "parameter 'width' expects an integer, got 'x'"),
    ],
)
def test_bad_input_is_refused_at_once_and_nothing_is_created(lab: Lab, kw: dict, said: str) -> None:
    with pytest.raises(BadRequest) as e:
        lab.sweep(**kw)
    assert said in e.value.message
    assert _count(lab, Experiment) == 0 and _count(lab, Run) == 0
    assert "optuna" not in str(lab.studies._storage)  # Optuna's storage was never even opened


def test_an_unknown_job_is_refused(lab: Lab) -> None:
    with pytest.raises(BadRequest, match="unknown job 'nope'"):
        lab.sweep(job="nope", space=["lr=1e-4,1e-3"])
