"""The tests' side of the vendor specs (make specs): a contract test whose spec is missing is skipped with one loud
line at the end of the run (naming make specs), and fails with CI=true; with the spec there, it runs.

A small contract test is run by pytest in a subprocess, with ``LABBOT_SPECS_DIR`` pointing at a folder of our own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from vendor_specs import NOT_RUN, spec_path

pytestmark = pytest.mark.subprocess  # pytest runs a contract test in a process of its own

TESTS = Path(__file__).resolve().parents[1]
SPEC = "slack-event-wrapper-schema.json"  # the smallest one (4 kB)

CONTRACT_TEST = f'''
import json

from vendor_specs import spec_path


def test_a_contract() -> None:
    assert "properties" in json.loads(spec_path("{SPEC}").read_text())


def test_no_contract() -> None:
    assert True
'''


def _pytest(tmp_path: Path, specs: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "pytest.ini").write_text("[pytest]\naddopts = -ra\n")  # not the repository's configuration
    (project / "conftest.py").write_text('pytest_plugins = ["vendor_specs"]\n')
    (project / "test_contract.py").write_text(CONTRACT_TEST)
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("LABBOT_SPECS_", "PYTEST_"))}
    env |= {"PYTHONPATH": str(TESTS), "LABBOT_SPECS_DIR": str(specs), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    if ci:
        env["CI"] = "true"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project)]
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=120)


def _loud_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "NOT RUN" in line]


def test_missing_spec_outside_ci_skips_the_contract_test_and_says_so_once_at_the_end(tmp_path: Path) -> None:
    empty = tmp_path / "specs"
    empty.mkdir()
    run = _pytest(tmp_path, empty, ci=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 1 skipped" in run.stdout
    [loud] = _loud_lines(run.stdout)
    assert "1 contract test(s) NOT RUN" in loud and "vendor specs are missing" in loud and "`make specs`" in loud
    lines = run.stdout.rstrip().splitlines()
    assert lines.index(loud) == len(lines) - 2  # just above the final counts
    assert "SKIPPED [1] " in run.stdout and f"{NOT_RUN}: {SPEC} is not in {empty}" in run.stdout


def test_missing_spec_in_ci_fails_the_run(tmp_path: Path) -> None:
    empty = tmp_path / "specs"
    empty.mkdir()
    run = _pytest(tmp_path, empty, ci=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed" in run.stdout
    assert "make specs" in run.stdout and "CI=true" in run.stdout
    [loud] = _loud_lines(run.stdout)
    assert "1 FAILED" in loud and "`make specs`" in loud


def test_with_the_spec_the_contract_test_runs_even_in_ci(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copyfile(spec_path(SPEC), specs / SPEC)  # this test needs the vendor specs too
    run = _pytest(tmp_path, specs, ci=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout and _loud_lines(run.stdout) == []


def test_a_cached_spec_whose_sha256_differs_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / SPEC).write_text('{"properties": {}}')
    monkeypatch.setenv("LABBOT_SPECS_DIR", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"has sha256 [0-9a-f]{64}, not the pinned .*make specs"):
        spec_path(SPEC)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="not the pinned"):
        spec_path(SPEC)


def test_a_spec_that_is_not_pinned_is_a_mistake_not_a_skip() -> None:
    with pytest.raises(KeyError):
        spec_path("acme-openapi.json")
