"""Remedies: what the watchdog does about a finding instead of paging — roll the run back to its last good checkpoint
and restart it with some of its parameters changed, at most a few times, then page. Pure: parsing, checking against
the job, and the decision; the watchdog (``labbot.agents.babysitter.watchdog``) acts on it.

A remedy is declared by a job (``[[jobs.NAME.remedies]]`` in labbot.toml) or at launch (``--remedy``)::

    [[jobs.tiny-rl.remedies]]
    on = ["entropy_collapse"]              # the findings it acts on (the rest page as always)
    change = ["temperature += 0.5"]        # PARAM (=|*=|/=|+=|-=) VALUE, each a declared parameter of the job
    max_attempts = 2                        # remedial restarts of the run for this remedy, then a page

    --remedy "kl_blowup, grad_spike: lr *= 0.1; max 2"

``on`` names findings of :mod:`labbot.training.monitoring` (``no_signal``, ``entropy_collapse``, ``kl_blowup``,
``grad_spike``, ``length_collapse``, ``stale_rollouts``, ``diverged``; ``nan`` for a non-finite loss only) or a metric
alert of the run (``metric:NAME``). A change names a parameter the job declares and, when the job says which
(``remedy_params``), one of those; its value after every attempt it may take must be one the job accepts (type,
range, choices), or the remedy is refused at launch: nothing reaches the job that a person could not have launched.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labbot.common.errors import BadRequest
from labbot.training.params import ParamValue, coerce_param

# the findings a remedy may act on; stalls and failures are restart_on's (a restart from the newest checkpoint)
FINDINGS = (
    "no_signal",
    "entropy_collapse",
    "kl_blowup",
    "grad_spike",
    "length_collapse",
    "stale_rollouts",
    "diverged",
    "nan",
)
OPS = ("*=", "/=", "+=", "-=", "=")
DEFAULT_MAX_ATTEMPTS = 2
MAX_ATTEMPTS_LIMIT = 10
_CHANGE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_-]*)\s*(\*=|/=|\+=|-=|=)\s*(\S.*?)\s*$")
_MAX = re.compile(r"^max\s+(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Change:
    """One parameter change: ``param op value`` (``lr *= 0.5``)."""

    param: str
    op: str
    value: ParamValue

    def apply(self, current: ParamValue) -> ParamValue:
        """The parameter's value after this change once (numbers keep the parameter's type where it is whole)."""
        if self.op == "=":
            return self.value
        a, b = float(current), float(self.value)
        out = {"*=": a * b, "/=": a / b, "+=": a + b, "-=": a - b}[self.op]
        if isinstance(current, int) and not isinstance(current, bool) and float(out).is_integer():
            return int(out)
        return out

    def text(self) -> str:
        return f"{self.param} {self.op} {_literal(self.value)}"

    def to_json(self) -> dict[str, Any]:
        return {"param": self.param, "op": self.op, "value": self.value}


@dataclass(frozen=True)
class Remedy:
    """What to do on some findings: these changes, from the last good checkpoint, at most ``max_attempts`` times."""

    on: tuple[str, ...]
    changes: tuple[Change, ...]
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def text(self) -> str:
        return f"{', '.join(self.on)}: {', '.join(c.text() for c in self.changes)}; max {self.max_attempts}"

    def to_json(self) -> dict[str, Any]:
        return {
            "on": list(self.on),
            "changes": [c.to_json() for c in self.changes],
            "max_attempts": self.max_attempts,
        }

    def acts_on(self, kind: str, alert: str | None, reason: str | None) -> bool:
        """Whether a finding of ``kind`` (a metric alert's ``alert`` name; a divergence's ``reason``) is this one's."""
        for on in self.on:
            if on == kind and kind != "metric":
                return True
            if on == "nan" and kind == "diverged" and reason in ("nan", "inf"):
                return True
            if kind == "metric" and alert is not None and on == f"metric:{alert}":
                return True
        return False


# --- parsing ---------------------------------------------------------------------------------------------------------


