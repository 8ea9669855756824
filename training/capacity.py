"""Compute by purpose: whether a launch fits its purpose's share of the cluster, and the queue's admission order.

``[compute]`` in ``labbot.toml`` caps each purpose (``training``, ``eval``, ``data``, ``research``, ``serving``)::

    [compute.training]
    share = 0.6        # at most this fraction of the cluster's CPUs and of its GPUs (Ray's own view of them)
    runs = 4           # at most this many runs at once
    [compute.eval]
    gpus = 2           # at most this many GPUs (and/or cpus = N); with share too, the smaller one holds

``[compute.prices]`` (not a purpose) says what an hour of compute costs, for what a plan's approval shows in money::

    [compute.prices]
    cpu_hour = 0.05    # per CPU-hour
    gpu_hour = 2.50    # per GPU-hour
    currency = "USD"   # the default

A purpose without a table is not capped; no ``[compute]`` at all caps nothing (labbot then behaves as it always
has). Shares are ceilings, not reservations: they may sum to more than 1 (each purpose may take up to its share when
the others are idle); Ray still decides where a run's resources come from.

What a run uses is what it asks Ray for: its entrypoint's GPUs and CPUs (a run that reserves no CPU counts as 1, its
entrypoint's process), counted over the runs of that purpose on Ray (``pending``, ``running``, ``stalled``,
``restarting``). A launch that does not fit, or that would jump runs already queued for its purpose, waits
(``queued``); the queue is served in order — priority (higher first), then time queued — and a purpose's head that
does not fit holds the runs behind it (no starvation of a large run by small ones).

Pure functions, no I/O and no clock: the run service (``labbot.training.service``) brings the cluster's totals,
the active runs and the queue, and carries out the decision under its admission lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labbot.common.errors import BadRequest
from labbot.training.specs import PURPOSES

CAP_KEYS = ("share", "cpus", "gpus", "runs")
PRICES = "prices"  # [compute.prices]: what an hour costs (not a purpose)
PRICE_KEYS = ("cpu_hour", "gpu_hour", "currency")
EPSILON = 1e-9  # float sums of fractional GPUs (0.5 + 0.25 + 0.25) must still fit a cap of 1


@dataclass(frozen=True)
class Cap:
    """One purpose's cap; None: that dimension is not capped."""

    share: float | None = None
    cpus: float | None = None
    gpus: float | None = None
    runs: int | None = None


@dataclass(frozen=True)
class Totals:
    """The cluster's resources as Ray counts them (alive nodes' totals)."""

    cpus: float
    gpus: float


@dataclass(frozen=True)
class Ask:
    """What one run asks of the cluster, and whose it is."""

    run_id: str
    owner: str
    purpose: str
    cpus: float
    gpus: float


@dataclass(frozen=True)
class Limits:
    """A purpose's effective limits now (explicit caps and share of the totals, the smaller); None: unlimited."""

    runs: int | None = None
    cpus: float | None = None
    gpus: float | None = None


@dataclass(frozen=True)
class Use:
    runs: int = 0
    cpus: float = 0.0
    gpus: float = 0.0

    def plus(self, ask: Ask) -> Use:
        return Use(self.runs + 1, self.cpus + ask.cpus, self.gpus + ask.gpus)


@dataclass(frozen=True)
class Prices:
    """``[compute.prices]``: what an hour of a CPU and of a GPU costs, in ``currency`` (None: not given)."""

    cpu_hour: float | None = None
    gpu_hour: float | None = None
    currency: str = "USD"

    def of(self, hours: float, unit: str) -> float | None:
        """What ``hours`` of ``unit`` (``cpu`` or ``gpu``) cost; None when that unit has no price."""
        price = self.gpu_hour if unit == "gpu" else self.cpu_hour
        return None if price is None else hours * price

    @classmethod
    def from_config(cls, body: Any) -> Prices:
        where = "labbot.toml: [compute.prices]"
        if not isinstance(body, Mapping):
            raise BadRequest(f'{where} must be a table, e.g. cpu_hour = 0.05, gpu_hour = 2.5, currency = "USD"')
        unknown = sorted(set(body) - set(PRICE_KEYS))
        if unknown:
            raise BadRequest(f"{where}: unknown key {', '.join(unknown)}; keys: {', '.join(PRICE_KEYS)}")
        values: dict[str, Any] = {}
        for key in ("cpu_hour", "gpu_hour"):
            raw = body.get(key)
            if raw is None:
                continue
            if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw < 0:
                raise BadRequest(f"{where}: {key} = {raw!r} must be a price of at least 0 (per hour)")
            values[key] = float(raw)
        currency = body.get("currency", "USD")
        if not isinstance(currency, str) or not currency.strip() or len(currency) > 8:
            raise BadRequest(f'{where}: currency = {currency!r} must be a short name, e.g. "USD" or "EUR"')
        return cls(currency=currency.strip(), **values)


