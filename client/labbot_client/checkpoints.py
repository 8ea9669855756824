"""Checkpoints the way labbot restarts a run: one folder, one file a step, written atomically, newest few kept.

labbot restarts a dead run by launching it again with ``LABBOT_ATTEMPT`` one higher and the same
``LABBOT_CHECKPOINT_DIR``; a job that resumes from the newest checkpoint that loads picks up where it died. This
module holds the part every job shares and no framework owns — where the folder is, what a checkpoint file is
called, how it is written so a crash mid-write never leaves a half file under a real name, and pruning — and
leaves serialisation to the job (``torch.save``, ``safetensors``, ``pickle``)::

    from labbot_client.checkpoints import CheckpointDir, JobEnv

    job = JobEnv.from_environ()
    ckpts = CheckpointDir(job.checkpoint_dir, suffix=".pt", keep=3)
    for step, where in reversed(ckpts.list()):     # newest first; skip the ones that do not load
        with ckpts.open(where) as f:
            state = torch.load(f)
        ...
    ckpts.save(step, lambda f: torch.save(state, f))

**A local folder or an object store.** ``LABBOT_CHECKPOINT_DIR`` is a folder (a path), or the URL of one in an
object store (``s3://bucket/prefix/runs/RUN/checkpoints``, any fsspec URL) when labbot keeps checkpoints there, so
no folder has to be shared by every node. For a URL this module imports fsspec (and s3fs for ``s3://``: install
``labbot-client[s3]``) when it is first used, never before; for a folder it uses the standard library alone.
Credentials for the store come the usual way (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for an S3-compatible server, or fsspec's
``FSSPEC_S3_*``); none is ever logged.

**How a save commits.** A folder: the bytes go to ``.ckpt_XXXXXXXX.pt.tmp.PID``, are fsynced, then renamed over the
final name. An object store: ``write(f)`` fills a local temporary file first (so an error of the job's own
serialisation raises as it always has), which is uploaded as ``ckpt_XXXXXXXX.pt.partial`` and then committed by
``fs.mv`` to ``ckpt_XXXXXXXX.pt`` (on S3 a server-side CopyObject, which like a PUT makes the object visible whole
or not at all, then the delete of the ``.partial``). ``list`` names only final names, so a reader never takes a
``.partial`` — one a crash left behind, or one still being uploaded — for a checkpoint.

**When the store cannot be reached.** A save to an object store that fails (unreachable, refused, throttled) is
logged as a warning (the store's URL and the error's type and text, with any credential value scrubbed) and
skipped: ``save`` returns None, training goes on, the next save tries again, and the checkpoints already written
stay (nothing is pruned after a failed save). A local folder that cannot be written raises, as before: that is the
node's own disk, and retrying will not mend it.
"""

from __future__ import annotations

import io
import logging
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["CheckpointDir", "JobEnv", "Location", "is_url", "join", "roll_back"]

ENV_ATTEMPT = "LABBOT_ATTEMPT"
ENV_CHECKPOINT_DIR = "LABBOT_CHECKPOINT_DIR"
ENV_RUN_ID = "LABBOT_RUN_ID"
ENV_RESUME_STEP = "LABBOT_RESUME_STEP"
PARTIAL = ".partial"  # an object-store checkpoint being uploaded (or left by a crash): never a checkpoint

#: a local folder (a Path) or an object store's URL (a str such as ``s3://bucket/prefix``)
Location = Path | str

log = logging.getLogger(__name__)
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# names whose values are credentials: scrubbed from anything this module logs (an error's text may quote them)
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|ACCESS_KEY|API_?KEY|CREDENTIAL|^FSSPEC_.*_KEY$", re.IGNORECASE)


def is_url(location: str | os.PathLike[str]) -> bool:
    """True for an object store's URL (``s3://…``, ``gs://…``, ``memory://…``); a path or ``file://`` is local."""
    m = _URL.match(os.fspath(location))
    return m is not None and m.group(1).lower() != "file"


def _location(value: str | os.PathLike[str]) -> Location:
    """A URL as given (without a trailing slash), anything else as an absolute local Path."""
    text = os.fspath(value)
    if is_url(text):
        return text.rstrip("/")
    if text.startswith("file://"):
        text = text[len("file://") :]
    return Path(text).expanduser().resolve()


def join(location: Location, *parts: str) -> Location:
    """``location / part / …`` for a folder or a URL alike."""
    if isinstance(location, Path):
        return location.joinpath(*parts)
    return "/".join([location.rstrip("/"), *parts])


def scrub(text: str) -> str:
    """``text`` without the values of the environment's credentials (8 characters or more)."""
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name) and len(value.strip()) >= 8:
            text = text.replace(value.strip(), "[redacted]")
    return text


