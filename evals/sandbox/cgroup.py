"""One eval sample's control group: the kernel's bound on the processes and the memory of everything the sample's
commands start, together (:class:`~labbot.evals.sandbox.bwrap.Sandbox` makes one per sample and puts every command of it
in it).

Where it is made, per controller (``pids``, ``memory``):

- cgroup v2, when the cgroup labbot runs in (or the folder ``$LABBOT_SANDBOX_CGROUP`` names, e.g. one systemd
  delegated with ``Delegate=yes``) offers the controller to its children: ``pids.max``, ``memory.max`` and
  ``memory.swap.max=0``; what was hit is read from ``pids.events`` (``max``) and ``memory.events`` (``oom_kill``);
- cgroup v1, when the controller's hierarchy is mounted and labbot's own group in it is writable (root):
  ``pids.max``, ``memory.limit_in_bytes`` and, with swap accounting, ``memory.memsw.limit_in_bytes`` at the same
  value (no swap beyond it); hits from ``pids.events`` and ``memory.oom_control`` (``oom_kill``).

A controller with neither is left to the sandbox's fallback (see :mod:`labbot.evals.sandbox.bwrap`). A command joins the
group race-free: :meth:`SampleCgroup.join` wraps its argv in ``sh -c`` that writes its own pid into each
``cgroup.procs`` and only then execs prlimit and bwrap, so every process it forks is born inside.
:meth:`SampleCgroup.close` kills what is left (``cgroup.kill`` where the kernel has it, else every pid listed) and
removes the folders.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ENV_PARENT = "LABBOT_SANDBOX_CGROUP"  # a delegated cgroup v2 folder to make the samples' groups in
ENV_SWITCH = "LABBOT_SANDBOX_CGROUPS"  # "off": no cgroup, the fallback (for tests, or a host where they misbehave)
Controller = Literal["pids", "memory"]
CONTROLLERS: tuple[Controller, ...] = ("pids", "memory")
# the shell that joins the group, then becomes the command: args are the cgroup.procs files, "--", the argv
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class Folder:
    """One controller's folder of the sample's group."""

    controller: Controller
    path: Path
    version: Literal[1, 2]


def cgroups_enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("off", "0", "false", "no")


def _mounts() -> tuple[Path | None, dict[str, Path]]:
    """The cgroup2 mount and each v1 controller's mount, from ``/proc/self/mountinfo``."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            point = Path(fields[4].replace("\\040", " "))
            if tail[0] == "cgroup2" and v2 is None:
                v2 = point
            elif tail[0] == "cgroup":
                for option in tail[2].split(","):
                    if option in CONTROLLERS:
                        v1.setdefault(option, point)
    return v2, v1


def _own_groups() -> tuple[str | None, dict[str, str]]:
    """This process's v2 group path and its v1 group path per controller, from ``/proc/self/cgroup``."""
    v2: str | None = None
    v1: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if names == "":
                v2 = path
            for name in names.split(","):
                if name in CONTROLLERS:
                    v1[name] = path
    return v2, v1


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _v2_parent(mount: Path | None, own: str | None, wanted: set[str]) -> tuple[Path | None, set[str]]:
    """A v2 folder whose children get ``wanted`` controllers (enabling them in its subtree if allowed), and which."""
    given = os.environ.get(ENV_PARENT)
    if given:
        parent = Path(given)
    elif mount is not None and own is not None:
        parent = mount / own.lstrip("/")
    else:
        return None, set()
    try:
        offered = set((parent / "cgroup.controllers").read_text().split()) & wanted
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None, set()
    for name in sorted(offered - enabled):
        # refused (EBUSY) when labbot's own process sits in this folder: point $LABBOT_SANDBOX_CGROUP at a delegated
        # folder of its own instead
        with contextlib.suppress(OSError):
            _write(parent / "cgroup.subtree_control", f"+{name}")
            enabled.add(name)
    return parent, offered & enabled


