"""What the Linear fake answers in ``errors`` (`graphql_error` bodies, `LinearError` raised by a resolver) and what
it refuses as not implemented (`Unsupported`: recorded as a violation, never answered as if Linear had)."""

from __future__ import annotations

from typing import Any


def graphql_error(message: str, code: str, **extensions: Any) -> dict[str, Any]:
    """A body with one error as Linear writes it (for `fail_next`)."""
    return {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]}


RATELIMITED = graphql_error("Rate limit exceeded", "RATELIMITED", type="ratelimited")
NOT_AUTHENTICATED = graphql_error(
    "Authentication required, not authenticated",
    "AUTHENTICATION_ERROR",
    type="authentication error",
    userPresentableMessage="You need to authenticate to access this operation.",
)


class LinearError(Exception):
    """An error Linear itself answers (entity not found, invalid input): returned in ``errors``."""

    def __init__(self, message: str, code: str = "INVALID_INPUT", user_message: str | None = None) -> None:
        super().__init__(message)
        self.extensions = {"code": code, "type": code.lower().replace("_", " ")}
        if user_message:
            self.extensions["userPresentableMessage"] = user_message


def _not_found(entity: str) -> LinearError:
    return LinearError(f"Entity not found: {entity}", user_message=f"Could not find referenced {entity}.")


class Unsupported(Exception):
    """Something valid the fake does not implement: recorded as a violation, so the test that needs it fails."""
