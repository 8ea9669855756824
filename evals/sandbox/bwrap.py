"""A sealed sandbox for one eval sample: Linux namespaces through bubblewrap (Debian's ``bubblewrap``), no Docker.

What a command inside sees (:func:`bwrap_argv` builds it, and the probe battery checks it):

- new mount, PID, network, IPC, UTS, user and cgroup namespaces (``--unshare-all``): with ``network="none"`` only a
  loopback of its own, so no TCP, UDP or DNS anywhere, and none of the host's ports or abstract sockets (Ray's);
  with ``network="proxy"`` the same namespace, plus HTTP(S) through the host's allow-list proxy
  (:mod:`labbot.evals.sandbox.proxy`: ``allow_hosts``, its socket bound at ``/run/labbot-proxy``, a forwarder on the
  sandbox's ``127.0.0.1:3128`` started before the command, ``HTTP(S)_PROXY`` set) — raw TCP and DNS still go nowhere;
- of the host's system only what tests need, read-only (:func:`host_view`): ``/usr/bin`` (sh, coreutils, git,
  python), the folders of the shared libraries those tools and the interpreter load (``ldd``: ``/usr/lib/<arch>``,
  ``/usr/lib64``), ``/usr/lib/git-core`` and ``/usr/share/git-core``, the standard library of ``/usr/bin/python3``
  and the interpreter's prefix when it lives elsewhere (pyenv); ``/bin``, ``/lib`` the usual links; the root itself
  read-only. Not shown: the rest of ``/usr`` (``/usr/share``, ``/usr/local``, SDKs under ``/usr/lib`` that vendor
  other libraries), and an empty read-only tmpfs over every ``site-packages``/``dist-packages`` of those
  interpreters and over ensurepip's bundled wheels — copies of other projects a solver could read the deleted code
  from (:mod:`labbot.evals.seal.contamination` looks for what is left). In the task venv, pip's, setuptools' and wheel's
  vendored trees (``pip/_vendor``…) are masked the same way; only the venv build (``SandboxSpec.vendored``) sees them;
- an ``/etc`` of its own (``passwd``, ``group``, ``hosts``: the host's is not shown); ``/proc`` of its own PID
  namespace, a minimal ``/dev``;
- an empty ``/tmp`` and home (``/home/sandbox``), gone when the command ends;
- the workspace read-write at ``/workspace`` (the only host folder it can write), the task's venv read-only at
  ``/venv``, and whatever else the caller binds read-only (``ro_binds``) — nothing else of the host: not labbot's
  home, its database or tokens, Ray's temp dir, the user's checkout;
- an environment built from nothing (``--clearenv``): ``PATH``, ``HOME``, ``TMPDIR``, ``LANG``, pip's cache and
  network off, no bytecode written, plus the caller's ``env`` — never the host's environment, whose secrets stay out
  (bwrap itself, the sandbox's PID 1 whose ``/proc/1/environ`` a command can read, starts with :data:`LAUNCH_ENV`);
- limits (:class:`Limits`), each named in :attr:`ExecResult.limit` when a command reaches it (see "Limits" below).

Limits. A sample is one :class:`Sandbox`: many commands over one workspace, one after another or at once (an agent's
tool calls). What the sample's commands start together is bounded by one control group of the sample's
(:mod:`labbot.evals.sandbox.cgroup`), which every command joins before bwrap starts (a ``sh`` that writes its own pid
into ``cgroup.procs`` and then execs prlimit and bwrap: race-free) and which :meth:`Sandbox.close` empties and removes:

- processes (``pids``, default 1024, threads included): cgroup v2 ``pids.max`` or the v1 pids controller, whichever
  the host lets labbot write (a fork past it fails with EAGAIN; named from ``pids.events``). Fallback with no
  writable pids group: ``RLIMIT_NPROC`` set to labbot's user's tasks at launch plus ``pids`` — the kernel counts
  every task of that host uid and does not enforce it for root, so as root the fallback bounds nothing and
  :meth:`Sandbox.limit_mechanisms` says ``"none"``;
- memory (``memory_mb``, of the whole sample): cgroup v2 ``memory.max`` with ``memory.swap.max=0``, or v1
  ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` at the same value: no swap); the OOM killer ends a
  process of the sample past it (named from ``memory.events``/``memory.oom_control`` ``oom_kill``). Every process
  also has ``RLIMIT_AS`` at ``memory_mb`` (one big allocation fails with ENOMEM rather than an OOM kill); without a
  memory group that is the only bound: ``memory_mb`` × processes;
- ``/tmp`` and home: tmpfs of ``tmp_mb`` each (bwrap's ``--size``; their pages count in the sample's memory too);
  a write past it fails with ENOSPC. Named when the tmpfs was full at any check (every 0.1 s, and when the command
  ended): labbot holds each tmpfs open from before the command starts (bwrap waits on ``--block-fd`` until then),
  so a filler that frees the space before it ends may go unnamed;
- one file's size (``file_mb``, ``RLIMIT_FSIZE``; named when the command died of SIGXFSZ: exit 153) and no core
  dumps, set with util-linux ``prlimit`` before bwrap starts;
- wall clock (``timeout_s``, per command): after it the whole process tree dies (bwrap's PID 1 goes, and the kernel
  ends every process of the namespace, whatever forked);
- output: stdout and stderr are read as they come and only their last :data:`MAX_OUTPUT` bytes kept, with the
  count of what was cut first (``…(first N bytes cut)``) — a command printing gigabytes costs labbot 2 MiB a stream.
  Not a failure.

With commands of a sample running at once, a limit hit while both ran is named for both.

Every process a command starts ends with it: a solver's daemon cannot live on into scoring. bwrap reports its
PID 1's host pid and the namespaces (``--json-status-fd``), and an exec returns only once that PID namespace is
empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from labbot.common.errors import BadRequest
from labbot.evals.sandbox.cgroup import SampleCgroup
from labbot.evals.sandbox.proxy import INSIDE as PROXY_INSIDE
from labbot.evals.sandbox.proxy import AllowListProxy, forwarder_argv, proxy_env

WORKDIR = "/workspace"
VENV = "/venv"
HOME = "/home/sandbox"
MAX_OUTPUT = 1024 * 1024  # bytes kept of each of stdout and stderr (the tail)
# what prlimit and bwrap themselves run with: bwrap stays the sandbox's PID 1, and a process inside can read PID 1's
# /proc/1/environ — so not the host's environment (--clearenv only clears what the command gets)
LAUNCH_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
BWRAP_MISSING = (
    "bubblewrap (bwrap) is not installed: eval sandboxes need it. Install it with `sudo apt-get install bubblewrap` "
    "(make test and make run do when run as root)"
)


MiB = 1024 * 1024
SIGXFSZ_EXIT = 128 + signal.SIGXFSZ  # how a shell (and bwrap) report a process killed at RLIMIT_FSIZE
TMP_FULL_BYTES = 256 * 1024  # a tmpfs with less free than this was filled
TICK_S = 0.1  # how often a running command's tmpfs are looked at


@dataclass(frozen=True)
class Limits:
    """A sample's limits (see the module docstring): one command's wall clock; the processes and memory of all the
    sample's commands together; each tmpfs (``/tmp``, home) and each file a command writes."""

    timeout_s: float = 600.0
    memory_mb: int = 4096
    file_mb: int = 1024
    pids: int = 1024
    tmp_mb: int = 512


