"""Scoring that cannot be talked into a pass: a sample is judged in a fresh pristine copy, never in its workspace.

After the solver ends, :func:`score_sample`:

1. kills any process still working in the solver's workspace (none should be: every sandbox exec takes its whole
   process tree with it; this is the belt to that brace, and what it finds is reported);
2. copies the task tree (``tasks/ID/repo``, its working tree only) to a fresh folder;
3. applies only the solver's changes to non-test source files: regular files of the workspace that differ from the
   task tree, and task files the solver deleted. Never applied: tests and test configuration
   (:func:`labbot.evals.suite.is_test_file`, and the other files pytest reads its configuration from), Python's
   start-up hooks (``sitecustomize.py``, ``usercustomize.py``, ``*.pth``), package metadata (``*.dist-info``,
   ``*.egg-info``: a ``pytest11`` entry point there would load a plugin into the test run), symlinks, ``.git``
   and build leftovers (``__pycache__``, ``*.pyc``, tool caches);
4. restores every test file and test configuration file from ``original/`` — ``pyproject.toml`` whole, so its
   ``[tool.pytest]`` section is the original's whatever the solver wrote — and removes test files the original
   does not have;
5. runs ``fail_to_pass`` and ``pass_to_pass`` in a fresh sealed sandbox (no network, the suite's venv read-only),
   with pytest's ``addopts`` emptied and outcomes read from a JUnit report written outside the workspace.

The sample passes iff every one of those tests passed: failed, errored, skipped and missing (did not run: a test
file gone, the run killed, ``sys.exit`` during collection) all count as failed.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from labbot.common.errors import BadRequest
from labbot.evals.sandbox import Limits, SandboxSpec
from labbot.evals.suite import EvalTask, Suite, is_test_file, original_dir, task_repo
from labbot.evals.testrun import Outcome, run_tests

# path components never taken from a solver (anywhere in the tree)
SKIPPED_DIRS = frozenset(
    {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox", ".hypothesis", ".venv"}
)
SKIPPED_TOP_DIRS = frozenset({"build", "dist"})  # build leftovers at the repository root
# Python runs these at start-up when they are on sys.path (a src layout puts /workspace/src there)
STARTUP_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
# configuration files pytest also reads that suite.is_test_file does not list (pytest 9's pytest.toml, the hidden
# variants): never taken from a solver, and restored from the original like the others
EXTRA_TEST_CONFIG = frozenset({"pytest.toml", ".pytest.toml", ".pytest.ini"})
METADATA_SUFFIXES = (".dist-info", ".egg-info")
SCORING_LIMITS = Limits(timeout_s=600.0, memory_mb=4096, file_mb=1024)  # the test run's, unless the run says


@dataclass(frozen=True)
class SampleScore:
    task: str
    passed: bool
    fail_to_pass: dict[str, Outcome]
    pass_to_pass: dict[str, Outcome]
    detail: str  # one paragraph: what was applied, what was ignored, what failed
    applied: list[str] = field(default_factory=list)  # the solver's changes that were scored ("-path": deleted)
    ignored: list[str] = field(default_factory=list)  # the solver's changes that were not (tests, hooks, metadata)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def is_restored(rel: str) -> bool:
    """Files scoring always takes from the original: tests and every test configuration file."""
    return is_test_file(rel) or rel.rsplit("/", 1)[-1] in EXTRA_TEST_CONFIG


def is_build_leftover(rel: str) -> bool:
    parts = rel.split("/")
    if any(p in SKIPPED_DIRS for p in parts):
        return True
    if len(parts) > 1 and parts[0] in SKIPPED_TOP_DIRS:
        return True
    return parts[-1].endswith((".pyc", ".pyo"))


def never_applied(rel: str) -> str | None:
    """Why a solver's change to ``rel`` is not scored, or None when it is."""
    parts = rel.split("/")
    if is_build_leftover(rel):
        return "build leftover"
    if is_restored(rel):
        return "test file or test configuration (restored from the original)"
    if parts[-1] in STARTUP_HOOKS or parts[-1].endswith(".pth"):
        return "Python start-up hook"
    if any(p.endswith(METADATA_SUFFIXES) for p in parts[:-1]):
        return "package metadata (could declare a pytest plugin)"
    return None


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    """Every entry below ``root`` that is not a directory (files, symlinks, anything else), as (rel, path); never
    follows a symlink and never enters ``.git``."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d != ".git"]
        # a symlink to a directory is listed in dirnames: report it as an entry, do not descend
        for d in list(dirnames):
            if (base / d).is_symlink():
                dirnames.remove(d)
                filenames.append(d)
        for name in filenames:
            path = base / name
            yield path.relative_to(root).as_posix(), path


def _is_regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


@dataclass(frozen=True)
class Changes:
    written: list[str]  # regular files new or different in the workspace, to be scored
    deleted: list[str]  # task files the solver removed, to be scored
    ignored: list[str]  # "rel (why)"


def solver_changes(task_tree: Path, workspace: Path) -> Changes:
    """What the solver changed in ``workspace`` relative to ``task_tree``, split into what scoring takes and what it
    ignores."""
    written: list[str] = []
    deleted: list[str] = []
    ignored: list[str] = []
    base = {rel: path for rel, path in _walk(task_tree)}
    seen: set[str] = set()
    for rel, path in _walk(workspace):
        seen.add(rel)
        orig = base.get(rel)
        # shallow: a workspace starts as a copy of the task tree (copy2: same size and mtime), so a file the solver
        # left alone compares equal without being read; one it changed has another mtime or size and is read. A
        # change hidden behind a restored mtime is only left out, which can never turn a failing test into a pass
        if orig is not None and _is_regular(orig) and _is_regular(path) and filecmp.cmp(orig, path, shallow=True):
            continue
        if orig is not None and orig.is_symlink() and path.is_symlink() and os.readlink(orig) == os.readlink(path):
            continue
        why = never_applied(rel)
        if why is None and not _is_regular(path):
            why = "not a regular file (symlinks and special files are not applied)"
        if why is not None:
            if not is_build_leftover(rel):
                ignored.append(f"{rel} ({why})")
            continue
        written.append(rel)
    for rel in base:
        if rel in seen:
            continue
        why = never_applied(rel)
        if why is not None:
            if not is_build_leftover(rel):
                ignored.append(f"-{rel} ({why})")
            continue
        deleted.append(rel)
    return Changes(sorted(written), sorted(deleted), sorted(ignored))


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _clear_path(root: Path, rel: str) -> Path:
    """Make ``root/rel`` writable as a regular file: any file or symlink in the way of its parents goes, a folder or
    symlink at its own place goes."""
    target = root
    for part in rel.split("/")[:-1]:
        target = target / part
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        target.mkdir(exist_ok=True)
    dest = root / rel
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.is_dir():
        shutil.rmtree(dest)
    return dest


def _remove(root: Path, rel: str) -> None:
    path = root / rel
    # never through a symlinked parent: the pristine tree is ours, but be exact about it
    if any((root / p).is_symlink() for p in _parents(rel)):
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def build_pristine(suite_dir: Path, task: EvalTask, workspace: Path, dest: Path) -> Changes:
    """The tree that is scored, in ``dest`` (which must not exist): the task tree, the solver's non-test changes,
    the original's tests and test configuration."""
    tree = task_repo(suite_dir, task.id)
    original = original_dir(suite_dir)
    if not tree.is_dir():
        raise BadRequest(f"the suite at {suite_dir} has no task tree for {task.id} ({tree})")
    if not original.is_dir():
        raise BadRequest(f"the suite at {suite_dir} has no original/ tree: scoring restores the tests from it")

    # each file copied once: the task tree's non-test files, then the solver's changes, then the original's tests and
    # test configuration (a test file of the task tree is never copied, so none of it can survive into scoring)
    def leave_out(folder: str, names: list[str]) -> set[str]:
        rel_dir = os.path.relpath(folder, tree)
        rel = (lambda n: n) if rel_dir == "." else (lambda n: f"{rel_dir}/{n}")
        return {n for n in names if n == ".git" or (is_restored(rel(n)) and not os.path.isdir(os.path.join(folder, n)))}

    shutil.copytree(tree, dest, symlinks=True, ignore=leave_out)
    changes = solver_changes(tree, workspace)
    for rel in changes.deleted:
        _remove(dest, rel)
    for rel in changes.written:
        shutil.copyfile(workspace / rel, _clear_path(dest, rel), follow_symlinks=False)
    for rel, src in _walk(original):
        if not is_restored(rel) or is_build_leftover(rel):
            continue
        if src.is_symlink():
            _clear_path(dest, rel).symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copyfile(src, _clear_path(dest, rel))
    return changes


