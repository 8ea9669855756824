"""The policy: the tiny transformer over the task's characters, how it samples answers and scores them, and its
held-out pass rate. A completion position can hold only an answer token (a digit or the end token).
"""

from __future__ import annotations

import torch

from labbot.training.jobs.model import TinyLM
from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.task import ANSWER_TOKENS, VOCAB, decode, encode, verify

# added to the logits of a completion position: the other tokens (hint and prompt syntax) get probability 0, so a
# hint can always mark its one wrong token unambiguously
ANSWER_MASK = torch.tensor([0.0 if ch in ANSWER_TOKENS else -1e9 for ch in VOCAB])


def build_model(cfg: TinyRLConfig) -> TinyLM:
    """The shared tiny transformer (``training/jobs/model.py``) over the task's vocabulary."""
    return TinyLM(cfg.model_config, len(VOCAB))


def answer_logprobs(model: torch.nn.Module, seqs: torch.Tensor, prompt_len: int, temperature: float) -> torch.Tensor:
    """(B, P + C) token ids -> (B, C, V) log-distributions over the vocabulary at each of the last C positions."""
    logits, _ = model(seqs[:, :-1])  # (B, P + C - 1, V)
    logits = logits[:, prompt_len - 1 :] / temperature + ANSWER_MASK  # (B, C, V): the completion tokens
    return torch.log_softmax(logits, dim=-1)


def gather_tokens(logp: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """(B, C, V) log-distributions and (B, C) token ids -> (B, C) log-probabilities of those tokens."""
    return logp.gather(-1, tokens[..., None]).squeeze(-1)


def token_logprobs(model: torch.nn.Module, seqs: torch.Tensor, prompt_len: int, temperature: float) -> torch.Tensor:
    """(B, P + C) token ids -> (B, C) log-probabilities of the last C tokens given everything before them."""
    return gather_tokens(answer_logprobs(model, seqs, prompt_len, temperature), seqs[:, prompt_len:])


@torch.no_grad()
def sample(
    model: torch.nn.Module,
    prompts: torch.Tensor,
    length: int,
    *,
    temperature: float,
    scale: float = 1.0,
    greedy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample ``length`` tokens after (B, P) ``prompts`` with torch's global RNG.

    Returns the (B, C) tokens, their (B, C) log-probabilities under the policy (``logits / temperature``) and the
    (B, C) entropy of the distribution actually sampled from (``logits * scale / temperature``).
    """
    seqs = prompts
    toks, logps, ents = [], [], []
    for _ in range(length):
        logits, _ = model(seqs)
        # a diverged (NaN) policy samples uniformly instead of crashing; its NaN loss is what gets reported
        logits = torch.nan_to_num(logits[:, -1], nan=0.0) / temperature + ANSWER_MASK  # (B, V)
        sampling = torch.log_softmax(logits * scale, dim=-1)
        nxt = sampling.argmax(-1) if greedy else torch.multinomial(sampling.exp(), 1).squeeze(-1)
        logps.append(torch.log_softmax(logits, dim=-1).gather(-1, nxt[:, None]).squeeze(-1))
        ents.append(-(sampling.exp() * sampling).sum(-1))
        toks.append(nxt)
        seqs = torch.cat([seqs, nxt[:, None]], dim=1)
    return torch.stack(toks, 1), torch.stack(logps, 1), torch.stack(ents, 1)


@torch.no_grad()
def pass_rate(model: torch.nn.Module, cfg: TinyRLConfig, problems: list[tuple[str, str]]) -> float:
    """Held-out greedy exact match."""
    was_training = model.training
    model.eval()
    prompts = torch.tensor([encode(p) for p, _ in problems])
    toks, _, _ = sample(model, prompts, cfg.answer_len, temperature=1.0, greedy=True)
    model.train(was_training)
    right = sum(verify(decode(row), t).reward for row, (_, t) in zip(toks.tolist(), problems, strict=True))
    return right / len(problems)
