"""Eval throughput: the gold solver over a suite as a Ray job (the ``eval`` job: probes, sandboxes, inspect,
scoring), tasks per minute, against running the same tests bare.

The claim (as restated when the eval harness was built, and as the README states it): the **samples phase** — every
sample's sandbox, solver and sealed scoring, from the first sample's start to the last one's end in the ``.eval``
log — runs at >= 0.7 x the bare tests' rate on tasks with at least a second of tests (``--repo filler``, the
default: 1.3 s a run). The whole run's ratio is printed beside it: it adds fixed costs (Ray's job start, imports,
inspect's start, the wait for the isolation battery) of several seconds, so it reaches 0.7 only once a suite's bare
test time is well past them (about 40 s of tests here); on inflection alone (0.3 s a run) it is ~0.15.

The suite: ``--count`` tasks generated from inflection 0.5.1 (a real project, its sdist pinned by sha256). Bare: for
each task, the original tree copied and its ``fail_to_pass`` + ``pass_to_pass`` test files run with ``python -m pytest``
in the suite's venv, no sandbox, one after another (the whole suite collected when the lists span more than
``testrun.MAX_NAMED_FILES`` files, as labbot's own test runs do). Labbot: ``python -m labbot.evals.running.job``
submitted to a real local Ray head (embedded, as ``labbot serve`` starts it) and waited for, with ``--max-samples``
samples at once; its wall time covers Ray's job start, the isolation battery (sandbox and tampering probes) and every
sample's solver and scoring. One run each (the claim is about one run); the job's own stages are printed too.

    .venv/bin/python benchmarks/eval_throughput.py [--count 6] [--max-samples 2] [--repo filler|inflection]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from real_repos import INFLECTION, committed_repo, fetch_sdist  # noqa: E402

from labbot.evals.generation.generator import default_cache, generate_suite  # noqa: E402
from labbot.evals.sandbox.venvs import ensure_venv  # noqa: E402
from labbot.evals.scoring.testrun import MAX_NAMED_FILES  # noqa: E402
from labbot.evals.suite import load, original_dir, wheels_dir  # noqa: E402
from labbot.training.ray_cluster import EmbeddedRayHead  # noqa: E402

CLAIM = 0.7


def _when(stamp: object) -> datetime:
    return stamp if isinstance(stamp, datetime) else datetime.fromisoformat(str(stamp))


def samples_span(log_path: Path) -> float:
    """Seconds from the first sample's start to the last one's end, as the run's ``.eval`` log records them."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_path))
    starts = [s.started_at for s in log.samples or []]
    ends = [s.completed_at for s in log.samples or []]
    if not starts or not all(starts) or not all(ends):
        raise SystemExit("the .eval log has no sample start/end times: cannot tell the samples phase")
    return (max(map(_when, ends)) - min(map(_when, starts))).total_seconds()


def bare(suite_dir: Path, venv: Path) -> float:
    """Every task's tests on the original, outside any sandbox, one after another: seconds."""
    suite = load(suite_dir)
    start = time.perf_counter()
    for task in suite.tasks:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "work"
            shutil.copytree(original_dir(suite_dir), work)
            files = sorted({n.split("::")[0] for n in [*task.fail_to_pass, *task.pass_to_pass]})
            if len(files) > MAX_NAMED_FILES:  # as testrun does: naming hundreds of files is slower than collecting
                files = []
            cmd = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *files]
            subprocess.run(cmd, cwd=work, capture_output=True, check=True, timeout=600)
    return time.perf_counter() - start


