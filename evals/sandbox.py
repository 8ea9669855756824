"""A sealed sandbox for one eval sample: Linux namespaces through bubblewrap (Debian's ``bubblewrap``), no Docker.

What a command inside sees (:func:`bwrap_argv` builds it, and the probe battery checks it):

- new mount, PID, network, IPC, UTS, user and cgroup namespaces (``--unshare-all``): with ``network="none"`` only a
  loopback of its own, so no TCP, UDP or DNS anywhere, and none of the host's ports or abstract sockets (Ray's);
  with ``network="proxy"`` the same namespace, plus HTTP(S) through the host's allow-list proxy
  (:mod:`labbot.evals.proxy`: ``allow_hosts``, its socket bound at ``/run/labbot-proxy``, a forwarder on the
  sandbox's ``127.0.0.1:3128`` started before the command, ``HTTP(S)_PROXY`` set) — raw TCP and DNS still go nowhere;
- of the host's system only what tests need, read-only (:func:`host_view`): ``/usr/bin`` (sh, coreutils, git,
  python), the folders of the shared libraries those tools and the interpreter load (``ldd``: ``/usr/lib/<arch>``,
  ``/usr/lib64``), ``/usr/lib/git-core`` and ``/usr/share/git-core``, the standard library of ``/usr/bin/python3``
  and the interpreter's prefix when it lives elsewhere (pyenv); ``/bin``, ``/lib`` the usual links; the root itself
  read-only. Not shown: the rest of ``/usr`` (``/usr/share``, ``/usr/local``, SDKs under ``/usr/lib`` that vendor
  other libraries), and an empty read-only tmpfs over every ``site-packages``/``dist-packages`` of those
  interpreters and over ensurepip's bundled wheels — copies of other projects a solver could read the deleted code
  from (:mod:`labbot.evals.contamination` looks for what is left). In the task venv, pip's, setuptools' and wheel's
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
- limits: a wall-clock timeout after which the whole process tree dies (bwrap's PID 1 goes, and the kernel ends
  every process of the namespace, whatever forked), address space (``RLIMIT_AS``), file size and no core dumps,
  set with util-linux ``prlimit`` before bwrap starts.

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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from labbot.common.errors import BadRequest
from labbot.evals.proxy import INSIDE as PROXY_INSIDE
from labbot.evals.proxy import AllowListProxy, forwarder_argv, proxy_env

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


@dataclass(frozen=True)
class Limits:
    """Per-command limits: wall clock, address space and the largest file a command may write."""

    timeout_s: float = 600.0
    memory_mb: int = 4096
    file_mb: int = 1024


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0

    @property
    def success(self) -> bool:
        return self.returncode == 0 and not self.timed_out


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


def venv_masks(venv: Path) -> list[Path]:
    """The vendored trees of a task venv's toolchain, as paths inside the sandbox (under ``/venv``)."""
    out = []
    for site in _site_dirs(venv / "lib"):
        for tree in VENDORED_TREES:
            if (site / tree).is_dir():
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
) -> list[str]:
    """The bubblewrap command line that runs ``cmd`` sealed as described in the module docstring; ``proxy`` is the
    folder of a started :class:`~labbot.evals.proxy.AllowListProxy` (required with ``network="proxy"``)."""
    if spec.network == "proxy" and proxy is None:
        raise BadRequest('a sandbox with network="proxy" needs its proxy\'s folder: build it with Sandbox(spec)')
    argv = [
        bwrap(),
        "--unshare-all",
        *(["--json-status-fd", str(status_fd)] if status_fd is not None else []),
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
        "--tmpfs", "/tmp",
        "--tmpfs", "/home",
        "--dir", HOME,
        "--bind", str(spec.workspace), WORKDIR,
    ]  # fmt: skip
    if spec.venv is not None:
        argv += ["--ro-bind", str(spec.venv), VENV]
        argv += _masked(venv_masks(spec.venv) if not spec.vendored else [])
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


