"""The contamination walk as one script: run inside a sample's sandbox by its own Python, it reads everything the
sandbox shows (``/`` down, except ``/proc``, ``/sys`` and ``/dev``) and reports each file that holds the deleted
code. Inputs are JSON on stdin; one JSON object ``{"matches": [...], ...}`` goes to stdout.

:mod:`labbot.evals.seal.contamination` sends this file's source with ``python -I -B -c``. It imports nothing but the
standard library and keeps to Python 3.8 syntax (a task's venv may be older than labbot's).

Inputs: ``searches``, one per task (the tasks of one suite are walked at once: their sandboxes differ only in their
tree), each with ``sources`` (the deleted definitions' source: each is normalised here, with this interpreter's
``ast``), ``lines`` (deleted lines the task tree lacks), ``strings`` (string constants of the deleted code the task
tree lacks), ``canaries``, ``workspace`` (where its tree is bound: a file there is searched for this task only, never
body-matched — the task's own code may repeat a helper — and reported under ``shows_as``, the path its sample shows);
and ``budget_s`` (the walk's time; what it did not reach is reported). Output: ``matches``, one list per search.

A file matches when it holds a canary, a definition whose normalised form (:func:`normalise`: docstrings dropped,
name ignored, comments and layout gone) equals a deleted one's, at least ``min(3, len(lines))`` of the lines, or a
string and a line. Zip archives (wheels) are searched member by member. A file is read once however many names it has
(``/bin`` and ``/lib`` are links into ``/usr``; a hard link), and reported under the first: its real path, as links
at the root are walked last; a name where other searches apply (another task's tree; ``.py`` or not) reads it again.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import stat
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
MAX_ANCHORS = 6  # of each kind
WORD = re.compile(r"[A-Za-z0-9_]+")  # ASCII: the same bytes in every encoding Python source may declare


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
    """Text a file must hold to hold a copy of ``node`` (in any layout, renamed, its docstrings rewritten): its
    identifiers of three characters or more (names, attributes, parameters: :func:`normalised` keeps them all) and the
    words of four characters or more of its string constants, docstrings aside (a reformatter may requote a string
    or split it in two, never inside a word; a copy spelling a letter of such a word as an escape, ``\\x41``, is not
    sought by its AST). The longest :data:`MAX_ANCHORS` of each: a file without all of them is never parsed (an
    ``ast.parse`` costs a thousand times a search)."""
    plain = normalised(node)
    names: set[str] = set()
    words: set[str] = set()
    for n in ast.walk(plain):
        for attr in ("id", "attr", "arg"):
            value = getattr(n, attr, None)
            if isinstance(value, str) and len(value) >= 3 and value.isascii():
                names.add(value)
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            words.update(w for w in WORD.findall(n.value) if len(w) >= 4)
    return [s.encode() for s in _longest(words) + _longest(names)]


def _longest(found: set[str]) -> list[str]:
    return sorted(found, key=lambda s: (-len(s), s))[:MAX_ANCHORS]


class Search:
    """What one task's walk looks for, and where its own tree is: a file under ``workspace`` is this search's alone
    (reported under ``shows_as``, its sample's path for it) and never body-matched (the task's code may repeat a
    helper); a file elsewhere is every search's."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.canaries = [c.encode() for c in cfg.get("canaries", []) if c]
        self.lines = [s.encode() for s in cfg.get("lines", []) if s]
        self.strings = [s.encode() for s in cfg.get("strings", []) if s]
        self.workspace = cfg.get("workspace", "").rstrip("/")
        self.shows_as = cfg.get("shows_as", self.workspace).rstrip("/")
        self.bodies: dict[str, list[bytes]] = {}
        self.signatures: set[tuple[str, int, tuple[str, ...]]] = set()  # what a candidate must have
        for source in cfg.get("sources", []):
            for node in ast.parse(source).body:
                if isinstance(node, DEFS) and _size(node) >= MIN_BODY_NODES:
                    self.bodies[normalise(node)] = _anchors(node)
                    self.signatures.add(signature(node))
        self.need_lines = min(MIN_LINES, len(self.lines))
        self.matches: list[dict[str, Any]] = []

    def owns(self, path: str) -> bool:
        return bool(self.workspace) and (path == self.workspace or path.startswith(self.workspace + "/"))

    def shown(self, path: str) -> str:
        return self.shows_as + path[len(self.workspace) :] if self.owns(path) else path

    def check(self, path: str, contents: Contents) -> None:
        kinds = []
        if any(contents.has(c) for c in self.canaries):
            kinds.append("canary")
        if path.endswith(".py") and self.bodies and not self.owns(path.split("!", 1)[0]) and self.body(contents):
            kinds.append("body")
        lines = sum(1 for s in self.lines if contents.has(s))
        strings = sum(1 for s in self.strings if contents.has(s)) if lines else 0
        if self.need_lines and (lines >= self.need_lines or (strings and lines)):
            kinds.append(f"lines {lines} of {len(self.lines)}")
            if strings:
                kinds.append(f"strings {strings} of {len(self.strings)}")
        if kinds:
            self.matches.append({"path": self.shown(path), "kinds": kinds})

    def body(self, contents: Contents) -> bool:
        wanted = [k for k, anchors in self.bodies.items() if all(contents.has(a) for a in anchors)]
        if not wanted:
            return False
        return any(signature(n) in self.signatures and normalise(n) in wanted for n in contents.definitions())


