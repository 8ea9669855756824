"""The one Slack Web API client class labbot makes: slack_sdk's ``AsyncWebClient``, every failed call counted.

Every Web API method goes through ``api_call``; a ``SlackApiError`` (Slack answered ``ok: false``, or an HTTP error
after the retry handlers gave up) is reported to the observer as ``(slack, METHOD, ERROR)`` — Slack's error code,
``channel_not_found``, ``ratelimited`` — and a call that got no answer as ``timeout`` or ``connection``; then it is
raised as before. The labels are bounded: methods are the ones labbot calls, error codes are Slack's short
identifiers (anything else is ``other``).
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from labbot.common.observe import NO_OBSERVER, Observer

_ERROR_CODE = re.compile(r"[a-z0-9_.]{1,64}")


def error_label(response: Any) -> str:
    """Slack's error code from a failed answer: ``channel_not_found``; ``http_NNN`` without one; else ``other``."""
    data = getattr(response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    if isinstance(code, str) and _ERROR_CODE.fullmatch(code):
        return code
    status = getattr(response, "status_code", None)
    return f"http_{status}" if isinstance(status, int) else "other"


class ObservedWebClient(AsyncWebClient):
    """``AsyncWebClient`` that tells ``observer`` of every call that failed (see the module docstring)."""

    def __init__(self, *args: Any, observer: Observer = NO_OBSERVER, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.observer = observer

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as e:
            self.observer.api_error("slack", api_method, error_label(e.response))
            raise
        except TimeoutError:
            self.observer.api_error("slack", api_method, "timeout")
            raise
        except (aiohttp.ClientError, OSError):
            self.observer.api_error("slack", api_method, "connection")
            raise
