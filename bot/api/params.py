"""Query parameters of ``/api/v1``, each read one way everywhere, and a JSON body read as a pydantic model
(:func:`read_model`): anything not of its form is a 400 saying what would be right."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from labbot.bot.web.body import read_limited
from labbot.common.errors import BadRequest
from labbot.common.json_input import loads_json

M = TypeVar("M", bound=BaseModel)
MAX_MODEL_BODY = 64 * 1024  # a request's JSON body read as a model (an experiment, a research plan): at most this

MAX_BY = 100  # who acted (`?by=`): acknowledged_by, resolved_by, cause_by are VARCHAR(100), which PostgreSQL enforces


def by(request: Request) -> str:
    """Who acted, from ``?by=`` (default ``api``): at most ``MAX_BY`` characters, or a 400 saying so."""
    who = request.query_params.get("by") or "api"
    if len(who) > MAX_BY:
        raise BadRequest(f"by is who acted, at most {MAX_BY} characters; got {len(who)}")
    return who


def int_query(request: Request, name: str, default: int | None, *, lo: int = 0, hi: int = 100_000) -> int | None:
    """The one parser of integer query parameters: ASCII digits only (``str.isdigit`` also takes ``²``, which
    ``int`` refuses), and at most as many digits as ``hi`` has (``int`` of thousands of digits is slow, then
    refused); anything else is 400 saying what would be right."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(hi))) or not lo <= int(raw) <= hi:
        raise BadRequest(f"query parameter {name}={raw[:40]!r} must be a whole number from {lo} to {hi}")
    return int(raw)


def required(request: Request, name: str, example: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise BadRequest(f"query parameter {name} is required: {example}")
    return value


def flag(request: Request, name: str, default: bool) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes"):
        return True
    if raw.lower() in ("0", "false", "no"):
        return False
    raise BadRequest(f"query parameter {name}={raw!r} must be 1 or 0 (true or false)")


async def read_model(request: Request, model: type[M], what: str, *, limit: int = MAX_MODEL_BODY) -> M:
    """The body as ``model``: 413 over ``limit``, else a 400 naming the first field that is wrong (or the fields a
    body that is not a JSON object should have)."""
    body = await read_limited(request, limit)
    try:
        doc = loads_json(body or b"{}")
    except BadRequest as e:
        raise BadRequest(f"bad {what}: {e.message}") from None
    if not isinstance(doc, dict):
        fields = ", ".join(list(model.model_fields)[:3])
        raise BadRequest(f"bad {what}: the body is a JSON object ({fields}, …)")
    try:
        return model.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise BadRequest(f"bad {what}: {where}: {err['msg']}") from None
