"""Keys labbot puts in its own MCP tools' ``_meta``, read by its agent fleet: one definition for both sides.

``labbot/waits``: the tool exists to wait on the cluster (``lab``'s ``wait_for_run``), so its wait is not the calling
agent's time (``labbot.agents.fleet.waits``). Its value names the tool's argument that bounds the wait, in seconds
(``timeout_s``): the fleet lets such a call run that long on top of the server's usual answer timeout, instead of
cutting a ten-minute wait at the server's one minute. The fleet honours it only from a built-in server.
"""

from __future__ import annotations

WAITS_META = "labbot/waits"
WAIT_BOUND_ARG = "timeout_s"
WAITS = {WAITS_META: WAIT_BOUND_ARG}
