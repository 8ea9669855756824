"""Job specs and launch requests: what a job is, and the pure parsing of what a user asked for.

A ``JobSpec`` comes from the registry (built-in or ``labbot.toml``); a ``LaunchRequest`` is what a front door
(CLI, Slack, an agent) sends; ``resolve_launch`` checks one against the other and returns the ``RunConfig`` that
is stored with the run, or raises ``BadRequest`` naming what was wrong and what is accepted. Nothing here does I/O.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from labbot.common.durations import parse_duration
from labbot.common.errors import BadRequest
from labbot.training.alerts import alert_from_json, make_alert, merge_alerts, parse_alert
from labbot.training.monitoring import RL_THRESHOLDS
from labbot.training.params import PARAM_KEY, ParamValue, coerce_param
from labbot.training.remedies import Remedy, check_remedy, parse_remedy
from labbot.training.telemetry_ingest import METRIC_NAME_RULE, metric_name_ok

DEFAULT_STALL_AFTER_S = 600.0
DEFAULT_MAX_RESTARTS = 2
RestartCondition = Literal["failed", "hung", "silent"]
RESTART_CONDITIONS: tuple[str, ...] = get_args(RestartCondition)
DEFAULT_PLOT: tuple[str, ...] = ("loss",)
Purpose = Literal["training", "eval", "data", "research", "serving"]
PURPOSES: tuple[str, ...] = get_args(Purpose)
"""What a run is for: each purpose has its own share or cap of the cluster (``[compute]``, labbot.training.capacity)."""
DEFAULT_PURPOSE = "training"


def check_purpose(value: Any, where: str = "purpose") -> str:
    """A purpose, or BadRequest naming the five."""
    if value not in PURPOSES:
        raise BadRequest(f"{where} {value!r} is not a purpose; purposes: {', '.join(PURPOSES)}")
    return str(value)


MAX_PLOTTED = 8  # panels in a run's thread plot: more would be too small to read in Slack


def _default_plot() -> list[str]:
    return list(DEFAULT_PLOT)


def check_plot(names: list[str]) -> list[str]:
    """A job's ``plot``: 1 to ``MAX_PLOTTED`` distinct metric names, each one the telemetry accepts."""
    if not names:
        raise ValueError('plot must name at least one metric, e.g. plot = ["loss"]')
    if len(names) > MAX_PLOTTED:
        raise ValueError(f"plot names {len(names)} metrics; at most {MAX_PLOTTED} fit in a run's thread plot")
    for name in names:
        if not metric_name_ok(name):
            raise ValueError(f"bad metric name {name!r} in plot: {METRIC_NAME_RULE}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"plot names {', '.join(map(repr, repeated))} more than once")
    return names


def check_headline(plot: list[str], headline: str | None) -> str:
    """The headline metric: ``headline`` when given (it must be one of ``plot``), else the first of ``plot``."""
    if headline is None:
        return plot[0]
    if headline not in plot:
        raise ValueError(
            f"headline {headline!r} is not one of plot {plot}: the card's metric must be one the thread plots"
        )
    return headline


class ParamCheck(BaseModel):
    """What values a parameter accepts beyond its type: one of ``choices``, or a number within ``[min, max]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    choices: tuple[ParamValue, ...] | None = None
    min: float | None = None
    max: float | None = None

    def accepted(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.min is not None and self.max is not None:
            return f"a number from {self.min:g} to {self.max:g}"
        if self.min is not None:
            return f"a number of at least {self.min:g}"
        return f"a number of at most {self.max:g}"

    def check(self, key: str, value: ParamValue, job: str) -> None:
        if self.choices is not None and value not in self.choices:
            raise BadRequest(f"parameter {key}={value!r} is not accepted by job {job}; {key} is {self.accepted()}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            low = self.min is not None and value < self.min
            high = self.max is not None and value > self.max
            if low or high:
                raise BadRequest(f"parameter {key}={value!r} is out of range for job {job}; {key} is {self.accepted()}")


def _alert_table(item: Any, where: str) -> dict[str, Any]:
    """One alert of a job's ``alerts`` list (a table or the words of ``--alert``) as stored JSON."""
    try:
        if isinstance(item, str):
            return parse_alert(item).to_json()
        if isinstance(item, dict):
            keys = {"metric", "condition", "threshold", "within", "for", "for_s", "severity", "name"}
            unknown = sorted(set(item) - keys)
            if unknown:
                raise BadRequest(
                    f"{where}: unknown key {', '.join(unknown)}; "
                    "keys: metric, condition, threshold (within, for flat), for, severity, name"
                )
            for_ = item.get("for", item.get("for_s"))
            alert = make_alert(
                item.get("metric"),
                item.get("condition"),
                item.get("threshold", item.get("within")),
                for_,
                item.get("severity", "page"),
                item.get("name"),
                where=where,
            )
            return alert.to_json()
    except BadRequest as e:
        raise ValueError(e.message) from None
    raise ValueError(f"{where}: an alert is a table (metric, condition, threshold, for, severity) or its words")


def check_watch(raw: Any, where: str) -> dict[str, float]:
    """RL watchdog thresholds (``RL_THRESHOLDS``) set by a job or a launch; BadRequest names the accepted keys."""
    if not isinstance(raw, dict):
        raise BadRequest(f"{where}: watch is a table of thresholds, e.g. {{ kl_max = 5 }}")
    out: dict[str, float] = {}
    for key, value in raw.items():
        if key not in RL_THRESHOLDS:
            raise BadRequest(f"{where}: unknown threshold {key!r}; accepted: {', '.join(RL_THRESHOLDS)}")
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number) or number < 0:
            raise BadRequest(f"{where}: threshold {key}={value!r} must be a number ≥ 0")
        if key == "no_signal_frac" and not 0 < number <= 1:
            raise BadRequest(f"{where}: no_signal_frac={value!r} is a fraction in (0, 1]")
        if key == "no_signal_points" and (number < 2 or not number.is_integer()):
            raise BadRequest(f"{where}: no_signal_points={value!r} must be a whole number of at least 2")
        out[key] = number
    return out


