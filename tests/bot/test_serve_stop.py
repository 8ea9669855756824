"""``labbot serve`` stopped at any moment stops what it started: SIGTERM while its own Ray head is still starting
leaves no Ray process and no Ray session folder in /tmp behind (a head left running held 20 processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import free_port, wait_for

from labbot.training.ray_cluster import EmbeddedRayHead


def _ray_processes_of(temp_dir: Path) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(temp_dir) in cmdline:
            found.append(f"{pid}: {cmdline[:120]}")
    return found


@pytest.mark.subprocess
def test_sigterm_while_the_ray_head_starts_stops_the_head_and_leaves_nothing_in_tmp(tmp_path: Path) -> None:
    home = tmp_path / "home"
    head = EmbeddedRayHead(home)  # where `labbot serve` puts its own head: the same folders
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABBOT_", "RAY_", "SLACK_", "ANTHROPIC_"))}
    env.update(LABBOT_HOME=str(home), LABBOT_PORT=str(free_port()), PYTHONUNBUFFERED="1")
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "labbot.bot.cli.main", "serve"], env=env, stdout=out, stderr=out)
    try:
        # the head's processes are up (its gcs and raylet run in its temp dir), its dashboard not answering yet
        wait_for(lambda: len(_ray_processes_of(head.temp_dir)) >= 2, timeout=120, interval=0.1, what="Ray starting")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while _ray_processes_of(head.temp_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ray_processes_of(head.temp_dir) == [], log.read_text()[-3000:]
    assert not head.private_dir.exists(), "Ray's session folder is not left in /tmp"
