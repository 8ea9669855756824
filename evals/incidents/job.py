"""The ``eval-incidents`` job: an incident suite run as a labbot run (``/lab eval run incidents-… --solver MODEL``)::

    python -m labbot.evals.incidents.job --suite incidents-…|DIR --solver agent:PROVIDER/MODEL [--judge PROVIDER/MODEL]

Each case's frozen context goes to the solver's model; a judge model grades its diagnosis against the recorded cause
(:mod:`labbot.evals.incidents.runner`). ``results.json`` and the ``.eval`` log go to ``--out`` (default: the run's
``eval/`` folder). The judge is ``--judge``, else ``$LABBOT_EVAL_JUDGE``, else the solver's own model (said in the
output: a model grading itself is a weaker check). Exit status: 0 when every case got a verdict or was unjudged,
1 when the run failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from labbot.common.errors import BadRequest
from labbot.evals.incidents.cases import INCIDENT_SUITE_ID
from labbot.evals.running.job import ENV_MODEL, ENV_SUITES, resolve_out
from labbot.evals.running.task import SampleDone
from labbot_client import telemetry

ENV_JUDGE = "LABBOT_EVAL_JUDGE"
MODEL = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*/[A-Za-z0-9][^\s]*")  # PROVIDER/MODEL, as inspect names models


def check_incident_solver(solver: str) -> None:
    """At launch: BadRequest unless ``solver`` is a form an incident suite takes. A plain ``agent`` is the job's
    configured model (``$LABBOT_EVAL_MODEL`` where it runs), so it is resolved there, not here."""
    if solver.strip() != "agent":
        incident_model(solver, None)


def incident_model(solver: str, default: str | None) -> str:
    """``agent:PROVIDER/MODEL``, ``PROVIDER/MODEL`` or ``agent`` (the configured default) as the model to ask."""
    text = solver.strip()
    if text.startswith("agent:"):
        text = text[len("agent:") :]
    elif text == "agent":
        if not default:
            raise BadRequest(f"--solver agent needs a default model: set ${ENV_MODEL}, or give agent:PROVIDER/MODEL")
        text = default
    if not MODEL.fullmatch(text):
        raise BadRequest(
            f"an incident suite is solved by a model: agent, agent:PROVIDER/MODEL or PROVIDER/MODEL, got {solver!r} "
            "(gold, none and shell commands are for code suites)"
        )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="labbot.evals.incidents.job", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", required=True)
    p.add_argument("--solver", default="agent")
    p.add_argument("--judge", default="")
    p.add_argument("--out", default="")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    try:
        model = incident_model(a.solver, os.environ.get(ENV_MODEL) or None)
        judge = a.judge or os.environ.get(ENV_JUDGE) or model
        if INCIDENT_SUITE_ID.fullmatch(a.suite):
            root = os.environ.get(ENV_SUITES)
            if not root:
                raise BadRequest(f"--suite {a.suite} is a suite id, but ${ENV_SUITES} is not set")
            suite_dir = Path(root) / a.suite
        else:
            suite_dir = Path(a.suite)
        out = resolve_out(a.out)
    except BadRequest as e:
        print(f"labbot eval-incidents: {e.message}", file=sys.stderr)
        return 2
    if judge == model:
        print(f"the judge is the solver's own model ({model}): set --judge or ${ENV_JUDGE} for an independent one")
    from labbot.evals.incidents.runner import run_incidents  # inspect: a heavy import, after the arguments are checked

    telemetry.init()

    def on_sample(done: SampleDone) -> None:
        print(f"case {done.done}/{done.total} {done.task}: {'correct' if done.passed else 'not passed'}", flush=True)
        telemetry.log(
            done.done,
            samples_done=done.done,
            samples_total=done.total,
            samples_passed=done.passed_so_far,
            pass_rate=done.passed_so_far / done.done,
        )

    try:
        results = run_incidents(
            suite_dir,
            out,
            model=model,
            judge=judge,
            suite_id=suite_dir.name,
            solver_label=f"agent:{model}",
            on_sample=on_sample,
        )
    except BadRequest as e:
        print(f"labbot eval-incidents: {e.message}", file=sys.stderr)
        return 2
    finally:
        telemetry.finish()
    print(
        f"{results['suite']} with {results['solver']} judged by {results['judge']}: {results['status']}, pass rate "
        f"{results['pass_rate']:.1%}, {results['unjudged']} unjudged",
        flush=True,
    )
    return 0 if results["status"] == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
