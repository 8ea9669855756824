"""``labbot eval run research-tiny-lm --solver oracle|naive|agent[:MODEL]``: a research suite run from here against
the running labbot (``labbot.bot.research_eval``), each task set up through its API, solved with the researcher's
tools, scored against the answers kept in the suite's folder. The built-in ``research-tiny-lm`` is made on first use
in ``LABBOT_HOME/research-suites/`` (its reference measured by training tiny-lm here, about 15 s); a folder holding a
``research.json`` is a suite too."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from labbot.bot.cli.output import CLIError, print_json
from labbot.bot.render.tables import table
from labbot.common.api_client import ApiClient, home
from labbot.common.errors import BadRequest
from labbot.evals.research.tasks import RESEARCH_SUITE, SUITE_FILE, save_suite

SUITES_DIR = "research-suites"


def is_research_suite(suite: str) -> bool:
    return bool(RESEARCH_SUITE.fullmatch(suite)) or (Path(suite) / SUITE_FILE).is_file()


def suite_folder(suite: str, *, say: bool = True) -> Path:
    """The suite's folder: ``suite`` itself when it is one, else ``LABBOT_HOME/research-suites/SUITE`` — the built-in
    one made there on first use."""
    given = Path(suite)
    if (given / SUITE_FILE).is_file():
        return given
    from labbot.evals.research.reference import SUITE_ID, tiny_lm_suite

    folder = home() / SUITES_DIR / suite
    if (folder / SUITE_FILE).is_file():
        return folder
    if suite != SUITE_ID:
        raise CLIError(
            f"no research suite {suite!r}: the built-in one is {SUITE_ID}, or give a folder with {SUITE_FILE}", 2
        )
    if say:
        print(f"making {SUITE_ID}: measuring its reference (tiny-lm at each lr of its grid, here)...", flush=True)
    save_suite(folder, SUITE_ID, tiny_lm_suite())
    return folder


def run(api: ApiClient, a: argparse.Namespace) -> int:
    from labbot.bot.research_eval import parse_solver, run_research
    from labbot.mcp_servers.lab import LabApi

    try:
        solver = parse_solver(a.solver)
    except BadRequest as e:
        raise CLIError(e.message, 2) from None
    folder = suite_folder(a.suite, say=not a.json)
    out = Path(a.out) if a.out else home() / "research-evals" / f"{folder.name}-{solver.kind}-{int(time.time())}"

    def heard(task: str, passed: bool, why: str) -> None:
        if not a.json:
            print(f"{task}: {'pass' if passed else 'fail'} — {why}", flush=True)

    lab = LabApi(api.url, api.headers()["Authorization"].removeprefix("Bearer "))
    try:
        results = run_research(folder, out, lab, solver, on_sample=heard)
    except BadRequest as e:
        raise CLIError(e.message, 2) from None
    if a.json:
        print_json(results)
        return 0
    rows = [[r["task"], r["kind"], "pass" if r["passed"] else "fail",
             f"{r['value']:.4f}" if isinstance(r["value"], float) and r["kind"] == "tune" else "-", r["why"][:70]]
            for r in results["samples"]]  # fmt: skip
    print(table(["task", "kind", "verdict", "regret", "why"], rows))
    print(f"{results['suite']} with {results['solver']}: {results['passed']}/{results['total']} passed; {out}")
    if results["history"]:
        print(f"note: this labbot held {results['history']} earlier research question(s) of the eval, whose runs and "
              "findings the solver could read: run it on a fresh labbot for a sealed score")  # fmt: skip
    return 0
