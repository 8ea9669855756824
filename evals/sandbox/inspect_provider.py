"""labbot's sandbox as an inspect-ai sandbox provider: ``sandbox=("labbot", LabbotSandboxConfig(...))``.

Each sample gets a fresh workspace, a copy of its task tree (``tasks/ID/repo``, git repository included) named by the
sample's ``task_id`` metadata, mounted read-write at ``/workspace`` in a :class:`~labbot.evals.sandbox.bwrap.Sandbox`:
every :meth:`LabbotSandbox.exec` is a new sealed process tree (no network, the suite's venv read-only at ``/venv``, the
sample's limits: its processes and memory together in one cgroup, everything it started killed when it ends), so nothing
a solver starts lives on between two tool calls or into scoring. ``read_file``/``write_file`` work on the workspace from
the host, opening each path component without following symlinks, so a link planted in the workspace cannot reach a host
file. Only ``/workspace`` persists: paths elsewhere are refused. Commands run as the sandbox user (uid 1000); ``root``
is not available (:class:`~inspect_ai.util.SandboxUserUnsupportedError`).

Registration: importing this module registers the provider (``@sandboxenv(name="labbot")``); the package's
``inspect_ai`` entry point (pyproject) names this module so ``inspect`` finds it too (``inspect sandbox`` commands,
``--sandbox labbot``), once labbot is (re)installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, Literal, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict

from labbot.common.errors import BadRequest
from labbot.evals.sandbox.bwrap import WORKDIR, Limits, Sandbox, SandboxSpec, bwrap
from labbot.evals.suite import task_repo

PROVIDER = "labbot"
TASK_ID_KEY = "task_id"  # the sample metadata naming the task whose tree the workspace starts from
USERS = (None, "sandbox", "1000")


class LabbotSandboxConfig(BaseModel):
    """The provider's configuration: the suite, its venv, and each command's limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    suite_dir: str
    venv: str | None = None
    timeout_s: float = 600.0  # one command's wall clock (a tool call's own timeout can only lower it)
    memory_mb: int = 4096
    file_mb: int = 1024
    pids: int = 1024  # processes (and threads) of the whole sample
    tmp_mb: int = 512  # each of /tmp and home
    allow_hosts: tuple[str, ...] = ()  # reachable through the allow-list proxy; none: no network at all
    toolchain: tuple[str, ...] = ()  # the venv's vendored trees the suite's tests import (suite.json's toolchain)

    @property
    def limits(self) -> Limits:
        return Limits(
            timeout_s=self.timeout_s, memory_mb=self.memory_mb, file_mb=self.file_mb, pids=self.pids, tmp_mb=self.tmp_mb
        )


def _config(config: SandboxEnvironmentConfigType | None) -> LabbotSandboxConfig:
    if isinstance(config, LabbotSandboxConfig):
        return config
    if isinstance(config, BaseModel):
        return LabbotSandboxConfig(**config.model_dump())
    raise BadRequest(
        f"the labbot sandbox needs a LabbotSandboxConfig (the suite folder, its venv), got {config!r}: "
        "pass sandbox=('labbot', LabbotSandboxConfig(suite_dir=..., venv=...))"
    )


def _inside(path: str, cwd: str = WORKDIR) -> PurePosixPath:
    """A path as the sandbox sees it, made absolute against ``cwd``."""
    p = PurePosixPath(path)
    return p if p.is_absolute() else PurePosixPath(cwd) / p


def workspace_rel(path: str) -> list[str]:
    """The components of ``path`` below ``/workspace`` (relative paths are below it); PermissionError elsewhere."""
    parts: list[str] = []
    for part in _inside(path).parts[1:]:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise PermissionError(f"{path}: outside {WORKDIR}")
            parts.pop()
            continue
        parts.append(part)
    if not parts or parts[0] != WORKDIR.strip("/"):
        raise PermissionError(f"{path}: only files under {WORKDIR} persist in this sandbox")
    return parts[1:]


