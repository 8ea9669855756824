"""``labbot eval``: generate a suite from a repository, run it, show, list and compare eval runs, probe a suite's seal.

``generate`` and ``probe`` run on this machine (they read the checkout or a suite folder, and need bubblewrap here);
``generate`` then sends the suite to the control plane, which keeps it; ``probe`` needs no control plane. ``run``,
``show``, ``list`` and ``compare`` are clients of ``/api/v1/evals``. An eval run is a labbot run: ``labbot runs``
lists it and ``labbot logs RUN`` shows its job's output.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from labbot.bot.cli import research_evals
from labbot.bot.cli.output import CLIError, print_json
from labbot.bot.render.evals import (
    TERMINAL,
    comparison_text,
    eval_runs_table,
    incident_case_text,
    results_text,
    samples_progress,
    suite_text,
    suites_table,
)
from labbot.bot.render.feedback import feedback_case_text
from labbot.bot.render.tables import table
from labbot.common.api_client import ApiClient, api_path, check_id, me
from labbot.common.durations import format_duration

SUITE_ID_HELP = "a suite id from `labbot eval list` (suite-…)"


def add_parser(sub: Any) -> None:
    e = sub.add_parser("eval", help="evals: delete-and-restore tasks from a repository, run sealed, scored by tests")
    esub = e.add_subparsers(dest="eval_command", metavar="SUBCOMMAND", parser_class=type(e))
    esub.required = True

    s = esub.add_parser("generate", help="a suite of tasks from a git repository with a pytest suite")
    s.set_defaults(func=_generate)
    s.add_argument("path", help="the repository (its committed files are used; the checkout is never changed)")
    s.add_argument("--count", type=int, default=10, metavar="N", help="how many tasks (default: 10)")
    s.add_argument("--seed", type=int, default=0, metavar="S", help="which functions are chosen (default: 0)")
    s.add_argument("--out", metavar="DIR", help="also keep the suite folder here")
    s.add_argument(
        "--deletion",
        choices=("body", "function", "mixed"),
        default="body",
        help="what a task deletes: function bodies (default), whole functions (harder) or a seeded mix",
    )
    s.add_argument(
        "--deletions", type=int, default=1, metavar="K", help="features of one file each task deletes (default: 1)"
    )
    s.add_argument(
        "--prefer", choices=("any", "deep"), default="any", help="deep: the largest function bodies first (harder)"
    )
    s.add_argument(
        "--no-rewrite",
        action="store_true",
        help="keep the plain task statements (by default a configured model rewrites each as an issue)",
    )
    s.add_argument("--json", action="store_true", help="print the suite and its tasks as JSON")

    s = esub.add_parser("run", help="run a suite as a labbot run: labbot eval run SUITE --solver gold")
    s.set_defaults(func=_run)
    s.add_argument("suite", help=SUITE_ID_HELP)
    s.add_argument(
        "--solver",
        default="gold",
        help="gold | none | agent[:MODEL] | a shell command run in the task repository (default: gold)",
    )
    s.add_argument(
        "--solver-dir",
        metavar="NAME",
        help="an installed agent's folder, by its name in [eval] solver_dirs, read-only at /solver",
    )
    s.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a host the command may reach through the proxy (one of [eval] solver_hosts; repeatable)",
    )
    s.add_argument(
        "--solver-env",
        action="append",
        default=[],
        metavar="NAME",
        help="a variable of YOUR environment (e.g. an API key) given to the command only (repeatable)",
    )
    s.add_argument("--max-samples", type=int, metavar="N", help="samples run at once (default: the job's)")
    s.add_argument("--out", metavar="DIR", help="a research suite's results folder (default: under LABBOT_HOME)")
    s.add_argument("--name", help="a name for the run")
    s.add_argument("--no-wait", action="store_true", help="return once submitted")
    s.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="how long to wait (default: 1h)")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("show", help="an eval run's results (pass rate, samples, isolation), or a suite's tasks")
    s.set_defaults(func=_show)
    s.add_argument("id", help="an eval run's id (from `labbot eval list` or `labbot runs`), or a suite's (its tasks)")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("compare", help="two eval runs of one suite, paired by task: the difference and its interval")
    s.set_defaults(func=_compare)
    s.add_argument("run_a", help="the first eval run's id")
    s.add_argument("run_b", help="the second eval run's id (the same suite and tasks)")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("from-incident", help="a resolved page whose cause was recorded, as an eval case")
    s.set_defaults(func=_from_incident)
    s.add_argument("page", help="a page id from `labbot pages --all`")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("from-feedback", help="a 👎 with a comment on an agent's answer, as an eval case")
    s.set_defaults(func=_from_feedback)
    s.add_argument("feedback", help="a feedback id from `labbot feedback --vote down`")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("list", help="the suites labbot keeps and the eval runs, newest first")
    s.set_defaults(func=_list)
    s.add_argument("--limit", type=int, default=50, metavar="N")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("probe", help="run the isolation probes against a suite folder on this machine")
    s.set_defaults(func=probe, offline=True)  # on this machine's suite folder: no control plane needed
    s.add_argument("path", help="a suite folder (as `labbot eval generate --out DIR` keeps it)")
    s.add_argument("--task", help="the task whose sandbox to probe (default: the first)")
    s.add_argument("--venv", metavar="DIR", help="the suite's venv (default: built from its wheels, cached)")
    s.add_argument("--json", action="store_true")


def _show(api: ApiClient, a: argparse.Namespace) -> int:
    if a.id.startswith(("suite-", "incidents-")):  # a suite: what it asks, task by task
        suite = api.json("GET", api_path("evals", "suites", a.id))["suite"]
        print_json(suite) if a.json else print(suite_text(suite))
        return 0
    doc = api.json("GET", f"/evals/runs/{check_id('run', a.id)}")["eval"]
    print_json(public(doc)) if a.json else print(results_text(doc))
    return 0


def _compare(api: ApiClient, a: argparse.Namespace) -> int:
    params = {"a": check_id("run", a.run_a), "b": check_id("run", a.run_b)}
    doc = api.json("GET", "/evals/compare", params=params)["comparison"]
    print_json(doc) if a.json else print(comparison_text(doc))
    return 0


def _from_incident(api: ApiClient, a: argparse.Namespace) -> int:
    path = api_path("evals", "incidents", check_id("page", a.page))
    made = api.json("POST", path, params={"by": me()})
    print_json(made) if a.json else print(incident_case_text(made))
    return 0


def _from_feedback(api: ApiClient, a: argparse.Namespace) -> int:
    path = api_path("evals", "feedback", check_id("feedback", a.feedback))
    made = api.json("POST", path, params={"by": me()})
    print_json(made) if a.json else print(feedback_case_text(made))
    return 0


def _list(api: ApiClient, a: argparse.Namespace) -> int:
    suites = api.json("GET", "/evals/suites")["suites"]
    runs = api.json("GET", "/evals/runs", params={"limit": a.limit})["evals"]
    if a.json:
        print_json({"suites": suites, "runs": [public(r) for r in runs]})
    else:
        print(suites_table(suites))
        print()
        print(eval_runs_table(runs))
    return 0


def _generate(api: ApiClient, a: argparse.Namespace) -> int:
    from labbot.agents.fleet.model import ModelSettings
    from labbot.bot.cli.statements import statement_rewriter
    from labbot.evals.generation.generator import generate_suite
    from labbot.evals.service import pack

    if a.count < 1 or a.count > 500:
        raise CLIError(f"--count {a.count} is out of range: ask for 1 to 500 tasks", 2)
    say = (lambda _text: None) if a.json else (lambda text: print(text, file=sys.stderr, flush=True))
    with tempfile.TemporaryDirectory(prefix="labbot-suite-") as tmp:
        out = Path(a.out).expanduser().resolve() if a.out else Path(tmp) / "suite"
        rewrite = None if a.no_rewrite else statement_rewriter(ModelSettings.from_env(os.environ))
        if rewrite is not None:
            say("a model is configured: each task statement is rewritten as an issue (--no-rewrite keeps them plain)")
        suite = generate_suite(
            Path(a.path).expanduser().resolve(),
            out,
            count=a.count,
            seed=a.seed,
            progress=say,
            rewrite=rewrite,
            deletion=a.deletion,
            deletions=a.deletions,
            prefer=a.prefer,
        )
        say(f"sending suite {suite.id} ({len(suite.tasks)} tasks) to labbot")
        kept = api.json("POST", "/evals/suites", content=pack(out), headers={"content-type": "application/gzip"})
    doc = {
        "suite": suite.id,
        "source": suite.source,
        "commit": suite.commit,
        "flaky": suite.flaky,
        "tasks": [
            {
                "id": t.id,
                "path": t.path,
                "symbol": t.symbol,
                "also": t.also,
                "fail_to_pass": t.fail_to_pass,
                "hidden": t.hidden,
                "pass_to_pass": t.pass_to_pass,
            }
            for t in suite.tasks
        ],
        "kept": kept["suite"],
    }
    if a.json:
        print_json(doc)
    else:
        rows = [[t["id"], t["path"], t["symbol"], str(len(t["fail_to_pass"])), str(len(t["pass_to_pass"]))]
                for t in doc["tasks"]]  # fmt: skip
        print(table(["task", "file", "symbol", "fail→pass", "pass→pass"], rows))
        if suite.flaky:
            print(f"flaky tests dropped from both lists: {', '.join(suite.flaky)}")
        print(f"suite {suite.id}: run it with `labbot eval run {suite.id} --solver gold`")
    return 0


def _run(api: ApiClient, a: argparse.Namespace) -> int:
    if research_evals.is_research_suite(a.suite):  # lab tasks for the researcher, run from here against labbot
        return research_evals.run(api, a)
    body: dict[str, Any] = {
        "suite": a.suite,
        "solver": a.solver,
        "owner": me(),
        "idempotency_key": f"cli-{uuid.uuid4()}",
    }
    if a.max_samples is not None:
        body["max_samples"] = a.max_samples
    if a.name:
        body["name"] = a.name
    if a.solver_dir:
        body["solver_dir"] = a.solver_dir
    if a.allow_host:
        body["allow_hosts"] = a.allow_host
    if a.solver_env:
        missing = [n for n in a.solver_env if not os.environ.get(n)]
        if missing:
            raise CLIError(f"--solver-env {', '.join(missing)}: not set in your environment (export it first)", 2)
        body["solver_env"] = {n: os.environ[n] for n in a.solver_env}  # this shell's, sent with the launch only
    doc = api.json("POST", "/evals/runs", json=body)["eval"]
    run_id = doc["id"]
    say = (lambda _text: None) if a.json else (lambda text: print(text, file=sys.stderr, flush=True))
    say(f"eval run {run_id} launched ({a.suite}, solver {a.solver}): labbot eval show {run_id}")
    start = time.monotonic()
    last = ""
    while not a.no_wait and doc["status"] not in TERMINAL:
        if time.monotonic() - start > a.timeout:
            say(f"  still {doc['status']} after {format_duration(a.timeout)}; labbot keeps watching it")
            break
        api.json("GET", f"/runs/{run_id}", params={"wait": 10}, timeout=40)  # long-poll while Ray starts it
        doc = api.json("GET", f"/evals/runs/{run_id}")["eval"]
        progress = f"  {doc['status']}: {samples_progress(doc)}"
        if progress != last:
            say(progress)
            last = progress
        if doc["status"] not in TERMINAL and doc["status"] not in ("pending", "restarting"):
            time.sleep(1.0)  # between polls of a running job; the run's own long-poll only covers its start
    if a.json:
        print_json(public(doc))
    else:
        print(results_text(doc))
    if doc["status"] == "failed":
        raise CLIError(f"eval run {run_id} failed: {doc.get('run', {}).get('error') or 'labbot logs ' + run_id}", 1)
    return 0


def probe(a: argparse.Namespace) -> int:
    """``labbot eval probe``: the battery on this machine, against a suite folder (no control plane needed)."""
    from labbot.evals.seal.battery import probe_suite

    venv = Path(a.venv).expanduser().resolve() if a.venv else None
    report = probe_suite(Path(a.path).expanduser().resolve(), task_id=a.task, venv=venv)
    if a.json:
        print_json(report.to_json())
    else:
        print(report.headline())
        rows = [
            [p.name, p.category, "pass" if p.passed else "FAIL", (p.evidence.splitlines() or [""])[0][:80]]
            for p in report.probes
        ]
        print(table(["probe", "category", "verdict", "evidence"], rows))
    return 0 if report.sealed else 1


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """The eval's JSON as the CLI contract has it: id, suite, solver, status, pass_rate with its 95 % ``interval``,
    samples, isolation..."""
    keys = (
        "id", "suite", "solver", "status", "pass_rate", "interval", "tampered", "suspect", "samples", "isolation",
        "untrusted", "log", "log_artifact",
    )  # fmt: skip
    out = {k: doc.get(k) for k in keys}
    out["samples"] = doc.get("samples") or []
    out["isolation"] = doc.get("isolation") or {"score": None, "probes": []}
    return out
