"""User story: labbot keeps artifacts and checkpoints in S3 (``LABBOT_ARTIFACTS_URL=s3://…``, here moto's S3 server
on 127.0.0.1): tiny-lm on the real Ray head checkpoints into the bucket, crashes, and ``labbot restart`` resumes it
from the S3 checkpoint — no folder shared by the nodes, no ``[training] checkpoint_root``, no credential shown."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from s3_server import ACCESS_KEY, SECRET_KEY, MotoS3
from support import Serve, wait_for

from labbot.training.ray_cluster import RayConnection


def test_tiny_lm_checkpoints_to_s3_and_restart_resumes_from_it(
    tmp_path: Path, ray_head: RayConnection, s3: MotoS3
) -> None:
    bucket = s3.bucket()
    home = tmp_path / "home"
    serve = Serve(
        home,
        ray_address=ray_head.address,
        ray_token=ray_head.token,
        extra_env={**s3.env, "LABBOT_ARTIFACTS_URL": f"s3://{bucket}/labbot"},
    ).start()
    try:
        out = serve.cli(
            "launch", "tiny-lm", "steps=20", "checkpoint_every=5", "crash_at_step=12", "--max-restarts", "0", "--json"
        )
        assert out.returncode == 0, out.stderr
        run_id = json.loads(out.stdout)["id"]
        failed = wait_for(lambda: (r := serve.run(run_id))["status"] == "failed" and r, timeout=120, what="the crash")
        assert failed["checkpoint_step"] == 10
        prefix = f"labbot/runs/{run_id}/checkpoints/"
        assert s3.keys(bucket, prefix) == [f"{prefix}ckpt_00000005.pt", f"{prefix}ckpt_00000010.pt"]
        assert not (home / "artifacts" / "runs" / run_id).exists()  # nothing on local disk

        out = serve.cli("restart", run_id, "--json")
        assert out.returncode == 0, out.stderr
        done = wait_for(lambda: (r := serve.run(run_id))["status"] == "succeeded" and r, timeout=120, what="attempt 2")
        assert done["attempt"] == 2 and done["step"] == 20 and done["checkpoint_step"] == 20
        logs = serve.cli("logs", run_id, "--tail", "60").stdout
        assert "resumed from checkpoint step 10" in logs and f"checkpoints in s3://{bucket}/{prefix[:-1]}" in logs
        assert f"{prefix}ckpt_00000020.pt" in s3.keys(bucket, prefix)

        with serve.client() as api:
            shown = [json.dumps(api.get(f"/runs/{run_id}").json()), httpx.get(f"{serve.url}/healthz", timeout=10).text]
        for text in [*shown, logs, serve.log()]:
            assert SECRET_KEY not in text and ACCESS_KEY not in text
    finally:
        serve.stop()
