"""bot: every front door of labbot — the CLI, the HTTP ``/api/v1`` (and later Slack and the console) — and the
composition root that wires storage, training and agents together. Nothing below imports from here."""
