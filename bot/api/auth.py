"""Bearer tokens on the HTTP surface: the admin token for ``/api/v1``; run tokens are checked by the service."""

from __future__ import annotations

import hmac

from starlette.requests import Request

from labbot.common.errors import Unauthorized


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def require_admin(request: Request, admin_token: str) -> None:
    token = bearer(request)
    if token is None or not hmac.compare_digest(token.encode(), admin_token.encode()):
        raise Unauthorized(
            "missing or wrong admin token: the CLI reads it from LABBOT_ADMIN_TOKEN, else LABBOT_HOME/admin_token"
        )