LimitName = Literal["timeout", "pids", "memory", "tmp", "home", "file size"]


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
    limit: LimitName | None = None  # the limit the command reached, if any (then it did not succeed)
    limit_note: str = ""  # that limit in words, e.g. "the sample's process limit (pids.max=1024, cgroup v1)"
    output_cut: int = 0  # bytes of stdout and stderr dropped (the first ones), beyond MAX_OUTPUT each

    @property
    def success(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.limit is None


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandbox binds: the workspace (read-write), the venv and other host folders (read-only)."""

    workspace: Path
    venv: Path | None = None
    network: Literal["none", "proxy"] = "none"
    allow_hosts: tuple[str, ...] = ()  # with network="proxy": [eval] allow_hosts (exact names, *.domain, IPs)
    ro_binds: Mapping[str, Path] = field(default_factory=dict)  # path inside -> host path
    rw_binds: Mapping[str, Path] = field(default_factory=dict)  # path inside -> host path (results, a venv build)
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = Limits()
    vendored: bool = False  # pip's, setuptools' and ensurepip's bundled trees shown: only the venv build needs them
    toolchain: tuple[
        str, ...
    ] = ()  # vendored trees of the venv left visible: those a suite's tests import (suite.json)


def bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise BadRequest(BWRAP_MISSING)
    return found


def interpreter_prefixes() -> list[str]:
    """Where the Python the venv links to lives, when outside /usr (pyenv, a conda base...): bound read-only."""
    out = []
    for prefix in {sys.base_prefix, os.path.realpath(sys.base_prefix)}:
        if prefix and not prefix.startswith("/usr/") and prefix != "/usr" and Path(prefix).is_dir():
            out.append(prefix)
    return sorted(out)


# the tools a command is promised (and the base interpreter): the folders of their shared libraries are bound
PROMISED_TOOLS = ("sh", "bash", "env", "ls", "cat", "grep", "sed", "find", "git", "python3")
# third-party code that pip and setuptools carry inside themselves (copies of packaging, idna, tomli, platformdirs...)
VENDORED_TREES = ("pip/_vendor", "setuptools/_vendor", "pkg_resources/_vendor", "wheel/vendored")


def _site_dirs(lib: Path) -> list[Path]:
    """Every ``site-packages`` and ``dist-packages`` of the ``pythonX.Y`` folders under ``lib``."""
    return sorted(p for pattern in ("python3*/site-packages", "python3*/dist-packages") for p in lib.glob(pattern))


def _stdlib_masks(stdlib: Path, *, vendored: bool) -> list[Path]:
    """What of a standard library folder stays hidden: ensurepip's bundled pip and setuptools wheels (the vendored
    trees, zipped) unless ``vendored``."""
    bundled = stdlib / "ensurepip" / "_bundled"
    return [bundled] if bundled.is_dir() and not vendored else []


@functools.lru_cache(maxsize=1)
def library_dirs() -> tuple[str, ...]:
    """The folders of the shared libraries the promised tools and the base interpreter load (``ldd``), and the
    dynamic loader's: bound whole, read-only (``/usr/lib/x86_64-linux-gnu``, ``/usr/lib64`` here)."""
    exes = [shutil.which(t, path=LAUNCH_ENV["PATH"]) for t in PROMISED_TOOLS] + [os.path.realpath(sys.executable)]
    dirs: set[str] = set()
    for exe in filter(None, exes):
        try:
            out = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30, env=LAUNCH_ENV).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for word in out.split():
            if word.startswith("/") and os.path.exists(word):
                dirs |= {os.path.realpath(os.path.dirname(word)), os.path.dirname(os.path.realpath(word))}
    prefixes = interpreter_prefixes()
    return tuple(sorted(d for d in dirs if not any(d == p or d.startswith(p + "/") for p in prefixes)))


