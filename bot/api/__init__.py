"""The control plane's HTTP surface: ``/healthz``, ``/api/v1`` (CLI, MCP, scripts) and job telemetry."""

from bot.api.app import create_app

__all__ = ["create_app"]
