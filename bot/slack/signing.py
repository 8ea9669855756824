"""Slack request signing (v0 HMAC-SHA256): the console and the tests sign what they send the Bolt app, exactly
as Slack does, so the same verification path runs everywhere."""

from __future__ import annotations

import time

from slack_sdk.signature import SignatureVerifier


def signed_headers(body: str, secret: str, *, timestamp: int | None = None, content_type: str) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature, "Content-Type": content_type}
