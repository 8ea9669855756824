"""Per-agent artifact stores: content-addressed blobs under LABBOT_ARTIFACTS_URL, metadata rows in the database.

Storage layer (imports nothing from labbot above it). Agents write reports, plots and small datasets here through
their tools; the bot posts any artifact into a thread as a file (``open_for_thread``). Layout under the root URL
(any fsspec URL: a local folder by default, ``s3://bucket/prefix`` the same way; the filesystem is the one seam)::

    blobs/<sha[:2]>/<sha256>   the bytes, once per distinct content (dedup across names and agents)
    tmp/<uuid>.part            a put in flight: hashed while written, then moved into place

The rules:

* Names are per agent and are only names: ``../x`` or ``a/b`` never reach a path, the blob path comes only from the
  sha256. A put of a name the agent already has **replaces** it: same id, shares kept, new content.
* An agent reads its own artifacts and those shared with it; anything else is "not found" (the error does not reveal
  that another agent has it). Only the owner shares, replaces or deletes.
* The quota is per agent and counts the size of every row it owns, even when the blob is shared with another row
  (its own or another agent's): what an agent may use does not depend on what others happen to have stored.
* A blob is removed when the last row pointing at it is deleted or replaced.

**On an object store** (``LABBOT_ARTIFACTS_URL=s3://bucket/prefix``; credentials and endpoint from the usual AWS
variables, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_ENDPOINT_URL``, or fsspec's ``FSSPEC_S3_*``) the same code runs through s3fs, and the same rule holds: no
half-written blob is ever visible under its final name. A put is uploaded to ``tmp/<uuid>.part`` (one PUT, or a
multipart upload for a large stream, which S3 makes visible only when it completes), then moved to
``blobs/<sha>``: s3fs's move is a server-side CopyObject, which like a PUT makes the new object visible whole or not
at all, followed by the delete of the temp key. The temp key is needed because a stream's sha256 — and so its
final name — is known only once it has been read. A crash mid-put leaves at most a ``tmp/`` object, never a blob.
Deletes are S3 DeleteObject calls (idempotent). Errors and labbot's log never carry the credentials (botocore's
own DEBUG logging would quote them: ``labbot serve`` holds the AWS SDK's loggers at WARNING).

Blobs and rows change together under one lock per store, so one labbot process (``labbot serve``) keeps the two
consistent; a crash between placing a blob and committing its row leaves an unreferenced blob, never a row without
its bytes.

Errors (all carry a message saying what was wrong and what to do)::

    ArtifactError
     ├── BadArtifactRequest   an empty or over-long name, a str where bytes or a Path belong, a malformed sha256
     ├── QuotaExceeded        the put would take the agent past its quota (nothing is left behind)
     ├── ArtifactNotFound     no such artifact among the agent's own or those shared with it
     └── NotShared            the artifact is only shared with this agent: sharing or deleting it is its owner's
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import mimetypes
import mmap
import os
import re
import secrets
import stat
import threading
import uuid
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractFileSystem
from sqlalchemy import exists, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from labbot.common.humanize import format_bytes
from labbot.storage.db import Database
from labbot.storage.models import Artifact, ArtifactShare, utcnow

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_QUOTA_BYTES",
    "ArtifactError",
    "ArtifactNotFound",
    "ArtifactStore",
    "BadArtifactRequest",
    "NotShared",
    "QuotaExceeded",
]

DEFAULT_QUOTA_BYTES = 1 << 30  # 1 GiB per agent
DEFAULT_CHUNK_BYTES = 8 << 20  # large reads: per-call overhead vanishes, two chunks in memory at most
_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # as run ids: no 0/o, 1/l/i (ids are read aloud and typed)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_NAME = 200  # Artifact.name
_MAX_AGENT = 100  # Artifact.owner_agent, ArtifactShare.shared_with


class ArtifactError(Exception):
    """Base of the artifact store's errors; the message is meant for the agent or person who asked."""


class BadArtifactRequest(ArtifactError):
    pass


class QuotaExceeded(ArtifactError):
    pass


