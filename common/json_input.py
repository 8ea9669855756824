"""The one reader of JSON that comes from outside (request bodies): bad JSON, JSON nested too deep, and a body that
is not UTF-8 are each a ``BadRequest`` saying which, never a ``RecursionError`` or a 500.

The depth is measured before the document is parsed, in one pass over the bytes (strings skipped), so a body nested
30,000 levels deep is refused without the parser recursing into it. Bare ``NaN``/``Infinity`` tokens parse (the
telemetry wire format allows them).
"""

from __future__ import annotations

import json
import re
from typing import Any

from labbot.common.errors import BadRequest

__all__ = ["MAX_JSON_DEPTH", "json_depth", "loads_json"]

MAX_JSON_DEPTH = 64  # labbot's own documents nest a handful of levels
# a string (to its closing quote, or to the end when unterminated: always a match, so the scan stays linear),
# or a bracket
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_OPEN = frozenset(b"[{")


def json_depth(body: bytes, *, stop_at: int | None = None) -> int:
    """How deeply ``body``'s arrays and objects nest (0 for a scalar); brackets inside strings do not count.
    With ``stop_at``, returns as soon as the depth passes it."""
    depth = deepest = 0
    for m in _TOKENS.finditer(body):
        c = body[m.start()]
        if c in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_at is not None and deepest > stop_at:
                    return deepest
        elif c != 0x22:  # a closing bracket (0x22 is the quote that starts a string)
            depth -= 1
    return deepest


def loads_json(body: bytes | str, *, what: str = "body", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``body`` parsed, or BadRequest naming ``what`` and what is wrong with it."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if raw.count(b"[") + raw.count(b"{") > max_depth and json_depth(raw, stop_at=max_depth) > max_depth:
        raise BadRequest(f"{what} is JSON nested more than {max_depth} levels deep: send a flatter document")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise BadRequest(f"{what} is not UTF-8 text") from None
    except ValueError as e:
        raise BadRequest(f"{what} is not JSON: {e}") from None
    except RecursionError:  # cannot happen under the depth limit; kept so it can never be a 500
        raise BadRequest(f"{what} is JSON nested too deeply") from None
