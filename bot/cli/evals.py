"""``labbot eval``: generate a suite from a repository, run it, show, list and compare eval runs, probe a suite's seal.

``generate`` and ``probe`` run on this machine (they read the checkout or a suite folder, and need bubblewrap here);
``generate`` then sends the suite to the control plane, which keeps it; ``probe`` needs no control plane. ``run``,
``show``, ``list`` and ``compare`` are clients of ``/api/v1/evals``. An eval run is a labbot run: ``labbot runs``
lists it and ``labbot logs RUN`` shows its job's output.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from labbot.bot.cli import render
from labbot.bot.cli.feedback import feedback_case_text
from labbot.common.api_client import ApiClient, api_path, check_id
from labbot.common.durations import format_duration

TERMINAL = ("succeeded", "failed", "stopped")
SUITE_ID_HELP = "a suite id from `labbot eval list` (suite-…)"


def add_parser(sub: Any) -> None:
    e = sub.add_parser("eval", help="evals: delete-and-restore tasks from a repository, run sealed, scored by tests")
    esub = e.add_subparsers(dest="eval_command", metavar="SUBCOMMAND", parser_class=type(e))
    esub.required = True

    s = esub.add_parser("generate", help="a suite of tasks from a git repository with a pytest suite")
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
    s.add_argument("--name", help="a name for the run")
    s.add_argument("--no-wait", action="store_true", help="return once submitted")
    s.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="how long to wait (default: 1h)")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("show", help="an eval run's results: pass rate, samples, isolation")
    s.add_argument("id", help="the eval run's id (from `labbot eval list` or `labbot runs`)")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("compare", help="two eval runs of one suite, paired by task: the difference and its interval")
    s.add_argument("run_a", help="the first eval run's id")
    s.add_argument("run_b", help="the second eval run's id (the same suite and tasks)")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("from-incident", help="a resolved page whose cause was recorded, as an eval case")
    s.add_argument("page", help="a page id from `labbot pages --all`")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("from-feedback", help="a 👎 with a comment on an agent's answer, as an eval case")
    s.add_argument("feedback", help="a feedback id from `labbot feedback --vote down`")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("list", help="the suites labbot keeps and the eval runs, newest first")
    s.add_argument("--limit", type=int, default=50, metavar="N")
    s.add_argument("--json", action="store_true")

    s = esub.add_parser("probe", help="run the isolation probes against a suite folder on this machine")
    s.add_argument("path", help="a suite folder (as `labbot eval generate --out DIR` keeps it)")
    s.add_argument("--task", help="the task whose sandbox to probe (default: the first)")
    s.add_argument("--venv", metavar="DIR", help="the suite's venv (default: built from its wheels, cached)")
    s.add_argument("--json", action="store_true")


def run(api: ApiClient, a: argparse.Namespace, *, print_json: Any, error: Any) -> int:
    if a.eval_command == "generate":
        return _generate(api, a, print_json, error)
    if a.eval_command == "run":
        return _run(api, a, print_json, error)
    if a.eval_command == "show":
        doc = api.json("GET", f"/evals/runs/{check_id('run', a.id)}")["eval"]
        print_json(public(doc)) if a.json else print(results_text(doc))
        return 0
    if a.eval_command == "compare":
        params = {"a": check_id("run", a.run_a), "b": check_id("run", a.run_b)}
        doc = api.json("GET", "/evals/compare", params=params)["comparison"]
        print_json(doc) if a.json else print(comparison_text(doc))
        return 0
    if a.eval_command == "from-incident":
        path = api_path("evals", "incidents", check_id("page", a.page))
        made = api.json("POST", path, params={"by": getpass.getuser()})
        print_json(made) if a.json else print(incident_case_text(made))
        return 0
    if a.eval_command == "from-feedback":
        path = api_path("evals", "feedback", check_id("feedback", a.feedback))
        made = api.json("POST", path, params={"by": getpass.getuser()})
        print_json(made) if a.json else print(feedback_case_text(made))
        return 0
    if a.eval_command == "list":
        suites = api.json("GET", "/evals/suites")["suites"]
        runs = api.json("GET", "/evals/runs", params={"limit": a.limit})["evals"]
        if a.json:
            print_json({"suites": suites, "runs": [public(r) for r in runs]})
        else:
            print(suites_table(suites))
            print()
            print(eval_runs_table(runs))
        return 0
    raise error(f"unknown eval subcommand {a.eval_command!r}", 2)


def _generate(api: ApiClient, a: argparse.Namespace, print_json: Any, error: Any) -> int:
    from labbot.agents.fleet.model import ModelSettings
    from labbot.bot.cli.statements import statement_rewriter
    from labbot.evals.generation.generator import generate_suite
    from labbot.evals.service import pack

    if a.count < 1 or a.count > 500:
        raise error(f"--count {a.count} is out of range: ask for 1 to 500 tasks", 2)
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
        print(render.table(["task", "file", "symbol", "fail→pass", "pass→pass"], rows))
        if suite.flaky:
            print(f"flaky tests dropped from both lists: {', '.join(suite.flaky)}")
        print(f"suite {suite.id}: run it with `labbot eval run {suite.id} --solver gold`")
    return 0


def _run(api: ApiClient, a: argparse.Namespace, print_json: Any, error: Any) -> int:
    body: dict[str, Any] = {
        "suite": a.suite,
        "solver": a.solver,
        "owner": getpass.getuser(),
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
            raise error(f"--solver-env {', '.join(missing)}: not set in your environment (export it first)", 2)
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
        progress = f"  {doc['status']}: {_progress(doc)}"
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
        raise error(f"eval run {run_id} failed: {doc.get('run', {}).get('error') or 'labbot logs ' + run_id}", 1)
    return 0


def probe(a: argparse.Namespace, *, print_json: Any) -> int:
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
        print(render.table(["probe", "category", "verdict", "evidence"], rows))
    return 0 if report.sealed else 1


def _progress(doc: dict[str, Any]) -> str:
    metrics = (doc.get("run") or {}).get("metrics") or {}
    done, total = metrics.get("samples_done"), metrics.get("samples_total")
    rate = metrics.get("pass_rate")
    if done is None:
        return "waiting for the first sample"
    text = f"{int(done)}/{int(total) if total else '?'} samples"
    return text + (f", pass rate so far {rate:.0%}" if rate is not None else "")


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """The eval's JSON as the CLI contract has it: id, suite, solver, status, pass_rate, samples, isolation..."""
    keys = (
        "id", "suite", "solver", "status", "pass_rate", "tampered", "suspect", "samples", "isolation", "untrusted",
        "log", "log_artifact",
    )  # fmt: skip
    out = {k: doc.get(k) for k in keys}
    out["samples"] = doc.get("samples") or []
    out["isolation"] = doc.get("isolation") or {"score": None, "probes": []}
    return out


