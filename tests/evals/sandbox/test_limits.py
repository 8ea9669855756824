"""A sample's hard limits, each reached for real in a bubblewrap sandbox: processes (a fork bomb), memory spread over
processes, /tmp and home filled, 400 MB printed; each named in the result, nothing left running, labbot's own memory
untouched by what a command prints; the mechanism in force reported, and the fallback without cgroups."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from labbot.evals.sandbox.bwrap import HOME, MAX_OUTPUT, Limits, Sandbox, SandboxSpec
from labbot.evals.sandbox.inspect_provider import LabbotSandbox

pytestmark = pytest.mark.subprocess  # every test runs bwrap

MiB = 1024 * 1024
# forks until refused (at most 400), each child sleeping on a marker argument so a survivor would be seen on the host
FORK_BOMB = """
import os, sys, time
n = 0
try:
    while n < 400:
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", sys.argv[1]])
        n += 1
except OSError as e:
    print("refused after", n, e.strerror, flush=True)
time.sleep(0.5)
"""
# four processes of 150 MB each, touched page by page, under a 256 MB sample
HOG = """
import os, time
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        b = bytearray(150 * 1024 * 1024)
        for i in range(0, len(b), 4096):
            b[i] = 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
codes = [os.waitpid(k, 0)[1] for k in kids]
print("statuses", codes)
"""


def _host_has_cgroup(controller: str) -> bool:
    """Whether this host lets this process make a group with ``controller`` (what the sandbox would use)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            folder = Path("/sys/fs/cgroup") / controller / path.lstrip("/")
            return os.access(folder, os.W_OK)
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    return v2.exists() and controller in v2.read_text().split()


