"""The supervised warm-up that RL starts from, and its cache.

From scratch, the model learns answers to plain prompts and to hinted prompts (a hint about a wrong digit, then the
correct answer), so that it learns to read hints. Hint reading appears only once the model has learned addition, and
when addition and hint reading appear depends on the seed and on the float arithmetic (the CPU, the number of torch
threads): the same seed is at 0.58 held-out pass rate after 1,000 steps with two threads and at 0.92 with one. So the
warm-up trains to a level, not a step count: after ``warmup_steps`` it asks whether the held-out pass rate (greedy, on
a set of its own) is at least ``warmup_min_pass_rate`` and the model reads hints (the gate, ``gate.py``), and while
either is not so it trains on a quarter of ``warmup_steps`` at a time, up to ``warmup_max_steps``. With the defaults RL
starts from about 0.85 or more whatever the machine (seed 0 with two threads on a 2-core EPYC stops after 1,500 steps
at 0.87 on RL's eval set), and RL's room is the rest.

The warm-up checkpoint is cached under ``warmup_dir`` (default: the checkpoint dir) in a folder named by a hash of the
fields that shape it (``WARMUP_FIELDS``), so RL runs with different algorithms start from the same weights.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys

import torch
import torch.nn.functional as F

from labbot.training.jobs.model import TinyLM
from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.gate import GateFailed, TooFewWrong, hint_gate
from labbot.training.jobs.tiny_rl.policy import build_model, pass_rate, sample
from labbot.training.jobs.tiny_rl.task import END, HINT_BLANK, decode, encode, held_out, make_hint, make_problem, verify
from labbot_client.checkpoints import CheckpointDir, Location, join

FLAGGED_WEIGHT = 10.0  # extra loss weight of the flagged position in hinted examples
# the fields that decide the warm-up weights: the cache key
WARMUP_FIELDS = (
    "n_digits",
    "n_layer",
    "n_head",
    "n_embd",
    "warmup_steps",
    "warmup_batch",
    "warmup_lr",
    "warmup_hint_frac",
    "warmup_max_steps",
    "warmup_min_pass_rate",
    "seed",
    # the pass-rate check and the gate decide how far the warm-up trains past warmup_steps
    "eval_size",
    "gate_size",
    "gate_max_ratio",
    "temperature",
)


def load_or_warmup(cfg: TinyRLConfig, cache_root: Location, *, verbose: bool) -> tuple[TinyLM, Location | None, bool]:
    """The cached warm-up model for ``cfg``'s warm-up fields, trained and saved (atomically) if absent.

    Returns the model, the cache file and whether it came from the cache.
    """
    cache = CheckpointDir(join(cache_root, f"warmup-{warmup_key(cfg)}"), suffix=".pt", keep=1)
    for _, path in reversed(cache.list()):
        try:
            with cache.open(path) as f:
                state = torch.load(f, map_location="cpu", weights_only=True)
            model = build_model(cfg)
            model.load_state_dict(state["model"])
        except Exception as e:
            if verbose:
                print(f"warning: skipping unreadable warm-up cache {path}: {e}", file=sys.stderr, flush=True)
            continue
        return model, path, True
    cache.remove_partial()
    model, steps = warmup(cfg, verbose=verbose)
    warm_cfg = {k: getattr(cfg, k) for k in WARMUP_FIELDS}
    saved = cache.save(steps, lambda f: torch.save({"model": model.state_dict(), "config": warm_cfg}, f))
    return model, saved, False


def warmup_key(cfg: TinyRLConfig) -> str:
    shape = json.dumps({k: getattr(cfg, k) for k in WARMUP_FIELDS}, sort_keys=True)
    return hashlib.sha256(shape.encode()).hexdigest()[:12]


def warmup(cfg: TinyRLConfig, *, verbose: bool) -> tuple[TinyLM, int]:
    """Supervised warm-up from scratch (seeded by ``cfg.seed`` alone): plain and hinted examples, answer-only loss.

    ``warmup_steps`` steps; then, while the model is not ready (:func:`warmup_not_ready`: its held-out pass rate under
    ``warmup_min_pass_rate``, or :func:`hint_gate` failing because it does not read hints yet), a quarter of
    ``warmup_steps`` more at a time, up to ``warmup_max_steps`` in all. The checks do not move the training's random
    state, so step N's weights are the same however often they were made. Returns the model and its steps; the job's
    own gate afterwards says whether it passed.
    """
    torch.manual_seed(cfg.seed)
    rng = random.Random(f"warmup-{cfg.seed}")
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warmup_lr, betas=(0.9, 0.99), weight_decay=0.01)
    train_on = 0 < cfg.warmup_steps < cfg.warmup_max_steps  # else exactly warmup_steps, and no gate asked here
    most = cfg.warmup_max_steps if train_on else cfg.warmup_steps
    every = max(1, cfg.warmup_steps // 4)
    check_at = cfg.warmup_steps
    checks = held_out(cfg, cfg.eval_size, salt=3) if train_on else []  # salt 1 is RL's eval set, 2 the gate's
    step = 0
    while step < most:
        step += 1
        loss = _warmup_step(model, opt, cfg, rng)
        if verbose and (step % 100 == 0 or step == cfg.warmup_steps):
            print(f"warmup {step}/{cfg.warmup_steps} loss {loss.item():.4f}", flush=True)
        if not train_on or step < check_at:
            continue
        not_yet = warmup_not_ready(model, cfg, checks)
        if not_yet is None:
            break
        if step + every > most:
            if verbose:
                print(f"warmup {step}: {not_yet}, at warmup_max_steps {most}: stopping here", flush=True)
            break
        check_at = step + every
        if verbose:
            print(f"warmup {step}: {not_yet}; training on to step {check_at} (at most {most})", flush=True)
    return model, step


def _warmup_step(model: TinyLM, opt: torch.optim.Optimizer, cfg: TinyRLConfig, rng: random.Random) -> torch.Tensor:
    """One supervised step on a batch of plain and hinted examples (``warmup_hint_frac`` of them hinted); its loss."""
    n_hint = round(cfg.warmup_batch * cfg.warmup_hint_frac)
    loss = torch.zeros(())
    if n_hint < cfg.warmup_batch:
        problems = [make_problem(rng, cfg.n_digits) for _ in range(cfg.warmup_batch - n_hint)]
        plain = torch.tensor([encode(p + t + END) for p, t in problems])
        loss = loss + _warmup_loss(model, plain, cfg.answer_len)
    if n_hint:
        seqs, weights = _hinted_examples(model, cfg, rng, n_hint)
        loss = loss + _warmup_loss(model, seqs, cfg.answer_len, weights)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


def warmup_not_ready(model: torch.nn.Module, cfg: TinyRLConfig, problems: list[tuple[str, str]]) -> str | None:
    """Why the warm-up may not stop yet (what the log says), or None when it may.

    Ready when the greedy pass rate on ``problems`` (a held-out set of the warm-up's own, not RL's eval set, so that
    stopping on a lucky check does not flatter RL's first number) is at least ``warmup_min_pass_rate`` and the model
    reads hints, or when the gate finds too few wrong samples to measure (more training would leave fewer still: the
    job's gate says so). Neither check draws from the training's random state."""
    if cfg.warmup_min_pass_rate > 0:
        rate = pass_rate(model, cfg, problems)
        if rate < cfg.warmup_min_pass_rate:
            return f"held-out pass rate {rate:.2f} < warmup_min_pass_rate {cfg.warmup_min_pass_rate}"
    try:
        hint_gate(model, cfg)
    except TooFewWrong:
        return None
    except GateFailed as e:
        return f"the model does not read hints yet (gate ratio {e.ratio or 0:.2f} > {cfg.gate_max_ratio})"
    return None


@torch.no_grad()
def _hinted_examples(
    model: torch.nn.Module, cfg: TinyRLConfig, rng: random.Random, n: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` hint + prompt + correct answer sequences and their (n, C) loss weights. The hint is the verifier's on
    the model's own sample (the token the model would have said is named as wrong, as in RL), or an off-by-one one
    when the sample is right. The flagged position weighs ``1 + FLAGGED_WEIGHT``: reading the hint is the point."""
    problems = [make_problem(rng, cfg.n_digits) for _ in range(n)]
    prompts = torch.tensor([encode(p) for p, _ in problems])
    model.eval()
    toks, _, _ = sample(model, prompts, cfg.answer_len, temperature=1.0)
    model.train()
    rows = []
    weights = torch.ones(n, cfg.answer_len)
    for i, (row, (prompt, target)) in enumerate(zip(toks.tolist(), problems, strict=True)):
        hint = verify(decode(row), target).hint or _synthetic_hint(rng, target + END)
        rows.append(encode(hint + prompt + target + END))
        weights[i, hint.index(next(c for c in hint[1:] if c != HINT_BLANK)) - 1] += FLAGGED_WEIGHT
    return torch.tensor(rows), weights


def _synthetic_hint(rng: random.Random, answer: str) -> str:
    """A hint about an off-by-one digit (a missed or spurious carry, the typical mistake) at a random position."""
    pos = rng.randrange(len(answer) - 1)
    return make_hint(pos, str((int(answer[pos]) + rng.choice((-1, 1))) % 10), len(answer))


def _warmup_loss(
    model: torch.nn.Module, seqs: torch.Tensor, answer_len: int, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Cross-entropy on the answer tokens only, weighted per token (mean weight 1 when ``weights`` is None)."""
    logits, _ = model(seqs[:, :-1])
    logits = logits[:, -answer_len:]  # (B, C, V): predictions of the answer tokens only
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), seqs[:, -answer_len:].reshape(-1), reduction="none")
    if weights is None:
        return ce.mean()
    return (ce * weights.reshape(-1)).sum() / weights.sum()
