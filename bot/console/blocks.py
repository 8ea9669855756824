"""Block Kit limits the local Slack emulator enforces, the way Slack's Web API rejects messages.

`block_errors(blocks)` returns Slack-style messages ("must be less than 3001 characters
[json-pointer:/blocks/0/text/text]"); a non-empty list means Slack answers ``invalid_blocks``. The limits are
Slack's documented ones (Block Kit reference): 50 blocks a message, 3,000 characters of section text, 2,000 per
section field and at most 10 fields, 150 for a header, 12,000 for all ``markdown`` blocks together, 10 context
elements, 25 actions elements, 5 context_actions elements (feedback buttons: both buttons, each with text and
value), 75 characters of button text, unique ``block_id``s and per-block ``action_id``s. Used by
`labbot.bot.console.workspace`; labbot's renderer must stay within the same limits.
"""

from __future__ import annotations

from typing import Any

MAX_BLOCKS = 50
VIEW_MAX_BLOCKS = 100
"""A home tab or modal (views.publish, views.open) holds up to 100 blocks; a message 50."""
SECTION_TEXT_MAX = 3000
SECTION_FIELD_MAX = 2000
SECTION_FIELDS_MAX = 10
HEADER_TEXT_MAX = 150
MARKDOWN_TOTAL_MAX = 12000
CONTEXT_ELEMENTS_MAX = 10
ACTIONS_ELEMENTS_MAX = 25
CONTEXT_ACTIONS_ELEMENTS_MAX = 5
BUTTON_TEXT_MAX = 75
ID_MAX = 255
BUTTON_VALUE_MAX = 2000
URL_MAX = 3000
IMAGE_ALT_MAX = 2000

MESSAGE_TEXT_MAX = 40000
"""chat.postMessage/update: longer ``text`` is refused with ``msg_too_long``."""
MAX_ATTACHMENTS = 100

BLOCK_TYPES = frozenset(
    {
        "actions",
        "context",
        "context_actions",
        "divider",
        "file",
        "header",
        "image",
        "input",
        "markdown",
        "rich_text",
        "section",
        "table",
        "video",
    }
)
TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})


def block_errors(blocks: Any, *, max_blocks: int = MAX_BLOCKS) -> list[str]:
    """Every violation of Slack's Block Kit rules in a message's ``blocks`` (a view's: ``max_blocks`` 100); empty
    when Slack would accept them."""
    errors: list[str] = []
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    if len(blocks) > max_blocks:
        errors.append(f"no more than {max_blocks} items allowed [json-pointer:/blocks]")
    block_ids: set[str] = set()
    markdown_total = 0
    for i, block in enumerate(blocks):
        at = f"/blocks/{i}"
        if not isinstance(block, dict):
            errors.append(f"must be an object [json-pointer:{at}]")
            continue
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            errors.append(f"unsupported type: {kind} [json-pointer:{at}/type]")
            continue
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or not 0 < len(block_id) <= ID_MAX:
                errors.append(f"must be a string of 1 to {ID_MAX} characters [json-pointer:{at}/block_id]")
            elif block_id in block_ids:
                errors.append(f"duplicate block_id {block_id} [json-pointer:{at}/block_id]")
            else:
                block_ids.add(block_id)
        if kind == "section":
            errors += _section_errors(block, at)
        elif kind == "header":
            errors += _text_errors(block.get("text"), f"{at}/text", HEADER_TEXT_MAX, types=frozenset({"plain_text"}))
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text:
                errors.append(f"must be a non-empty string [json-pointer:{at}/text]")
            else:
                markdown_total += len(text)
                if markdown_total > MARKDOWN_TOTAL_MAX:
                    errors.append(
                        f"markdown blocks must total less than {MARKDOWN_TOTAL_MAX + 1} characters "
                        f"[json-pointer:{at}/text]"
                    )
        elif kind == "context":
            errors += _count_errors(block.get("elements"), f"{at}/elements", CONTEXT_ELEMENTS_MAX)
            for j, element in enumerate(block.get("elements") or []):
                if isinstance(element, dict) and element.get("type") in TEXT_TYPES:
                    errors += _text_errors(element, f"{at}/elements/{j}", SECTION_TEXT_MAX)
        elif kind == "actions":
            errors += _count_errors(block.get("elements"), f"{at}/elements", ACTIONS_ELEMENTS_MAX)
            action_ids: set[str] = set()
            for j, element in enumerate(block.get("elements") or []):
                errors += _element_errors(element, f"{at}/elements/{j}", action_ids)
        elif kind == "context_actions":
            errors += _count_errors(block.get("elements"), f"{at}/elements", CONTEXT_ACTIONS_ELEMENTS_MAX)
            action_ids = set()
            for j, element in enumerate(block.get("elements") or []):
                errors += _element_errors(element, f"{at}/elements/{j}", action_ids)
                if isinstance(element, dict) and element.get("type") not in ("feedback_buttons", "icon_button"):
                    errors.append(f"must be feedback_buttons or icon_button [json-pointer:{at}/elements/{j}/type]")
        elif kind == "image":
            if not block.get("image_url") and not block.get("slack_file"):
                errors.append(f"must provide image_url or slack_file [json-pointer:{at}]")
            alt = block.get("alt_text")
            if not isinstance(alt, str) or not 0 < len(alt) <= IMAGE_ALT_MAX:
                errors.append(f"must be a string of 1 to {IMAGE_ALT_MAX} characters [json-pointer:{at}/alt_text]")
    return errors


