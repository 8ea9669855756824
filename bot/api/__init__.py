"""The control plane's HTTP surface: ``/healthz``, ``/api/v1`` (CLI, MCP, scripts) and job telemetry."""

from labbot.bot.api.app import create_app

__all__ = ["create_app"]
