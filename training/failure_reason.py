"""Why an attempt failed, in one line a person reads: the exception's last line, not Ray's envelope.

Ray reports a failed entrypoint as ``JOB_ENTRYPOINT_COMMAND_ERROR`` with the message ``Job entrypoint command failed
with exit code 1, last available logs (truncated to 20,000 chars):`` and the job's last ten log lines. Shown as is,
a run's error, a page's summary and ``labbot pages`` were that envelope cut before the traceback's end. ``reason``
finds what a researcher looks for — the last traceback's exception line (``ValueError: loss is nan``), else the log's
last line — and says the exit code (or the signal) after it. Pure: the callers keep Ray's whole message as detail.
"""

from __future__ import annotations

import re
import signal

_ENVELOPE = re.compile(r"^Job entrypoint command failed with exit code (-?\d+)(?:, last available logs[^\n]*|\.[^\n]*)")
_TRACEBACK = "Traceback (most recent call last):"
# "ValueError: x", "pkg.mod.Diverged: x", "KeyboardInterrupt": a dotted name at the start of an unindented line
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*|:)?$")
MAX_CHARS = 300


def reason(error_type: str | None, message: str | None) -> str:
    """One line: the failure's cause with its exit code, e.g. ``ValueError: loss is nan (exit code 1)``."""
    text = (message or "").strip()
    envelope = _ENVELOPE.match(text)
    code = int(envelope.group(1)) if envelope else None
    logs = text[envelope.end() :] if envelope else text
    said = _exit(code) if code is not None else (error_type or "")
    found = exception_line(logs)
    if found is None and code is not None and code < 0 and _last_line(logs):
        return _short(f"{said}; the log's last line: {_last_line(logs)}")  # a kill is the cause, not a log line
    cause = found or _last_line(logs)
    if not cause:
        return _short(said or "no reason given")
    if envelope is None:  # another error of Ray's (the runtime env, the supervisor): its type names it
        return _short(f"{error_type}: {cause}" if error_type else cause)
    return _short(f"{cause} ({said})")


def exception_line(logs: str) -> str | None:
    """The exception line of the last Python traceback in ``logs`` (its first unindented line after the frames),
    or None when the logs hold no traceback."""
    lines = logs.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK]
    if not starts:
        return None
    for line in lines[starts[-1] + 1 :]:
        if not line.strip() or line[:1].isspace():
            continue  # a frame ("  File ...", its source line, a caret line)
        if _EXCEPTION_LINE.match(line.strip()):
            return line.strip()
    return None


def _last_line(logs: str) -> str:
    lines = [line.strip() for line in logs.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _exit(code: int) -> str:
    if code < 0:  # Ray reports a process killed by a signal as its negative number
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
