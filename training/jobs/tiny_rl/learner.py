"""The learner: one policy update on a rollout batch with the objective of ``algo`` (``objectives.py``), and the step's
metrics. ``ppo_epochs`` passes over the batch; the teacher of self-distillation is the policy itself or its EMA copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labbot.training.jobs.model import TinyLM
from labbot.training.jobs.tiny_rl.config import TinyRLConfig
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
from labbot.training.jobs.tiny_rl.policy import ANSWER_MASK, answer_logprobs, gather_tokens, token_logprobs
from labbot.training.jobs.tiny_rl.rollouts import Rollout
from labbot.training.jobs.tiny_rl.task import VOCAB


@dataclass
class Learner:
    cfg: TinyRLConfig
    model: TinyLM
    ref: TinyLM  # the frozen warm-up model (KL)
    ema: TinyLM | None  # teacher=ema
    optimizer: torch.optim.Optimizer

    @property
    def teacher(self) -> torch.nn.Module:
        return self.ema if self.ema is not None else self.model

    def step(self, batch: Rollout, *, nan: bool, lr_scale: float = 1.0, loss_scale: float = 1.0) -> dict[str, float]:
        """One update on ``batch``; returns the step's metrics. The injected faults: ``nan`` (a NaN loss);
        ``lr_scale`` (this step's learning rate is ``lr`` times it); ``loss_scale`` (the backward pass times it: the
        gradient spikes while the loss reads as usual, as a bad backward does, and ``max_grad_norm`` is what stands
        between it and the weights)."""
        cfg = self.cfg
        for group in self.optimizer.param_groups:
            group["lr"] = cfg.lr * lr_scale
        tokens = batch.seqs[:, cfg.prompt_len :]
        t_dist = teacher_distributions(self.teacher, batch, cfg)
        target, at_flagged = distill_targets(t_dist, tokens, batch.hinted, batch.flagged)
        sd_weight = distill_weight(cfg.algo, cfg.lam, cfg.sd_kl_coef)
        adv, a_sd = self._advantages(batch, gather_tokens(t_dist, tokens), distill=sd_weight > 0)
        kl = self._kl(batch)  # before the update: the policy that sampled
        loss = torch.zeros(())
        clip_frac = grad_norm = 0.0
        mismatch = self._mismatch(batch)
        for _ in range(cfg.ppo_epochs):
            s_dist = answer_logprobs(self.model, batch.seqs, cfg.prompt_len, cfg.temperature)
            loss, clip_frac = clipped_policy_loss(gather_tokens(s_dist, tokens), batch.old_logp, adv, cfg.clip_eps)
            if sd_weight > 0:
                loss = loss + sd_weight * distill_loss(s_dist, target, at_flagged)
            if nan:
                loss = loss * float("nan")  # diverge for real: NaN gradients poison the weights
            self.optimizer.zero_grad(set_to_none=True)
            (loss * loss_scale if loss_scale != 1.0 else loss).backward()
            # the norm before clipping: what spikes (with max_grad_norm 0, measured and left as it is)
            limit = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), limit).item())
            self.optimizer.step()
        self._follow_with_ema()
        metrics = {
            "loss": float(loss.item()),
            "reward": float(batch.rewards.mean().item()),
            "frac_reward_zero_std": zero_std_fraction(batch.rewards),
            "entropy": batch.entropy,
            "kl": kl,
            "clip_frac": clip_frac,
            "grad_norm": grad_norm,
            "response_len": batch.response_len,
            "truncated_frac": batch.truncated_frac,
            "rollout_logp_diff": mismatch,
        }
        metrics.update(flagged_advantages(a_sd, batch.hinted, batch.flagged))
        return metrics

    @torch.no_grad()
    def _advantages(
        self, batch: Rollout, teacher_logp: torch.Tensor, *, distill: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, C) the advantage ``algo`` trains on, and (B, C) the self-distillation advantage (reported)."""
        cfg = self.cfg
        a_grpo = grpo_advantages(batch.rewards).reshape(-1, 1).expand_as(batch.old_logp)  # (B, C)
        s_logp = token_logprobs(self.model, batch.seqs, cfg.prompt_len, cfg.temperature)
        a_sd = sdpo_advantages(teacher_logp, s_logp, batch.hinted)
        return combine_advantages(cfg.algo, a_grpo, a_sd, batch.hinted, cfg.lam, distill=distill), a_sd

    @torch.no_grad()
    def _mismatch(self, batch: Rollout) -> float:
        """Mean |log p_learner - log p_rollout| of the sampled tokens, before the update: the train/rollout mismatch
        (policy lag, and numerics where rollouts run elsewhere); 0 for an in-process, on-policy batch."""
        cfg = self.cfg
        tokens = batch.seqs[:, cfg.prompt_len :]
        logp = gather_tokens(answer_logprobs(self.model, batch.seqs, cfg.prompt_len, cfg.temperature), tokens)
        return float((logp - batch.old_logp).abs().mean().item())

    @torch.no_grad()
    def _kl(self, batch: Rollout) -> float:
        """Mean per-token KL(policy || frozen warm-up model) at the sampled positions."""
        p = self.cfg.prompt_len
        t = self.cfg.temperature
        lp = torch.log_softmax(self.model(batch.seqs[:, :-1])[0][:, p - 1 :] / t + ANSWER_MASK, -1)
        lq = torch.log_softmax(self.ref(batch.seqs[:, :-1])[0][:, p - 1 :] / t + ANSWER_MASK, -1)
        return float((lp.exp() * (lp - lq)).sum(-1).mean().item())

    @torch.no_grad()
    def _follow_with_ema(self) -> None:
        """teacher=ema: the teacher moves ``1 - ema_decay`` of the way to the updated policy."""
        if self.ema is not None:
            for pe, p in zip(self.ema.parameters(), self.model.parameters(), strict=True):
                pe.lerp_(p, 1.0 - self.cfg.ema_decay)


def teacher_distributions(teacher: torch.nn.Module, batch: Rollout, cfg: TinyRLConfig) -> torch.Tensor:
    """(B, C, V) log p_teacher(. | hint + prompt, prefix) at the student's completion positions, no grad (rows
    without a hint: 0)."""
    out = torch.zeros(*batch.old_logp.shape, len(VOCAB))
    if batch.hinted.any():
        seqs = torch.cat([batch.hints[batch.hinted], batch.seqs[batch.hinted]], dim=1)
        with torch.no_grad():
            out[batch.hinted] = answer_logprobs(teacher, seqs, cfg.hint_len + cfg.prompt_len, cfg.temperature)
    return out
