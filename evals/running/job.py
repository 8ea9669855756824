"""The eval job: one eval run of a suite, as labbot launches it on the cluster (a Ray job) or by hand::

    python -m labbot.evals.running.job --suite DIR|SUITE_ID --solver S [--out DIR] [--max-samples N] [--venv DIR]
        [--model M] [--timeout SECONDS] [--memory-mb N] [--test-timeout SECONDS] [--tasks ID,ID] [--tamper true|false]
        [--battery alongside|first]
        [--solver-dir NAME] [--allow-hosts HOST,HOST] [--solver-env NAME,NAME --solver-env-file ID]
        [--fan-out auto|on|off]

It runs :func:`labbot.evals.running.runner.run_suite` (the isolation probes alongside the samples through inspect) and
leaves in ``--out``: ``results.json`` and the ``.eval`` log. Exit status: 0 when every sample ran to a verdict (whatever
the pass rate, and also when the seal failed: ``results.json`` then says ``untrusted``), 1 when the run failed, 2 on bad
arguments (with the reason on stderr).

Environment (all optional, so the job also runs by hand):

* whatever ``labbot_client.telemetry`` reads (``LABBOT_CONTROL_URL``, ``LABBOT_RUN_ID``,
  ``LABBOT_TELEMETRY_TOKEN``, ``LABBOT_ATTEMPT``): step 0 reports ``isolation_score`` and ``probes_failed``; each
  scored sample reports ``samples_done``, ``samples_total``, ``samples_passed`` and ``pass_rate`` (so far), at
  step = samples done;
* ``LABBOT_EVAL_MODEL``: the agent's model when neither ``--solver agent:MODEL`` nor ``--model`` names one;
* the model provider's key (``ANTHROPIC_API_KEY`` for ``anthropic/...``), read by inspect;
* ``LABBOT_EVAL_VENV_CACHE``: where ``evals.sandbox.venvs`` keeps the venvs it builds from a suite's wheels, when
  ``--venv`` is not given (default: the generator's cache);
* ``LABBOT_EVAL_ALLOW_HOSTS``: hosts the samples may reach through the allow-list proxy (none by default);
* ``LABBOT_EVAL_PROTECT``: paths the isolation probes check no sandbox can see (labbot's home).
* ``LABBOT_EVAL_SEAL_CACHE``: ``0`` runs every probe (default: passing verdicts of the probes that do not depend on
  the suite are reused for a day, :mod:`labbot.evals.seal.cache`).
* ``LABBOT_EVAL_SOLVER_DIRS``: ``[eval] solver_dirs`` as JSON; ``--solver-dir NAME`` is one of them, bound read-only
  at ``/solver`` for a command solver and for the battery (by hand, without it, ``--solver-dir`` is a path);
  ``--allow-hosts`` are the run's own hosts (checked against ``[eval] solver_hosts`` at launch), added to
  ``LABBOT_EVAL_ALLOW_HOSTS`` for the solver and the battery; ``--solver-env-file`` the id of the variables the
  launch kept under ``$LABBOT_EVAL_SUITES/.solver-env/`` (read once, deleted, given to the command solver only):
  :mod:`labbot.evals.running.solver_access`.

In a Ray cluster of two or more nodes with CPUs (the job's driver: ``RAY_ADDRESS``), the samples run as Ray tasks
across the nodes, each sandboxed on the node that runs it and each node building the suite's venv once
(:mod:`labbot.evals.running.fan_out`), into the same ``results.json`` and ``.eval`` log; ``--fan-out off`` keeps them
on the driver's node, ``on`` insists. A command solver's folder or variables keep them there (they never travel).

Alongside the samples, the isolation battery (``labbot.evals.seal.battery``) runs in a fresh sandbox of the first task,
and the reward-tampering probes unless ``--tamper false`` (or ``--no-tamper``) leaves them out, for a quick look only
(its isolation report then lacks them).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from labbot.common.durations import format_duration
from labbot.common.errors import BadRequest
from labbot.evals.generation.generator import default_cache
from labbot.evals.running.fan_out import fan_out_refusal, in_a_cluster, sample_nodes
from labbot.evals.running.runner import SAMPLE_LIMITS, Probes, run_suite
from labbot.evals.running.solver_access import job_solver_dir, read_secrets
from labbot.evals.running.solvers import parse_solver
from labbot.evals.running.task import SampleDone
from labbot.evals.sandbox.bwrap import Limits
from labbot.evals.sandbox.venvs import ensure_venv
from labbot.evals.seal.battery import allow_hosts_from_env, battery
from labbot.evals.seal.cache import seal_cache
from labbot.evals.seal.report import IsolationReport
from labbot.evals.suite import SUITE_ID, Suite, load, wheels_dir
from labbot_client import telemetry

ENV_MODEL = "LABBOT_EVAL_MODEL"
ENV_SUITES = "LABBOT_EVAL_SUITES"
ENV_VENV_CACHE = "LABBOT_EVAL_VENV_CACHE"
FAN_OUT = ("auto", "on", "off")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def build_parser() -> argparse.ArgumentParser:
    """The flags; each two-word flag also takes ``_`` (``--max_samples``), as labbot's launcher writes parameters
    as ``--key value``; an empty ``--venv``/``--model``/``--tasks`` means the default."""
    p = argparse.ArgumentParser(
        prog="python -m labbot.evals.running.job",
        description="Run an eval suite with a solver; write results.json and the .eval log.",
        allow_abbrev=False,
    )
    p.add_argument("--suite", required=True, help=f"the suite folder, or a suite id kept in ${ENV_SUITES}")
    p.add_argument("--solver", required=True, help="gold | none | agent[:PROVIDER/MODEL] | a shell command")
    p.add_argument(
        "--out", default="", help="where results.json and the .eval log go (default: the run's eval/ folder)"
    )
    p.add_argument("--max-samples", "--max_samples", type=int, default=4, help="samples run in parallel")
    p.add_argument("--venv", default="", help="the suite's venv (default: built from its wheels)")
    p.add_argument("--model", default="", help=f"the agent's default model (else ${ENV_MODEL})")
    p.add_argument("--timeout", type=float, default=SAMPLE_LIMITS.timeout_s, help="per-sample solver limit, s")
    p.add_argument(
        "--memory-mb", "--memory_mb", type=int, default=SAMPLE_LIMITS.memory_mb, help="per-command address space"
    )
    p.add_argument("--test-timeout", "--test_timeout", type=float, default=600.0, help="the test run's limit, s")
    p.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    p.add_argument("--tamper", type=_bool, default=True, help="run the reward-tampering probes (true|false)")
    p.add_argument(
        "--battery",
        choices=("alongside", "first"),
        default="alongside",
        help="run the isolation battery alongside the samples (default) or before them",
    )
    p.add_argument("--no-tamper", dest="tamper", action="store_false", help="the same as --tamper false")
    p.add_argument("--solver-dir", "--solver_dir", default="", help="a name of [eval] solver_dirs, bound at /solver")
    p.add_argument("--allow-hosts", "--allow_hosts", default="", help="the run's own hosts, comma-separated")
    p.add_argument("--solver-env", "--solver_env", default="", help="the names of the solver's variables")
    p.add_argument("--solver-env-file", "--solver_env_file", default="", help="the id of the file that holds them")
    p.add_argument(
        "--fan-out",
        "--fan_out",
        choices=FAN_OUT,
        default="auto",
        help="samples as Ray tasks across the cluster's nodes: auto (when it has two or more with CPUs), on, off",
    )
    return p


def resolve_suite(given: str) -> Path:
    """A folder as given, or a suite id under ``$LABBOT_EVAL_SUITES`` (where labbot keeps the suites it was sent)."""
    if SUITE_ID.fullmatch(given):
        root = os.environ.get(ENV_SUITES)
        if not root:
            raise BadRequest(f"--suite {given} is a suite id, but ${ENV_SUITES} (where suites are kept) is not set")
        return Path(root) / given
    return Path(given)


def resolve_out(given: str) -> Path:
    """``--out``, else the run's own ``eval/`` folder beside its checkpoints (where the control plane reads it)."""
    if given:
        return Path(given)
    ckpt = os.environ.get("LABBOT_CHECKPOINT_DIR")
    if not ckpt:
        raise BadRequest("--out is required outside labbot (no LABBOT_CHECKPOINT_DIR to put the results beside)")
    return Path(ckpt).parent / "eval"


