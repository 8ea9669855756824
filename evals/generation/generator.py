"""The task generator: a git repository with a pytest suite in, a validated eval suite (``evals.suite``) out.

``generate_suite(repo, out, count=, seed=)``:

1. Reads the repository only with git (``rev-parse``, ``status`` without optional locks, ``archive HEAD``): the
   user's checkout is never written, and only committed files are used.
2. Collects wheels of what the repository declares plus pytest and coverage into the suite's ``wheels/``, and builds
   the task venv from them in a sandbox (``evals.sandbox.venvs``).
3. Validates the original once per suite, in a scratch copy of the archive: the tests run under coverage with per-test
   contexts (``evals.generation.coverage_map``; this is the first of the two runs), then once more without it in the
   same workspace (so state a test leaves behind shows). A test whose outcome differs is flaky: dropped from both test
   lists and listed in ``Suite.flaky``. Tests that fail or skip both times are left out too; only tests that passed
   twice are in the lists.
4. Candidates are functions and methods whose body a stable test executed; a seeded shuffle ordered by preference
   (a non-trivial body, at most ``PREFERRED_MAX_TESTS`` covering tests, not run at import) picks them in turn.
5. Each candidate is deleted (``evals.generation.delete``) in a scratch copy and its tests run there:
   - when the original's full run took at most ``full_run_max_s``, or for a whole-function deletion or a body that
     also ran at import (either can break a module's import, failing tests that never executed the body), the
     *whole* stable suite runs: ``fail_to_pass`` is what failed, ``pass_to_pass`` the rest, all measured;
   - otherwise only the test files holding the tests that cover the symbol run: ``fail_to_pass`` is what failed
     there, and the stable tests of other files are put in ``pass_to_pass`` on coverage's word (none of them executed
     a line of the deleted body, and nothing else changed).
   A candidate that fails no test (or times out) is dropped and the next one is tried, until ``count`` tasks are
   valid or candidates run out (the progress says how many were made).
6. A valid task becomes ``tasks/ID/repo``: the archive with the feature deleted, as a fresh one-commit git
   repository (fixed author and date, no remote, no reflog, no hooks: the only objects are that commit's). Its
   statement comes from the symbol, its signature and docstring and the failing tests' names (``rewrite``, a model
   behind a callable, may turn it into an issue; it never sees the deleted code). ``original/`` is the archive with
   each task's canary planted in its deleted body.

The suite is written to a staging folder beside ``out`` and renamed into place at the end: an error leaves no suite.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import random
import re
import shutil
import subprocess
import tarfile
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from labbot.common.durations import format_duration
from labbot.common.errors import BadRequest
from labbot.common.words import counted
from labbot.evals.generation.coverage_map import CoverageRun, Covered, map_functions, run_with_coverage
from labbot.evals.generation.delete import Deletion, delete, plant_canary
from labbot.evals.sandbox import venvs
from labbot.evals.sandbox.bwrap import ExecResult, Limits, SandboxSpec
from labbot.evals.scoring.testrun import TestRun, run_tests
from labbot.evals.seal import contamination
from labbot.evals.suite import EvalTask, Suite, is_test_file, original_dir, save, suite_id, task_repo, wheels_dir

Progress = Callable[[str], None]
Rewrite = Callable[[str], str]
DeletionMode = Literal["body", "function", "mixed"]
Prefer = Literal["any", "deep"]
MAX_DELETIONS = 5  # features deleted in one task, at most
PREFERRED_MAX_TESTS = 25  # a feature most of the suite runs through makes a vague task
NON_TRIVIAL_SIZE = 10  # AST nodes in the body below which there is little to restore (``return self._x``)
STATEMENT_TESTS = 20  # failing tests named in a statement
CONTAMINATION_BUDGET_S = 300.0  # one contamination walk at generation: a round of tasks (a sample's view, ~20k files)
TAIL = 3000  # characters of pytest's output shown in an error
TASK_AUTHOR = "labbot"
TASK_EMAIL = "labbot@localhost"
TASK_DATE = "2000-01-01T00:00:00+0000"
TASK_EPOCH = 946684800  # TASK_DATE in seconds
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")


def _quiet(_: str) -> None:
    return None


def default_cache() -> Path:
    """Wheels and venvs kept between suites: ``$XDG_CACHE_HOME/labbot/evals`` (``~/.cache/labbot/evals``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "labbot" / "evals"


# --- the user's repository, read only ---------------------------------------------------------------------------


def _git_env() -> dict[str, str]:
    # no optional locks: `git status` must not refresh (rewrite) the user's index
    return {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=_git_env(), timeout=300)


@dataclass(frozen=True)
class Source:
    root: Path  # the repository's top level
    commit: str
    archive: bytes  # ``git archive --format=tar HEAD``


def _ignored(root: Path, path: Path) -> bool:
    """Whether git ignores ``path`` inside ``root`` (it, or the nearest folder above it that exists): a suite written
    there leaves the checkout as it was (labbot's own state folder, ``.labbot/``, is such a folder)."""
    here = path
    while here != root and not here.exists():
        here = here.parent
    return here != root and _git(root, "check-ignore", "-q", str(here)).returncode == 0


def read_repository(repo: Path, progress: Progress = _quiet) -> Source:
    """The committed files of ``repo`` at HEAD, as a tar archive; BadRequest when it is not a repository with a
    commit."""
    if not repo.is_dir():
        raise BadRequest(f"{repo} is not a folder: give the path of a git repository with a pytest suite")
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise BadRequest(
            f"{repo} is not a git repository ({top.stderr.decode(errors='replace').strip()}): tasks are cut from "
            "committed files, so `git init` and commit the code and its tests first"
        )
    root = Path(top.stdout.decode().strip())
    head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head.returncode != 0:
        raise BadRequest(f"the git repository {root} has no commits yet: commit the code and its tests first")
    commit = head.stdout.decode().strip()
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    if status.returncode == 0 and status.stdout.strip():
        progress("note: the checkout has uncommitted changes; the suite is cut from the last commit only")
    archive = _git(root, "archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise BadRequest(f"git archive failed in {root}: {archive.stderr.decode(errors='replace').strip()}")
    return Source(root, commit, archive.stdout)


def _inside(name: str) -> bool:
    """A relative path that stays inside the folder it is taken from (checked on the text: nothing is resolved)."""
    parts = name.split("/")
    return not name.startswith("/") and ".." not in parts


_LEFTOVER_TOP = {"build", "dist", ".eggs", ".tox", ".nox", "htmlcov"}  # output folders at the repository's top
_LEFTOVER_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}  # anywhere
_LEFTOVER_SUFFIXES = (".pyc", ".pyo", ".egg-info")
_LEFTOVER_NAMES = {".coverage"}


def is_leftover(name: str) -> bool:
    """Bytecode and build or tool output, even when committed: a ``.pyc`` of the module a task deletes holds the
    answer compiled, a ``build/`` copy holds it as source. Never part of a task tree (nor of the original)."""
    parts = [p for p in name.strip("/").split("/") if p not in ("", ".")]
    if not parts:
        return False
    return (
        parts[0] in _LEFTOVER_TOP
        or any(p in _LEFTOVER_DIRS or p.endswith(_LEFTOVER_SUFFIXES) for p in parts)
        or parts[-1] in _LEFTOVER_NAMES
        or parts[-1].startswith(".coverage.")
    )


def extract(archive: bytes, dest: Path) -> list[str]:
    """Unpack ``archive`` (from ``git archive``) into ``dest``; returns the members left out: links that leave the
    tree (absolute, or climbing out with ``..``), anything that is not a file, a folder or a link, and committed
    leftovers (:func:`is_leftover`: bytecode, build output, egg-info, coverage data).

    The checks are on the names alone, without tarfile's ``data`` filter, which resolves every member's path on disk
    (a third of a task's materialisation on a 1,000-file repository): git cannot store a path that goes through a
    link or contains ``..``, so only link targets need looking at."""
    skipped: list[str] = []

    def safe(member: tarfile.TarInfo, _: str) -> tarfile.TarInfo | None:
        ok = (
            _inside(member.name)
            and (member.isfile() or member.isdir() or member.issym())
            and not is_leftover(member.name)
        )
        if ok and member.issym():
            target = os.path.normpath(os.path.join(os.path.dirname(member.name), member.linkname))
            ok = not member.linkname.startswith("/") and _inside(target) and target != ".."
            links.append(member.name)
        if not ok:
            skipped.append(member.name)
            return None
        return member.replace(mode=member.mode & 0o755, uid=0, gid=0, uname="", gname="", deep=False)

    links: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter=safe)
    # a chain of links can leave the tree where each one alone does not (``s -> .``, ``t -> s/../x``): resolve them
    root = os.path.realpath(dest)
    for name in links:
        path = dest / name
        if os.path.lexists(path) and not (os.path.realpath(path) + "/").startswith(root + "/"):
            path.unlink()
            skipped.append(name)
    return skipped


