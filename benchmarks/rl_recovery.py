"""RL that heals itself: injected faults × seeds, with and without remedies — how many runs reach the target without a
human, and how many steps the signal cost before the rollback. Also healthy runs: how many remedies fire (none should).

Each run is tiny-rl in-process under the watchdog's own judgment: after every step its telemetry goes through
``monitoring.observe`` and ``monitoring.evaluate`` (the rules the server runs), the run's checkpoints and their health
are kept as the ingest keeps them, and a finding is answered by ``remedies.decide`` (the watchdog's decision),
``roll_back`` (the checkpoints after the chosen one set aside, as ``RunService.resubmit`` does) and a new attempt with
the changed parameters and ``LABBOT_RESUME_STEP``. Only the transport is left out (Ray, HTTP, the watchdog's tick): the
end-to-end test ``tests/e2e/test_rl_remedies.py`` shows the server doing the same. A finding that pages (no remedy,
or the remedy's attempts used) ends the run there: a human is needed.

Faults, each from step ``--at`` on every attempt (a restart alone cures none): ``entropy_collapse_at_step`` (the
sampler's temperature annealed to near zero), ``kl_blowup_at_step`` (the learning rate ×20 from then on) and
``grad_spike_at_step`` on a run launched without gradient clipping (``max_grad_norm=0``: one step's gradient ×1e4,
the loss as usual).
The remedies (the job's choice, declared before looking at the results)::

    entropy_collapse: temperature += 1.0; max 2
    kl_blowup: lr *= 0.1; max 2
    grad_spike: max_grad_norm = 1.0; max 1

The target: the held-out pass rate at the last step at least ``--target`` (0.9; the warm-up starts at about 0.9 and
a healthy run ends near 0.98), reached without a page. Wasted steps: from the step the signal began to the step the
run was stopped, as a share of the run's steps.

    .venv/bin/python benchmarks/rl_recovery.py [--seeds 5] [--steps 100] [--at 40] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _harness import report

from labbot.training.checkpoint_health import last_good
from labbot.training.jobs.tiny_rl import TinyRLConfig, load_or_warmup, train
from labbot.training.monitoring import PAGE, RunState, Thresholds, evaluate, observe
from labbot.training.remedies import Act, Exhausted, Remedy, decide, lineage, parse_remedy
from labbot_client.checkpoints import roll_back

REMEDIES = (
    "entropy_collapse: temperature += 1.0; max 2",
    "kl_blowup: lr *= 0.1; max 2",
    "grad_spike: max_grad_norm = 1.0; max 1",
)
FAULTS = {
    "entropy_collapse": {"entropy_collapse_at_step": "AT"},
    "kl_blowup": {"kl_blowup_at_step": "AT"},
    "grad_spike": {"grad_spike_at_step": "AT", "max_grad_norm": 0.0},
}


class Stop(Exception):
    def __init__(self, findings: list[Any], step: int) -> None:
        self.findings, self.step = findings, step


def supervised(cfg: TinyRLConfig, remedies: list[Remedy]) -> dict[str, Any]:
    """One run under the watchdog's rules and, if any, its remedies: attempts until it ends or pages."""
    history: list[dict[str, Any]] = []
    checkpoints: list[dict[str, Any]] = []
    attempt, resume = 1, None
    signal = stopped = None
    t0 = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as ckpt:
        while True:
            os.environ["LABBOT_ATTEMPT"] = str(attempt)
            os.environ.pop("LABBOT_RESUME_STEP", None)
            if resume is not None:
                os.environ["LABBOT_RESUME_STEP"] = str(resume)
            vitals: dict[str, Any] = {}
            warned: set[str] = set()

            def on_step(
                step: int,
                metrics: dict[str, float],
                attempt: int = attempt,
                every: int = cfg.checkpoint_every,
                warned: set[str] = warned,
            ) -> None:
                nonlocal vitals
                when = t0 + timedelta(seconds=step)
                vitals = observe(vitals, attempt, [(step, when, metrics)], now=when)
                if every and step % every == 0:
                    checkpoints.append({"attempt": attempt, "step": step, "metrics": dict(metrics)})
                state = RunState(
                    run_id="bench", status="running", ray_status="RUNNING", ray_error_type=None, ray_message="",
                    attempt=attempt, attempt_started_at=t0, last_telemetry_at=when, last_step=step, last_step_at=when,
                    vitals=vitals, thresholds=Thresholds(),
                )  # fmt: skip
                found = evaluate(state, when)
                warned.update(f.kind for f in found if f.severity != PAGE)
                acted = [f for f in found if any(r.acts_on(f.kind, f.alert, f.detail.get("reason")) for r in remedies)]
                # a remedy's finding whose attempts are used pages only if it is a page (a warning is said, and the
                # run goes on); a page no remedy covers stops the run for a human
                if acted and _decide(acted, step) is not None:
                    raise Stop(acted, step)
                paging = [f for f in found if f.severity == PAGE]
                if paging:
                    raise Stop(paging, step)

            def _decide(found: list[Any], step: int) -> Act | Exhausted | None:
                findings = [(f.kind, f.alert, f.detail.get("reason"), f.detail) for f in found]
                decision = decide(remedies, findings, history, lambda s: None, {}, step)  # only: act or not
                if isinstance(decision, Exhausted) and found[0].severity != PAGE:
                    return None
                return decision

            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    summary = train(cfg, checkpoint_dir=ckpt, on_step=on_step)
            except Stop as stop:
                findings = [(f.kind, f.alert, f.detail.get("reason"), f.detail) for f in stop.findings]
                kept = lineage(checkpoints, history)

                def choose(step: int, kept: list[dict[str, Any]] = kept) -> int | None:
                    c = last_good(kept, step)
                    return int(c["step"]) if c is not None else None

                params = asdict(cfg)
                decision = decide(remedies, findings, history, choose, params, stop.step)
                first = stop.findings[0]
                if signal is None:
                    signal = int(first.detail.get("since_step") or first.detail.get("step") or stop.step)
                    stopped = stop.step
                if decision is None or isinstance(decision, Exhausted):
                    return _result(first.kind, attempt, signal, stopped, len(history), None, warned)
                assert isinstance(decision, Act)
                attempt += 1
                history.append(
                    {"attempt": attempt, "remedy": decision.remedy, "checkpoint_step": decision.checkpoint_step}
                )
                roll_back(Path(ckpt), decision.checkpoint_step, label=f"attempt-{attempt}")
                resume = decision.checkpoint_step or 0
                cfg = replace(cfg, **{d["param"]: d["to"] for d in decision.diff})
                continue
            final = summary["final_pass_rate"]
            return _result(None, attempt, signal, stopped, len(history), final, warned)


