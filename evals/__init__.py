"""Evals, the inner loop: delete-and-restore tasks generated from a repository, run sealed, scored by its tests.

One subpackage per concept, and the control plane's side on top:

- ``suite``: what a generated suite is on disk (tasks, their test lists, the originals kept out of every sandbox), the
  contract between the generator, the runner and the CLI; ``stats``: pass-rate intervals, paired comparisons,
  saturation (pure);
- ``sandbox/``: a sample's sealed workspace — ``bwrap`` (Linux namespaces through bubblewrap, no Docker; limits),
  ``cgroup`` (the sample's processes and memory), ``proxy`` (the allow-list proxy, the one way out), ``venvs`` (the
  task's venv, built offline inside a sandbox from the suite's wheels), ``inspect_provider`` (the sandbox as inspect's
  ``labbot`` sandbox provider);
- ``generation/``: the task generator — ``generator`` (a repository in, a validated suite out), ``coverage_map`` (which
  tests run which function), ``delete`` (a feature deleted, a canary planted), ``job`` (the ``eval-generate`` job);
- ``scoring/``: a sample scored so it cannot be talked into a pass — ``score`` (a fresh pristine copy, sentinels, hidden
  tests), ``testrun`` (tests run in a sandbox, each outcome sent over a channel as it happens), ``diff_check`` (the
  static check of a solver's lines);
- ``seal/``: the seal, measured — ``battery`` (one run's probes, as one report), ``report`` (each probe's verdict and
  evidence, the isolation score), ``leak_probes`` (every way to read the answer, tried from inside a sandbox; the
  script they run there is ``leak_probe_script``), ``contamination`` (the deleted code looked for by content, by the
  ``contamination_walk`` script), ``tamper_probes`` (real cheats, really scored), ``cache`` (passing verdicts kept);
- ``running/``: one eval run — ``runner`` (the seal alongside every sample, ``results.json``), ``task`` (a suite as an
  inspect task), ``solvers`` (gold, none, a command, inspect's agent), ``solver_access`` (what a command solver may be
  given: a folder, hosts, secrets), ``job`` (the ``eval`` job);
- ``incidents/``: the lab's own incidents and 👎 feedback as eval cases — ``cases`` (a case, its prompts and the judge's
  verdict, pure), ``runner`` and ``job`` (the ``eval-incidents`` job); ``page_cases`` and ``feedback_cases`` freeze
  cases from the database (the control plane's);
- ``service``: the control plane's side (suites kept, eval runs launched as runs of the ``eval`` jobs, results read,
  cases frozen).

Everything but ``service``, ``incidents.page_cases`` and ``incidents.feedback_cases`` may run on a cluster node or in
an eval job, and imports nothing of the control plane's storage (an import-linter contract, pyproject.toml).
"""
