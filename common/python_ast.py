"""``ast.parse`` safe to call from several threads at once.

CPython 3.11 before 3.11.8 keeps the AST constructor's recursion depth in state shared by every thread, so two
threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905).
The seal's tamper probes score their cheats on a thread pool, and scoring parses Python: one such failure made a probe
"could not run" in a test run. Every parse in labbot's eval code goes through :func:`parse_python`, one at a time per
process (a parse takes micro- to milliseconds; nothing waits long).
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse_python(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename)
