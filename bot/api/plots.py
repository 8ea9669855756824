"""A run's loss plot at a capability URL, for documents outside Slack that embed images by URL (the run's Notion
report: Notion's API takes an image as an external URL).

``GET /plots/{run_id}/loss.png?sig=SIG`` needs no admin token: ``SIG``, an HMAC-SHA256 of the run id under a key
derived from the admin token, is the permission, and it grants nothing but that one PNG (rendered afresh from the
run's telemetry, so the report's image follows the run). A wrong or missing signature is 403, the same whether or
not the run exists; a malformed one (not 32 hex digits) is 400, saying so. Links are only made when
``LABBOT_PUBLIC_URL`` is not a loopback address: a report's readers must be able to reach it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from urllib.parse import urlparse

__all__ = [
    "SIGNATURE_HEX",
    "plot_signature",
    "plot_url",
    "reachable_by_others",
    "signature_ok",
    "well_formed_signature",
]

_PURPOSE = b"labbot plot links v1"
SIGNATURE_HEX = 32  # a signature is this many lowercase hex digits
_HEX = frozenset("0123456789abcdef")


def _key(secret: str) -> bytes:
    return hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest()  # not the admin token itself


def plot_signature(secret: str, run_id: str) -> str:
    return hmac.new(_key(secret), f"loss:{run_id}".encode(), hashlib.sha256).hexdigest()[:SIGNATURE_HEX]


def well_formed_signature(sig: str) -> bool:
    """Whether ``sig`` could be a signature at all (its length and alphabet): a malformed one is a bad link."""
    return len(sig) == SIGNATURE_HEX and set(sig) <= _HEX


def signature_ok(secret: str, run_id: str, sig: str | None) -> bool:
    """Whether ``sig`` signs ``run_id``. Compared as bytes: ``hmac.compare_digest`` raises TypeError on a str
    with non-ASCII characters (``?sig=é``), and a malformed signature is a wrong one (403), not a 500."""
    if not sig:
        return False
    return hmac.compare_digest(plot_signature(secret, run_id).encode(), str(sig).encode("utf-8", "surrogatepass"))


def reachable_by_others(public_url: str) -> bool:
    """Whether ``LABBOT_PUBLIC_URL`` could be reached from someone else's browser (not localhost / 127.x / ::1)."""
    host = (urlparse(public_url).hostname or "").lower()
    if not host or host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a name: someone's DNS resolves it


def plot_url(public_url: str, secret: str, run_id: str) -> str | None:
    """The run's loss plot link for a document, or None when nobody else could open it."""
    if not reachable_by_others(public_url):
        return None
    return f"{public_url.rstrip('/')}/plots/{run_id}/loss.png?sig={plot_signature(secret, run_id)}"
