"""Running a repository's tests inside a sandbox and reading back each test's outcome.

pytest runs as ``python -m pytest`` in ``/work`` (so the workspace's own package shadows the installed copy; ``src``
layouts get ``/work/src`` first on ``PYTHONPATH``), with no cache provider (nothing written beside the tests) and a
JUnit XML report written to a folder bound only for this run, outside the workspace. Outcomes are read from that
report, never from what the tests print: a test that printed "passed" did not pass, and a test that did not run is
``missing`` — which scoring counts as failed.
"""

from __future__ import annotations

import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from labbot.evals.sandbox import WORKDIR, ExecResult, Sandbox, SandboxSpec

Outcome = Literal["passed", "failed", "error", "skipped", "missing"]
RESULTS = "/results"
REPORT = "junit.xml"


@dataclass(frozen=True)
class TestRun:
    outcomes: dict[str, Outcome]  # node id -> outcome, for every node id asked (and, asked for none, every test run)
    result: ExecResult

    @property
    def passed(self) -> set[str]:
        return {n for n, o in self.outcomes.items() if o == "passed"}

    def failing(self, node_ids: Sequence[str]) -> list[str]:
        return [n for n in node_ids if self.outcomes.get(n) != "passed"]


def pytest_command(node_ids: Sequence[str] = (), *, extra: Sequence[str] = ()) -> list[str]:
    return [
        "python", "-m", "pytest",
        "-p", "no:cacheprovider",
        "-o", "addopts=",
        "-q", "-rN",
        f"--junitxml={RESULTS}/{REPORT}",
        "-o", "junit_family=xunit2",
        *extra,
        *node_ids,
    ]  # fmt: skip


def node_id(classname: str, name: str, file: str | None) -> str:
    """The pytest node id of a JUnit test case: ``tests/test_x.py::TestY::test_z[param]``."""
    parts = classname.split(".") if classname else []
    if file:
        module_parts = file[:-3].split("/") if file.endswith(".py") else file.split("/")
        rest = parts[len(module_parts) :] if parts[: len(module_parts)] == module_parts else parts[-1:]
        rest = [p for p in rest if p and p[0].isupper()] if rest and rest != parts else rest
        return "::".join([file, *rest, name])
    # no file attribute: the module is the leading lowercase parts, classes the capitalised rest
    i = len(parts)
    while i > 0 and parts[i - 1][:1].isupper():
        i -= 1
    return "::".join(["/".join(parts[:i]) + ".py", *parts[i:], name])


def parse_junit(xml_text: str) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    root = ET.fromstring(xml_text)
    for case in root.iter("testcase"):
        nid = node_id(case.get("classname", ""), case.get("name", ""), case.get("file"))
        kinds = {child.tag for child in case}
        outcome: Outcome = "passed"
        if "error" in kinds:
            outcome = "error"
        elif "failure" in kinds:
            outcome = "failed"
        elif "skipped" in kinds:
            outcome = "skipped"
        # a node id seen twice (an error in teardown after a pass) keeps the worse outcome
        if outcomes.get(nid) in (None, "passed"):
            outcomes[nid] = outcome
    return outcomes


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
    the whole run), and the outcomes are then picked by id; a file that is not there is left out."""
    files = sorted({n.split("::", 1)[0] for n in node_ids})
    targets = [f for f in files if (spec.workspace / f).is_file()]
    if node_ids and not targets:
        empty = ExecResult(0, "", "none of the test files exist in the workspace", False, 0.0)
        return TestRun(dict.fromkeys(node_ids, "missing"), empty)
    with tempfile.TemporaryDirectory(prefix="labbot-results-") as results:
        roots = ":".join(f"{WORKDIR}/{r}".rstrip("/") for r in test_roots)
        env = {**spec.env, **({"PYTHONPATH": roots} if roots else {})}
        run_spec = replace(spec, rw_binds={**spec.rw_binds, RESULTS: Path(results)}, env=env)
        with Sandbox(run_spec) as box:
            result = box.exec(pytest_command(targets), timeout_s=timeout_s)
        report = Path(results) / REPORT
        seen = parse_junit(report.read_text()) if report.is_file() and report.stat().st_size else {}
    if not node_ids:
        return TestRun(seen, result)
    outcomes: dict[str, Outcome] = {n: seen.get(n, "missing") for n in node_ids}
    return TestRun(outcomes, result)
