"""The task venv's inputs read statically (no code of the repository runs), node ids as JUnit names them, and the
venv built in a sandbox once per wheel set."""

from __future__ import annotations

import importlib.metadata
import subprocess

import pytest
from gen_support import eval_cache, write_files

from labbot.common.errors import BadRequest
from labbot.evals.generation.coverage_map import source_files
from labbot.evals.sandbox import venvs
from labbot.evals.sandbox.bwrap import Sandbox, SandboxSpec


def test_requirements_from_pyproject_extras_and_groups(tmp_path):
    write_files(
        tmp_path,
        {
            "pyproject.toml": """\
                [project]
                name = "My_Project"
                dependencies = ["attrs>=23", "tomli; python_version < '3.11'"]
                [project.optional-dependencies]
                test = ["my-project[fast]", "hypothesis==6.100.0"]
                fast = ["orjson"]
                docs = ["sphinx"]
                [dependency-groups]
                tests = ["pytest-timeout", {include-group = "base"}]
                base = ["freezegun"]
                """,
        },
    )
    assert venvs.requirements(tmp_path) == [
        "attrs>=23", "tomli; python_version < '3.11'", "hypothesis==6.100.0", "pytest-timeout", "freezegun", "orjson",
    ]  # fmt: skip


def test_requirements_from_setup_cfg_setup_py_and_requirement_files(tmp_path):
    write_files(
        tmp_path,
        {
            "setup.cfg": """\
                [metadata]
                name = legacy
                [options]
                install_requires =
                    six>=1.16
                [options.extras_require]
                testing = mock
                """,
            "setup.py": """\
                import os
                from setuptools import setup
                setup(name="legacy", install_requires=["requests"], tests_require=["nose"],
                      version=os.environ["NOT_RUN"])
                """,
            "requirements.txt": "-r requirements/base.txt\n-e .\n--index-url https://example.invalid\nclick  # cli\n",
            "requirements/base.txt": "jinja2\n",
            "requirements-test.txt": "legacy[testing]\nbad requirement !!\n",
        },
    )
    said: list[str] = []
    assert venvs.requirements(tmp_path, said.append) == ["six>=1.16", "requests", "nose", "jinja2", "click", "mock"]
    assert said == ["skipped a requirement that does not parse: 'bad requirement !!'"]


def test_with_tools_pins_pytest_and_coverage_unless_named():
    pins = venvs.with_tools(["attrs"])
    assert pins == ["attrs", f"pytest=={importlib.metadata.version('pytest')}",
                    f"coverage=={importlib.metadata.version('coverage')}"]  # fmt: skip
    assert venvs.with_tools(["pytest<9", "Coverage[toml]>=7"]) == ["pytest<9", "Coverage[toml]>=7"]


def test_source_files_leave_tests_and_tooling_out(tmp_path):
    files = ["pkg/a.py", "pkg/tests/test_a.py", "tests/conftest.py", "conftest.py", "setup.py", "build/lib/pkg/a.py",
             "src/pkg/b_test.py", "src/pkg/b.py", ".venv/lib/x.py", "docs/conf.py"]  # fmt: skip
    write_files(tmp_path, dict.fromkeys(files, "x = 1\n"))
    assert source_files(tmp_path) == ["docs/conf.py", "pkg/a.py", "src/pkg/b.py"]


def test_ensure_venv_without_wheels_is_refused(tmp_path):
    with pytest.raises(BadRequest, match="holds no wheels"):
        venvs.ensure_venv(tmp_path, tmp_path / "cache")


@pytest.mark.subprocess
def test_the_venv_is_built_once_per_wheel_set_and_works_read_only(request, tmp_path_factory, tmp_path):
    cache = eval_cache(request.config, tmp_path_factory)
    wheels = tmp_path / "wheels"
    venvs.collect_wheels(venvs.with_tools([]), wheels, cache=cache / "wheels")
    said: list[str] = []
    first = venvs.ensure_venv(wheels, tmp_path / "venvs", progress=said.append)
    second = venvs.ensure_venv(wheels, tmp_path / "venvs", progress=said.append)
    assert first == second and [s for s in said if s.startswith("venv: building")] == [said[0]]
    assert [p.name for p in (tmp_path / "venvs").iterdir()] == [first.name]  # no build folder left
    work = tmp_path / "work"
    work.mkdir()
    with Sandbox(SandboxSpec(work, venv=first)) as box:
        done = box.exec(["python", "-c", "import coverage, pytest, sys; print(sys.prefix, pytest.__file__)"])
        assert done.success, done.stderr
        assert done.stdout.startswith("/venv /venv/lib/")
        # read-only, and no editable install or .pth pointing anywhere else
        assert not box.exec(["touch", "/venv/x"]).success
        listing = box.exec(["sh", "-c", "ls /venv/lib/python3*/site-packages/"]).stdout
        assert "__editable__" not in listing and ".egg-link" not in listing


def test_a_requirement_no_index_has_is_named_on_the_errors_last_line(tmp_path, monkeypatch):
    """The last line is what a failed generation run shows (training.failure_reason): it names what pip could not
    find, not only pip's advice."""
    said = (
        "ERROR: Could not find a version that satisfies the requirement labbot-client==0.1.0 (from versions: none)\n"
        "ERROR: No matching distribution found for labbot-client==0.1.0\n"
    )
    monkeypatch.setattr(venvs, "_pip", lambda args: subprocess.CompletedProcess(args, 1, "", said))
    with pytest.raises(BadRequest) as refused:
        venvs.collect_wheels(["labbot-client==0.1.0"], tmp_path / "wheels")
    last = refused.value.message.splitlines()[-1]
    assert last.startswith("no distribution of labbot-client==0.1.0 on the package index: check that"), last
