"""labbot.storage.artifacts: per-agent stores over content-addressed blobs (a local folder and fsspec's memory://)."""

from __future__ import annotations

import hashlib
import io
import random
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

from labbot.storage.artifacts import (
    ArtifactNotFound,
    ArtifactStore,
    BadArtifactRequest,
    NotShared,
    QuotaExceeded,
)
from labbot.storage.db import Database

pytestmark = pytest.mark.databases

MiB = 1 << 20


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "artifacts"


@pytest.fixture
def store(db: Database, root: Path) -> ArtifactStore:
    return ArtifactStore(db, str(root), quota_bytes=10 * MiB)


def blobs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "blobs").rglob("*") if p.is_file())


def temps(root: Path) -> list[Path]:
    return list((root / "tmp").iterdir())


class ChunkCountingReader:
    """A binary source of ``size`` pseudo-random bytes made on demand: records the largest read it served and
    refuses to be read whole."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.largest_read = 0
        self.reads = 0
        self.digest = hashlib.sha256()
        self._random = random.Random(size)

    def read(self, n: int = -1, /) -> bytes:
        if n is None or n < 0:
            raise AssertionError("the store read the whole file at once")
        n = min(n, self.left)
        self.largest_read = max(self.largest_read, n)
        self.reads += 1
        data = self._random.randbytes(n)
        self.left -= n
        self.digest.update(data)
        return data


def test_round_trip_bytes_file_object_and_path(store: ArtifactStore, root: Path, tmp_path: Path) -> None:
    a = store.put("analyst", "notes/summary.md", b"# loss went down\n")
    assert a["owner_agent"] == "analyst" and a["name"] == "notes/summary.md" and a["size"] == 17
    assert a["content_type"] == "text/markdown" and a["shared_with"] == [] and a["meta"] == {}
    assert a["sha256"] == hashlib.sha256(b"# loss went down\n").hexdigest()
    assert store.get("analyst", a["id"]) == b"# loss went down\n"
    with store.open("analyst", a["id"]) as f:
        assert f.read() == b"# loss went down\n"

    b = store.put("analyst", "plot.bin", io.BytesIO(b"\x00\x01" * 1000), "image/png", meta={"run": "k3xq7p"})
    assert b["content_type"] == "image/png" and b["meta"] == {"run": "k3xq7p"} and b["size"] == 2000
    source = tmp_path / "data.csv"
    source.write_bytes(b"step,loss\n1,2.0\n")
    c = store.put("analyst", "data.csv", source)
    assert store.get("analyst", c["id"]) == source.read_bytes() and c["content_type"] == "text/csv"

    assert [x["name"] for x in store.list("analyst")] == ["data.csv", "notes/summary.md", "plot.bin"]
    usage = store.usage("analyst")
    assert usage == {"agent": "analyst", "artifacts": 3, "used_bytes": 17 + 2000 + 16, "quota_bytes": 10 * MiB}
    assert len(blobs(root)) == 3 and temps(root) == []
    for blob in blobs(root):  # the blob path is the sha256, nothing else
        assert blob.parent.name == blob.name[:2] and store.verify(blob.name)


def test_a_text_str_is_refused_not_taken_for_a_path(store: ArtifactStore) -> None:
    with pytest.raises(BadArtifactRequest, match=r"encode text first"):
        store.put("analyst", "x.txt", "/etc/passwd")  # type: ignore[arg-type]
    with pytest.raises(BadArtifactRequest, match="1 to 200 characters"):
        store.put("analyst", "", b"x")
    assert store.list("analyst") == []


def test_same_bytes_are_stored_once_across_names_and_agents(store: ArtifactStore, root: Path) -> None:
    data = b"checkpoint summary " * 1000
    a = store.put("analyst", "summary.txt", data)
    blob = blobs(root)[0]
    written = blob.stat().st_mtime_ns, blob.stat().st_ino
    b = store.put("analyst", "copy.txt", io.BytesIO(data))  # streamed: hashed while written, then dropped
    c = store.put("reviewer", "theirs.txt", data)
    assert a["sha256"] == b["sha256"] == c["sha256"]
    assert len({a["id"], b["id"], c["id"]}) == 3
    assert blobs(root) == [blob] and temps(root) == []
    assert (blob.stat().st_mtime_ns, blob.stat().st_ino) == written  # the second and third put wrote no blob
    # the quota counts each agent's own rows, dedup or not
    assert store.usage("analyst")["used_bytes"] == 2 * len(data)
    assert store.usage("reviewer")["used_bytes"] == len(data)


def test_quota_exceeded_leaves_nothing_behind(db: Database, root: Path) -> None:
    store = ArtifactStore(db, str(root), quota_bytes=3 * MiB, chunk_bytes=MiB)
    store.put("analyst", "first.bin", b"x" * (2 * MiB))
    before = blobs(root)

    with pytest.raises(QuotaExceeded) as bytes_error:
        store.put("analyst", "second.bin", b"y" * (2 * MiB))
    message = str(bytes_error.value)
    assert "agent analyst's store is full" in message and "3 MiB" in message and "2 MiB" in message
    assert "delete some of its artifacts or raise [artifacts] quota" in message

    reader = ChunkCountingReader(5 * MiB)
    with pytest.raises(QuotaExceeded, match="at least"):
        store.put("analyst", "streamed.bin", reader)
    assert reader.left > 0  # it stopped reading once past the quota

    assert [a["name"] for a in store.list("analyst")] == ["first.bin"]
    assert blobs(root) == before and temps(root) == []
    # another agent has a quota of its own; replacing a name counts the new size, not both
    store.put("reviewer", "big.bin", b"z" * (3 * MiB))
    store.put("analyst", "first.bin", b"w" * (3 * MiB))
    assert store.usage("analyst")["used_bytes"] == 3 * MiB


def test_a_per_agent_quota_override(db: Database, root: Path) -> None:
    store = ArtifactStore(db, str(root), quota_bytes=10, quotas={"trainer": 100})
    store.put("trainer", "a", b"x" * 100)
    with pytest.raises(QuotaExceeded, match="agent analyst's"):
        store.put("analyst", "a", b"x" * 11)


def test_agents_see_only_their_own_until_shared(store: ArtifactStore) -> None:
    art = store.put("analyst", "report.md", b"private findings")
    missing = store.put("analyst", "other.md", b"x")["id"]
    store.delete("analyst", missing)

    for artifact_id in (art["id"], missing):  # someone else's and no one's: the same answer
        with pytest.raises(ArtifactNotFound, match=rf"agent reviewer has no artifact '{artifact_id}'"):
            store.get("reviewer", artifact_id)
        with pytest.raises(ArtifactNotFound):
            store.open("reviewer", artifact_id)
        with pytest.raises(ArtifactNotFound):
            store.share("reviewer", artifact_id, "reviewer")
        with pytest.raises(ArtifactNotFound):
            store.delete("reviewer", artifact_id)
    assert store.list("reviewer") == []

    shared = store.share("analyst", art["id"], "reviewer")
    assert shared["shared_with"] == ["reviewer"]
    assert store.share("analyst", art["id"], "reviewer")["shared_with"] == ["reviewer"]  # twice is once
    assert store.get("reviewer", art["id"]) == b"private findings"
    (seen,) = store.list("reviewer")
    assert seen["id"] == art["id"] and seen["owner_agent"] == "analyst" and "shared_with" not in seen
    assert store.list("reviewer", include_shared=False) == []
    assert store.list("watcher") == []  # shared with one agent, not with all

    with pytest.raises(NotShared, match=r"belongs to agent analyst.*only analyst can share it"):
        store.share("reviewer", art["id"], "watcher")
    with pytest.raises(NotShared, match="only analyst can delete it"):
        store.delete("reviewer", art["id"])
    assert store.list("watcher") == []

    store.delete("analyst", art["id"])
    with pytest.raises(ArtifactNotFound):
        store.get("reviewer", art["id"])


def test_replacing_a_name_keeps_id_and_shares_and_drops_the_old_blob(store: ArtifactStore, root: Path) -> None:
    first = store.put("analyst", "report.md", b"draft")
    store.share("analyst", first["id"], "reviewer")
    second = store.put("analyst", "report.md", b"final")
    assert second["id"] == first["id"] and second["shared_with"] == ["reviewer"]
    assert store.get("reviewer", first["id"]) == b"final"
    assert [b.name for b in blobs(root)] == [hashlib.sha256(b"final").hexdigest()]


def test_delete_keeps_a_blob_another_row_references(store: ArtifactStore, root: Path) -> None:
    a = store.put("analyst", "a.txt", b"shared bytes")
    b = store.put("reviewer", "b.txt", b"shared bytes")
    store.delete("analyst", a["id"])
    assert len(blobs(root)) == 1 and store.get("reviewer", b["id"]) == b"shared bytes"
    store.delete("reviewer", b["id"])
    assert blobs(root) == []


def test_names_are_only_names(store: ArtifactStore, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "escaped.txt"
    for name in ("../escaped.txt", "../../escaped.txt", "/etc/passwd", "blobs/00/x", "a/../../b", "tmp/../.."):
        art = store.put("analyst", name, name.encode())
        assert store.get("analyst", art["id"]) == name.encode()
    assert not outside.exists()
    files = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    assert [(p.parts[0], p.parts[1], len(p.parts)) for p in files] == [("blobs", p.parts[1], 3) for p in files] and all(
        p.name.startswith(p.parts[1]) and len(p.name) == 64 for p in files
    )
    with pytest.raises(BadArtifactRequest, match="not a sha256"):
        store.verify("../" * 3 + "etc/passwd")


def test_verify_rehashes_the_blob(store: ArtifactStore, root: Path) -> None:
    art = store.put("analyst", "a.txt", b"intact")
    assert store.verify(art["sha256"])
    blobs(root)[0].write_bytes(b"bit rot")
    assert not store.verify(art["sha256"])
    blobs(root)[0].unlink()
    assert not store.verify(art["sha256"])
    with pytest.raises(Exception, match="is missing under"):
        store.get("analyst", art["id"])


def test_open_for_thread_reads_any_agents_artifact(store: ArtifactStore) -> None:
    art = store.put("analyst", "loss.png", b"\x89PNG...")
    view, stream = store.open_for_thread(art["id"])
    with stream:
        assert stream.read() == b"\x89PNG..."
    assert view["name"] == "loss.png" and view["content_type"] == "image/png" and "shared_with" not in view
    with pytest.raises(ArtifactNotFound):
        store.open_for_thread("anope")


@pytest.fixture
def memory_url() -> Iterator[str]:
    # fsspec's memory filesystem is one process-wide store: a folder of its own, removed after
    url = f"memory://labbot-test-{uuid.uuid4().hex}/artifacts"
    yield url
    fs, path = fsspec.core.url_to_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def test_a_memory_url_keeps_everything_in_memory(db: Database, memory_url: str, tmp_path: Path) -> None:
    store = ArtifactStore(db, memory_url, quota_bytes=MiB)
    fs, root = fsspec.core.url_to_fs(memory_url)
    assert store.fs.protocol == fs.protocol and store.root == root
    a = store.put("analyst", "../a.txt", b"in memory")
    store.put("reviewer", "b.txt", io.BytesIO(b"in memory"))
    assert store.get("analyst", a["id"]) == b"in memory"
    assert fs.find(root) == [f"{root}/blobs/{a['sha256'][:2]}/{a['sha256']}"]  # one blob, no temp left
    assert fs.cat_file(fs.find(root)[0]) == b"in memory"
    assert store.verify(a["sha256"])
    with pytest.raises(QuotaExceeded):
        store.put("analyst", "big", ChunkCountingReader(2 * MiB))
    assert len(fs.find(root)) == 1
    assert not any(tmp_path.rglob("blobs"))  # nothing went to a local folder


def peak_bytes_during(fn: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], int]:
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_file_is_streamed_not_read_whole(db: Database, root: Path, tmp_path: Path) -> None:
    store = ArtifactStore(db, str(root), quota_bytes=100 * MiB, chunk_bytes=MiB)
    store.put("analyst", "warm-up", ChunkCountingReader(3 * MiB))  # first-use allocations are not the put's
    reader = ChunkCountingReader(16 * MiB)
    art, peak = peak_bytes_during(lambda: store.put("analyst", "big.bin", reader))
    assert art["size"] == 16 * MiB and art["sha256"] == reader.digest.hexdigest()
    assert reader.largest_read == MiB and reader.reads >= 16
    assert peak < 6 * MiB, f"a put of 16 MiB held {peak / MiB:.1f} MiB at once"

    source = tmp_path / "big-file.bin"  # a real file is read with readinto, into reused buffers
    source.write_bytes(random.Random(7).randbytes(16 * MiB))
    from_path, peak = peak_bytes_during(lambda: store.put("analyst", "from-path.bin", source))
    assert from_path["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert peak < 6 * MiB, f"a put of a 16 MiB file held {peak / MiB:.1f} MiB at once"
    with store.open("analyst", art["id"]) as f:
        digest = hashlib.sha256()
        while chunk := f.read(MiB):
            digest.update(chunk)
    assert digest.hexdigest() == art["sha256"] and store.verify(art["sha256"]) and temps(root) == []