def _system_pythons() -> list[Path]:
    """The standard library folders of the system's own ``/usr/bin/python3*`` (``/usr/lib/python3.11``)."""
    out = set()
    for exe in Path("/usr/bin").glob("python3*"):
        name = Path(os.path.realpath(exe)).name
        if name.startswith("python3.") and (stdlib := Path("/usr/lib") / name.removesuffix("m")).is_dir():
            out.add(stdlib)
    return sorted(out)


def host_view(spec: SandboxSpec) -> list[str]:
    """The bwrap arguments that show the host's system inside a sandbox (see the module docstring): the promised
    tools and their libraries, the interpreters' standard libraries — and no ``site-packages`` or ``dist-packages``
    of the host, no ``/usr/share``, ``/usr/local`` or vendored SDK trees."""
    binds = ["/usr/bin", *library_dirs(), "/usr/lib/git-core", "/usr/share/git-core"]
    masks: list[Path] = []
    for stdlib in _system_pythons():
        binds.append(str(stdlib))
        masks += [p for p in (stdlib / "site-packages", stdlib / "dist-packages") if p.is_dir()]
        masks += _stdlib_masks(stdlib, vendored=spec.vendored)
    argv: list[str] = []
    for path in dict.fromkeys(binds):
        if Path(path).is_dir():
            argv += ["--ro-bind", path, path]
    argv += [
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/sbin", "/sbin",
        "--symlink", "usr/lib", "/lib",
    ]  # fmt: skip
    if Path("/usr/lib64").is_dir():
        argv += ["--symlink", "usr/lib64", "/lib64"]
    for prefix in interpreter_prefixes():
        argv += ["--ro-bind", prefix, prefix]
        lib = Path(prefix) / "lib"
        masks += _site_dirs(lib)
        for stdlib in lib.glob("python3*"):
            masks += _stdlib_masks(stdlib, vendored=spec.vendored)
    return argv + _masked(masks)


