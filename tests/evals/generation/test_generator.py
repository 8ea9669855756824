"""The task generator on repositories the tests write: test lists, validation, the checkout left alone, clean task
histories, canaries in the originals, and each refusal's message (no suite left behind). Its longest tests are modules
of their own, so ``make test`` runs them on other workers meanwhile: test_generator_seed.py (the same seed, the same
suite), test_generator_harder.py (two features a task), test_generator_layouts.py (whole functions, ``src/``, flaky
tests)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from gen_support import (
    ALL_TESTS,
    BROKEN_TEST,
    COVERING,
    GEOMETRY,
    TEXT,
    UNRELATED_TEST,
    check_history_is_clean,
    check_tasks_validate,
    git,
    make_repo,
    package,
    snapshot,
)

from labbot.common.errors import BadRequest
from labbot.evals.generation.delete import delete_body, symbols
from labbot.evals.generation.generator import STATEMENT_TESTS, generate_suite, hidden_tests
from labbot.evals.sandbox import venvs
from labbot.evals.suite import is_test_file, load, original_dir, suite_id, task_repo, wheels_dir

pytestmark = pytest.mark.subprocess


def body_lines(source: str) -> dict[str, list[str]]:
    """Each symbol's body statements, as stripped source lines (what must not survive in a task)."""
    import textwrap

    text = textwrap.dedent(source)
    lines = text.splitlines()
    return {s.qualname: [lines[n - 1].strip() for n in sorted(s.body_lines)] for s in symbols(text)}


