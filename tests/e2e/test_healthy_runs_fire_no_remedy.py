"""Healthy runs fire no remedy: tiny-rl and tiny-lm over five seeds each, on the session's Ray head under a real
`labbot serve`, each launched with a remedy on every finding a remedy may act on. None fires: every run ends on its
first attempt with no lineage, and none is paged for an RL condition or a divergence."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from support import Serve, wait_for

from labbot.training.jobs.tiny_rl import TinyRLConfig, load_or_warmup
from labbot.training.remedies import FINDINGS

ON_EVERYTHING = f"{', '.join(f for f in FINDINGS if f != 'nan')}: lr *= 0.5; max 1"
# a small tiny-rl whose warm-up can add (so its rewards carry a signal) and a small tiny-lm, one torch thread each
RL = {
    "n_digits": 1,
    "steps": 25,
    "group_size": 4,
    "prompts_per_step": 4,
    "eval_every": 25,
    "eval_size": 20,
    "gate_size": 40,
    "gate_max_ratio": 100.0,
    "warmup_steps": 400,
    "warmup_min_pass_rate": 0.5,
    "warmup_batch": 16,
    "n_embd": 32,
    "num_threads": 1,
}
LM = {"steps": 60, "log_every": 1, "checkpoint_every": 0, "n_layer": 1, "n_embd": 32, "batch_size": 8, "num_threads": 1}
SEEDS = range(5)

pytestmark = pytest.mark.timeout(600)


def test_healthy_tiny_rl_and_tiny_lm_runs_over_five_seeds_fire_no_remedy(serve: Serve, tmp_path: Path) -> None:
    warm = tmp_path / "warmup"
    with contextlib.redirect_stdout(io.StringIO()):  # the five tiny-rl runs share one warm-up, trained here once
        load_or_warmup(TinyRLConfig(**RL, warmup_dir=str(warm)), warm, verbose=True)  # type: ignore[arg-type]
    launches: list[dict[str, Any]] = [
        {"job": "tiny-rl", "params": {**RL, "warmup_dir": str(warm), "rl_seed": seed}} for seed in SEEDS
    ] + [{"job": "tiny-lm", "params": {**LM, "seed": seed}} for seed in SEEDS]
    with serve.client() as api:
        ids = []
        for body in launches:
            r = api.post("/runs", json={**body, "remedies": [ON_EVERYTHING]})
            assert r.status_code == 201, r.text
            ids.append(r.json()["run"]["id"])

        def ended() -> list[dict[str, Any]] | None:
            runs = [api.get(f"/runs/{i}").json()["run"] for i in ids]
            return runs if all(r["status"] in ("succeeded", "failed", "stopped") for r in runs) else None

        done = wait_for(
            ended,
            timeout=480,
            interval=1,
            what="ten healthy runs to finish",
        )
        pages = api.get("/pages", params={"all": "1"}).json()["pages"]
    assert [(r["job"], r["status"], r["attempt"], r["lineage"]) for r in done] == [
        (r["job"], "succeeded", 1, []) for r in done
    ], "no remedy fired"
    assert all(r["remedies"] == [ON_EVERYTHING] for r in done)
    assert [p for p in pages if p["kind"] in FINDINGS] == [], "nor paged for one"
    assert all("grad_norm" in r["metrics"] for r in done if r["job"] == "tiny-rl"), "the rules had the new metrics"
