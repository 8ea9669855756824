"""What labbot shows in Slack about a run, as pure functions: Block Kit for the run card, progress lines, restarts
and the summary, and Block Kit's size limits with the splitter that respects them.

The thread keeper (``bot/slack/threads.py``) and the command handlers post what these return; nothing here talks
to Slack.
"""

from labbot.bot.slack.blocks.limits import (
    MAX_BLOCKS,
    MAX_MESSAGE_TEXT,
    MAX_SECTION_TEXT,
    fits_in_messages,
    split_sections,
    text_blocks,
)
from labbot.bot.slack.blocks.posts import (
    ephemeral_error,
    launch_confirmation,
    progress_text,
    restart_text,
    summary_blocks,
)
from labbot.bot.slack.blocks.run_card import escape, eta_seconds, mention, run_card

__all__ = [
    "MAX_BLOCKS",
    "MAX_MESSAGE_TEXT",
    "MAX_SECTION_TEXT",
    "ephemeral_error",
    "escape",
    "eta_seconds",
    "fits_in_messages",
    "launch_confirmation",
    "mention",
    "progress_text",
    "restart_text",
    "run_card",
    "split_sections",
    "summary_blocks",
    "text_blocks",
]
