"""tiny-lm reference job: learning, checkpoints and resume, fault injection, telemetry and the command line.

Everything runs in-process through ``train()`` (with its ``on_step`` hook) except the hang test and the
no-ray check, which need a real process.
"""

from __future__ import annotations

import math
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch
from support import telemetry_receiver

from labbot.training.jobs.tiny_lm import (
    JobEnv,
    TinyLMConfig,
    list_checkpoints,
    load_corpus,
    main,
    parse_config,
    train,
)

REPO = Path(__file__).resolve().parents[2]
TELEMETRY_ENV = ("LABBOT_CONTROL_URL", "LABBOT_RUN_ID", "LABBOT_TELEMETRY_TOKEN")


def small(**overrides: Any) -> TinyLMConfig:
    """A quick config: small batches, no periodic checkpoints or progress lines unless asked."""
    base = {"steps": 6, "checkpoint_every": 0, "log_every": 1000, "batch_size": 8, "block_size": 32}
    return TinyLMConfig(**{**base, **overrides})


class Recorder:
    """An ``on_step`` callback that keeps what train() reported."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.losses: list[float] = []

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        assert set(metrics) == {"loss", "tokens_per_s"}
        assert metrics["tokens_per_s"] > 0
        self.steps.append(step)
        self.losses.append(metrics["loss"])


def ckpt_steps(ckpt_dir: Path) -> list[int]:
    return [step for step, _ in list_checkpoints(ckpt_dir)]


@pytest.fixture
def ckpt_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """First attempt of a run outside labbot: checkpoints under tmp_path, telemetry off."""
    d = tmp_path / "ckpt"
    monkeypatch.setenv("LABBOT_CHECKPOINT_DIR", str(d))
    monkeypatch.setenv("LABBOT_ATTEMPT", "1")
    for name in TELEMETRY_ENV:
        monkeypatch.delenv(name, raising=False)
    return d


# ----------------------------------------------------------------------------- learning


def test_loss_falls_over_a_few_dozen_steps(ckpt_dir: Path) -> None:
    rec = Recorder()
    summary = train(TinyLMConfig(steps=40, checkpoint_every=0), on_step=rec)

    assert rec.steps == list(range(1, 41))
    vocab_size = len(set(load_corpus()))
    first_loss = summary["first_loss"]
    assert first_loss is not None
    assert first_loss == pytest.approx(math.log(vocab_size), abs=0.3)  # a uniform guess at first
    assert summary["final_loss"] == rec.losses[-1]
    assert sum(rec.losses[-5:]) / 5 < first_loss - 1.0
    assert summary["start_step"] == 1 and summary["final_step"] == 40 and summary["resumed_from"] is None
    assert summary["steps_per_s"] > 0 and summary["tokens_per_s"] > 0
    assert ckpt_steps(ckpt_dir) == [40]  # checkpoint_every=0: the final step only


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoints_every_n_steps_keep_three_and_resume_from_newest(
    ckpt_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = small(steps=10, checkpoint_every=2)
    train(cfg)
    assert ckpt_steps(ckpt_dir) == [6, 8, 10]
    assert not [p for p in ckpt_dir.iterdir() if not p.name.startswith("ckpt_")]  # no tmp files left

    state = torch.load(ckpt_dir / "ckpt_00000010.pt", weights_only=True)
    assert state["step"] == 10
    assert state["config"] == asdict(cfg)
    assert {"model", "optimizer", "rng", "vocab"} <= state.keys()

    capsys.readouterr()
    rec = Recorder()
    summary = train(small(steps=14, checkpoint_every=2), on_step=rec)
    assert rec.steps == [11, 12, 13, 14]  # step+1, not 1
    assert summary["start_step"] == 11 and summary["resumed_from"] == 10 and summary["final_step"] == 14
    assert "resumed from checkpoint step 10" in capsys.readouterr().out
    assert ckpt_steps(ckpt_dir) == [10, 12, 14]


def test_final_step_is_checkpointed_off_the_grid(ckpt_dir: Path) -> None:
    train(small(steps=7, checkpoint_every=3))
    assert ckpt_steps(ckpt_dir) == [3, 6, 7]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_corrupt_newest_checkpoint_is_skipped(
    ckpt_dir: Path,
    capsys: pytest.CaptureFixture[str],
    damage: str,
) -> None:
    train(small(steps=4, checkpoint_every=2))
    newest = ckpt_dir / "ckpt_00000004.pt"
    blob = newest.read_bytes()
    damaged = {"truncated": blob[: len(blob) // 2], "garbage": b"not a checkpoint" * 100, "empty": b""}
    newest.write_bytes(damaged[damage])
    capsys.readouterr()

    rec = Recorder()
    summary = train(small(steps=6, checkpoint_every=2), on_step=rec)
    assert summary["resumed_from"] == 2
    assert rec.steps == [3, 4, 5, 6]
    captured = capsys.readouterr()
    assert "skipping unreadable checkpoint" in captured.err and "ckpt_00000004.pt" in captured.err
    assert "resumed from checkpoint step 2" in captured.out
    assert torch.load(newest, weights_only=True)["step"] == 4  # rewritten whole


def test_resume_continues_exactly_where_it_stopped(tmp_path: Path, ckpt_dir: Path) -> None:
    straight, resumed = Recorder(), Recorder()
    train(small(steps=8), checkpoint_dir=tmp_path / "straight", on_step=straight)
    train(small(steps=4), checkpoint_dir=tmp_path / "split")
    train(small(steps=8), checkpoint_dir=tmp_path / "split", on_step=resumed)

    # model, optimizer state and per-step batches all carry over: the same losses as the uninterrupted run
    assert resumed.steps == [5, 6, 7, 8]
    assert resumed.losses == pytest.approx(straight.losses[4:], rel=1e-5)


def test_checkpoint_of_a_different_model_is_refused(ckpt_dir: Path) -> None:
    train(small(steps=2))
    with pytest.raises(ValueError, match="different model"):
        train(small(steps=4, n_embd=32))


# ----------------------------------------------------------------------------- fault injection


def test_crash_at_step_fires_on_attempt_1_only(ckpt_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder()
    with pytest.raises(RuntimeError, match="injected crash at step 3"):
        train(small(steps=5, checkpoint_every=1, crash_at_step=3), on_step=rec)
    assert rec.steps == [1, 2]
    assert ckpt_steps(ckpt_dir) == [1, 2]

    monkeypatch.setenv("LABBOT_ATTEMPT", "2")
    rec = Recorder()
    summary = train(small(steps=5, checkpoint_every=1, crash_at_step=3), on_step=rec)
    assert rec.steps == [3, 4, 5]  # the restart resumes and gets past the crash
    assert summary["resumed_from"] == 2 and summary["final_step"] == 5


def test_nan_at_step_makes_the_loss_nan_from_that_step(
    ckpt_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rec = Recorder()
    summary = train(small(steps=5, nan_at_step=3), on_step=rec)
    assert rec.steps == [1, 2, 3, 4, 5]
    assert all(math.isfinite(x) for x in rec.losses[:2])
    assert all(math.isnan(x) for x in rec.losses[2:])
    assert summary["final_loss"] is not None and math.isnan(summary["final_loss"])

    monkeypatch.setenv("LABBOT_ATTEMPT", "2")
    rec = Recorder()
    train(small(steps=5, nan_at_step=3), checkpoint_dir=ckpt_dir.parent / "attempt2", on_step=rec)
    assert all(math.isfinite(x) for x in rec.losses)


@pytest.mark.subprocess
def test_hang_at_step_stops_progress_but_stays_alive(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in TELEMETRY_ENV}
    env.update(LABBOT_CHECKPOINT_DIR=str(tmp_path / "ckpt"), LABBOT_ATTEMPT="1", PYTHONUNBUFFERED="1")
    args = ["--steps", "1000", "--hang_at_step", "3", "--log_every", "1", "--checkpoint_every", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "labbot.training.jobs.tiny_lm", *args, "--batch_size", "4", "--block_size", "16"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not any(line.startswith("injected hang at step 3") for line in seen):
            assert proc.poll() is None, "".join(seen)
            seen.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
        assert [line.split()[1] for line in seen if line.startswith("step ")] == [
            "1/1000",
            "2/1000",
            "3/1000",
        ]

        # a healthy run does ~50 steps/s here: two quiet seconds with the process alive mean it is stuck
        quiet_until = time.monotonic() + 2.0
        while (left := quiet_until - time.monotonic()) > 0:
            try:
                seen.append(lines.get(timeout=left))
            except queue.Empty:
                break
        assert not [line for line in seen if line.startswith("step 4/")], "".join(seen)
        assert proc.poll() is None, "".join(seen)
    finally:
        proc.kill()
        proc.wait(timeout=30)


# ----------------------------------------------------------------------------- telemetry


def test_telemetry_receives_steps_nan_and_checkpoints(
    ckpt_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with telemetry_receiver(monkeypatch, "run-1") as bodies:
        train(small(steps=4, checkpoint_every=2, nan_at_step=3))  # finish() flushes before train returns

    points = [p for body in bodies for p in body["points"]]
    events = [e for body in bodies for e in body["events"]]
    assert [p["step"] for p in points] == [1, 2, 3, 4]
    assert all(isinstance(p["metrics"]["loss"], float) for p in points[:2])
    assert [p["metrics"]["loss"] for p in points[2:]] == ["NaN", "NaN"]
    assert all(p["metrics"]["tokens_per_s"] > 0 for p in points)
    # step 4 is the last, but its loss is NaN: diverged weights are no checkpoint, step 2 stays the newest
    assert [(e["kind"], e["step"]) for e in events] == [("checkpoint", 2)]
    assert events[-1]["path"] == str(ckpt_dir.resolve() / "ckpt_00000002.pt")
    assert sorted(p.name for p in ckpt_dir.glob("ckpt_*.pt")) == ["ckpt_00000002.pt"]
    assert {body["attempt"] for body in bodies} == {1}


# ----------------------------------------------------------------------------- environment and command line


def test_environment_defaults_and_bad_attempt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("LABBOT_RUN_ID", "LABBOT_ATTEMPT", "LABBOT_CHECKPOINT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    job = JobEnv.from_environ()
    assert (job.run_id, job.attempt, job.checkpoint_dir) == (None, 1, tmp_path.resolve() / "checkpoints")
    assert not job.is_restart

    monkeypatch.setenv("LABBOT_ATTEMPT", "two")
    with pytest.raises(ValueError, match="LABBOT_ATTEMPT"):
        JobEnv.from_environ()


def test_cli_accepts_both_flag_spellings_typed_from_defaults() -> None:
    for flag in ("--checkpoint_every", "--checkpoint-every"):
        assert parse_config([flag, "7"]).checkpoint_every == 7
    cfg = parse_config(["--lr", "1e-3", "--device", "cpu", "--nan-at-step", "5", "--num_workers", "0"])
    assert (cfg.lr, cfg.device, cfg.nan_at_step, cfg.num_workers) == (0.001, "cpu", 5, 0)
    assert isinstance(cfg.lr, float) and isinstance(cfg.nan_at_step, int)
    assert parse_config([]) == TinyLMConfig()


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--bogus", "1"], "unrecognized arguments: --bogus"),
        (["--step", "3"], "unrecognized arguments: --step"),  # no silent abbreviation of --steps
        (["--steps", "ten"], "invalid int value: 'ten'"),
        (["--device", "tpu"], "invalid choice: 'tpu'"),
        (["--n_embd", "30"], "n_embd (30) must be a multiple of n_head (4)"),
        (["--steps", "0"], "steps must be at least 1"),
    ],
)
def test_cli_rejects_bad_flags_clearly(argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert msg in capsys.readouterr().err


@pytest.mark.subprocess
def test_main_trains_in_process_without_importing_ray(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in TELEMETRY_ENV}
    env.update(LABBOT_CHECKPOINT_DIR=str(tmp_path / "ckpt"), LABBOT_ATTEMPT="1")
    script = (
        "import sys\n"
        "from labbot.training.jobs import tiny_lm\n"
        "rc = tiny_lm.main(['--steps', '3', '--checkpoint-every', '1', '--batch_size', '4'])\n"
        "assert rc == 0, rc\n"
        "assert 'ray' not in sys.modules, 'ray imported on the num_workers=0 path'\n"
    )
    cmd = [sys.executable, "-c", script]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "step 3/3 loss" in out.stdout and "done: steps 1..3" in out.stdout
    assert ckpt_steps(tmp_path / "ckpt") == [1, 2, 3]
