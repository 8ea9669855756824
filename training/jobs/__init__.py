"""Reference training jobs that ship with labbot (``tiny-lm``). They import only ``labbot_client``, the standard
library and their framework, never the control plane (docs/recipes/add-a-job.md)."""
