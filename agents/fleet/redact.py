"""Secrets out of everything labbot keeps or shows about a tool call: audit rows, approval prompts, logs.

Two nets: values under keys that name a secret (``token``, ``api_key``, ``password``, ``authorization`` …), and
strings that look like a known credential wherever they are (Slack ``xox…`` tokens, Anthropic ``sk-ant-…`` keys,
AWS access key ids, GitHub tokens, bearer headers, private-key blocks). Pure functions; JSON in, JSON out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from labbot.common.redact import REDACTED, SECRET_KEY, SECRET_VALUE, redact_text

__all__ = ["REDACTED", "SECRET_KEY", "SECRET_VALUE", "digest", "preview", "redact", "redact_text"]


def redact(value: Any) -> Any:
    """A copy of ``value`` with secrets replaced by ``[redacted]``."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {
            str(k): (REDACTED if SECRET_KEY.search(str(k)) and v not in (None, "", False) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def digest(arguments: Any) -> str:
    """A stable sha256 of a tool call's arguments (canonical JSON), so calls can be matched without storing them."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def preview(arguments: Any, limit: int = 500) -> str:
    """The arguments as people may see them: redacted, compact, cut to ``limit`` characters."""
    text = json.dumps(redact(arguments), sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