def parse_change(text: str, where: str) -> Change:
    """``"lr *= 0.5"`` → Change; BadRequest says what a change looks like."""
    m = _CHANGE.match(text) if isinstance(text, str) else None
    if m is None:
        raise BadRequest(
            f"{where}: bad change {text!r}; write PARAM OP VALUE with OP one of {', '.join(OPS)}, "
            "e.g. 'lr *= 0.5', 'temperature += 0.1', 'clip = true'"
        )
    param, op, raw = m.group(1), m.group(2), m.group(3)
    value: ParamValue
    low = raw.lower()
    if low in ("true", "false"):
        value = low == "true"
    else:
        try:
            value = int(raw) if re.fullmatch(r"[+-]?\d+", raw) else float(raw)
        except ValueError:
            value = raw.strip("'\"")
    if op != "=" and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)):
        raise BadRequest(f"{where}: {text!r}: {op} takes a finite number, e.g. '{param} {op} 0.5'")
    if op == "/=" and value == 0:
        raise BadRequest(f"{where}: {text!r} divides by zero")
    return Change(param, op, value)


def parse_remedy(raw: Any, where: str) -> Remedy:
    """A remedy from a table (``on``, ``change``, ``max_attempts``) or its words
    (``"ON[, ON]: CHANGE[, CHANGE][; max N]"``); BadRequest names what is wrong and what is accepted."""
    if isinstance(raw, str):
        head, sep, rest = raw.partition(":")
        if not sep:
            raise BadRequest(
                f"{where}: bad remedy {raw!r}; write 'FINDING[, FINDING]: CHANGE[, CHANGE][; max N]', "
                "e.g. 'entropy_collapse: temperature += 0.5; max 2'"
            )
        # "metric:NAME" holds a colon of its own: the split is at the colon that is followed by a change
        if head.strip() == "metric" or re.match(r"^\s*metric\s*$", head.split(",")[-1]):
            name, sep2, rest2 = rest.partition(":")
            head, rest = f"{head}:{name}", rest2 if sep2 else ""
        changes_text, _, tail = rest.partition(";")
        table: dict[str, Any] = {
            "on": [t.strip() for t in head.split(",") if t.strip()],
            "change": [t.strip() for t in changes_text.split(",") if t.strip()],
        }
        if tail.strip():
            m = _MAX.match(tail.strip())
            if m is None:
                raise BadRequest(f"{where}: bad remedy {raw!r}: after ';' write 'max N', e.g. '; max 2'")
            table["max_attempts"] = int(m.group(1))
        raw = table
    if not isinstance(raw, Mapping):
        raise BadRequest(f"{where}: a remedy is a table (on, change, max_attempts) or its words, got {raw!r}")
    unknown = sorted(set(raw) - {"on", "change", "changes", "max_attempts"})
    if unknown:
        raise BadRequest(f"{where}: unknown key {', '.join(unknown)}; keys: on, change, max_attempts")
    on = raw.get("on")
    on_list = [on] if isinstance(on, str) else on
    if not isinstance(on_list, list | tuple) or not on_list or not all(isinstance(o, str) for o in on_list):
        raise BadRequest(f"{where}: 'on' names the findings it acts on, e.g. on = [\"entropy_collapse\"]")
    for o in on_list:
        if o not in FINDINGS and not re.fullmatch(r"metric:[A-Za-z0-9_.:-]+", o):
            raise BadRequest(
                f"{where}: a remedy cannot act on {o!r}; it acts on {', '.join(FINDINGS)} or metric:ALERT "
                "(failed, hung and silent runs are restarted from the newest checkpoint by restart_on)"
            )
    raw_changes = raw.get("changes", raw.get("change"))
    items = [raw_changes] if isinstance(raw_changes, str) else raw_changes
    changes: list[Change] = []
    if isinstance(items, Mapping):  # {"lr": "*= 0.5"} or {"param": ..., "op": ..., "value": ...} stored form
        items = [items] if {"param", "op", "value"} <= set(items) else [f"{k} {v}" for k, v in items.items()]
    if not isinstance(items, list | tuple) or not items:
        raise BadRequest(f"{where}: 'change' lists the parameter changes, e.g. change = [\"lr *= 0.5\"]")
    for item in items:
        if isinstance(item, Mapping) and {"param", "op", "value"} <= set(item):
            changes.append(parse_change(f"{item['param']} {item['op']} {_literal(item['value'])}", where))
        else:
            changes.append(parse_change(item, where))
    twice = sorted({c.param for c in changes if sum(d.param == c.param for d in changes) > 1})
    if twice:
        raise BadRequest(f"{where}: {', '.join(twice)} changed twice in one remedy; write one change per parameter")
    attempts = raw.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT:
        raise BadRequest(f"{where}: max_attempts={attempts!r} must be a whole number from 1 to {MAX_ATTEMPTS_LIMIT}")
    return Remedy(on=tuple(dict.fromkeys(on_list)), changes=tuple(changes), max_attempts=attempts)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def remedy_from_json(raw: Mapping[str, Any]) -> Remedy:
    return parse_remedy(dict(raw), "remedy")


