"""What a generated eval suite is, on disk and as JSON: the contract between the generator, the runner and the CLI.

A suite folder::

    suite.json                  the Suite below (id, source repository and commit, tasks, dropped flaky tests,
                                tasks left out as contaminated)
    original/                   the repository's committed files at that commit, canaries planted in every deleted
                                feature: what scoring restores tests from and the gold solver copies; never bound
                                into a sandbox
    tasks/TASK_ID/repo/         the task tree: the feature deleted, a fresh one-commit git repository (no history)
    wheels/                     the project and its dependencies (and pytest) as wheels: each run builds the task's
                                venv from these inside a sandbox, with no network and no pip cache

The suite id is ``suite-`` and the first 12 hex digits of the sha256 of its ``suite.json`` without the id, so the
same repository, commit, seed and count give the same id.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from labbot.common.errors import BadRequest

SUITE_FILE = "suite.json"
SUITE_ID = re.compile(r"suite-[0-9a-f]{12}")
TASK_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,79}")
# the toolchain packages that load vendored copies at import, and the tree each needs shown (``Suite.toolchain``)
TOOLCHAIN_IMPORTS = {"setuptools": "setuptools/_vendor", "pkg_resources": "pkg_resources/_vendor"}
# files of the test suite and its configuration: restored from the original before scoring, never taken from a solver
TEST_CONFIG_FILES = ("conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", "setup.py")


@dataclass(frozen=True)
class EvalTask:
    id: str
    path: str  # the file the feature was deleted from, relative to the repository root
    symbol: str  # its qualified name in that file: ``function``, ``Class.method``
    deletion: Literal["body", "function"]  # the body replaced (Commit0-style) or the whole definition removed
    statement: str  # what the solver is told
    fail_to_pass: list[str]  # pytest node ids that fail with the feature deleted and pass with it restored
    pass_to_pass: list[str]  # node ids that pass either way
    canary: str  # planted in the deleted feature in original/: seen anywhere a solver can read, the seal leaked
    also: list[str] = field(default_factory=list)  # more symbols of the same file deleted in this task (harder suites)
    # fail_to_pass ids the statement does not name: scoring runs them all, so a rewrite aimed at the named ones fails
    # these (empty in suites made before hidden tests, whose statements name every one)
    hidden: list[str] = field(default_factory=list)

    @property
    def symbols(self) -> list[str]:
        """Every symbol this task deleted from ``path``: ``symbol`` first."""
        return [self.symbol, *self.also]

    @property
    def named(self) -> list[str]:
        """The fail_to_pass ids the statement names."""
        hidden = set(self.hidden)
        return [t for t in self.fail_to_pass if t not in hidden]

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        if not self.hidden:
            del doc["hidden"]  # an older suite's content, and so its id, stays what it was
        return doc


@dataclass(frozen=True)
class Suite:
    id: str
    source: str  # the repository's folder name (never the user's path)
    commit: str  # the commit the tasks were cut from
    seed: int
    tasks: list[EvalTask]
    flaky: list[str] = field(default_factory=list)  # tests dropped from both lists: their outcome changed on a rerun
    python: str = ""  # the interpreter version the suite was validated with
    test_roots: list[str] = field(default_factory=list)  # import roots put first on sys.path (``src`` layouts)
    # tasks left out because their deleted code is readable in the sandbox (evals.seal.contamination): each
    # {"task", "symbols", "paths" (as the sandbox shows them), "kinds" (what matched, per path)}
    contaminated: list[dict[str, Any]] = field(default_factory=list)
    # vendored trees of the venv's toolchain the tests import (setuptools', pkg_resources'): shown in its sandboxes
    toolchain: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc = {**asdict(self), "tasks": [t.to_json() for t in self.tasks]}
        for key in ("contaminated", "toolchain"):  # newer fields, left out when empty: an older suite's id holds
            if not doc[key]:
                del doc[key]
        return doc

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Suite:
        tasks = [EvalTask(**t) for t in doc.get("tasks", [])]
        return Suite(**{**doc, "tasks": tasks})

    def task(self, task_id: str) -> EvalTask:
        for t in self.tasks:
            if t.id == task_id:
                return t
        known = ", ".join(t.id for t in self.tasks[:10])
        raise BadRequest(f"suite {self.id} has no task {task_id!r} (its tasks: {known})")


def suite_id(doc: dict[str, Any]) -> str:
    body = json.dumps({k: v for k, v in doc.items() if k != "id"}, sort_keys=True).encode()
    return "suite-" + hashlib.sha256(body).hexdigest()[:12]


def save(suite: Suite, folder: Path) -> None:
    (folder / SUITE_FILE).write_text(json.dumps(suite.to_json(), indent=2, sort_keys=True) + "\n")


def load(folder: Path) -> Suite:
    path = folder / SUITE_FILE
    if not path.is_file():
        raise BadRequest(f"{folder} is not an eval suite (no {SUITE_FILE}): make one with `labbot eval generate`")
    return Suite.from_json(json.loads(path.read_text()))


def original_dir(folder: Path) -> Path:
    return folder / "original"


def task_repo(folder: Path, task_id: str) -> Path:
    if not TASK_ID.fullmatch(task_id):
        raise BadRequest(f"{task_id!r} is not a task id (lowercase letters, digits, '-' and '_')")
    return folder / "tasks" / task_id / "repo"


def wheels_dir(folder: Path) -> Path:
    return folder / "wheels"


def is_test_file(rel: str) -> bool:
    """Tests and their configuration: restored from the original before scoring (a solver's edits there are void)."""
    parts = rel.split("/")
    name = parts[-1]
    if name in TEST_CONFIG_FILES:
        return True
    if any(p in ("tests", "test", "testing") for p in parts[:-1]):
        return True
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
