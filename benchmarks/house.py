"""The house in numbers, two commits side by side: product lines and files per top-level package, and the ten
longest functions (issue 26's "measured": before and after a restructuring).

Product code is the Python under the project's packages (``bot``, ``agents``, ``mcp_servers``, ``evals``,
``training``, ``storage``, ``common``, ``client``); tests, benchmarks and scripts are not product. A line is any
line of the file (blank and comment lines included, as ``wc -l`` counts); a function's length is from its ``def``
(decorators left out) to its last line, nested functions counted on their own too. Each commit is read with ``git
archive`` into a scratch folder, so the working tree is never touched.

    .venv/bin/python benchmarks/house.py [--before REV] [--after REV]

``--before`` defaults to 1230acd (main when issue 26 was filed), ``--after`` to HEAD.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "agents", "mcp_servers", "evals", "training", "storage", "common", "client")


@dataclass(frozen=True)
class Function:
    path: str
    name: str
    line: int
    length: int


@dataclass(frozen=True)
class House:
    rev: str
    files: dict[str, int]  # package -> .py files
    lines: dict[str, int]  # package -> lines
    longest: list[Function]


def _extract(rev: str, into: Path) -> str:
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True)
    archive = subprocess.run(["git", "archive", rev, *PACKAGES], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return sha.stdout.strip()


def functions(path: Path, rel: str) -> list[Function]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        Function(rel, node.name, node.lineno, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def measure(rev: str, top: int = 10) -> House:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sha = _extract(rev, root)
        files: dict[str, int] = {}
        lines: dict[str, int] = {}
        found: list[Function] = []
        for package in PACKAGES:
            paths = sorted((root / package).rglob("*.py"))
            files[package] = len(paths)
            lines[package] = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)
            for p in paths:
                found += functions(p, str(p.relative_to(root)))
    found.sort(key=lambda f: -f.length)
    return House(sha, files, lines, found[:top])


def _ratio(after: int, before: int) -> str:
    return f"×{after / before:.2f}" if before else "—"


def report(before: House, after: House) -> str:
    out = [f"{'package':<12} {'files ' + before.rev:>16} {'files ' + after.rev:>16} {'lines ' + before.rev:>16} "
           f"{'lines ' + after.rev:>16}  lines after/before"]  # fmt: skip
    for package in (*PACKAGES, "total"):
        fb, fa = (sum(h.files.values()) if package == "total" else h.files[package] for h in (before, after))
        lb, la = (sum(h.lines.values()) if package == "total" else h.lines[package] for h in (before, after))
        out.append(f"{package:<12} {fb:>16,} {fa:>16,} {lb:>16,} {la:>16,}  {_ratio(la, lb)}")
    for house in (before, after):
        out.append(f"\nten longest functions at {house.rev}:")
        out += [f"  {f.length:>4} lines  {f.path}:{f.line} {f.name}" for f in house.longest]
    b, a = sum(f.length for f in before.longest), sum(f.length for f in after.longest)
    first_b, first_a = before.longest[0].length, after.longest[0].length
    out.append(f"\nthe ten longest together: {b} -> {a} lines ({_ratio(a, b)}); the longest: {first_b} -> {first_a}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="1230acd", help="the commit before (default: main when issue 26 was filed)")
    parser.add_argument("--after", default="HEAD")
    args = parser.parse_args()
    before, after = measure(args.before), measure(args.after)
    print(report(before, after))
    b, a = sum(f.length for f in before.longest), sum(f.length for f in after.longest)
    claim = {"benchmark": "house", "ratio": round(a / b, 3), "claim": "ten longest functions shorter"}
    print(json.dumps({**claim, "longest_before": before.longest[0].length, "longest_after": after.longest[0].length,
                      "ok": a < b}))  # fmt: skip


if __name__ == "__main__":
    main()
