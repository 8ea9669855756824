"""Evals, the inner loop: delete-and-restore tasks generated from a repository, run sealed, scored by its tests.

- ``sandbox``: a sample's sealed workspace (Linux namespaces through bubblewrap; no Docker engine); ``proxy``: the
  allow-list proxy a sandbox reaches ``[eval] allow_hosts`` through;
- ``suite``: what a generated suite is on disk (tasks, their test lists, the originals kept out of every sandbox);
- ``testrun``: a repository's tests run in a sandbox, each outcome by pytest's node id;
- ``generate`` (with ``coverage_map``, ``delete``, ``venvs``): the task generator; ``generate_job``: it as a Ray job;
- ``isolation``, ``probes`` (``probe_script``), ``seal``: the seal measured, each probe with its evidence;
- ``score``: a sample scored in a fresh pristine copy (only the solver's non-test changes, the original's tests);
- ``tamper``: reward-tampering probes (real cheats, really scored: each must score 0);
- ``inspect_env``: the sandbox as inspect's ``labbot`` sandbox provider; ``solvers``: gold, none, agent, a command;
- ``task``, ``runner``, ``job``: a suite as an inspect task, one run of it (probes, samples, ``results.json``, the
  ``.eval`` log), and the Ray job entrypoint that posts its progress as telemetry;
- ``service``: the control plane's side (suites kept, eval runs launched as runs of the ``eval`` job, results read).
"""