def _host_pids_with(marker: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    out.append(int(entry))
            except OSError:
                continue
    return out


def _marker() -> str:
    return f"{uuid.uuid4().int % 10**6}.75"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture
def small(workspace: Path) -> Iterator[Sandbox]:
    limits = Limits(timeout_s=20, memory_mb=256, pids=64, tmp_mb=16)
    with Sandbox(SandboxSpec(workspace, limits=limits)) as box:
        yield box
        assert not box.cgroup.pids_inside(), "a process of the sample outlived its command"
    assert all(not f.path.exists() for f in box.cgroup.folders)


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def test_the_mechanism_in_force_is_reported_and_the_group_removed(workspace: Path) -> None:
    box = Sandbox(SandboxSpec(workspace, limits=Limits(pids=64, memory_mb=256)))
    try:
        got = box.limit_mechanisms()
        folders = [f.path for f in box.cgroup.folders]
        for controller in ("pids", "memory"):
            if _host_has_cgroup(controller):
                assert got[controller].startswith("cgroup v"), got
            else:
                assert not got[controller].startswith("cgroup"), got
        assert got["tmp"] == got["home"] == "tmpfs size" and got["file size"] == "RLIMIT_FSIZE"
        assert all(p.is_dir() for p in folders)
        limits = {f.controller: f.path for f in box.cgroup.folders}
        if "pids" in limits:
            assert (limits["pids"] / "pids.max").read_text().strip() == "64"
    finally:
        box.close()
    assert folders == [] or not any(p.exists() for p in folders)


def test_a_fork_bomb_stops_at_the_process_limit_and_nothing_is_left(small: Sandbox) -> None:
    if not small.cgroup.has("pids"):
        pytest.skip("no writable pids cgroup here: the fallback test covers this host")
    marker = _marker()
    got = small.exec(["python3", "-c", FORK_BOMB, marker], timeout_s=20)
    assert got.limit == "pids" and not got.success, got
    assert "pids.max=64" in got.limit_note and "refused after" in got.stdout
    assert int(got.stdout.split()[2]) < 64
    assert not _host_pids_with(f"sleep {marker}")


def test_a_fork_bomb_through_aexec_and_the_inspect_provider(small: Sandbox, tmp_path: Path) -> None:
    if not small.cgroup.has("pids"):
        pytest.skip("no writable pids cgroup here")
    marker = _marker()
    got = asyncio.run(small.aexec(["python3", "-c", FORK_BOMB, marker], timeout_s=20))
    assert got.limit == "pids", got
    assert not _host_pids_with(f"sleep {marker}")
    provider = LabbotSandbox(small, tmp_path, "t")
    tool = asyncio.run(provider.exec(["python3", "-c", FORK_BOMB, marker]))
    assert not tool.success and "process limit (pids.max=64" in tool.stderr, tool
    assert not _host_pids_with(f"sleep {marker}")


def test_memory_spread_over_processes_stops_at_the_sample_limit(small: Sandbox) -> None:
    if not small.cgroup.has("memory"):
        pytest.skip("no writable memory cgroup here: RLIMIT_AS per process is the bound (test_sandbox)")
    got = small.exec(["python3", "-c", HOG], timeout_s=20)
    assert got.limit == "memory" and not got.success, got
    assert "memory limit (256 MiB" in got.limit_note
    assert "statuses" in got.stdout and "9" in got.stdout  # a child ended by SIGKILL (the OOM killer)
    again = asyncio.run(small.aexec(["python3", "-c", HOG], timeout_s=20))
    assert again.limit == "memory", again


@pytest.mark.parametrize(("where", "name"), [("/tmp", "tmp"), (HOME, "home")])
def test_filling_tmp_or_home_stops_at_its_size(small: Sandbox, where: str, name: str) -> None:
    cmd = f"head -c 50000000 /dev/zero > {where}/fill; du -k {where}/fill"
    got = small.exec(["sh", "-c", cmd])
    assert got.limit == name and not got.success, got
    assert "No space left on device" in got.stderr
    assert int(got.stdout.split()[0]) <= 16 * 1024
    assert "a tmpfs of 16 MiB" in got.limit_note
    again = asyncio.run(small.aexec(["sh", "-c", cmd]))
    assert again.limit == name, again
    assert small.exec(["sh", "-c", f"head -c 1000000 /dev/zero > {where}/fine"]).limit is None


def test_400_mb_printed_keeps_the_tail_and_not_labbots_memory(small: Sandbox) -> None:
    total = 400_000_000
    cmd = ["sh", "-c", f"head -c {total} /dev/zero | tr '\\0' a; echo END >&2"]
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from the RSS now
    before = _rss_kib("VmRSS")
    got = small.exec(cmd, timeout_s=60)
    grown_mb = (_rss_kib("VmHWM") - before) / 1024
    assert got.success and got.stderr == "END\n", got.stderr
    assert got.output_cut == total - MAX_OUTPUT
    assert got.stdout == f"…(first {total - MAX_OUTPUT} bytes cut)\n" + "a" * MAX_OUTPUT
    assert grown_mb <= 20, f"labbot's RSS grew {grown_mb:.0f} MB reading 400 MB of output"
    Path("/proc/self/clear_refs").write_text("5")
    before = _rss_kib("VmRSS")
    again = asyncio.run(small.aexec(cmd, timeout_s=60))
    grown_mb = (_rss_kib("VmHWM") - before) / 1024
    assert again.output_cut == total - MAX_OUTPUT and again.stdout.endswith("a" * 100)
    assert grown_mb <= 20, f"aexec: labbot's RSS grew {grown_mb:.0f} MB reading 400 MB of output"


def test_a_solver_sandbox_within_the_sample_shares_its_group(small: Sandbox, workspace: Path) -> None:
    with Sandbox(SandboxSpec(workspace, limits=small.spec.limits), within=small) as inner:
        assert inner.cgroup is small.cgroup
        got = inner.exec(["sh", "-c", "cat /proc/self/cgroup"])
    assert got.success
    assert all(f.path.exists() for f in small.cgroup.folders)  # closing the inner one left the sample's group


def test_the_fallback_without_cgroups_says_so_and_bounds_memory_per_process(workspace: Path) -> None:
    limits = Limits(timeout_s=20, memory_mb=256, pids=64, tmp_mb=16)
    with Sandbox(SandboxSpec(workspace, limits=limits), cgroups=False) as box:
        assert box.cgroup.folders == []
        got = box.limit_mechanisms()
        assert got["memory"] == "RLIMIT_AS per process"
        assert got["pids"] == ("RLIMIT_NPROC" if os.getuid() != 0 else got["pids"])
        if os.getuid() == 0:
            assert got["pids"].startswith("none"), got
        assert "--nproc" not in " ".join(box.argv(["true"])) or os.getuid() != 0
        one = box.exec(["python3", "-c", "b = bytearray(300 * 1024 * 1024); print('allocated')"])
        assert "MemoryError" in one.stderr and "allocated" not in one.stdout
        # the tmpfs size holds without any cgroup
        filled = box.exec(["sh", "-c", "head -c 50000000 /dev/zero > /tmp/fill"])
        assert filled.limit == "tmp", filled
