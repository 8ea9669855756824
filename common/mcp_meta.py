"""Keys labbot puts in its own MCP tools' ``_meta``, read by its agent fleet: one definition for both sides.

``labbot/waits``: the tool exists to wait on the cluster (``lab``'s ``wait_for_run``), so its wait is not the calling
agent's time (``labbot.agents.fleet.waits``). The fleet honours it only from a built-in server.
"""

from __future__ import annotations

WAITS_META = "labbot/waits"
WAITS = {WAITS_META: True}
