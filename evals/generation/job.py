"""The ``eval-generate`` job: a suite generated from the repository labbot serves, as a labbot run.

    python -m labbot.evals.generation.job --count 10 --seed 0 [--deletion function --deletions 2 --prefer deep]

What an agent's ``generate_eval_suite`` tool starts (and ``/lab launch eval-generate count=5``). The repository is
``LABBOT_EVAL_SOURCE`` (the codebase root labbot serves, set by the control plane: an agent cannot name another
path); the suite is written beside the others under ``LABBOT_EVAL_SUITES`` (moved into place whole, so a
half-written suite is never listed), where ``labbot eval list`` finds it. Progress goes to the run's telemetry:
``tasks_done`` as the step, and the job's output says what was done and what was dropped.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from labbot_client import telemetry

TASK_MADE = re.compile(r"task (\d+)/\d+: ")  # the generator's line for each task made


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="labbot.evals.generation.job", description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deletion", choices=("body", "function", "mixed"), default="body", help="what a task deletes")
    p.add_argument("--deletions", type=int, default=1, help="features of one file each task deletes")
    p.add_argument("--prefer", choices=("any", "deep"), default="any", help="deep: the largest bodies first")
    p.add_argument("--source", default=os.environ.get("LABBOT_EVAL_SOURCE"), help="the repository")
    p.add_argument("--suites", default=os.environ.get("LABBOT_EVAL_SUITES"), help="where suites are kept")
    a = p.parse_args(argv)
    if not a.source or not a.suites:
        print("eval-generate: LABBOT_EVAL_SOURCE and LABBOT_EVAL_SUITES are unset (labbot sets them)", file=sys.stderr)
        return 2
    from labbot.common.errors import LabbotError
    from labbot.evals.generation.generator import generate_suite

    client = telemetry.init()
    done = 0

    def progress(text: str) -> None:
        nonlocal done
        print(text, flush=True)
        made = TASK_MADE.match(text)  # "task 3/10: t03-... (2 fail to pass, 40 pass to pass)"
        if made:
            done = int(made.group(1))
            if client is not None:
                telemetry.log(done, tasks_done=float(done))

    suites = Path(a.suites)
    suites.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=suites, prefix=".generating-") as tmp:
        out = Path(tmp) / "suite"
        try:
            suite = generate_suite(
                Path(a.source),
                out,
                count=a.count,
                seed=a.seed,
                progress=progress,
                deletion=a.deletion,
                deletions=a.deletions,
                prefer=a.prefer,
            )
        except LabbotError as e:
            print(f"eval-generate: {e.message}", file=sys.stderr)
            return 1
        dest = suites / suite.id
        run_id = os.environ.get("LABBOT_RUN_ID")
        if run_id and not (suites / ".owners" / f"{suite.id}.json").exists():
            # the control plane reads the suite's owner from the run that made it (the suite is theirs until shared)
            (suites / ".owners").mkdir(exist_ok=True)
            (suites / ".owners" / f"{suite.id}.run").write_text(run_id)
        if dest.exists():
            print(f"suite {suite.id} is already kept (the same repository, commit, count and seed)")
        else:
            shutil.move(str(out), dest)
            print(f"suite {suite.id}: {len(suite.tasks)} tasks; run it with `labbot eval run {suite.id} --solver gold`")
    if client is not None:
        telemetry.log(max(done, len(suite.tasks)), tasks_done=float(len(suite.tasks)))
        telemetry.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