# --- checking against the job ----------------------------------------------------------------------------------------


def check_remedy(
    remedy: Remedy,
    *,
    job: str,
    params: Mapping[str, ParamValue],
    checks: Mapping[str, Any],
    allowed: Collection[str] | None,
    alerts: Collection[str],
    where: str,
) -> Remedy:
    """``remedy`` when every change names a parameter the job declares (and allows a remedy to change), of the right
    type, and stays within what the job accepts after each of its attempts; BadRequest otherwise."""
    for on in remedy.on:
        if on.startswith("metric:") and on[len("metric:") :] not in alerts:
            known = ", ".join(f"metric:{a}" for a in sorted(alerts)) or "none"
            raise BadRequest(f"{where}: {on} names no alert of this run; its alerts: {known}")
    changes = []
    for change in remedy.changes:
        if change.param not in params:
            accepted = ", ".join(sorted(allowed if allowed is not None else params)) or "none"
            raise BadRequest(
                f"{where}: {change.text()!r}: job {job} has no parameter {change.param!r}; a remedy changes only "
                f"the job's declared parameters: {accepted}"
            )
        if allowed is not None and change.param not in allowed:
            raise BadRequest(
                f"{where}: {change.text()!r}: job {job} does not let a remedy change {change.param!r}; it may "
                f"change {', '.join(sorted(allowed)) or 'nothing'}"
            )
        default = params[change.param]
        if change.op != "=" and (isinstance(default, bool) or not isinstance(default, int | float)):
            raise BadRequest(f"{where}: {change.text()!r}: {change.param} is not a number; set it with '='")
        value = coerce_param(change.param, change.value, default) if change.op == "=" else change.value
        change = Change(change.param, change.op, value)
        current: ParamValue = default
        for attempt in range(1, remedy.max_attempts + 1):
            current = change.apply(current)
            _check_value(change, current, default, attempt, job, checks, where)
        changes.append(change)
    return Remedy(on=remedy.on, changes=tuple(changes), max_attempts=remedy.max_attempts)


def _check_value(
    change: Change,
    value: ParamValue,
    default: ParamValue,
    attempt: int,
    job: str,
    checks: Mapping[str, Any],
    where: str,
) -> None:
    after = f" after attempt {attempt}" if change.op != "=" else ""
    if isinstance(value, float) and not math.isfinite(value):
        raise BadRequest(f"{where}: {change.text()!r} makes {change.param} {value}{after}")
    if isinstance(default, int) and not isinstance(default, bool) and not float(value).is_integer():
        raise BadRequest(
            f"{where}: {change.text()!r} makes {change.param} {value:g}{after}, not a whole number as it must be"
        )
    check = checks.get(change.param)
    if check is not None:
        try:
            check.check(change.param, value, job)
        except BadRequest as e:
            raise BadRequest(f"{where}: {change.text()!r}{after}: {e.message}") from None


