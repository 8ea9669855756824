"""One translation of labbot's error tree into HTTP answers: ``{"error": {"code", "message"}}``."""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from labbot.common.errors import LabbotError

log = logging.getLogger(__name__)


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def from_exception(e: Exception) -> JSONResponse:
    if isinstance(e, LabbotError):
        return error_response(e.status, e.code, e.message)
    log.exception("unexpected error in the API")
    return error_response(500, "internal", "internal error in the labbot control plane; see its log")
