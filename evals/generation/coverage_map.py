"""Which tests execute which function: the original's tests run once in a sandbox under coverage, per test.

How the per-test attribution is made: a small pytest plugin (:data:`PLUGIN_SOURCE`, written to a folder bound
read-only at ``/labbot-coverage`` and loaded with ``-p``; nothing is added to the repository) wraps each test's
``pytest_runtest_protocol`` — setup, call and teardown — in ``coverage.Coverage.current().switch_context(nodeid)``,
so each line's contexts are pytest's own node ids (``tests/test_x.py::TestY::test_z[p]``), parametrized ids
included; coverage's ``dynamic_context = test_function`` would give dotted function names that lose the parameters.
Lines run outside any test (imports at collection) are recorded under the empty context: a body run only then is
*executed at import*. The run is ``python -m coverage run`` with labbot's own rc file (the repository's coverage
settings are ignored), measuring only files under ``/workspace``, the data file written to a read-write folder outside
the workspace (this run is the generator's, on the original's own code: no solver's code runs here); testrun's plugin
reports every test's outcome over its channel in the same session.

Node ids are pytest's own, the names :mod:`labbot.evals.scoring.testrun` reads back in every later run (validation,
scoring); the same session records every test's outcome with testrun's plugin.

:func:`map_functions` then reads each non-test source file with :mod:`ast`
(:func:`labbot.evals.generation.delete.symbols`) and gives every function and method the tests that executed a statement
of its body.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from coverage import CoverageData

from labbot.common.errors import BadRequest
from labbot.evals.generation.delete import Symbol, symbols
from labbot.evals.sandbox.bwrap import WORKDIR, ExecResult, Sandbox, SandboxSpec
from labbot.evals.scoring.testrun import Outcome, TestRun, pytest_command, pytest_ready
from labbot.evals.suite import is_test_file

PLUGIN_DIR = "/labbot-coverage"
RESULTS = "/labbot-coverage-data"
PLUGIN_MODULE = "labbot_coverage_contexts"
DATA_FILE = ".coverage"
PLUGIN_SOURCE = '''\
"""labbot: record each test's lines under its pytest node id (coverage dynamic contexts)."""
import coverage
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(item.nodeid)
    try:
        yield
    finally:
        if cov is not None:
            cov.switch_context("")
'''
RCFILE = f"""\
[run]
data_file = {RESULTS}/{DATA_FILE}
include = {WORKDIR}/*
branch = False
parallel = False
"""
SKIP_DIRS = {".git", ".hg", ".tox", ".nox", ".venv", "venv", "build", "dist", "node_modules", "__pycache__"}


@dataclass(frozen=True)
class CoverageRun:
    lines: dict[str, dict[int, frozenset[str]]]  # file (relative) -> line -> node ids of the tests that executed it
    at_import: dict[str, frozenset[int]]  # file -> lines executed outside every test (collection, imports)
    run: TestRun  # every test's outcome in this run

    def tests_for(self, path: str, lines: frozenset[int]) -> frozenset[str]:
        by_line = self.lines.get(path, {})
        return frozenset(t for line in lines for t in by_line.get(line, ()))

    def executed_at_import(self, path: str, lines: frozenset[int]) -> bool:
        return bool(self.at_import.get(path, frozenset()) & lines)


def read_coverage(data_file: Path, outcomes: dict[str, Outcome], result: ExecResult) -> CoverageRun:
    data = CoverageData(basename=str(data_file))
    data.read()
    prefix = WORKDIR.rstrip("/") + "/"
    lines: dict[str, dict[int, frozenset[str]]] = {}
    at_import: dict[str, frozenset[int]] = {}
    for measured in data.measured_files():
        if not measured.startswith(prefix):
            continue
        rel = measured[len(prefix) :]
        by_line: dict[int, frozenset[str]] = {}
        imported: set[int] = set()
        for line, contexts in data.contexts_by_lineno(measured).items():
            tests = frozenset(c for c in contexts if c)
            if tests:
                by_line[line] = tests
            if "" in contexts:
                imported.add(line)
        lines[rel] = by_line
        at_import[rel] = frozenset(imported)
    return CoverageRun(lines, at_import, TestRun(outcomes, result))


def coverage_command(outcomes_plugin: str) -> list[str]:
    pytest_argv = pytest_command(plugin=outcomes_plugin, extra=["-p", PLUGIN_MODULE])
    assert pytest_argv[:3] == ["python", "-m", "pytest"], pytest_argv
    return ["python", "-m", "coverage", "run", f"--rcfile={PLUGIN_DIR}/coveragerc", "-m", "pytest", *pytest_argv[3:]]


def run_with_coverage(
    spec: SandboxSpec, *, test_roots: Sequence[str] = (), timeout_s: float | None = None
) -> CoverageRun:
    """Every test of ``spec``'s workspace, once, under coverage with per-test contexts (see the module docstring).

    The workspace is written to as the tests write to it: give it a scratch copy, never the suite's original."""
    with (
        tempfile.TemporaryDirectory(prefix="labbot-coverage-") as plugin,
        tempfile.TemporaryDirectory(prefix="labbot-coverage-data-") as data,
        pytest_ready(spec, test_roots=test_roots) as ready,
    ):
        (Path(plugin) / f"{PLUGIN_MODULE}.py").write_text(PLUGIN_SOURCE)
        (Path(plugin) / "coveragerc").write_text(RCFILE)
        session_spec = ready.spec
        run_spec = replace(
            session_spec,
            ro_binds={**session_spec.ro_binds, PLUGIN_DIR: Path(plugin)},
            rw_binds={**session_spec.rw_binds, RESULTS: Path(data)},
            env={**session_spec.env, "PYTHONPATH": f"{session_spec.env['PYTHONPATH']}:{PLUGIN_DIR}"},
        )
        with Sandbox(run_spec) as box:
            result = box.exec(coverage_command(ready.plugin), timeout_s=timeout_s)
        outcomes = ready.channel.close().outcomes
        data_file = Path(data) / DATA_FILE
        if not data_file.is_file():
            return CoverageRun({}, {}, TestRun(outcomes, result))
        return read_coverage(data_file, outcomes, result)


def source_files(tree: Path) -> list[str]:
    """The repository's Python files that are not tests (nor their configuration), relative, sorted."""
    out = []
    for path in sorted(tree.rglob("*.py")):
        rel = path.relative_to(tree).as_posix()
        if set(rel.split("/")[:-1]) & SKIP_DIRS or path.is_symlink() or not path.is_file():
            continue
        if is_test_file(rel) or rel.split("/")[-1] == "conftest.py":
            continue
        out.append(rel)
    return out


@dataclass(frozen=True)
class Covered:
    """A function or method and the tests that executed its body."""

    path: str
    symbol: Symbol
    tests: frozenset[str]
    at_import: bool  # its body also ran outside any test (at import or collection)


def map_functions(tree: Path, cov: CoverageRun) -> list[Covered]:
    """Every function and method of ``tree``'s non-test files whose body some test executed, in file order."""
    out = []
    for rel in source_files(tree):
        if rel not in cov.lines:
            continue  # never imported by the tests
        text = (tree / rel).read_text(errors="replace")
        try:
            found = symbols(text, rel)
        except BadRequest:
            continue  # a file that does not parse has no candidates (the tests say the rest)
        for sym in found:
            tests = cov.tests_for(rel, sym.body_lines)
            if tests:
                out.append(Covered(rel, sym, tests, cov.executed_at_import(rel, sym.body_lines)))
    return out
