"""tiny-rl's objectives (training/jobs/tiny_rl/objectives.py): the advantage of each algorithm, the distillation
term and PPO's clipped loss, on hand-made tensors."""

from __future__ import annotations

import math

import pytest
import torch

from labbot.training.jobs.tiny_rl.objectives import (
    clipped_policy_loss,
    combine_advantages,
    distill_loss,
    distill_targets,
    distill_weight,
    flagged_advantages,
    grpo_advantages,
    sdpo_advantages,
    zero_std_fraction,
)


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