# --- task repositories -------------------------------------------------------------------------------------------


def _task_git_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": TASK_AUTHOR,
        "GIT_AUTHOR_EMAIL": TASK_EMAIL,
        "GIT_AUTHOR_DATE": TASK_DATE,
        "GIT_COMMITTER_NAME": TASK_AUTHOR,
        "GIT_COMMITTER_EMAIL": TASK_EMAIL,
        "GIT_COMMITTER_DATE": TASK_DATE,
    }


def _fast_import_path(rel: str) -> bytes:
    raw = os.fsencode(rel)
    if b"\n" in raw or raw.startswith(b'"') or b"\\" in raw:
        return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'
    return raw


def _fast_import_stream(tree: Path, message: str) -> bytes:
    """One commit of every file under ``tree`` (links as links, the executable bit kept), for ``git fast-import``."""
    out = io.BytesIO()
    entries: list[bytes] = []
    mark = 0
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        if path.is_symlink():
            mode, data = b"120000", os.fsencode(os.readlink(path))
        elif path.is_file():
            mode = b"100755" if path.stat().st_mode & 0o111 else b"100644"
            data = path.read_bytes()
        else:
            continue
        mark += 1
        out.write(b"blob\nmark :%d\ndata %d\n%s\n" % (mark, len(data), data))
        entries.append(b"M %s :%d %s\n" % (mode, mark, _fast_import_path(rel)))
    who = f"{TASK_AUTHOR} <{TASK_EMAIL}> {TASK_EPOCH} +0000".encode()
    text = message.encode() + b"\n"
    out.write(b"commit refs/heads/main\nauthor %s\ncommitter %s\ndata %d\n%s" % (who, who, len(text), text))
    out.write(b"".join(entries) + b"\n")
    return out.getvalue()