@dataclass(frozen=True)
class ComputePolicy:
    """``[compute]``: the caps by purpose (empty: nothing capped), and what an hour costs (``[compute.prices]``)."""

    caps: Mapping[str, Cap] = field(default_factory=dict)
    prices: Prices = field(default_factory=Prices)

    @property
    def enabled(self) -> bool:
        return bool(self.caps)

    @property
    def needs_totals(self) -> bool:
        """Whether a decision needs the cluster's totals (a share is a fraction of them)."""
        return any(cap.share is not None for cap in self.caps.values())

    @classmethod
    def from_config(cls, table: Any) -> ComputePolicy:
        """``[compute]`` checked: every key a purpose, each a table of ``share`` (0 < share ≤ 1), ``cpus``, ``gpus``
        (numbers ≥ 0) and ``runs`` (a whole number ≥ 0). BadRequest says what is wrong and what is accepted."""
        if table is None:
            return cls()
        if not isinstance(table, Mapping):
            raise BadRequest("labbot.toml: [compute] must be a table of purposes, e.g. [compute.training] share = 0.6")
        caps: dict[str, Cap] = {}
        prices = Prices.from_config(table[PRICES]) if PRICES in table else Prices()
        for purpose, body in table.items():
            if purpose == PRICES:
                continue
            where = f"labbot.toml: [compute.{purpose}]"
            if purpose not in PURPOSES:
                raise BadRequest(
                    f"{where}: {purpose!r} is not a purpose; purposes: {', '.join(PURPOSES)} (and [compute.prices])"
                )
            if not isinstance(body, Mapping) or not body:
                raise BadRequest(f"{where} must be a table with at least one of {', '.join(CAP_KEYS)}")
            unknown = sorted(set(body) - set(CAP_KEYS))
            if unknown:
                raise BadRequest(f"{where}: unknown key {', '.join(unknown)}; keys: {', '.join(CAP_KEYS)}")
            values: dict[str, Any] = {}
            for key, raw in body.items():
                if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw < 0:
                    raise BadRequest(f"{where}: {key} = {raw!r} must be a number of at least 0")
                if key == "share" and not 0 < raw <= 1:
                    raise BadRequest(
                        f"{where}: share = {raw!r} is a fraction of the cluster, more than 0 and at most 1"
                    )
                if key == "runs" and not float(raw).is_integer():
                    raise BadRequest(f"{where}: runs = {raw!r} must be a whole number")
                values[key] = int(raw) if key == "runs" else float(raw)
            caps[str(purpose)] = Cap(**values)
        return cls(caps, prices)


def limits(cap: Cap | None, totals: Totals | None) -> Limits:
    """A purpose's limits now: its explicit caps and its share of ``totals``, whichever is smaller."""
    if cap is None:
        return Limits()

    def smaller(explicit: float | None, total: float | None) -> float | None:
        from_share = None if cap.share is None or total is None else cap.share * total
        given = [v for v in (explicit, from_share) if v is not None]
        return min(given) if given else None

    return Limits(
        runs=cap.runs,
        cpus=smaller(cap.cpus, totals.cpus if totals else None),
        gpus=smaller(cap.gpus, totals.gpus if totals else None),
    )


def use_of(asks: Iterable[Ask], purpose: str) -> Use:
    use = Use()
    for ask in asks:
        if ask.purpose == purpose:
            use = use.plus(ask)
    return use


def over(lim: Limits, use: Use, ask: Ask) -> list[str]:
    """The dimensions (``runs``, ``cpus``, ``gpus``) that ``ask`` would take past ``lim`` on top of ``use``."""
    out = []
    if lim.runs is not None and use.runs + 1 > lim.runs:
        out.append("runs")
    if lim.cpus is not None and ask.cpus > 0 and use.cpus + ask.cpus > lim.cpus + EPSILON:
        out.append("cpus")
    if lim.gpus is not None and ask.gpus > 0 and use.gpus + ask.gpus > lim.gpus + EPSILON:
        out.append("gpus")
    return out


def never_fits(policy: ComputePolicy, ask: Ask) -> str | None:
    """Why ``ask`` could never start under its purpose's explicit caps (None: it can, once capacity frees). Caps from
    a share are left out: the cluster may grow."""
    cap = policy.caps.get(ask.purpose)
    if cap is None:
        return None
    if cap.runs == 0:
        return f"{ask.purpose} is capped at 0 runs in [compute]"
    if cap.cpus is not None and ask.cpus > cap.cpus + EPSILON:
        return f"this launch needs {amount(ask.cpus, 'CPU')} but {ask.purpose} is capped at {amount(cap.cpus, 'CPU')}"
    if cap.gpus is not None and ask.gpus > cap.gpus + EPSILON:
        return f"this launch needs {amount(ask.gpus, 'GPU')} but {ask.purpose} is capped at {amount(cap.gpus, 'GPU')}"
    return None


