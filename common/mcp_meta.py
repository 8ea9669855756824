"""Keys labbot puts in its own MCP tools' ``_meta``, read by its agent fleet: one definition for both sides.

``labbot/waits``: the tool exists to wait on the cluster (``lab``'s ``wait_for_run``), so its wait is not the calling
agent's time (``labbot.agents.fleet.waits``). Its value names the tool's argument that bounds the wait, in seconds
(``timeout_s``): the fleet lets such a call run that long on top of the server's usual answer timeout, instead of
cutting a ten-minute wait at the server's one minute. The fleet honours it only from a built-in server.

``labbot/preview``: the tool changes things and another tool of the same server, read-only and taking the same
arguments, says what it would do (``lab``'s ``run_experiment`` and ``plan_experiment``: the trials, runs and projected
cost). The approval gate calls the preview first and shows its answer in the prompt beside the arguments; a preview
that refuses ends the call before anyone is asked. Only a built-in server's tool may name one.
"""

from __future__ import annotations

WAITS_META = "labbot/waits"
WAIT_BOUND_ARG = "timeout_s"
WAITS = {WAITS_META: WAIT_BOUND_ARG}
PREVIEW_META = "labbot/preview"


def previewed_by(tool: str) -> dict[str, str]:
    """The ``_meta`` of a tool whose approval shows what ``tool`` (same server, same arguments) answers."""
    return {PREVIEW_META: tool}
