"""labbot.training.ray_cluster: the embedded head starts with token auth, is reused while up, and is stopped only by
the labbot that owns it."""

from __future__ import annotations

import stat
import subprocess
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest
from support import wait_for

from labbot.training import ray_cluster
from labbot.training.launcher import RayLauncher, Submission
from labbot.training.ray_cluster import EmbeddedRayHead, connect, dashboard_alive

pytestmark = pytest.mark.subprocess  # every test here starts a process


def test_an_external_cluster_is_used_as_given_and_never_started(tmp_path: Path) -> None:
    conn, head = connect(tmp_path, "127.0.0.1:8265", "tok")
    assert head is None and conn.address == "http://127.0.0.1:8265" and conn.headers == {"Authorization": "Bearer tok"}
    assert not (tmp_path / "ray").exists()


def test_free_ports_are_distinct() -> None:
    ports = ray_cluster._free_ports(50)
    assert len(set(ports)) == 50


def test_a_start_that_gives_up_or_finds_a_port_taken_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two failures CI saw at a head's start, one head here (a start is the costliest thing in this module): `ray
    start` giving up (its raylet not registered in time, three heads starting at once on two cores) after the
    dashboard had already answered — the head was taken for up and was gone; and two components handed the same
    port, the head dying at start. Only `ray start`'s own word counts, and either failure is a new try with fresh
    ports: here the first try gives up, the second finds a port taken, the third starts."""
    real_ports = ray_cluster._free_ports
    ports_drawn: list[list[int]] = []

    def clashing_on_the_second_try(count: int) -> list[int]:
        ports = real_ports(count)
        if len(ports_drawn) == 1:
            ports[8] = ports[4]  # object manager and runtime-env agent on one port, as in that CI run
        ports_drawn.append(ports)
        return ports

    real_popen = subprocess.Popen
    starts: list[list[str]] = []

    def busy_first(cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        starts.append(cmd)
        if len(starts) == 1:  # what `ray start` prints when the node times out during startup, then exits 1
            said = "Exception: The current node timed out during startup. This could happen because some of the raylet"
            return real_popen(["sh", "-c", f"echo '{said}'; exit 1"], **kwargs)
        return real_popen(cmd, **kwargs)

    monkeypatch.setattr(ray_cluster, "_free_ports", clashing_on_the_second_try)
    monkeypatch.setattr(ray_cluster.subprocess, "Popen", busy_first)
    head = EmbeddedRayHead(tmp_path / "home")
    try:
        conn = head.ensure()
        assert len(starts) == 3 and len(ports_drawn) == 3 and dashboard_alive(conn.address, conn.token)
        assert "timed out during startup" in (head.dir / "head.log").read_text()
    finally:
        head.stop()


def test_an_embedded_head_wants_its_token_is_reused_keeps_labbots_secrets_from_jobs_and_stops_them_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One head, its whole life (a head start is the costliest thing here): started with token auth, reused by a
    restarted labbot; security findings 7 and 10 — a job's process environment carries no secret of labbot's (Slack,
    Ray, vendor keys), and the runtime-env logs Ray writes (the job's telemetry token in them) are readable by nobody
    else; and stopping the head stops its jobs (an entrypoint runs in a session of its own: killing the head alone
    would leave it running, unowned)."""
    marker = uuid.uuid4().hex
    labbots = {
        "SLACK_BOT_TOKEN": f"xoxb-{uuid.uuid4().hex}",
        "SLACK_SIGNING_SECRET": uuid.uuid4().hex,
        "RAY_AUTH_TOKEN": uuid.uuid4().hex,
        "ANTHROPIC_API_KEY": f"sk-ant-{uuid.uuid4().hex}",
        "HF_TOKEN": f"hf_{uuid.uuid4().hex}",
        "VENDOR_PASSWORD": uuid.uuid4().hex,
    }
    for name, value in labbots.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    head = EmbeddedRayHead(home)
    conn = head.ensure()
    monkeypatch.delenv("RAY_AUTH_TOKEN")  # the launcher below authenticates with the head's own token
    telemetry = uuid.uuid4().hex
    try:
        assert conn.embedded and conn.address.startswith("http://127.0.0.1:")
        assert stat.S_IMODE((home / "ray" / "auth_token").stat().st_mode) == 0o600
        assert dashboard_alive(conn.address, conn.token)
        assert not dashboard_alive(conn.address, None), "the head must require its token"
        assert len(str(head.temp_dir)) < 40  # Ray's socket paths must stay under 107 bytes

        launcher = RayLauncher(conn)
        env_vars = {"MARK": marker, "LABBOT_TELEMETRY_TOKEN": telemetry}
        launcher.submit(Submission(f"labbot-{marker[:6]}-1", "sleep 300", {"env_vars": env_vars}, {}))

        def job_process() -> psutil.Process | None:
            for proc in psutil.process_iter(["name"]):
                try:
                    if proc.info["name"] == "sleep" and proc.environ().get("MARK") == marker:
                        return proc
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            return None

        proc = wait_for(job_process, timeout=30, what="the job's process")
        environ = dict(proc.environ())  # /proc/PID/environ
        flat = "\n".join(f"{k}={v}" for k, v in environ.items())
        for name, value in labbots.items():
            assert value not in flat, f"the job inherited labbot's {name}"
        assert conn.token and conn.token not in flat, "the job carries the Ray head's token"
        assert environ["LABBOT_TELEMETRY_TOKEN"] == telemetry  # what labbot hands the job still arrives
        for name, value in ray_cluster.LOG_MONITOR_ENV.items():  # the head's log monitor lists its logs once a second
            assert environ[name] == value

        # Ray makes its temp dir 0777 and writes runtime envs into its logs: the folder around it is labbot's, 0700
        assert stat.S_IMODE(head.private_dir.stat().st_mode) == 0o700
        for path in head.temp_dir.rglob("*"):
            if path.is_file() and not path.is_symlink() and telemetry.encode() in path.read_bytes():
                assert not _readable_by_others(path), path
        launcher.close()

        # a restarted labbot (same LABBOT_HOME) reuses the head: jobs keep running; its stop stops them too
        second = EmbeddedRayHead(home)
        assert second.ensure() == conn and proc.is_running()
        second.stop()
        assert not dashboard_alive(conn.address, conn.token, timeout=1.0)
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, "the head's job outlived it"
    finally:
        head.stop()


def _readable_by_others(path: Path) -> bool:
    """Another user can read ``path``: it is o+r and every folder above it is o+x."""
    if not path.stat().st_mode & stat.S_IROTH:
        return False
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in path.parents)
