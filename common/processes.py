"""Processes of this host, as the layers that outlive one see them (the embedded Ray head, the leader lease)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` runs on this host (in this PID namespace); another user's counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
