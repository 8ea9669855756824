"""tiny-rl reference job: the verifier and hints, the advantages of each algorithm, the hint gate, a short RL run's
telemetry, crash and resume, the reward-stuck and entropy-collapse faults, the config, and Ray rollout workers.

RL runs use tiny configs (one-digit problems, a few warm-up steps shared through a module-wide warm-up cache and a
gate threshold that any model passes: the gate has tests of its own).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

import pytest
import torch
from support import telemetry_receiver

from labbot.training.jobs import tiny_rl
from labbot.training.jobs.tiny_rl import (
    END,
    STOI,
    VOCAB,
    GateFailed,
    TinyRLConfig,
    TooFewWrong,
    build_model,
    checkpoints,
    clipped_policy_loss,
    combine_advantages,
    distill_loss,
    distill_targets,
    distill_weight,
    encode,
    flagged_advantages,
    grpo_advantages,
    hint_gate,
    is_stale,
    main,
    make_hint,
    make_problem,
    parse_config,
    sdpo_advantages,
    train,
    verify,
    warmup,
    zero_std_fraction,
)

TELEMETRY_ENV = ("LABBOT_CONTROL_URL", "LABBOT_RUN_ID", "LABBOT_TELEMETRY_TOKEN")
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
}


@pytest.fixture(scope="module")
def warm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One warm-up cache for the module: every run with the same warm-up fields trains it once."""
    return tmp_path_factory.mktemp("warmup")


@pytest.fixture
def ckpt_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """First attempt of a run outside labbot: checkpoints under tmp_path, telemetry off."""
    d = tmp_path / "ckpt"
    monkeypatch.setenv("LABBOT_CHECKPOINT_DIR", str(d))
    monkeypatch.setenv("LABBOT_ATTEMPT", "1")
    for name in TELEMETRY_ENV:
        monkeypatch.delenv(name, raising=False)
    return d


def tiny(warm_dir: Path, **overrides: Any) -> TinyRLConfig:
    base: dict[str, Any] = {
        "n_digits": 1,
        "steps": 4,
        "group_size": 4,
        "prompts_per_step": 4,
        "eval_every": 2,
        "eval_size": 20,
        "gate_size": 40,
        "gate_max_ratio": 100.0,  # any model passes; the gate is tested on its own
        "warmup_min_pass_rate": 0.0,  # a 20-step model adds nothing up: the warm-up's floor is tested on its own
        "warmup_steps": 20,
        "warmup_batch": 16,
        "checkpoint_every": 0,
        "log_every": 1000,
        "n_embd": 32,
        "warmup_dir": str(warm_dir),
    }
    return TinyRLConfig(**{**base, **overrides})


class Recorder:
    def __init__(self) -> None:
        self.metrics: dict[int, dict[str, float]] = {}

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        self.metrics[step] = dict(metrics)


# ----------------------------------------------------------------------------- task and verifier


def test_problem_format_reverses_and_pads_the_answer() -> None:
    import random

    rng = random.Random(3)
    for _ in range(50):
        prompt, target = make_problem(rng, 3)
        a, b = prompt.rstrip("=").split("+")
        assert len(a) == len(b) == 3 and len(target) == 4
        assert int(target[::-1]) == int(a) + int(b)


def test_verifier_rewards_exact_answers_and_hints_the_first_wrong_token() -> None:
    assert verify("2310$", "2310").reward == 1.0 and verify("2310$", "2310").hint is None
    wrong = verify("2350$", "2310")
    assert (wrong.reward, wrong.position, wrong.token, wrong.hint) == (0.0, 2, "5", "[..5..]")
    assert verify("23100", "2310").hint == "[....0]"  # no end token where it belongs
    assert verify("231", "2310").hint == f"[...{END}.]"  # stopped one short
    assert verify("9310$", "2310").hint == "[9....]"
    with pytest.raises(ValueError, match="at most 5 tokens"):
        verify("2310$1", "2310")
    cfg = TinyRLConfig(n_digits=3)
    assert len(make_hint(2, "5", cfg.answer_len)) == cfg.hint_len
    with pytest.raises(ValueError, match=r"a hint position is in \[0, 5\), got 5"):
        make_hint(5, "1", 5)
    assert set(make_hint(4, END, 5)) <= set(VOCAB)


