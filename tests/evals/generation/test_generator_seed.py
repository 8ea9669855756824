"""The task generator is deterministic: the same seed makes the same suite, and a rewrite hook rewrites only the
statements. A module of its own (split from test_generator.py): it generates three suites, the longest single test of
the generator's, so it runs on a test worker beside the others (``make test`` spreads modules, not tests)."""

from __future__ import annotations

import pytest
from gen_support import make_repo, package

from labbot.evals.generation.generator import generate_suite

pytestmark = pytest.mark.subprocess


def test_same_seed_same_suite_and_a_rewritten_statement(cache, tmp_path):
    repo = make_repo(tmp_path / "repo", package())
    first = generate_suite(repo, tmp_path / "a", count=2, seed=11, cache=cache)
    second = generate_suite(repo, tmp_path / "b", count=2, seed=11, cache=cache)
    assert first == second and first.id == second.id
    seen: list[str] = []

    def rewrite(text: str) -> str:
        seen.append(text)
        return "Issue: " + text.splitlines()[0]

    third = generate_suite(repo, tmp_path / "c", count=2, seed=11, cache=cache, rewrite=rewrite)
    assert [t.statement for t in third.tasks] == ["Issue: " + t.statement.splitlines()[0] for t in first.tasks]
    assert seen == [t.statement for t in first.tasks]
