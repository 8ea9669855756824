"""How ``labbot serve`` logs: the human format by default, one JSON object a line with ``LABBOT_LOG_FORMAT=json``.

A JSON line has ``time`` (ISO-8601, UTC), ``level``, ``logger``, ``message`` and, when the log call carries them in
``extra=`` (the watchdog, the pager, the outbox, the run service do), ``run_id`` and ``page_id``; a logged exception
is ``exception``. Either way every line passes :class:`RedactingFilter` first: the credential shapes and the values of
labbot's own secrets (its environment's tokens, keys and passwords) become ``[redacted]``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from labbot.common.redact import Redactor

__all__ = ["FIELDS", "TEXT_FORMAT", "JsonFormatter", "RedactingFilter", "formatter"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = ("run_id", "page_id")  # the extras a JSON line carries as its own fields


class RedactingFilter(logging.Filter):
    """Formats the record's message once, redacted (``args`` folded in), so no handler can print a secret."""

    def __init__(self, extra: Iterable[str | None] = ()) -> None:
        super().__init__()
        self.redact = Redactor(extra)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what there is, as logging would
            message = str(record.msg)
        record.msg, record.args = self.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                doc[name] = str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            doc["exception"] = record.exc_text
        return json.dumps(doc, ensure_ascii=False, default=str)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``LABBOT_LOG_FORMAT``: ``json`` or the human ``text``."""
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