# ----------------------------------------------------------------------------- advantages (pure)


def test_grpo_advantage_is_group_normalised_and_zero_for_flat_groups() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    adv = grpo_advantages(rewards)
    expected = (torch.tensor([1.0, 0, 0, 0]) - 0.25) / math.sqrt(0.1875)
    assert torch.allclose(adv[0], expected, atol=1e-4)
    assert adv[0].sum().abs() < 1e-5 and adv[0, 0] > 0 > adv[0, 1]
    assert torch.equal(adv[1:], torch.zeros(2, 4))
    assert zero_std_fraction(rewards) == pytest.approx(2 / 3)


def test_sdpo_advantage_is_negative_on_the_flagged_token_and_zero_without_a_hint() -> None:
    student = torch.log(torch.tensor([[0.9, 0.6, 0.5], [0.9, 0.6, 0.5]]))
    teacher = torch.log(torch.tensor([[0.9, 0.05, 0.5], [0.1, 0.1, 0.1]]))  # the hint is about token 1 of row 0
    hinted = torch.tensor([True, False])
    a = sdpo_advantages(teacher, student, hinted)
    assert a[0, 1] < -2.0 and a[0, 0].abs() < 1e-6 and a[0, 2].abs() < 1e-6
    assert torch.equal(a[1], torch.zeros(3))  # a correct sample: nothing to distil
    stats = flagged_advantages(a, hinted, torch.tensor([1, -1]))
    assert stats["sd_adv_flagged"] == pytest.approx(math.log(0.05 / 0.6))
    assert stats["sd_adv_unflagged"] == pytest.approx(0.0, abs=1e-6)
    assert flagged_advantages(a, torch.tensor([False, False]), torch.tensor([-1, -1])) == {}


def test_blend_and_rlsd_combine_the_two_advantages() -> None:
    a_grpo = torch.tensor([[-1.0, -1.0], [2.0, 2.0], [0.5, 0.5]])
    a_sd = torch.tensor([[0.3, -2.0], [0.0, 0.0], [-0.4, 0.1]])
    hinted = torch.tensor([True, False, True])
    assert torch.equal(combine_advantages("grpo", a_grpo, a_sd, hinted, 0.3), a_grpo)
    assert torch.equal(combine_advantages("sdpo", a_grpo, a_sd, hinted, 0.3), a_sd)
    assert torch.allclose(combine_advantages("blend", a_grpo, a_sd, hinted, 0.25), 0.25 * a_grpo + 0.75 * a_sd)
    rlsd = combine_advantages("rlsd", a_grpo, a_sd, hinted, 0.3)
    # hinted rows: the reward's sign, the teacher's size; rows without a hint: GRPO as is
    assert torch.allclose(rlsd, torch.tensor([[-0.3, -2.0], [2.0, 2.0], [0.4, 0.1]]))
    with pytest.raises(ValueError, match="grpo, sdpo, blend, rlsd"):
        combine_advantages("ppo", a_grpo, a_sd, hinted, 0.3)


def test_with_distillation_the_sampled_token_sd_advantage_leaves_sdpo_and_blend() -> None:
    a_grpo = torch.tensor([[-1.0, -1.0], [2.0, 2.0]])
    a_sd = torch.tensor([[0.3, -2.0], [0.0, 0.0]])
    hinted = torch.tensor([True, False])
    assert torch.equal(combine_advantages("sdpo", a_grpo, a_sd, hinted, 0.3, distill=True), torch.zeros(2, 2))
    assert torch.allclose(combine_advantages("blend", a_grpo, a_sd, hinted, 0.25, distill=True), 0.25 * a_grpo)
    assert torch.equal(combine_advantages("grpo", a_grpo, a_sd, hinted, 0.3, distill=True), a_grpo)
    rlsd = combine_advantages("rlsd", a_grpo, a_sd, hinted, 0.3)
    assert torch.equal(combine_advantages("rlsd", a_grpo, a_sd, hinted, 0.3, distill=True), rlsd)
    assert (distill_weight("sdpo", 0.3, 2.0), distill_weight("blend", 0.25, 2.0)) == (2.0, 1.5)
    assert distill_weight("grpo", 0.3, 2.0) == distill_weight("rlsd", 0.3, 2.0) == 0.0