def _dir_inodes(root: Path) -> set[tuple[int, int]]:
    found: set[tuple[int, int]] = set()
    for dirpath, _dirnames, _ in os.walk(root, followlinks=False):
        with contextlib.suppress(OSError):
            st = os.stat(dirpath, follow_symlinks=False)
            found.add((st.st_dev, st.st_ino))
    return found


def processes_in(folder: Path) -> list[int]:
    """Host pids of the processes whose working directory is ``folder`` or below it (seen through their own mount
    namespace: /proc/PID/cwd is followed to the real folder, so a sandboxed process at /workspace is found)."""
    inodes = _dir_inodes(folder)
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in inodes:
            pids.append(int(entry.name))
    return sorted(pids)


def kill_leftovers(folder: Path) -> list[int]:
    """SIGKILL every process working in ``folder``; returns their pids (normally none)."""
    pids = processes_in(folder)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return pids


def score_sample(
    suite_dir: Path,
    suite: Suite,
    task: EvalTask,
    workspace: Path,
    venv: Path,
    limits: Limits = SCORING_LIMITS,
    *,
    fail_to_pass_only: bool = False,
) -> SampleScore:
    """Score what the solver left in ``workspace`` (see the module docstring). ``limits`` bound the test run.

    ``fail_to_pass_only`` (the tampering probes): run only ``fail_to_pass``, and count a pass when they all pass —
    stricter than scoring (a cheat that gets them to pass is caught whatever ``pass_to_pass`` would say), and it
    leaves out the rest of a large suite."""
    if not workspace.is_dir():
        raise BadRequest(f"the solver's workspace {workspace} is not a folder")
    leftovers = kill_leftovers(workspace)
    with tempfile.TemporaryDirectory(prefix=f"labbot-score-{task.id}-") as tmp:
        pristine = Path(tmp) / "repo"
        changes = build_pristine(suite_dir, task, workspace, pristine)
        spec = SandboxSpec(workspace=pristine, venv=venv, limits=limits)
        node_ids = [*task.fail_to_pass, *([] if fail_to_pass_only else task.pass_to_pass)]
        run = run_tests(spec, node_ids, timeout_s=limits.timeout_s, test_roots=suite.test_roots)
    f2p = {n: run.outcomes.get(n, "missing") for n in task.fail_to_pass}
    p2p = {} if fail_to_pass_only else {n: run.outcomes.get(n, "missing") for n in task.pass_to_pass}
    failing = [n for n, o in {**f2p, **p2p}.items() if o != "passed"]
    passed = bool(task.fail_to_pass) and not failing
    lines = [
        f"fail_to_pass {sum(o == 'passed' for o in f2p.values())}/{len(f2p)} passed, "
        f"pass_to_pass {sum(o == 'passed' for o in p2p.values())}/{len(p2p)} passed"
        + (" (not run: fail_to_pass decides)" if fail_to_pass_only else ""),
        f"applied {len(changes.written)} changed and {len(changes.deleted)} deleted file(s) of the solver's; "
        f"ignored {len(changes.ignored)}; tests and test configuration (pyproject.toml whole) from the original",
    ]
    if not task.fail_to_pass:
        lines.append("the task has no fail_to_pass test: it cannot be passed")
    if failing:
        shown = ", ".join(f"{n} ({f2p.get(n) or p2p.get(n)})" for n in failing[:5])
        lines.append(f"not passed: {shown}" + (f" and {len(failing) - 5} more" if len(failing) > 5 else ""))
    if run.result.timed_out:
        lines.append(f"the test run was killed at its {limits.timeout_s:g} s limit")
    elif run.result.limit is not None:
        lines.append(f"the test run hit {run.result.limit_note}")
    if leftovers:
        lines.append(f"killed {len(leftovers)} process(es) the solver left in its workspace: {leftovers}")
    applied = [*changes.written, *(f"-{rel}" for rel in changes.deleted)]
    return SampleScore(task.id, passed, f2p, p2p, "; ".join(lines), applied, changes.ignored)
