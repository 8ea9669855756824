"""Contamination found by content, the old view of the host against the narrowed one: on the seal's fixture suite
(a copy of its deleted function vendored in the venv's ``setuptools/_vendor``, none in the host) and on a task cut
from a package pip itself vendors (``packaging``: the task deletes ``_parse_letter_version``'s body, and the venv —
made with ``python -m venv``, pip included — holds ``pip/_vendor/packaging``), the contamination walk runs in a
sample sandbox with the old bind set (``/usr`` whole, the interpreter's prefix whole, the venv whole) and with the
narrowed one, and the table gives what it found. Every cell is a real bwrap run.

    .venv/bin/python benchmarks/contamination.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "evals")]

import seal_repo  # noqa: E402
from contam_support import WideSandbox  # noqa: E402

from labbot.evals.generation.delete import delete  # noqa: E402
from labbot.evals.sandbox.bwrap import Sandbox, SandboxSpec  # noqa: E402
from labbot.evals.seal import contamination  # noqa: E402

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
SYMBOL = "_parse_letter_version"


def seal_suite(root: Path) -> tuple[SandboxSpec, contamination.Needles]:
    repo = seal_repo.build(root / "fixture", with_leftovers=False)
    env = seal_repo.make_venv(root / "venv", {})
    vendored = env / f"lib/{PY}/site-packages/setuptools/_vendor/mathpkg/stats.py"
    vendored.parent.mkdir(parents=True)
    original = seal_repo.STATS_V1 + seal_repo.WEIGHTED
    vendored.write_text(original)
    sources = contamination.definitions(original, ["weighted_mean"])
    return SandboxSpec(repo.task_repo, venv=env), contamination.task_needles(sources, repo.task_repo)


def packaging_suite(root: Path) -> tuple[SandboxSpec, contamination.Needles]:
    env = root / "pipvenv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env)
    source = env / f"lib/{PY}/site-packages/pip/_vendor/packaging"
    tree = root / "packaging-task"
    shutil.copytree(source, tree / "packaging", ignore=shutil.ignore_patterns("__pycache__"))
    text = (tree / "packaging" / "version.py").read_text()
    (tree / "packaging" / "version.py").write_text(delete(text, SYMBOL, "body", "packaging/version.py"))
    sources = contamination.definitions(text, [SYMBOL])
    return SandboxSpec(tree, venv=env), contamination.task_needles(sources, tree)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lb-contam-") as tmp:
        root = Path(tmp)
        suites = {"seal fixture (mathpkg)": seal_suite(root), "packaging (vendored by pip)": packaging_suite(root)}
        print(f"{'suite':<30} {'view':<8} {'files':>7} {'matches':>7}  paths (what matched)")
        counts: dict[str, int] = {}
        complete = True
        for name, (spec, found) in suites.items():
            for view, box in (("old", WideSandbox), ("narrowed", Sandbox)):
                scan = contamination.scan(spec, found, sandbox=box)
                shown = "; ".join(str(m) for m in scan.matches) or "-"
                left = f" [not reached: {scan.not_reached}]" if scan.not_reached else ""
                err = f" [walk failed: {scan.error[:200]}]" if scan.error else ""
                print(f"{name:<30} {view:<8} {scan.files:>7} {len(scan.matches):>7}  {shown}{left}{err}")
                counts[f"{name.split()[0]}_{view}"] = len(scan.matches)
                complete = complete and not scan.not_reached and not scan.error
    old = sum(v for k, v in counts.items() if k.endswith("_old"))
    narrowed = sum(v for k, v in counts.items() if k.endswith("_narrowed"))
    ok = complete and narrowed == 0 and old > 0
    verdict = "pass" if ok else "FAIL"
    print(f"matches: {old} with the old view, {narrowed} narrowed (claim: none readable narrowed): {verdict}")
    claim = "no copy of the deleted code readable in the narrowed view"
    print(json.dumps({"benchmark": "contamination", **counts, "claim": claim, "ok": ok}))


if __name__ == "__main__":
    main()
