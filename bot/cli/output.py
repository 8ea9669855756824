"""What a command leaves with: one JSON document on stdout (``--json``: :func:`print_json`), or a message for the user
and the exit code to leave with (:class:`CLIError`; ``labbot.bot.cli.main.main`` prints it)."""

from __future__ import annotations

import json
from typing import Any


class CLIError(Exception):
    """Something to tell the user, with the exit code to leave with (2: bad input, 1: it failed)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2))
