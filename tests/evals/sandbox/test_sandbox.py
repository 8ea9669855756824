"""The sandbox's own properties, each shown from inside a real bubblewrap sandbox: a read-only system, a clean
environment (bwrap's own included), an empty /tmp and home, the workspace the only host folder it writes, none of
the host's files, every process gone when a command ends or times out, the memory and file-size limits, an
unprivileged user; and the message when bubblewrap is missing."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from labbot.common.errors import BadRequest
from labbot.evals.sandbox.bwrap import BWRAP_MISSING, HOME, Limits, Sandbox, SandboxSpec, interpreter_prefixes

pytestmark = pytest.mark.subprocess  # every test runs bwrap

SECRET = "sk-" + "ant-" + "0123456789abcdef"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    with Sandbox(SandboxSpec(workspace, limits=Limits(timeout_s=30))) as sandbox:
        yield sandbox


def _host_pids_with(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                out.append(int(entry))
    return out


def test_system_is_read_only(box: Sandbox) -> None:
    got = box.exec(["sh", "-c", "touch /usr/labbot-x; echo $?; touch /etc/x; echo $?"])
    assert got.stdout.split() == ["1", "1"], got
    assert "Read-only file system" in got.stderr


def test_environment_is_built_from_nothing(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    got = box.exec(["sh", "-c", "env; cat /proc/1/environ; echo; ls /proc"])
    assert SECRET not in got.stdout
    names = {line.split("=", 1)[0] for line in got.stdout.splitlines() if "=" in line and line[0].isupper()}
    assert "ANTHROPIC_API_KEY" not in names and {"PATH", "HOME", "TMPDIR"} <= names
    assert f"HOME={HOME}" in got.stdout


def test_tmp_and_home_start_empty_and_do_not_last(box: Sandbox) -> None:
    got = box.exec(["sh", "-c", f"ls -A /tmp; ls -A {HOME}; echo x > /tmp/f; echo y > {HOME}/g; cat /tmp/f {HOME}/g"])
    assert got.stdout.split() == ["x", "y"], got
    got = box.exec(["sh", "-c", f"ls -A /tmp; ls -A {HOME}"])
    assert got.success and got.stdout == "", got


def test_workspace_is_read_write_and_the_only_host_folder(box: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "beside.txt").write_text("host file beside the workspace")
    got = box.exec(["sh", "-c", f"echo made > /workspace/out.txt; ls {tmp_path}; cat /etc/hostname; id -un"])
    assert (box.spec.workspace / "out.txt").read_text() == "made\n"
    assert "beside.txt" not in got.stdout
    assert "No such file" in got.stderr
    assert "sandbox:x:1000" in box.exec(["cat", "/etc/passwd"]).stdout
    # /root has at most the path down to the interpreter's prefix (bound read-only), none of root's own files
    listing = set(box.exec(["sh", "-c", "ls -A /root 2>/dev/null"]).stdout.split())
    allowed = {Path(p).relative_to("/root").parts[0] for p in interpreter_prefixes() if p.startswith("/root/")}
    assert listing <= allowed, listing
    assert ".cache" not in listing


def test_user_is_not_root(box: Sandbox) -> None:
    got = box.exec(["sh", "-c", "id -u; grep CapEff /proc/self/status"])
    uid, caps = got.stdout.splitlines()
    assert uid == "1000" and caps.split()[1] == "0000000000000000"


def test_timeout_kills_the_whole_tree_including_a_forked_daemon(box: Sandbox) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.25"  # sleep's argument: unique on this host
    daemon = f"setsid sh -c 'sleep {marker}' & echo started > /workspace/started; sleep 1000"  # no output: see aexec
    got = box.exec(["sh", "-c", daemon], timeout_s=1.0)
    assert got.timed_out and not got.success
    assert (box.spec.workspace / "started").read_text() == "started\n"  # the daemon was forked
    assert not _host_pids_with(f"sleep {marker}")  # gone by the time exec returned, not a moment later


def test_a_daemon_ends_with_its_command(box: Sandbox) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.5"
    got = box.exec(["sh", "-c", f"(setsid sleep {marker} &) ; echo left a daemon"])
    assert got.success and got.stdout == "left a daemon\n"
    assert not _host_pids_with(f"sleep {marker}")  # gone by the time exec returned, not a moment later


def test_aexec_times_out_and_kills(box: Sandbox) -> None:
    got = asyncio.run(box.aexec(["sh", "-c", "echo started > /workspace/started; sleep 1000"], timeout_s=1.0))
    assert got.timed_out and not got.success
    assert (box.spec.workspace / "started").read_text() == "started\n"


def test_memory_limit(tmp_path: Path) -> None:
    with Sandbox(SandboxSpec(tmp_path, limits=Limits(timeout_s=30, memory_mb=256))) as small:
        code = "b = bytearray(600 * 1024 * 1024); print('allocated')"
        got = small.exec(["python3", "-c", code])
        assert got.returncode != 0 and "allocated" not in got.stdout
        assert "MemoryError" in got.stderr
        assert small.exec(["python3", "-c", "b = bytearray(20 * 1024 * 1024); print('ok')"]).stdout == "ok\n"


def test_file_size_limit(tmp_path: Path) -> None:
    with Sandbox(SandboxSpec(tmp_path, limits=Limits(timeout_s=30, file_mb=1))) as small:
        got = small.exec(["sh", "-c", "head -c 3000000 /dev/zero > /workspace/big"])
        assert got.returncode != 0
        assert (tmp_path / "big").stat().st_size <= 1024 * 1024


def test_missing_bwrap_is_a_clear_bad_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "bwrap" else real(name, *a, **k))
    with Sandbox(SandboxSpec(tmp_path)) as sandbox, pytest.raises(BadRequest) as err:
        sandbox.exec(["true"])
    assert err.value.message == BWRAP_MISSING
    assert "apt-get install bubblewrap" in err.value.message


def test_aexec_keeps_what_a_command_printed_before_its_timeout(tmp_path: Path) -> None:

    with Sandbox(SandboxSpec(tmp_path)) as box:
        result = asyncio.run(box.aexec(["sh", "-c", "echo started; echo oops >&2; sleep 60"], timeout_s=1.0))
    assert result.timed_out and result.stdout == "started\n" and result.stderr == "oops\n"