@pytest.fixture(scope="module")
def generated(cache: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("generated")
    repo = make_repo(root / "shapes-repo", package())
    before = snapshot(repo)
    said: list[str] = []
    suite = generate_suite(repo, root / "suite", count=10, seed=7, cache=cache, progress=said.append)
    venv = venvs.ensure_venv(wheels_dir(root / "suite"), cache / "venvs")
    return repo, root / "suite", suite, before, venv, said


def test_every_covered_function_becomes_a_task_with_its_tests(generated):
    _, folder, suite, _, _, said = generated
    assert {t.symbol for t in suite.tasks} == set(COVERING)  # `unused` is executed by no test
    for task in suite.tasks:
        assert task.deletion == "body"
        assert set(task.fail_to_pass) == COVERING[task.symbol], task.id
        assert set(task.pass_to_pass) == ALL_TESTS - COVERING[task.symbol], task.id
        assert task.path == "shapes/text.py" if task.symbol == "slugify" else task.path == "shapes/geometry.py"
    assert suite.flaky == [] and suite.test_roots == [] and suite.source == "shapes-repo"
    assert any("made 6 of the 10 tasks asked" in line for line in said), said
    assert load(folder) == suite
    assert suite.id == suite_id(json.loads((folder / "suite.json").read_text()))


def test_every_task_fails_deleted_and_passes_restored(generated):
    _, folder, suite, _, venv, _ = generated
    check_tasks_validate(folder, suite, venv)


def test_the_checkout_is_left_byte_identical(generated):
    repo, _, _, before, _, _ = generated
    assert snapshot(repo) == before
    assert git(repo, "status", "--porcelain", "--ignored").strip() == ""


def test_task_histories_hold_no_canary_and_no_deleted_body(generated):
    _, folder, suite, _, _, _ = generated
    check_history_is_clean(folder, suite, {**body_lines(GEOMETRY), **body_lines(TEXT)})
    for task in suite.tasks:
        repo = task_repo(folder, task.id)
        assert not (repo / ".git" / "hooks").exists() and not (repo / ".git" / "logs").exists()
        assert (
            git(repo, "log", "--format=%an <%ae> %aI").strip() == "labbot <labbot@localhost> 2000-01-01T00:00:00+00:00"
        )


def test_the_original_holds_each_canary_in_its_deleted_body(generated):
    repo, folder, suite, _, _, _ = generated
    for task in suite.tasks:
        planted = (original_dir(folder) / task.path).read_text()
        assert planted.count(task.canary) == 1
        assert task.canary not in delete_body(planted, task.symbol)  # it is inside what a deletion removes
        committed = (repo / task.path).read_text()
        without = "".join(line for line in planted.splitlines(keepends=True) if "labbot-canary-" not in line)
        assert without == committed
    assert len({t.canary for t in suite.tasks}) == len(suite.tasks)


def test_the_wheels_never_carry_the_project(generated):
    _, folder, _, _, _, _ = generated
    names = sorted(p.name.split("-")[0].lower() for p in wheels_dir(folder).glob("*.whl"))
    assert "shapes" not in names and {"pytest", "coverage"} <= set(names), names


def test_the_statement_names_the_symbol_its_signature_docstring_and_failing_tests(generated):
    _, _, suite, _, _, _ = generated
    scale = next(t for t in suite.tasks if t.symbol == "Rect.scale")
    assert "method `scale` of class `Rect` in `shapes/geometry.py`" in scale.statement
    assert "def scale(self, k)" in scale.statement
    assert "k times as large along each side" in scale.statement
    assert "width = self.w * k" not in scale.statement
    for task in suite.tasks:  # the statement names some failing tests, never the hidden ones; scoring runs them all
        assert task.named and set(task.hidden) < set(task.fail_to_pass)
        assert all(f"- {t}\n" in task.statement for t in task.named)
        assert not any(t in task.statement for t in task.hidden)
        assert len(task.hidden) == len(task.fail_to_pass) // 2
        if task.hidden:
            assert f"- … and {len(task.hidden)} more, not named here" in task.statement


def test_hidden_tests_are_about_half_drawn_by_seed_and_task() -> None:
    failing = [f"tests/test_x.py::test_{i}" for i in range(7)]
    hidden = hidden_tests(failing, 0, "a")
    assert len(hidden) == 3 and set(hidden) < set(failing)
    assert hidden == hidden_tests(failing, 0, "a") and hidden == [t for t in failing if t in hidden]  # stable, in order
    assert {tuple(hidden_tests(failing, seed, "a")) for seed in range(20)} != {tuple(hidden)}  # the seed draws them
    assert hidden_tests(failing[:1], 0, "a") == [] and hidden_tests([], 0, "a") == []
    assert len(hidden_tests([f"t::{i}" for i in range(100)], 0, "a")) == 100 - STATEMENT_TESTS


def test_task_trees_differ_from_the_original_only_in_the_deleted_body(generated):
    repo, folder, suite, _, _, _ = generated
    for task in suite.tasks:
        tree = task_repo(folder, task.id)
        files = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file() and ".git" not in p.parts)
        assert files == sorted(git(repo, "ls-files").split())
        for rel in files:
            expected = (repo / rel).read_text()
            if rel == task.path:
                expected = delete_body(expected, task.symbol)
                ast.parse(expected)
            assert (tree / rel).read_text() == expected, (task.id, rel)
        assert not any(is_test_file(rel) and rel == task.path for rel in files)


def _no_suite(out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if ".partial-" in p.name]


def test_not_a_git_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "mod.py").write_text("def f():\n    return 1\n")
    with pytest.raises(BadRequest, match=r"is not a git repository.*git init"):
        generate_suite(plain, tmp_path / "suite", count=1, seed=0)
    _no_suite(tmp_path / "suite")


def test_a_repository_without_commits(tmp_path):
    repo = make_repo(tmp_path / "repo", package(), commit=False)
    with pytest.raises(BadRequest, match="has no commits yet"):
        generate_suite(repo, tmp_path / "suite", count=1, seed=0)
    _no_suite(tmp_path / "suite")


def test_a_repository_without_tests(cache, tmp_path):
    files = {k: v for k, v in package().items() if not k.startswith("tests/")}
    repo = make_repo(tmp_path / "repo", files)
    with pytest.raises(BadRequest, match=r"has no tests at [0-9a-f]{12}: generate needs a pytest suite"):
        generate_suite(repo, tmp_path / "suite", count=1, seed=0, cache=cache)
    _no_suite(tmp_path / "suite")


def test_tests_that_cannot_run_show_pytests_output(cache, tmp_path):
    repo = make_repo(tmp_path / "repo", {**package(), "tests/test_broken.py": BROKEN_TEST})
    with pytest.raises(BadRequest) as caught:
        generate_suite(repo, tmp_path / "suite", count=1, seed=0, cache=cache)
    message = caught.value.message
    assert "the tests of repo cannot run (pytest exited with 2" in message
    assert "ModuleNotFoundError" in message and "shapes_helpers_that_do_not_exist" in message
    _no_suite(tmp_path / "suite")


