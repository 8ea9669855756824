"""labbot.bot: every front door of labbot — Slack (``slack``), the ``/lab`` command registry (``commands``), the HTTP
``/api/v1`` (``api``), the CLI (``cli``), the console and its local Slack (``console``) — and the composition root
that wires storage, training, agents and the MCP servers together (``serve``, ``agents_wiring``). Nothing below
imports from here."""