def resolve_venv(suite_dir: Path, given: Path | None) -> Path:
    """``--venv``, else the suite's venv built from its wheels (cached by the wheel set)."""
    if given is not None:
        return given
    cache = Path(os.environ[ENV_VENV_CACHE]) if os.environ.get(ENV_VENV_CACHE) else default_cache()
    return ensure_venv(wheels_dir(suite_dir), cache)


def sandbox_battery(
    suite_dir: Path, suite: Suite, venv: Path, *, allow_hosts: Sequence[str] = (), solver_dir: Path | None = None
) -> Probes:
    """The history, leftovers, network and host probes in a fresh sandbox of the first task (``evals.seal.battery``),
    with the solver's network policy and folder (``/solver``); the runner adds the tampering probes. The passing
    verdicts of the probes that do not depend on the suite are reused for a day (``evals.seal.cache``; off with
    ``LABBOT_EVAL_SEAL_CACHE=0``)."""
    cache = seal_cache()
    return lambda: battery(suite_dir, suite.tasks[0], venv, allow_hosts=allow_hosts, solver_dir=solver_dir, cache=cache)


def fan_out_choice(given: str, solver_dir: Path | None, env: dict[str, str]) -> tuple[bool, str]:
    """Whether the samples fan out over the cluster (``--fan-out``), and what to print about it. ``auto`` fans out
    inside a Ray cluster of two or more nodes with CPUs, unless the run has what must not travel (then it says why);
    ``on`` insists (a clear refusal where it cannot); ``off`` keeps every sample on this node."""
    if given == "off":
        return False, ""
    why = fan_out_refusal(None, solver_dir, env)
    if not in_a_cluster():
        if given == "on":
            raise BadRequest("--fan-out on needs a Ray cluster: run it as a Ray job (RAY_ADDRESS names the cluster)")
        return False, ""
    if why:
        if given == "on":
            raise BadRequest(f"--fan-out on: the samples cannot leave this node: {why}")
        return False, f"samples on this node: {why}"
    nodes = sample_nodes()
    if given == "auto" and len(nodes) < 2:
        return False, ""
    names = ", ".join(str(n.get("NodeName") or n.get("NodeManagerAddress")) for n in nodes)
    return True, f"samples fan out as Ray tasks over {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({names})"


