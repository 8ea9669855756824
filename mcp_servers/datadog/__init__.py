"""The ``datadog`` MCP server: Datadog's metrics, logs, monitors and events for labbot's agents, over httpx.

One flat namespace; the modules, in the order a call goes through them:

* ``client.py`` — :class:`DatadogApi`: keys and site from the environment (:data:`SITES`, ``DD_API_URL``), every
  request through :class:`labbot.mcp_servers.vendor_http.VendorApi`, Datadog's error answers explained;
* ``window.py`` — ``window="1h"`` / ``end=...`` into unix seconds, with clear errors;
* ``server.py`` — :func:`build_server` and its tools;
* ``summaries.py`` — :func:`summarise_timeseries`, a metric answer downsampled to fit a model's context;
* ``lines.py`` — logs, monitors and events as capped lines;
* ``payloads.py`` — Datadog's full answers kept in the agent's artifact store (``/api/v1/artifacts``).

Imports nothing from bot/ or agents/.
"""

from labbot.mcp_servers.datadog.client import SITES, DatadogApi, base_url_for
from labbot.mcp_servers.datadog.server import build_server
from labbot.mcp_servers.datadog.summaries import summarise_timeseries

__all__ = ["SITES", "DatadogApi", "base_url_for", "build_server", "summarise_timeseries"]
