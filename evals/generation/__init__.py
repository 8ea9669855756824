"""The task generator: a repository's functions deleted one at a time into validated tasks (``generator``, with
``coverage_map`` and ``delete``), and the ``eval-generate`` job that runs it as a labbot run (``job``)."""
