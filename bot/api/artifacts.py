"""``/api/v1/artifacts``: the per-agent artifact stores, as the ``lab`` MCP server works them (admin token; ``agent``
names whose store it is; 503 ``not_running`` without a store). The store's own errors are mapped onto labbot's tree
here: bad request 400, not found 404, not the owner 403, over quota 413.

Routes::

    GET    /api/v1/artifacts?agent=A[&include_shared=0]    {"artifacts": [...], "usage": {...}}
    POST   /api/v1/artifacts?agent=A&name=N   raw body     {"artifact": {...}}  201 new, 200 replaced the name
    GET    /api/v1/artifacts/{id}?agent=A                  the bytes, with the artifact's content type
    POST   /api/v1/artifacts/{id}/share?agent=A&with=B     {"artifact": {...}}
    POST   /api/v1/artifacts/{id}/post?agent=A&channel=C[&thread_ts=T]   uploaded into Slack  {"posted": id, ...}
    DELETE /api/v1/artifacts/{id}?agent=A                  {"deleted": id}
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, TypeVar
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps, NotRunning, blocking
from labbot.bot.api.params import flag, required
from labbot.bot.web.body import receive_into
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.humanize import format_bytes
from labbot.storage.artifacts import (
    ArtifactError,
    ArtifactNotFound,
    ArtifactStore,
    BadArtifactRequest,
    NotShared,
    QuotaExceeded,
)

T = TypeVar("T")
SPOOL_BYTES = 1 << 20  # an upload is kept in memory up to this size, then in a temp file
READ_CHUNK = 1 << 20
MAX_CONTENT_TYPE = 100  # Artifact.content_type


class ArtifactRefused(LabbotError):
    """One of the artifact store's errors, with the store's message and the HTTP status it maps to."""

    def __init__(self, message: str, *, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


_ARTIFACT_STATUS: dict[type[ArtifactError], tuple[int, str]] = {
    BadArtifactRequest: (400, "bad_request"),
    ArtifactNotFound: (404, "unknown_artifact"),
    NotShared: (403, "not_owner"),
    QuotaExceeded: (413, "quota_exceeded"),
}


async def _in_store(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the artifact store on a worker thread; its errors become labbot errors that keep its message."""
    try:
        return await blocking(fn, *args, **kwargs)
    except ArtifactError as e:
        # a blob missing under the store (changed outside labbot) is the server's fault: 500, still said plainly
        status, code = _ARTIFACT_STATUS.get(type(e), (500, "artifact_store"))
        raise ArtifactRefused(str(e), status=status, code=code) from None


def _agent(request: Request) -> str:
    return required(request, "agent", "the agent whose store this is, e.g. ?agent=researcher")


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    """A blob stream read in chunks (Starlette iterates a sync iterator on a worker thread); closed at the end."""
    try:
        while chunk := stream.read(READ_CHUNK):
            yield chunk
    finally:
        stream.close()


