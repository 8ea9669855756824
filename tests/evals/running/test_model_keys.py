"""An agent solver is refused at launch when the eval job could not run it: no model, or no key for its provider where
the job runs (labbot's own key never reaches a job; the eval jobs get ``LABBOT_EVAL_<KEY>`` as their key)."""

from __future__ import annotations

import pytest

from labbot.common.errors import BadRequest
from labbot.evals.running.model_keys import agent_ready, eval_job_env
from labbot.evals.running.solvers import parse_solver


def test_a_model_without_its_key_is_refused_naming_the_variable_to_set() -> None:
    with pytest.raises(BadRequest, match=r"needs ANTHROPIC_API_KEY where the eval job runs.*LABBOT_EVAL_ANTHROPIC_API"):
        agent_ready(parse_solver("agent:anthropic/claude-sonnet-4-5"), {})
    with pytest.raises(BadRequest, match="OPENAI_API_KEY"):
        agent_ready(parse_solver("agent:openai/gpt-x"), {"ANTHROPIC_API_KEY": "k"})
    agent_ready(parse_solver("agent:anthropic/claude-sonnet-4-5"), {"ANTHROPIC_API_KEY": "k"})


def test_no_model_and_no_default_is_refused_and_the_default_is_checked_too() -> None:
    with pytest.raises(BadRequest, match=r"needs a model: name one .* LABBOT_EVAL_MODEL"):
        agent_ready(parse_solver("agent"), {})
    with pytest.raises(BadRequest, match="ANTHROPIC_API_KEY"):
        agent_ready(parse_solver("agent"), {"LABBOT_EVAL_MODEL": "anthropic/claude-x"})
    agent_ready(parse_solver("agent"), {"LABBOT_EVAL_MODEL": "anthropic/claude-x", "ANTHROPIC_API_KEY": "k"})


def test_models_that_need_no_key_and_other_solvers_pass() -> None:
    for solver in ("agent:mockllm/model", "gold", "none", "./my-agent.sh --fix"):
        agent_ready(parse_solver(solver), {})


def test_the_eval_jobs_get_only_the_keys_given_for_evals() -> None:
    environ = {
        "ANTHROPIC_API_KEY": "labbots-own",
        "LABBOT_EVAL_ANTHROPIC_API_KEY": " for-evals ",
        "LABBOT_EVAL_MODEL": "anthropic/claude-x",
        "LABBOT_EVAL_SLACK_BOT_TOKEN": "xoxb-never",
        "OPENAI_API_KEY": "never",
    }
    assert eval_job_env(environ) == {"LABBOT_EVAL_MODEL": "anthropic/claude-x", "ANTHROPIC_API_KEY": "for-evals"}
    assert eval_job_env({}) == {}