class SampleCgroup:
    """The group of one sample: made by :meth:`create`, joined by every command (:meth:`join`), ended by
    :meth:`close`."""

    def __init__(self, folders: list[Folder], pids: int, memory_bytes: int) -> None:
        self.folders = folders
        self.pids = pids
        self.memory_bytes = memory_bytes

    @classmethod
    def create(cls, pids: int, memory_bytes: int, *, enabled: bool = True) -> SampleCgroup:
        """A group with whatever controllers this host lets labbot use (possibly none: see :meth:`mechanisms`);
        ``enabled=False`` (or ``$LABBOT_SANDBOX_CGROUPS=off``): none."""
        group = cls([], pids, memory_bytes)
        if not enabled or not cgroups_enabled():
            return group
        name = f"labbot-sample-{uuid.uuid4().hex[:12]}"
        v2_mount, v1_mounts = _mounts()
        v2_own, v1_own = _own_groups()
        for controller in CONTROLLERS:
            if controller in v1_mounts and controller in v1_own:
                path = v1_mounts[controller] / v1_own[controller].lstrip("/") / name
                group._add(Folder(controller, path, 1))
        wanted: set[str] = {c for c in CONTROLLERS if not group.has(c)}
        parent, usable = _v2_parent(v2_mount, v2_own, wanted) if wanted else (None, set())
        if parent is not None:
            for controller in CONTROLLERS:
                if controller in usable:
                    group._add(Folder(controller, parent / name, 2))
        return group

    def _add(self, folder: Folder) -> None:
        """Make ``folder`` with its limit; one this host refuses (not root, read-only) is left to the fallback."""
        made = False
        try:
            try:
                folder.path.mkdir()
                made = True
            except FileExistsError:  # v2: one folder for both controllers
                pass
            self._limit(folder)
        except OSError:
            if made:
                with contextlib.suppress(OSError):
                    folder.path.rmdir()
            return
        self.folders.append(folder)

    def _limit(self, folder: Folder) -> None:
        if folder.controller == "pids":
            _write(folder.path / "pids.max", str(self.pids))
        elif folder.version == 2:
            _write(folder.path / "memory.max", str(self.memory_bytes))
            if (folder.path / "memory.swap.max").exists():
                _write(folder.path / "memory.swap.max", "0")
        else:
            _write(folder.path / "memory.limit_in_bytes", str(self.memory_bytes))
            if (folder.path / "memory.memsw.limit_in_bytes").exists():
                _write(folder.path / "memory.memsw.limit_in_bytes", str(self.memory_bytes))
            else:
                with contextlib.suppress(OSError):
                    _write(folder.path / "memory.swappiness", "0")

    def has(self, controller: Controller) -> bool:
        return any(f.controller == controller for f in self.folders)

    def mechanisms(self) -> dict[str, str]:
        """The controllers in force, each as ``"cgroup v1"`` or ``"cgroup v2"`` (none: the sandbox's fallback)."""
        return {f.controller: f"cgroup v{f.version}" for f in self.folders}

    def join(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the group: a shell writes its pid into each ``cgroup.procs``, then execs it."""
        if not self.folders:
            return argv
        procs = sorted({str(f.path / "cgroup.procs") for f in self.folders})
        return ["/bin/sh", "-c", JOIN, "sh", *procs, "--", *argv]

    def counters(self) -> dict[Controller, int]:
        """How often each limit was hit so far: forks refused at ``pids.max``, processes the OOM killer ended."""
        out: dict[Controller, int] = {}
        for f in self.folders:
            name = (
                "pids.events" if f.controller == "pids" else "memory.oom_control" if f.version == 1 else "memory.events"
            )
            key = "max" if f.controller == "pids" else "oom_kill"
            try:
                for line in (f.path / name).read_text().splitlines():
                    field, _, value = line.partition(" ")
                    if field == key:
                        out[f.controller] = int(value)
            except (OSError, ValueError):
                continue
        return out

    def pids_inside(self) -> set[int]:
        found: set[int] = set()
        for f in self.folders:
            with contextlib.suppress(OSError, ValueError):
                found |= {int(p) for p in (f.path / "cgroup.procs").read_text().split()}
        return found

    def kill(self, *, wait_s: float = 5.0) -> None:
        """Kill every process of the group and wait until it is empty (at most ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        for f in self.folders:
            if f.version == 2 and (f.path / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    _write(f.path / "cgroup.kill", "1")
        while (left := self.pids_inside()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def close(self) -> None:
        """Kill what is left and remove the folders; nothing of the group outlives its sample."""
        self.kill()
        for path in sorted({f.path for f in self.folders}, key=lambda p: len(p.parts), reverse=True):
            deadline = time.monotonic() + 5.0
            while path.exists():
                try:
                    path.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
        self.folders = []
