"""Contamination found by content: is the code a task deleted readable anywhere in its sample's sandbox?

Canaries only mark labbot's own copy of the original (``original/``, never bound). A copy labbot did not plant — a
package vendored by pip or setuptools in the task's venv, an SDK under the host's ``/usr`` vendoring the same
library — carries no canary, so the search is by content: the walk (:mod:`labbot.evals.seal.contamination_walk`, run by
the sandbox's own Python) reads every file the sandbox shows and compares each definition with the deleted ones
(normalised ASTs), and looks for the deleted lines and string constants that the task tree lacks (:class:`Needles`).

Where it runs and what follows (see ``docs/architecture.md``, "The seal, measured"):

- at generation (:func:`labbot.evals.generation.generator.generate_suite`), after validation, one walk for a round
  of new tasks (:func:`scan_tasks`: their sandboxes differ only in the task tree): a task whose deleted code is found
  is **contaminated** — left out of the suite's tasks and named in ``suite.json``'s
  ``contaminated`` with the paths and what matched. Nothing is hidden on the fly: the sandbox already shows only what
  tests need (:mod:`labbot.evals.sandbox.bwrap`), so a match is in something a run may need (the venv's own packages,
  the interpreter's standard library), and hiding it would change what the tests run against;
- in the seal battery of each run (:func:`labbot.evals.seal.battery.battery`): one more ``host`` probe, failed by any
  match, which makes the run untrusted as the other probes do.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from labbot.common.errors import BadRequest
from labbot.common.python_ast import parse_python
from labbot.evals.sandbox.bwrap import WORKDIR, Sandbox, SandboxSpec
from labbot.evals.seal import contamination_walk
from labbot.evals.seal.leak_probes import MIN_NEEDLE, needles, sandbox_python
from labbot.evals.seal.report import ProbeResult

SCRIPT = Path(contamination_walk.__file__).read_text()
PROBE_NAME = "the deleted code, by content, on every readable path"
MIN_STRING = 16  # characters of a string constant worth looking for
MAX_STRINGS = 24
WALK_BUDGET_S = 300.0  # a sample's view is ~20k files, a few seconds unloaded; a cut walk fails the probe
BATCH_ROOT = "/labbot-walk"  # where one walk for several tasks binds the trees of all but the first


@dataclass(frozen=True)
class Needles:
    """What the walk looks for: the deleted definitions' source, their lines and string constants that the task tree
    lacks, and the canaries."""

    sources: list[str]
    lines: list[str]
    strings: list[str]
    canaries: list[str] = field(default_factory=list)

    def search(self, workspace: str = WORKDIR) -> dict[str, object]:
        """This task's part of the walk's input, its tree bound at ``workspace`` (its sample shows it at
        :data:`WORKDIR`)."""
        return {
            "sources": self.sources,
            "lines": self.lines,
            "strings": self.strings,
            "canaries": self.canaries,
            "workspace": workspace,
            "shows_as": WORKDIR,
        }


@dataclass(frozen=True)
class Match:
    path: str  # as the sandbox shows it (``/venv/...``, ``/usr/...``); ``archive!member`` inside a zip
    kinds: list[str]  # "canary", "body", "lines N of M", "strings N of M"

    def __str__(self) -> str:
        return f"{self.path} ({', '.join(self.kinds)})"


@dataclass(frozen=True)
class Scan:
    matches: list[Match]
    files: int
    not_reached: list[str]  # what the walk's time budget left unread
    error: str = ""  # the walk did not finish: why

    @property
    def clean(self) -> bool:
        """Nothing found, and everything read: a walk the budget cut short has not shown the rest is clean."""
        return not self.matches and not self.error and not self.not_reached

    def summary(self) -> str:
        if self.error:
            return f"the contamination walk did not finish: {self.error}"
        left = f"; NOT REACHED in the time budget: {self.not_reached[:5]}" if self.not_reached else ""
        if self.matches:
            return f"found in {len(self.matches)} files: {[str(m) for m in self.matches[:8]]} ({self.files} read){left}"
        return f"{self.files} files read, the deleted code in none{left}"


def definitions(source: str, symbols: Sequence[str], what: str = "the file") -> list[str]:
    """The source of each of ``symbols`` (qualified: ``func``, ``Class.method``) in ``source``, dedented."""
    try:
        tree = parse_python(source)
    except SyntaxError as e:
        raise BadRequest(f"{what} does not parse ({e}): the deleted code is read from it") from e
    out = []
    for symbol in symbols:
        node: ast.AST = tree
        for part in symbol.split("."):
            body = getattr(node, "body", [])
            found = next((n for n in body if isinstance(n, contamination_walk.DEFS) and n.name == part), None)
            if found is None:
                raise BadRequest(f"{symbol!r} is not defined in {what}: name a function or Class.method of it")
            node = found
        segment = ast.get_source_segment(source, node, padded=True) or ""
        out.append(_dedent(segment))
    return out


def _dedent(code: str) -> str:
    import textwrap

    return textwrap.dedent(code)


def _task_text(workspace: Path) -> str:
    parts = []
    for path in workspace.rglob("*"):
        if ".git" not in path.relative_to(workspace).parts and path.is_file():
            try:
                parts.append(path.read_bytes()[: 4 * 1024 * 1024].decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(parts)


def distinctive_strings(sources: Sequence[str], corpus: str) -> list[str]:
    """String constants of the deleted code (docstrings aside) of :data:`MIN_STRING` characters or more that the
    task tree (``corpus``) does not hold, the longest :data:`MAX_STRINGS`."""
    found: set[str] = set()
    for source in sources:
        tree = parse_python(source)
        docstrings = {
            id(getattr(n.body[0], "value", None))
            for n in ast.walk(tree)
            if isinstance(n, contamination_walk.DEFS) and n.body and contamination_walk._is_docstring(n.body[0])
        }
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
                text = n.value.strip()
                if len(text) >= MIN_STRING and "\n" not in text and text not in corpus:
                    found.add(text)
    return sorted(found, key=lambda s: (-len(s), s))[:MAX_STRINGS]


def task_needles(sources: Sequence[str], workspace: Path, canaries: Sequence[str] = ()) -> Needles:
    """:class:`Needles` of the deleted ``sources`` for the task tree at ``workspace``."""
    if not any(s.strip() for s in sources):
        raise BadRequest("contamination needs the deleted definitions' source: none was given")
    lines = [n for n in needles([], sources, workspace=workspace) if len(n) >= MIN_NEEDLE]
    return Needles(list(sources), lines, distinctive_strings(sources, _task_text(workspace)), list(canaries))


def scan(
    spec: SandboxSpec, found: Needles, *, budget_s: float = WALK_BUDGET_S, sandbox: type[Sandbox] = Sandbox
) -> Scan:
    """The walk inside a sandbox built from ``spec`` (a sample's); ``sandbox`` is for tests and the benchmark: a
    variant with another view of the host."""
    return scan_tasks(spec, [(spec.workspace, found)], budget_s=budget_s, sandbox=sandbox)[0]


def scan_tasks(
    spec: SandboxSpec,
    tasks: Sequence[tuple[Path, Needles]],
    *,
    budget_s: float = WALK_BUDGET_S,
    sandbox: type[Sandbox] = Sandbox,
) -> list[Scan]:
    """One walk for several tasks whose samples' sandboxes differ only in their workspace (the tasks of one suite):
    each ``(tree, needles)`` is answered as :func:`scan` in a sandbox of ``spec`` with ``tree`` as its workspace would
    answer it — everything but the trees is searched for every task, each tree for its own task only (the first at
    :data:`WORKDIR`, the others bound read-only under :data:`BATCH_ROOT`, reported at :data:`WORKDIR`) — and the
    files they all show are read once."""
    if not tasks:
        return []
    if any(inside == BATCH_ROOT or inside.startswith(BATCH_ROOT + "/") for inside in spec.ro_binds):
        raise BadRequest(f"{BATCH_ROOT} is where the contamination walk binds the other tasks' trees: bind elsewhere")
    inside = [WORKDIR, *(f"{BATCH_ROOT}/{i}" for i in range(1, len(tasks)))]
    binds = {path: tree for path, (tree, _) in zip(inside[1:], tasks[1:], strict=True)}
    box_spec = replace(spec, workspace=tasks[0][0], ro_binds={**spec.ro_binds, **binds})
    config = {"searches": [n.search(path) for path, (_, n) in zip(inside, tasks, strict=True)], "budget_s": budget_s}
    with sandbox(box_spec) as box:
        result = box.exec(
            [sandbox_python(box_spec), "-I", "-B", "-c", SCRIPT],
            input=json.dumps(config),
            timeout_s=budget_s + 60.0,
        )
    try:
        doc = json.loads(result.stdout)
        files, left = int(doc["files"]), [str(p) for p in doc["not_reached"]]
        return [
            Scan([Match(str(m["path"]), [str(k) for k in m["kinds"]]) for m in matches], files, left)
            for matches, _ in zip(doc["matches"], tasks, strict=True)
        ]
    except (ValueError, KeyError, TypeError):
        why = "timed out" if result.timed_out else f"exit {result.returncode}"
        return [Scan([], 0, [], f"{why}: {(result.stderr or result.stdout)[-1500:]}") for _ in tasks]


def probe(spec: SandboxSpec, found: Needles, *, budget_s: float = WALK_BUDGET_S) -> ProbeResult:
    """:func:`scan` as one probe of the seal battery (category ``host``): passed when nothing matched."""
    result = scan(spec, found, budget_s=budget_s)
    return ProbeResult(PROBE_NAME, "host", result.clean, result.summary())
