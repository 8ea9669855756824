"""tiny-rl reference job runs (training/jobs/tiny_rl/loop.py): a short run's telemetry, crash and resume, the
reward-stuck, entropy-collapse, NaN and hang faults; and the config and command line.

RL runs use tiny configs (rl_cases.tiny: one-digit problems, a few warm-up steps shared through a module-wide warm-up
cache and a gate threshold that any model passes: the gate has tests of its own).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

import pytest
import torch
from rl_cases import Recorder, tiny
from support import telemetry_receiver

from labbot.training.jobs.tiny_rl import TinyRLConfig, loop, main, parse_config, train
from labbot.training.jobs.tiny_rl.checkpoints import checkpoints

STEP_METRICS = {
    "loss",
    "reward",
    "frac_reward_zero_std",
    "entropy",
    "kl",
    "clip_frac",
    "generations",
    "sd_adv_flagged",
    "sd_adv_unflagged",
    "tokens_per_s",
    "stale_dropped",
    "rollout_lag",
    "rollout_worker_failures",
    "grad_norm",
    "response_len",
    "truncated_frac",
    "rollout_logp_diff",
}


def test_short_run_reports_every_metric_to_telemetry(
    ckpt_dir: Path, warm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with telemetry_receiver(monkeypatch, "run-1") as bodies:
        summary = train(tiny(warm_dir, steps=4, checkpoint_every=2))

    points = {p["step"]: p["metrics"] for body in bodies for p in body["points"]}
    events = [e for body in bodies for e in body["events"]]
    assert sorted(points) == [0, 1, 2, 3, 4]
    assert set(points[0]) == {"pass_rate", "gate_ratio"}  # the warm-up model, before RL
    for step in (1, 3):
        assert set(points[step]) == STEP_METRICS
    for step in (2, 4):
        assert set(points[step]) == STEP_METRICS | {"pass_rate"}
    assert [points[s]["generations"] for s in (1, 2, 3, 4)] == [16, 32, 48, 64]
    assert all(points[s]["tokens_per_s"] > 0 and points[s]["stale_dropped"] == 0 for s in (1, 2, 3, 4))
    assert all(math.isfinite(points[s][k]) for s in (1, 2, 3, 4) for k in STEP_METRICS)
    assert [(e["kind"], e["step"]) for e in events] == [("checkpoint", 2), ("checkpoint", 4)]
    phases = [body.get("phase") for body in bodies]
    assert set(phases) <= {"warmup", "rollout", "learn", "eval"} and phases[-1] == "eval"  # the last step evaluates
    assert summary["generations"] == 64 and summary["final_pass_rate"] == points[4]["pass_rate"]
    assert set(summary["pass_rates"]) == {0, 2, 4}


def test_crash_then_resume_continues_with_optimiser_ema_and_rng_restored(
    tmp_path: Path, ckpt_dir: Path, warm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tiny(warm_dir, steps=4, teacher="ema", ema_decay=0.5, checkpoint_every=1, crash_at_step=3)
    # the uninterrupted reference: a restart (the crash fires on attempt 1 only) with nothing to resume from
    monkeypatch.setenv("LABBOT_ATTEMPT", "2")
    reference = Recorder()
    train(cfg, checkpoint_dir=tmp_path / "reference", on_step=reference)

    monkeypatch.setenv("LABBOT_ATTEMPT", "1")
    first = Recorder()
    with pytest.raises(RuntimeError, match="injected crash at step 3"):
        train(cfg, on_step=first)
    assert sorted(first.metrics) == [1, 2]
    monkeypatch.setenv("LABBOT_ATTEMPT", "2")
    resumed = Recorder()
    summary = train(cfg, on_step=resumed)
    assert summary["resumed_from"] == 2 and summary["start_step"] == 3 and summary["warmup_pass_rate"] is None
    assert sorted(resumed.metrics) == [3, 4]
    for step in (3, 4):  # same problems, samples, teacher and update as the run that never stopped
        for key in ("loss", "reward", "sd_adv_flagged", "kl", "generations"):
            assert resumed.metrics[step][key] == pytest.approx(reference.metrics[step][key], rel=1e-4, abs=1e-6)
    a = torch.load(ckpt_dir / "ckpt_00000004.pt", weights_only=False)
    b = torch.load(tmp_path / "reference" / "ckpt_00000004.pt", weights_only=False)
    assert a["ema"] is not None and a["generations"] == b["generations"] == 64 and a["weight_version"] == 4
    for k in a["ema"]:
        assert torch.allclose(a["ema"][k], b["ema"][k], atol=1e-5), k
    assert [s for s, _ in checkpoints(ckpt_dir).list()] == [2, 3, 4]
    assert a["config"] == asdict(cfg)


def test_reward_stuck_makes_every_group_flat(ckpt_dir: Path, warm_dir: Path) -> None:
    rec = Recorder()
    train(tiny(warm_dir, steps=4, reward_stuck_at_step=3), on_step=rec)
    assert all(rec.metrics[s]["reward"] == 0.0 and rec.metrics[s]["frac_reward_zero_std"] == 1.0 for s in (3, 4))


def test_entropy_collapse_drives_sampling_entropy_to_zero(ckpt_dir: Path, warm_dir: Path) -> None:
    rec = Recorder()
    train(tiny(warm_dir, steps=4, entropy_collapse_at_step=3), on_step=rec)
    assert all(rec.metrics[s]["entropy"] > 0.3 for s in (1, 2))
    assert all(rec.metrics[s]["entropy"] < 0.01 for s in (3, 4))


def test_the_collapse_is_cured_by_a_higher_temperature_not_by_a_restart(
    ckpt_dir: Path, warm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABBOT_ATTEMPT", "2")  # every attempt collapses: a restart alone is no cure
    rec = Recorder()
    train(tiny(warm_dir, steps=3, entropy_collapse_at_step=2), on_step=rec)
    assert rec.metrics[1]["entropy"] > 0.3 and rec.metrics[2]["entropy"] < 0.01
    hot = Recorder()
    train(
        tiny(warm_dir, steps=6, entropy_collapse_at_step=5, temperature=1.5),
        checkpoint_dir=ckpt_dir / "hot",
        on_step=hot,
    )
    assert hot.metrics[5]["entropy"] > 0.1 * max(hot.metrics[s]["entropy"] for s in (1, 2, 3, 4)), (
        "sampling at temperature 1.5 - 0.9999 is no collapse by the watchdog's rule (a ×10 fall)"
    )


def test_the_kl_fault_multiplies_the_learning_rate_the_way_a_broken_schedule_does() -> None:
    from labbot.training.jobs.tiny_rl.config import KL_BLOWUP_LR, TinyRLConfig
    from labbot.training.jobs.tiny_rl.loop import lr_fault

    cfg = TinyRLConfig(kl_blowup_at_step=10)
    assert [lr_fault(cfg, s) for s in (1, 9, 10, 50)] == [1, 1, KL_BLOWUP_LR, KL_BLOWUP_LR]


def test_a_grad_spike_is_measured_before_clipping(ckpt_dir: Path, warm_dir: Path) -> None:
    rec = Recorder()
    train(tiny(warm_dir, steps=3, grad_spike_at_step=2), on_step=rec)
    assert rec.metrics[2]["grad_norm"] > 100 * max(rec.metrics[s]["grad_norm"] for s in (1, 3))


def test_answers_report_their_length_and_the_share_cut_at_the_limit(ckpt_dir: Path, warm_dir: Path) -> None:
    rec = Recorder()
    train(tiny(warm_dir, steps=2), on_step=rec)
    cfg_len = 1 + 2  # n_digits + 1 digits and the end token (the tiny config: n_digits=1)
    for m in rec.metrics.values():
        assert 1 <= m["response_len"] <= cfg_len and 0 <= m["truncated_frac"] <= 1
        assert m["grad_norm"] > 0 and m["rollout_logp_diff"] < 1e-4, "in-process rollouts: on-policy"


def test_nan_at_step_reports_nan_from_that_step_and_keeps_running(ckpt_dir: Path, warm_dir: Path) -> None:
    rec = Recorder()
    summary = train(tiny(warm_dir, steps=4, nan_at_step=3), on_step=rec)
    assert summary["final_step"] == 4
    assert all(math.isfinite(rec.metrics[s]["loss"]) for s in (1, 2))
    assert all(math.isnan(rec.metrics[s]["loss"]) for s in (3, 4))


def test_hang_at_step_stops_after_that_step_on_the_first_attempt_only(
    ckpt_dir: Path, warm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Hung(Exception):
        pass

    def hang(step: int) -> NoReturn:  # the real one sleeps forever (the e2e tests page it as hung)
        raise Hung(step)

    monkeypatch.setattr(loop, "hang_forever", hang)
    rec = Recorder()
    monkeypatch.setenv("LABBOT_ATTEMPT", "1")
    with pytest.raises(Hung):
        train(tiny(warm_dir, steps=4, hang_at_step=2), checkpoint_dir=tmp_path / "a1", on_step=rec)
    assert sorted(rec.metrics) == [1, 2]  # step 2 reported, then nothing more
    monkeypatch.setenv("LABBOT_ATTEMPT", "2")  # a restart: the fault is not injected again
    assert train(tiny(warm_dir, steps=4, hang_at_step=2), checkpoint_dir=tmp_path / "a2")["final_step"] == 4


# ----------------------------------------------------------------------------- config and command line


@pytest.mark.parametrize(
    ("overrides", "msg"),
    [
        ({"algo": "ppo"}, "algo must be one of grpo, sdpo, blend, rlsd, got 'ppo'"),
        ({"group_size": 1}, "group_size must be at least 2"),
        ({"lam": 1.5}, r"lam must be in \[0, 1\], got 1.5"),
        ({"warmup_min_pass_rate": 1.2}, r"warmup_min_pass_rate must be in \[0, 1\], got 1.2"),
        ({"teacher": "frozen"}, "teacher must be one of self, ema"),
        ({"n_digits": 9}, "n_digits must be between 1 and 8"),
        ({"clip_eps": 0.0}, "clip_eps must be a positive number"),
        ({"sd_kl_coef": -1.0}, "sd_kl_coef must be 0 or more"),
    ],
)
def test_config_validation_names_what_is_accepted(overrides: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        TinyRLConfig(**overrides)


def test_cli_flags_cover_the_config(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = parse_config(["--algo", "blend", "--group-size", "6", "--lam", "0.25", "--teacher", "ema"])
    assert (cfg.algo, cfg.group_size, cfg.lam, cfg.teacher) == ("blend", 6, 0.25, "ema")
    assert parse_config([]) == TinyRLConfig()
    with pytest.raises(SystemExit) as exit_info:
        main(["--group_size", "1"])
    assert exit_info.value.code == 2
    assert "group_size must be at least 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--algo", "ppo"])
    assert "invalid choice: 'ppo'" in capsys.readouterr().err
