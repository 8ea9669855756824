"""Telemetry overhead: tiny-lm steps/s with telemetry on vs off, in one run (claim: ratio >= 0.98).

"On" sends every step to a real control plane (`labbot serve`, real SQLite) through labbot_client.telemetry; "off" runs
the same training with no telemetry configured. Trials alternate off/on so drift on this shared machine hits both.

    .venv/bin/python benchmarks/telemetry_overhead.py [--trials 10] [--steps 300]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile

from _harness import control_plane, median, report

from labbot.training.jobs.tiny_lm import TinyLMConfig, train

ENV = ("LABBOT_CONTROL_URL", "LABBOT_RUN_ID", "LABBOT_TELEMETRY_TOKEN", "LABBOT_ATTEMPT")


def one(steps: int, env: dict[str, str] | None) -> float:
    for k in ENV:
        os.environ.pop(k, None)
    os.environ.update(env or {})
    with tempfile.TemporaryDirectory() as ckpt, contextlib.redirect_stdout(io.StringIO()):
        summary = train(TinyLMConfig(steps=steps, checkpoint_every=10**9), checkpoint_dir=ckpt)
    return float(summary["steps_per_s"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    with control_plane() as plane:
        run_id, token = plane.sink_run()
        env = {"LABBOT_CONTROL_URL": plane.serve.url, "LABBOT_RUN_ID": run_id, "LABBOT_TELEMETRY_TOKEN": token}
        one(20, None)  # warm-up: first-touch allocations, thread pools
        off, on = [], []
        for i in range(a.trials):
            pair = [("off", None), ("on", env)] if i % 2 == 0 else [("on", env), ("off", None)]
            for label, e in pair:
                (off if label == "off" else on).append(one(a.steps, e))
        with plane.serve.client() as api:
            stored = len(api.get(f"/runs/{run_id}/metrics/loss").json()["points"])
    ratio = median(on) / median(off)
    print(f"tiny-lm steps/s, telemetry off: median {median(off):.1f}  {[round(x, 1) for x in off]}")
    print(f"tiny-lm steps/s, telemetry on:  median {median(on):.1f}  {[round(x, 1) for x in on]}")
    print(f"ratio on/off = {ratio:.3f} (claim >= 0.98); points stored by the control plane: {stored}")
    assert stored == a.steps, f"telemetry 'on' did not deliver: {stored} points for {a.steps} steps"
    report(
        "telemetry_overhead",
        {
            "off_steps_per_s": median(off),
            "on_steps_per_s": median(on),
            "ratio": ratio,
            "claim": ">= 0.98",
            "ok": ratio >= 0.98,
        },
    )


if __name__ == "__main__":
    main()
