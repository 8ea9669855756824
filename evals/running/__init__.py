"""One eval run of a suite: ``runner`` (the seal alongside every sample through inspect, then ``results.json``),
``task`` (the suite as an inspect task), ``solvers`` and ``solver_access`` (who solves, with what), and the ``eval``
job that runs it on the cluster (``job``)."""
