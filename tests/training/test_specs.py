"""labbot.training.specs / params / durations / registry: the pure parsing of what a user asks for."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labbot.common.durations import format_duration, parse_duration
from labbot.common.errors import BadRequest, UnknownJob
from labbot.storage.models import Run
from labbot.training.params import coerce_param, parse_assignments
from labbot.training.registry import TINY_LM, TINY_RL, JobRegistry
from labbot.training.run_json import run_view
from labbot.training.specs import MAX_PLOTTED, LaunchRequest, RunConfig, entrypoint_command, plotted, resolve_launch
from labbot.training.telemetry_ingest import MAX_NAME

RL = {"entrypoint": "python rl.py", "params": {"steps": 100}, "plot": ["reward", "pass_rate"]}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("10m", 600), ("1h30m", 5400), ("45", 45), ("1.5h", 5400), ("250ms", 0.25), ("2d", 172800)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "s", "10 m", "-5s", "0", "1h-3m", "nan", "inf", "m10"])
def test_bad_durations_name_what_is_accepted(text: str) -> None:
    with pytest.raises(BadRequest, match=r"e\.g\. 30s"):
        parse_duration(text)


@given(st.floats(min_value=0.001, max_value=1e8))
def test_what_format_duration_writes_parse_duration_reads_back(seconds: float) -> None:
    shown = format_duration(seconds)
    back = parse_duration(shown)  # to the precision shown, never longer than it was
    assert back <= seconds * (1 + 1e-9) and format_duration(back) == shown


def test_assignments() -> None:
    assert parse_assignments(["steps=100", "lr=3e-4", "name=a=b"]) == {"steps": "100", "lr": "3e-4", "name": "a=b"}
    for bad in (["steps"], ["=3"], ["1x=2"], ["steps=1", "steps=2"]):
        with pytest.raises(BadRequest, match=r"steps=100|twice"):
            parse_assignments(bad)


def test_coercion_follows_the_default_type() -> None:
    assert coerce_param("steps", "12", 200) == 12
    assert coerce_param("lr", "3e-4", 0.003) == pytest.approx(3e-4)
    assert coerce_param("fast", "yes", False) is True
    assert coerce_param("device", "cuda", "auto") == "cuda"
    with pytest.raises(BadRequest, match="'steps' expects an integer, got 'abc'"):
        coerce_param("steps", "abc", 200)
    with pytest.raises(BadRequest, match="expects an integer"):
        coerce_param("steps", 1.5, 200)
    with pytest.raises(BadRequest, match="true or false"):
        coerce_param("fast", "maybe", False)


def test_resolve_launch_checks_parameters_against_the_job() -> None:
    cfg = resolve_launch(TINY_LM, LaunchRequest(job="tiny-lm", params={"steps": "40"}, stall_after="30s"))
    assert cfg.params["steps"] == 40 and cfg.params["checkpoint_every"] == 50
    assert cfg.stall_after_s == 30 and cfg.max_restarts == 2 and cfg.gpus == 0
    with pytest.raises(BadRequest, match=r"unknown parameter stepz for job tiny-lm; accepted: .*steps"):
        resolve_launch(TINY_LM, LaunchRequest(job="tiny-lm", params={"stepz": "1"}))
    with pytest.raises(BadRequest, match="bad duration"):
        resolve_launch(TINY_LM, LaunchRequest(job="tiny-lm", stall_after="soon"))


def test_entrypoint_quotes_values() -> None:
    cmd = entrypoint_command(TINY_LM, {"steps": 5, "device": "cpu; rm -rf /"})
    assert cmd == "python -m labbot.training.jobs.tiny_lm --steps 5 --device 'cpu; rm -rf /'"


def test_registry_from_toml_table() -> None:
    reg = JobRegistry.from_config(
        {"sft": {"entrypoint": "python train.py", "gpus": 1, "stall_after": "5m", "params": {"lr": 1e-4}}}
    )
    assert [j.name for j in reg.all()] == ["eval", "eval-generate", "eval-incidents", "sft", "tiny-lm", "tiny-rl"]
    assert reg.get("sft").stall_after == 300 and reg.get("sft").gpus == 1
    with pytest.raises(
        UnknownJob, match="unknown job 'nope'; known jobs: eval, eval-generate, eval-incidents, sft, tiny-lm, tiny-rl"
    ):
        reg.get("nope")
    with pytest.raises(BadRequest, match=r"\[jobs.bad\] is invalid: entrypoint"):
        JobRegistry.from_config({"bad": {"gpus": 1}})
    with pytest.raises(BadRequest, match="invalid"):
        JobRegistry.from_config({"bad": {"entrypoint": "x", "colour": "red"}})


def test_tiny_rl_registry_has_every_config_field_with_its_default() -> None:
    from labbot.training.jobs.tiny_rl import TinyRLConfig

    assert TINY_RL.params == dataclasses.asdict(TinyRLConfig())


@pytest.mark.parametrize(
    ("params", "msg"),
    [
        ({"algo": "ppo"}, "algo='ppo' is not accepted by job tiny-rl; algo is one of grpo, sdpo, blend, rlsd"),
        ({"group_size": "1"}, "group_size=1 is out of range for job tiny-rl; group_size is a number of at least 2"),
        ({"lam": "1.5"}, "lam=1.5 is out of range for job tiny-rl; lam is a number from 0 to 1"),
    ],
)
def test_tiny_rl_refuses_bad_params_at_launch(params: dict[str, bool | int | float | str], msg: str) -> None:
    with pytest.raises(BadRequest, match=re.escape(msg)):
        resolve_launch(TINY_RL, LaunchRequest(job="tiny-rl", params=params))
    assert resolve_launch(TINY_RL, LaunchRequest(job="tiny-rl", params={"algo": "blend", "lam": "0.25"}))


def test_tiny_lm_registry_params_are_fields_of_the_job() -> None:
    from labbot.training.jobs.tiny_lm import TinyLMConfig

    fields = {f.name: f for f in dataclasses.fields(TinyLMConfig)}
    for key, value in TINY_LM.params.items():
        assert key in fields, f"registry parameter {key} is not a TinyLMConfig field"
        assert type(value) is type(fields[key].default) or (isinstance(value, float) and math.isfinite(value))


# --- alerts, RL thresholds and parameter checks a job declares ----------------------------------------------------

RL_JOB = {
    "my-rl": {
        "entrypoint": "python rl.py",
        "params": {"algo": "grpo", "group_size": 8, "lam": 0.5},
        "checks": {"algo": {"choices": ["grpo", "sdpo"]}, "group_size": {"min": 2}, "lam": {"min": 0, "max": 1}},
        "alerts": [
            {"metric": "pass_rate", "condition": "below", "threshold": 0.2, "for": "10m"},
            "reward flat for 15m warning",
        ],
        "watch": {"kl_max": 5, "entropy_floor": 0.1},
    }
}


def test_a_job_declares_alerts_as_tables_or_words_and_a_launch_adds_or_replaces_them() -> None:
    spec = JobRegistry.from_config(RL_JOB).get("my-rl")
    assert [a["name"] for a in spec.alerts] == ["pass_rate-below", "reward-flat"]
    cfg = resolve_launch(spec, LaunchRequest(job="my-rl"))
    assert cfg.alerts == spec.alerts and cfg.watch == {"kl_max": 5.0, "entropy_floor": 0.1}
    cfg = resolve_launch(
        spec,
        LaunchRequest(
            job="my-rl", alerts=["pass_rate below 0.5 for 1m", "loss nan"], watch={"kl_max": "8", "kl_jump": 4}
        ),
    )
    by_name = {a["name"]: a for a in cfg.alerts}
    assert by_name["pass_rate-below"]["threshold"] == 0.5 and by_name["pass_rate-below"]["for_s"] == 60.0
    assert set(by_name) == {"pass_rate-below", "reward-flat", "loss-nan"}
    assert cfg.watch == {"kl_max": 8.0, "entropy_floor": 0.1, "kl_jump": 4.0}


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"alerts": [{"metric": "pass_rate", "condition": "under", "threshold": 0.2}]}, "condition 'under'"),
        ({"alerts": [{"metric": "loss", "condition": "above", "threshold": 1, "when": "5m"}]}, "unknown key when"),
        ({"alerts": ["loss above 1", "loss above 2"]}, "two alerts named loss-above"),
        ({"alerts": "loss above 1"}, "alerts is a list"),
        ({"watch": {"kl_maximum": 5}}, "unknown threshold 'kl_maximum'; accepted: no_signal_frac"),
        ({"watch": {"no_signal_frac": 2}}, "no_signal_frac=2 is a fraction in (0, 1]"),
        ({"checks": {"steps": {"min": 1}}}, "checks name parameters the job does not have: steps"),
        ({"params": {"algo": "ppo"}, "checks": {"algo": {"choices": ["grpo"]}}}, "algo is one of grpo"),
    ],
)
def test_a_bad_alert_threshold_or_check_in_labbot_toml_names_the_job_and_what_is_accepted(
    body: dict[str, object], said: str
) -> None:
    with pytest.raises(BadRequest) as e:
        JobRegistry.from_config({"j": {"entrypoint": "true", **body}})
    assert e.value.message.startswith("labbot.toml: [jobs.j] is invalid")
    assert said in e.value.message


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"algo": "ppo"}, "parameter algo='ppo' is not accepted by job my-rl; algo is one of grpo, sdpo"),
        ({"group_size": "-4"}, "parameter group_size=-4 is out of range for job my-rl; group_size is a number of at"),
        ({"lam": "1.5"}, "parameter lam=1.5 is out of range for job my-rl; lam is a number from 0 to 1"),
    ],
)
def test_bad_parameters_are_refused_at_launch_with_what_is_accepted(params: dict[str, str], said: str) -> None:
    spec = JobRegistry.from_config(RL_JOB).get("my-rl")
    with pytest.raises(BadRequest) as e:
        resolve_launch(spec, LaunchRequest(job="my-rl", params=params))
    assert said in e.value.message


@pytest.mark.parametrize(
    ("req", "said"),
    [
        ({"alerts": ["pass_rate under 0.2"]}, "condition 'under' is not one of above, below, flat, nan"),
        ({"watch": {"entropy_floor": "low"}}, "entropy_floor='low' must be a number ≥ 0"),
    ],
)
def test_a_bad_launch_alert_or_threshold_is_refused(req: dict[str, object], said: str) -> None:
    spec = JobRegistry.from_config(RL_JOB).get("my-rl")
    with pytest.raises(BadRequest) as e:
        resolve_launch(spec, LaunchRequest(job="my-rl", **req))  # type: ignore[arg-type]
    assert said in e.value.message


def test_a_job_plots_loss_unless_it_says_otherwise_and_its_headline_is_the_first_it_plots() -> None:
    reg = JobRegistry.from_config({"rl": RL, "rl2": {**RL, "headline": "pass_rate"}, "sft": {"entrypoint": "x"}})
    assert TINY_LM.plot == ["loss"] and TINY_LM.headline_metric == "loss"
    assert reg.get("tiny-lm").plot == ["loss"] and reg.get("sft").plot == ["loss"]
    assert reg.get("sft").headline_metric == "loss"
    assert reg.get("rl").plot == ["reward", "pass_rate"] and reg.get("rl").headline_metric == "reward"
    assert reg.get("rl2").headline_metric == "pass_rate"
    odd = ["eval/pass@1", "train.loss", "kl-div", "a" * MAX_NAME]  # any name the telemetry accepts
    assert JobRegistry.from_config({"odd": {"entrypoint": "x", "plot": odd}}).get("odd").plot == odd


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"plot": []}, "plot must name at least one metric"),
        ({"plot": [""]}, "bad metric name '' in plot: metric names must be 1-64 characters"),
        ({"plot": ["x" * (MAX_NAME + 1)]}, "metric names must be 1-64 characters"),
        ({"plot": ["reward", "reward"]}, "plot names 'reward' more than once"),
        ({"plot": [f"m{i}" for i in range(MAX_PLOTTED + 1)]}, f"at most {MAX_PLOTTED} fit"),
        ({"plot": "reward"}, "plot"),  # a string is not a list of names
        ({"plot": ["reward"], "headline": "pass_rate"}, "headline 'pass_rate' is not one of plot"),
        ({"headline": "reward"}, r"headline 'reward' is not one of plot \['loss'\]"),
    ],
)
def test_bad_plots_and_headlines_are_refused_naming_the_job(body: dict[str, object], message: str) -> None:
    with pytest.raises(BadRequest, match=r"labbot.toml: \[jobs.rl\] is invalid: .*" + message):
        JobRegistry.from_config({"rl": {"entrypoint": "python rl.py", **body}})


def test_resolve_launch_stores_what_the_run_plots_with_the_run() -> None:
    spec = JobRegistry.from_config({"rl": {**RL, "headline": "pass_rate"}}).get("rl")
    cfg = resolve_launch(spec, LaunchRequest(job="rl"))
    assert cfg.plot == ["reward", "pass_rate"] and cfg.headline == "pass_rate"
    stored = cfg.model_dump()  # what the runs row keeps (a JSON column)
    assert stored["plot"] == ["reward", "pass_rate"] and stored["headline"] == "pass_rate"
    assert RunConfig.model_validate(stored) == cfg
    plain = resolve_launch(TINY_LM, LaunchRequest(job="tiny-lm"))
    assert plain.plot == ["loss"] and plain.headline == "loss"


def test_a_config_stored_before_plots_existed_reads_as_loss() -> None:
    old = {"params": {"steps": 200}, "gpus": 0, "stall_after_s": 600.0, "max_restarts": 2}
    cfg = RunConfig.model_validate(old)
    assert cfg.plot == ["loss"] and cfg.headline == "loss"
    assert plotted(old) == (["loss"], "loss") and plotted(None) == (["loss"], "loss")
    assert plotted({"plot": ["reward", "pass_rate"]}) == (["reward", "pass_rate"], "reward")
    view = run_view(Run(id="r1", job="tiny-lm", name="old", owner="U1", config=old, status="running", attempt=1))
    assert view["plot"] == ["loss"] and view["headline"] == "loss"
    new = resolve_launch(JobRegistry.from_config({"rl": RL}).get("rl"), LaunchRequest(job="rl")).model_dump()
    view = run_view(Run(id="r2", job="rl", name="new", owner="U1", config=new, status="running", attempt=1))
    assert view["plot"] == ["reward", "pass_rate"] and view["headline"] == "reward"


def test_a_runs_json_says_its_alerts_in_words() -> None:
    spec = JobRegistry.from_config(RL_JOB).get("my-rl")
    cfg = resolve_launch(spec, LaunchRequest(job="my-rl", alerts=["loss nan warning"])).model_dump()
    view = run_view(Run(id="r3", job="my-rl", name="n", owner="U1", config=cfg, status="running", attempt=1))
    assert view["alerts"] == [
        "pass_rate below 0.2 for 10m (page, as pass_rate-below)",
        "reward flat for 15m (warning, as reward-flat)",
        "loss nan (warning, as loss-nan)",
    ]
