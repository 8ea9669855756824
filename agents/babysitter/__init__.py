"""labbot.agents.babysitter: the watchdog tick over every run, the pager (incidents and escalation), the delivery
outbox, PagerDuty and the dead-man switch. Rules are pure functions in ``labbot.training.monitoring``; this package
applies them and acts. Never imports ``labbot.agents.fleet``."""
