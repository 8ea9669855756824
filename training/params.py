"""``KEY=VALUE`` parameters: parsing and typing (pure, import-light: the CLI uses it before any request)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from labbot.common.errors import BadRequest

ParamValue = bool | int | float | str
PARAM_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """``["steps=100", "lr=3e-4"]`` → ``{"steps": "100", "lr": "3e-4"}``; a bad item raises BadRequest."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not PARAM_KEY.match(key):
            raise BadRequest(f"bad KEY=VALUE {item!r}: write parameters as key=value, e.g. steps=100")
        if key in out:
            raise BadRequest(f"parameter {key!r} given twice")
        out[key] = value
    return out


def coerce_param(key: str, raw: ParamValue, default: ParamValue) -> ParamValue:
    """``raw`` converted to the type of ``default``; BadRequest names the expected type."""
    try:
        if isinstance(default, bool):
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
            raise ValueError
        if isinstance(default, int):
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            return int(raw)
        if isinstance(default, float):
            if isinstance(raw, bool):
                raise ValueError
            return float(raw)
        return str(raw)
    except ValueError:
        kind = {bool: "true or false", int: "an integer", float: "a number"}.get(type(default), "text")
        raise BadRequest(f"parameter {key!r} expects {kind}, got {raw!r}") from None
