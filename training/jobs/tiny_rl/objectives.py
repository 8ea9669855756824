"""tiny-rl's objectives (pure tensor functions): the per-token advantage of each ``algo``, PPO's clipped policy loss,
and the self-distillation term. The policy loss is PPO-style (``clip_eps``; the ratio is against the behaviour
log-probabilities), with a per-token advantage chosen by ``algo``:

* ``grpo``: ``(r - mean) / (std + eps)`` within each group, broadcast to every token of the sequence;
* ``sdpo`` (self-distillation): the sampled-token advantage ``A_sdpo = log p_teacher(token | hint + prompt,
  prefix) - log p_student(token | prompt, prefix)`` on samples that got a hint (wrong ones), 0 on correct ones,
  is what ``sd_adv_flagged`` / ``sd_adv_unflagged`` report; what trains (``sd_kl_coef`` > 0, the default) is a
  distillation term instead, added to the (then zero-advantage) policy loss::

      L_sd = sd_kl_coef / (B * C) * sum over hinted rows i, at their flagged position f_i, of
             KL(q_i || p_student(. | prompt_i, prefix_i))
      q_i(v) = p_teacher(v | hint_i + prompt_i, prefix_i) * [v != flagged token] / (1 - p_teacher(flagged))

  i.e. the hinted teacher's distribution over the answer vocabulary conditioned on what the hint says for
  certain (the flagged token is wrong), at the first wrong position, where the student's prefix is right. The
  teacher is the policy itself (``teacher=self``, no grad) or an EMA copy (``teacher=ema``, ``ema_decay``).
  ``sd_kl_coef 0`` trains on ``A_sdpo`` in the policy loss instead (the old objective: pushing down sampled
  tokens with no target, with a teacher that shares the student's weights, loses pass rate);
* ``blend``: ``lam * A_grpo`` in the policy loss plus ``(1 - lam) * L_sd`` (``sd_kl_coef 0``:
  ``lam * A_grpo + (1 - lam) * A_sdpo``);
* ``rlsd``: ``sign(A_grpo) * |A_sdpo|`` on hinted samples (the reward says which way, the teacher says which
  tokens and how much), ``A_grpo`` on samples without a hint (correct ones, where the teacher has nothing to say);
  no distillation term.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from labbot.training.jobs.tiny_rl.config import ALGOS

ADV_EPS = 1e-6


def grpo_advantages(rewards: torch.Tensor, eps: float = ADV_EPS) -> torch.Tensor:
    """(G, K) rewards -> (G, K): ``(r - mean) / (std + eps)`` per group (population std); a flat group is 0."""
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, unbiased=False, keepdim=True)
    return (rewards - mean) / (std + eps)


def zero_std_fraction(rewards: torch.Tensor) -> float:
    """Fraction of groups (rows of a (G, K) tensor) whose rewards are all equal."""
    return float((rewards == rewards[:, :1]).all(dim=1).float().mean().item())


def sdpo_advantages(teacher_logp: torch.Tensor, student_logp: torch.Tensor, hinted: torch.Tensor) -> torch.Tensor:
    """(B, C) per-token ``log p_teacher - log p_student`` on hinted rows (``hinted``: (B,) bool), 0 elsewhere."""
    return torch.where(hinted[:, None], teacher_logp - student_logp, torch.zeros_like(student_logp))


def combine_advantages(
    algo: str, a_grpo: torch.Tensor, a_sd: torch.Tensor, hinted: torch.Tensor, lam: float, distill: bool = False
) -> torch.Tensor:
    """The per-token advantage of ``algo`` from the (B, C) GRPO (broadcast) and self-distillation advantages.

    rlsd: ``sign(A_grpo) * |A_sdpo|`` on hinted rows, ``A_grpo`` on rows without a hint. ``distill``: the
    distillation term carries the self-distillation signal, so sdpo and blend leave ``A_sdpo`` out (sdpo: 0).
    """
    if distill and algo in ("sdpo", "blend"):
        a_sd = torch.zeros_like(a_sd)
    if algo == "grpo":
        return a_grpo
    if algo == "sdpo":
        return a_sd
    if algo == "blend":
        return lam * a_grpo + (1.0 - lam) * a_sd
    if algo == "rlsd":
        return torch.where(hinted[:, None], torch.sign(a_grpo) * a_sd.abs(), a_grpo)
    raise ValueError(f"algo must be one of {', '.join(ALGOS)}, got {algo!r}")


def clipped_policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip_eps: float
) -> tuple[torch.Tensor, float]:
    """PPO's clipped surrogate, mean over tokens: ``-min(ratio * A, clip(ratio, 1 +- eps) * A)``; and clip fraction."""
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    loss = -torch.minimum(ratio * adv, clipped * adv).mean()
    clip_frac = float(((ratio - 1.0).abs() > clip_eps).float().mean().item())
    return loss, clip_frac


def distill_targets(
    teacher_logp: torch.Tensor, tokens: torch.Tensor, hinted: torch.Tensor, flagged: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The distillation target and where it applies, from the (B, C, V) teacher log-distributions.

    At the flagged position of each hinted row the target is the teacher's distribution conditioned on what the
    hint says for certain, "not the flagged token": that token's probability set to 0, the rest renormalised.
    Returns the (B, C, V) target log-distributions and the (B, C) bool mask of the flagged positions.
    """
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    rows = hinted.nonzero().squeeze(1)
    mask[rows, flagged[rows]] = True
    excluded = F.one_hot(tokens, teacher_logp.size(-1)).bool() & mask[..., None]
    target = torch.log_softmax(teacher_logp.masked_fill(excluded, -1e9), dim=-1)
    return target, mask


def distill_loss(student_logp: torch.Tensor, target_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``KL(target || student)`` over the vocabulary at the ``mask`` positions, summed and divided by the number
    of (B, C) tokens: the same per-token normalisation as the policy loss."""
    kl = (target_logp.exp() * (target_logp - student_logp)).sum(-1)  # (B, C)
    return (kl * mask).sum() / mask.numel()


def distill_weight(algo: str, lam: float, coef: float) -> float:
    """Weight of the distillation term: ``coef`` for sdpo, ``(1 - lam) * coef`` for blend, 0 for grpo and rlsd."""
    return {"sdpo": coef, "blend": (1.0 - lam) * coef}.get(algo, 0.0)


def flagged_advantages(a_sd: torch.Tensor, hinted: torch.Tensor, flagged: torch.Tensor) -> dict[str, float]:
    """Mean self-distillation advantage at the flagged positions and at the other tokens of hinted rows
    (empty when no row had a hint)."""
    if not hinted.any():
        return {}
    rows = a_sd[hinted]  # (H, C)
    mask = torch.zeros_like(rows, dtype=torch.bool)
    mask[torch.arange(len(rows)), flagged[hinted]] = True
    return {"sd_adv_flagged": float(rows[mask].mean().item()), "sd_adv_unflagged": float(rows[~mask].mean().item())}
