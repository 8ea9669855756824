"""Training: job specs and registry, the run service, the Ray launcher, telemetry ingest, the watchdog's rules and
the reference jobs.

Sits below ``agents`` and ``bot`` and above ``storage``. Keep this file import-light: ``labbot.training.jobs`` runs
inside jobs on cluster nodes, where only the standard library, httpx, ``labbot_client`` and torch are guaranteed.
"""
