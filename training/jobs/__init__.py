"""Reference training jobs that ship with labbot (``tiny-lm``; later ``rl``)."""
