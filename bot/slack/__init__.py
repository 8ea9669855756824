"""Slack front-end: the Bolt app and what its commands and buttons do, run threads (rendering and upkeep), pages'
Slack messages, agents in threads and the cross-links to Notion and Linear. The console's local Slack is in
``labbot.bot.console``."""
