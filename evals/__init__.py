"""Evals, the inner loop: delete-and-restore tasks generated from a repository, run sealed, scored by its tests.

- ``sandbox``: a sample's sealed workspace (Linux namespaces through bubblewrap; no Docker engine);
- ``suite``: what a generated suite is on disk (tasks, their test lists, the originals kept out of every sandbox).
"""
