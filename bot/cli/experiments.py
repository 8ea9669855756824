"""``labbot sweep``, ``labbot experiments`` and ``labbot experiment ID [pause|resume|stop|stop-trial N]``: experiments
— a search space swept with seeds as repeats, searched and pruned by Optuna, within limits and a budget. A client of
``/api/v1/experiments``; the search, the pruning and the statistics are the control plane's
(``labbot.training.experiments``)."""

from __future__ import annotations

import argparse
from typing import Any

from labbot.bot.cli.output import CLIError, print_json
from labbot.common.api_client import ApiClient, api_path, check_id, me
from labbot.common.experiment_text import experiment_text, experiments_table, plan_text, summary_text

EXAMPLES = """examples:
  labbot sweep tiny-lm 'lr=loguniform(1e-4,1e-2)' n_embd=32,64,128 steps=300 --metric loss --trials 12 \\
      --concurrency 3 --prune asha
  labbot sweep tiny-lm lr=1e-3,3e-3,1e-2 --search grid --seeds 3 --metric loss --budget 2cpu-h
  labbot sweep tiny-lm 'lr=loguniform(1e-4,1e-2)' --metric loss --plan      what it would run and cost; nothing starts

A space item is NAME=loguniform(LOW,HIGH), uniform(LOW,HIGH), int(LOW,HIGH), choice(A,B,…), a list A,B,… (what a
grid walks) or one value (fixed for every trial). Each trial is a run per seed (an ordinary labbot run: card,
watchdog, restarts from its checkpoint, the compute queue); its score is the mean across seeds with a 95 % interval,
and the best config is called better than the runner-up only when the interval on their difference excludes zero."""


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "sweep",
        help="an experiment: a job over a search space, with seeds, search, early stopping and a budget",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.set_defaults(func=_sweep)
    s.add_argument("job", help="a job name from `labbot jobs`")
    s.add_argument("space", nargs="+", metavar="NAME=EXPR", help="the space, one item per parameter (see below)")
    s.add_argument("--metric", required=True, metavar="M", help="the objective: a metric the job reports")
    s.add_argument("--goal", choices=("min", "max"), help="lower or higher is better (default: by M's name)")
    s.add_argument("--at", default="final", metavar="STEP|final", help="read M at a step, or at the end (default)")
    s.add_argument("--window", type=int, default=3, metavar="N", help="at the end: the mean of M's last N values")
    s.add_argument("--trials", type=int, metavar="N", help="configs to try (default: the grid's size, else 20)")
    s.add_argument("--concurrency", type=int, default=2, metavar="K", help="trials running at once (default 2)")
    s.add_argument("--seeds", type=int, default=1, metavar="S", help="runs of each config, one per seed (default 1)")
    s.add_argument("--search", default="tpe", choices=("grid", "random", "tpe", "cmaes"), help="default: tpe")
    s.add_argument("--prune", default="none", choices=("asha", "hyperband", "median", "none"), help="default: none")
    s.add_argument("--budget", metavar="AMOUNT", help="GPU- or CPU-hours, e.g. 2gpu-h or 10cpu-h")
    s.add_argument("--name", help="a name for the experiment (default: JOB sweep)")
    s.add_argument("--purpose", metavar="P", help="the purpose its runs count against (default: the job's)")
    s.add_argument("--search-seed", type=int, metavar="N", help="the sampler's seed (default: drawn)")
    s.add_argument("--plan", action="store_true", help="show what it would run and cost, and start nothing")
    s.add_argument("--json", action="store_true", help="print the experiment (or the plan) as JSON")

    s = sub.add_parser("experiments", help="experiments, newest first")
    s.set_defaults(func=_experiments)
    s.add_argument("--limit", type=int, default=50)
    s.add_argument("--json", action="store_true")

    s = sub.add_parser(
        "experiment",
        help="one experiment: its trials, ranking and verdict; or pause, resume, stop it, or stop one trial",
    )
    s.set_defaults(func=_experiment)
    s.add_argument("id", help="an experiment id from `labbot experiments`")
    s.add_argument("action", nargs="?", choices=("pause", "resume", "stop", "stop-trial"), help="what to do")
    s.add_argument("trial", nargs="?", type=int, metavar="N", help="stop-trial: the trial's number")
    s.add_argument("--json", action="store_true")


def _body(a: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job": a.job,
        "space": list(a.space),
        "metric": a.metric,
        "at": a.at,
        "window": a.window,
        "concurrency": a.concurrency,
        "seeds": a.seeds,
        "search": a.search,
        "prune": a.prune,
        "owner": me(),
    }
    for key in ("goal", "trials", "budget", "name", "purpose", "search_seed"):
        if getattr(a, key) is not None:
            body[key] = getattr(a, key)
    return body


def _sweep(api: ApiClient, a: argparse.Namespace) -> int:
    body = _body(a)
    if a.plan:
        plan = api.json("POST", "/experiments/plan", json=body)["plan"]
        print_json(plan) if a.json else print(plan_text(plan))
        return 0
    doc = api.json("POST", "/experiments", json=body)["experiment"]
    if a.json:
        print_json(doc)
    else:
        print(summary_text(doc))
        print(f"follow it: labbot experiment {doc['id']}   pause/resume/stop: labbot experiment {doc['id']} stop")
    return 0


def _experiments(api: ApiClient, a: argparse.Namespace) -> int:
    docs = api.json("GET", "/experiments", params={"limit": a.limit})["experiments"]
    print_json(docs) if a.json else print(experiments_table(docs))
    return 0


def _experiment(api: ApiClient, a: argparse.Namespace) -> int:
    exp_id = check_id("experiment", a.id)
    if a.action is None:
        if a.trial is not None:
            raise CLIError("a trial number goes with stop-trial: labbot experiment ID stop-trial N", exit_code=2)
        doc = api.json("GET", api_path("experiments", exp_id))["experiment"]
    elif a.action == "stop-trial":
        if a.trial is None:
            raise CLIError("stop-trial needs the trial's number: labbot experiment ID stop-trial N", exit_code=2)
        path = api_path("experiments", exp_id, "trials", str(a.trial), "stop")
        doc = api.json("POST", path, params={"by": me()})["experiment"]
    else:
        doc = api.json("POST", api_path("experiments", exp_id, a.action), params={"by": me()})
        doc = doc["experiment"]
    print_json(doc) if a.json else print(experiment_text(doc))
    return 0
