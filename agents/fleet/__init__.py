"""labbot.agents.fleet: the LLM fleet — Anthropic tool loop, MCP client pool, roles, sessions, delegation,
approvals and audit. Never imports ``labbot.agents.babysitter``."""
