"""Reference training jobs that ship with labbot: ``tiny-lm`` (``tiny_lm.py``) and ``tiny-rl`` (the package
``tiny_rl/``), run as ``python -m labbot.training.jobs.tiny_lm`` and ``python -m labbot.training.jobs.tiny_rl``.
They share the small transformer (``model.py``), the command line from a config dataclass (``flags.py``) and the
loop's pacing, injected hang and SIGTERM exit (``runtime.py``). They import only ``labbot_client``, this package, the
standard library and their framework, never the control plane (docs/recipes/add-a-job.md)."""
