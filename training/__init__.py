"""Training: job specs and registry, the Ray launcher, the in-job telemetry client and reference jobs.

Sits below ``agents`` and ``bot`` and above ``storage``. Keep this file import-light: ``labbot_client.telemetry`` and
``labbot.training.jobs`` run inside user jobs on cluster nodes, where only the standard library, httpx and torch are
guaranteed.
"""
