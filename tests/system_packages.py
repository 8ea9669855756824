"""The tests that need bubblewrap (everything under ``tests/evals/`` and the evals story in ``tests/e2e/``), when it
is missing (pytest plugin).

``make test`` installs bubblewrap when it can (``scripts/system-packages.sh``, as root); when it could not:

* outside CI, those tests are skipped (the reason names the package and the command), and at the end of the run one
  loud line says how many were not run and why;
* with ``CI=true``, they fail: a run that cannot check the eval sandbox does not pass.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
NEEDS_BWRAP = (TESTS / "evals", TESTS / "e2e" / "test_evals.py")
WHY = "bubblewrap (bwrap) is missing: install it with `sudo apt-get install bubblewrap` (make test does, as root)"
_not_run: list[str] = []


def _needs_bwrap(item: pytest.Item) -> bool:
    path = Path(str(item.fspath))
    return any(path == p or p in path.parents for p in NEEDS_BWRAP)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("bwrap") is not None:
        return
    ci = os.environ.get("CI") == "true"
    for item in items:
        if _needs_bwrap(item):
            if ci:
                item.add_marker(pytest.mark.usefixtures("_bwrap_required_in_ci"))  # fails in setup
            else:
                item.add_marker(pytest.mark.skip(reason=WHY))
            _not_run.append(item.nodeid)


@pytest.fixture
def _bwrap_required_in_ci() -> None:
    pytest.fail(f"{WHY} (CI=true: the eval tests must run)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _not_run:
        terminalreporter.write_line(f"!!! {len(_not_run)} eval test(s) NOT RUN: {WHY} !!!", red=True, bold=True)