def limited(argv: list[str], limits: Limits) -> list[str]:
    """``argv`` under util-linux ``prlimit``: the limits every process of the sandbox inherits (set before bwrap
    runs, so nothing inside can raise them; no ``preexec_fn``, which is unsafe in a threaded process)."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise BadRequest("util-linux's prlimit is not installed: eval sandboxes need it (apt-get install util-linux)")
    mem, size = limits.memory_mb * 1024 * 1024, limits.file_mb * 1024 * 1024
    return [prlimit, f"--as={mem}", f"--fsize={size}", "--core=0", "--", *argv]


def _tail(data: bytes) -> str:
    text = data[-MAX_OUTPUT:].decode(errors="replace")
    return text if len(data) <= MAX_OUTPUT else f"…(first {len(data) - MAX_OUTPUT} bytes cut)\n{text}"


class Sandbox:
    """One sample's sandbox: every :meth:`exec` is a fresh sealed process tree over the same workspace.

    With ``network="proxy"`` it starts its own allow-list proxy (``spec.allow_hosts``), stopped by :meth:`close`."""

    def __init__(self, spec: SandboxSpec) -> None:
        if not spec.workspace.is_dir():
            raise BadRequest(f"the sandbox workspace {spec.workspace} is not a folder")
        if spec.venv is not None and not (spec.venv / "bin" / "python").exists():
            raise BadRequest(f"the sandbox venv {spec.venv} has no bin/python: build it with evals.venvs first")
        if spec.network not in ("none", "proxy"):
            raise BadRequest(f'sandbox network {spec.network!r} is not one of "none", "proxy"')
        if spec.allow_hosts and spec.network != "proxy":
            raise BadRequest(
                'allow_hosts is only used with network="proxy" (with "none" nothing is reachable): set both, or '
                "leave [eval] allow_hosts empty"
            )
        self.spec = spec
        self.proxy = AllowListProxy(spec.allow_hosts).start() if spec.network == "proxy" else None
        self._root = Path(tempfile.mkdtemp(prefix="labbot-sandbox-"))
        self._etc = _etc(self._root)

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def argv(
        self,
        cmd: Sequence[str],
        *,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        status_fd: int | None = None,
    ) -> list[str]:
        spec = self.spec if not env else dataclasses.replace(self.spec, env={**self.spec.env, **env})
        proxy = self.proxy.folder if self.proxy is not None else None
        return limited(bwrap_argv(spec, self._etc, cmd, cwd=cwd, proxy=proxy, status_fd=status_fd), spec.limits)

    def exec(
        self,
        cmd: Sequence[str],
        *,
        input: bytes | str | None = None,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> ExecResult:
        """Run ``cmd`` sealed; at the timeout every process it started is killed and ``timed_out`` is set. When it
        returns, no process of the sandbox is left (see :func:`_namespace_emptied`)."""
        timeout = self.spec.limits.timeout_s if timeout_s is None else timeout_s
        data = input.encode() if isinstance(input, str) else input
        start = time.monotonic()
        status_r, status_w = os.pipe()
        try:
            proc = subprocess.Popen(self.argv(cmd, cwd=cwd, env=env, status_fd=status_w), **_launch(data, status_w))
        finally:
            os.close(status_w)
        try:
            try:
                out, err = proc.communicate(data, timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill(proc.pid)
                out, err = proc.communicate()
                timed_out = True
            _namespace_emptied(_read_status(status_r))
        finally:
            os.close(status_r)
        return ExecResult(proc.returncode, _tail(out), _tail(err), timed_out, time.monotonic() - start)

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
        status_r, status_w = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv(cmd, cwd=cwd, env=env, status_fd=status_w), **_launch(data, status_w)
            )
        finally:
            os.close(status_w)
        try:
            # communicate() runs as a task of its own and is never cancelled: at the timeout the process tree is
            # killed, its pipes close, and what it printed until then is still read (wait_for would lose it)
            reading = asyncio.ensure_future(proc.communicate(data))
            try:
                done, _ = await asyncio.wait({reading}, timeout=timeout)
                timed_out = not done
                if timed_out:
                    _kill(proc.pid)
                out, err = await reading
            except asyncio.CancelledError:
                _kill(proc.pid)
                raise
            status = _read_status(status_r)
            if status.get("child-pid"):
                await asyncio.to_thread(_namespace_emptied, status)
        finally:
            os.close(status_r)
        assert proc.returncode is not None
        return ExecResult(proc.returncode, _tail(out), _tail(err), timed_out, time.monotonic() - start)


def _launch(data: bytes | None, status_fd: int) -> dict[str, Any]:
    """How bwrap is started, by :meth:`Sandbox.exec` and :meth:`Sandbox.aexec` alike: its own session (killed as a
    group), a minimal environment of its own (it is the sandbox's PID 1), and bwrap's status pipe passed on."""
    return {
        "stdin": subprocess.PIPE if data is not None else subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "start_new_session": True,
        "env": LAUNCH_ENV,
        "pass_fds": (status_fd,),
    }


def _read_status(fd: int) -> dict[str, int]:
    """What bwrap wrote to ``--json-status-fd`` (its child's host pid, the namespaces' inodes, the exit code); read
    once bwrap has exited, so the pipe holds all of it."""
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
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
