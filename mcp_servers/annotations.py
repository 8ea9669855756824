"""The tool annotations of labbot's MCP servers, defined once: every tool of every built-in server carries one of these.

Two hints decide what happens to a call, here and in any MCP client: a tool that is neither ``readOnlyHint`` nor
``destructiveHint: false`` changes things, so labbot's agents run it only after a human approves
(``agents/fleet/mcp_pool.py``) and a read-only server does not offer it (``read_only = true`` in labbot.toml,
``labbot mcp NAME --read-only``: :func:`labbot.mcp_servers.runner.drop_destructive_tools`).

=============  =========  ===========  ==========  =========  =============================================
constant       readOnly   destructive  idempotent  openWorld  for
=============  =========  ===========  ==========  =========  =============================================
READ           yes        no           yes         no         reading labbot or the codebase
WRITE          no         yes          no          no         acting on labbot (launch, stop, ack): approved
ADD            no         no           yes         no         adding to the agent's own artifact store
VENDOR_READ    yes        no           yes         yes        reading Notion, Linear, Datadog
VENDOR_WRITE   no         yes          no          yes        writing to Notion, Linear, Datadog: approved
=============  =========  ===========  ==========  =========  =============================================

``openWorldHint`` says the tool reaches a system outside labbot; the vendor servers' tools do, the ``lab`` and
``codebase`` servers' do not. ``ADD`` is the one write that needs no approval: it only adds to (or shares from) the
calling agent's own store, so it is not destructive, and a read-only ``lab`` server keeps it.
"""

from __future__ import annotations

from mcp.types import ToolAnnotations

__all__ = ["ADD", "ALL", "READ", "VENDOR_READ", "VENDOR_WRITE", "WRITE"]

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
ADD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
VENDOR_READ = READ.model_copy(update={"open_world_hint": True})
VENDOR_WRITE = WRITE.model_copy(update={"open_world_hint": True})
ALL = {"READ": READ, "WRITE": WRITE, "ADD": ADD, "VENDOR_READ": VENDOR_READ, "VENDOR_WRITE": VENDOR_WRITE}
