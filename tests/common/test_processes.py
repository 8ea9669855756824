"""``pid_alive``: a running process, one that has exited, and this one."""

from __future__ import annotations

import os
import subprocess

from labbot.common.processes import pid_alive


def test_a_process_is_alive_while_it_runs_and_not_once_reaped() -> None:
    assert pid_alive(os.getpid())
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert pid_alive(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not pid_alive(child.pid)
