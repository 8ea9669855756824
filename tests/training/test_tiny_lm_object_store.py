"""tiny-lm checkpointing to s3:// (moto's real S3 server, tests/s3_server.py) while the store goes away for one
checkpoint: the job keeps training, the next checkpoint succeeds, and the restarted run resumes from the newest
complete checkpoint — never from a ``.partial``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from s3_server import ACCESS_KEY, SECRET_KEY, MotoS3

from labbot.training.jobs.tiny_lm import TinyLMConfig, list_checkpoints, train

TELEMETRY_ENV = ("LABBOT_CONTROL_URL", "LABBOT_RUN_ID", "LABBOT_TELEMETRY_TOKEN")


def small(**overrides: Any) -> TinyLMConfig:
    base = {"steps": 6, "checkpoint_every": 2, "log_every": 1000, "batch_size": 8, "block_size": 32}
    return TinyLMConfig(**{**base, **overrides})


def test_store_unreachable_during_a_checkpoint(
    s3: MotoS3, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in TELEMETRY_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LABBOT_ATTEMPT", "1")
    bucket = s3.bucket()
    url = f"s3://{bucket}/labbot/runs/r1/checkpoints"
    steps: list[int] = []

    def outage(step: int, _metrics: dict[str, float]) -> None:
        steps.append(step)
        if step == 4:  # called before step 4's checkpoint: the store is down for it
            s3.stop()
        if step == 5:
            s3.start()

    with caplog.at_level(logging.WARNING, logger="labbot_client.checkpoints"):
        summary = train(small(steps=6), checkpoint_dir=url, on_step=outage)

    assert steps == [1, 2, 3, 4, 5, 6] and summary["final_step"] == 6  # training never stopped
    assert [s for s, _ in list_checkpoints(url)] == [2, 6]  # step 4 skipped, step 6 written, step 2 kept
    assert "checkpoint step 4 was not written" in caplog.text
    assert SECRET_KEY not in caplog.text and ACCESS_KEY not in caplog.text

    # a crash mid-upload of a later checkpoint left a .partial (garbage); the restart must not take it
    s3.client().put_object(Bucket=bucket, Key="labbot/runs/r1/checkpoints/ckpt_00000007.pt.partial", Body=b"half")
    monkeypatch.setenv("LABBOT_ATTEMPT", "2")
    capsys.readouterr()
    resumed: list[int] = []
    train(small(steps=8), checkpoint_dir=url, on_step=lambda step, _m: resumed.append(step))
    assert "resumed from checkpoint step 6" in capsys.readouterr().out
    assert resumed == [7, 8]
    assert [s for s, _ in list_checkpoints(url)] == [2, 6, 8]
    assert not [k for k in s3.keys(bucket) if k.endswith(".partial")]  # the restart cleared the leftover
    with open_latest(url) as f:
        assert torch.load(f, weights_only=True)["step"] == 8


def open_latest(url: str) -> Any:
    from labbot_client.checkpoints import CheckpointDir

    ckpts = CheckpointDir(url)
    latest = ckpts.latest()
    assert latest is not None
    return ckpts.open(latest[1])
