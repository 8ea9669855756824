"""The task generator on a 1,000-file repository: a suite of 10 tasks (wall time), and materialising one task.

The repository is a real project, inflection 0.5.1 from its sdist (pinned by version and sha256, as the generator's
test fetches it: 455 tests), plus generated filler up to ``--files`` files: ``filler/mod_NNNN.py`` modules of three
functions each and, for every module, ``tests/filler/test_mod_NNNN.py`` testing one of them (so coverage has
something to find all over the tree, and the suite has about 500 more tests). One commit.

Measured:

- ``generate_suite(count=10)``, wall time, with the wheel and venv cache warm (the usual case: a first suite of a
  project also fetches its wheels and builds the venv once; ``--cold`` uses an empty cache and includes that);
- materialising one task, the claim's unit: ``git archive HEAD`` of the user's repository -> the feature deleted ->
  a fresh one-commit repository; median over ``--rounds`` with its spread (claim: <= 2 s).

    .venv/bin/python benchmarks/eval_generate.py [--files 1000] [--count 10] [--rounds 10] [--cold]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "evals")]

from gen_support import git  # noqa: E402
from real_repos import INFLECTION, fetch_sdist, unpack_sdist  # noqa: E402

from labbot.evals.generation.delete import delete_body  # noqa: E402
from labbot.evals.generation.generator import default_cache, generate_suite, materialise_task, read_repository  # noqa: E402

CLAIM_S = 2.0

MODULE = '''\
"""Filler module {i}."""


def scaled_{i}(values, factor={k}):
    """Each value times factor, negatives clipped to zero."""
    out = []
    for v in values:
        out.append(max(v, 0) * factor)
    return out


def checksum_{i}(text):
    total = 0
    for position, char in enumerate(text):
        total = (total * 31 + ord(char) * (position + 1)) % 1_000_003
    return total


def untested_{i}(x):
    y = x * {k} + 1
    return y // 2
'''
TEST = """\
from filler.mod_{i:04d} import checksum_{i}, scaled_{i}


def test_scaled_{i}():
    assert scaled_{i}([1, -2, 3]) == [{k}, 0, {k3}]


def test_checksum_{i}():
    assert checksum_{i}("ab") == {checksum}
"""


def checksum(text: str) -> int:
    total = 0
    for position, char in enumerate(text):
        total = (total * 31 + ord(char) * (position + 1)) % 1_000_003
    return total


def make_repo(dest: Path, files: int, cache: Path) -> Path:
    root = unpack_sdist(fetch_sdist(*INFLECTION, cache / "sdists"), dest)
    have = sum(1 for p in root.rglob("*") if p.is_file())
    (root / "filler").mkdir()
    (root / "filler" / "__init__.py").write_text("")
    (root / "tests" / "filler").mkdir(parents=True)
    have += 1
    i = 0
    while have < files:
        k = i % 7 + 2
        (root / "filler" / f"mod_{i:04d}.py").write_text(MODULE.format(i=i, k=k))
        have += 1
        if have < files:
            test = TEST.format(i=i, k=k, k3=3 * k, checksum=checksum("ab"))
            (root / "tests" / "filler" / f"test_mod_{i:04d}.py").write_text(test)
            have += 1
        i += 1
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "inflection and filler")
    return root


def materialise_once(repo: Path, dest: Path) -> float:
    start = time.perf_counter()
    source = read_repository(repo)
    path, symbol = "inflection/__init__.py", "underscore"
    text = delete_body((repo / path).read_text(), symbol, path)  # as generate does: from the archive's bytes
    materialise_task(source.archive, dest, path, text, "task bench")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold", action="store_true", help="an empty wheel and venv cache (includes fetching wheels)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lb-bench-gen-") as tmp:
        base = Path(tmp)
        cache = base / "cache" if a.cold else default_cache()
        repo = make_repo(base / "src", a.files, default_cache())
        n_files = int(git(repo, "ls-files", "-z").count("\0"))
        print(f"repository: {n_files} committed files (inflection 0.5.1 + filler)")

        start = time.perf_counter()
        steps: list[tuple[float, str]] = []
        suite = generate_suite(
            repo,
            base / "suite",
            count=a.count,
            seed=a.seed,
            cache=cache,
            progress=lambda line: steps.append((time.perf_counter() - start, line)),
        )
        wall = time.perf_counter() - start
        for at, line in steps:
            print(f"  {at:7.2f} s  {line}")
        print(f"generate: {len(suite.tasks)} tasks in {wall:.1f} s ({'cold' if a.cold else 'warm'} wheel/venv cache)")

        times = [materialise_once(repo, base / "tasks" / f"t{r}") for r in range(a.rounds)]
        med = statistics.median(times)
        print(
            f"materialise one task (git archive -> delete -> fresh repository), {a.rounds} rounds: median "
            f"{med * 1000:.0f} ms, min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
            f"(claim <= {CLAIM_S:g} s: {'pass' if med <= CLAIM_S else 'FAIL'})"
        )
    ok = med <= CLAIM_S and len(suite.tasks) == a.count
    result = {
        "files": n_files,
        "tasks": len(suite.tasks),
        "generate_s": round(wall, 2),
        "materialise_median_ms": round(med * 1000, 1),
        "materialise_min_ms": round(min(times) * 1000, 1),
        "materialise_max_ms": round(max(times) * 1000, 1),
        "ratio": med / CLAIM_S,
        "claim": "materialise one task <= 2 s",
        "ok": ok,
    }
    print(json.dumps({"benchmark": "eval_generate", **result}))


if __name__ == "__main__":
    main()
