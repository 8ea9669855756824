"""How the Notion fake refuses a request: `Invalid` (answered 400 ``validation_error`` and recorded as a violation)
and `NotFound` (404 ``object_not_found``), and the error object Notion answers with for each status."""

from __future__ import annotations

from typing import Any

CODES = {
    **{400: "validation_error", 401: "unauthorized", 403: "restricted_resource", 404: "object_not_found"},
    **{409: "conflict_error", 429: "rate_limited", 500: "internal_server_error", 503: "service_unavailable"},
}


class Invalid(Exception):
    """A request Notion would answer 400 validation_error."""


class NotFound(Exception):
    """An id Notion does not know, or that is not shared with the integration."""


def _error(status: int, message: str) -> dict[str, Any]:
    code = CODES.get(status, "internal_server_error")
    return {"object": "error", "status": status, "code": code, "message": message}


def _not_found(what: str, oid: str) -> NotFound:
    shared = "Make sure the relevant pages and databases are shared with your integration."
    return NotFound(f"Could not find {what} with ID: {oid}. {shared}")