def rate_text(rate: Any, interval: Any) -> str:
    """``67% (95% CI 30–90%)``, or the rate alone when there is no interval."""
    if not isinstance(rate, int | float):
        return ""
    if isinstance(interval, list | tuple) and len(interval) == 2:
        return f"{rate:.0%} (95% CI {interval[0]:.0%}–{interval[1]:.0%})"
    return f"{rate:.0%}"


def tamper_text(doc: dict[str, Any]) -> str | None:
    """The first line of a run whose scoring caught samples talking the tests into a pass, or None."""
    samples = doc.get("samples") or []
    tampered = [s["task"] for s in samples if s.get("verdict") == "tampered"]
    suspect = [s["task"] for s in samples if s.get("verdict") == "suspect"]
    if not tampered and not suspect:
        return None
    parts = []
    if tampered:
        parts.append(f"{len(tampered)} tampered ({', '.join(tampered[:5])}): their test outcomes were rewritten")
    if suspect:
        parts.append(
            f"{len(suspect)} suspect ({', '.join(suspect[:5])}): the solver's change reaches for what a rewrite needs"
        )
    return "!!! " + "; ".join(parts) + f" — scored 0, of {len(samples)} samples !!!"


def _result(sample: dict[str, Any]) -> str:
    verdict = sample.get("verdict")
    if verdict in ("tampered", "suspect", "unjudged"):
        return str(verdict).upper() if verdict != "unjudged" else "unjudged"
    return "pass" if sample.get("passed") else "fail"


def ran_text(probes: list[dict[str, Any]]) -> str:
    """When a run's probes ran: "9 cached from 2026-…, 18 alongside the samples" (results from before ``ran``
    existed had their battery before the samples)."""
    cached = sorted(
        str(p["ran"]).removeprefix("cached ") for p in probes if str(p.get("ran", "")).startswith("cached ")
    )
    counts: dict[str, int] = {}
    for p in probes:
        ran = str(p.get("ran") or "before the samples")
        if not ran.startswith("cached "):
            counts[ran] = counts.get(ran, 0) + 1
    parts = [f"{len(cached)} cached from {cached[0]}"] if cached else []
    return ", ".join([*parts, *(f"{n} {ran}" for ran, n in counts.items())])


