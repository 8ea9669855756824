"""Why an attempt failed, in one line a person reads: the exception's last line, not Ray's envelope.

Ray reports a failed entrypoint as ``JOB_ENTRYPOINT_COMMAND_ERROR`` with the message ``Job entrypoint command failed
with exit code 1, last available logs (truncated to 20,000 chars):`` and the job's last ten log lines. Shown as is,
a run's error, a page's summary and ``labbot pages`` were that envelope cut before the traceback's end. ``reason``
finds what a researcher looks for — the last traceback's exception line (``ValueError: loss is nan``), else the log's
last line — and says the exit code (or the signal) after it. Pure: the callers keep Ray's whole message as detail.

An attempt whose node was lost is not the job's failure: Ray reports it as ``JOB_SUPERVISOR_ACTOR_DIED`` with "The
actor died because its node has died. Node Id: …" (the node's raylet stopped answering the GCS's health checks, or
the node was removed). :func:`lost_node` reads that — the node's id, its IP and Ray's reason — so the watchdog
restarts the run elsewhere without spending the job's own restarts.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

_ENVELOPE = re.compile(r"^Job entrypoint command failed with exit code (-?\d+)(?:, last available logs[^\n]*|\.[^\n]*)")
_TRACEBACK = "Traceback (most recent call last):"
# "ValueError: x", "pkg.mod.Diverged: x", "KeyboardInterrupt": a dotted name at the start of an unindented line
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*|:)?$")
MAX_CHARS = 300


SUPERVISOR_DIED = "JOB_SUPERVISOR_ACTOR_DIED"
_NODE_DIED = re.compile(r"because its node has died\.?\s*Node Id:\s*([0-9a-fA-F]{8,})")
_NODE_IP = re.compile(r"^\s*ip:\s*(\S+)\s*$", re.MULTILINE)
_NODE_WHY = re.compile(r"node was terminated unexpectedly:\s*([^\n]+)|node was (?:drained|terminated)[^\n]*")


@dataclass(frozen=True)
class LostNode:
    """The node an attempt ran on, lost under it: Ray's node id, the node's IP, and Ray's words for why."""

    node_id: str
    ip: str | None = None
    why: str | None = None

    @property
    def short_id(self) -> str:
        return self.node_id[:8]

    def words(self) -> str:
        """``192.0.2.7 (node 3f2a9c1d)``: how a thread names the node."""
        return f"{self.ip} (node {self.short_id})" if self.ip else f"node {self.short_id}"


def lost_node(error_type: str | None, message: str | None) -> LostNode | None:
    """The node whose loss failed this attempt (Ray's job supervisor died with its node), or None: the attempt
    failed for another reason (its own exit code, a runtime env, a supervisor that died on a live node)."""
    text = message or ""
    found = _NODE_DIED.search(text)
    if found is None or (error_type not in (None, SUPERVISOR_DIED)):
        return None
    ip = _NODE_IP.search(text[: found.start()])
    why = _NODE_WHY.search(text[found.end() :])
    said = (why.group(1) or why.group(0)).strip() if why else None
    return LostNode(found.group(1).lower(), ip.group(1) if ip else None, _short(said) if said else None)


def reason(error_type: str | None, message: str | None) -> str:
    """One line: the failure's cause with its exit code, e.g. ``ValueError: loss is nan (exit code 1)``."""
    lost = lost_node(error_type, message)
    if lost is not None:
        return _short(f"lost its node {lost.words()}" + (f": {lost.why}" if lost.why else ""))
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
