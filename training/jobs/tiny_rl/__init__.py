"""tiny-rl: RL with textual feedback on multi-digit addition, labbot's reference RL job.

Run it by hand, or the way labbot does through Ray's Jobs API::

    python -m labbot.training.jobs.tiny_rl                     # algo=sdpo: self-distillation from the hinted model
    python -m labbot.training.jobs.tiny_rl --algo grpo --steps 100 --group_size 8
    python -m labbot.training.jobs.tiny_rl --algo blend --lam 0.5 --num_rollout_workers 2   # Ray rollout actors
    python -m labbot.training.jobs.tiny_rl --help

Every ``TinyRLConfig`` field is a flag (``--a_b`` and ``--a-b`` both work). CPU only; the model is the reference jobs'
tiny transformer (``training/jobs/model.py``, a nanoGPT-style decoder) over a character vocabulary.

The package, in the order a run uses it (each file says the rest):

* ``config.py``: ``TinyRLConfig``, the flags; ``cli.py``: the command line, ``main()``; ``__main__.py``: ``-m``.
* ``task.py``: ``"047+085="`` asks for the sum reversed and padded, ``"2310$"``; the verifier's reward is 1 for
  exactly right, else 0, with a hint naming the first wrong token (``"[..1..]"``: answer position 2 is not 1).
* ``policy.py``: the model over the task's vocabulary, sampling, scoring, the held-out pass rate.
* ``warmup.py``: 1. Warm-up, supervised from scratch on plain and hinted prompts until the held-out pass rate is at
  least ``warmup_min_pass_rate`` and the model reads hints (or ``warmup_max_steps``); cached under ``warmup_dir`` by
  a hash of the fields that shape it, so RL runs with different algorithms start from the same weights.
* ``gate.py``: 2. Gate: with the verifier's hint in context, the warm-up model must put clearly less probability on
  the flagged token (mean ratio at most ``gate_max_ratio``), else the job fails with a message saying so.
* ``loop.py``: 3. RL, ``steps`` learner steps: each samples ``group_size`` completions for each of
  ``prompts_per_step`` prompts (``rollouts.py``; ``ray_rollouts.py`` with ``num_rollout_workers`` > 0), and updates
  the policy (``learner.py``) with a PPO-style clipped objective and the advantage of ``algo`` (``objectives.py``:
  ``grpo``, ``sdpo``, ``blend``, ``rlsd``); ``checkpoints.py``: what a checkpoint holds.

Environment (all optional, so the job also runs by hand): ``LABBOT_RUN_ID``, ``LABBOT_ATTEMPT`` (1 for the first
launch), ``LABBOT_CHECKPOINT_DIR`` (default ``./checkpoints``): RL checkpoints ``ckpt_{step:08d}.pt`` (atomic, newest
3 kept; step, model, optimiser, EMA teacher, frozen reference, RNG states, generations, weight version, config) and
the warm-up cache. On start the job resumes RL from the newest readable checkpoint (not from the warm-up).

Telemetry every RL step (``labbot_client.telemetry``): ``loss``, ``reward``, ``frac_reward_zero_std``, ``entropy``,
``kl`` (to the frozen warm-up model), ``clip_frac``, ``grad_norm`` (before clipping at ``max_grad_norm``),
``response_len`` and ``truncated_frac`` (answers cut at the length limit), ``rollout_logp_diff`` (the train/rollout
mismatch: mean |log p| difference of the sampled tokens between the learner and the sampler), ``generations``,
``sd_adv_flagged``, ``sd_adv_unflagged`` (on steps with a hinted sample), ``tokens_per_s``, ``stale_dropped``,
``rollout_lag``, ``rollout_worker_failures``;
``pass_rate`` (held-out greedy exact match) every ``eval_every`` steps, at the last step and at step 0 (the warm-up
model, with the gate's ``gate_ratio``); every checkpoint; and the phase (warmup, rollout, learn, eval).

Fault injection. On the first attempt only (a restart is the cure): ``hang_at_step``, ``crash_at_step``,
``nan_at_step`` as in tiny-lm; ``reward_stuck_at_step N``: from step N every reward is 0 (hints still come from the
verifier), so every group has zero reward spread. On every attempt, each producing its signal the way a real run does
and cured only by a change of parameter (what a remedy is for): ``entropy_collapse_at_step N``: from step N the
sampler's temperature is annealed by 0.9999 (near-greedy at temperature 1; ``temperature += 1`` cures it);
``kl_blowup_at_step N``: from step N the learning rate is 20× ``lr`` (a schedule that jumps; ``lr *= 0.1`` cures it);
``grad_spike_at_step N``: step N's gradient is 10⁴× (a bad backward; the loss reads as usual), which clipping at
``max_grad_norm`` absorbs and a run launched with ``max_grad_norm=0`` does not.

Scale-out: ``num_rollout_workers N`` (N > 0) starts N Ray actors that generate and verify rollouts while the learner
trains, weights versioned through the object store, batches more than one version old dropped (``ray_rollouts.py``).
``ray`` is imported only on that path, and the job connects with ``ray.init()`` as tiny-lm does.
"""

from labbot.training.jobs.tiny_rl.cli import main, parse_config
from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.gate import GateFailed
from labbot.training.jobs.tiny_rl.loop import RLSummary, train
from labbot.training.jobs.tiny_rl.warmup import load_or_warmup

__all__ = ["GateFailed", "RLSummary", "TinyRLConfig", "load_or_warmup", "main", "parse_config", "train"]
