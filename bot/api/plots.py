"""A run's plots at capability URLs, for documents outside Slack that embed images by URL (the run's Notion
report: Notion's API takes an image as an external URL).

``GET /plots/{run_id}/IMAGE.png?sig=SIG`` needs no admin token: ``SIG``, an HMAC-SHA256 of the image and the run id
under a key derived from the admin token, is the permission, and it grants nothing but that one PNG of that run
(rendered afresh from the run's telemetry, so the image follows the run). ``IMAGE`` is ``loss`` (the loss curve,
the links labbot has always made) or ``metrics`` (the metrics the run's job plots, one panel each, as in its Slack
thread). A wrong or missing signature is 403, the same whether or not the run exists; a malformed one (not 32 hex
digits) is 400, saying so. Links are only made when ``LABBOT_PUBLIC_URL`` is not a loopback address: a report's
readers must be able to reach it. The images are ``labbot.bot.render.plots``', as in the run's Slack thread.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from urllib.parse import urlparse

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps, blocking
from labbot.bot.render.plots import loss_plot_png, metrics_plot_png
from labbot.bot.web.errors import error_response, from_exception

__all__ = [
    "PLOT_IMAGES",
    "SIGNATURE_HEX",
    "plot_signature",
    "plot_url",
    "reachable_by_others",
    "routes",
    "signature_ok",
    "well_formed_signature",
]

_PURPOSE = b"labbot plot links v1"
SIGNATURE_HEX = 32  # a signature is this many lowercase hex digits
_HEX = frozenset("0123456789abcdef")
PLOT_IMAGES = ("loss", "metrics")  # the images a link may name; "loss" links are in documents already


def _key(secret: str) -> bytes:
    return hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest()  # not the admin token itself


def plot_signature(secret: str, run_id: str, image: str = "loss") -> str:
    """The signature of one image of one run (``loss`` signs as it always has, so old links keep working)."""
    return hmac.new(_key(secret), f"{image}:{run_id}".encode(), hashlib.sha256).hexdigest()[:SIGNATURE_HEX]


def well_formed_signature(sig: str) -> bool:
    """Whether ``sig`` could be a signature at all (its length and alphabet): a malformed one is a bad link."""
    return len(sig) == SIGNATURE_HEX and set(sig) <= _HEX


def signature_ok(secret: str, run_id: str, sig: str | None, image: str = "loss") -> bool:
    """Whether ``sig`` signs ``image`` of ``run_id``. Compared as bytes: ``hmac.compare_digest`` raises TypeError on
    a str with non-ASCII characters (``?sig=é``), and a malformed signature is a wrong one (403), not a 500."""
    if not sig:
        return False
    expected = plot_signature(secret, run_id, image).encode()
    return hmac.compare_digest(expected, str(sig).encode("utf-8", "surrogatepass"))


def reachable_by_others(public_url: str) -> bool:
    """Whether ``LABBOT_PUBLIC_URL`` could be reached from someone else's browser (not localhost / 127.x / ::1)."""
    host = (urlparse(public_url).hostname or "").lower()
    if not host or host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a name: someone's DNS resolves it


def plot_url(public_url: str, secret: str, run_id: str, image: str = "loss") -> str | None:
    """A link to one of the run's plots (``PLOT_IMAGES``) for a document, or None when nobody else could open it."""
    if image not in PLOT_IMAGES:
        raise ValueError(f"no plot image {image!r}; there are {', '.join(PLOT_IMAGES)}")
    if not reachable_by_others(public_url):
        return None
    sig = plot_signature(secret, run_id, image)
    return f"{public_url.rstrip('/')}/plots/{run_id}/{image}.png?sig={sig}"


def routes(deps: ApiDeps) -> list[Route]:
    """``/plots/{run_id}/loss.png`` and ``/plots/{run_id}/metrics.png``, each behind its signature."""
    return [
        Route("/plots/{run_id}/loss.png", _signed_plot(deps, "loss")),
        Route("/plots/{run_id}/metrics.png", _signed_plot(deps, "metrics")),
    ]


def _signed_plot(deps: ApiDeps, image: str) -> Callable[[Request], Awaitable[Response]]:
    """The route of one of a run's plot images (``PLOT_IMAGES``), its signature checked."""
    service, telemetry = deps.service, deps.telemetry

    async def plot(request: Request) -> Response:
        run_id, sig = request.path_params["run_id"], request.query_params.get("sig")
        if sig and not well_formed_signature(sig):  # the format is no secret: say what is wrong (400)
            return error_response(
                400,
                "bad_request",
                f"the plot link's sig={sig[:40]!r} is not {SIGNATURE_HEX} hex digits: copy the "
                "whole link, or ask labbot for a new one",
            )
        if not signature_ok(deps.admin_token, run_id, sig, image):
            return JSONResponse(
                {"error": {"code": "forbidden", "message": "this plot link is not valid: ask labbot for a new one"}},
                status_code=403,
            )
        try:
            run = await blocking(service.get, run_id)
        except Exception as e:
            return from_exception(e)
        starts = await blocking(telemetry.attempt_starts, run_id)
        if image == "loss":
            points = await blocking(telemetry.metrics, run_id, "loss")
            png = await blocking(loss_plot_png, points, title=f"{run['name']} — loss", attempts=starts)
        else:
            names = list(run["plot"])
            series = await blocking(telemetry.series, run_id, names)
            title = f"{run['name']} — {', '.join(names)}"
            png = await blocking(metrics_plot_png, series, title=title, attempts=starts)
        return Response(png, media_type="image/png", headers={"Cache-Control": "max-age=300"})

    return plot
