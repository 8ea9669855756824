"""A Slack Web API fake in its own process for benchmarks, so serving labbot's calls does not share the load
generator's interpreter. Prints its base URL and bot token on one line, then serves until killed."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from labbot.bot.console.emulator import SlackEmulator  # noqa: E402

emulator = SlackEmulator()
print(emulator.start(), emulator.bot_token, emulator.team_id, emulator.app_id, emulator.default_channel, flush=True)
threading.Event().wait()
