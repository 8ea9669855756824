"""An agent solver's model and key, checked where the eval is launched: the eval job runs the agent through inspect,
which reads the provider's key from the job's environment, and labbot gives no job its own keys. Light (no inspect
import): ``labbot serve`` builds the eval jobs' environment from it at start."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from labbot.common.errors import BadRequest

if TYPE_CHECKING:
    from labbot.evals.running.solvers import SolverSpec

# the key each model provider's API needs (inspect reads it from the job's environment); a provider not listed here
# (mockllm, a local server) is not checked
PROVIDER_KEYS = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "google": "GOOGLE_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "grok": "XAI_API_KEY",
    "groq": "GROQ_API_KEY",
    "together": "TOGETHER_API_KEY",
    "fireworks": "FIREWORKS_API_KEY",
}
EVAL_MODEL_ENV = "LABBOT_EVAL_MODEL"  # the eval jobs' default model for `--solver agent`
EVAL_KEY_PREFIX = "LABBOT_EVAL_"  # LABBOT_EVAL_ANTHROPIC_API_KEY in labbot's environment: the eval jobs' key


def agent_ready(spec: SolverSpec, job_env: Mapping[str, str]) -> None:
    """Refuse (BadRequest, before anything is launched) an agent solver the eval job could not run: no model named and
    no default (``LABBOT_EVAL_MODEL``), or a provider whose key the job will not have. labbot's own key never reaches a
    job: the eval jobs get a key of their own, ``LABBOT_EVAL_<KEY>`` in labbot's environment."""
    if spec.kind != "agent":
        return
    model = spec.model or job_env.get(EVAL_MODEL_ENV)
    if not model:
        raise BadRequest(
            "--solver agent needs a model: name one (--solver agent:PROVIDER/MODEL, e.g. agent:anthropic/"
            f"claude-sonnet-4-5), or set {EVAL_MODEL_ENV} in labbot's environment as the eval jobs' default and "
            "restart labbot; nothing was launched"
        )
    key = PROVIDER_KEYS.get(model.split("/", 1)[0])
    if key is not None and not job_env.get(key):
        raise BadRequest(
            f"--solver agent:{model} needs {key} where the eval job runs, and labbot gives no job its own keys: set "
            f"{EVAL_KEY_PREFIX}{key} (a key for evals) in labbot's environment and restart labbot; nothing was launched"
        )


def eval_job_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What of labbot's environment the eval jobs get for agent solvers: the default model and the providers' keys
    given for evals (``LABBOT_EVAL_ANTHROPIC_API_KEY`` becomes the job's ``ANTHROPIC_API_KEY``), nothing else."""
    out = {EVAL_MODEL_ENV: environ[EVAL_MODEL_ENV].strip()} if (environ.get(EVAL_MODEL_ENV) or "").strip() else {}
    for key in PROVIDER_KEYS.values():
        value = (environ.get(EVAL_KEY_PREFIX + key) or "").strip()
        if value:
            out[key] = value
    return out