def run_hosts(given: str) -> tuple[str, ...]:
    """``LABBOT_EVAL_ALLOW_HOSTS`` (every run's) and the run's own ``--allow-hosts``."""
    own = [h.strip() for h in given.split(",") if h.strip()]
    return tuple(dict.fromkeys([*allow_hosts_from_env(), *own]))


def solver_env(names: str, ident: str) -> dict[str, str]:
    """The variables the launch kept for this run (read once: the file is deleted), or none."""
    wanted = [n for n in names.split(",") if n]
    if not ident and not wanted:
        return {}
    if not ident or not wanted:
        raise BadRequest("--solver-env and --solver-env-file go together (labbot's launch writes both)")
    root = os.environ.get(ENV_SUITES)
    if not root:
        raise BadRequest(f"--solver-env-file needs ${ENV_SUITES}, where labbot keeps the file")
    return read_secrets(Path(root), ident, wanted)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Ray stops a job with SIGTERM: exit through Python so telemetry's atexit flush sends the last points
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    try:
        env = solver_env(args.solver_env, args.solver_env_file)  # first: the file is deleted whatever happens next
        spec = parse_solver(args.solver, default_model=args.model or os.environ.get(ENV_MODEL) or None)
        solver_dir = job_solver_dir(args.solver_dir) if args.solver_dir else None
        if spec.kind != "cmd" and (solver_dir is not None or env):
            raise BadRequest(f"--solver-dir and --solver-env are for a command solver, not {spec.label}")
        hosts = run_hosts(args.allow_hosts)
        args.suite = resolve_suite(args.suite)
        args.out = resolve_out(args.out)
        suite = load(args.suite)
        venv = resolve_venv(args.suite, Path(args.venv) if args.venv else None)
        probes = sandbox_battery(args.suite, suite, venv, allow_hosts=hosts, solver_dir=solver_dir)
        if args.timeout <= 0 or args.test_timeout <= 0 or args.memory_mb <= 0:
            raise BadRequest("--timeout, --test-timeout and --memory-mb must be positive")
        fan_out, said = fan_out_choice(args.fan_out, solver_dir, env)
    except BadRequest as e:
        print(f"labbot eval: {e.message}", file=sys.stderr)
        return 2

    telemetry.init()
    if said:
        print(said, flush=True)

    started = time.monotonic()
    phases: dict[str, float] = {}

    def on_isolation(report: IsolationReport) -> None:
        phases["battery"] = time.monotonic() - started
        print(f"{report.headline()} (isolation battery: {format_duration(phases['battery'])})", flush=True)
        for p in report.failed():
            print(f"  open: [{p.category}] {p.name}: {p.evidence[:300]}", flush=True)
        telemetry.log(0, isolation_score=report.score, probes_failed=len(report.failed()))

    def on_sample(done: SampleDone) -> None:
        rate = done.passed_so_far / done.done
        print(
            f"sample {done.done}/{done.total} {done.task}: {'passed' if done.passed else 'failed'} "
            f"(pass rate so far {rate:.1%})",
            flush=True,
        )
        telemetry.log(
            done.done,
            samples_done=done.done,
            samples_total=done.total,
            samples_passed=done.passed_so_far,
            pass_rate=rate,
        )

    limits = Limits(timeout_s=args.timeout, memory_mb=args.memory_mb, file_mb=SAMPLE_LIMITS.file_mb)
    try:
        outcome = run_suite(
            args.suite,
            spec,
            args.out,
            venv=venv,
            max_samples=args.max_samples,
            limits=limits,
            test_timeout_s=args.test_timeout,
            probes=probes,
            tamper=args.tamper,
            task_ids=[t for t in args.tasks.split(",") if t] or None,
            on_sample=on_sample,
            on_isolation=on_isolation,
            allow_hosts=hosts,
            solver_dir=solver_dir,
            solver_env=env,
            battery=args.battery,
            seal_cache=seal_cache(),
            fan_out=fan_out,
            node_venv=Path(args.venv) if args.venv else None,
        )
    except BadRequest as e:
        print(f"labbot eval: {e.message}", file=sys.stderr)
        return 2
    finally:
        telemetry.finish()
    r = outcome.results
    passed = sum(s["passed"] for s in r["samples"])
    total = time.monotonic() - started
    battery_s = phases.get("battery", 0.0)
    if args.battery == "first":
        timing = f"isolation battery {battery_s:.1f} s before the samples, samples {total - battery_s:.1f} s"
    else:
        timing = f"isolation battery {battery_s:.1f} s alongside the samples, samples {total:.1f} s"
    print(f"timing: {timing} ({len(r['samples'])} samples, {args.max_samples} at once)", flush=True)
    where: dict[str, int] = {}
    for sample in r["samples"]:
        if sample.get("node"):
            where[sample["node"]] = where.get(sample["node"], 0) + 1
    if where:
        print("samples by node: " + ", ".join(f"{node} {n}" for node, n in sorted(where.items())), flush=True)
    print(
        f"{r['suite']} with {r['solver']}: {r['status']}, pass rate {r['pass_rate']:.1%} "
        f"({passed}/{len(r['samples'])}){' UNTRUSTED (seal failed)' if r['untrusted'] else ''}; "
        f"results in {outcome.results_path}, log {outcome.log.name}",
        flush=True,
    )
    if r["status"] != "succeeded":
        print("labbot eval: the run failed (see the .eval log: inspect view --log-dir OUT)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
