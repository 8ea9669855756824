"""A search space in words, parsed and checked against a job (pure: no Optuna, no I/O).

One item per parameter, as the CLI, ``/lab sweep`` and the API take them:

- ``lr=loguniform(1e-4,1e-2)``: a number drawn on a log scale between the two bounds (both > 0);
- ``dropout=uniform(0,0.3)``: a number drawn evenly between the bounds;
- ``steps=int(100,1000)``: a whole number between the bounds, both included;
- ``width=choice(64,128,256)``: one of the values;
- ``lr=1e-3,3e-3,1e-2`` (or ``lr=[1e-3,3e-3,1e-2]``): a list, what a grid search walks (a ``choice`` to the others);
- ``steps=300``: one value, fixed for every trial (not searched).

Each name must be a parameter of the job, each value of its type and within what the job accepts (its ``checks``);
at least one parameter must be searched. Anything else is ``BadRequest`` naming what was wrong and what is accepted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from labbot.common.errors import BadRequest
from labbot.training.params import PARAM_KEY, ParamValue, coerce_param
from labbot.training.specs import JobSpec

Kind = Literal["loguniform", "uniform", "int", "choice"]
KINDS: tuple[str, ...] = ("loguniform", "uniform", "int", "choice")
ACCEPTED = (
    "NAME=loguniform(LOW,HIGH), NAME=uniform(LOW,HIGH), NAME=int(LOW,HIGH), NAME=choice(A,B,…), "
    "a list NAME=A,B,… (what a grid walks), or one value NAME=V (fixed)"
)
MAX_CHOICES = 100
_CALL = re.compile(r"^(?P<kind>[a-z_]+)\((?P<args>.*)\)$", re.S)


@dataclass(frozen=True)
class Dimension:
    """One searched parameter: a range (``low``, ``high``) or a list of ``values``."""

    name: str
    kind: Kind
    low: float | None = None
    high: float | None = None
    values: tuple[ParamValue, ...] = ()

    @property
    def discrete(self) -> bool:
        """Whether a grid can walk it: a list, or a whole-number range."""
        return self.kind in ("choice", "int")

    def grid_values(self) -> tuple[ParamValue, ...]:
        if self.kind == "choice":
            return self.values
        if self.kind == "int" and self.low is not None and self.high is not None:
            return tuple(range(int(self.low), int(self.high) + 1))
        raise BadRequest(
            f"a grid cannot walk {self.words()}: give {self.name} as a list, e.g. {self.name}=1e-3,3e-3,1e-2"
        )

    def largest(self) -> float | None:
        """The largest number this dimension can take (a projection's worst case), None for text."""
        if self.kind == "choice":
            numbers = [float(v) for v in self.values if isinstance(v, int | float) and not isinstance(v, bool)]
            return max(numbers) if numbers else None
        return self.high

    def words(self) -> str:
        if self.kind == "choice":
            return f"{self.name}=choice({','.join(_text(v) for v in self.values)})"
        return f"{self.name}={self.kind}({_text(self.low)},{_text(self.high)})"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "choice":
            out["values"] = list(self.values)
        else:
            out["low"], out["high"] = self.low, self.high
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Dimension:
        values = tuple(doc.get("values") or ())
        return cls(str(doc["name"]), doc["kind"], doc.get("low"), doc.get("high"), values)


@dataclass(frozen=True)
class Space:
    """The searched dimensions (in the order given) and the parameters fixed for every trial."""

    dimensions: tuple[Dimension, ...]
    fixed: Mapping[str, ParamValue]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    def grid_size(self) -> int:
        size = 1
        for d in self.dimensions:
            size *= len(d.grid_values())
        return size

    def words(self) -> list[str]:
        return [d.words() for d in self.dimensions] + [f"{k}={_text(v)}" for k, v in self.fixed.items()]

    def to_json(self) -> dict[str, Any]:
        return {"dimensions": [d.to_json() for d in self.dimensions], "fixed": dict(self.fixed)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Space:
        return cls(tuple(Dimension.from_json(d) for d in doc.get("dimensions", [])), dict(doc.get("fixed", {})))


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _split(args: str) -> list[str]:
    return [a.strip() for a in args.split(",")]


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise BadRequest(f"{where}: {text!r} is not a finite number")
    return value


def parse_space(items: Iterable[str | tuple[str, str]], spec: JobSpec, *, seed_param: str | None) -> Space:
    """The items of a space, each ``NAME=EXPR`` (a string) or ``(NAME, EXPR)``, checked against ``spec``."""
    dimensions: list[Dimension] = []
    fixed: dict[str, ParamValue] = {}
    seen: set[str] = set()
    for item in items:
        if isinstance(item, str):
            name, sep, expr = item.partition("=")
            if not sep:
                raise BadRequest(f"bad space item {item!r}: write NAME=EXPR; accepted: {ACCEPTED}")
        else:
            name, expr = item
        name, expr = name.strip(), str(expr).strip()
        if not PARAM_KEY.match(name):
            raise BadRequest(f"bad parameter name {name!r} in the space: use letters, digits, '_' or '-'")
        if name in seen:
            raise BadRequest(f"parameter {name!r} is in the space twice")
        seen.add(name)
        if name not in spec.params:
            accepted = ", ".join(sorted(spec.params)) or "none"
            raise BadRequest(f"unknown parameter {name} for job {spec.name}; accepted: {accepted}")
        if seed_param is not None and name == seed_param:
            raise BadRequest(
                f"{name} is the seed: an experiment sets it for each repeat (seeds=N); leave it out of the space"
            )
        dimension = _dimension(name, expr, spec)
        if isinstance(dimension, Dimension):
            dimensions.append(dimension)
        else:
            fixed[name] = dimension
    if not dimensions:
        raise BadRequest(
            f"the space searches nothing: give at least one parameter a range or a list, e.g. "
            f"lr=loguniform(1e-4,1e-2); accepted: {ACCEPTED}"
        )
    return Space(tuple(dimensions), fixed)


def _dimension(name: str, expr: str, spec: JobSpec) -> Dimension | ParamValue:
    default = spec.params[name]
    where = f"{name}={expr}"
    if not expr:
        raise BadRequest(f"{name}= has no value; accepted: {ACCEPTED}")
    call = _CALL.match(expr)
    if call is not None:
        kind = call["kind"]
        if kind not in KINDS:
            raise BadRequest(f"{where}: unknown distribution {kind!r}; accepted: {ACCEPTED}")
        args = _split(call["args"])
        if kind == "choice":
            return _choice(name, args, spec)
        if len(args) != 2 or not all(args):
            raise BadRequest(f"{where}: {kind} takes two bounds, e.g. {name}={kind}(LOW,HIGH)")
        low, high = _number(args[0], where), _number(args[1], where)
        if not low < high:
            raise BadRequest(f"{where}: the low bound must be below the high one")
        if isinstance(default, bool | str):
            kind_of = "true or false" if isinstance(default, bool) else "text"
            raise BadRequest(f"{where}: {name} is {kind_of}, not a number: give it as a list, e.g. {name}=a,b")
        if kind == "int":
            if not (low.is_integer() and high.is_integer()):
                raise BadRequest(f"{where}: int takes whole-number bounds")
        elif isinstance(default, int):
            raise BadRequest(f"{where}: {name} is a whole number; use {name}=int(LOW,HIGH) or a list, not {kind}")
        if kind == "loguniform" and low <= 0:
            raise BadRequest(f"{where}: loguniform needs bounds above 0 (a log scale has no 0)")
        check = spec.checks.get(name)
        if check is not None:
            for bound in (low, high):
                check.check(name, int(bound) if kind == "int" else bound, spec.name)
        return Dimension(name, kind, low, high)  # type: ignore[arg-type]
    text = expr[1:-1] if expr.startswith("[") and expr.endswith("]") else expr
    parts = _split(text)
    if len(parts) == 1 and not expr.startswith("["):
        value = coerce_param(name, parts[0], default)
        check = spec.checks.get(name)
        if check is not None:
            check.check(name, value, spec.name)
        return value
    return _choice(name, parts, spec)


def _choice(name: str, raw: list[str], spec: JobSpec) -> Dimension:
    if not raw or not all(raw):
        raise BadRequest(f"{name}: a list or choice needs values separated by commas, e.g. {name}=64,128,256")
    if len(raw) > MAX_CHOICES:
        raise BadRequest(f"{name}: {len(raw)} values; at most {MAX_CHOICES}")
    values: list[ParamValue] = []
    for text in raw:
        value = coerce_param(name, text, spec.params[name])
        check = spec.checks.get(name)
        if check is not None:
            check.check(name, value, spec.name)
        if value in values:
            raise BadRequest(f"{name}: {text} is in the list twice")
        values.append(value)
    return Dimension(name, "choice", values=tuple(values))