class Contents:
    """One file's bytes as the searches ask of them: each needle looked for once however many searches hold it (the
    tasks of a suite deleting several features share some), the definitions parsed at most once."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.known: dict[bytes, bool] = {}
        self.found: list[ast.AST] | None = None

    def has(self, needle: bytes) -> bool:
        hit = self.known.get(needle)
        if hit is None:
            hit = self.known[needle] = needle in self.data
        return hit

    def definitions(self) -> list[ast.AST]:
        if self.found is None:
            try:
                self.found = list(definitions(ast.parse(self.data)))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self.found = []
        return self.found


class Walk:
    """The walk of one sandbox for one or more searches (the tasks of one suite share everything but their own tree).
    Each file is read once however many names it has (the root's ``/bin`` and ``/lib`` are links into ``/usr``; a
    hard link), unless its names differ in what is sought there (another task's tree, or ``.py`` or not)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.searches = [Search(c) for c in cfg.get("searches", [])]
        self.deadline = time.monotonic() + float(cfg.get("budget_s", 60.0))
        self.files = 0
        self.unreadable: list[str] = []
        self.seen: set[tuple[int, int, int, bool]] = set()

    def route(self, path: str) -> int:
        """The search whose tree ``path`` is in, or -1 (every search's)."""
        return next((i for i, s in enumerate(self.searches) if s.owns(path)), -1)

    def check(self, path: str, data: bytes, owner: int) -> None:
        contents = Contents(data)
        for i, search in enumerate(self.searches):
            if owner in (-1, i):
                search.check(path, contents)

    def read(self, path: str, owner: int) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE)
        except OSError:
            self.unreadable.append(path)
            return
        self.files += 1
        self.check(path, data, owner)
        if data[:4] == b"PK\x03\x04":
            self.archive(path, owner)

    def archive(self, path: str, owner: int) -> None:
        try:
            with zipfile.ZipFile(path) as z:
                for info in z.infolist()[:MAX_MEMBERS]:
                    if not info.is_dir() and info.file_size <= MAX_FILE:
                        self.check(path + "!" + info.filename, z.read(info), owner)
        except (OSError, zipfile.BadZipFile, RuntimeError, ValueError, NotImplementedError):
            return

    def first_time(self, path: str, owner: int) -> bool:
        """Whether ``path`` (in the tree of search ``owner``, or -1) is a regular file (not a link) not read yet under
        another name sought the same way."""
        try:
            st = os.lstat(path)
        except OSError:
            self.unreadable.append(path)
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        key = (st.st_dev, st.st_ino, owner, path.endswith(".py"))
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def walk(self, tops: list[str]) -> list[str]:
        """Walk ``tops`` in order; returns what the budget left unread (folders not reached, or only in part)."""
        for i, top in enumerate(tops):
            for dirpath, dirs, files in os.walk(top, onerror=lambda e: self.unreadable.append(str(e.filename))):
                dirs[:] = sorted(d for d in dirs if os.path.join(dirpath, d) not in SKIP)
                for name in sorted(files):
                    if time.monotonic() > self.deadline:
                        return [dirpath + " (in part)", *tops[i + 1 :]]
                    path = os.path.join(dirpath, name)
                    owner = self.route(path)
                    if self.first_time(path, owner):
                        self.read(path, owner)
        return []


def tops() -> list[str]:
    """The root's folders but ``/proc``, ``/sys`` and ``/dev``, links last (``/bin`` after ``/usr``): a file is
    named by its real path where it has one."""
    found = [os.path.join("/", d) for d in os.listdir("/") if os.path.join("/", d) not in SKIP]
    return sorted(found, key=lambda p: (os.path.islink(p), p))


def run(cfg: dict[str, Any]) -> dict[str, Any]:
    walk = Walk(cfg)
    left = walk.walk(tops())
    return {
        "matches": [s.matches for s in walk.searches],
        "files": walk.files,
        "bodies": [len(s.bodies) for s in walk.searches],
        "unreadable": walk.unreadable[:50],
        "not_reached": left,
    }


def main() -> None:
    json.dump(run(json.loads(sys.stdin.read() or "{}")), sys.stdout)


if __name__ == "__main__":
    main()
