"""Contamination found by content (issue 24): copies of the deleted code labbot did not plant, without canaries —
one in the venv's vendored tree (hidden by the sandbox now), one under a host folder the sandbox binds (found by the
walk) — and a solver that searches the whole visible filesystem. Every sandbox here is a real bwrap one."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import seal_repo
from contam_support import UnmaskedVenvSandbox
from run_fixtures import build_pytest_venv
from seal_repo import SealRepo

from labbot.common.errors import BadRequest
from labbot.evals.sandbox.bwrap import Sandbox, SandboxSpec, interpreter_prefixes
from labbot.evals.sandbox.venvs import toolchain_needed
from labbot.evals.seal import battery as seal_battery
from labbot.evals.seal import contamination

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
ORIGINAL = seal_repo.STATS_V1 + seal_repo.WEIGHTED  # no canary: a copy someone else vendored
VENDORED = f"lib/{PY}/site-packages/setuptools/_vendor/mathpkg/stats.py"
# the same function renamed and laid out otherwise: none of its lines is the original's, its AST is
REFORMATTED = '''def wmean(xs,weights):
    """Another docstring."""
    weighted_total=sum(value*weight for value,weight in zip(xs,weights))
    total_weight=sum(weights)
    return weighted_total/total_weight
'''
# a solver that looks for the answer everywhere it can read: the deleted lines, and the function by its AST
SOLVER = r"""
import ast, json, os, sys
lines = json.loads(sys.argv[1]); want = sys.argv[2]
def shape(n):
    n.name = "_"; n.body = [s for s in n.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return ast.dump(n)
hits = []
for top in sorted(os.listdir("/")):
    if top in ("proc", "sys", "dev"):
        continue
    for d, dirs, files in os.walk("/" + top):
        for f in files:
            p = os.path.join(d, f)
            try:
                data = open(p, "rb").read()
            except OSError:
                continue
            if any(ln.encode() in data for ln in lines):
                hits.append(p)
            elif p.endswith(".py") and b"total_weight" in data:
                try:
                    tree = ast.parse(data)
                except Exception:
                    continue
                if any(isinstance(n, ast.FunctionDef) and shape(n) == want for n in ast.walk(tree)):
                    hits.append(p)
print(json.dumps(hits))
"""


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[SealRepo, Path, Path]:
    """The seal's suite; a venv whose setuptools vendors the original ``mathpkg``; a host "SDK" folder with a
    reformatted copy of the deleted function."""
    root = tmp_path_factory.mktemp("contam")
    repo = seal_repo.build(root / "fixture", with_leftovers=False)
    venv = seal_repo.make_venv(root / "venv", {})
    (venv / VENDORED).parent.mkdir(parents=True)
    (venv / VENDORED).write_text(ORIGINAL)
    sdk = root / "cloud-sdk" / "third_party" / "mathpkg"
    sdk.mkdir(parents=True)
    (sdk / "stats.py").write_text(REFORMATTED)
    return repo, venv, sdk.parent.parent


def _needles(repo: SealRepo) -> contamination.Needles:
    return contamination.task_needles(contamination.definitions(ORIGINAL, ["weighted_mean"]), repo.task_repo)


def _spec(repo: SealRepo, venv: Path, sdk: Path | None = None) -> SandboxSpec:
    return SandboxSpec(repo.task_repo, venv=venv, ro_binds={"/opt/sdk": sdk} if sdk else {})


def test_needles_are_the_deleted_lines_and_definition_the_task_tree_lacks(fixture: tuple[SealRepo, Path, Path]) -> None:
    found = _needles(fixture[0])
    assert "total_weight = sum(weights)" in found.lines
    assert not any("def weighted_mean" in ln for ln in found.lines)  # the signature is still in the task tree
    assert found.sources[0].startswith("def weighted_mean(xs, weights):")
    with pytest.raises(BadRequest, match="not defined"):
        contamination.definitions(ORIGINAL, ["no_such_function"])


def test_a_host_copy_is_found_by_its_ast_and_the_vendored_one_is_hidden(fixture: tuple[SealRepo, Path, Path]) -> None:
    repo, venv, sdk = fixture
    scan = contamination.scan(_spec(repo, venv, sdk), _needles(repo))
    assert not scan.error and not scan.not_reached, scan
    assert [(m.path, m.kinds) for m in scan.matches] == [("/opt/sdk/third_party/mathpkg/stats.py", ["body"])]


def test_a_walk_cut_by_its_budget_is_not_clean_and_fails_the_probe(fixture: tuple[SealRepo, Path, Path]) -> None:
    repo, venv, _ = fixture
    cut = contamination.scan(_spec(repo, venv), _needles(repo), budget_s=0.0)
    assert cut.not_reached and not cut.matches and not cut.error
    assert not cut.clean and "NOT REACHED" in cut.summary()
    result = contamination.probe(_spec(repo, venv), _needles(repo), budget_s=0.0)
    assert not result.passed and "NOT REACHED" in result.evidence


def test_the_venv_unmasked_shows_the_vendored_copy(fixture: tuple[SealRepo, Path, Path]) -> None:
    """The venv as sandboxes showed it before issue 24 (``benchmarks/contamination.py`` walks the whole old view,
    ``/usr`` included)."""
    repo, venv, _ = fixture
    assert contamination.scan(_spec(repo, venv), _needles(repo)).clean
    wide = contamination.scan(_spec(repo, venv), _needles(repo), sandbox=UnmaskedVenvSandbox)
    paths = {m.path: m.kinds for m in wide.matches}
    assert paths.get(f"/venv/{VENDORED}") == ["body", "lines 3 of 3"], wide.summary()


def _solver_hits(repo: SealRepo, venv: Path, box: type[Sandbox]) -> list[str]:
    import ast

    node = ast.parse(ORIGINAL).body[1]
    assert isinstance(node, ast.FunctionDef)
    node.name = "_"
    node.body = node.body[1:]
    lines = _needles(repo).lines
    with box(_spec(repo, venv)) as sandbox:
        got = sandbox.exec([f"/venv/bin/{PY}", "-I", "-c", SOLVER, json.dumps(lines), ast.dump(node)], timeout_s=300)
    assert got.success, got
    return list(json.loads(got.stdout))


def test_a_solver_searching_the_whole_filesystem_finds_nothing(fixture: tuple[SealRepo, Path, Path]) -> None:
    repo, venv, _ = fixture
    assert _solver_hits(repo, venv, Sandbox) == []
    assert f"/venv/{VENDORED}" in _solver_hits(repo, venv, UnmaskedVenvSandbox)  # the same solver, the venv unmasked


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pytest_venv(tmp_path_factory.mktemp("pipvenv") / "venv")


def test_the_sandbox_shows_no_site_packages_nor_vendored_trees(tmp_path: Path, pip_venv: Path) -> None:
    site = f"/venv/lib/{PY}/site-packages"
    hidden = [
        "/usr/lib/python3/dist-packages",
        f"/usr/local/lib/{PY}",
        "/usr/share/doc",
        "/usr/lib/google-cloud-sdk",
        *(f"{p}/lib/{PY}/site-packages" for p in interpreter_prefixes()),
        f"{site}/pip/_vendor",
        f"{site}/setuptools/_vendor",
    ]
    assert (pip_venv / f"lib/{PY}/site-packages/pip/_vendor").is_dir()  # there on the host
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    script = "; ".join(f'echo "{p}: $(ls -A {p} 2>/dev/null | wc -l)"' for p in hidden)
    with Sandbox(SandboxSpec(tmp_path, venv=pip_venv)) as box:
        shown = box.exec(["sh", "-c", script])
        tools = box.exec(["sh", "-c", "echo hi | tr a-z A-Z && git init -q g && git -C g status --short && ls /bin/sh"])
        tests = box.exec(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_ok.py"])
    assert shown.stdout.split("\n")[:-1] == [f"{p}: 0" for p in hidden], shown
    assert tools.success and tools.stdout.startswith("HI\n"), tools
    assert tests.success and "1 passed" in tests.stdout, tests


def test_a_suite_whose_code_imports_setuptools_sees_its_vendored_tree_and_only_that(
    tmp_path: Path, pip_venv: Path
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "meta.py").write_text("from pkg_resources import parse_version\n")
    assert toolchain_needed(tmp_path) == ["pkg_resources/_vendor", "setuptools/_vendor"]
    (tmp_path / "pkg" / "meta.py").write_text("import json\n")
    assert toolchain_needed(tmp_path) == []
    site = f"/venv/lib/{PY}/site-packages"
    probe = f'ls -A {site}/setuptools/_vendor | wc -l; ls -A {site}/pip/_vendor | wc -l; python -c "import setuptools"'
    with Sandbox(SandboxSpec(tmp_path, venv=pip_venv)) as box:
        masked = box.exec(["sh", "-c", probe])
    shown_spec = SandboxSpec(tmp_path, venv=pip_venv, toolchain=("pkg_resources/_vendor", "setuptools/_vendor"))
    with Sandbox(shown_spec) as box:
        shown = box.exec(["sh", "-c", probe])
    assert masked.stdout.split()[:2] == ["0", "0"] and not masked.success  # setuptools cannot load its vendored code
    assert int(shown.stdout.split()[0]) > 0 and shown.stdout.split()[1] == "0", shown  # pip's stays hidden
    assert shown.success, shown


def test_the_seal_battery_fails_on_a_copy_in_the_venv(fixture: tuple[SealRepo, Path, Path], tmp_path: Path) -> None:
    repo, _, _ = fixture
    clean = seal_battery.battery(repo.suite, repo.task, seal_repo.make_venv(tmp_path / "clean", {}))
    by_name = {p.name: p for p in clean.probes}
    assert by_name[contamination.PROBE_NAME].passed, by_name[contamination.PROBE_NAME]
    assert clean.score == 1.0, [p for p in clean.probes if not p.passed]  # the canary probes still pass
    copy = seal_repo.make_venv(tmp_path / "copy", {"othersdk/stats.py": ORIGINAL})
    leaked = {p.name: p for p in seal_battery.battery(repo.suite, repo.task, copy).probes}[contamination.PROBE_NAME]
    assert not leaked.passed and f"/venv/lib/{PY}/site-packages/othersdk/stats.py" in leaked.evidence, leaked


def test_contamination_needs_the_deleted_source(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="deleted definitions"):
        contamination.task_needles([""], tmp_path)


SECOND_CANARY = "CANARY-second-task-0f3c"
# a deleted function of another task, found nowhere (big enough to be sought by its AST)
OTHER = '''def histogram(values, bins):
    """Counts per bin."""
    counts = [0] * bins
    low, high = min(values), max(values)
    for value in values:
        counts[min(int((value - low) / (high - low) * bins), bins - 1)] += 1
    return {"bins": bins, "counts": counts, "label": "histogram of observed values"}
'''


def _second_task(root: Path, repo: SealRepo, extra: dict[str, str]) -> tuple[Path, contamination.Needles]:
    """Another task's tree (the seal's tree with ``extra`` files, e.g. the first task's function intact, as a task
    deleting another function of the same repository has it) and its needles (``histogram``, deleted from it)."""
    tree = root / "second"
    shutil.copytree(repo.task_repo, tree, symlinks=True)
    for name, text in extra.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    return tree, contamination.task_needles([OTHER], tree, [SECOND_CANARY])


def test_one_walk_for_two_tasks_answers_each_as_its_own_walk_would(
    fixture: tuple[SealRepo, Path, Path], tmp_path: Path
) -> None:
    """The second task's tree holds the first task's deleted function (the same repository, another deletion):
    blamed on the first task only in a walk that mixed the trees; its own canary is reported where its sample
    shows it, ``/workspace``."""
    repo, venv, sdk = fixture
    tree, second = _second_task(
        tmp_path, repo, {"legacy/stats_copy.py": ORIGINAL, "notes.txt": f"kept for the record: {SECOND_CANARY}\n"}
    )
    spec = _spec(repo, venv, sdk)
    first_alone = contamination.scan(spec, _needles(repo))
    second_alone = contamination.scan(replace(spec, workspace=tree), second)
    both = contamination.scan_tasks(spec, [(repo.task_repo, _needles(repo)), (tree, second)])
    assert [(m.path, m.kinds) for m in first_alone.matches] == [("/opt/sdk/third_party/mathpkg/stats.py", ["body"])]
    assert [(m.path, m.kinds) for m in second_alone.matches] == [("/workspace/notes.txt", ["canary"])]
    assert [m.matches for m in both] == [first_alone.matches, second_alone.matches]
    assert all(not s.error and not s.not_reached for s in both), both
    # the same two trees in the other order: each task's answer is still its own
    swapped = contamination.scan_tasks(spec, [(tree, second), (repo.task_repo, _needles(repo))])
    assert [m.matches for m in swapped] == [second_alone.matches, first_alone.matches]


def test_a_file_with_two_names_is_read_once_yet_sought_under_each(
    fixture: tuple[SealRepo, Path, Path], tmp_path: Path
) -> None:
    """The host copy hard-linked into the second task's tree, whose bind the walk reaches first (``/labbot-walk``
    sorts before ``/opt``): read there for the second task only, it must still be read, and body-matched, under its
    shared name for the first. Its second shared name (another bound folder) is not read again."""
    repo, venv, sdk = fixture
    tree, second = _second_task(tmp_path, repo, {})
    copy = sdk / "third_party" / "mathpkg" / "stats.py"
    os.link(copy, tree / "linked_stats.py")
    again = tmp_path / "again"
    again.mkdir()
    os.link(copy, again / "stats.py")
    spec = SandboxSpec(repo.task_repo, venv=venv, ro_binds={"/opt/sdk": sdk, "/opt/sdk2": again})
    first, second_scan = contamination.scan_tasks(spec, [(repo.task_repo, _needles(repo)), (tree, second)])
    assert [(m.path, m.kinds) for m in first.matches] == [("/opt/sdk/third_party/mathpkg/stats.py", ["body"])]
    assert second_scan.matches == []
    alone = contamination.scan(SandboxSpec(repo.task_repo, venv=venv, ro_binds={"/opt/sdk": sdk}), _needles(repo))
    # /opt/sdk2's name was not read again: the batch read what the first task's walk alone reads, plus the tree
    assert first.files == alone.files + sum(1 for p in tree.rglob("*") if p.is_file() and not p.is_symlink())


def test_the_bind_point_of_a_walk_for_several_tasks_is_its_own(fixture: tuple[SealRepo, Path, Path]) -> None:
    repo, venv, _ = fixture
    spec = SandboxSpec(repo.task_repo, venv=venv, ro_binds={f"{contamination.BATCH_ROOT}/1": repo.task_repo})
    with pytest.raises(BadRequest, match="bind elsewhere"):
        contamination.scan_tasks(spec, [(repo.task_repo, _needles(repo))])
    assert contamination.scan_tasks(spec, []) == []


def test_the_walks_cheap_filters_rule_out_no_copy() -> None:
    """The walk finds definitions through statement bodies only and normalises one (a deep copy and a dump) only when
    its :func:`signature` is a deleted one's, and parses a file only when it holds the definition's anchors: it must
    find every definition ``ast.walk`` finds, two definitions with one normalised form must have one signature, and
    every anchor must be in any layout of the definition (here its own and ``ast.unparse``'s: requoted strings, no
    comments, another docstring), or a copy would be missed."""
    import ast as ast_module
    import inspect
    import json as json_module
    import typing

    from labbot.evals.seal import contamination_walk as walk

    sources = [inspect.getsource(m) for m in (ast_module, typing, json_module.decoder, inspect)]
    sources.append(
        'class A:\n    """doc"""\n    def f(self):\n        """only a docstring"""\n'
        "    def g(self, x):\n        try:\n            def inner(*, k):\n                'inner doc'\n"
        "                return x\n        except ValueError:\n            def h(a, /, b):\n                pass\n"
        "        finally:\n            class B:\n                pass\n        return inner\n"
        "def renamed_copy(self):\n    return 1\n"
    )
    by_form: dict[str, set[tuple[str, int, tuple[str, ...]]]] = {}
    n_anchors = 0
    for source in sources:
        tree = ast_module.parse(source)
        found = list(walk.definitions(tree))
        assert {id(n) for n in found} == {id(n) for n in ast_module.walk(tree) if isinstance(n, walk.DEFS)}
        for node in found:
            by_form.setdefault(walk.normalise(node), set()).add(walk.signature(node))
            anchors = walk._anchors(node)
            relaid = ast_module.unparse(walk.normalised(node)).encode()
            first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])  # type: ignore[attr-defined]
            own = "\n".join(source.splitlines()[first - 1 : node.end_lineno]).encode()  # type: ignore[attr-defined]
            assert all(a in relaid and a in own for a in anchors), (anchors, relaid[:300])
            n_anchors += len(anchors)
    assert n_anchors > 3000  # the anchors are real: thousands, strings' words among them
    assert len(by_form) > 300
    assert all(len(signatures) == 1 for signatures in by_form.values())
    assert any(len(s) == 1 for s in by_form.values())  # and the groups are real: the lone-docstring f and the copy
