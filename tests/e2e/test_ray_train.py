"""User story: the same tiny-lm job scales out through Ray Train (TorchTrainer, 2 CPU workers) when launched by
labbot, and every process of the run carries its run id. Ray Train costs ≈25 s of start-up: exercised once."""

from __future__ import annotations

import json

from support import SMALL_LM, Serve, wait_for


def test_tiny_lm_data_parallel_through_ray_train(serve: Serve) -> None:
    out = serve.cli("launch", "tiny-lm", "num_workers=2", "steps=12", "checkpoint_every=6", *SMALL_LM, "--json")
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["id"]

    wait_for(lambda: serve.run(run_id)["status"] in ("succeeded", "failed"), timeout=240, interval=1.0, what="the end")
    run = json.loads(serve.cli("run", run_id, "--json").stdout)
    logs = serve.cli("logs", run_id).stdout
    assert run["status"] == "succeeded", logs[-3000:]
    assert run["step"] == 12 and run["checkpoint_step"] == 12
    assert "Ray Train with 2 workers" in logs
    for rank in (0, 1):
        assert f"rank {rank}/2: LABBOT_RUN_ID={run_id}" in logs, logs[-3000:]
