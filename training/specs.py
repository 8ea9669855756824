"""Job specs and launch requests: what a job is, and the pure parsing of what a user asked for.

A ``JobSpec`` comes from the registry (built-in or ``labbot.toml``); a ``LaunchRequest`` is what a front door
(CLI, Slack, an agent) sends; ``resolve_launch`` checks one against the other and returns the ``RunConfig`` that
is stored with the run, or raises ``BadRequest`` naming what was wrong and what is accepted. Nothing here does I/O.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from labbot.common.durations import parse_duration
from labbot.common.errors import BadRequest
from labbot.training.params import PARAM_KEY, ParamValue, coerce_param
from labbot.training.telemetry_ingest import METRIC_NAME_RULE, metric_name_ok

DEFAULT_STALL_AFTER_S = 600.0
DEFAULT_MAX_RESTARTS = 2
RestartCondition = Literal["failed", "hung", "silent"]
RESTART_CONDITIONS: tuple[str, ...] = get_args(RestartCondition)
DEFAULT_PLOT: tuple[str, ...] = ("loss",)
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


class JobSpec(BaseModel):
    """A launchable job. ``params`` are its parameters with their defaults (and so their types)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    entrypoint: str
    description: str = ""
    working_dir: str | None = None
    gpus: float = Field(default=0, ge=0)
    env: dict[str, str] = Field(default_factory=dict)
    params: dict[str, ParamValue] = Field(default_factory=dict)
    stall_after: float = DEFAULT_STALL_AFTER_S
    max_restarts: int = Field(default=DEFAULT_MAX_RESTARTS, ge=0)
    # None: the [watchdog] defaults of labbot.toml
    pending_after: float | None = None
    restart_on: tuple[RestartCondition, ...] | None = None
    # the metrics the run's thread plots, one panel each, and the one its card shows (None: the first of plot)
    plot: list[str] = Field(default_factory=_default_plot)
    headline: str | None = None

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


class LaunchRequest(BaseModel):
    """What a front door asks for. ``params`` values are raw strings (``KEY=VALUE``) or already typed (JSON)."""

    model_config = ConfigDict(extra="forbid")

    job: str
    name: str | None = Field(default=None, max_length=200)
    owner: str = Field(default="cli", max_length=100)
    params: dict[str, ParamValue] = Field(default_factory=dict)
    gpus: float | None = Field(default=None, ge=0)
    stall_after: str | float | None = None
    pending_after: str | float | None = None
    max_restarts: int | None = Field(default=None, ge=0)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class RunConfig(BaseModel):
    """Stored with the run (``Run.config``, JSON): everything needed to (re)submit it, and what its thread shows.

    ``plot`` and ``headline`` are copied from the job at launch, so a run keeps its plots when ``labbot.toml``
    changes later; a config stored before they existed reads as loss (see ``plotted`` for the lenient reader).
    """

    params: dict[str, ParamValue]
    gpus: float
    stall_after_s: float
    max_restarts: int
    pending_after_s: float | None = None  # None: the watchdog's default
    restart_on: list[str] | None = None  # conditions restarted automatically; None: the watchdog's default
    plot: list[str] = Field(default_factory=_default_plot)  # the metrics the thread plots
    headline: str | None = None  # the metric the card shows; None (a config stored without it): the first of plot

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
    stall_after = _duration_or(req.stall_after, spec.stall_after)
    pending_after = _duration_or(req.pending_after, spec.pending_after)
    return RunConfig(
        params=params,
        gpus=spec.gpus if req.gpus is None else req.gpus,
        stall_after_s=stall_after,
        max_restarts=spec.max_restarts if req.max_restarts is None else req.max_restarts,
        pending_after_s=pending_after,
        restart_on=list(spec.restart_on) if spec.restart_on is not None else None,
        plot=list(spec.plot),
        headline=spec.headline_metric,
    )


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