def on_ray(suite_dir: Path, venv: Path, out: Path, max_samples: int, home: Path) -> tuple[float, str]:
    """The eval job submitted to a real Ray head and waited for: seconds, and its log."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    head = EmbeddedRayHead(home)
    conn = head.ensure()
    try:
        client = JobSubmissionClient(conn.address, headers=dict(conn.headers))
        entry = (
            f"{sys.executable} -m labbot.evals.running.job --suite {suite_dir} --solver gold --out {out} "
            f"--venv {venv} --max-samples {max_samples}"
        )
        start = time.perf_counter()
        sid = client.submit_job(entrypoint=entry, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        while client.get_job_status(sid) not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
            time.sleep(0.2)
        took = time.perf_counter() - start
        logs = client.get_job_logs(sid)
        if client.get_job_status(sid) != JobStatus.SUCCEEDED:
            raise SystemExit(f"the eval job failed:\n{logs[-3000:]}")
        return took, logs
    finally:
        head.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=6)
    ap.add_argument("--max-samples", type=int, default=2)
    ap.add_argument(
        "--repo",
        choices=("inflection", "filler"),
        default="filler",
        help="inflection alone (455 tests, 0.3 s a run), or it with 1,000 files of filler (1,441 tests, 1.3 s a run)",
    )
    a = ap.parse_args()
    cache = default_cache()
    with tempfile.TemporaryDirectory(prefix="labbot-throughput-") as tmp:
        t = Path(tmp)
        if a.repo == "filler":
            from eval_generate import make_repo

            repo = make_repo(t / "checkout", 1000, cache)
        else:
            repo = committed_repo(fetch_sdist(*INFLECTION, cache / "sdists"), t / "checkout")
        suite = generate_suite(repo, t / "suite", count=a.count, seed=11, cache=cache)
        venv = ensure_venv(wheels_dir(t / "suite"), cache)
        n = len(suite.tasks)
        bare_s = bare(t / "suite", venv)
        ray_s, logs = on_ray(t / "suite", venv, t / "out", a.max_samples, t / "ray-home")
        results = json.loads((t / "out" / "results.json").read_text())
        samples_s = samples_span(t / "out" / results["log"])
    assert results["pass_rate"] == 1.0, results["pass_rate"]
    bare_rate, ray_rate = 60 * n / bare_s, 60 * n / ray_s
    ratio = ray_rate / bare_rate
    print(f"suite: {n} tasks from {a.repo}; gold pass rate {results['pass_rate']:.0%}")
    print(f"bare tests:           {bare_s:7.1f} s  {bare_rate:6.1f} tasks/min")
    print(f"eval job on Ray:      {ray_s:7.1f} s  {ray_rate:6.1f} tasks/min  (max-samples {a.max_samples})")
    print(f"ratio (eval / bare):  {ratio:.2f}  (the whole run, fixed costs included: for contrast)")
    print(f"isolation: {results['isolation']['score']:.0%} of {len(results['isolation']['probes'])} probes")
    timing = next((ln for ln in logs.splitlines() if ln.startswith("timing:")), "")
    print(timing)
    # the samples phase: from the first sample's start to the last one's end (the .eval log's own times: every
    # sample's sandbox, solver and sealed scoring, with the isolation battery alongside); the rest is fixed cost
    # (Ray's job start, imports, inspect's start, the wait for the battery, results)
    samples_ratio = bare_s / samples_s
    met = "met" if samples_ratio >= CLAIM else "NOT met"
    print(f"samples phase vs bare: {samples_ratio:.2f}  ({samples_s:.1f} s for {n} samples; fixed costs "
          f"{ray_s - samples_s:.1f} s: Ray's job start, imports, the wait for the battery)  (claim >= {CLAIM}: "
          f"{met})")  # fmt: skip
    result = {
        "repo": a.repo,
        "tasks": n,
        "bare_s": round(bare_s, 2),
        "ray_s": round(ray_s, 2),
        "ratio": round(ratio, 3),
        "samples_vs_bare": round(bare_s / samples_s, 3),
    }
    claim = f"samples phase >= {CLAIM} x bare tests"
    print(json.dumps({"benchmark": "eval_throughput", **result, "claim": claim, "ok": samples_ratio >= CLAIM}))


if __name__ == "__main__":
    main()