def apply_changes(
    params: Mapping[str, ParamValue], changes: Sequence[Change]
) -> tuple[dict[str, ParamValue], list[dict[str, Any]]]:
    """``params`` with ``changes`` applied once, and each change as ``{param, from, to}``."""
    out = dict(params)
    diff = []
    for c in changes:
        old = out.get(c.param)
        new = c.apply(old if old is not None else c.value)
        out[c.param] = new
        diff.append({"param": c.param, "from": old, "to": new, "change": c.text()})
    return out, diff


# --- deciding --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Act:
    """Roll back and restart: the remedy (its index among the run's), the finding it answers, the step the signal
    began at, the checkpoint to restart from (None: from the start), and the parameters after the change."""

    remedy: int
    attempt_of_remedy: int  # 1 for this remedy's first attempt on this run
    condition: str
    signal_step: int
    checkpoint_step: int | None
    params: dict[str, ParamValue]
    diff: list[dict[str, Any]]


@dataclass(frozen=True)
class Exhausted:
    """A remedy has used its attempts and the signal is back: page, with the attempts listed."""

    remedy: int
    condition: str
    attempts: list[Mapping[str, Any]]


def signal_step(detail: Mapping[str, Any], fallback: int | None) -> int:
    """The step a finding's signal began at: its ``since_step``, else its ``step``, else ``fallback`` (0 if None)."""
    for key in ("since_step", "step"):
        v = detail.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return fallback or 0


def lineage(checkpoints: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The checkpoints still on the run's line: one written by an attempt before a rollback, at a step after the
    checkpoint that rollback went back to, was rolled back (set aside) and is never chosen again."""
    out = []
    for c in checkpoints:
        gone = any(
            int(c["attempt"]) < int(h["attempt"]) and int(c["step"]) > (h.get("checkpoint_step") or 0) for h in history
        )
        if not gone:
            out.append(c)
    return out


def decide(
    remedies: Sequence[Remedy],
    findings: Sequence[tuple[str, str | None, str | None, Mapping[str, Any]]],
    history: Sequence[Mapping[str, Any]],
    choose_checkpoint: Any,
    params: Mapping[str, ParamValue],
    last_step: int | None,
) -> Act | Exhausted | None:
    """What to do about ``findings`` (each ``(kind, alert, reason, detail)``, in the watchdog's order): the first
    one a remedy acts on is answered — an :class:`Act` while that remedy has attempts left (``history``: the run's
    remedial attempts, each with ``remedy``), else :class:`Exhausted`; None when no remedy acts on any.
    ``choose_checkpoint(step)`` is the last good checkpoint's step before ``step`` (None: none)."""
    for kind, alert, reason, detail in findings:
        for index, remedy in enumerate(remedies):
            if not remedy.acts_on(kind, alert, reason):
                continue
            used = [h for h in history if h.get("remedy") == index]
            condition = f"{kind}:{alert}" if kind == "metric" and alert else kind
            if len(used) >= remedy.max_attempts:
                return Exhausted(remedy=index, condition=condition, attempts=used)
            step = signal_step(detail, last_step)
            new_params, diff = apply_changes(params, remedy.changes)
            return Act(
                remedy=index,
                attempt_of_remedy=len(used) + 1,
                condition=condition,
                signal_step=step,
                checkpoint_step=choose_checkpoint(step),
                params=new_params,
                diff=diff,
            )
    return None


def lineage_text(entry: Mapping[str, Any]) -> str:
    """One remedial attempt in words: ``attempt 2 from checkpoint step 50 after entropy_collapse from step 62:
    temperature 1 → 2``."""
    start = entry.get("checkpoint_step")
    where = f"checkpoint step {start}" if start is not None else "the start"
    changes = ", ".join(
        f"{d['param']} {_shown(d.get('from'))} → {_shown(d.get('to'))}" for d in entry.get("changes") or []
    )
    return (
        f"attempt {entry.get('attempt')} from {where} after {entry.get('condition')} from step "
        f"{entry.get('signal_step')}: {changes}"
    )


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).lower() if isinstance(value, bool) else str(value)