def _result(
    paged: str | None,
    attempts: int,
    signal: int | None,
    stopped: int | None,
    remedied: int,
    final: Any,
    warned: set[str],
) -> dict[str, Any]:
    return {"paged": paged, "attempts": attempts, "signal": signal, "stopped": stopped, "remedied": remedied,
            "final": final, "warned": sorted(warned)}  # fmt: skip


def spread(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"{statistics.median(xs):.3g} ({min(xs):.3g}..{max(xs):.3g})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--at", type=int, default=40, help="the step each fault starts at")
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 30 steps, the fault at 15")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.steps, a.at = 1, 30, 15
    remedies = [parse_remedy(r, "bench") for r in REMEDIES]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tiny-rl-warmup-") as warm:
        base = TinyRLConfig(
            steps=a.steps, eval_every=10, checkpoint_every=10, log_every=10**6, warmup_dir=warm, num_threads=1
        )
        with contextlib.redirect_stdout(io.StringIO()):
            load_or_warmup(base, Path(warm), verbose=True)
        rows: dict[str, dict[str, Any]] = {}
        for fault, overrides in {"healthy": {}, **FAULTS}.items():
            for label, declared in (("with remedies", remedies), ("without", [])):
                if fault == "healthy" and label == "without":
                    continue
                runs = []
                for seed in range(a.seeds):
                    kw = {k: (a.at if v == "AT" else v) for k, v in overrides.items()}
                    out = supervised(replace(base, rl_seed=seed, **kw), declared)
                    out["reached"] = out["final"] is not None and out["final"] >= a.target
                    runs.append(out)
                key = f"{fault} {label}"
                wasted = [(r["stopped"] - r["signal"]) / a.steps for r in runs if r["signal"] is not None]
                rows[key] = {
                    "reached": sum(r["reached"] for r in runs),
                    "runs": len(runs),
                    "remedial_attempts": [r["remedied"] for r in runs],
                    "paged": [r["paged"] for r in runs],
                    "final_pass_rate": [r["final"] for r in runs],
                    "wasted_share": wasted,
                    "warned": sorted({w for r in runs for w in r["warned"]}),
                }
                print(
                    f"{key:32s} reached {rows[key]['reached']}/{len(runs)} without a human; remedial attempts "
                    f"{rows[key]['remedial_attempts']}; paged {[p for p in rows[key]['paged'] if p]}; wasted after "
                    f"the signal {spread(wasted)} of the run; final pass rates "
                    f"{[round(f, 3) if f is not None else None for f in rows[key]['final_pass_rate']]}"
                    + (f"; warnings {rows[key]['warned']}" if rows[key]["warned"] else "")
                )
    healthy = rows["healthy with remedies"]
    print(f"healthy runs: {sum(healthy['remedial_attempts'])} remedies fired over {a.seeds} seeds (claim: 0)")
    report(
        "rl_recovery",
        {
            "ok": sum(healthy["remedial_attempts"]) == 0,
            "rows": rows,
            "seeds": a.seeds,
            "steps": a.steps,
            "fault_at": a.at,
            "target": a.target,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )


if __name__ == "__main__":
    main()