class ArtifactNotFound(ArtifactError):
    pass


class NotShared(ArtifactError):
    pass


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


Data = bytes | bytearray | memoryview | Readable | os.PathLike[str]


@dataclass
class _Staged:
    """Content ready to become a blob: hashed, and either written to a temp blob or still in memory (bytes)."""

    sha256: str
    size: int
    tmp: str | None = None
    data: memoryview | None = None
    content_type: str = "application/octet-stream"
    meta: dict[str, Any] = field(default_factory=dict)


class _TooBig(Exception):
    """A streamed put went past the agent's allowance (args: the bytes read so far)."""


def _full(agent: str, name: str, size: str, total: str, quota: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"agent {agent}'s store is full: {name!r} ({size}) would bring it to {total} of {format_bytes(quota)}; "
        "delete some of its artifacts or raise [artifacts] quota"
    )


def _read_mapping(fd: int) -> mmap.mmap:
    """A read-only mapping of a whole file, its pages mapped in at once where the OS can (Linux's MAP_POPULATE:
    one call instead of a page fault per 4 KiB, ~15% of a 100 MB hash)."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate:
        return mmap.mmap(fd, 0, flags=mmap.MAP_SHARED | populate, prot=mmap.PROT_READ)
    return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)


def _kernel_copy(src: int, dst: int, size: int) -> None:
    offset = 0
    while offset < size:
        n = os.copy_file_range(src, dst, size - offset, offset, offset)
        if n == 0:  # the file shrank under us: the stat check after the copy says so
            return
        offset += n


def new_artifact_id() -> str:
    return "a" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(7))


def _check(value: str, what: str, longest: int) -> None:
    if not value or len(value) > longest:
        raise BadArtifactRequest(f"{what} {value!r} is not valid: use 1 to {longest} characters")


class ArtifactStore:
    """Every agent's store, over one database and one fsspec root.

    Args:
        db: the labbot database (migrated: the ``artifacts`` and ``artifact_shares`` tables).
        root_url: LABBOT_ARTIFACTS_URL, or any folder under it; a plain path is a local folder.
        quota_bytes: each agent's quota; ``quotas`` overrides it for named agents.
        fs: the filesystem to use instead of the one the URL names (tests, pre-configured credentials).
        chunk_bytes: how much a put or verify reads at a time.
    """

    def __init__(
        self,
        db: Database,
        root_url: str,
        *,
        quota_bytes: int = DEFAULT_QUOTA_BYTES,
        quotas: Mapping[str, int] | None = None,
        fs: AbstractFileSystem | None = None,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ) -> None:
        if fs is None:
            fs, root = fsspec.core.url_to_fs(root_url)
        else:
            root = fs._strip_protocol(root_url)
        self.db = db
        self.fs: AbstractFileSystem = fs
        self.root: str = root.rstrip("/")
        self.quota_bytes = quota_bytes
        self.quotas = dict(quotas or {})
        self.chunk_bytes = chunk_bytes
        self._local = isinstance(fs, LocalFileSystem)  # paths under root are on the local filesystem
        # a blob's existence and the rows that reference it change together (see the module docstring)
        self._lock = threading.Lock()
        self.fs.makedirs(f"{self.root}/blobs", exist_ok=True)
        self.fs.makedirs(f"{self.root}/tmp", exist_ok=True)
        if self._local:  # what agents keep is nobody else's on this machine: folders 0700, blobs 0600
            for folder in (self.root, f"{self.root}/blobs", f"{self.root}/tmp"):
                os.chmod(folder, 0o700)

    def blob_path(self, sha256: str) -> str:
        if not _SHA256.fullmatch(sha256):
            raise BadArtifactRequest(f"{sha256!r} is not a sha256: expected 64 lowercase hex digits")
        return f"{self.root}/blobs/{sha256[:2]}/{sha256}"

    def _tmp_path(self) -> str:
        return f"{self.root}/tmp/{uuid.uuid4().hex}.part"

    # -- writing -------------------------------------------------------------------------------------------------

    def quota_for(self, agent: str) -> int:
        return self.quotas.get(agent, self.quota_bytes)

    def put(
        self,
        agent: str,
        name: str,
        data: Data,
        content_type: str | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store ``data`` (bytes, a binary file object read in chunks, or a local ``Path``) as ``name`` in
        ``agent``'s store, replacing what the name held. Returns the artifact as ``list`` shows it.

        A file is hashed while it is written to a temp blob, never read whole; content already stored (by anyone)
        writes no new blob. Raises QuotaExceeded, leaving no row, blob or temp file behind."""
        _check(agent, "agent name", _MAX_AGENT)
        _check(name, "artifact name", _MAX_NAME)
        quota = self.quota_for(agent)
        with self.db.session() as s:
            used = self._used_in(s, agent, excluding=name)
        staged = self._stage(data, allowance=quota - used, agent=agent, name=name, used=used, quota=quota)
        staged.content_type = content_type or mimetypes.guess_type(name)[0] or staged.content_type
        staged.meta = dict(meta or {})
        try:
            with self._lock:
                created = self._place(staged)
                try:
                    view, replaced_sha = self._commit(agent, name, staged, quota)
                except BaseException:
                    if created:
                        self._remove_blob_if_unreferenced(staged.sha256)
                    raise
                if replaced_sha is not None and replaced_sha != staged.sha256:
                    self._remove_blob_if_unreferenced(replaced_sha)
        finally:
            if staged.tmp is not None:
                self._discard(staged.tmp)
        return view

    def _stage(self, data: Data, *, allowance: int, agent: str, name: str, used: int, quota: int) -> _Staged:
        if isinstance(data, bytes | bytearray | memoryview):
            view = memoryview(data).cast("B")
            if view.nbytes > allowance:
                raise _full(agent, name, format_bytes(view.nbytes), format_bytes(used + view.nbytes), quota)
            return _Staged(hashlib.sha256(view).hexdigest(), view.nbytes, data=view)
        tmp = self._tmp_path()
        try:
            if isinstance(data, os.PathLike):  # a local path: only from labbot's own code, never an agent's text
                fast = self._copy_local_hashing(data, tmp, allowance) if self._local else None
                if fast is None:
                    with open(data, "rb") as src:
                        sha, size = self._write_hashing(src, tmp, allowance)
                else:
                    sha, size = fast
            elif callable(getattr(data, "read", None)):
                sha, size = self._write_hashing(data, tmp, allowance)
            else:
                raise BadArtifactRequest(
                    f"put takes bytes, a binary file object or a pathlib.Path, not {type(data).__name__}: "
                    "encode text first (text.encode())"
                )
        except BaseException as e:
            self._discard(tmp)
            if isinstance(e, _TooBig):
                seen = e.args[0]
                total = f"more than {format_bytes(used + seen)}"
                raise _full(agent, name, f"at least {format_bytes(seen)}", total, quota) from None
            raise
        return _Staged(sha, size, tmp=tmp)

    def _copy_local_hashing(self, source: os.PathLike[str], tmp: str, allowance: int) -> tuple[str, int] | None:
        """A local file into a local store: the kernel copies it (``copy_file_range``, no bytes through Python) while
        this thread hashes a read-only mapping of it, so a put costs about the hash alone. None when that cannot be
        done (an empty or special file, a filesystem without the call) — the caller then streams it. A source that
        changes while it is copied (size, mtime or inode differ after) is refused rather than stored under a
        sha256 its bytes may not have."""
        with open(source, "rb") as src:
            before = os.fstat(src.fileno())
            size = before.st_size
            if not stat.S_ISREG(before.st_mode) or size == 0:
                return None
            if size > allowance:
                raise _TooBig(size)
            with open(tmp, "wb") as out:
                copied: Future[None]
                with ThreadPoolExecutor(1, thread_name_prefix="artifact-copy") as copier:
                    copied = copier.submit(_kernel_copy, src.fileno(), out.fileno(), size)
                    with _read_mapping(src.fileno()) as view:
                        sha = hashlib.sha256(view).hexdigest()  # releases the GIL: runs beside the copy
                    try:
                        copied.result()
                    except OSError:  # no copy_file_range here (an old kernel, a filesystem without it)
                        return None
            after = os.stat(source)
        if (after.st_size, after.st_mtime_ns, after.st_ino) != (size, before.st_mtime_ns, before.st_ino):
            raise BadArtifactRequest(
                f"{os.fspath(source)} changed while it was being stored: put it again once it is written"
            )
        return sha, size

    def _write_hashing(self, src: Readable, tmp: str, allowance: int) -> tuple[str, int]:
        """Copy ``src`` to ``tmp`` in chunks, hashing each chunk on a second thread while the next is written and
        read (hashlib and file I/O both release the GIL): the put costs about max(hash, copy), not their sum."""
        digest = hashlib.sha256()
        size = 0
        pending: Future[None] | None = None
        readinto = getattr(src, "readinto", None)
        # a file's readinto fills two reused buffers in turn (one hashed while the other is filled and written):
        # no fresh chunk to allocate and page-fault each time, which costs about as much as the copy itself
        buffers = [memoryview(bytearray(self.chunk_bytes)) for _ in range(2)] if readinto else []
        with ThreadPoolExecutor(1, thread_name_prefix="artifact-hash") as hasher, self.fs.open(tmp, "wb") as out:
            while True:
                if readinto:
                    buffer = buffers[0]
                    buffers.reverse()
                    chunk: bytes | memoryview = buffer[: readinto(buffer) or 0]
                else:
                    chunk = src.read(self.chunk_bytes)
                if not chunk:
                    break
                size += len(chunk)
                if size > allowance:
                    raise _TooBig(size)
                if pending is not None:
                    pending.result()  # the previous chunk is hashed: its buffer may be filled next
                pending = hasher.submit(digest.update, chunk)
                out.write(chunk)
            if pending is not None:
                pending.result()
        return digest.hexdigest(), size

    def _place(self, staged: _Staged) -> bool:
        """Put the staged content at its blob path unless that blob exists; True when this call created it."""
        final = self.blob_path(staged.sha256)
        if self.fs.exists(final):
            return False
        if staged.tmp is None:
            assert staged.data is not None
            staged.tmp = self._tmp_path()
            with self.fs.open(staged.tmp, "wb") as out:
                out.write(staged.data)
        self.fs.makedirs(f"{self.root}/blobs/{staged.sha256[:2]}", exist_ok=True)
        if self._local:
            os.chmod(staged.tmp, 0o600)
        self.fs.mv(staged.tmp, final)
        staged.tmp = None
        return True

    def _commit(self, agent: str, name: str, staged: _Staged, quota: int) -> tuple[dict[str, Any], str | None]:
        for attempt in range(3):  # a same-name put from another process, or an id collision: look again
            try:
                with self.db.session() as s:
                    used = self._used_in(s, agent, excluding=name)
                    if used + staged.size > quota:
                        total = format_bytes(used + staged.size)
                        raise _full(agent, name, format_bytes(staged.size), total, quota)
                    now = utcnow()
                    row = s.scalars(
                        select(Artifact).where(Artifact.owner_agent == agent, Artifact.name == name)
                    ).one_or_none()
                    replaced = None
                    if row is None:
                        row = Artifact(id=new_artifact_id(), owner_agent=agent, name=name, created_at=now)
                        s.add(row)
                    else:
                        replaced = row.sha256
                    row.sha256, row.size, row.content_type = staged.sha256, staged.size, staged.content_type
                    row.meta, row.updated_at = staged.meta, now
                    s.flush()
                    return self._view(row, self._shares(s, [row.id])), replaced
            except IntegrityError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _used_in(s: Session, agent: str, *, excluding: str | None) -> int:
        stmt = select(func.coalesce(func.sum(Artifact.size), 0)).where(Artifact.owner_agent == agent)
        if excluding is not None:
            stmt = stmt.where(Artifact.name != excluding)
        return int(s.scalar(stmt) or 0)

    def _discard(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(path)

    def _remove_blob_if_unreferenced(self, sha256: str) -> None:
        """Called with the lock held, after the rows' change is committed."""
        with self.db.session() as s:
            if s.scalar(select(exists().where(Artifact.sha256 == sha256))):
                return
        self._discard(self.blob_path(sha256))

    # -- sharing and deleting -------------------------------------------------------------------------------------

    def share(self, owner_agent: str, artifact_id: str, with_agent: str) -> dict[str, Any]:
        """Let ``with_agent`` read one of ``owner_agent``'s artifacts (sharing twice is the same as once)."""
        _check(with_agent, "the name of the agent to share with", _MAX_AGENT)
        with self.db.session() as s:
            row = self._owned(s, owner_agent, artifact_id, "share")
            if with_agent != owner_agent:
                s.execute(
                    self.db.insert_ignoring_duplicates(ArtifactShare).values(
                        artifact_id=row.id, shared_with=with_agent, created_at=utcnow()
                    )
                )
            return self._view(row, self._shares(s, [row.id]))

    def delete(self, agent: str, artifact_id: str) -> None:
        """Delete one of ``agent``'s artifacts and its shares; its blob goes too unless another row still has it."""
        with self._lock:
            with self.db.session() as s:
                row = self._owned(s, agent, artifact_id, "delete")
                sha = row.sha256
                s.query(ArtifactShare).filter(ArtifactShare.artifact_id == row.id).delete()
                s.delete(row)
            self._remove_blob_if_unreferenced(sha)

    def _owned(self, s: Session, agent: str, artifact_id: str, verb: str) -> Artifact:
        row = self._visible(s, agent, artifact_id)
        if row.owner_agent != agent:
            raise NotShared(
                f"artifact {artifact_id} belongs to agent {row.owner_agent} and is only shared with {agent}: "
                f"only {row.owner_agent} can {verb} it; put a copy in {agent}'s own store to {verb} that"
            )
        return row

    # -- reading --------------------------------------------------------------------------------------------------

    def _visible(self, s: Session, agent: str, artifact_id: str) -> Artifact:
        shared = exists().where(ArtifactShare.artifact_id == Artifact.id, ArtifactShare.shared_with == agent)
        row = s.scalars(
            select(Artifact).where(Artifact.id == artifact_id, or_(Artifact.owner_agent == agent, shared))
        ).one_or_none()
        if row is None:
            # the same answer whether the id does not exist or belongs to an agent that did not share it
            raise ArtifactNotFound(
                f"agent {agent} has no artifact {artifact_id!r}, and none by that id is shared with it; "
                "list its artifacts to see their ids"
            )
        return row

    def get(self, agent: str, artifact_id: str) -> bytes:
        """The whole content (use ``open`` for large artifacts)."""
        with self.db.session() as s:
            row = self._visible(s, agent, artifact_id)
        try:
            data: bytes = self.fs.cat_file(self.blob_path(row.sha256))
        except FileNotFoundError:
            raise self._missing(row) from None
        return data

    def open(self, agent: str, artifact_id: str) -> BinaryIO:
        """A readable binary stream of the content; the caller closes it."""
        with self.db.session() as s:
            row = self._visible(s, agent, artifact_id)
        return self._open_blob(row)

    def open_visible(self, agent: str, artifact_id: str) -> tuple[dict[str, Any], BinaryIO]:
        """One of ``agent``'s artifacts (or one shared with it) and a stream of it; the caller closes the stream."""
        with self.db.session() as s:
            row = self._visible(s, agent, artifact_id)
            view = self._view(row, None)
        return view, self._open_blob(row)

    def open_for_thread(self, artifact_id: str) -> tuple[dict[str, Any], BinaryIO]:
        """Any agent's artifact and a stream of it, for the bot to post into a thread as a file. Not scoped to an
        agent: never reachable from an agent's tools."""
        with self.db.session() as s:
            row = s.get(Artifact, artifact_id)
            if row is None:
                raise ArtifactNotFound(f"there is no artifact {artifact_id!r}; an agent's artifacts list their ids")
        return self._view(row, None), self._open_blob(row)

    def _open_blob(self, row: Artifact) -> BinaryIO:
        try:
            stream: BinaryIO = self.fs.open(self.blob_path(row.sha256), "rb", block_size=self.chunk_bytes)
        except FileNotFoundError:
            raise self._missing(row) from None
        return stream

    def _missing(self, row: Artifact) -> ArtifactError:
        return ArtifactError(
            f"artifact {row.id} ({row.name!r}) has no content: blob {row.sha256} is missing under {self.root}; "
            "the store was changed outside labbot: restore the blob, or delete the artifact and put it again"
        )

    def latest_of_researcher(self, researcher: str, *, limit: int) -> builtins.list[dict[str, Any]]:
        """The latest artifacts of ``researcher``'s agents (stores RESEARCHER/ROLE), newest first: id, name, role."""
        with self.db.session() as s:
            rows = s.scalars(
                select(Artifact)
                .where(Artifact.owner_agent.startswith(f"{researcher}/"))
                .order_by(Artifact.created_at.desc())
                .limit(limit)
            )
            return [{"id": a.id, "name": a.name, "agent": a.owner_agent.partition("/")[2]} for a in rows]

    def list(self, agent: str, include_shared: bool = True) -> builtins.list[dict[str, Any]]:
        """The agent's own artifacts by name (each with whom it is shared), then those shared with it."""
        with self.db.session() as s:
            own = s.scalars(select(Artifact).where(Artifact.owner_agent == agent).order_by(Artifact.name)).all()
            shares = self._shares(s, [row.id for row in own])
            views = [self._view(row, shares) for row in own]
            if include_shared:
                shared = s.scalars(
                    select(Artifact)
                    .join(ArtifactShare, ArtifactShare.artifact_id == Artifact.id)
                    .where(ArtifactShare.shared_with == agent)
                    .order_by(Artifact.owner_agent, Artifact.name)
                ).all()
                views += [self._view(row, None) for row in shared]
        return views

    def usage(self, agent: str) -> dict[str, Any]:
        with self.db.session() as s:
            count, used = s.execute(
                select(func.count(), func.coalesce(func.sum(Artifact.size), 0)).where(Artifact.owner_agent == agent)
            ).one()
        return {"agent": agent, "artifacts": int(count), "used_bytes": int(used), "quota_bytes": self.quota_for(agent)}

    def verify(self, sha256: str) -> bool:
        """Re-hash a blob: True when it exists and its content still has this sha256."""
        path = self.blob_path(sha256)
        digest = hashlib.sha256()
        try:
            with self.fs.open(path, "rb", block_size=self.chunk_bytes) as f:
                while chunk := f.read(self.chunk_bytes):
                    digest.update(chunk)
        except FileNotFoundError:
            return False
        return digest.hexdigest() == sha256

    @staticmethod
    def _shares(s: Session, ids: builtins.list[str]) -> dict[str, builtins.list[str]]:
        out: dict[str, builtins.list[str]] = {i: [] for i in ids}
        if ids:
            rows = s.execute(
                select(ArtifactShare.artifact_id, ArtifactShare.shared_with)
                .where(ArtifactShare.artifact_id.in_(ids))
                .order_by(ArtifactShare.shared_with)
            )
            for artifact_id, agent in rows:
                out[artifact_id].append(agent)
        return out

    @staticmethod
    def _view(row: Artifact, shares: Mapping[str, builtins.list[str]] | None) -> dict[str, Any]:
        """What the store hands out; ``shared_with`` only for the owner's eyes."""
        view: dict[str, Any] = {
            "id": row.id,
            "owner_agent": row.owner_agent,
            "name": row.name,
            "sha256": row.sha256,
            "size": row.size,
            "content_type": row.content_type,
            "meta": row.meta,
            "created_at": row.created_at.isoformat(),
            "updated_at": row.updated_at.isoformat(),
        }
        if shares is not None:
            view["shared_with"] = list(shares.get(row.id, []))
        return view
