"""The wheels, built once per session, and the fresh environments they are installed into (offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
from venvs import Venv, build_wheels, dev_site_packages, link_distributions


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"labbot": ..., "labbot_client": ...}: wheels built from a copy of this checkout (≈10 s on two busy cores)."""
    return build_wheels(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Venv:
    """A fresh venv with both wheels installed, not editable; the dev venv's third-party packages visible, but not
    torch: what is installed without the ``jobs`` extra, the control plane, must work without it."""
    return Venv(
        tmp_path_factory.mktemp("venv") / "labbot",
        [wheels["labbot"], wheels["labbot_client"]],
        visible=[dev_site_packages()],
        blocked=("torch",),
    )


@pytest.fixture(scope="session")
def job_env(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Venv:
    """A training job's environment: labbot-client and httpx (with its dependencies), and nothing else."""
    base = tmp_path_factory.mktemp("job-env")
    deps = base / "deps"
    linked = link_distributions(deps, ["httpx"])
    assert not linked & {"labbot", "labbot-client", "ray", "torch"}, linked
    return Venv(base / "venv", [wheels["labbot_client"]], visible=[deps])
