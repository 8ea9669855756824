"""Research evals: lab tasks for the researcher agent itself — tune a parameter within a budget (scored by regret
against a reference the suite measured), diagnose a planted fault, ask when the honest plan exceeds the budget.

``tasks`` holds the tasks and their scoring (pure); ``reference`` the built-in ``research-tiny-lm`` suite and its
reference, measured by training tiny-lm here; ``policies`` the scripted solvers (``oracle``, ``naive``) that bound what
a model's score means. Running a suite against a labbot — its tools, the simulated owner's approvals, inspect — is
``labbot.bot.research_eval``'s, since it joins the agents and the MCP servers.
"""
