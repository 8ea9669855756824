"""tiny-rl's hint gate (training/jobs/tiny_rl/gate.py), on fake policies that do and do not read hints."""

from __future__ import annotations

import pytest
import torch

from labbot.training.jobs.tiny_rl import TinyRLConfig
from labbot.training.jobs.tiny_rl.gate import GateFailed, hint_gate
from labbot.training.jobs.tiny_rl.policy import build_model
from labbot.training.jobs.tiny_rl.task import STOI, VOCAB


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
