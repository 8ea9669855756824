"""Reading request bodies with a size limit: over the limit is 413 before anything is parsed, and a declared
Content-Length over it is 413 before a byte is read. The body itself is never logged."""

from __future__ import annotations

from typing import IO

from starlette.requests import Request

from labbot.common.errors import LabbotError
from labbot.common.humanize import format_bytes


class BodyTooLarge(LabbotError):
    status = 413
    code = "too_large"


def declared_length(request: Request) -> int | None:
    """The Content-Length header as a number; None when absent or not ASCII digits (the server's HTTP parser
    refuses those before the app sees them; ``str.isdigit`` alone would let ``²`` through to ``int``)."""
    declared = request.headers.get("content-length")
    if declared is None or not (declared.isascii() and declared.isdigit()):
        return None
    return int(declared)


async def read_limited(request: Request, limit: int, *, hint: str = "send smaller batches") -> bytes:
    """The whole body, or BodyTooLarge as soon as it passes ``limit`` (reading stops there)."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise BodyTooLarge(f"body of {format_bytes(declared)} is over the {format_bytes(limit)} limit; {hint}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"body is over the {format_bytes(limit)} limit; {hint}")
        chunks.append(chunk)
    return b"".join(chunks)


async def receive_into(request: Request, out: IO[bytes], limit: int, *, too_large: str) -> None:
    """Write the request body to ``out`` and rewind it; over ``limit`` is 413 (``too_large`` says what to do) while
    streaming, before anything reads it (a declared Content-Length over it, before a byte is read)."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise BodyTooLarge(f"{too_large} (this one is {format_bytes(declared)})")
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(too_large)
        out.write(chunk)
    out.seek(0)