def _section_errors(block: dict[str, Any], at: str) -> list[str]:
    errors: list[str] = []
    text, fields = block.get("text"), block.get("fields")
    if text is None and not fields:
        return [f"must provide text or fields [json-pointer:{at}]"]
    if text is not None:
        errors += _text_errors(text, f"{at}/text", SECTION_TEXT_MAX)
    if fields is not None:
        errors += _count_errors(fields, f"{at}/fields", SECTION_FIELDS_MAX)
        for j, item in enumerate(fields if isinstance(fields, list) else []):
            errors += _text_errors(item, f"{at}/fields/{j}", SECTION_FIELD_MAX)
    accessory = block.get("accessory")
    if accessory is not None:
        errors += _element_errors(accessory, f"{at}/accessory", set())
    return errors


def _text_errors(obj: Any, at: str, limit: int, *, types: frozenset[str] = TEXT_TYPES) -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in types:
        return [f"must be a text object of type {' or '.join(sorted(types))} [json-pointer:{at}]"]
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        return [f"must be more than 0 characters [json-pointer:{at}/text]"]
    if len(text) > limit:
        return [f"must be less than {limit + 1} characters [json-pointer:{at}/text]"]
    return []


def _count_errors(items: Any, at: str, limit: int) -> list[str]:
    if not isinstance(items, list) or not items:
        return [f"must be a non-empty array [json-pointer:{at}]"]
    if len(items) > limit:
        return [f"no more than {limit} items allowed [json-pointer:{at}]"]
    return []


def _element_errors(element: Any, at: str, action_ids: set[str]) -> list[str]:
    """Interactive elements: unique ``action_id`` within the block; buttons' text, value and url limits."""
    if not isinstance(element, dict) or not isinstance(element.get("type"), str):
        return [f"must be an element object [json-pointer:{at}]"]
    errors: list[str] = []
    action_id = element.get("action_id")
    if action_id is not None:
        if not isinstance(action_id, str) or not 0 < len(action_id) <= ID_MAX:
            errors.append(f"must be a string of 1 to {ID_MAX} characters [json-pointer:{at}/action_id]")
        elif action_id in action_ids:
            errors.append(f"duplicate action_id {action_id} [json-pointer:{at}/action_id]")
        else:
            action_ids.add(action_id)
    if element["type"] == "feedback_buttons":
        for side in ("positive_button", "negative_button"):
            button = element.get(side)
            if not isinstance(button, dict):
                errors.append(f"must provide {side} [json-pointer:{at}/{side}]")
                continue
            errors += _text_errors(
                button.get("text"), f"{at}/{side}/text", BUTTON_TEXT_MAX, types=frozenset({"plain_text"})
            )
            value = button.get("value")
            if not isinstance(value, str) or not 0 < len(value) <= BUTTON_VALUE_MAX:
                errors.append(
                    f"must be a string of 1 to {BUTTON_VALUE_MAX} characters [json-pointer:{at}/{side}/value]"
                )
    if element["type"] == "button":
        errors += _text_errors(element.get("text"), f"{at}/text", BUTTON_TEXT_MAX, types=frozenset({"plain_text"}))
        value = element.get("value")
        if value is not None and (not isinstance(value, str) or len(value) > BUTTON_VALUE_MAX):
            errors.append(f"must be less than {BUTTON_VALUE_MAX + 1} characters [json-pointer:{at}/value]")
        url = element.get("url")
        if url is not None and (not isinstance(url, str) or len(url) > URL_MAX):
            errors.append(f"must be less than {URL_MAX + 1} characters [json-pointer:{at}/url]")
    return errors