def test_distillation_target_is_the_teacher_without_the_flagged_token_at_the_flagged_position() -> None:
    teacher = torch.log(torch.tensor([[[0.5, 0.3, 0.2], [0.2, 0.6, 0.2]], [[0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]]))
    tokens = torch.tensor([[0, 1], [1, 2]])  # row 0 is wrong at position 1 (token 1); row 1 has no hint
    target, mask = distill_targets(teacher, tokens, torch.tensor([True, False]), torch.tensor([1, -1]))
    assert mask.tolist() == [[False, True], [False, False]]
    assert torch.allclose(target[0, 1].exp(), torch.tensor([0.5, 0.0, 0.5]))  # mass moves off the flagged token
    assert torch.allclose(target[0, 0].exp(), teacher[0, 0].exp())
    # the loss is the KL at the flagged position only: 0 when the student already matches the target there
    student = teacher.clone().requires_grad_(True)
    loss = distill_loss(torch.log_softmax(student, -1), target, mask)
    assert loss.item() == pytest.approx(math.log(0.5 / 0.2) / tokens.numel(), rel=1e-4)  # per (B, C) token
    loss.backward()
    assert student.grad is not None
    grad = student.grad
    assert grad[0, 1, 1] > 0 > grad[0, 1, 0]  # descent lowers the flagged token, raises the others
    assert torch.equal(grad[0, 0], torch.zeros(3)) and torch.equal(grad[1], torch.zeros(2, 3))
    matched = distill_loss(target.clamp_min(-1e4), target, mask)  # student == target (finite logs)
    assert matched.item() == pytest.approx(0.0, abs=1e-6)


def test_clipped_loss_stops_pushing_past_the_clip() -> None:
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    logp = torch.log(torch.tensor([[1.0, 1.5, 0.5]])).requires_grad_(True)  # ratios 1, 1.5, 0.5
    loss, clip_frac = clipped_policy_loss(logp, old, adv, clip_eps=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(-(1.0 + 1.2 - 0.8) / 3)
    assert clip_frac == pytest.approx(2 / 3)
    assert logp.grad is not None
    assert logp.grad[0, 0] < 0 and logp.grad[0, 1] == 0 and logp.grad[0, 2] == 0  # clipped: no gradient


# ----------------------------------------------------------------------------- the gate


class HintReader(torch.nn.Module):
    """A fake policy: fixed random logits, except that with a hint in front it pushes the flagged token down."""

    def __init__(self, cfg: TinyRLConfig, reads_hints: bool) -> None:
        super().__init__()
        self.cfg, self.reads = cfg, reads_hints
        self.table = torch.randn(64, len(VOCAB), generator=torch.Generator().manual_seed(0))

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, None]:
        hinted = bool((idx[:, 0] == STOI["["]).all())  # the gate scores hinted and plain rows separately
        width = self.cfg.hint_len
        core = idx[:, width:] if hinted else idx
        B, T = core.shape
        logits = self.table[:T].expand(B, T, -1).clone()  # the same answer distribution with or without a hint
        if hinted and self.reads:
            for b in range(B):
                marks = [i for i in range(width - 2) if idx[b, 1 + i] != STOI["."]]
                pos, tok = marks[0], int(idx[b, 1 + marks[0]])
                if self.cfg.prompt_len - 1 + pos < T:
                    logits[b, self.cfg.prompt_len - 1 + pos, tok] -= 10.0
        if hinted:
            logits = torch.cat([torch.zeros(B, width, len(VOCAB)), logits], dim=1)
        return logits, None


def test_gate_passes_a_model_that_reads_hints_and_fails_one_that_does_not() -> None:
    cfg = TinyRLConfig(n_digits=2, gate_size=60, gate_max_ratio=0.5)
    result = hint_gate(HintReader(cfg, reads_hints=True), cfg)
    assert result["ratio"] < 0.01 and result["flagged"] >= 10 and result["p_plain"] > 0
    with pytest.raises(GateFailed, match=r"hint gate failed: .* \(ratio 1\.00 > gate_max_ratio 0\.5\)"):
        hint_gate(HintReader(cfg, reads_hints=False), cfg)
    with pytest.raises(GateFailed, match="did not teach the model to read hints"):
        hint_gate(build_model(cfg), cfg)  # untrained: the hint changes nothing


class ScriptedGate:
    """hint_gate's stand-in: fails (ratio 0.9) until ``passes_at``, or raises TooFewWrong from ``too_few_at``;
    records the warm-up step each call came at (counted from the model's own optimizer steps)."""

    def __init__(self, passes_at: int | None = None, too_few_at: int | None = None) -> None:
        self.passes_at, self.too_few_at = passes_at, too_few_at
        self.asked: list[int] = []
        self.steps = 0

    def __call__(self, model: torch.nn.Module, cfg: TinyRLConfig) -> dict[str, float]:
        self.asked.append(self.steps)
        if self.too_few_at is not None and self.steps >= self.too_few_at:
            raise TooFewWrong("hint gate: only 3 of 40 held-out samples were wrong")
        if self.passes_at is not None and self.steps >= self.passes_at:
            return {"ratio": 0.2, "flagged": 20.0, "p_plain": 0.5, "p_hinted": 0.1}
        raise GateFailed("hint gate failed: ratio 0.90", ratio=0.9)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., ScriptedGate]:
    def install(**kw: int) -> ScriptedGate:
        gate = ScriptedGate(**kw)
        real_step = torch.optim.AdamW.step

        def counted(self: torch.optim.AdamW, *a: Any, **k: Any) -> Any:
            gate.steps += 1
            return real_step(self, *a, **k)

        monkeypatch.setattr(torch.optim.AdamW, "step", counted)
        monkeypatch.setattr(tiny_rl, "hint_gate", gate)
        return gate

    return install


