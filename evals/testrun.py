"""Running a repository's tests inside a sandbox and reading back each test's outcome, by pytest's own node id.

pytest runs as ``python -m pytest`` in ``/workspace`` (so the workspace's own package shadows the installed copy;
``src`` layouts get ``/workspace/src`` first on ``PYTHONPATH``), with no cache provider (nothing written beside the
tests). A small plugin of labbot's (:data:`PLUGIN_SOURCE`, bound read-only outside the workspace and loaded with
``-p``) records every test's outcome under its real node id (``tests/test_x.py::TestY::test_z[p]``) and writes them,
at the end of the session, to a folder bound only for this run. Outcomes come from there, never from what the tests
print: a test that printed "passed" did not pass; a session cut short (``os._exit``, a kill at the limit) writes
nothing, so every test of it is ``missing`` — which scoring counts as failed.

The outcome of a test is the worst of its phases: an error in setup or teardown is ``error``, a failing call
``failed``, a skip (and an expected failure) ``skipped``; ``passed`` only when every phase passed.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, cast

from labbot.evals.sandbox import WORKDIR, ExecResult, Sandbox, SandboxSpec

Outcome = Literal["passed", "failed", "error", "skipped", "missing"]
RESULTS = "/results"
PLUGIN_DIR = "/labbot-pytest"
PLUGIN_MODULE = "labbot_outcomes"
OUTCOMES = "outcomes.json"
# naming more test files than this on pytest's command line costs more than collecting the whole suite
MAX_NAMED_FILES = 50
PLUGIN_SOURCE = f'''\
"""labbot: every test's outcome under its pytest node id, written to {RESULTS}/{OUTCOMES} when the session ends."""
import json

_RANK = {{"passed": 0, "skipped": 1, "failed": 2, "error": 3}}
_outcomes = {{}}


def pytest_runtest_logreport(report):
    if report.passed:
        kind = "passed"
    elif report.skipped:
        kind = "skipped"
    else:
        kind = "failed" if report.when == "call" else "error"
    before = _outcomes.get(report.nodeid, "passed")
    _outcomes[report.nodeid] = kind if _RANK[kind] > _RANK[before] else before


def pytest_sessionfinish(session, exitstatus):
    with open("{RESULTS}/{OUTCOMES}", "w") as f:
        json.dump(_outcomes, f)
'''
_KNOWN: frozenset[str] = frozenset(("passed", "failed", "error", "skipped"))


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a test class, whatever pytest's name rule says

    outcomes: dict[str, Outcome]  # node id -> outcome, for every node id asked (and, asked for none, every test run)
    result: ExecResult

    @property
    def passed(self) -> set[str]:
        return {n for n, o in self.outcomes.items() if o == "passed"}

    def failing(self, node_ids: Sequence[str]) -> list[str]:
        return [n for n in node_ids if self.outcomes.get(n) != "passed"]


def pytest_command(targets: Sequence[str] = (), *, extra: Sequence[str] = ()) -> list[str]:
    return [
        "python", "-m", "pytest",
        "-p", "no:cacheprovider",
        "-p", PLUGIN_MODULE,
        "-o", "addopts=",
        "-q", "-rN",
        *extra,
        *targets,
    ]  # fmt: skip


@contextmanager
def pytest_ready(spec: SandboxSpec, *, test_roots: Sequence[str] = ()) -> Iterator[tuple[SandboxSpec, Path]]:
    """``spec`` made ready for a pytest run: labbot's plugin bound read-only on ``PYTHONPATH`` (after the import
    roots), a results folder bound read-write; yields the spec and the host side of the results folder."""
    with (
        tempfile.TemporaryDirectory(prefix="labbot-pytest-") as plugin,
        tempfile.TemporaryDirectory(prefix="labbot-results-") as results,
    ):
        (Path(plugin) / f"{PLUGIN_MODULE}.py").write_text(PLUGIN_SOURCE)
        roots = [f"{WORKDIR}/{r}".rstrip("/") for r in test_roots]
        run_spec = replace(
            spec,
            ro_binds={**spec.ro_binds, PLUGIN_DIR: Path(plugin)},
            rw_binds={**spec.rw_binds, RESULTS: Path(results)},
            env={**spec.env, "PYTHONPATH": ":".join([*roots, PLUGIN_DIR])},
        )
        yield run_spec, Path(results)


def read_outcomes(results: Path) -> dict[str, Outcome]:
    """What the plugin wrote; nothing (every test ``missing``) when the session did not end normally."""
    path = results / OUTCOMES
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): cast(Outcome, v) for k, v in doc.items() if v in _KNOWN}


def run_tests(
    spec: SandboxSpec,
    node_ids: Sequence[str] = (),
    *,
    timeout_s: float | None = None,
    test_roots: Sequence[str] = (),
) -> TestRun:
    """Run ``node_ids`` (all tests when empty) in a fresh sandbox over ``spec``'s workspace; asked ids that did not
    run come back ``missing``.

    pytest is given the test files the ids are in, not the ids (an id that no longer exists would make pytest refuse
    the whole run), and the outcomes are then picked by id; a file that is not there is left out. Over
    :data:`MAX_NAMED_FILES` files, the whole suite is collected instead (naming hundreds of files is slower)."""
    files = sorted({n.split("::", 1)[0] for n in node_ids})
    targets = [f for f in files if (spec.workspace / f).is_file()]
    if node_ids and not targets:
        empty = ExecResult(0, "", "none of the test files exist in the workspace", False, 0.0)
        return TestRun(dict.fromkeys(node_ids, "missing"), empty)
    if len(targets) > MAX_NAMED_FILES:
        targets = []
    with pytest_ready(spec, test_roots=test_roots) as (run_spec, results):
        with Sandbox(run_spec) as box:
            result = box.exec(pytest_command(targets), timeout_s=timeout_s)
        seen = read_outcomes(results)
    if not node_ids:
        return TestRun(seen, result)
    outcomes: dict[str, Outcome] = {n: seen.get(n, "missing") for n in node_ids}
    return TestRun(outcomes, result)