def test_tests_that_execute_no_function(cache, tmp_path):
    files = {k: v for k, v in package().items() if not k.startswith("tests/")}
    repo = make_repo(tmp_path / "repo", {**files, "tests/test_unrelated.py": UNRELATED_TEST})
    with pytest.raises(BadRequest, match="no function or method of repo is executed by its passing tests"):
        generate_suite(repo, tmp_path / "suite", count=1, seed=0, cache=cache)
    _no_suite(tmp_path / "suite")


def test_no_candidate_survives_validation(cache, tmp_path):
    files = {k: v for k, v in package().items() if not k.startswith("tests/")}
    careless = "from shapes.geometry import perimeter\n\n\ndef test_calls_it():\n    try:\n        perimeter(1, 2)\n" \
        "    except Exception:\n        pass\n"  # fmt: skip
    repo = make_repo(tmp_path / "repo", {**files, "tests/test_careless.py": careless})
    with pytest.raises(
        BadRequest,
        match=r"none of the 1 candidates of repo made a valid task: shapes/geometry.py::perimeter: no test fails with "
        r"it deleted",
    ):
        generate_suite(repo, tmp_path / "suite", count=1, seed=0, cache=cache)
    _no_suite(tmp_path / "suite")


def test_an_existing_suite_folder_is_not_overwritten(tmp_path):
    repo = make_repo(tmp_path / "repo", package())
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "keep.txt").write_text("mine")
    with pytest.raises(BadRequest, match="already exists and is not an empty folder"):
        generate_suite(repo, tmp_path / "suite", count=1, seed=0)
    assert (tmp_path / "suite" / "keep.txt").read_text() == "mine"


def test_a_suite_inside_the_repository_is_refused(tmp_path):
    repo = make_repo(tmp_path / "repo", package())
    before = snapshot(repo)
    with pytest.raises(BadRequest, match=r"is inside the repository .* git does not ignore it: write the suite"):
        generate_suite(repo, repo / "suites" / "one", count=1, seed=0)
    assert snapshot(repo) == before


def test_a_folder_git_ignores_inside_the_repository_is_outside_the_checkout(tmp_path):
    """``make run`` keeps labbot's state in ``./.labbot`` (git-ignored) and serves ``.`` as the codebase: the suites
    labbot writes under ``.labbot/eval-suites`` leave the checkout as it was, so they are not refused."""
    from labbot.evals.generation.generator import _ignored

    repo = make_repo(tmp_path / "repo", package())
    (repo / ".gitignore").write_text(".labbot/\n")
    (repo / ".labbot").mkdir()
    assert _ignored(repo, repo / ".labbot" / "eval-suites" / "suite-1")
    assert not _ignored(repo, repo / "suites" / "one")
    assert not _ignored(repo, repo)


def test_deep_puts_the_largest_bodies_first_within_each_preference_tier(tmp_path):
    import textwrap

    from labbot.evals.generation.coverage_map import Covered
    from labbot.evals.generation.generator import rank

    found = symbols(textwrap.dedent(GEOMETRY))
    candidates = [Covered("shapes/geometry.py", s, frozenset({"t"}), at_import=False) for s in found]
    deep = rank(candidates, seed=3, prefer="deep")
    sizes = [c.symbol.size for c in deep if c.symbol.size >= 10]  # the non-trivial tier comes first
    assert sizes == sorted(sizes, reverse=True) and len(sizes) >= 2
    assert sorted(c.symbol.qualname for c in rank(candidates, seed=3)) == sorted(c.symbol.qualname for c in deep)


@pytest.mark.parametrize(
    ("kwargs", "said"), [({"deletions": 0}, "between 1 and 5"), ({"prefer": "wide"}, "any or deep")]
)
def test_a_harder_suite_asked_wrongly_is_refused(tmp_path, kwargs, said):
    repo = make_repo(tmp_path / "repo", package())
    with pytest.raises(BadRequest, match=said):
        generate_suite(repo, tmp_path / "suite", count=1, seed=0, **kwargs)
    _no_suite(tmp_path / "suite")