def test_a_warmup_that_does_not_read_hints_yet_trains_on_a_quarter_at_a_time_until_it_does(
    tmp_path: Path, scripted: Callable[..., ScriptedGate]
) -> None:
    """When hint reading appears depends on the seed and the CPU's arithmetic: the warm-up asks the gate after
    warmup_steps and trains on while it fails, so the job does not fail on a machine where it comes a little later."""
    gate = scripted(passes_at=30)
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=60), verbose=False)
    assert (steps, gate.asked) == (30, [20, 25, 30]), "asked at warmup_steps, then every quarter of it"


def test_a_warmup_stops_at_its_most_steps_and_when_the_gate_cannot_measure(
    tmp_path: Path, scripted: Callable[..., ScriptedGate]
) -> None:
    never = scripted()
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=32), verbose=False)
    assert (steps, never.asked) == (30, [20, 25, 30]), "no step past warmup_max_steps (35 would be)"
    too_few = scripted(too_few_at=25)
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=60), verbose=False)
    assert (steps, too_few.asked) == (25, [20, 25]), "more training would leave fewer wrong samples still"
    untouched = scripted()
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=0), verbose=False)
    assert (steps, untouched.asked) == (20, []), "warmup_max_steps at most warmup_steps: no gate, no steps past"
    _, steps = warmup(tiny(tmp_path, warmup_steps=0), verbose=False)
    assert (steps, untouched.asked) == (0, []), "no warm-up asked for: none trained, however high warmup_max_steps"


def test_a_warmup_that_reads_hints_but_adds_badly_trains_on_until_its_pass_rate_reaches_the_floor(
    tmp_path: Path, scripted: Callable[..., ScriptedGate], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Addition is learnt at a step that depends on the seed and the arithmetic (0.58 after 1,000 steps with two
    torch threads, 0.92 with one): a warm-up that stopped at the first gate that passed would hand RL a model that
    barely adds. It trains on until both hold, on a held-out set of its own (not RL's eval set)."""
    gate = scripted(passes_at=0)  # reads hints from the first check
    cfg = tiny(tmp_path, warmup_steps=20, warmup_max_steps=60, warmup_min_pass_rate=0.8)
    rl_eval = tiny_rl.held_out(cfg, cfg.eval_size, salt=1)
    asked: list[tuple[int, float]] = []

    def scripted_rate(model: torch.nn.Module, c: TinyRLConfig, problems: list[tuple[str, str]]) -> float:
        assert problems != rl_eval and len(problems) == c.eval_size, "the floor is checked on a set of its own"
        rate = 0.5 if gate.steps < 35 else 0.9
        asked.append((gate.steps, rate))
        return rate

    monkeypatch.setattr(tiny_rl, "pass_rate", scripted_rate)
    _, steps = warmup(cfg, verbose=False)
    assert steps == 35 and asked == [(20, 0.5), (25, 0.5), (30, 0.5), (35, 0.9)]
    assert gate.asked == [35], "the gate is asked only once the pass rate is there"
    monkeypatch.setattr(tiny_rl, "pass_rate", lambda model, c, problems: 0.9)
    floor = scripted(passes_at=0)
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=32, warmup_min_pass_rate=0.95), verbose=False)
    assert (steps, floor.asked) == (30, []), "never there: it stops at warmup_max_steps, the job's gate says the rest"