class JobSpec(BaseModel):
    """A launchable job. ``params`` are its parameters with their defaults (and so their types); ``checks`` what
    some of them accept beyond their type; ``alerts`` its metric alerts (:mod:`labbot.training.alerts`); ``watch``
    the RL watchdog thresholds it sets (``labbot.training.monitoring.RL_THRESHOLDS``); ``remedies`` what the watchdog
    does about a finding instead of paging (:mod:`labbot.training.remedies`), changing only ``remedy_params``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    entrypoint: str
    description: str = ""
    working_dir: str | None = None
    gpus: float = Field(default=0, ge=0)
    # CPUs the entrypoint reserves on Ray (entrypoint_num_cpus); None: none reserved (Ray's default), counted as 1
    # against its purpose's [compute] cap (the entrypoint's own process)
    cpus: float | None = Field(default=None, ge=0)
    purpose: Purpose = "training"
    # custom node resources the entrypoint needs (entrypoint_resources): it runs only on a node that has them,
    # e.g. {accelerator = 1} for a node started with --resources='{"accelerator": 1}'
    resources: dict[str, float] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    params: dict[str, ParamValue] = Field(default_factory=dict)
    stall_after: float = DEFAULT_STALL_AFTER_S
    max_restarts: int = Field(default=DEFAULT_MAX_RESTARTS, ge=0)
    # None: the [watchdog] defaults of labbot.toml
    pending_after: float | None = None
    restart_on: tuple[RestartCondition, ...] | None = None
    checks: dict[str, ParamCheck] = Field(default_factory=dict)
    alerts: list[dict[str, Any]] = Field(default_factory=list)
    watch: dict[str, float] = Field(default_factory=dict)
    # [[jobs.NAME.remedies]]: roll back to the last good checkpoint and restart with changed parameters (stored form)
    remedies: list[dict[str, Any]] = Field(default_factory=list)
    # the parameters a remedy may change; None: any of params (a job names them to keep its fault switches out)
    remedy_params: list[str] | None = None
    # the metrics the run's thread plots, one panel each, and the one its card shows (None: the first of plot)
    plot: list[str] = Field(default_factory=_default_plot)
    headline: str | None = None
    # the metrics the job reports (an experiment's objective must be one); None: those it plots and alerts on
    reports: list[str] | None = None
    # what an experiment sets for each repeat, and reads as a run's length (when the job has such parameters)
    seed_param: str = "seed"
    steps_param: str = "steps"
    # expected seconds per step on its resources, for an experiment's projected cost; None: learned from its runs
    step_seconds: float | None = Field(default=None, gt=0)

    @field_validator("resources", mode="before")
    @classmethod
    def _resources(cls, v: Any) -> dict[str, float]:
        try:
            return check_resources(v, "resources")
        except BadRequest as e:
            raise ValueError(e.message) from None

    @field_validator("reports")
    @classmethod
    def _reports(cls, v: list[str] | None) -> list[str] | None:
        for name in v or []:
            if not metric_name_ok(name):
                raise ValueError(f"bad metric name {name!r} in reports: {METRIC_NAME_RULE}")
        return v

    @field_validator("alerts", mode="before")
    @classmethod
    def _alerts(cls, v: Any) -> list[dict[str, Any]]:
        if not isinstance(v, list | tuple):
            raise ValueError("alerts is a list of [[jobs.NAME.alerts]] tables")
        out = [_alert_table(item, f"alert {i + 1}") for i, item in enumerate(v)]
        names = [a["name"] for a in out]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two alerts named {', '.join(twice)}: give one a 'name'")
        return out

    @field_validator("watch", mode="before")
    @classmethod
    def _watch(cls, v: Any) -> dict[str, float]:
        try:
            return check_watch(v, "watch")
        except BadRequest as e:
            raise ValueError(e.message) from None

    @model_validator(mode="after")
    def _remedies_fit(self) -> JobSpec:
        unknown = sorted(set(self.remedy_params or []) - set(self.params))
        if unknown:
            raise ValueError(f"remedy_params names parameters the job does not have: {', '.join(unknown)}")
        try:
            checked = self.checked_remedies([], [a["name"] for a in self.alerts])
        except BadRequest as e:
            raise ValueError(e.message) from None
        object.__setattr__(self, "remedies", [r.to_json() for r in checked])
        return self

    def checked_remedies(self, launch: list[str], alerts: list[str]) -> list[Remedy]:
        """The launch's remedies (its words, first: they win where both act on a finding) then the job's, each
        checked against the job's parameters; BadRequest names what is wrong."""
        out = []
        for i, raw in enumerate([*launch, *self.remedies]):
            where = f"remedy {i + 1}" if i >= len(launch) else f"--remedy {raw!r}"
            remedy = parse_remedy(raw, where)
            out.append(
                check_remedy(
                    remedy,
                    job=self.name,
                    params=self.params,
                    checks=self.checks,
                    allowed=self.remedy_params,
                    alerts=alerts,
                    where=where,
                )
            )
        return out

    @field_validator("stall_after", "pending_after", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float | None:
        if v is None:
            return None
        return parse_duration(v) if isinstance(v, str) else float(v)

    @field_validator("params")
    @classmethod
    def _param_keys(cls, v: dict[str, ParamValue]) -> dict[str, ParamValue]:
        for key in v:
            if not PARAM_KEY.match(key):
                raise ValueError(f"bad parameter name {key!r}: use letters, digits, '_' or '-'")
        return v

    @model_validator(mode="after")
    def _checks_name_params(self) -> JobSpec:
        unknown = sorted(set(self.checks) - set(self.params))
        if unknown:
            raise ValueError(f"checks name parameters the job does not have: {', '.join(unknown)}")
        for key, check in self.checks.items():
            try:
                check.check(key, self.params[key], self.name)  # the defaults must pass their own checks
            except BadRequest as e:
                raise ValueError(f"the default {e.message}") from None
        return self

    @field_validator("plot")
    @classmethod
    def _plot(cls, v: list[str]) -> list[str]:
        return check_plot(v)

    @model_validator(mode="after")
    def _headline_in_plot(self) -> JobSpec:
        check_headline(self.plot, self.headline)
        return self

    @property
    def headline_metric(self) -> str:
        """The metric the run card shows: ``headline``, or the first of ``plot``."""
        return check_headline(self.plot, self.headline)

    @property
    def reported_metrics(self) -> list[str]:
        """The metrics the job reports: ``reports``, else those it plots and its alerts watch (in that order)."""
        if self.reports is not None:
            return list(self.reports)
        names = list(self.plot)
        names += [a["metric"] for a in self.alerts if a.get("metric") not in names]
        return names

    @property
    def seed_key(self) -> str | None:
        """The parameter that seeds a run, if the job has it."""
        return self.seed_param if self.seed_param in self.params else None

    @property
    def steps_key(self) -> str | None:
        """The parameter that sets a run's length in steps, if the job has it."""
        return self.steps_param if self.steps_param in self.params else None


class LaunchRequest(BaseModel):
    """What a front door asks for. ``params`` values are raw strings (``KEY=VALUE``) or already typed (JSON)."""

    model_config = ConfigDict(extra="forbid")

    job: str
    name: str | None = Field(default=None, max_length=200)
    owner: str = Field(default="cli", max_length=100)
    params: dict[str, ParamValue] = Field(default_factory=dict)
    gpus: float | None = Field(default=None, ge=0)
    cpus: float | None = Field(default=None, ge=0)
    # custom node resources over the job's ({"accelerator": 1}); a resource set to 0 drops the job's
    resources: dict[str, float | str] = Field(default_factory=dict, max_length=16)
    purpose: str | None = Field(default=None, max_length=32)  # one of PURPOSES; None: the job's
    # over its purpose's cap: refused (409, with the numbers) instead of waiting in the queue
    no_queue: bool = False
    stall_after: str | float | None = None
    pending_after: str | float | None = None
    max_restarts: int | None = Field(default=None, ge=0)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    # metric alerts added at launch, in the words of labbot.training.alerts ("pass_rate below 0.2 for 10m")
    alerts: list[str] = Field(default_factory=list, max_length=20)
    watch: dict[str, float | str] = Field(default_factory=dict)  # RL watchdog thresholds for this run
    # remedies added at launch, in their words ("entropy_collapse: temperature += 0.5; max 2")
    remedies: list[str] = Field(default_factory=list, max_length=10)


class RunConfig(BaseModel):
    """Stored with the run (``Run.config``, JSON): everything needed to (re)submit it, and what its thread shows.

    ``plot`` and ``headline`` are copied from the job at launch, so a run keeps its plots when ``labbot.toml``
    changes later; a config stored before they existed reads as loss (see ``plotted`` for the lenient reader).
    """

    params: dict[str, ParamValue]
    gpus: float
    stall_after_s: float
    purpose: str = DEFAULT_PURPOSE  # a config stored before purposes existed: training
    cpus: float | None = None  # entrypoint_num_cpus; None: not reserved on Ray
    resources: dict[str, float] = Field(default_factory=dict)  # entrypoint_resources: custom node resources
    max_restarts: int
    pending_after_s: float | None = None  # None: the watchdog's default
    restart_on: list[str] | None = None  # conditions restarted automatically; None: the watchdog's default
    alerts: list[dict[str, Any]] = Field(default_factory=list)  # the job's and the launch's (Alert.to_json)
    watch: dict[str, float] = Field(default_factory=dict)  # RL thresholds over [watchdog]'s
    remedies: list[dict[str, Any]] = Field(default_factory=list)  # the launch's then the job's (Remedy.to_json)
    # the remedial attempts so far, oldest first (the run's lineage): attempt, remedy, condition, summary,
    # signal_step, checkpoint_step, changes ({param, from, to, change}), window, at — written by the watchdog
    remedied: list[dict[str, Any]] = Field(default_factory=list)
    plot: list[str] = Field(default_factory=_default_plot)  # the metrics the thread plots
    headline: str | None = None  # the metric the card shows; None (a config stored without it): the first of plot
    given: list[str] | None = None  # the params the launch set (the rest are the job's defaults); None: not known

    @model_validator(mode="after")
    def _fill_headline(self) -> RunConfig:
        if not self.plot:
            self.plot = _default_plot()
        if self.headline is None:
            self.headline = self.plot[0]
        return self


def plotted(config: Mapping[str, Any] | None) -> tuple[list[str], str]:
    """``(plot, headline)`` of a stored run config, read leniently: a config stored before labbot kept them (or
    one missing anything else ``RunConfig`` needs) plots loss and shows loss."""
    cfg = config or {}
    raw = cfg.get("plot")
    plot = [m for m in raw if isinstance(m, str) and m] if isinstance(raw, list) else []
    plot = plot or _default_plot()
    headline = cfg.get("headline")
    return plot, headline if isinstance(headline, str) and headline else plot[0]


def resolve_launch(spec: JobSpec, req: LaunchRequest) -> RunConfig:
    """Check a request against its job and produce the stored run config."""
    params: dict[str, ParamValue] = dict(spec.params)
    unknown = sorted(set(req.params) - set(spec.params))
    if unknown:
        accepted = ", ".join(sorted(spec.params)) or "none"
        raise BadRequest(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for job {spec.name}; "
            f"accepted: {accepted}"
        )
    for key, raw in req.params.items():
        params[key] = coerce_param(key, raw, spec.params[key])
        if key in spec.checks:
            spec.checks[key].check(key, params[key], spec.name)
    alerts = merge_alerts([alert_from_json(a) for a in spec.alerts], [parse_alert(text) for text in req.alerts])
    watch = {**spec.watch, **check_watch(req.watch, "watch")}
    remedies = spec.checked_remedies(list(req.remedies), [a.name for a in alerts])
    stall_after = _duration_or(req.stall_after, spec.stall_after)
    pending_after = _duration_or(req.pending_after, spec.pending_after)
    purpose = spec.purpose if req.purpose is None else check_purpose(req.purpose)
    resources = {**spec.resources, **check_resources(req.resources, "--resources")}
    return RunConfig(
        params=params,
        gpus=spec.gpus if req.gpus is None else req.gpus,
        cpus=spec.cpus if req.cpus is None else req.cpus,
        resources={k: v for k, v in resources.items() if v > 0},
        purpose=purpose,
        stall_after_s=stall_after,
        max_restarts=spec.max_restarts if req.max_restarts is None else req.max_restarts,
        pending_after_s=pending_after,
        restart_on=list(spec.restart_on) if spec.restart_on is not None else None,
        alerts=[a.to_json() for a in alerts],
        watch=watch,
        remedies=[r.to_json() for r in remedies],
        plot=list(spec.plot),
        headline=spec.headline_metric,
        given=sorted(req.params),
    )


#: resources a launch names with their own flags (--cpus, --gpus) or that Ray keeps for itself
_BUILTIN_RESOURCES = {"CPU": "cpus", "GPU": "gpus", "memory": None, "object_store_memory": None}
RESOURCE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-/]{0,62}$")


