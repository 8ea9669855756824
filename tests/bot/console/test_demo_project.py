"""The demo's own project: written and committed once, left as it is after, and a project whose tests pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labbot.bot.console.demo_project import DEMO_PROJECT_FILES, write_demo_project


def _head(root: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout


def test_written_once_committed_and_kept(tmp_path: Path) -> None:
    root = write_demo_project(tmp_path / "demo-project")
    assert {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts} == set(
        DEMO_PROJECT_FILES
    )
    head = _head(root)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True)
    assert status.stdout == "", "everything committed: a suite names the commit it came from"
    assert write_demo_project(root) == root and _head(root) == head, "the second start keeps the first commit"


def test_a_folder_left_half_written_is_written_again(tmp_path: Path) -> None:
    root = tmp_path / "demo-project"
    subprocess.run(["git", "init", "--quiet", str(root)], check=True)  # a start cut short before its commit
    write_demo_project(root)
    assert _head(root).strip()


@pytest.mark.subprocess
def test_its_tests_pass(tmp_path: Path) -> None:
    root = write_demo_project(tmp_path / "demo-project")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=root,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0 and "6 passed" in done.stdout, done.stdout[-2000:]