@dataclass(frozen=True)
class JobEnv:
    """What labbot tells a job through its environment (all optional: a job runs the same outside labbot)."""

    run_id: str | None
    attempt: int
    checkpoint_dir: Location  # an absolute local folder, or an object store's URL
    # a remedy's attempt: labbot rolled the run back to this step's checkpoint (0: to the start) and set the later
    # ones aside (``roll_back``); None on every other attempt
    resume_step: int | None = None

    @classmethod
    def from_environ(cls, checkpoint_dir: str | os.PathLike[str] | None = None) -> JobEnv:
        raw_attempt = os.environ.get(ENV_ATTEMPT, "").strip() or "1"
        try:
            attempt = int(raw_attempt)
        except ValueError:
            raise ValueError(f"{ENV_ATTEMPT} must be an integer, got {raw_attempt!r}") from None
        if checkpoint_dir is None:
            checkpoint_dir = os.environ.get(ENV_CHECKPOINT_DIR, "").strip() or "./checkpoints"
        raw_resume = os.environ.get(ENV_RESUME_STEP, "").strip()
        try:
            resume_step = int(raw_resume) if raw_resume else None
        except ValueError:
            raise ValueError(f"{ENV_RESUME_STEP} must be an integer, got {raw_resume!r}") from None
        return cls(
            run_id=os.environ.get(ENV_RUN_ID, "").strip() or None,
            attempt=attempt,
            # absolute, so workers (whatever their cwd) share the driver's folder; a URL stays a URL
            checkpoint_dir=_location(checkpoint_dir),
            resume_step=resume_step,
        )

    @property
    def is_restart(self) -> bool:
        """True on attempt 2, 3, ...: labbot relaunched this run after it died."""
        return self.attempt > 1


@dataclass(frozen=True)
class CheckpointDir:
    """``{root}/ckpt_{step:08d}{suffix}`` files, written atomically, the newest ``keep`` kept (0 keeps all).

    ``root`` is a local folder or an object store's URL (see the module's docstring)."""

    root: Location
    suffix: str = ".pt"
    keep: int = 3

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", _location(self.root))

    @property
    def remote(self) -> bool:
        return isinstance(self.root, str)

    def _name(self, step: int) -> str:
        if step < 0:
            raise ValueError(f"a checkpoint step is >= 0, got {step}")
        return f"ckpt_{step:08d}{self.suffix}"

    def path(self, step: int) -> Location:
        return join(self.root, self._name(step))

    def _fs(self) -> tuple[Any, str]:
        """fsspec's filesystem for the URL and the root's path on it (imported only here: a folder never needs it)."""
        try:
            import fsspec
        except ImportError:  # pragma: no cover - depends on what the job's image installed
            raise ImportError(
                f"checkpoints at {self.root} need fsspec (and s3fs for s3://): pip install 'labbot-client[s3]'"
            ) from None
        fs, path = fsspec.core.url_to_fs(str(self.root))
        return fs, str(path).rstrip("/")

    def _url(self, fs: Any, path: str) -> str:
        return str(fs.unstrip_protocol(path))

    def list(self) -> list[tuple[int, Location]]:
        """(step, location) of every complete checkpoint, oldest first; a ``.partial`` is never one."""
        pattern = re.compile(r"^ckpt_(\d{8})" + re.escape(self.suffix) + "$")
        if isinstance(self.root, Path):
            if not self.root.is_dir():
                return []
            found: list[tuple[int, Location]] = []
            for p in self.root.iterdir():
                m = pattern.match(p.name)
                if m and p.is_file():
                    found.append((int(m.group(1)), p))
            return sorted(found)
        fs, root = self._fs()
        fs.invalidate_cache(root)  # another attempt (or process) may have written since this one last looked
        try:
            entries = fs.ls(root, detail=True)
        except FileNotFoundError:
            return []
        remote: list[tuple[int, Location]] = []
        for e in entries:
            name = str(e["name"]).rstrip("/").rsplit("/", 1)[-1]
            m = pattern.match(name)
            if m and e.get("type") == "file":
                remote.append((int(m.group(1)), self._url(fs, f"{root}/{name}")))
        return sorted(remote)

    def latest(self) -> tuple[int, Location] | None:
        """The newest complete checkpoint (step, location), or None."""
        found = self.list()
        return found[-1] if found else None

    def open(self, where: Location | int) -> BinaryIO:
        """A checkpoint (a location ``list`` gave, or a step) opened for reading; the caller closes it. From an
        object store the whole object is read into memory first (``torch.load`` seeks all over a file)."""
        target = self.path(where) if isinstance(where, int) else where
        if isinstance(target, Path) or not is_url(target):
            return open(target, "rb")
        fs, _ = self._fs()
        return io.BytesIO(fs.cat_file(target))

    def save(self, step: int, write: Callable[[BinaryIO], object]) -> Location | None:
        """Call ``write(f)`` on a temporary file, then commit it under the step's name and prune old ones.

        Returns where the checkpoint is; None when an object store could not take it (logged, training goes on)."""
        if isinstance(self.root, Path):
            return self._save_local(step, write)
        return self._save_remote(step, write)

    def _save_local(self, step: int, write: Callable[[BinaryIO], object]) -> Path:
        assert isinstance(self.root, Path)
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / self._name(step)
        tmp = self.root / f".{path.name}.tmp.{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        if self.keep:
            for _, old in self.list()[: -self.keep]:
                assert isinstance(old, Path)
                old.unlink(missing_ok=True)
        return path

    def _save_remote(self, step: int, write: Callable[[BinaryIO], object]) -> str | None:
        name = self._name(step)
        fs, root = self._fs()  # no fsspec or s3fs installed: that raises, it is no passing outage
        final, partial = f"{root}/{name}", f"{root}/{name}{PARTIAL}"
        with tempfile.TemporaryDirectory(prefix="labbot-ckpt-") as spool:
            local = Path(spool, name)
            with open(local, "wb") as f:
                write(f)  # the job's own serialisation: its errors are the job's, and raise
            try:
                fs.put_file(str(local), partial)
                fs.mv(partial, final)
            except Exception as e:  # the store: unreachable, refused, throttled — skip this one, keep training
                log.warning(
                    "checkpoint step %d was not written to %s (%s: %s); training goes on and the next checkpoint "
                    "tries again; the ones already written are kept",
                    step,
                    self.root,
                    type(e).__name__,
                    scrub(str(e)),
                )
                return None  # a .partial left behind is ignored by list() and removed by remove_partial()
        if self.keep:
            self._prune(fs)
        return self._url(fs, final)

    def _prune(self, fs: Any) -> None:
        try:
            for _, old in self.list()[: -self.keep]:
                fs.rm_file(str(old))
        except Exception as e:  # pruning again after the next save is as good
            log.warning("old checkpoints under %s were not pruned (%s: %s)", self.root, type(e).__name__, scrub(str(e)))

    def remove_partial(self) -> int:
        """Delete what a crash mid-write left behind (``.ckpt_*.tmp.*`` in a folder, ``ckpt_*.partial`` in an object
        store); returns how many."""
        if isinstance(self.root, Path):
            if not self.root.is_dir():
                return 0
            stale = list(self.root.glob(".ckpt_*.tmp.*"))
            for p in stale:
                p.unlink(missing_ok=True)
            return len(stale)
        fs, root = self._fs()
        fs.invalidate_cache(root)
        try:
            names = [str(n).rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(root, detail=False)]
        except FileNotFoundError:
            return 0
        partial = re.compile(r"^ckpt_\d{8}" + re.escape(self.suffix) + re.escape(PARTIAL) + "$")
        gone = [n for n in names if partial.match(n)]
        for n in gone:
            fs.rm_file(f"{root}/{n}")
        return len(gone)


