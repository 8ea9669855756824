"""labbot-client: what a training job imports to report to labbot (telemetry, checkpoints, the retry policy).

Standard library and httpx only; nothing here imports labbot, torch or ray. ``from labbot_client import
telemetry`` is the usual entry point.
"""

__version__ = "0.1.0"
