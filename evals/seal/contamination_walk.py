"""The contamination walk as one script: run inside a sample's sandbox by its own Python, it reads everything the
sandbox shows (``/`` down, except ``/proc``, ``/sys`` and ``/dev``) and reports each file that holds the deleted
code. Inputs are JSON on stdin; one JSON object ``{"matches": [...], ...}`` goes to stdout.

:mod:`labbot.evals.seal.contamination` sends this file's source with ``python -I -B -c``. It imports nothing but the
standard library and keeps to Python 3.8 syntax (a task's venv may be older than labbot's).

Inputs: ``sources`` (the deleted definitions' source: each is normalised here, with this interpreter's ``ast``),
``lines`` (deleted lines the task tree lacks), ``strings`` (string constants of the deleted code the task tree
lacks), ``canaries``, ``no_body`` (folders where a body match is not sought: the workspace, whose own code may
legitimately repeat a helper), ``budget_s`` (the walk's time; what it did not reach is reported).

A file matches when it holds a canary, a definition whose normalised form (:func:`normalise`: docstrings dropped,
name ignored, comments and layout gone) equals a deleted one's, at least ``min(3, len(lines))`` of the lines, or a
string and a line. Zip archives (wheels) are searched member by member.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import sys
import time
import zipfile
from collections.abc import Iterator
from typing import Any

SKIP = ("/proc", "/sys", "/dev")
MAX_FILE = 4 * 1024 * 1024
MAX_MEMBERS = 2000
MIN_BODY_NODES = 30  # a smaller definition (a getter, a one-line return) has twins everywhere
MIN_LINES = 3
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def normalise(node: ast.AST) -> str:
    """A definition's shape: its AST without docstrings, with its own name blanked (a renamed copy still matches)."""
    return ast.dump(normalised(node), annotate_fields=False)


def normalised(node: ast.AST) -> ast.AST:
    """A copy of ``node`` without docstrings (a body of only a docstring becomes ``pass``), its own name blanked."""
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(n, DEFS) and body and _is_docstring(body[0]):
            n.body = body[1:] or [ast.Pass()]
    if isinstance(node, DEFS):
        node.name = "_"
    return node


def _is_docstring(stmt: ast.stmt) -> bool:
    value = getattr(stmt, "value", None)
    return isinstance(stmt, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str)


def _size(node: ast.AST) -> int:
    return sum(1 for _ in ast.walk(node))


def definitions(tree: ast.AST) -> Iterator[ast.AST]:
    """Every definition in ``tree``, at any depth, found through statement bodies only: a definition is a statement,
    so the expressions (most of a file's nodes) are never visited."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, DEFS):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                stack.extend(c for c in children if isinstance(c, ast.AST))


def signature(node: ast.AST) -> tuple[str, int, tuple[str, ...]]:
    """What :func:`normalised` keeps of ``node`` that costs nothing to read: its kind, its number of parameters and
    the kinds of its body's statements (docstring dropped). Two definitions whose normalised forms are equal have
    equal signatures, so a file's other definitions are ruled out before the deep copy and dump."""
    body = list(getattr(node, "body", []))
    if body and _is_docstring(body[0]):
        body = body[1:] or [ast.Pass()]
    args = getattr(node, "args", None)
    n_args = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) if args is not None else -1
    return type(node).__name__, n_args, tuple(type(s).__name__ for s in body)


def _anchors(node: ast.AST) -> list[bytes]:
    """The longest identifiers of a definition: a file without all of them cannot hold it."""
    names = set()
    for n in ast.walk(node):
        for attr in ("id", "attr", "arg"):
            value = getattr(n, attr, None)
            if isinstance(value, str) and len(value) >= 3:
                names.add(value)
    return [s.encode() for s in sorted(names, key=lambda s: (-len(s), s))[:3]]


class Walk:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.canaries = [c.encode() for c in cfg.get("canaries", []) if c]
        self.lines = [s.encode() for s in cfg.get("lines", []) if s]
        self.strings = [s.encode() for s in cfg.get("strings", []) if s]
        self.no_body = tuple(p.rstrip("/") + "/" for p in cfg.get("no_body", []))
        self.bodies: dict[str, list[bytes]] = {}
        self.signatures: set[tuple[str, int, tuple[str, ...]]] = set()  # what a candidate must have
        for source in cfg.get("sources", []):
            for node in ast.parse(source).body:
                if isinstance(node, DEFS) and _size(node) >= MIN_BODY_NODES:
                    self.bodies[normalise(node)] = _anchors(node)
                    self.signatures.add(signature(node))
        self.need_lines = min(MIN_LINES, len(self.lines))
        self.deadline = time.monotonic() + float(cfg.get("budget_s", 60.0))
        self.files = 0
        self.unreadable: list[str] = []
        self.matches: list[dict[str, Any]] = []

    def check(self, path: str, data: bytes) -> None:
        kinds = []
        if any(c in data for c in self.canaries):
            kinds.append("canary")
        if path.endswith(".py") and self.bodies and not path.startswith(self.no_body) and self.body(data):
            kinds.append("body")
        lines = sum(1 for s in self.lines if s in data)
        strings = sum(1 for s in self.strings if s in data)
        if self.need_lines and (lines >= self.need_lines or (strings and lines)):
            kinds.append(f"lines {lines} of {len(self.lines)}")
            if strings:
                kinds.append(f"strings {strings} of {len(self.strings)}")
        if kinds:
            self.matches.append({"path": path, "kinds": kinds})

    def body(self, data: bytes) -> bool:
        wanted = [k for k, anchors in self.bodies.items() if all(a in data for a in anchors)]
        if not wanted:
            return False
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
        return any(signature(n) in self.signatures and normalise(n) in wanted for n in definitions(tree))

    def read(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE)
        except OSError:
            self.unreadable.append(path)
            return
        self.files += 1
        self.check(path, data)
        if data[:4] == b"PK\x03\x04":
            self.archive(path)

    def archive(self, path: str) -> None:
        try:
            with zipfile.ZipFile(path) as z:
                for info in z.infolist()[:MAX_MEMBERS]:
                    if not info.is_dir() and info.file_size <= MAX_FILE:
                        self.check(path + "!" + info.filename, z.read(info))
        except (OSError, zipfile.BadZipFile, RuntimeError, ValueError, NotImplementedError):
            return

    def walk(self, tops: list[str]) -> list[str]:
        """Walk ``tops`` in order; returns what the budget left unread (folders not reached, or only in part)."""
        for i, top in enumerate(tops):
            for dirpath, dirs, files in os.walk(top, onerror=lambda e: self.unreadable.append(str(e.filename))):
                dirs[:] = sorted(d for d in dirs if os.path.join(dirpath, d) not in SKIP)
                for name in sorted(files):
                    if time.monotonic() > self.deadline:
                        return [dirpath + " (in part)", *tops[i + 1 :]]
                    path = os.path.join(dirpath, name)
                    if os.path.isfile(path) and not os.path.islink(path):
                        self.read(path)
        return []


def run(cfg: dict[str, Any]) -> dict[str, Any]:
    walk = Walk(cfg)
    tops = sorted(os.path.join("/", d) for d in os.listdir("/") if os.path.join("/", d) not in SKIP)
    left = walk.walk(tops)
    return {
        "matches": walk.matches,
        "files": walk.files,
        "bodies": len(walk.bodies),
        "unreadable": walk.unreadable[:50],
        "not_reached": left,
    }


def main() -> None:
    json.dump(run(json.loads(sys.stdin.read() or "{}")), sys.stdout)


if __name__ == "__main__":
    main()
