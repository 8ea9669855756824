"""The one reader of JSON that comes from outside (request bodies): bad JSON, JSON nested too deep, a body that is
not UTF-8, and text no database can store (a NUL, a lone surrogate) are each a ``BadRequest`` saying which, never a
``RecursionError``, a driver error or a 500.

The depth is measured before the document is parsed, in one pass over the bytes (strings skipped), so a body nested
30,000 levels deep is refused without the parser recursing into it. Bare ``NaN``/``Infinity`` tokens parse (the
telemetry wire format allows them) unless the caller says ``allow_nan=False`` (Slack's payloads never hold one).

What no database can store: PostgreSQL's text refuses the NUL character, and every backend refuses text that is not
UTF-8 (a ``\\ud800`` escape parses to a lone surrogate). :func:`unstorable` says so of one string (the API's edge asks
it of ids and query values), :func:`unstorable_in` of every string and key of a parsed document, and
:func:`loads_json` refuses a body holding one: one check for every JSON body, instead of one per route.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from labbot.common.errors import BadRequest

__all__ = ["MAX_JSON_DEPTH", "json_depth", "loads_json", "place", "shown_key", "unstorable", "unstorable_in"]

MAX_JSON_DEPTH = 64  # labbot's own documents nest a handful of levels
# a string (to its closing quote, or to the end when unterminated: always a match, so the scan stays linear),
# or a bracket
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_OPEN = frozenset(b"[{")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,40}")
_JSON_NUL = "\\u0000"


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


def unstorable(text: str, *, nul: str = "%00") -> str | None:
    """Why ``text`` cannot be an id or a stored value (pure), or None when it can; ``nul`` is how the NUL is
    written where it came from (``%00`` in a URL, ``\\u0000`` in JSON)."""
    if "\x00" in text:
        return f"holds a NUL character ({nul})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    return None


def shown_key(key: object) -> str:
    """A key as a message names it: a plain name of up to 40 characters as it is, anything else as ``[…]`` (what
    names a place in a document must not carry the document's text into an answer or a log)."""
    return key if isinstance(key, str) and _PLAIN_KEY.fullmatch(key) else "[…]"


def place(path: str, key: object) -> str:
    """The place of ``key`` (an object's key, an array's index) under ``path``: ``params.name``, ``points[0]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{shown_key(key)}" if path else shown_key(key)


def unstorable_in(doc: Any, *, allow_nan: bool = True, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """What in the parsed document ``doc`` no database can store, and where (``params.name holds a NUL character
    (\\u0000)``), or None (pure): a string or key for which :func:`unstorable` has a reason, arrays and objects
    nested more than ``max_depth`` deep (as :func:`json_depth` counts) and, without ``allow_nan``, a number that is
    NaN or infinite. Iterative: a document nested past Python's recursion limit is refused, not a RecursionError."""
    stack: list[tuple[Any, str, int]] = [(doc, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if why := unstorable(value, nul=_JSON_NUL):
                return f"{path or 'the document'} {why}"
        elif isinstance(value, float):
            if not allow_nan and not math.isfinite(value):
                return f"{path or 'the document'} is {value!r}, which JSON has no number for"
        elif isinstance(value, dict | list):
            if depth >= max_depth:
                return f"arrays and objects nest more than {max_depth} levels deep"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and (why := unstorable(key, nul=_JSON_NUL)):
                    return f"a key in {path or 'the document'} {why}"
                stack.append((item, place(path, key), depth + 1))
    return None


def _no_constant(token: str) -> NoReturn:
    raise BadRequest(f"{token} is not a JSON number: send a finite number, or null")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise BadRequest(f"the number {literal[:40]} is too large for a float: send a finite number")
    return value


def loads_json(
    body: bytes | str, *, what: str = "body", max_depth: int = MAX_JSON_DEPTH, allow_nan: bool = True
) -> Any:
    """``body`` parsed, or BadRequest naming ``what`` and what is wrong with it. Without ``allow_nan``, ``NaN``,
    ``Infinity`` and a number too large for a float are refused too."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if raw.count(b"[") + raw.count(b"{") > max_depth and json_depth(raw, stop_at=max_depth) > max_depth:
        raise BadRequest(f"{what} is JSON nested more than {max_depth} levels deep: send a flatter document")
    try:
        strict: dict[str, Any] = {} if allow_nan else {"parse_constant": _no_constant, "parse_float": _finite}
        doc = json.loads(raw, **strict)
    except BadRequest as e:
        raise BadRequest(f"{what}: {e.message}") from None
    except UnicodeDecodeError:
        raise BadRequest(f"{what} is not UTF-8 text") from None
    except ValueError as e:
        raise BadRequest(f"{what} is not JSON: {e}") from None
    except RecursionError:  # cannot happen under the depth limit; kept so it can never be a 500
        raise BadRequest(f"{what} is JSON nested too deeply") from None
    # a NUL reaches a parsed string only through a \u escape; a lone surrogate through one, or through the bytes
    # ED A0..BF (json decodes bytes with surrogatepass): without either in the body there is nothing to look for
    if (b"\\u" in raw or b"\xed" in raw) and (why := unstorable_in(doc, max_depth=max_depth)):
        raise BadRequest(f"{what} holds text no database can store: {why}; send UTF-8 text without NUL characters")
    return doc
