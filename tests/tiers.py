"""Test tiers: which tests need a Ray head, a process of their own, or the whole system (pytest plugin).

* ``ray`` — applied here to every test that uses the session's Ray head (the ``ray_head`` fixture, and so ``serve``
  and ``module_serve``), so nobody has to remember the marker.
* ``e2e`` — applied here to everything under ``tests/e2e/``: one test per user story, across real processes.
* ``subprocess`` — set by hand on tests that start a Python process (a ``labbot`` command, a stdio MCP server, a
  job, a fresh virtual environment).

Collection puts the longest modules first (``LONGEST_FIRST``, then the other end-to-end ones, then Ray and
subprocess, then the rest), so the workers start them early and the short ones fill in around them.

``make test-fast`` runs ``-m "not ray and not e2e and not subprocess"`` with ``LABBOT_TEST_TIER=fast``, and in that
tier starting a Python process fails the test with a message saying which marker it lacks, so the fast tier stays
what its name says. Short-lived tools (``git``) are allowed. ``make test`` runs every tier.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
E2E_DIR = TESTS_DIR / "e2e"
FAST = os.environ.get("LABBOT_TEST_TIER") == "fast"


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "ray: needs the session's real local Ray head (applied from the fixture)",
        "e2e: an end-to-end user story across real processes (everything under tests/e2e/)",
        "subprocess: starts a Python process of its own (labbot, a stdio MCP server, a job, a venv)",
    ):
        config.addinivalue_line("markers", line)


# the longest modules (paths under tests/), longest first: started first, so no worker is left running one alone at the
# end. With `--dist loadscope` a module is one unit on one worker, so a module much longer than the rest bounds the
# run: split it (as test_generator*.py is). From `--durations` on a 2-core machine shared with other work: the seconds
# given are the module run alone, the rest ranked by a full run; a path here that no longer exists fails collection, so
# a rename cannot quietly drop a module to the back
LONGEST_FIRST = (
    "e2e/test_replicas.py",  # 254 s: seven stories, a replica started (or two) for each
    "e2e/test_rl_jobs.py",  # 304 s with its warm-up to train (a clean clone), 125 s with it in pytest's cache
    "evals/generation/test_generator_seed.py",  # 191 s: three suites generated
    "evals/generation/test_generator.py",  # 173 s: a ten-task suite generated and validated, then the refusals
    "evals/generation/test_generator_harder.py",  # 162 s
    "e2e/test_multinode.py",  # 146 s: three node losses (one under Ray Train), nodes joining, an eval on three nodes
    "e2e/test_evals.py",
    "e2e/test_eval_agent.py",
    "e2e/test_pager_resilience.py",
    "e2e/test_console.py",
    "e2e/test_console_demo.py",
    "evals/generation/test_generator_layouts.py",  # 65 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "ray_head" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
        if E2E_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
    missing = [path for path in LONGEST_FIRST if not (TESTS_DIR / path).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/tiers.py LONGEST_FIRST names modules that do not exist: {missing}")
    # longest first: with `--dist loadscope` the workers take modules in this order, so the longest modules, the
    # other end-to-end stories, then the Ray and process tests start early and the many short unit tests fill in
    # around them (a stable sort: a module's tests keep their order)
    items.sort(key=_expected_length)


def _expected_length(item: pytest.Item) -> int:
    path = Path(str(item.fspath)).resolve()
    rel = path.relative_to(TESTS_DIR).as_posix() if TESTS_DIR in path.parents else ""
    if rel in LONGEST_FIRST:
        return LONGEST_FIRST.index(rel)
    if item.get_closest_marker("e2e"):
        return len(LONGEST_FIRST)
    if item.get_closest_marker("ray") or item.get_closest_marker("subprocess"):
        return len(LONGEST_FIRST) + 1
    return len(LONGEST_FIRST) + 2


def _is_python(args: Any) -> bool:
    argv = [args] if isinstance(args, str | os.PathLike) else list(args or [])
    if not argv:
        return False
    exe = os.path.basename(str(argv[0]))
    return str(argv[0]) == sys.executable or exe.startswith(("python", "labbot", "ray", "npx", "node"))


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """In the fast tier, a test that starts a Python process (unmarked) fails and says which marker it needs."""
    if not FAST or request.node.get_closest_marker("subprocess"):
        yield
        return
    real_init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
        if _is_python(args):
            raise AssertionError(
                f"{request.node.nodeid} starts a process ({args!r}) but is not marked: add "
                "@pytest.mark.subprocess (or use the ray_head/serve fixtures), so `make test-fast` leaves it out"
            )
        real_init(self, args, *a, **kw)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]
