"""The assistant container's suggested prompts: what labbot offers to be asked when a researcher opens it
(``assistant_thread_started`` → ``assistant.threads.setSuggestedPrompts``). A workspace without the assistant
feature refuses the call; that is logged and nothing else changes."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

TITLE = "Ask labbot about your experiments:"
PROMPTS: tuple[dict[str, str], ...] = (
    {"title": "Why is my latest run slow?", "message": "why is my latest run slow?"},
    {"title": "Compare my last two runs", "message": "compare my last two runs"},
    {"title": "What failed overnight?", "message": "did any of my runs fail or page overnight, and why?"},
    {"title": "Is the loss still falling?", "message": "is the loss of my latest run still falling?"},
)
"""At most four: Slack shows no more."""


async def suggested_prompts(client: AsyncWebClient, thread: dict[str, Any]) -> bool:
    """Offer ``PROMPTS`` in the assistant thread ``thread`` (the event's ``assistant_thread``); True when set."""
    try:
        await client.assistant_threads_setSuggestedPrompts(
            channel_id=str(thread["channel_id"]), thread_ts=str(thread["thread_ts"]), title=TITLE, prompts=list(PROMPTS)
        )
        return True
    except SlackApiError as e:
        log.info("suggested prompts refused: %s", e.response.get("error"))
        return False
