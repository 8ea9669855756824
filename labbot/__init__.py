"""labbot: a Slack-native research agent bot for ML teams.

One import name, with the system's layers as subpackages (each one of the repository's top-level folders):

    labbot.bot           every front door: Slack, the console, the CLI, HTTP /api/v1; the composition root
    labbot.agents        the LLM fleet (labbot.agents.fleet) and the babysitter (labbot.agents.babysitter)
    labbot.mcp_servers   one MCP server per system: codebase, lab, notion, linear, datadog
    labbot.evals         delete-and-restore eval suites from a repository, run sealed (bubblewrap) on inspect-ai
    labbot.training      job specs, the Ray launcher, telemetry ingest, monitoring rules, reference jobs
    labbot.storage       SQLAlchemy models, Alembic migrations, per-agent artifact stores
    labbot.common        the error tree, durations, human formatting, the retry policy, the /api/v1 client:
                         used by every layer

Dependencies point down that list and never up (``make lint`` checks it). What a training job imports is the
separate ``labbot_client`` distribution.
"""

__version__ = "0.1.0"