def venv_masks(venv: Path, keep: Sequence[str] = ()) -> list[Path]:
    """The vendored trees of a task venv's toolchain, as paths inside the sandbox (under ``/venv``); ``keep``: those
    a suite's tests need (they import setuptools or pkg_resources), left visible — the contamination walk reads what
    the sandbox shows, so a copy of the deleted code there is still found."""
    out = []
    for site in _site_dirs(venv / "lib"):
        for tree in VENDORED_TREES:
            if (site / tree).is_dir() and tree not in keep:
                out.append(Path(VENV) / (site / tree).relative_to(venv))
    return out


def _masked(paths: Sequence[Path]) -> list[str]:
    """An empty read-only tmpfs over each of ``paths``: the folder is there, and holds nothing."""
    argv: list[str] = []
    for path in dict.fromkeys(str(p) for p in paths):
        argv += ["--tmpfs", path, "--remount-ro", path]
    return argv


def _etc(root: Path) -> Path:
    """A minimal /etc: who the sandbox user is, localhost, and nothing of the host's configuration."""
    etc = root / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "passwd").write_text(f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:{HOME}:/bin/sh\n")
    (etc / "group").write_text("root:x:0:\nsandbox:x:1000:\n")
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")
    (etc / "resolv.conf").write_text("")  # no resolver: no DNS
    return etc


def base_env(extra: Mapping[str, str] | None = None, *, venv: bool = True) -> dict[str, str]:
    env = {
        "PATH": (f"{VENV}/bin:" if venv else "") + "/usr/local/bin:/usr/bin:/bin",
        "HOME": HOME,
        "USER": "sandbox",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }
    if venv:
        env["VIRTUAL_ENV"] = VENV
    env.update(extra or {})
    return env


def _base_interpreter() -> str:
    """The interpreter the forwarder runs with: the real file behind this Python (under /usr or a bound prefix)."""
    return os.path.realpath(sys.executable)


def bwrap_argv(
    spec: SandboxSpec,
    etc: Path,
    cmd: Sequence[str],
    *,
    cwd: str = WORKDIR,
    proxy: Path | None = None,
    status_fd: int | None = None,
    block_fd: int | None = None,
) -> list[str]:
    """The bubblewrap command line that runs ``cmd`` sealed as described in the module docstring; ``proxy`` is the
    folder of a started :class:`~labbot.evals.sandbox.proxy.AllowListProxy` (required with ``network="proxy"``);
    ``block_fd``: bwrap waits, its mounts made, until a byte can be read from it (see :class:`_Watch`)."""
    if spec.network == "proxy" and proxy is None:
        raise BadRequest('a sandbox with network="proxy" needs its proxy\'s folder: build it with Sandbox(spec)')
    argv = [
        bwrap(),
        "--unshare-all",
        *(["--json-status-fd", str(status_fd)] if status_fd is not None else []),
        *(["--block-fd", str(block_fd)] if block_fd is not None else []),
        "--die-with-parent",
        "--new-session",
        "--uid", "1000",
        "--gid", "1000",
        "--hostname", "sandbox",
    ]  # fmt: skip
    argv += host_view(spec)
    argv += [
        "--ro-bind", str(etc), "/etc",
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(spec.limits.tmp_mb * MiB), "--tmpfs", "/tmp",
        "--size", str(spec.limits.tmp_mb * MiB), "--tmpfs", "/home",
        "--dir", HOME,
        "--bind", str(spec.workspace), WORKDIR,
    ]  # fmt: skip
    if spec.venv is not None:
        argv += ["--ro-bind", str(spec.venv), VENV]
        argv += _masked(venv_masks(spec.venv, spec.toolchain) if not spec.vendored else [])
    for inside, host in spec.ro_binds.items():
        argv += ["--ro-bind", str(host), inside]
    for inside, host in spec.rw_binds.items():
        argv += ["--bind", str(host), inside]
    env = base_env(spec.env, venv=spec.venv is not None)
    if spec.network == "proxy" and proxy is not None:
        argv += ["--ro-bind", str(proxy), PROXY_INSIDE]
        env = {**env, **proxy_env()}
        cmd = forwarder_argv(_base_interpreter(), cmd)
    argv += ["--remount-ro", "/"]  # the root bwrap built (/usr, /lib... as folders of its own): nothing new there
    argv += ["--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", cwd, "--", *cmd]
    return argv


def limited(argv: list[str], limits: Limits, *, nproc: int | None = None) -> list[str]:
    """``argv`` under util-linux ``prlimit``: the limits every process of the sandbox inherits (set before bwrap
    runs, so nothing inside can raise them; no ``preexec_fn``, which is unsafe in a threaded process). ``nproc``:
    ``RLIMIT_NPROC``, the fallback process limit (see the module docstring)."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise BadRequest("util-linux's prlimit is not installed: eval sandboxes need it (apt-get install util-linux)")
    mem, size = limits.memory_mb * MiB, limits.file_mb * MiB
    extra = [f"--nproc={nproc}"] if nproc is not None else []
    return [prlimit, f"--as={mem}", f"--fsize={size}", "--core=0", *extra, "--", *argv]


def user_tasks(uid: int) -> int:
    """Tasks (threads included) of host user ``uid`` now: what RLIMIT_NPROC counts against its limit."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            status = Path(f"/proc/{entry}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
    return count


class _Tail:
    """The last :data:`MAX_OUTPUT` bytes of a stream read chunk by chunk, and how many came before them."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.cut = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * MAX_OUTPUT:  # trimmed now and then, not at every chunk
            self._trim()

    def _trim(self) -> None:
        extra = len(self.data) - MAX_OUTPUT
        if extra > 0:
            del self.data[:extra]
            self.cut += extra

    def text(self) -> str:
        self._trim()
        text = bytes(self.data).decode(errors="replace")
        return f"…(first {self.cut} bytes cut)\n{text}" if self.cut else text


def _tail(data: bytes) -> str:
    tail = _Tail()
    tail.add(data)
    return tail.text()


class Sandbox:
    """One sample's sandbox: every :meth:`exec` is a fresh sealed process tree over the same workspace, all of them in
    the sample's control group (its processes and memory bounded together; see the module docstring).

    With ``network="proxy"`` it starts its own allow-list proxy (``spec.allow_hosts``), stopped by :meth:`close`.
    ``within``: another sandbox of the same sample (other binds, one command) whose group this one's commands join,
    so they count against the same limits; it is closed with that one, not with this. ``cgroups=False`` (or
    ``$LABBOT_SANDBOX_CGROUPS=off``) uses the fallback limits only."""

    def __init__(self, spec: SandboxSpec, *, within: Sandbox | None = None, cgroups: bool = True) -> None:
        if not spec.workspace.is_dir():
            raise BadRequest(f"the sandbox workspace {spec.workspace} is not a folder")
        if spec.venv is not None and not (spec.venv / "bin" / "python").exists():
            raise BadRequest(f"the sandbox venv {spec.venv} has no bin/python: build it with evals.sandbox.venvs first")
        if spec.network not in ("none", "proxy"):
            raise BadRequest(f'sandbox network {spec.network!r} is not one of "none", "proxy"')
        if spec.allow_hosts and spec.network != "proxy":
            raise BadRequest(
                'allow_hosts is only used with network="proxy" (with "none" nothing is reachable): set both, or '
                "leave [eval] allow_hosts empty"
            )
        for name in ("pids", "memory_mb", "file_mb", "tmp_mb"):
            if getattr(spec.limits, name) < 1:
                raise BadRequest(f"sandbox limit {name}={getattr(spec.limits, name)} must be at least 1")
        self.spec = spec
        self._owns_cgroup = within is None
        self.cgroup: SampleCgroup
        if within is not None:
            self.cgroup = within.cgroup
        else:
            self.cgroup = SampleCgroup.create(spec.limits.pids, spec.limits.memory_mb * MiB, enabled=cgroups)
        try:
            self.proxy = AllowListProxy(spec.allow_hosts).start() if spec.network == "proxy" else None
        except BaseException:
            self._close_cgroup()
            raise
        self._root = Path(tempfile.mkdtemp(prefix="labbot-sandbox-"))
        self._etc = _etc(self._root)

    def _close_cgroup(self) -> None:
        if self._owns_cgroup:
            self.cgroup.close()

    def close(self) -> None:
        """Stop the proxy; kill every process left in the sample's group and remove it; remove the sandbox's files."""
        if self.proxy is not None:
            self.proxy.close()
        self._close_cgroup()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def limit_mechanisms(self) -> dict[str, str]:
        """How each limit is enforced on this host, e.g. ``{"pids": "cgroup v1", "memory": "cgroup v1", ...}``."""
        found = self.cgroup.mechanisms()
        if "pids" not in found:
            found["pids"] = "RLIMIT_NPROC" if os.getuid() != 0 else "none (no writable pids cgroup; labbot is root)"
        if "memory" not in found:
            found["memory"] = "RLIMIT_AS per process"
        return {**found, "tmp": "tmpfs size", "home": "tmpfs size", "file size": "RLIMIT_FSIZE", "timeout": "kill"}

    def argv(
        self,
        cmd: Sequence[str],
        *,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        status_fd: int | None = None,
        block_fd: int | None = None,
    ) -> list[str]:
        spec = self.spec if not env else dataclasses.replace(self.spec, env={**self.spec.env, **env})
        proxy = self.proxy.folder if self.proxy is not None else None
        sealed = bwrap_argv(spec, self._etc, cmd, cwd=cwd, proxy=proxy, status_fd=status_fd, block_fd=block_fd)
        nproc = None
        if not self.cgroup.has("pids") and os.getuid() != 0:
            nproc = user_tasks(os.getuid()) + spec.limits.pids
        return self.cgroup.join(limited(sealed, spec.limits, nproc=nproc))

    def exec(
        self,
        cmd: Sequence[str],
        *,
        input: bytes | str | None = None,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> ExecResult:
        """Run ``cmd`` sealed; at the timeout every process it started is killed and ``timed_out`` is set. Its output
        is read as it comes, only the tail kept. When it returns, no process of the sandbox is left (see
        :func:`_namespace_emptied`)."""
        timeout = self.spec.limits.timeout_s if timeout_s is None else timeout_s
        data = input.encode() if isinstance(input, str) else input
        start = time.monotonic()
        watch = _Watch(self)
        try:
            proc = subprocess.Popen(
                self.argv(cmd, cwd=cwd, env=env, status_fd=watch.status_w, block_fd=watch.block_r),
                **_launch(data, watch.child_fds),
            )
        except BaseException:
            watch.close()
            raise
        watch.started()
        out, err = _Tail(), _Tail()
        try:
            watch.settle(start + timeout)
            timed_out = _pump(proc, data, watch, out, err, start + timeout)
            proc.wait()
            status = watch.finish()
            _namespace_emptied(status)
            limit = watch.verdict(status, proc.returncode, timed_out)
        finally:
            watch.close()
        return _result(proc.returncode, out, err, timed_out, time.monotonic() - start, limit)

    async def aexec(
        self,
        cmd: Sequence[str],
        *,
        input: bytes | str | None = None,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> ExecResult:
        """:meth:`exec` without blocking the event loop (inspect's sandbox interface is async)."""
        timeout = self.spec.limits.timeout_s if timeout_s is None else timeout_s
        data = input.encode() if isinstance(input, str) else input
        start = time.monotonic()
        watch = _Watch(self)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv(cmd, cwd=cwd, env=env, status_fd=watch.status_w, block_fd=watch.block_r),
                **_launch(data, watch.child_fds),
            )
        except BaseException:
            watch.close()
            raise
        watch.started()
        out, err = _Tail(), _Tail()

        async def read(stream: asyncio.StreamReader | None, tail: _Tail) -> None:
            while stream is not None and (chunk := await stream.read(65536)):
                tail.add(chunk)

        async def write() -> None:
            if data is not None and proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    proc.stdin.write(data)
                    await proc.stdin.drain()
                    proc.stdin.close()

        async def tick() -> None:
            while True:
                await asyncio.sleep(TICK_S)
                watch.tick()

        ticking = asyncio.ensure_future(tick())
        try:
            try:
                await asyncio.to_thread(watch.settle, start + timeout)
            except asyncio.CancelledError:
                _kill(proc.pid)
                raise
            # the reading runs as a task of its own and is never cancelled: at the timeout the process tree is
            # killed, its pipes close, and what it printed until then is still read (wait_for would lose it)
            reading = asyncio.ensure_future(asyncio.gather(read(proc.stdout, out), read(proc.stderr, err), write()))
            try:
                done, _ = await asyncio.wait({reading}, timeout=timeout)
                timed_out = not done
                if timed_out:
                    _kill(proc.pid)
                await reading
                await proc.wait()
            except asyncio.CancelledError:
                _kill(proc.pid)
                raise
            status = await asyncio.to_thread(watch.finish)
            if status.get("child-pid"):
                await asyncio.to_thread(_namespace_emptied, status)
            assert proc.returncode is not None
            limit = watch.verdict(status, proc.returncode, timed_out)
        finally:
            ticking.cancel()
            watch.close()
        return _result(proc.returncode, out, err, timed_out, time.monotonic() - start, limit)


def _result(
    returncode: int, out: _Tail, err: _Tail, timed_out: bool, duration_s: float, limit: tuple[LimitName, str] | None
) -> ExecResult:
    name, note = limit if limit is not None else (None, "")
    return ExecResult(returncode, out.text(), err.text(), timed_out, duration_s, name, note, out.cut + err.cut)


def _pump(
    proc: subprocess.Popen[bytes], data: bytes | None, watch: _Watch, out: _Tail, err: _Tail, deadline: float
) -> bool:
    """Read ``proc``'s stdout and stderr as they come until both end; kill it at
    ``deadline`` (and read on until its pipes close). Returns whether it was killed."""
    assert proc.stdout is not None and proc.stderr is not None
    if data is not None and proc.stdin is not None:
        feeder = threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True)
        feeder.start()
    timed_out = False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        streams = 2
        while streams:
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                _kill(proc.pid)
                timed_out = True
            for key, _ in sel.select(TICK_S if timed_out else min(left, TICK_S)):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fileobj)
                    streams -= 1
            watch.tick()
    return timed_out


