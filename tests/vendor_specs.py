"""Where the tests find the vendor specs (make specs), and what happens to a contract test when one is missing.

The published descriptions of the Slack, Notion, Linear and Datadog APIs (and KubeRay's RayCluster CRD) are pinned
in ``scripts/specs.json`` and fetched by ``make specs`` (``scripts/specs.py``) into ``.specs/`` at the repository
root, or into ``$LABBOT_SPECS_DIR``. `spec_path(name)` is the one way a fake or a test gets at one: it returns the
cached file when it is there with its pinned sha256. When it is not:

* outside CI, the test that needs it is skipped (the reason names ``make specs``), and at the end of the run one loud
  line says how many contract tests were not run and why;
* with ``CI=true``, that test fails: a run that cannot check the contracts does not pass.

Loaded by ``tests/conftest.py`` as a pytest plugin (``pytest_plugins``) for the end-of-run line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "scripts" / "specs.json"
DIR_ENV = "LABBOT_SPECS_DIR"
NOT_RUN = "vendor spec missing"
"""Begins every skip reason (and failure message) for a missing spec: how the end-of-run line counts them."""


def specs_dir() -> Path:
    """The cache ``make specs`` fills: ``$LABBOT_SPECS_DIR``, else ``.specs/`` at the repository root."""
    return Path(os.environ.get(DIR_ENV) or ROOT / ".specs")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


@functools.cache
def pins() -> dict[str, str]:
    """Each spec's file name → its pinned sha256."""
    return {e["file"]: e["sha256"] for e in json.loads(MANIFEST.read_text())["specs"]}


@functools.cache
def _problem(path: Path, sha256: str) -> str | None:
    if not path.is_file():
        return f"{path.name} is not in {path.parent}"
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != sha256:
        return f"{path} has sha256 {actual}, not the pinned {sha256}"
    return None


def spec_path(name: str) -> Path:
    """The vendor spec ``name`` (a file name in scripts/specs.json), checked against its pinned sha256.

    Missing or different: `pytest.skip` outside CI, `pytest.fail` with ``CI=true`` (see the module docstring).
    A name that is not pinned is a mistake in the test: KeyError.
    """
    sha256 = pins()[name]
    path = specs_dir() / name
    problem = _problem(path, sha256)
    if problem is None:
        return path
    reason = f"{NOT_RUN}: {problem}; run `make specs` to fetch the vendor specs"
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the contract tests must run)", pytrace=False)
    pytest.skip(reason)


# -- the plugin: one loud line at the end of the run ---------------------------------------------------------------

_not_run: dict[str, str] = {}  # nodeid → "skipped" / "failed"


def _reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


def pytest_sessionstart(session: pytest.Session) -> None:
    _not_run.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if (report.skipped or report.failed) and NOT_RUN in _reason(report):
        _not_run.setdefault(report.nodeid, report.outcome)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: Any) -> Generator[None, None, None]:
    yield  # what follows comes after the short test summary, just above the final counts
    if not _not_run:
        return
    skipped = sum(1 for outcome in _not_run.values() if outcome == "skipped")
    failed = len(_not_run) - skipped
    what = f"{skipped} skipped" if not failed else f"{failed} FAILED" + (f", {skipped} skipped" if skipped else "")
    terminalreporter.write_line(
        f"!!! {len(_not_run)} contract test(s) NOT RUN ({what}): the vendor specs are missing from {specs_dir()}"
        " — run `make specs` !!!",
        red=bool(failed),
        yellow=not failed,
        bold=True,
    )
