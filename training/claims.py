"""The claim ledger: every number a report states, bound to where it came from and recomputed from the store before
the report is shown (pure parsing and judging; the numbers themselves come through :class:`ClaimSources`).

A claim is written in the text as ``[[VALUE | SOURCE]]``; what is shown is VALUE. SOURCE is words ``key:value``:

- ``run:ID metric:M`` with ``at:final`` (the mean of the last ``window:N`` values, default 3), ``at:STEP`` (the value
  at the last step at or before it), ``at:min``, ``at:max`` or ``at:last`` — a run's metric;
- ``experiment:ID trial:N`` or ``experiment:ID best``, with ``stat:mean`` (default), ``stat:low`` or ``stat:high``
  (the 95 % interval's ends), ``stat:n`` (seeds) — a config's score;
- ``experiment:ID count:done|running|queued|pruned|failed|stopped|trials`` — how many trials;
- ``eval:ID`` with ``stat:pass_rate`` (default), ``stat:low``, ``stat:high``, ``stat:passed`` or ``stat:samples`` —
  an eval run's result.

VALUE is a number as people write it (``2.49``, ``-0.013``, ``1,200``, ``34%``, ``1.2e-3``). It matches when the
recomputed value, rounded to the precision VALUE was written with, is VALUE (``2.49`` for 2.4889; ``34%`` for
0.3372). A claim that does not match is **wrong** (its recomputed value is given, and :func:`corrected` writes it in
at the same precision); one whose source cannot be read (an unknown run, a metric it never reported, a trial that has
no score yet) is **unsourced**. Numbers outside any claim are listed as **unbound** (ids, dates, times and numbers
inside code spans are not numbers a reader takes for a result).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, Protocol

from labbot.common.errors import LabbotError

CLAIM = re.compile(r"\[\[\s*(?P<value>[^|\]]+?)\s*\|\s*(?P<source>[^\]]+?)\s*\]\]")
_NUMBER = re.compile(r"^(?P<num>[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(?P<pct>%?)$")
# what in the rest of the text counts as a number a reader would take for a result: not inside code, not part of an
# id or a word (k3xq7p, tiny-lm, n_embd), not a parameter as set (lr=3e-3: what was asked, not found), not a date or
# a time
_CODE = re.compile(r"`[^`]*`")
_LOOSE = re.compile(r"(?<![\w.\-/:#@=])[+-]?\d+(?:[.,]\d+)*(?:[eE][+-]?\d+)?%?(?![\w\-/:]|\.\d)")
_DATE_OR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}")
DEFAULT_WINDOW = 3
Verdict = Literal["ok", "wrong", "unsourced"]


class ClaimSources(Protocol):
    """Where a claim's number is recomputed from (the control plane's stores)."""

    def run_points(self, run_id: str, metric: str) -> list[tuple[int, float]]: ...

    def experiment(self, experiment_id: str) -> Mapping[str, Any]: ...

    def eval_run(self, run_id: str) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Claim:
    text: str  # the whole [[...]] as written
    value: str  # VALUE as written
    source: str
    start: int
    end: int


@dataclass(frozen=True)
class Checked:
    claim: Claim
    verdict: Verdict
    actual: float | None  # the recomputed value (None: unsourced)
    why: str  # in words: what was compared, or why the source could not be read

    def to_json(self) -> dict[str, Any]:
        return {"value": self.claim.value, "source": self.claim.source, "verdict": self.verdict,
                "actual": self.actual, "why": self.why}  # fmt: skip


@dataclass(frozen=True)
class LedgerReport:
    checked: list[Checked]
    unbound: list[str]
    corrected: str  # the text with wrong values replaced by the recomputed ones, claims shown as their values

    @property
    def ok(self) -> bool:
        return all(c.verdict == "ok" for c in self.checked)

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "wrong": 0, "unsourced": 0}
        for c in self.checked:
            out[c.verdict] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "counts": self.counts(), "claims": [c.to_json() for c in self.checked],
                "unbound": self.unbound, "corrected": self.corrected}  # fmt: skip


def claims_in(text: str) -> list[Claim]:
    return [
        Claim(m.group(0), m["value"].strip(), m["source"].strip(), m.start(), m.end()) for m in CLAIM.finditer(text)
    ]


def parse_value(written: str) -> tuple[float, float]:
    """``(value, half a unit of its last written digit)``: what VALUE says and how precisely."""
    m = _NUMBER.match(written.strip())
    if m is None:
        raise ValueError(f"{written!r} is not a number as a report writes one (e.g. 2.49, 1,200, 34%, 1.2e-3)")
    raw = m["num"].replace(",", "")
    try:
        dec = Decimal(raw)
    except InvalidOperation:
        raise ValueError(f"{written!r} is not a number") from None
    exponent = dec.as_tuple().exponent
    assert isinstance(exponent, int)
    half = Decimal(5) * Decimal(10) ** (exponent - 1)
    scale = Decimal("0.01") if m["pct"] else Decimal(1)
    return float(dec * scale), float(half * scale)


def source_words(source: str) -> dict[str, str]:
    """``run:k3 metric:loss at:final`` → ``{"run": "k3", "metric": "loss", "at": "final"}`` (a bare word is a key)."""
    out: dict[str, str] = {}
    for word in source.split():
        key, _, value = word.partition(":")
        if not key:
            raise ValueError(f"bad source word {word!r}: write key:value, e.g. run:k3xq7p")
        if key in out:
            raise ValueError(f"{key} is given twice in the source")
        out[key] = value
    return out


def recompute(source: str, sources: ClaimSources) -> tuple[float, str]:
    """The number ``source`` names, and in words what it is; ``LookupError`` when it cannot be read."""
    words = source_words(source)
    if "run" in words:
        return _run_value(words, sources)
    if "experiment" in words:
        return _experiment_value(words, sources)
    if "eval" in words:
        return _eval_value(words, sources)
    raise LookupError("the source names no run:, experiment: or eval:")


def _run_value(words: Mapping[str, str], sources: ClaimSources) -> tuple[float, str]:
    run, metric = words["run"], words.get("metric")
    if not metric:
        raise LookupError(f"run:{run} needs metric:NAME")
    points = sorted(sources.run_points(run, metric))
    if not points:
        raise LookupError(f"run {run} reported no {metric}")
    at = words.get("at", "final")
    if at == "final":
        window = int(words.get("window") or DEFAULT_WINDOW)
        tail = [v for _, v in points[-window:]]
        return statistics.fmean(tail), f"the mean of run {run}'s last {len(tail)} {metric} values"
    if at in ("min", "max"):
        finite = [v for _, v in points if math.isfinite(v)]
        if not finite:
            raise LookupError(f"run {run} reported no finite {metric}")
        return (min(finite) if at == "min" else max(finite)), f"the {at} of run {run}'s {metric}"
    if at == "last":
        return points[-1][1], f"run {run}'s last {metric} (step {points[-1][0]})"
    if not at.isdigit():
        raise LookupError(f"at:{at} is not final, min, max, last or a step")
    before = [(s, v) for s, v in points if s <= int(at)]
    if not before:
        raise LookupError(f"run {run} reported no {metric} at or before step {at}")
    return before[-1][1], f"run {run}'s {metric} at step {before[-1][0]}"


def _experiment_value(words: Mapping[str, str], sources: ClaimSources) -> tuple[float, str]:
    exp_id = words["experiment"]
    doc = sources.experiment(exp_id)
    if "count" in words:
        what = words["count"]
        if what == "trials":
            return float(len(doc["trials"])), f"experiment {exp_id}'s trials"
        counts = doc["counts"]
        if what not in counts:
            raise LookupError(f"count:{what} is not one of trials, {', '.join(counts)}")
        return float(counts[what]), f"experiment {exp_id}'s {what} trials"
    stat = words.get("stat", "mean")
    ranking = doc["results"]["ranking"]
    if "best" in words:
        if not ranking:
            raise LookupError(f"experiment {exp_id} has no scored config yet")
        row = ranking[0]
    else:
        number = words.get("trial")
        row = next((r for r in ranking if str(r["trial"]) == number), None)
        if row is None:
            raise LookupError(f"experiment {exp_id} has no score for trial {number} (not done, or no such trial)")
    if stat not in ("mean", "low", "high", "n"):
        raise LookupError(f"stat:{stat} is not mean, low, high or n")
    value = row.get(stat)
    if value is None:
        raise LookupError(f"trial {row['trial']} of {exp_id} has no {stat} (one seed has no interval)")
    return float(value), f"experiment {exp_id}'s trial {row['trial']} {stat}"


def _eval_value(words: Mapping[str, str], sources: ClaimSources) -> tuple[float, str]:
    run = words["eval"]
    doc = sources.eval_run(run)
    stat = words.get("stat", "pass_rate")
    if stat == "pass_rate":
        value = doc.get("pass_rate")
    elif stat in ("low", "high"):
        interval = doc.get("interval")  # [low, high], the Wilson interval of the pass rate
        value = (
            interval[0 if stat == "low" else 1] if isinstance(interval, list | tuple) and len(interval) == 2 else None
        )
    elif stat == "passed":
        value = sum(1 for s in doc.get("samples") or [] if s.get("passed"))
    elif stat == "samples":
        value = len(doc.get("samples") or [])
    else:
        raise LookupError(f"stat:{stat} is not pass_rate, low, high, passed or samples")
    if value is None:
        raise LookupError(f"eval run {run} has no {stat} yet")
    return float(value), f"eval run {run}'s {stat}"


def _matches(written: str, actual: float) -> tuple[bool, float]:
    value, half = parse_value(written)
    if not math.isfinite(actual):
        return False, value
    return abs(actual - value) <= half * (1 + 1e-9) + 1e-12, value


def _format_like(written: str, actual: float) -> str:
    """``actual`` written with the precision and form of ``written`` (``2.49`` → ``2.51``; ``34%`` → ``36%``)."""
    m = _NUMBER.match(written.strip())
    assert m is not None
    raw = m["num"]
    pct = bool(m["pct"])
    shown = actual * 100 if pct else actual
    if "e" in raw.lower():
        digits = len(raw.lower().split("e")[0].split(".")[1]) if "." in raw else 0
        text = f"{shown:.{digits}e}"
    else:
        digits = len(raw.split(".")[1]) if "." in raw else 0
        text = f"{shown:,.{digits}f}" if "," in raw else f"{shown:.{digits}f}"
    return text + ("%" if pct else "")


@dataclass
class _Once:
    """``sources`` read once per thing within one check: a report quoting twelve trials of one experiment reads it
    once, not twelve times (what each claim is judged against is the same moment's store)."""

    sources: ClaimSources
    seen: dict[tuple[str, ...], Any]

    def _get(self, key: tuple[str, ...], read: Callable[[], Any]) -> Any:
        if key not in self.seen:
            try:
                self.seen[key] = (True, read())
            except Exception as e:  # a failed read fails every claim on it the same way
                self.seen[key] = (False, e)
        ok, value = self.seen[key]
        if not ok:
            raise value
        return value

    def run_points(self, run_id: str, metric: str) -> list[tuple[int, float]]:
        return self._get(("run", run_id, metric), lambda: self.sources.run_points(run_id, metric))

    def experiment(self, experiment_id: str) -> Mapping[str, Any]:
        return self._get(("experiment", experiment_id), lambda: self.sources.experiment(experiment_id))

    def eval_run(self, run_id: str) -> Mapping[str, Any]:
        return self._get(("eval", run_id), lambda: self.sources.eval_run(run_id))


def check(text: str, sources: ClaimSources) -> LedgerReport:
    """Every claim of ``text`` recomputed and judged; the text corrected; the numbers left unbound. Each source is
    read once however many claims quote it."""
    sources = _Once(sources, {})
    checked: list[Checked] = []
    pieces: list[str] = []
    last = 0
    for claim in claims_in(text):
        pieces.append(text[last : claim.start])
        last = claim.end
        shown = claim.value
        try:
            actual, what = recompute(claim.source, sources)
            ok, _ = _matches(claim.value, actual)
            if ok:
                checked.append(Checked(claim, "ok", actual, f"{what}: {actual:.6g}"))
            else:
                checked.append(Checked(claim, "wrong", actual, f"{what} is {actual:.6g}, not {claim.value}"))
                shown = _format_like(claim.value, actual)
        except ValueError as e:  # the value or the source's words are not well formed
            checked.append(Checked(claim, "unsourced", None, str(e)))
        except (LookupError, LabbotError) as e:
            why = e.message if isinstance(e, LabbotError) else str(e.args[0] if e.args else e)
            checked.append(Checked(claim, "unsourced", None, why))
        pieces.append(shown)
    pieces.append(text[last:])
    return LedgerReport(checked, unbound_numbers(text), "".join(pieces))


def unbound_numbers(text: str) -> list[str]:
    """Numbers in ``text`` outside every claim, code span, id, date and time."""
    rest = CLAIM.sub(" ", text)
    rest = _CODE.sub(" ", rest)
    rest = _DATE_OR_TIME.sub(" ", rest)
    return [m.group(0) for m in _LOOSE.finditer(rest)]


def fetch(fn: Callable[[], Any], what: str) -> Any:
    """A source read, its 'not found' as the ``LookupError`` the ledger reports as unsourced."""
    try:
        return fn()
    except LabbotError as e:
        raise LookupError(f"{what}: {e.message}") from None


@dataclass(frozen=True)
class StoreSources:
    """The control plane's stores as claim sources: a run's points (``TelemetryStore.series``), an experiment
    (``ExperimentService.get``) and, when evals run here, an eval run's results (``eval_run``)."""

    series: Callable[[str, Sequence[str]], Mapping[str, list[tuple[int, float]]]]
    get_experiment: Callable[[str], Mapping[str, Any]]
    get_eval_run: Callable[[str], Mapping[str, Any]] | None = None

    def run_points(self, run_id: str, metric: str) -> list[tuple[int, float]]:
        return list(fetch(lambda: self.series(run_id, [metric]), f"run {run_id}")[metric])

    def experiment(self, experiment_id: str) -> Mapping[str, Any]:
        return dict(fetch(lambda: self.get_experiment(experiment_id), f"experiment {experiment_id}"))

    def eval_run(self, run_id: str) -> Mapping[str, Any]:
        if self.get_eval_run is None:
            raise LookupError("evals are not running in this labbot")
        get = self.get_eval_run
        return dict(fetch(lambda: get(run_id), f"eval run {run_id}"))
