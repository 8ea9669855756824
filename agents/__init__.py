"""labbot.agents: the two systems that act on labbot's behalf, with no import between them.

``labbot.agents.fleet`` — the LLM fleet: the tool loop over Anthropic models, the MCP client pool, roles,
sessions, delegation, approvals and the audit trail.
``labbot.agents.babysitter`` — the babysitter: the watchdog tick over every run, the pager (incidents,
escalation), the delivery outbox, PagerDuty and the dead-man switch.

Both sit below ``labbot.bot`` and above ``labbot.training``, ``labbot.storage`` and ``labbot.common``, and never
import ``labbot.bot``: Slack delivery and approval prompts go through protocols that bot/ implements
(``babysitter.outbox.Notifier``, ``fleet.approvals.ApprovalPrompter``).
"""