def results_text(doc: dict[str, Any]) -> str:
    iso = doc.get("isolation") or {}
    lines = []
    if iso.get("probes") and not iso.get("sealed", True):
        failed = [p["name"] for p in iso["probes"] if not p["passed"]]
        lines.append(f"!!! SEAL FAILED ({', '.join(failed[:5])}): this run's scores are untrusted !!!")
    if warning := tamper_text(doc):
        lines.append(warning)
    rate = rate_text(doc.get("pass_rate"), doc.get("interval"))
    lines.append(
        f"eval {doc['id']} · {doc.get('suite')} · solver {doc.get('solver')} · {doc['status']}"
        + (f" · pass rate {rate}" if rate else "")
    )
    if iso.get("probes"):
        passed = sum(1 for p in iso["probes"] if p["passed"])
        when = f"; {ran_text(iso['probes'])}"
        lines.append(f"isolation {passed}/{len(iso['probes'])} probes passed (score {iso.get('score')}{when})")
    samples = doc.get("samples") or []
    if samples:
        rows = []
        for s in samples:
            output = (s.get("output") or "").strip()
            seconds, tokens = s.get("time_s"), s.get("tokens")
            rows.append([
                s["task"],
                _result(s),
                format_duration(seconds) if isinstance(seconds, int | float) else "",
                f"{tokens:,}" if isinstance(tokens, int) and tokens else "",
                output.splitlines()[-1][:60] if output else "",
            ])  # fmt: skip
        lines.append(render.table(["task", "result", "time", "tokens", "last line of the solver's output"], rows))
        for s in samples:
            for why in [*(s.get("tampered") or [])[:2], *(s.get("suspect") or [])[:3]]:
                lines.append(f"  {s['task']}: {why}")
        unjudged = sum(1 for s in samples if s.get("verdict") == "unjudged")
        if unjudged:
            lines.append(
                f"{unjudged} of {len(samples)} cases unjudged (the judge model could not be asked or gave no verdict):"
                " counted as not passed; run the suite again with a judge that answers (--judge PROVIDER/MODEL)"
            )
    elif doc["status"] not in TERMINAL:
        lines.append(f"running: {_progress(doc)}")
    return "\n".join(lines)


def comparison_text(doc: dict[str, Any]) -> str:
    """Two eval runs of one suite, paired by task: the difference, its interval, and what it means."""
    a, b = doc["a"], doc["b"]
    paired, unpaired = doc["paired"], doc["unpaired"]
    lines = []
    if doc.get("untrusted"):
        lines.append("!!! a run's seal failed: this comparison is untrusted !!!")
    lines += [
        f"{doc['suite']} · {doc['tasks']} tasks, paired by task",
        f"A {a['id']} ({a.get('solver')}): {rate_text(a.get('pass_rate'), a.get('interval'))}",
        f"B {b['id']} ({b.get('solver')}): {rate_text(b.get('pass_rate'), b.get('interval'))}",
        f"A − B = {doc['difference']:+.0%}, 95% CI {paired[0]:+.0%} to {paired[1]:+.0%} "
        f"(unpaired it would be {unpaired[0]:+.0%} to {unpaired[1]:+.0%})",
        f"both passed {doc['both']}, only A {doc['only_a']}, only B {doc['only_b']}, neither {doc['neither']}",
    ]
    left_out = doc.get("unjudged_left_out") or []
    if left_out:
        lines.append(
            f"left out: {len(left_out)} task{'s' if len(left_out) != 1 else ''} the judge gave no verdict on in one "
            f"of the runs ({', '.join(left_out[:5])}{' …' if len(left_out) > 5 else ''})"
        )
    if doc["verdict"] == "no difference the suite can show":
        lines.append("verdict: the interval includes zero — this suite cannot tell them apart (more tasks would)")
    else:
        lines.append(f"verdict: {doc['verdict']} (the interval excludes zero)")
    return "\n".join(lines)


def incident_case_text(made: dict[str, Any]) -> str:
    """What ``from-incident`` made: the case (its page, the cause it is scored on) and the suite it is now part of."""
    case, suite = made["case"], made["suite"]
    page = case["page"]
    metrics = ", ".join(case.get("metrics") or {}) or "none"
    return "\n".join(
        [
            f"case {case['id']}: {page['kind']} page of {(case.get('run') or {}).get('id') or 'the cluster'}, "
            f"frozen as labbot saw it at {page['triggered_at']}",
            f"  log tail {len((case.get('log_tail') or '').splitlines())} lines · metrics {metrics} · "
            f"{len(case.get('context') or [])} look-ups by the investigator (secrets redacted)",
            f"  scored against the recorded cause: {case['cause']}",
            f"suite {suite['suite']}: {suite['tasks']} incident cases — run it with "
            f"`eval run {suite['suite']} --solver agent:PROVIDER/MODEL`",
        ]
    )


def suites_table(suites: list[dict[str, Any]]) -> str:
    if not suites:
        return "no eval suites yet — make one with `labbot eval generate PATH`"
    rows = []
    for s in suites:
        who = "the lab" if s.get("shared", True) else ", ".join(s.get("owners") or []) + " (not shared)"
        rows.append([s["suite"], s["source"], s["commit"][:10], str(s["tasks"]), str(len(s.get("flaky") or [])), who])
    return render.table(["suite", "source", "commit", "tasks", "flaky dropped", "who can run it"], rows)


def eval_runs_table(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "no eval runs yet — `labbot eval run SUITE --solver gold`"
    rows = []
    for r in runs:
        rate = r.get("pass_rate")
        iso = r.get("isolation") or {}
        seal = "" if not iso.get("probes") else ("sealed" if iso.get("sealed") else "SEAL FAILED")
        rows.append([r["id"], r.get("suite") or "", r.get("solver") or "", r["status"],
                     rate_text(rate, r.get("interval")), seal])  # fmt: skip
    return render.table(["run", "suite", "solver", "status", "pass rate", "isolation"], rows)