def _feed(stdin: Any, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        stdin.write(data)
        stdin.close()


class _Watch:
    """What one command reached, of the limits the kernel enforces without telling labbot: the sample group's
    counters before and after it, and its two tmpfs, held open from before the command starts.

    bwrap is started with ``--block-fd``: its JSON status names the sandbox's PID 1 (``child-pid``), which makes its
    mounts and then waits to read the block fd; labbot opens ``/proc/PID/root/tmp`` and ``/proc/PID/root/home`` once
    each is the tmpfs of ``tmp_mb`` (not the host's folder), then lets bwrap go on. Open, they outlive the
    namespace, so whether they are full is known after the command ended too."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.before = box.cgroup.counters()
        self.status_r, self.status_w = os.pipe()
        self.block_r, self.block_w = os.pipe()
        self.child_fds: tuple[int, ...] = (self.status_w, self.block_r)
        self.status = b""
        self.mounts: dict[LimitName, int] = {}
        self.full: LimitName | None = None
        self._released = False

    def started(self) -> None:
        for fd in self.child_fds:
            os.close(fd)
        self.child_fds = ()

    def settle(self, deadline: float) -> None:
        """Wait for bwrap's status to name the sandbox's PID 1 and for its mounts to be made (it then waits on the
        block fd), hold its tmpfs open, and let it go on. Returns at once if bwrap ends first (an error)."""
        try:
            while b"\n" not in self.status and time.monotonic() < deadline:
                ready, _, _ = select.select([self.status_r], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    break
                chunk = os.read(self.status_r, 65536)
                if not chunk:
                    break
                self.status += chunk
            child = _parse_status(self.status).get("child-pid")
            if child:
                self._pin(child, deadline)
        finally:
            self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            with contextlib.suppress(OSError):
                os.write(self.block_w, b"x")
            os.close(self.block_w)

    def _pin(self, child: int, deadline: float) -> None:
        """Open the PID 1's ``/tmp`` and ``/home`` once they are its tmpfs (of ``tmp_mb``, not the host's folder)."""
        size = self.box.spec.limits.tmp_mb * MiB
        wait_until = min(deadline, time.monotonic() + 5.0)
        for name, inside in (("tmp", "/tmp"), ("home", "/home")):
            while time.monotonic() < wait_until and not _exited(child):
                try:
                    fd = os.open(f"/proc/{child}/root{inside}", os.O_RDONLY | os.O_DIRECTORY)
                except OSError:  # not made yet
                    time.sleep(0.0005)
                    continue
                vfs = os.fstatvfs(fd)
                if vfs.f_blocks * vfs.f_frsize == size and os.fstat(fd).st_dev != _dev(inside):
                    self.mounts[name] = fd  # type: ignore[index]
                    break
                os.close(fd)
                time.sleep(0.0005)  # bwrap is still making its mounts

    def tick(self) -> None:
        """Note a tmpfs found full (the first one)."""
        if self.full is not None:
            return
        for name, fd in self.mounts.items():
            vfs = os.fstatvfs(fd)
            if vfs.f_bavail * vfs.f_frsize < TMP_FULL_BYTES:
                self.full = name
                return

    def finish(self) -> dict[str, int]:
        """bwrap's whole status (it has exited: the pipe ends)."""
        with contextlib.suppress(OSError):
            while chunk := os.read(self.status_r, 65536):
                self.status += chunk
        self._release()
        self.tick()
        return _parse_status(self.status)

    def verdict(self, status: Mapping[str, int], returncode: int, timed_out: bool) -> tuple[LimitName, str] | None:
        """The limit the command reached, and in words; None when it reached none."""
        limits, mech = self.box.spec.limits, self.box.cgroup.mechanisms()
        after = self.box.cgroup.counters()
        if after.get("memory", 0) > self.before.get("memory", 0):
            return "memory", (
                f"the sample's memory limit ({limits.memory_mb} MiB, {mech['memory']}): the OOM killer ended a process"
            )
        if after.get("pids", 0) > self.before.get("pids", 0):
            return "pids", f"the sample's process limit (pids.max={limits.pids}, {mech['pids']}): a fork was refused"
        if self.full is not None:
            where = "/tmp" if self.full == "tmp" else HOME
            return self.full, f"the size of {where} (a tmpfs of {limits.tmp_mb} MiB): it was full"
        if status.get("exit-code", returncode) == SIGXFSZ_EXIT or returncode == SIGXFSZ_EXIT:
            return "file size", f"the file size limit ({limits.file_mb} MiB a file): a process died of SIGXFSZ"
        if timed_out:
            return "timeout", "the command's time limit: it was killed with all it started"
        return None

    def close(self) -> None:
        for fd in (self.status_r, *self.child_fds, *self.mounts.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        if not self._released:
            self._released = True
            with contextlib.suppress(OSError):
                os.close(self.block_w)
        self.mounts = {}


def _dev(path: str) -> int:
    try:
        return os.stat(path).st_dev
    except OSError:
        return -1


def _launch(data: bytes | None, fds: tuple[int, ...]) -> dict[str, Any]:
    """How bwrap is started, by :meth:`Sandbox.exec` and :meth:`Sandbox.aexec` alike: its own session (killed as a
    group), a minimal environment of its own (it is the sandbox's PID 1), and bwrap's status and block pipes passed
    on."""
    return {
        "stdin": subprocess.PIPE if data is not None else subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "start_new_session": True,
        "env": LAUNCH_ENV,
        "pass_fds": fds,
    }


def _parse_status(data: bytes) -> dict[str, int]:
    """What bwrap wrote to ``--json-status-fd`` (its child's host pid, the namespaces' inodes, the exit code)."""
    status: dict[str, int] = {}
    for line in data.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                status.update({k: v for k, v in doc.items() if isinstance(v, int)})
    return status


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _exited(pid: int) -> bool:
    """Gone, or a zombie: a PID 1 that has become a zombie has already ended (and reaped) its whole namespace."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :][:1] in ("Z", "X")


def _namespace_emptied(status: Mapping[str, int], *, wait_s: float = 5.0) -> None:
    """Return once no process of the sandbox's PID namespace is left. bwrap can exit while its PID 1 inside is still
    ending the namespace (the kernel kills every process of it and reaps them before PID 1 becomes a zombie), so a
    daemon could still be seen for a moment; this waits for PID 1 to have ended, and kills what is left at
    ``wait_s``."""
    init, ns = status.get("child-pid"), status.get("pid-namespace")
    if not init or not ns:
        return
    link = f"pid:[{ns}]"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if _pid_namespace(init) != link or _exited(init):  # ended (or the pid reused outside the namespace)
            return
        time.sleep(0.005)
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _pid_namespace(int(entry)) == link:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)


def _kill(pid: int) -> None:
    """bwrap and everything under it: its process group on the host side; inside, the PID namespace ends with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
