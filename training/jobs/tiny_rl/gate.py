"""The hint gate: does the model read hints? RL with textual feedback needs a model that does, so the job asks before
RL starts (and the warm-up asks to decide when to stop).

On held-out problems the model samples answers; at each wrong sample's first wrong token, the hinted model (the
verifier's hint in context) must put clearly less probability on that token than the unhinted one: the mean
probability ratio at most ``gate_max_ratio``.
"""

from __future__ import annotations

import torch

from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.policy import sample, token_logprobs
from labbot.training.jobs.tiny_rl.task import decode, encode, held_out, verify

MIN_WRONG = 10  # wrong samples the gate needs to measure anything


class GateFailed(RuntimeError):
    """The hint gate failed: the model does not read hints (``ratio``, when measured, is above the maximum)."""

    def __init__(self, message: str, ratio: float | None = None) -> None:
        super().__init__(message)
        self.ratio = ratio


class TooFewWrong(GateFailed):
    """The hint gate could not measure: too few held-out samples were wrong."""


@torch.no_grad()
def hint_gate(model: torch.nn.Module, cfg: TinyRLConfig) -> dict[str, float]:
    """Does the model read hints? Sample answers to held-out problems; at each wrong sample's first wrong token,
    compare the probability of that token with the hint in context against without it.

    Returns ``p_plain`` and ``p_hinted`` (mean probabilities of the flagged token), ``ratio`` and ``flagged`` (how
    many samples were wrong); raises ``GateFailed`` when the ratio is above ``gate_max_ratio`` or fewer than 10
    samples were wrong (nothing to measure).
    """
    was_training = model.training
    model.eval()
    try:
        seqs, hints, flagged = _wrong_samples(model, cfg)
        p_plain, p_hinted = _flagged_probabilities(model, cfg, seqs, hints, flagged)
    finally:
        model.train(was_training)
    n = len(flagged)
    result = {"p_plain": p_plain, "p_hinted": p_hinted, "ratio": p_hinted / p_plain, "flagged": float(n)}
    if result["ratio"] > cfg.gate_max_ratio:
        raise GateFailed(
            f"hint gate failed: with the hint in context the flagged token keeps probability {p_hinted:.3f} against "
            f"{p_plain:.3f} without (ratio {result['ratio']:.2f} > gate_max_ratio {cfg.gate_max_ratio}) over "
            f"{n} wrong held-out samples; the warm-up did not teach the model to read hints "
            "(raise warmup_steps, warmup_max_steps or warmup_hint_frac)",
            ratio=result["ratio"],
        )
    return result


def _wrong_samples(model: torch.nn.Module, cfg: TinyRLConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The model's wrong answers to the gate's held-out problems, sampled on a seed of the gate's own (the caller's
    random state is left as it was): (W, P + C) prompt and answer, (W, hint_len) the verifier's hints and (W,) the
    flagged positions. Raises ``TooFewWrong`` when fewer than ``MIN_WRONG`` were wrong."""
    problems = held_out(cfg, cfg.gate_size, salt=2)
    state = torch.get_rng_state()
    torch.manual_seed(cfg.seed + 7919)
    prompts = torch.tensor([encode(p) for p, _ in problems])
    toks, _, _ = sample(model, prompts, cfg.answer_len, temperature=cfg.temperature)
    torch.set_rng_state(state)
    rows, hints, pos = [], [], []
    for i, (row, (_, target)) in enumerate(zip(toks.tolist(), problems, strict=True)):
        v = verify(decode(row), target)
        if v.hint is not None and v.position is not None:
            rows.append(i)
            hints.append(encode(v.hint))
            pos.append(v.position)
    if len(rows) < MIN_WRONG:
        raise TooFewWrong(
            f"hint gate: only {len(rows)} of {cfg.gate_size} held-out samples were wrong, too few to measure whether "
            "the warm-up model reads hints (lower warmup_steps)"
        )
    return torch.cat([prompts, toks], dim=1)[rows], torch.tensor(hints), torch.tensor(pos)


def _flagged_probabilities(
    model: torch.nn.Module, cfg: TinyRLConfig, seqs: torch.Tensor, hints: torch.Tensor, flagged: torch.Tensor
) -> tuple[float, float]:
    """Mean probability of the flagged tokens without the hint and with it in front of the prompt."""
    plain = token_logprobs(model, seqs, cfg.prompt_len, cfg.temperature)  # (W, C)
    hinted = token_logprobs(model, torch.cat([hints, seqs], dim=1), cfg.hint_len + cfg.prompt_len, cfg.temperature)
    idx = flagged[:, None]
    return float(plain.gather(1, idx).exp().mean().item()), float(hinted.gather(1, idx).exp().mean().item())
