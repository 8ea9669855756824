"""Two figures about the repository itself, each for two revisions in one run: lines of product code, and the wall
time of a test command.

    python benchmarks/repo_health.py lines BEFORE [AFTER]           # default AFTER: the working tree
    python benchmarks/repo_health.py suite BEFORE [AFTER] -- CMD    # e.g. -- make test   (one run of each)
    python benchmarks/repo_health.py suite REV only -- CMD          # one revision alone

Product code is every ``*.py`` file outside ``tests/``, ``benchmarks/``, ``docs/`` and ``scripts/`` (dev tools),
counted without blank lines, comment lines and docstring lines, so a longer docstring is not "more code".
``suite`` checks each revision out into a temporary worktree beside this checkout (so the sibling folders a clone
sees are the same) and runs the command there with this checkout's ``.venv`` on PATH; it prints both wall times and
their ratio. Absolute times on a shared 2-core machine are noise; the ratio of two runs made one after the other is
the figure.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXCLUDED = ("tests/", "benchmarks/", "docs/", "scripts/", "labbot/")  # labbot/ holds symlinks to the real folders


def _files_at(rev: str | None) -> dict[str, str]:
    """Path -> source of every product ``*.py`` at ``rev`` (None: the working tree, tracked files only)."""
    if rev is None:
        names = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
        paths = [p for p in names.stdout.split() if not p.startswith(EXCLUDED)]
        return {p: (ROOT / p).read_text() for p in paths if (ROOT / p).is_file() and not (ROOT / p).is_symlink()}
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev], cwd=ROOT, capture_output=True, text=True, check=True
    )
    out = {}
    for p in names.stdout.split():
        if p.endswith(".py") and not p.startswith(EXCLUDED):
            show = subprocess.run(["git", "show", f"{rev}:{p}"], cwd=ROOT, capture_output=True, text=True)
            if show.returncode == 0:  # symlinks show as their target path, which is not Python
                out[p] = show.stdout
    return out


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not a comment, not part of a docstring."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                doc_lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.ENDMARKER:
            continue
        code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc_lines)


def lines(before: str, after: str | None) -> dict[str, object]:
    counts = {}
    for label, rev in (("before", before), ("after", after)):
        files = _files_at(rev)
        counts[label] = {"files": len(files), "code_lines": sum(code_lines(s) for s in files.values())}
    ratio = counts["after"]["code_lines"] / counts["before"]["code_lines"]
    print(f"product code: {counts['before']['code_lines']} lines in {counts['before']['files']} files at {before}")
    print(
        f" {counts['after']['code_lines']} lines in {counts['after']['files']} files at {after or 'the working tree'}"
    )
    print(f"after/before: {ratio:.3f}")
    return {
        "benchmark": "product_code_lines",
        "before_rev": before,
        "after_rev": after or "worktree",
        **counts,
        "ratio": round(ratio, 3),
    }


def _timed(cmd: list[str], cwd: Path) -> tuple[float, int, str]:
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    # the revision's own folders first, for this process and every subprocess it starts (an editable install of
    # this checkout would otherwise answer for them)
    env["PYTHONPATH"] = str(cwd)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
    return elapsed, proc.returncode, tail


def suite(before: str, after: str | None, cmd: list[str]) -> dict[str, object]:
    results: dict[str, dict[str, object]] = {}
    pairs = (("before", before), ("after", after)) if after != "only" else (("before", before),)
    for label, rev in pairs:
        if rev is None:
            cwd = ROOT
            elapsed, rc, tail = _timed(cmd, cwd)
        else:
            tmp = Path(tempfile.mkdtemp(prefix=".health-", dir=ROOT.parent))
            try:
                subprocess.run(
                    ["git", "worktree", "add", "--detach", str(tmp), rev], cwd=ROOT, check=True, capture_output=True
                )
                # the worktree shares this checkout's virtual environment rather than building its own
                (tmp / ".venv").symlink_to(ROOT / ".venv")
                stamp = ROOT / ".venv" / ".installed-stamp"
                if stamp.exists():
                    stamp.touch()
                elapsed, rc, tail = _timed(cmd, tmp)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tmp)], cwd=ROOT, capture_output=True)
                shutil.rmtree(tmp, ignore_errors=True)
        print(f"{label} ({rev or 'working tree'}): {elapsed:.0f} s, exit {rc}\n {tail.replace(chr(10), chr(10) + ' ')}")
        results[label] = {"seconds": round(elapsed, 1), "exit": rc, "rev": rev or "worktree"}
    if "after" not in results:
        return {"benchmark": "suite_wall_time", "command": " ".join(cmd), **results}
    ratio = float(results["after"]["seconds"]) / float(results["before"]["seconds"])  # type: ignore[arg-type]
    print(f"after/before: {ratio:.3f}")
    return {"benchmark": "suite_wall_time", "command": " ".join(cmd), **results, "ratio": round(ratio, 3)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["lines", "suite"])
    p.add_argument("before")
    p.add_argument("after", nargs="?")
    argv = sys.argv[1:]
    cmd = argv[argv.index("--") + 1 :] if "--" in argv else []  # the command after --, read before argparse
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.what == "lines":
        result = lines(args.before, args.after)
    else:
        if not cmd:
            p.error("suite needs a command after --, e.g. -- make test")
        result = suite(args.before, args.after, cmd)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
