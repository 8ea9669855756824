"""Shared by the generator's modules: the wheels and venvs cache they build into (pytest's cache folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gen_support import eval_cache


@pytest.fixture(scope="module")
def cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return eval_cache(request.config, tmp_path_factory)