def check_resources(value: Any, where: str) -> dict[str, float]:
    """Custom node resources (``{"accelerator": 1}``; values may be numeric strings, from ``--resources
    accelerator=1``): each a name Ray accepts and a finite number of at least 0; BadRequest names what is wrong."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadRequest(f"{where} must be a table of resource = amount, e.g. {{accelerator = 1}}")
    out: dict[str, float] = {}
    for name, raw in value.items():
        if not isinstance(name, str) or not RESOURCE_NAME.match(name):
            raise BadRequest(
                f"{where}: {str(name)[:40]!r} is not a resource name "
                "(a letter, then letters, digits, '_', '-', '.', '/')"
            )
        if name in _BUILTIN_RESOURCES:
            flag = _BUILTIN_RESOURCES[name]
            instead = f"use {flag} / --{flag}" if flag else "Ray sets it for each node"
            raise BadRequest(f"{where}: {name} is not a custom resource: {instead}")
        try:
            amount = float(raw) if not isinstance(raw, bool) else float("nan")
        except (TypeError, ValueError):
            amount = float("nan")
        if not math.isfinite(amount) or amount < 0:
            raise BadRequest(f"{where}: {name}={str(raw)[:20]!r} must be a number of at least 0, e.g. {name}=1")
        out[name] = amount
    return out


def _duration_or(given: str | float | None, default: float | None) -> Any:
    if given is None:
        return default
    if isinstance(given, str):
        return parse_duration(given)
    seconds = float(given)
    if not seconds > 0:
        raise BadRequest(f"bad duration {given!r}: it must be positive, e.g. 30s")
    return seconds


def entrypoint_command(spec: JobSpec, params: Mapping[str, ParamValue]) -> str:
    """The shell command Ray runs: the job's entrypoint followed by ``--key value`` for every parameter."""
    parts = [spec.entrypoint]
    for key, value in params.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        parts.append(f"--{key} {shlex.quote(text)}")
    return " ".join(parts)
