"""The reference jobs' shared transformer (training/jobs/model.py): shapes, causality, weight tying, initial loss."""

from __future__ import annotations

import math

import pytest
import torch

from labbot.training.jobs.model import ModelConfig, TinyLM

SHAPE = ModelConfig(n_layer=2, n_head=4, n_embd=32, block_size=16)
VOCAB = 11


def model() -> TinyLM:
    torch.manual_seed(0)
    return TinyLM(SHAPE, VOCAB).eval()


def test_logits_and_loss_have_the_documented_shapes_and_start_near_a_uniform_guess() -> None:
    idx, targets = torch.randint(VOCAB, (2, 8, SHAPE.block_size), generator=torch.Generator().manual_seed(1))
    logits, loss = model()(idx, targets)
    assert logits.shape == (8, SHAPE.block_size, VOCAB)
    assert loss is not None and loss.item() == pytest.approx(math.log(VOCAB), abs=0.1)
    assert model()(idx)[1] is None


def test_a_position_sees_only_the_tokens_before_it() -> None:
    m = model()
    idx = torch.randint(VOCAB, (1, 10), generator=torch.Generator().manual_seed(2))
    changed = idx.clone()
    changed[0, 6] = (changed[0, 6] + 1) % VOCAB
    with torch.no_grad():
        a, _ = m(idx)
        b, _ = m(changed)
    assert torch.equal(a[0, :6], b[0, :6]) and not torch.equal(a[0, 6:], b[0, 6:])


def test_the_head_is_tied_to_the_token_embeddings_and_sequences_fit_the_block() -> None:
    m = model()
    assert m.lm_head.weight is m.wte.weight
    with pytest.raises(ValueError, match="sequence of 17 is longer than block_size 16"):
        m(torch.zeros(1, 17, dtype=torch.long))


def test_the_same_seed_gives_the_same_weights() -> None:
    a, b = model().state_dict(), model().state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