def routes(deps: ApiDeps) -> list[Route]:
    admin, post_file, max_bytes = deps.admin, deps.post_file, deps.max_artifact_bytes

    def the_store() -> ArtifactStore:
        if deps.artifacts is None:
            raise NotRunning("the artifact store is not running in this labbot (it was started without one)")
        return deps.artifacts

    async def list_artifacts(request: Request) -> Any:
        store, agent = the_store(), _agent(request)
        include_shared = flag(request, "include_shared", True)
        listed = await _in_store(store.list, agent, include_shared=include_shared)
        return {"artifacts": listed, "usage": await _in_store(store.usage, agent)}

    async def put_artifact(request: Request) -> Any:
        store, agent = the_store(), _agent(request)
        name = required(request, "name", "the artifact's name in the agent's store, e.g. ?name=report.md")
        content_type = request.headers.get("content-type") or None  # None: the store guesses from the name
        if content_type and len(content_type) > MAX_CONTENT_TYPE:
            raise BadRequest(f"the Content-Type header is over {MAX_CONTENT_TYPE} characters: send a plain media type")
        too_large = (
            f"an artifact upload is limited to {format_bytes(max_bytes)} per request: store a smaller file, "
            "or split it into parts"
        )
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as body:  # memory, then a temp file
            await receive_into(request, body, max_bytes, too_large=too_large)
            view = await _in_store(store.put, agent, name, body, content_type)
        created = view["created_at"] == view["updated_at"]  # a put of a name the agent has replaces it, same id
        return JSONResponse({"artifact": view}, status_code=201 if created else 200)

    async def get_artifact(request: Request) -> Any:
        store, agent, artifact_id = the_store(), _agent(request), request.path_params["artifact_id"]

        def work() -> tuple[dict[str, Any] | None, BinaryIO]:
            stream = store.open(agent, artifact_id)  # not found / not shared: raised before anything is listed
            try:
                views = store.list(agent, include_shared=True)
            except BaseException:
                stream.close()
                raise
            return next((v for v in views if v["id"] == artifact_id), None), stream

        view, stream = await _in_store(work)
        if view is None:  # deleted between the open and the listing: the stream still reads the old blob
            view = {"name": artifact_id, "content_type": "application/octet-stream", "sha256": None, "size": None}
        headers = {
            # kept as stored: Starlette would add "; charset=utf-8" to a text/* media_type
            "content-type": view["content_type"],
            "content-disposition": f"inline; filename*=UTF-8''{quote(view['name'], safe='')}",
            "x-artifact-id": artifact_id,
        }
        if view["sha256"]:
            headers["etag"] = f'"{view["sha256"]}"'
        if view["size"] is not None:
            headers["content-length"] = str(view["size"])
        return StreamingResponse(_chunks(stream), headers=headers)

    async def share_artifact(request: Request) -> Any:
        store, agent = the_store(), _agent(request)
        with_agent = required(request, "with", "the agent to share it with, e.g. ?with=evaluator")
        return {"artifact": await _in_store(store.share, agent, request.path_params["artifact_id"], with_agent)}

    async def post_artifact(request: Request) -> Any:
        """Upload an artifact (the agent's own, or shared with it) into a Slack thread as a file."""
        store, agent, artifact_id = the_store(), _agent(request), request.path_params["artifact_id"]
        if post_file is None:
            raise NotRunning("Slack is not connected to this labbot: there is no thread to post the file in")
        channel = required(request, "channel", "the Slack channel to post in, e.g. ?channel=C0123")
        thread_ts = request.query_params.get("thread_ts") or None

        def read() -> tuple[dict[str, Any], bytes]:
            data = store.get(agent, artifact_id)  # not found / not shared: refused before anything is posted
            view = next((v for v in store.list(agent, include_shared=True) if v["id"] == artifact_id), None)
            return view or {"name": artifact_id}, data

        view, data = await _in_store(read)
        await post_file(channel, thread_ts, str(view["name"]), data)
        return {"posted": artifact_id, "name": view["name"], "channel": channel, "thread_ts": thread_ts}

    async def delete_artifact(request: Request) -> Any:
        store, agent, artifact_id = the_store(), _agent(request), request.path_params["artifact_id"]
        await _in_store(store.delete, agent, artifact_id)
        return {"deleted": artifact_id}

    return [
        Route("/api/v1/artifacts", admin(list_artifacts), methods=["GET"]),
        Route("/api/v1/artifacts", admin(put_artifact), methods=["POST"]),
        Route("/api/v1/artifacts/{artifact_id}", admin(get_artifact), methods=["GET"]),
        Route("/api/v1/artifacts/{artifact_id}", admin(delete_artifact), methods=["DELETE"]),
        Route("/api/v1/artifacts/{artifact_id}/share", admin(share_artifact), methods=["POST"]),
        Route("/api/v1/artifacts/{artifact_id}/post", admin(post_artifact), methods=["POST"]),
    ]
