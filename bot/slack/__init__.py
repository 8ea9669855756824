"""Slack front-end: the Bolt app, the Web API emulator (console mode), thread rendering and upkeep."""
