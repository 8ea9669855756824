"""Fixtures of the tiny-rl tests: a module-wide warm-up cache and a first attempt's checkpoint dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from rl_cases import TELEMETRY_ENV


@pytest.fixture(scope="module")
def warm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One warm-up cache for the module: every run with the same warm-up fields trains it once."""
    return tmp_path_factory.mktemp("warmup")


@pytest.fixture
def ckpt_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """First attempt of a run outside labbot: checkpoints under tmp_path, telemetry off."""
    d = tmp_path / "ckpt"
    monkeypatch.setenv("LABBOT_CHECKPOINT_DIR", str(d))
    monkeypatch.setenv("LABBOT_ATTEMPT", "1")
    for name in TELEMETRY_ENV:
        monkeypatch.delenv(name, raising=False)
    return d
