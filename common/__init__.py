"""labbot.common: the helpers every layer uses — the error tree, durations, human formatting, the retry policy —
and the one client of ``/api/v1`` (``api_client``), shared by the CLI (bot) and the ``lab`` MCP server.

The bottom of labbot: imports nothing from labbot (only ``labbot_client``, which is below everything).
"""