def fresh_repository(tree: Path, message: str) -> str:
    """Make ``tree`` a git repository of one commit holding exactly its files; returns the commit id.

    No template (no hooks, no description), no reflog, no remote. The commit is written by ``git fast-import`` as a
    single pack (one file, not a loose object per file: the cost of a large tree), so every object in the repository
    is that commit, its trees or its blobs; the index is then read from it."""
    env = _task_git_env(tree.parent)

    def git(*args: str, stdin: bytes | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=tree, input=stdin, capture_output=True, env=env, timeout=300)
        if done.returncode != 0:
            raise BadRequest(f"git {args[0]} failed making the task repository: {done.stderr.decode().strip()}")
        return done.stdout.decode().strip()

    git("init", "--quiet", "--template=", "--initial-branch=main")
    git("config", "core.logAllRefUpdates", "false")
    git("fast-import", "--quiet", "--date-format=raw", stdin=_fast_import_stream(tree, message))
    git("reset", "--quiet")
    return git("rev-parse", "HEAD")


def materialise_task(archive: bytes, dest: Path, path: str, text: str, message: str) -> str:
    """The task tree at ``dest``: ``archive`` unpacked, ``path`` replaced by ``text``, as a fresh one-commit
    repository (:func:`fresh_repository`); returns its commit."""
    extract(archive, dest)
    (dest / path).write_text(text)
    return fresh_repository(dest, message)


# --- the statement -----------------------------------------------------------------------------------------------


def _what(covered: Covered) -> str:
    owner, _, name = covered.symbol.qualname.rpartition(".")
    return f"method `{name}` of class `{owner}`" if owner else f"function `{name}`"


def _described(covered: Covered) -> list[str]:
    sym = covered.symbol
    lines = ["Signature:", *(f"    @{d}" for d in sym.decorators), f"    {sym.signature}"]
    if sym.docstring:
        lines += ["", "Docstring:", textwrap.indent(sym.docstring, "    ")]
    return lines


