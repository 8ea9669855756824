"""``python -m labbot.training.jobs.tiny_rl [flags]``: the job, as labbot launches it (``cli.py``)."""

import sys

from labbot.training.jobs.tiny_rl.cli import main

if __name__ == "__main__":
    sys.exit(main())