@dataclass(frozen=True)
class Decision:
    """Admit ``ask`` now, or queue it at ``position`` (1-based, in its purpose's line), with the numbers."""

    admit: bool
    ask: Ask
    limits: Limits
    use: Use
    position: int | None = None
    ahead: int = 0  # runs of its purpose already queued ahead of it

    def reason(self, *, no_queue: bool = False) -> str:
        """The numbers in words: "training is at 3 of 3 runs and 7.5 of 8 CPUs; this launch needs 2 CPUs"."""
        text = f"{self.ask.purpose} is at {usage_words(self.limits, self.use)}"
        need = [amount(self.ask.cpus, "CPU")] + ([amount(self.ask.gpus, "GPU")] if self.ask.gpus else [])
        text += f"; this launch needs {' and '.join(need)}"
        if self.ahead:
            text += f"; {self.ahead} {self.ask.purpose} run{'s are' if self.ahead > 1 else ' is'} queued ahead of it"
        if self.position is not None:
            where = f"{ordinal(self.position)} in line"
            text += f"; without --no-queue it would wait {where}" if no_queue else f"; it waits {where}"
        return text


def decide(policy: ComputePolicy, totals: Totals | None, active: Sequence[Ask], ahead: int, ask: Ask) -> Decision:
    """Admit ``ask`` now or queue it. ``active``: the runs on Ray; ``ahead``: how many queued runs of its purpose come
    before it (a launch never jumps the line: with one ahead it queues even if it fits)."""
    lim = limits(policy.caps.get(ask.purpose), totals)
    use = use_of(active, ask.purpose)
    if not ahead and not over(lim, use, ask):
        return Decision(True, ask, lim, use)
    return Decision(False, ask, lim, use, position=ahead + 1, ahead=ahead)


def admissible(policy: ComputePolicy, totals: Totals | None, active: Sequence[Ask], queue: Sequence[Ask]) -> list[str]:
    """The queued runs to admit now, in order. ``queue`` is in queue order (priority, then time queued); each
    purpose's line is served from its head while the head fits, and a head that does not fit holds its line."""
    used = {p: use_of(active, p) for p in {a.purpose for a in queue}}
    blocked: set[str] = set()
    out = []
    for ask in queue:
        if ask.purpose in blocked:
            continue
        lim = limits(policy.caps.get(ask.purpose), totals)
        if over(lim, used[ask.purpose], ask):
            blocked.add(ask.purpose)
            continue
        used[ask.purpose] = used[ask.purpose].plus(ask)
        out.append(ask.run_id)
    return out


def positions(queue: Sequence[Ask]) -> dict[str, int]:
    """Each queued run's place (1-based) in its purpose's line; ``queue`` in queue order."""
    seen: dict[str, int] = {}
    out = {}
    for ask in queue:
        seen[ask.purpose] = seen.get(ask.purpose, 0) + 1
        out[ask.run_id] = seen[ask.purpose]
    return out


def report(
    policy: ComputePolicy, totals: Totals | None, active: Sequence[Ask], queue: Sequence[Ask]
) -> list[dict[str, Any]]:
    """Per purpose (capped ones, and any with runs or a queue): the limits, the use, who uses it, what is queued."""
    names = [p for p in PURPOSES if p in policy.caps or any(a.purpose == p for a in (*active, *queue))]
    out = []
    for purpose in names:
        lim = limits(policy.caps.get(purpose), totals)
        use = use_of(active, purpose)
        mine = [a for a in active if a.purpose == purpose]
        out.append(
            {
                "purpose": purpose,
                "capped": purpose in policy.caps,
                "limits": {"runs": lim.runs, "cpus": lim.cpus, "gpus": lim.gpus},
                "use": {"runs": use.runs, "cpus": use.cpus, "gpus": use.gpus},
                "running": [_ask_json(a) for a in mine],
                "owners": sorted({a.owner for a in mine}),
                "queued": [_ask_json(a) for a in queue if a.purpose == purpose],
            }
        )
    return out


def _ask_json(ask: Ask) -> dict[str, Any]:
    return {"run_id": ask.run_id, "owner": ask.owner, "cpus": ask.cpus, "gpus": ask.gpus}


# -- words -------------------------------------------------------------------------------------------------------


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def amount(value: float, unit: str) -> str:
    return f"{number(value)} {unit}{'' if value == 1 else 's'}"


def usage_words(lim: Limits, use: Use) -> str:
    """ "3 of 3 runs and 7.5 of 8 CPUs" (the capped dimensions; the run count alone when nothing is capped)."""
    parts = []
    if lim.runs is not None:
        parts.append(f"{use.runs} of {lim.runs} run{'' if lim.runs == 1 else 's'}")
    if lim.cpus is not None:
        parts.append(f"{number(use.cpus)} of {amount(lim.cpus, 'CPU')}")
    if lim.gpus is not None:
        parts.append(f"{number(use.gpus)} of {amount(lim.gpus, 'GPU')}")
    if not parts:
        parts.append(
            f"{use.runs} run{'' if use.runs == 1 else 's'}, {amount(use.cpus, 'CPU')}, {amount(use.gpus, 'GPU')}"
        )
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
