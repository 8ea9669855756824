"""Reading request bodies with a size limit: over the limit is 413 before anything is parsed."""

from __future__ import annotations

from starlette.requests import Request

from labbot.common.errors import LabbotError
from labbot.common.humanize import format_bytes


class BodyTooLarge(LabbotError):
    status = 413
    code = "too_large"


async def read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(
            f"body of {format_bytes(int(declared))} is over the {format_bytes(limit)} limit; send smaller batches"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"body is over the {format_bytes(limit)} limit; send smaller batches")
        chunks.append(chunk)
    return b"".join(chunks)
