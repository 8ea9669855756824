"""Each test's outcome under pytest's own node id, read from labbot's plugin, never from what the tests print."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from run_fixtures import build_pytest_venv

from labbot.evals.sandbox.bwrap import SandboxSpec
from labbot.evals.scoring.testrun import run_tests

pytestmark = pytest.mark.subprocess

TESTS = {
    # a module and a class whose names have capitals and dots in their parameters: ids as pytest writes them
    "Tests/test_Mixed.py": textwrap.dedent(
        """\
        import pytest

        class TestOuter:
            class TestInner:
                @pytest.mark.parametrize("x", ["a.b", "c::d"])
                def test_param(self, x):
                    assert x

        def test_fails():
            print("passed")  # printing it does not make it so
            assert 1 == 2

        @pytest.fixture
        def broken():
            raise RuntimeError("setup")

        def test_setup_error(broken):
            pass

        def test_skipped():
            pytest.skip("not today")

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert False
        """
    ),
    "tests/test_exit.py": "import os\n\ndef test_ends_the_session():\n    os._exit(0)\n",
}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pytest_venv(tmp_path_factory.mktemp("venv") / "venv")


def _workspace(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_outcomes_by_real_node_id(tmp_path: Path, venv: Path) -> None:
    ws = _workspace(tmp_path / "ws", {"Tests/test_Mixed.py": TESTS["Tests/test_Mixed.py"]})
    run = run_tests(SandboxSpec(ws, venv=venv))
    base = "Tests/test_Mixed.py"
    assert run.outcomes == {
        f"{base}::TestOuter::TestInner::test_param[a.b]": "passed",
        f"{base}::TestOuter::TestInner::test_param[c::d]": "passed",
        f"{base}::test_fails": "failed",
        f"{base}::test_setup_error": "error",
        f"{base}::test_skipped": "skipped",
        f"{base}::test_xfail": "skipped",
    }
    asked = [f"{base}::test_fails", f"{base}::TestOuter::TestInner::test_param[c::d]", f"{base}::test_gone"]
    picked = run_tests(SandboxSpec(ws, venv=venv), asked)
    assert picked.outcomes == {asked[0]: "failed", asked[1]: "passed", asked[2]: "missing"}


def test_a_session_cut_short_reports_nothing_passed(tmp_path: Path, venv: Path) -> None:
    ws = _workspace(tmp_path / "ws", TESTS)
    asked = ["Tests/test_Mixed.py::TestOuter::TestInner::test_param[a.b]", "tests/test_exit.py::test_ends_the_session"]
    run = run_tests(SandboxSpec(ws, venv=venv), asked)
    assert run.result.returncode == 0  # the process said "fine"...
    assert run.outcomes == dict.fromkeys(asked, "missing")  # ...but no session ended: nothing counts as passed
