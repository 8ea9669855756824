"""Non-finite floats across JSON and SQL.

NaN and ±inf are a divergence signal, so they are kept, never rejected. JSON has no NaN, so on the wire and in
JSON columns they travel as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (the protobuf JSON
convention); SQLite cannot store NaN in a REAL column, so ``NanFloat`` stores NaN as NULL.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import Float
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def encode_float(value: float) -> float | str:
    """A float as JSON can carry it: finite floats unchanged, the rest as strings."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode_float(value: Any) -> float:
    """Inverse of :func:`encode_float`; also accepts ints, bools excluded. Raises ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer past the largest double (JSON allows 1000 digits)
            raise ValueError("the integer is too large for a float") from None
    if isinstance(value, str) and value in _SPECIAL:
        return _SPECIAL[value]
    raise ValueError(f"expected a number or one of NaN, Infinity, -Infinity; got {value!r}")


class NanFloat(TypeDecorator[float]):
    """A double column that round-trips NaN (stored as NULL: the column holds no other NULLs)."""

    impl = Float(precision=53)
    cache_ok = True

    def process_bind_param(self, value: float | None, dialect: Dialect) -> float | None:
        if value is None or math.isnan(value):
            return None
        return float(value)

    def process_result_value(self, value: float | None, dialect: Dialect) -> float:
        return math.nan if value is None else float(value)
