"""Who may read ``/readyz`` and ``/metrics`` (``/healthz`` says alive and nothing else: anyone may ask it).

They answer anyone only where that is safe or chosen: on a listener bound to a loopback address (``LABBOT_HOST``
``127.0.0.1``, ``::1`` or ``localhost``: nobody else reaches it) or with ``LABBOT_OPEN_PROBES=1``. Elsewhere:

* ``/metrics`` needs ``Authorization: Bearer <LABBOT_METRICS_TOKEN>`` (with that token set it needs it everywhere,
  loopback included, as it always has);
* ``/readyz`` gives its detail (the checks, the replica's role and name, the leader's) to a caller with the metrics
  token. Without the token a caller gets the verdict only — the status code and ``{"ok": …}``, all a kubelet's
  probe or a load balancer reads, and nothing a manifest would have to hold a secret for.

A labbot bound beyond loopback with neither setting answers both with 401 naming the settings that fix it: the
operator chooses between a token and open probes, rather than finding out later what was open.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from enum import Enum

from starlette.requests import Request
from starlette.responses import JSONResponse

from labbot.bot.api.auth import bearer
from labbot.bot.web.errors import error_response

__all__ = ["METRICS_TOKEN_ENV", "OPEN_PROBES_ENV", "REFUSE_ANONYMOUS", "ProbeAccess", "Readiness", "is_loopback"]

METRICS_TOKEN_ENV = "LABBOT_METRICS_TOKEN"
OPEN_PROBES_ENV = "LABBOT_OPEN_PROBES"
_UNCONFIGURED = (
    f"this labbot listens beyond localhost (LABBOT_HOST), so {{route}} needs a token: set {METRICS_TOKEN_ENV} and "
    f"send it as Authorization: Bearer <token>{{status_only}}, or set {OPEN_PROBES_ENV}=1 to answer anyone who "
    "reaches the port"
)


class Readiness(Enum):
    """What ``/readyz`` shows a caller: everything, the verdict only, or a 401."""

    DETAIL = "detail"
    VERDICT = "verdict"
    REFUSED = "refused"


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable only from this machine: a loopback IP (``127.0.0.0/8``, ``::1``, in
    brackets or not) or ``localhost``. Any other name counts as reachable (it may resolve anywhere)."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ProbeAccess:
    """The rule for ``/readyz`` and ``/metrics`` (see the module docstring). ``token`` is ``LABBOT_METRICS_TOKEN``;
    ``open`` says an anonymous caller may read them: the listener is on loopback, or ``LABBOT_OPEN_PROBES`` is set.
    The default, neither, refuses an anonymous caller both."""

    token: str | None = None
    open: bool = False

    @classmethod
    def for_bind(cls, host: str, *, token: str | None, open_probes: bool) -> ProbeAccess:
        """The rule of a labbot whose HTTP server binds ``host`` (``Settings.host``)."""
        return cls(token=token or None, open=open_probes or is_loopback(host))

    def _has_token(self, request: Request) -> bool:
        given = bearer(request)
        return self.token is not None and given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def metrics(self, request: Request) -> JSONResponse | None:
        """``None`` when ``request`` may read ``/metrics``, else the 401 to answer it with."""
        if self.token is not None:
            if self._has_token(request):
                return None
            return error_response(401, "unauthorized", f"missing or wrong metrics token: {METRICS_TOKEN_ENV}")
        if self.open:
            return None
        return error_response(401, "unauthorized", _UNCONFIGURED.format(route="/metrics", status_only=""))

    def readiness(self, request: Request) -> Readiness:
        """How much of ``/readyz`` ``request`` may see."""
        if self.open or self._has_token(request):
            return Readiness.DETAIL
        if self.token is not None:
            return Readiness.VERDICT
        return Readiness.REFUSED

    @staticmethod
    def refused_readiness() -> JSONResponse:
        """The 401 of ``/readyz`` on a listener beyond loopback with neither setting."""
        status_only = " (without it, /readyz still answers its status code: what a kubelet's probe needs)"
        return error_response(401, "unauthorized", _UNCONFIGURED.format(route="/readyz", status_only=status_only))


REFUSE_ANONYMOUS = ProbeAccess()
"""Neither a token nor open probes: anonymous callers get 401 from both routes (``create_app``'s default)."""
