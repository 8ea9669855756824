"""The babysitter's policy: how the watchdog judges runs and how the pager escalates, read from ``labbot.toml``.

``[watchdog]`` sets the defaults that a job (``[jobs.NAME]``) or a launch (``--stall-after``, ``--pending-after``,
``--max-restarts``) may override; ``[paging]`` is the escalation policy. Every value has a sensible default, so
both tables are optional::

    [watchdog]
    tick = "2s"               # how often the watchdog looks (one Ray list_jobs + one DB query a tick)
    pending_after = "10m"     # PENDING in Ray this long is a page (Ray's own stop does nothing to PENDING jobs)
    infra_after = "2m"        # the Ray API unreachable this long is a page
    startup_grace = "2m"      # before an attempt's first telemetry / first step, a stall needs at least this long
    restart_on = ["failed"]   # conditions restarted automatically from the checkpoint (add "hung", "silent")
    restart_backoff = "10s"   # before the first automatic restart; doubles for each next one (at most 5m)
    max_node_losses = 5       # attempts restarted because their Ray node was lost (not the job's restarts); then a page
    # RL conditions, for jobs that report the metrics (a job's `watch = {...}` and a launch's --watch override):
    no_signal_frac = 0.95     # no_signal: frac_reward_zero_std at least this ...
    no_signal_points = 20     # ... for this many reports in a row (or the reward flat that long)
    reward_flat_within = 0.0  # how far the mean reward may move and still count as flat
    entropy_floor = 0.02      # entropy_collapse: the latest entropies under this ...
    entropy_drop = 10.0       # ... or under their trailing maximum divided by this
    kl_max = 2.0              # kl_blowup: KL to the reference over this ...
    kl_jump = 10.0            # ... or over this × its trailing maximum
    grad_spike_factor = 100.0 # grad_spike (a warning): grad_norm over this × its running median
    truncated_max = 0.99      # length_collapse: truncated_frac at least this ...
    length_floor = 0.5        # ... or response_len at most this, for 3 reports
    stale_max = 4.0           # stale_rollouts: rollout_lag over this for 3 reports

    [paging]
    escalate_after = "15m"    # unacknowledged this long: level 1 (on-call channel), as long again: level 2 (PagerDuty)
    renotify_every = "30m"    # re-notify the current level until acknowledged ("0s": never)
    flap_window = "10m"       # a condition that clears and returns within this re-opens the same page quietly
    oncall_channel = "C0123ABCD"   # level 1; also where cluster-wide (infra) pages go first
    oncall_usergroup = "S0123ABCD" # mentioned in level-1 posts
    dm_owner = true           # level 0 also DMs the run's owner

Sits in agents/ (the pager and the watchdog read it); pure data, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from labbot.common.durations import parse_duration
from labbot.common.errors import BadRequest
from labbot.common.retry import Backoff
from labbot.training.monitoring import RL_THRESHOLDS
from labbot.training.specs import RESTART_CONDITIONS, check_watch


def _seconds(table: Mapping[str, Any], key: str, default: str, where: str, *, allow_zero: bool = False) -> float:
    raw = table.get(key, default)
    if allow_zero and str(raw).strip() in ("0", "0s"):
        return 0.0
    try:
        return parse_duration(str(raw))
    except BadRequest as e:
        raise BadRequest(f"labbot.toml: [{where}] {key}: {e.message}") from None


def _count(table: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"labbot.toml: [{where}] {key} must be a whole number of at least 0, e.g. {default}")
    return value


def _watch(table: Mapping[str, Any]) -> dict[str, float]:
    try:
        return check_watch({k: v for k, v in table.items() if k in RL_THRESHOLDS}, "labbot.toml: [watchdog]")
    except BadRequest as e:
        raise BadRequest(e.message) from None


def _table(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    table = config.get(name, {})
    if not isinstance(table, Mapping):
        raise BadRequest(f"labbot.toml: [{name}] must be a table, e.g. [{name}] on its own line followed by keys")
    return table


@dataclass(frozen=True)
class WatchdogPolicy:
    tick_s: float = 2.0
    pending_after_s: float = 600.0
    infra_after_s: float = 120.0
    startup_grace_s: float = 120.0
    restart_on: tuple[str, ...] = ("failed",)
    restart_backoff_s: float = 10.0
    max_backoff_s: float = 300.0
    max_node_losses: int = 5
    watch: tuple[tuple[str, float], ...] = ()  # RL thresholds set in [watchdog] (the rest: Thresholds' defaults)

    @property
    def idle_look_s(self) -> float:
        """How often a watchdog with no run to watch still asks Ray for its jobs: often enough that Ray going down is
        paged at most a quarter of ``infra_after`` late, never more often than every tick."""
        return max(self.tick_s, min(self.infra_after_s / 4, 30.0))

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> WatchdogPolicy:
        t = _table(config, "watchdog")
        restart_on = t.get("restart_on", ["failed"])
        if not isinstance(restart_on, list) or not all(c in RESTART_CONDITIONS for c in restart_on):
            raise BadRequest(
                f"labbot.toml: [watchdog] restart_on must be a list drawn from {list(RESTART_CONDITIONS)}, "
                f'e.g. ["failed", "hung"]; got {restart_on!r}'
            )
        return cls(
            tick_s=_seconds(t, "tick", "2s", "watchdog"),
            pending_after_s=_seconds(t, "pending_after", "10m", "watchdog"),
            infra_after_s=_seconds(t, "infra_after", "2m", "watchdog"),
            startup_grace_s=_seconds(t, "startup_grace", "2m", "watchdog", allow_zero=True),
            restart_on=tuple(restart_on),
            restart_backoff_s=_seconds(t, "restart_backoff", "10s", "watchdog"),
            max_node_losses=_count(t, "max_node_losses", 5, "watchdog"),
            watch=tuple(sorted(_watch(t).items())),
        )

    def backoff(self, restarts_done: int) -> float:
        """Seconds before automatic restart number ``restarts_done + 1``: the shared Backoff's ceiling, without its
        jitter (the run's thread is told when the restart comes)."""
        base = min(self.restart_backoff_s, self.max_backoff_s)
        return Backoff(base=base, cap=self.max_backoff_s).ceiling(restarts_done + 1)


@dataclass(frozen=True)
class PagingPolicy:
    escalate_after_s: float = 900.0
    renotify_every_s: float = 1800.0
    flap_window_s: float = 600.0
    oncall_channel: str | None = None
    oncall_usergroup: str | None = None
    dm_owner: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PagingPolicy:
        t = _table(config, "paging")
        channel = t.get("oncall_channel")
        group = t.get("oncall_usergroup")
        for key, value in (("oncall_channel", channel), ("oncall_usergroup", group)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise BadRequest(f'labbot.toml: [paging] {key} must be a Slack id string, e.g. "C0123ABCD"')
        dm_owner = t.get("dm_owner", True)
        if not isinstance(dm_owner, bool):
            raise BadRequest("labbot.toml: [paging] dm_owner must be true or false")
        return cls(
            escalate_after_s=_seconds(t, "escalate_after", "15m", "paging"),
            renotify_every_s=_seconds(t, "renotify_every", "30m", "paging", allow_zero=True),
            flap_window_s=_seconds(t, "flap_window", "10m", "paging", allow_zero=True),
            oncall_channel=channel.strip() if isinstance(channel, str) else None,
            oncall_usergroup=group.strip() if isinstance(group, str) else None,
            dm_owner=dm_owner,
        )