ROLLED_BACK = "rolled-back"  # the subfolder a rollback sets later checkpoints aside in (never read as checkpoints)
_ANY_CHECKPOINT = re.compile(r"^ckpt_(\d{8})(\..+)?$")


def roll_back(root: Location | str, step: int | None, *, label: str) -> list[int]:
    """Set aside every checkpoint in ``root`` written after ``step`` (every one, for None), whatever its suffix, into
    ``{root}/rolled-back/{label}/``, so a job that resumes from the newest checkpoint resumes from ``step``'s; returns
    the steps set aside. labbot calls this before a remedy's attempt starts (``LABBOT_RESUME_STEP`` tells the job the
    step too); doing it again sets nothing more aside. Nothing is deleted: the set-aside files are there to read."""
    where = _location(root) if isinstance(root, str) else root
    limit = -1 if step is None else step
    moved: list[int] = []
    if isinstance(where, Path):
        if not where.is_dir():
            return []
        for p in sorted(where.iterdir()):
            m = _ANY_CHECKPOINT.match(p.name)
            if m and p.is_file() and int(m.group(1)) > limit:
                aside = where / ROLLED_BACK / label
                aside.mkdir(parents=True, exist_ok=True)
                os.replace(p, aside / p.name)
                moved.append(int(m.group(1)))
        return moved
    fs, base = CheckpointDir(where)._fs()
    fs.invalidate_cache(base)
    try:
        entries = fs.ls(base, detail=True)
    except FileNotFoundError:
        return []
    for e in entries:
        name = str(e["name"]).rstrip("/").rsplit("/", 1)[-1]
        m = _ANY_CHECKPOINT.match(name)
        if m and e.get("type") == "file" and int(m.group(1)) > limit:
            fs.mv(f"{base}/{name}", f"{base}/{ROLLED_BACK}/{label}/{name}")
            moved.append(int(m.group(1)))
    return sorted(moved)
