"""Checking and typing one ``/lab`` value by its declared kind (pure functions), and writing it back as text.

``int`` and ``float`` become numbers; ``duration`` is checked with ``labbot.common.durations.parse_duration`` but kept
as the original string, so the service parses the very text the user typed; ``run_id`` is lower-cased; ``status`` is one
of the run statuses; ``job`` and ``str`` stay text. A bad value raises ``BadValue`` naming what was expected.
"""

from __future__ import annotations

import math
import re
from typing import Any

from labbot.common.durations import ACCEPTED as DURATIONS_ACCEPTED
from labbot.common.durations import parse_duration
from labbot.common.errors import BadRequest

RUN_STATUSES = ("queued", "pending", "running", "stalled", "restarting", "succeeded", "failed", "stopped")
"""The statuses a run can be in (``labbot.storage.models.RunStatus``, spelled out here to keep this module
import-light)."""

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_RUN_ID = re.compile(r"[a-z0-9-]+", re.ASCII)
_JOB = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*", re.ASCII)


class BadValue(ValueError):
    """``raw`` is not a value of the kind; ``expected`` says what would be right (``"a whole number"``)."""

    def __init__(self, raw: str, expected: str) -> None:
        super().__init__(f"expected {expected}, got {raw!r}")
        self.raw = raw
        self.expected = expected


def convert(kind: str, raw: str, *, minimum: float | None = None) -> Any:
    """The typed value of ``raw`` for ``kind``; BadValue when it is not one."""
    if kind == "int":
        return _at_least(_int(raw), raw, minimum, "a whole number")
    if kind == "float":
        return _at_least(_float(raw), raw, minimum, "a number")
    if kind == "duration":
        try:
            parse_duration(raw)
        except BadRequest:
            raise BadValue(raw, f"a positive duration: {DURATIONS_ACCEPTED}") from None
        return raw
    if kind == "run_id":
        value = raw.lower()
        if not _RUN_ID.fullmatch(value):
            raise BadValue(raw, "a run id: letters, digits and '-'")
        return value
    if kind == "status":
        value = raw.lower()
        if value not in RUN_STATUSES:
            raise BadValue(raw, f"a run status, one of {'|'.join(RUN_STATUSES)}")
        return value
    if kind == "job":
        if not _JOB.fullmatch(raw):
            raise BadValue(raw, "a job name: letters, digits, '.', '_' and '-'")
        return raw
    if kind in ("str", "text"):
        return raw
    raise ValueError(f"no value conversion for kind {kind!r}")  # a declaration bug, not user input


def to_text(kind: str, value: Any) -> str:
    """``value`` written so that ``convert(kind, to_text(kind, value)) == value``."""
    if kind == "float":
        text = repr(float(value))  # exact: float(repr(x)) == x
        return text.removesuffix(".0")
    return str(value)


def _int(raw: str) -> int:
    if _INT.fullmatch(raw):
        try:
            return int(raw)
        except ValueError:  # more digits than Python converts (int_max_str_digits)
            pass
    raise BadValue(raw, "a whole number")


def _float(raw: str) -> float:
    if _FLOAT.fullmatch(raw):
        value = float(raw)
        if math.isfinite(value):
            return value
    raise BadValue(raw, "a finite number")


def _at_least(value: float, raw: str, minimum: float | None, what: str) -> Any:
    if minimum is not None and value < minimum:
        shown = int(minimum) if float(minimum).is_integer() else minimum
        raise BadValue(raw, f"{what} of at least {shown}")
    return value
