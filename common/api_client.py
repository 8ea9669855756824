"""The one client of the running control plane's ``/api/v1``, for the ``labbot`` CLI (:class:`ApiClient`) and the
``lab`` MCP server (:class:`AsyncApiClient`); in ``common`` because those two sit in layers that may not import each
other. Both find labbot the same way (``LABBOT_PUBLIC_URL``, else ``http://127.0.0.1:LABBOT_PORT``; the admin token
in ``LABBOT_ADMIN_TOKEN``, else ``LABBOT_HOME/admin_token``) and fail with one error, :class:`ApiError`, which each
front door words for its reader: the CLI as an exit message and code, the lab server as a tool error. Only httpx:
``labbot launch`` costs a Python start-up and one request, not SQLAlchemy or Ray.

Paths are built from segments (:func:`api_path`), each escaped, and the ids in them checked against their format
first (:func:`run_path`, :func:`page_path`, :func:`artifact_path`): an id like ``../audit#`` or ``r1/stop?`` written
by a model or typed by a person fails before any request, and never reaches another route.
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

# the codes of the failures that never reached the API (``status`` None); none of them is one of the API's own codes
NO_ADMIN_TOKEN = "no_admin_token"
""":attr:`ApiError.code` when there is no admin token here: labbot was never started with this LABBOT_HOME."""
NOT_ANSWERING = "not_answering"
""":attr:`ApiError.code` when nothing answered at the URL (connection refused, DNS, a timeout)."""
BAD_ID = "bad_id"
""":attr:`ApiError.code` when an id or a path segment is not of its format: nothing was asked."""
BAD_ADMIN_TOKEN = "bad_admin_token"
""":attr:`ApiError.code` when ``LABBOT_ADMIN_TOKEN`` is set but cannot be a token: nothing was asked."""
ADMIN_TOKEN_ENV = "LABBOT_ADMIN_TOKEN"
MIN_ADMIN_TOKEN_CHARS = 32  # what `secrets.token_urlsafe(24)` or `openssl rand -base64 24` gives
_MAX_ERROR_TEXT = 300  # of an error body that is not the API's JSON (a proxy's HTML page, say)
# run ids (training.service.new_run_id), page ids (pager.new_page_id: "p" + 5) and artifact ids
# (storage.artifacts.new_artifact_id: "a" + 7) are lowercase letters and digits; '-' as `/lab` accepts in run ids
_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}", re.ASCII)


class ApiError(Exception):
    """``/api/v1`` refused a request, or could not be asked.

    ``message`` is the API's own (``{"error": {"code", "message"}}``), else the start of the body, else what kept
    the request from being made; ``code`` is the API's error code (``unknown_run``, ``conflict`` ...), or
    :data:`NO_ADMIN_TOKEN` / :data:`NOT_ANSWERING`, or ``http`` for an answer that was not the API's; ``status`` is
    the HTTP status, ``None`` when no answer came.
    """

    def __init__(self, message: str, *, code: str = "http", status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


def control_url() -> str:
    port = os.environ.get("LABBOT_PORT") or "3000"
    return (os.environ.get("LABBOT_PUBLIC_URL") or f"http://127.0.0.1:{port}").rstrip("/")


def home() -> Path:
    return Path(os.environ.get("LABBOT_HOME") or ".labbot").expanduser().resolve()


def given_admin_token(env: Mapping[str, str]) -> str | None:
    """``LABBOT_ADMIN_TOKEN`` when set (every replica of a deployment given the same one from a Secret), else None.
    A value that cannot be a bearer token (shorter than :data:`MIN_ADMIN_TOKEN_CHARS`, or with a space, quote or
    control character in it) is a ``ValueError`` that names the variable and what would do, never the value."""
    value = env.get(ADMIN_TOKEN_ENV)
    if value is None or value == "":
        return None
    value = value.strip()
    if len(value) < MIN_ADMIN_TOKEN_CHARS or not all(33 <= ord(c) < 127 and c not in "\"'\\" for c in value):
        raise ValueError(
            f"{ADMIN_TOKEN_ENV} must be one word of at least {MIN_ADMIN_TOKEN_CHARS} printable ASCII characters "
            f"(got {len(value)} characters); make one with `openssl rand -base64 32`, or unset it and labbot keeps "
            "its own in LABBOT_HOME/admin_token"
        )
    return value


def admin_token() -> str:
    """``LABBOT_ADMIN_TOKEN`` when set, else the admin token ``labbot serve`` wrote in LABBOT_HOME; a
    :data:`BAD_ADMIN_TOKEN` error for a variable that cannot be a token, :data:`NO_ADMIN_TOKEN` when there is none."""
    try:
        given = given_admin_token(os.environ)
    except ValueError as e:
        raise ApiError(str(e), code=BAD_ADMIN_TOKEN) from None
    if given is not None:
        return given
    path = home() / "admin_token"
    if not path.exists():
        raise ApiError(f"no admin token at {path}", code=NO_ADMIN_TOKEN)
    return path.read_text().strip()


def segment(value: str) -> str:
    """One path segment, escaped (``quote(value, safe="")``): a ``?``, ``#``, ``&`` or ``%`` in it stays in it. A
    segment that is empty, ``.`` or ``..``, or holds a ``/`` or ``\\`` (which servers and proxies may still read as
    a separator once unescaped) is an :data:`BAD_ID` error."""
    if value in ("", ".", "..") or "/" in value or "\\" in value:
        raise ApiError(f"{value!r} cannot be part of a path", code=BAD_ID)
    return quote(value, safe="")


def api_path(*segments: str) -> str:
    """``/a/b/c`` from ``("a", "b", "c")``, each segment escaped by :func:`segment`."""
    return "".join("/" + segment(s) for s in segments)


def check_id(kind: str, value: object) -> str:
    """``value`` when it is an id of its format (lowercase letters, digits and ``-``, at most 64), else a
    :data:`BAD_ID` error that says what ``kind`` of id was expected."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ApiError(f"{value!r} is not a {kind} id (lowercase letters, digits and '-')", code=BAD_ID)
    return value