def test_the_gate_fields_are_part_of_the_warmup_cache_key(tmp_path: Path) -> None:
    base = tiny(tmp_path)
    keys = {tiny_rl.warmup_key(base)} | {
        tiny_rl.warmup_key(tiny(tmp_path, **{field: value}))
        for field, value in (
            ("warmup_max_steps", 50),
            ("warmup_min_pass_rate", 0.5),
            ("eval_size", 21),
            ("gate_max_ratio", 0.5),
            ("gate_size", 41),
            ("temperature", 0.9),
        )
    }
    assert len(keys) == 7, "each decides where the warm-up stops"
    assert tiny_rl.warmup_key(tiny(tmp_path, lr=1e-3, algo="grpo")) == tiny_rl.warmup_key(base), (
        "RL's own fields do not"
    )


# ----------------------------------------------------------------------------- RL runs


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

    monkeypatch.setattr(tiny_rl, "hang_forever", hang)
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


def test_encode_covers_hinted_prompts() -> None:
    assert encode(make_hint(3, "7", 4) + "12+34=") == [STOI[c] for c in "[...7]12+34="]


# ----------------------------------------------------------------------------- Ray rollout workers


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray instance in this process for the rollout actors (started by ``ray.init`` as the job does)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.ray
@pytest.mark.subprocess
def test_ray_workers_never_train_on_stale_rollouts_and_survive_a_killed_actor(
    ckpt_dir: Path, warm_dir: Path, local_ray: None
) -> None:
    import ray
    from ray.exceptions import ActorUnavailableError

    actors: list[Any] = []
    rec = Recorder()
    pids: dict[str, int] = {}

    def pid_once_up(actor: Any) -> int:
        deadline = time.monotonic() + 120
        while True:
            try:
                return int(ray.get(actor.pid.remote(), timeout=60))
            except ActorUnavailableError:  # still being restarted
                assert time.monotonic() < deadline, "the killed rollout actor never came back"
                time.sleep(0.2)

    def kill_one(step: int, metrics: dict[str, float]) -> None:
        rec(step, metrics)
        if step == 3:
            pids["before"] = ray.get(actors[0].pid.remote(), timeout=60)
            ray.kill(actors[0], no_restart=False)  # Ray restarts it (worker_restarts); the run must carry on
        if step == 6:
            pids["after"] = pid_once_up(actors[0])  # the same handle, a new process

    summary = train(
        tiny(warm_dir, steps=6, num_rollout_workers=2, eval_every=3),
        on_step=kill_one,
        on_workers=actors.extend,
    )
    assert summary["final_step"] == 6 and sorted(rec.metrics) == list(range(1, 7))
    assert pids["after"] != pids["before"]  # the kill took: Ray restarted the actor, and the run went on
    assert summary["max_rollout_lag"] <= 1
    assert all(m["rollout_lag"] <= 1 for m in rec.metrics.values())
    assert rec.metrics[6]["stale_dropped"] == summary["stale_dropped"]
    assert rec.metrics[6]["rollout_worker_failures"] <= 2  # a request in flight at the kill is asked again
    assert summary["generations"] == 6 * 16


def test_a_batch_more_than_one_version_behind_the_learner_is_stale() -> None:
    assert [is_stale(5, v) for v in (5, 4, 3, 0)] == [False, False, True, True]
