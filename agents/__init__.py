"""agents: the agent runtime, fleet, approvals, babysitter and pager (built in later issues).

Sits between ``bot`` and ``training``/``storage``; never imports ``bot``.
"""