def hidden_tests(failing: Sequence[str], seed: int, tid: str) -> list[str]:
    """The failing tests a statement does not name: about half of them (the named half at least one, at most
    :data:`STATEMENT_TESTS`), drawn by the suite's seed and the task's id. Scoring runs them all, so a solver that
    rewrites the outcomes of the tests it was told about still fails the others; with one failing test, none."""
    if len(failing) < 2:
        return []
    rng = random.Random(f"{seed}:{tid}:hidden")
    named = set(rng.sample(list(failing), min(STATEMENT_TESTS, (len(failing) + 1) // 2)))
    return [t for t in failing if t not in named]


def statement(
    path: str, group: Sequence[Covered], deletion: Deletion, failing: Sequence[str], *, hidden: Sequence[str] = ()
) -> str:
    """What the solver is told: where, the signature (and decorators), the docstring, the tests that fail — those of
    ``failing`` not in ``hidden``, and that there are more; for a task that deleted several features of the file
    (``group``, the first the task's own), each of them."""
    if len(group) == 1:
        what = _what(group[0])
        if deletion == "body":
            head = f"The body of the {what} in `{path}` is missing (it raises NotImplementedError). Implement it."
        else:
            head = f"The {what} has been removed from `{path}`. Add it back."
        lines = [head, "", *_described(group[0])]
    else:
        if deletion == "body":
            head = (
                f"The bodies of {len(group)} functions in `{path}` are missing (each raises NotImplementedError). "
                "Implement all of them."
            )
        else:
            head = f"{len(group)} functions have been removed from `{path}`. Add all of them back."
        lines = [head]
        for i, c in enumerate(group, start=1):
            lines += ["", f"{i}. The {_what(c)}", *textwrap.indent("\n".join(_described(c)), "   ").splitlines()]
    hide = set(hidden)
    named = [t for t in failing if t not in hide]
    lines += ["", "These tests fail until it works:", *(f"- {t}" for t in named[:STATEMENT_TESTS])]
    if len(failing) > min(len(named), STATEMENT_TESTS):
        lines.append(f"- … and {len(failing) - min(len(named), STATEMENT_TESTS)} more, not named here")
    return "\n".join(lines) + "\n"


def _rewritten(text: str, rewrite: Rewrite | None, progress: Progress) -> str:
    if rewrite is None:
        return text
    try:
        new = rewrite(text)
    except Exception as exc:  # a model behind the callable: any failure keeps the plain statement
        progress(f"the statement rewrite failed ({type(exc).__name__}: {exc}); kept the plain statement")
        return text
    if not isinstance(new, str) or not new.strip():
        progress("the statement rewrite returned nothing; kept the plain statement")
        return text
    return new


# --- choosing and validating -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """The original, run twice: the tests that passed both times, and those whose outcome changed."""

    stable: frozenset[str]
    flaky: list[str]
    failing: list[str]  # failed, errored or skipped both times
    unnamed: list[str]  # ids whose test file is not where JUnit's names put it (cannot be targeted later)
    duration_s: float


def _tail(result: ExecResult) -> str:
    text = (result.stdout + ("\n" + result.stderr if result.stderr.strip() else "")).strip()
    return text[-TAIL:]


def _check_collected(run: TestRun, repo_name: str) -> None:
    result = run.result
    if result.timed_out:
        raise BadRequest(
            f"the tests of {repo_name} did not finish within {format_duration(result.duration_s)} in the sandbox: "
            f"generate needs a suite that runs in that time. pytest's output ended with:\n{_tail(result)}"
        )
    if result.returncode == 5 or (result.returncode == 0 and not run.outcomes):
        raise BadRequest(
            f"{repo_name} has test files but pytest collected no tests from them. pytest said:\n{_tail(result)}"
        )
    if result.returncode not in (0, 1) or not run.outcomes:
        raise BadRequest(
            f"the tests of {repo_name} cannot run (pytest exited with {result.returncode}; collection errors, a "
            "missing dependency or a bad configuration). Declare test dependencies in a `test` extra, a dependency "
            f"group or requirements-test.txt, and fix the errors below. pytest's output ended with:\n{_tail(result)}"
        )


def baseline(first: TestRun, second: TestRun, tree: Path) -> Baseline:
    ids = sorted(set(first.outcomes) | set(second.outcomes))
    stable, flaky, failing, unnamed = set(), [], [], []
    for n in ids:
        a, b = first.outcomes.get(n, "missing"), second.outcomes.get(n, "missing")
        if a != b:
            flaky.append(n)
        elif a != "passed":
            failing.append(n)
        elif not (tree / n.split("::", 1)[0]).is_file():
            unnamed.append(n)
        else:
            stable.add(n)
    return Baseline(frozenset(stable), flaky, failing, unnamed, second.result.duration_s)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def task_id(index: int, path: str, qualname: str) -> str:
    """``NN-module-symbol`` (a package's ``__init__.py`` named by its package), lowercase, at most 80 characters."""
    parts = (path[:-3] if path.endswith(".py") else path).split("/")
    module = parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]
    return f"{index:02d}-{_slug(module + '-' + qualname)}"[:80].rstrip("-")


def canary_for(commit: str, seed: int, tid: str) -> str:
    """Deterministic (the same suite gets the same canaries, and so the same id), unique per task."""
    return "labbot-canary-" + hashlib.sha256(f"{commit}:{seed}:{tid}".encode()).hexdigest()[:24]


def rank(candidates: list[Covered], seed: int, prefer: Prefer = "any") -> list[Covered]:
    """A seeded shuffle, then the preferred first: a body with something to restore, few covering tests, not run at
    import. ``prefer="deep"`` (harder suites) then puts the largest bodies first: more to restore from the tests and
    the docstring alone."""
    order = list(candidates)
    random.Random(seed).shuffle(order)

    def tier(c: Covered) -> tuple[int, int]:
        vague = c.symbol.size < NON_TRIVIAL_SIZE or len(c.tests) > PREFERRED_MAX_TESTS
        largest_first = -c.symbol.size if prefer == "deep" else 0
        return 2 * c.at_import + vague, largest_first

    return sorted(order, key=tier)


def partners(primary: Covered, ranked: Sequence[Covered], n: int) -> list[Covered]:
    """``n`` more candidates of ``primary``'s file to delete with it, in ranked order: none nested in another of the
    group (a method of a class is not deleted with the class's other members' bodies twice). Fewer when the file
    has fewer."""
    group = [primary]
    for c in ranked:
        if len(group) == n + 1:
            break
        if c.path != primary.path or any(_nested(c, g) for g in group):
            continue
        group.append(c)
    return group[1:]


def _nested(a: Covered, b: Covered) -> bool:
    x, y = a.symbol.qualname, b.symbol.qualname
    return x == y or x.startswith(y + ".") or y.startswith(x + ".")


def _deletion_for(mode: DeletionMode, rng: random.Random) -> Deletion:
    if mode == "mixed":
        return "body" if rng.random() < 0.5 else "function"
    return mode


def _layout(tree: Path) -> list[str]:
    """``["src"]`` for a src layout (packages under src/ and none beside it), else none."""
    src = tree / "src"
    if src.is_dir() and any((p / "__init__.py").is_file() or p.suffix == ".py" for p in src.iterdir()):
        return ["src"]
    return []


def _has_tests(tree: Path) -> bool:
    for path in tree.rglob("*.py"):
        rel = path.relative_to(tree).as_posix()
        if TEST_FILE.search(rel) and is_test_file(rel):
            return True
    return False


@dataclass
class _Attempt:
    task: EvalTask | None
    text: str  # the deleted file
    reason: str  # why not, when task is None


def _contamination(spec: SandboxSpec, made: Sequence[tuple[Path, str, EvalTask]]) -> list[dict[str, Any] | None]:
    """The contamination walk (:mod:`labbot.evals.seal.contamination`) for new tasks, each ``(repository, original
    text of its file, task)``, in one sandbox (they differ only in their tree): per task, ``None`` when its deleted
    code is readable nowhere its sample's sandbox shows, else what ``suite.json``'s ``contaminated`` says of it."""
    needles = []
    for repo, original, task in made:
        sources = contamination.definitions(original, task.symbols, task.path)
        needles.append((repo, contamination.task_needles(sources, repo)))
    scans = contamination.scan_tasks(spec, needles, budget_s=CONTAMINATION_BUDGET_S)
    out: list[dict[str, Any] | None] = []
    for (_, _, task), found in zip(made, scans, strict=True):
        if found.error:
            raise BadRequest(f"the contamination walk failed in the sandbox of task {task.id}: {found.error}")
        if found.clean:
            out.append(None)
            continue
        # a walk cut short by its budget has not shown the rest is clean: the task is left out, unverified
        unread = [f"{p} (not read: the walk's {CONTAMINATION_BUDGET_S:g} s budget ran out)" for p in found.not_reached]
        out.append(
            {
                "task": task.id,
                "symbols": task.symbols,
                "paths": [m.path for m in found.matches] + [p.split(" (", 1)[0] for p in unread],
                "kinds": [", ".join(m.kinds) for m in found.matches] + ["not verified"] * len(unread),
            }
        )
    return out


def _validate(
    group: Sequence[Covered],
    deletion: Deletion,
    *,
    source: Source,
    original: str,
    base: Baseline,
    spec: SandboxSpec,
    test_roots: list[str],
    full: bool,
    tid: str,
    seed: int,
    timeout_s: float,
) -> _Attempt:
    covered = group[0]
    path, sym = covered.path, covered.symbol
    text = original
    try:
        for c in group:
            text = delete(text, c.symbol.qualname, deletion, path)
    except BadRequest as exc:
        return _Attempt(None, "", exc.message)
    whole = full or deletion == "function" or any(c.at_import for c in group)
    if whole:
        ids = sorted(base.stable)
    else:
        files = {t.split("::", 1)[0] for c in group for t in c.tests}
        ids = sorted(t for t in base.stable if t.split("::", 1)[0] in files)
    with tempfile.TemporaryDirectory(prefix="labbot-task-run-") as scratch:
        work = Path(scratch) / "work"
        extract(source.archive, work)
        (work / path).write_text(text)
        # the whole suite is run without naming its files: pytest collects hundreds of file arguments one by one
        # (a 1,000-file repository: 8.4 s with its 500 test files named, 1.3 s without)
        run = run_tests(replace(spec, workspace=work), () if whole else ids, timeout_s=timeout_s, test_roots=test_roots)
    if run.result.timed_out:
        return _Attempt(None, text, f"its tests did not finish within {format_duration(timeout_s)} with it deleted")
    failing = run.failing(ids)
    if not failing:
        return _Attempt(None, text, "no test fails with it deleted")
    fail_set = set(failing)
    passing = sorted(t for t in base.stable if t not in fail_set)
    never_ran_it = fail_set - {t for c in group for t in c.tests}
    if deletion == "body" and not passing and never_ran_it and len(base.stable) > 1:
        # a body deleted and every test fails, also those that never run it: the package no longer imports, and its
        # tests would tell a restored feature from nothing more than a package that imports again (a function deleted
        # whole fails every test importing its name by design: --deletion function asks for exactly that)
        return _Attempt(
            None,
            text,
            f"deleted, it breaks the whole suite: all {len(failing)} tests fail, {len(never_ran_it)} of them never "
            "run it",
        )
    task = EvalTask(
        id=tid,
        path=path,
        symbol=sym.qualname,
        deletion=deletion,
        statement="",
        fail_to_pass=failing,
        pass_to_pass=passing,
        canary=canary_for(source.commit, seed, tid),
        also=[c.symbol.qualname for c in group[1:]],
    )
    return _Attempt(task, text, "")


def generate_suite(
    repo: Path,
    out: Path,
    *,
    count: int,
    seed: int,
    rewrite: Rewrite | None = None,
    progress: Progress | None = None,
    deletion: DeletionMode = "body",
    deletions: int = 1,
    prefer: Prefer = "any",
    cache: Path | None = None,
    extra_requirements: Sequence[str] = (),
    full_run_max_s: float = 20.0,
    timeout_s: float = 600.0,
) -> Suite:
    """Cut ``count`` validated delete-and-restore tasks from the git repository ``repo`` into the new suite folder
    ``out`` (see the module docstring); returns the suite saved there.

    ``rewrite`` (optional, e.g. a model) turns a task's plain statement into an issue a person would file;
    ``progress`` hears each step; ``deletion``: bodies replaced (Commit0-style), whole functions removed, or a
    seeded mix; ``deletions``: how many features of one file each task deletes (harder with more); ``prefer``:
    ``deep`` picks the largest bodies first; ``cache`` keeps wheels and venvs between suites (default
    :func:`default_cache`); ``extra_requirements`` are installed beside what the repository declares (a test
    dependency it does not)."""
    say = progress or _quiet
    if count < 1:
        raise BadRequest(f"--count must be at least 1 (got {count})")
    if deletion not in ("body", "function", "mixed"):
        raise BadRequest(f"unknown deletion {deletion!r}: body, function or mixed")
    if not 1 <= deletions <= MAX_DELETIONS:
        raise BadRequest(f"--deletions must be between 1 and {MAX_DELETIONS} features a task (got {deletions})")
    if prefer not in ("any", "deep"):
        raise BadRequest(f"unknown --prefer {prefer!r}: any or deep (the largest bodies first)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadRequest(f"{out} already exists and is not an empty folder: give a new folder for the suite")
    cache = cache or default_cache()
    source = read_repository(repo, say)
    name = source.root.name
    resolved = out.resolve()
    if (resolved == source.root.resolve() or source.root.resolve() in resolved.parents) and not _ignored(
        source.root, resolved
    ):
        raise BadRequest(
            f"{out} is inside the repository {source.root} and git does not ignore it: write the suite outside it, or "
            "in a folder its .gitignore names (the checkout is left as it is; labbot writes suites to [eval] "
            "suites_root, by default LABBOT_HOME/eval-suites)"
        )
    say(f"cut from {name} at {source.commit[:12]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        shape = _Shape(deletion, deletions, prefer)
        suite = _generate(
            source, staging, count, seed, rewrite, say, shape, cache, extra_requirements, full_run_max_s, timeout_s
        )
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    say(f"suite {suite.id}: {len(suite.tasks)} tasks in {out}")
    return suite


@dataclass(frozen=True)
class _Shape:
    """What each task deletes: bodies or functions (or a mix), how many features of one file, which first."""

    mode: DeletionMode
    deletions: int
    prefer: Prefer


def _generate(
    source: Source,
    staging: Path,
    count: int,
    seed: int,
    rewrite: Rewrite | None,
    say: Progress,
    shape: _Shape,
    cache: Path,
    extra_requirements: Sequence[str],
    full_run_max_s: float,
    timeout_s: float,
) -> Suite:
    """Cut the suite into ``staging``: the tree and its venv, the original's tests run twice, the tasks, the
    originals with their canaries, the suite's file."""
    with tempfile.TemporaryDirectory(prefix="labbot-generate-") as tmp:
        tree = Path(tmp) / "archive"
        spec, test_roots = _sandbox_for(source, tree, staging, cache, extra_requirements, timeout_s, say)
        base, cov = _original_runs(source, spec, test_roots, Path(tmp) / "original-run", timeout_s, say)
        tasks = _Tasks(source, staging, spec, test_roots, base, rewrite, say, timeout_s)
        tasks.make(_candidates(source, tree, base, cov), count, seed, shape, full=base.duration_s <= full_run_max_s)
        _plant_canaries(source, staging, tasks.made)
        draft = Suite(
            id="",
            source=source.root.name,
            commit=source.commit,
            seed=seed,
            tasks=tasks.made,
            flaky=sorted(base.flaky),
            python=platform.python_version(),
            test_roots=test_roots,
            toolchain=list(spec.toolchain),
            contaminated=tasks.contaminated,
        )
        suite = replace(draft, id=suite_id(draft.to_json()))
        save(suite, staging)
        return suite


def _sandbox_for(
    source: Source,
    tree: Path,
    staging: Path,
    cache: Path,
    extra_requirements: Sequence[str],
    timeout_s: float,
    say: Progress,
) -> tuple[SandboxSpec, list[str]]:
    """The source's tree extracted at ``tree``, its wheels in the suite and its venv built: the sandbox every run
    of generation uses, and the test roots."""
    skipped = extract(source.archive, tree)
    leftovers = [name for name in skipped if is_leftover(name)]
    others = [name for name in skipped if not is_leftover(name)]
    if leftovers:
        say(
            f"left out of the tree: {counted(len(leftovers), 'committed leftover')} (bytecode, build output, "
            f"egg-info, coverage data: {', '.join(leftovers[:5])}{', …' if len(leftovers) > 5 else ''})"
        )
    if others:
        say(
            f"left out of the tree: {counted(len(others), 'link')} leaving it, or special files "
            f"({', '.join(others[:5])}{', …' if len(others) > 5 else ''})"
        )
    if not _has_tests(tree):
        raise BadRequest(
            f"{source.root.name} has no tests at {source.commit[:12]}: generate needs a pytest suite (committed "
            "test_*.py or *_test.py files) to tell a restored feature from a broken one"
        )
    test_roots = _layout(tree)
    reqs = venvs.with_tools([*venvs.requirements(tree, say), *extra_requirements])
    venvs.collect_wheels(reqs, wheels_dir(staging), cache=cache / "wheels", progress=say)
    venv = venvs.ensure_venv(wheels_dir(staging), cache / "venvs", progress=say)
    toolchain = venvs.toolchain_needed(tree)
    if toolchain:
        say(f"its code imports setuptools or pkg_resources: the venv's {', '.join(toolchain)} stay visible")
    spec = SandboxSpec(workspace=tree, venv=venv, limits=Limits(timeout_s=timeout_s), toolchain=tuple(toolchain))
    return spec, test_roots


def _original_runs(
    source: Source, spec: SandboxSpec, test_roots: list[str], work: Path, timeout_s: float, say: Progress
) -> tuple[Baseline, CoverageRun]:
    """The original's tests, twice, in one scratch workspace (under coverage, then plain): what passes both times
    is what a deletion can be told by."""
    name = source.root.name
    extract(source.archive, work)
    say("running the original's tests under coverage (1 of 2)")
    cov = run_with_coverage(replace(spec, workspace=work), test_roots=test_roots, timeout_s=timeout_s)
    _check_collected(cov.run, name)
    say("running the original's tests again (2 of 2)")
    second = run_tests(replace(spec, workspace=work), test_roots=test_roots, timeout_s=timeout_s)
    _check_collected(second, name)
    base = baseline(cov.run, second, spec.workspace)
    if base.flaky:
        say(
            f"flaky: {counted(len(base.flaky), 'test')} changed outcome on a rerun, dropped from both lists: "
            + ", ".join(base.flaky[:10])
        )
    if base.failing:
        named = ", ".join(base.failing[:10]) + (", …" if len(base.failing) > 10 else "")
        verb = "fails or is skipped" if len(base.failing) == 1 else "fail or are skipped"
        say(f"{counted(len(base.failing), 'test')} {verb} on the original, left out of both lists: {named}")
    if base.unnamed:
        say(f"{len(base.unnamed)} tests whose JUnit names do not give their file: left out of both lists")
    if not base.stable:
        raise BadRequest(
            f"none of the tests of {name} pass (reliably) on the original commit, so no deletion can be told "
            f"from the original: fix them first. pytest's output ended with:\n{_tail(second.result)}"
        )
    say(f"{len(base.stable)} tests pass on the original, twice ({format_duration(base.duration_s)} a run)")
    return base, cov


def _candidates(source: Source, tree: Path, base: Baseline, cov: CoverageRun) -> list[Covered]:
    """The functions and methods a deletion may take: executed by tests that pass on the original, deletable."""
    covered = [replace(c, tests=c.tests & base.stable) for c in map_functions(tree, cov)]
    candidates = [c for c in covered if c.tests and c.symbol.deletable and not c.symbol.abstract]
    if not candidates:
        raise BadRequest(
            f"no function or method of {source.root.name} is executed by its passing tests (outside test files): "
            "there is no feature to delete whose loss a test would notice"
        )
    return candidates


@dataclass(frozen=True)
class _Valid:
    """A deletion that passed validation, its repository not yet checked for contamination."""

    covered: Covered
    group: list[Covered]
    deletion: Deletion
    original: str  # the file's original text
    attempt: _Attempt


class _Tasks:
    """The tasks, made from candidates in rank order until ``count`` are: each deletion validated against the
    original's tests; then, for a round of validated ones (as many as tasks are still wanted), their repositories
    materialised and checked for contamination in one walk, and the clean ones given their statements. A task's id
    numbers it among the clean ones, as if each had been checked alone: one left out frees its number."""

    def __init__(
        self,
        source: Source,
        staging: Path,
        spec: SandboxSpec,
        test_roots: list[str],
        base: Baseline,
        rewrite: Rewrite | None,
        say: Progress,
        timeout_s: float,
    ) -> None:
        self.source, self.staging, self.spec, self.test_roots = source, staging, spec, test_roots
        self.base, self.rewrite, self.say, self.timeout_s = base, rewrite, say, timeout_s
        self.made: list[EvalTask] = []
        self.rejected: list[str] = []
        self.contaminated: list[dict[str, Any]] = []
        self._texts: dict[str, str] = {}  # a file's original text, read once

    def make(self, candidates: list[Covered], count: int, seed: int, shape: _Shape, *, full: bool) -> None:
        self.say(
            f"{len(candidates)} candidate functions; each deleted version runs "
            + ("the whole suite" if full else "the test files that cover it (whole suite for removals)")
        )
        rng = random.Random(seed)
        ranked = rank(candidates, seed, shape.prefer)
        queue = iter(ranked)
        while len(self.made) < count:
            valid: list[_Valid] = []
            for covered_fn in queue:
                group = [covered_fn, *partners(covered_fn, ranked, shape.deletions - 1)]
                found = self._validated(covered_fn, group, _deletion_for(shape.mode, rng), shape, seed, full=full)
                if found is not None:
                    valid.append(found)
                if len(self.made) + len(valid) == count:
                    break
            if not valid:
                break
            self._keep_clean(valid, seed, count)
        name = self.source.root.name
        if not self.made:
            reasons = "; ".join(self.rejected[:10])
            raise BadRequest(f"none of the {len(self.rejected)} candidates of {name} made a valid task: {reasons}")
        if len(self.made) < count:
            self.say(
                f"made {len(self.made)} of the {count} tasks asked: the candidates ran out "
                f"({len(self.rejected)} rejected)"
            )

    def _reject(self, where: str, reason: str) -> None:
        self.rejected.append(f"{where}: {reason}")
        self.say(f"skipped {where} ({reason})")

    def _validated(
        self, covered_fn: Covered, group: list[Covered], deletion: Deletion, shape: _Shape, seed: int, *, full: bool
    ) -> _Valid | None:
        where = f"{covered_fn.path}::{covered_fn.symbol.qualname}"
        if len(group) < shape.deletions:
            self._reject(where, f"its file has {len(group)} of the {shape.deletions} features a task deletes")
            return None
        # numbered for now as the next task: _keep_clean gives the number it has among the clean ones
        tid = task_id(len(self.made) + 1, covered_fn.path, covered_fn.symbol.qualname)
        original = self._texts.get(covered_fn.path) or (self.spec.workspace / covered_fn.path).read_text()
        self._texts[covered_fn.path] = original
        attempt = _validate(
            group,
            deletion,
            source=self.source,
            original=original,
            base=self.base,
            spec=self.spec,
            test_roots=self.test_roots,
            full=full,
            tid=tid,
            seed=seed,
            timeout_s=self.timeout_s,
        )
        if attempt.task is None:
            self._reject(where, attempt.reason)
            return None
        return _Valid(covered_fn, group, deletion, original, attempt)

    def _materialised(self, valid: _Valid, index: int, seed: int) -> EvalTask:
        """The validated task as task number ``index``, its repository materialised under that id."""
        assert valid.attempt.task is not None
        fn = valid.covered
        tid = task_id(index, fn.path, fn.symbol.qualname)
        task = replace(valid.attempt.task, id=tid, canary=canary_for(self.source.commit, seed, tid))
        materialise_task(self.source.archive, task_repo(self.staging, tid), fn.path, valid.attempt.text, f"task {tid}")
        return task

    def _keep_clean(self, valid: list[_Valid], seed: int, count: int) -> None:
        """One contamination walk for the round's ``valid`` tasks; then, in order, the clean ones kept, each numbered
        among the clean ones (a task after one left out is materialised again under its number)."""
        drafts = [self._materialised(v, len(self.made) + 1 + i, seed) for i, v in enumerate(valid)]
        found = _contamination(
            self.spec, [(task_repo(self.staging, t.id), v.original, t) for v, t in zip(valid, drafts, strict=True)]
        )
        for v, draft, contaminated in zip(valid, drafts, found, strict=True):
            where = f"{v.covered.path}::{v.covered.symbol.qualname}"
            tid = task_id(len(self.made) + 1, v.covered.path, v.covered.symbol.qualname)
            if contaminated or tid != draft.id:
                shutil.rmtree(task_repo(self.staging, draft.id).parent)
            if contaminated:
                self.contaminated.append({**contaminated, "task": tid})
                self.say(
                    f"skipped {where} (contaminated: its deleted code is readable in the sandbox at "
                    f"{contaminated['paths']})"
                )
                continue
            task = draft if tid == draft.id else self._materialised(v, len(self.made) + 1, seed)
            hidden = hidden_tests(task.fail_to_pass, seed, task.id)
            text = statement(v.covered.path, v.group, v.deletion, task.fail_to_pass, hidden=hidden)
            self.made.append(replace(task, statement=_rewritten(text, self.rewrite, self.say), hidden=hidden))
            self.say(
                f"task {len(self.made)}/{count}: {task.id} ({len(task.fail_to_pass)} fail to pass, "
                f"{len(task.pass_to_pass)} pass to pass)"
            )


def _plant_canaries(source: Source, staging: Path, tasks: list[EvalTask]) -> None:
    """The originals, each task's canary in its deleted body (never bound into a sandbox)."""
    original_tree = original_dir(staging)
    extract(source.archive, original_tree)
    for task in tasks:
        file = original_tree / task.path
        text = file.read_text()
        for symbol in task.symbols:
            text = plant_canary(text, symbol, task.canary, task.path)
        file.write_text(text)