@contextlib.contextmanager
def _dir_fd(path: Path) -> Any:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def open_beneath(root: Path, parts: list[str], flags: int, *, create_parents: bool = False) -> int:
    """Open ``root/parts...`` without following a symlink anywhere on the way (a link is refused)."""
    if not parts:
        raise IsADirectoryError(str(root))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create_parents:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW, 0o644, dir_fd=fd)
    finally:
        os.close(fd)


@sandboxenv(name=PROVIDER)
class LabbotSandbox(SandboxEnvironment):
    """One sample's workspace and the sealed sandbox every command of it runs in."""

    def __init__(self, sandbox: Sandbox, root: Path, task_id: str) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.root = root  # the sample's own temporary folder (the workspace is root/work)
        self.task_id = task_id

    @property
    def workspace(self) -> Path:
        return self.sandbox.spec.workspace

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return LabbotSandboxConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        cfg = _config(config)
        bwrap()  # a clear message now rather than one per sample
        if not Path(cfg.suite_dir).is_dir():
            raise BadRequest(f"the suite folder {cfg.suite_dir} does not exist")
        if cfg.venv is not None and not (Path(cfg.venv) / "bin" / "python").exists():
            raise BadRequest(f"the venv {cfg.venv} has no bin/python")

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        cfg = _config(config)
        task_id = metadata.get(TASK_ID_KEY)
        if not task_id:
            raise BadRequest(f"a labbot sandbox sample needs {TASK_ID_KEY!r} in its metadata (the suite task id)")
        tree = task_repo(Path(cfg.suite_dir), task_id)
        if not tree.is_dir():
            raise BadRequest(f"the suite at {cfg.suite_dir} has no task tree for {task_id} ({tree})")
        root = Path(tempfile.mkdtemp(prefix=f"labbot-sample-{task_id}-"))
        try:
            workspace = root / "work"
            shutil.copytree(tree, workspace, symlinks=True)
            spec = SandboxSpec(
                workspace=workspace,
                venv=Path(cfg.venv) if cfg.venv else None,
                limits=cfg.limits,
                network="proxy" if cfg.allow_hosts else "none",
                allow_hosts=cfg.allow_hosts,
                toolchain=cfg.toolchain,
            )
            return {"default": LabbotSandbox(Sandbox(spec), root, task_id)}
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        from labbot.evals.scoring.score import kill_leftovers  # score imports nothing of inspect; keep it that way

        for env in environments.values():
            box = env.as_type(LabbotSandbox)
            kill_leftovers(box.workspace)
            box.sandbox.close()
            shutil.rmtree(box.root, ignore_errors=True)

    # ------------------------------------------------------------------ commands and files

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        if user not in USERS:
            raise SandboxUserUnsupportedError(f"the labbot sandbox runs commands as 'sandbox' (uid 1000), not {user}")
        limit = self.sandbox.spec.limits.timeout_s
        timeout_s = limit if timeout is None else min(float(timeout), limit)
        result = await self.sandbox.aexec(
            cmd, input=input, cwd=str(_inside(cwd or WORKDIR)), env=env or None, timeout_s=timeout_s
        )
        if result.timed_out:
            raise TimeoutError(f"the command ran past its {timeout_s:g} s limit and was killed with all it started")
        stderr = result.stderr
        if result.limit is not None:  # the agent reads why, in the tool call's output
            stderr = f"{stderr.rstrip()}\n[labbot] the command hit {result.limit_note}".lstrip()
        return ExecResult(result.success, result.returncode, result.stdout, stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode() if isinstance(contents, str) else contents
        fd = open_beneath(
            self.workspace, workspace_rel(file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, create_parents=True
        )
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        fd = open_beneath(self.workspace, workspace_rel(file), os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > SandboxEnvironmentLimits.MAX_READ_FILE_SIZE:
                raise OutputLimitExceededError(f"{SandboxEnvironmentLimits.MAX_READ_FILE_SIZE} bytes", None)
            data = f.read()
        return data.decode("utf-8") if text else data

    def default_polling_interval(self) -> float:
        return 0.2
