"""The job registry: the built-ins (``tiny-lm``, ``tiny-rl``; ``eval``, ``eval-generate``, ``eval-incidents``) plus
the jobs declared in ``labbot.toml``.

``labbot.toml``::

    [jobs.my-sft]
    entrypoint = "python train.py"      # run from working_dir on the cluster
    working_dir = "./sft"               # uploaded by Ray (runtime_env working_dir)
    gpus = 1
    stall_after = "5m"
    max_restarts = 2
    env = { WANDB_MODE = "offline" }
    params = { lr = 3e-4, steps = 1000 }  # accepted KEY=VALUE parameters, with defaults
    purpose = "training"                # training|eval|data|research|serving: whose [compute] cap it counts against
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from labbot.common.errors import BadRequest, UnknownJob
from labbot.training.specs import JobSpec, ParamCheck

TINY_LM = JobSpec(
    name="tiny-lm",
    description="character-level transformer LM on a public-domain text (CPU ok; Ray Train for num_workers>0)",
    entrypoint="python -m labbot.training.jobs.tiny_lm",
    params={
        "steps": 200,
        "checkpoint_every": 50,
        "log_every": 10,
        "num_workers": 0,
        "batch_size": 16,
        "block_size": 64,
        "n_layer": 2,
        "n_head": 4,
        "n_embd": 64,
        "lr": 3e-3,
        "seed": 1337,
        "device": "auto",
        "num_threads": 0,
        "min_step_s": 0.0,
        "hang_at_step": 0,
        "crash_at_step": 0,
        "nan_at_step": 0,
    },
    checks={
        "min_step_s": ParamCheck(min=0, max=60),
        "num_threads": ParamCheck(min=0),
        "lr": ParamCheck(min=1e-7, max=1.0),
    },
    remedy_params=["lr", "batch_size", "seed"],
    reports=["loss", "tokens_per_s"],
    step_seconds=0.05,  # the default model on one CPU; an experiment learns the real figure from finished runs
)

TINY_RL = JobSpec(
    name="tiny-rl",
    description="RL with textual feedback (GRPO / self-distillation) on multi-digit addition (CPU; Ray rollout actors)",
    entrypoint="python -m labbot.training.jobs.tiny_rl",
    params={
        "algo": "sdpo",
        "steps": 200,
        "n_digits": 2,
        "group_size": 8,
        "prompts_per_step": 8,
        "temperature": 1.0,
        "lr": 2e-4,
        "clip_eps": 0.2,
        "max_grad_norm": 1.0,
        "ppo_epochs": 1,
        "lam": 0.5,
        "teacher": "self",
        "sd_kl_coef": 1.0,
        "ema_decay": 0.99,
        "eval_every": 10,
        "eval_size": 200,
        "checkpoint_every": 25,
        "log_every": 10,
        "warmup_steps": 1000,
        "warmup_batch": 32,
        "warmup_lr": 3e-3,
        "warmup_hint_frac": 0.75,
        "warmup_max_steps": 3000,
        "warmup_min_pass_rate": 0.85,
        "warmup_dir": "",
        "gate_size": 200,
        "gate_max_ratio": 0.7,
        "n_layer": 2,
        "n_head": 4,
        "n_embd": 64,
        "seed": 0,
        "rl_seed": 0,
        "num_threads": 0,
        "min_step_s": 0.0,
        "num_rollout_workers": 0,
        "worker_restarts": 2,
        "hang_at_step": 0,
        "crash_at_step": 0,
        "nan_at_step": 0,
        "reward_stuck_at_step": 0,
        "entropy_collapse_at_step": 0,
        "kl_blowup_at_step": 0,
        "grad_spike_at_step": 0,
    },
    checks={
        "algo": ParamCheck(choices=("grpo", "sdpo", "blend", "rlsd")),
        "teacher": ParamCheck(choices=("self", "ema")),
        "group_size": ParamCheck(min=2),
        "lam": ParamCheck(min=0, max=1),
        "ema_decay": ParamCheck(min=0, max=0.999),
        "n_digits": ParamCheck(min=1, max=8),
        "warmup_hint_frac": ParamCheck(min=0, max=1),
        "warmup_min_pass_rate": ParamCheck(min=0, max=1),
        "num_rollout_workers": ParamCheck(min=0),
        "min_step_s": ParamCheck(min=0, max=60),
        "lr": ParamCheck(min=1e-8, max=0.1),
        "temperature": ParamCheck(min=0.05, max=5.0),
        "clip_eps": ParamCheck(min=0.01, max=1.0),
        "max_grad_norm": ParamCheck(min=0, max=100),
        "sd_kl_coef": ParamCheck(min=0, max=100),
    },
    # what a remedy may change: the training's knobs, never the task, the model or a fault's switch
    remedy_params=[
        "lr",
        "temperature",
        "clip_eps",
        "max_grad_norm",
        "ppo_epochs",
        "lam",
        "sd_kl_coef",
        "ema_decay",
        "teacher",
        "algo",
        "group_size",
        "prompts_per_step",
        "rl_seed",
    ],
    # the default run starts from a warm-up at 0.85 held-out pass rate or more: under 0.5 means RL broke it
    alerts=[{"metric": "pass_rate", "condition": "below", "threshold": 0.5, "for": "2m"}],
    plot=["reward", "pass_rate", "entropy", "kl", "frac_reward_zero_std"],
    headline="pass_rate",
    reports=[
        "loss",
        "reward",
        "frac_reward_zero_std",
        "entropy",
        "kl",
        "clip_frac",
        "grad_norm",
        "response_len",
        "truncated_frac",
        "rollout_logp_diff",
        "generations",
        "tokens_per_s",
        "stale_dropped",
        "rollout_lag",
        "rollout_worker_failures",
        "pass_rate",
        "gate_ratio",
        "sd_adv_flagged",
        "sd_adv_unflagged",
    ],
    seed_param="rl_seed",  # a repeat of an RL run: the same warm-up, another RL seed
)

EVAL = JobSpec(
    name="eval",
    description="an eval suite run sealed, scored by its tests (`labbot eval run SUITE --solver S` launches it)",
    entrypoint="python -m labbot.evals.running.job",
    params={
        "suite": "",
        "solver": "gold",
        "max_samples": 2,
        "timeout": 900,  # seconds a solver may take on one sample
        "test_timeout": 600,  # seconds the scoring test run may take
        "memory_mb": 4096,
        # a command solver's installed agent (evals.running.solver_access): a name of [eval] solver_dirs, the run's own
        # hosts, the names of its variables and the id of the file that holds them (never a value)
        "solver_dir": "",
        "allow_hosts": "",
        "solver_env": "",
        "solver_env_file": "",
        # the samples as Ray tasks over the cluster's nodes (evals.running.fan_out): labbot sets off on a cluster of
        # one node with CPUs (the job then never connects to Ray), auto on more (the job fans out, or says why not)
        "fan_out": "auto",
    },
    # a sample may take its whole time limit without finishing another: a stall is longer than that
    stall_after=1800,
    max_restarts=0,  # an eval run restarted would score its samples twice; a failed one is launched again by hand
    purpose="eval",
    plot=["pass_rate"],  # reported per scored sample (at step = samples done); the card shows it, not a loss
    headline="pass_rate",
)

EVAL_GENERATE = JobSpec(
    name="eval-generate",
    description="an eval suite generated from the codebase labbot serves (delete-and-restore tasks, validated)",
    entrypoint="python -m labbot.evals.generation.job",
    params={"count": 10, "seed": 0, "deletion": "body", "deletions": 1, "prefer": "any"},
    checks={
        "count": ParamCheck(min=1, max=500),
        "seed": ParamCheck(min=0),
        # body: function bodies removed (Commit0-style); function: whole functions (harder: the signature is gone too)
        "deletion": ParamCheck(choices=("body", "function", "mixed")),
        "deletions": ParamCheck(min=1, max=5),  # features of one file each task deletes (harder with more)
        "prefer": ParamCheck(choices=("any", "deep")),  # deep: the largest bodies first
    },
    stall_after=1800,  # one coverage run of the repository's whole test suite may take a while
    max_restarts=0,
    purpose="data",
)

EVAL_INCIDENTS = JobSpec(
    name="eval-incidents",
    description="an incident suite: a model diagnoses each frozen incident, a judge model grades it (`eval run`)",
    entrypoint="python -m labbot.evals.incidents.job",
    params={"suite": "", "solver": "agent", "judge": ""},
    stall_after=1800,
    max_restarts=0,  # a restarted run would ask (and pay for) every case twice
    purpose="eval",
    plot=["pass_rate"],
    headline="pass_rate",
)

BUILTIN_JOBS = (TINY_LM, EVAL, EVAL_GENERATE, TINY_RL, EVAL_INCIDENTS)


class JobRegistry:
    def __init__(self, jobs: Mapping[str, JobSpec]) -> None:
        self._jobs = dict(jobs)

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | None = None) -> JobRegistry:
        """Built-in jobs plus ``[jobs.*]`` from labbot.toml; a job declared there overrides a built-in."""
        jobs = {spec.name: spec for spec in BUILTIN_JOBS}
        for name, body in (table or {}).items():
            if not isinstance(body, Mapping):
                raise BadRequest(f"labbot.toml: [jobs.{name}] must be a table with at least 'entrypoint'")
            try:
                jobs[name] = JobSpec(name=name, **body)
            except ValidationError as e:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or name}: {err['msg']}" for err in e.errors()
                )
                raise BadRequest(f"labbot.toml: [jobs.{name}] is invalid: {problems}") from None
        return cls(jobs)

    def set_env(self, name: str, env: Mapping[str, str]) -> None:
        """Add to a job's environment what only the composition root knows (where the eval suites are)."""
        spec = self.get(name)
        self._jobs[name] = spec.model_copy(update={"env": {**spec.env, **env}})

    def get(self, name: str) -> JobSpec:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJob(f"unknown job {name!r}; known jobs: {', '.join(sorted(self._jobs))}") from None

    def all(self) -> list[JobSpec]:
        return [self._jobs[name] for name in sorted(self._jobs)]
