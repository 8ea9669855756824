"""The contamination walk's cost at generation: the walk as it was (one per task, ``/bin`` and ``/lib`` read again
through their links, a definition's file parsed whenever it held its three longest identifiers), one walk per task
now, and one walk for the whole round of tasks (:func:`labbot.evals.seal.contamination.scan_tasks`), with the same
answers from all three.

The tasks: bodies of ``packaging``'s functions deleted (the copy pip vendors, each task a tree of its own), and a host
SDK folder bound in every sandbox with an intact copy of ``packaging``, so each task has real matches to agree on.
Every cell is a real bwrap walk; the walk before is the script at ``BEFORE`` read from git (skipped where the
history is not there). Median over rounds, with the spread.

    .venv/bin/python benchmarks/contamination_cost.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from labbot.evals.generation.delete import delete  # noqa: E402
from labbot.evals.sandbox.bwrap import WORKDIR, Sandbox, SandboxSpec  # noqa: E402
from labbot.evals.seal import contamination  # noqa: E402
from labbot.evals.seal.leak_probes import sandbox_python  # noqa: E402

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
BEFORE = "c6621b8"  # the last commit with the walk of one task per sandbox
DELETED = [  # (file, function): bodies a task deletes
    ("version.py", "_parse_letter_version"),
    ("version.py", "_cmpkey"),
    ("specifiers.py", "_version_split"),
    ("utils.py", "canonicalize_version"),
    ("tags.py", "_generic_abi"),
]


def tasks(root: Path) -> tuple[SandboxSpec, list[tuple[Path, contamination.Needles]]]:
    env = root / "pipvenv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env)
    source = env / f"lib/{PY}/site-packages/pip/_vendor/packaging"
    sdk = root / "sdk"
    shutil.copytree(source, sdk / "packaging", ignore=shutil.ignore_patterns("__pycache__"))
    made = []
    for i, (file, symbol) in enumerate(DELETED):
        tree = root / f"task-{i}"
        shutil.copytree(source, tree / "packaging", ignore=shutil.ignore_patterns("__pycache__"))
        text = (tree / "packaging" / file).read_text()
        (tree / "packaging" / file).write_text(delete(text, symbol, "body", f"packaging/{file}"))
        sources = contamination.definitions(text, [symbol])
        made.append((tree, contamination.task_needles(sources, tree)))
    return SandboxSpec(made[0][0], venv=env, ro_binds={"/opt/sdk": sdk}), made


def before_script() -> str | None:
    got = subprocess.run(
        ["git", "show", f"{BEFORE}:evals/seal/contamination_walk.py"], cwd=ROOT, capture_output=True, text=True
    )
    return got.stdout if got.returncode == 0 else None


def walk_before(script: str, spec: SandboxSpec, tree: Path, found: contamination.Needles) -> list[str]:
    """The walk as it was, for one task in its own sandbox: its input had no ``searches``."""
    config = {**found.search(), "no_body": [WORKDIR], "budget_s": contamination.WALK_BUDGET_S}
    box_spec = SandboxSpec(tree, venv=spec.venv, ro_binds=spec.ro_binds)
    with Sandbox(box_spec) as box:
        result = box.exec([sandbox_python(box_spec), "-I", "-B", "-c", script], input=json.dumps(config), timeout_s=400)
    doc = json.loads(result.stdout)
    return sorted(f"{m['path']} ({', '.join(m['kinds'])})" for m in doc["matches"])


def answers(scans: list[contamination.Scan]) -> list[list[str]]:
    for scan in scans:
        if scan.error or scan.not_reached:
            raise SystemExit(f"a walk did not finish: {scan.summary()}")
    return [sorted(str(m) for m in scan.matches) for scan in scans]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    script = before_script()
    times: dict[str, list[float]] = {"before, a walk per task": [], "now, a walk per task": [], "now, one walk": []}
    with tempfile.TemporaryDirectory(prefix="lb-contam-cost-") as tmp:
        spec, made = tasks(Path(tmp))
        results: dict[str, list[list[str]]] = {}
        for _ in range(args.rounds):
            if script is not None:
                t = time.monotonic()
                results["before"] = [walk_before(script, spec, tree, found) for tree, found in made]
                times["before, a walk per task"].append(time.monotonic() - t)
            t = time.monotonic()
            alone = [(SandboxSpec(tree, venv=spec.venv, ro_binds=spec.ro_binds), n) for tree, n in made]
            results["each"] = answers([contamination.scan(one, n) for one, n in alone])
            times["now, a walk per task"].append(time.monotonic() - t)
            t = time.monotonic()
            results["one"] = answers(contamination.scan_tasks(spec, made))
            times["now, one walk"].append(time.monotonic() - t)
    same = all(r == results["one"] for r in results.values())
    found = sum(len(r) for r in results["one"])
    print(f"{len(made)} tasks cut from packaging, a host copy of it bound at /opt/sdk; {args.rounds} rounds")
    print(f"{'walks':<26} {'median s':>9} {'spread s':>9}")
    medians = {}
    for name, runs in times.items():
        if runs:
            medians[name] = statistics.median(runs)
            print(f"{name:<26} {medians[name]:>9.2f} {max(runs) - min(runs):>9.2f}")
    now_ratio = medians["now, a walk per task"] / medians["now, one walk"]
    print(f"a walk per task / one walk, now: {now_ratio:.2f}x")
    before_ratio = None
    if "before, a walk per task" in medians:
        before_ratio = medians["before, a walk per task"] / medians["now, one walk"]
        print(f"before / one walk now: {before_ratio:.2f}x")
    else:
        print(f"before: skipped (no git history with {BEFORE})")
    print(f"matches: {found} in all, the same from every walk: {'yes' if same else 'NO'}")
    ok = same and found >= len(made) and now_ratio > 1.0
    claim = "one walk for a round of tasks answers as a walk per task, for less"
    print(
        json.dumps(
            {
                "benchmark": "contamination_cost",
                "tasks": len(made),
                "median_s": {k: round(v, 2) for k, v in medians.items()},
                "per_task_over_one_walk": round(now_ratio, 2),
                "before_over_one_walk": round(before_ratio, 2) if before_ratio else None,
                "claim": claim,
                "ok": ok,
            }
        )
    )


if __name__ == "__main__":
    main()