def run_path(run_id: str, *rest: str) -> str:
    """``/runs/ID/...``: the run id checked, every segment escaped."""
    return api_path("runs", check_id("run", run_id), *rest)


def page_path(page_id: str, *rest: str) -> str:
    """``/pages/ID/...``: the page id checked, every segment escaped."""
    return api_path("pages", check_id("page", page_id), *rest)


def artifact_path(artifact_id: str, *rest: str) -> str:
    """``/artifacts/ID/...``: the artifact id checked, every segment escaped."""
    return api_path("artifacts", check_id("artifact", artifact_id), *rest)


def _error_of(r: httpx.Response) -> ApiError:
    """The :class:`ApiError` of an answer with an error status (its body already read)."""
    try:
        err = r.json()["error"]
        message, code = str(err["message"]), str(err["code"])
    except (ValueError, KeyError, TypeError):
        message, code = r.text.strip()[:_MAX_ERROR_TEXT] or f"HTTP {r.status_code}", "http"
    return ApiError(message, code=code, status=r.status_code)


class _Api:
    """What both clients share: the URL, the token, and how a failure becomes an :class:`ApiError`."""

    def __init__(self, url: str | None, token: str | None, timeout: float) -> None:
        self.url = (url or control_url()).rstrip("/")
        self.base_url = f"{self.url}/api/v1"
        self.timeout = timeout
        self._token = token

    def headers(self) -> dict[str, str]:
        """The bearer header: the token given, else the admin token read from LABBOT_HOME now; none for a token
        given as ``""`` (a transport that vouches for its requests itself: labbot's in-process door)."""
        if self._token == "":
            return {}
        return {"Authorization": f"Bearer {self._token if self._token is not None else admin_token()}"}

    def _not_answering(self, e: httpx.TransportError) -> ApiError:
        return ApiError(
            f"the labbot control plane is not answering at {self.url} ({type(e).__name__})", code=NOT_ANSWERING
        )


class ApiClient(_Api):
    """``/api/v1`` for the CLI: synchronous, one connection pool until :meth:`close`; without a ``token`` given, the
    admin token is read once, here (a command without one fails at once)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(url, token if token is not None else admin_token(), timeout)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers(), **kwargs.pop("headers", {})}
        try:
            r = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TransportError as e:
            raise self._not_answering(e) from None
        if r.status_code >= 400:
            raise _error_of(r)
        return r

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    def close(self) -> None:
        self._http.close()


class AsyncApiClient(_Api):
    """``/api/v1`` for the MCP servers: asynchronous, an httpx client per request (nothing to close); without a
    ``token`` given, the admin token is read on each request (a server may start before labbot does). Tests pass
    ``transport=httpx.ASGITransport(app)``; labbot's own agents ``labbot.bot.api.in_process``'s door with ``token=""``
    (no header: the door sets it)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(url, token, timeout)
        self._transport = transport

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, transport=self._transport)

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers(), **kwargs.pop("headers", {})}
        try:
            async with self._client() as http:
                r = await http.request(method, path, headers=headers, **kwargs)
        except httpx.TransportError as e:
            raise self._not_answering(e) from None
        if r.status_code >= 400:
            raise _error_of(r)
        return r

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return (await self.request(method, path, **kwargs)).json()

    async def read(self, path: str, limit: int, **kwargs: Any) -> tuple[bytes, httpx.Headers, bool]:
        """GET ``path`` but read at most ``limit`` bytes of the body: (those bytes, the headers, whether it was cut).
        The rest of a large body is never downloaded."""
        headers = self.headers()
        try:
            async with self._client() as http, http.stream("GET", path, headers=headers, **kwargs) as r:
                if r.status_code >= 400:
                    await r.aread()
                    raise _error_of(r)
                data = bytearray()
                async for chunk in r.aiter_bytes():
                    data += chunk
                    if len(data) > limit:
                        return bytes(data[:limit]), r.headers, True
                return bytes(data), r.headers, False
        except httpx.TransportError as e:
            raise self._not_answering(e) from None


OWNER_ENV = "LABBOT_OWNER"


def me() -> str:
    """Who the CLI acts as: ``LABBOT_OWNER`` (a Slack user id such as ``U0ALICE01``, so the runs launched here are
    theirs in Slack — their App Home, their pages' DMs), else the login name."""
    return (os.environ.get(OWNER_ENV) or "").strip() or getpass.getuser()
