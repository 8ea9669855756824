"""Secrets out of text labbot shows: strings that look like a known credential wherever they are (Slack ``xox…``
tokens, Anthropic ``sk-ant-…`` keys, AWS access key ids, GitHub tokens, bearer headers, private-key blocks), and the
exact values of the secrets labbot itself holds (its environment's tokens, keys and passwords; Ray's token)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

REDACTED = "[redacted]"
SECRET_KEY = re.compile(
    r"(pass(word|wd)?|secret|token|api[_-]?key|apikey|auth(orization)?|credential|private[_-]?key|cookie|session)",
    re.IGNORECASE,
)
SECRET_VALUE = re.compile(
    r"xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{10,}"
    r"|sk-ant-[A-Za-z0-9_-]{16,}"
    r"|sk-[A-Za-z0-9]{32,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|lin_api_[A-Za-z0-9]{20,}"
    r"|secret_[A-Za-z0-9]{30,}"
    r"|ntn_[A-Za-z0-9]{30,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{12,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"
)
# an environment variable whose name says it holds a secret (SLACK_BOT_TOKEN, ANTHROPIC_API_KEY, DB_PASSWORD …)
SECRET_ENV_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL", re.IGNORECASE)
MIN_SECRET_LEN = 8  # shorter values ("1", "true") would redact ordinary words


def redact_text(text: str) -> str:
    return SECRET_VALUE.sub(REDACTED, text)


def secret_env_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's secrets (by name), long enough to be matched safely."""
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if SECRET_ENV_NAME.search(k) and len(v.strip()) >= MIN_SECRET_LEN]


class Redactor:
    """Redacts the credential shapes and a fixed set of known secret values (labbot's environment's, taken once,
    plus ``extra``): for any text a job wrote that labbot shows — logs posted to Slack, a failed job's message."""

    def __init__(self, extra: Iterable[str | None] = (), environ: Mapping[str, str] | None = None) -> None:
        values = {v.strip() for v in [*secret_env_values(environ), *extra] if v and len(v.strip()) >= MIN_SECRET_LEN}
        # the longest first: a value inside another goes whole
        ordered = sorted(values, key=len, reverse=True)
        self._known = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if self._known is not None:
            text = self._known.sub(REDACTED, text)
        return redact_text(text)


# `WANDB_API_KEY=…`, `password: …`, `"token": "…"` in a log line: the value of an assignment whose name says secret
SECRET_ASSIGNMENT = re.compile(
    r"""(?P<name>\b[A-Za-z0-9_.-]*?(?:token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|private[_-]?key|"""
    r"""credentials?|authorization|auth)(?:[_-]?(?:key|id|value|string))?\b)(?P<quote>["']?)(?P<sep>\s*[=:]\s*)"""
    r"""(?P<q2>["']?)(?P<value>[^\s"',;}]{4,})""",
    re.IGNORECASE,
)


def redact_assignments(text: str) -> str:
    """``text`` with the values of secret-named assignments redacted (``API_TOKEN=abc…`` → ``API_TOKEN=[redacted]``)."""
    return SECRET_ASSIGNMENT.sub(
        lambda m: f"{m['name']}{m['quote']}{m['sep']}{m['q2']}{REDACTED}" if m["value"] != REDACTED else m[0], text
    )


def redact_json(value: object, redactor: Redactor | None = None) -> object:
    """A copy of JSON-like ``value`` with secrets replaced by ``[redacted]``: values under secret-named keys, credential
    shapes and secret-named assignments in every string, and (with ``redactor``) the known secret values."""
    if isinstance(value, str):
        text = redactor(value) if redactor is not None else redact_text(value)
        return redact_assignments(text)
    if isinstance(value, Mapping):
        return {
            str(k): _secret_named(v, redactor) if SECRET_KEY.search(str(k)) else redact_json(v, redactor)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_json(v, redactor) for v in value]
    return value


_NON_FINITE = ("NaN", "Infinity", "-Infinity")  # how JSON-minded code writes a float that JSON cannot


def _secret_named(value: object, redactor: Redactor | None) -> object:
    """What is under a secret-named key: its strings redacted whole; numbers and flags kept (a metric such as
    ``tokens_per_s`` or a setting such as ``max_tokens`` holds no secret); nested objects read key by key."""
    if isinstance(value, str):
        return REDACTED if value and value not in _NON_FINITE else value
    if isinstance(value, list | tuple):
        return [_secret_named(v, redactor) for v in value]
    return redact_json(value, redactor)
