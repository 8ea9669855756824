"""Scoring a sample so it cannot be talked into a pass: ``score`` (a fresh pristine copy, sentinels, hidden tests),
``testrun`` (a repository's tests in a sandbox, every outcome over a channel as it happens) and ``diff_check`` (the
static check of what a solver added)."""
