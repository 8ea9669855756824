"""labbot.storage.artifacts on s3:// — moto's real S3 server (tests/s3_server.py), s3fs, botocore: nothing of fsspec
mocked. Put (bytes and streamed), get, open, list, share, replace and delete; no half-written blob under its final
name, no temp object left behind; credentials in no error or log line."""

from __future__ import annotations

import hashlib
import io
import logging
from pathlib import Path

import pytest
from s3_server import ACCESS_KEY, SECRET_KEY, MotoS3

from labbot.bot.serve import QUIET_LOGGERS
from labbot.storage.artifacts import ArtifactError, ArtifactNotFound, ArtifactStore, NotShared, QuotaExceeded
from labbot.storage.db import Database

MiB = 1 << 20


@pytest.fixture
def bucket(s3: MotoS3) -> str:
    return s3.bucket()


@pytest.fixture
def store(db: Database, bucket: str, s3: MotoS3) -> ArtifactStore:
    return ArtifactStore(db, f"s3://{bucket}/labbot", quota_bytes=40 * MiB, chunk_bytes=5 * MiB)


def blob_keys(s3: MotoS3, bucket: str) -> list[str]:
    return [k for k in s3.keys(bucket, "labbot/") if not k.endswith("/")]


def test_put_get_list_share_and_delete_on_s3(store: ArtifactStore, s3: MotoS3, bucket: str) -> None:
    a = store.put("analyst", "report.md", b"# findings\n")
    sha = hashlib.sha256(b"# findings\n").hexdigest()
    assert a["sha256"] == sha and a["content_type"] == "text/markdown"
    assert blob_keys(s3, bucket) == [f"labbot/blobs/{sha[:2]}/{sha}"]  # content-addressed, nothing in tmp/
    assert store.get("analyst", a["id"]) == b"# findings\n"
    with store.open("analyst", a["id"]) as f:
        assert f.read() == b"# findings\n"

    with pytest.raises(ArtifactNotFound):
        store.get("critic", a["id"])
    store.share("analyst", a["id"], "critic")
    assert store.get("critic", a["id"]) == b"# findings\n"
    assert [v["name"] for v in store.list("critic")] == ["report.md"]
    with pytest.raises(NotShared):
        store.delete("critic", a["id"])

    twin = store.put("critic", "copy.md", b"# findings\n")  # same content: the same blob, stored once
    assert len(blob_keys(s3, bucket)) == 1
    store.delete("analyst", a["id"])
    assert len(blob_keys(s3, bucket)) == 1  # the critic's row still points at it
    store.delete("critic", twin["id"])
    assert blob_keys(s3, bucket) == []


def test_a_streamed_put_of_several_parts_then_replace(store: ArtifactStore, s3: MotoS3, bucket: str) -> None:
    data = bytes(range(256)) * (12 * MiB // 256)  # 12 MiB: a multipart upload of 5 MiB parts
    a = store.put("analyst", "weights.bin", io.BytesIO(data))
    assert a["size"] == len(data) and store.verify(a["sha256"])
    with store.open("analyst", a["id"]) as f:
        assert hashlib.sha256(f.read()).hexdigest() == a["sha256"]
    b = store.put("analyst", "weights.bin", b"smaller now")  # replacing: same id, the old blob goes
    assert b["id"] == a["id"]
    assert blob_keys(s3, bucket) == [f"labbot/blobs/{b['sha256'][:2]}/{b['sha256']}"]

    with pytest.raises(QuotaExceeded):
        store.put("analyst", "huge.bin", io.BytesIO(bytes(41 * MiB)))
    assert blob_keys(s3, bucket) == [f"labbot/blobs/{b['sha256'][:2]}/{b['sha256']}"]  # no temp object left


def test_a_local_path_put_streams_to_s3(store: ArtifactStore, tmp_path: Path) -> None:
    path = tmp_path / "plot.png"
    path.write_bytes(b"\x89PNG" + bytes(3 * MiB))
    a = store.put("analyst", "plot.png", path)
    assert a["content_type"] == "image/png" and store.get("analyst", a["id"]) == path.read_bytes()


def test_errors_and_logs_carry_no_credentials(
    store: ArtifactStore, s3: MotoS3, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    # labbot's levels (bot/serve.py configure_logging): INFO, the AWS SDK's loggers at WARNING, because its DEBUG
    # lines quote the signed request headers and the credentials it found
    caplog.set_level(logging.INFO)
    for name in QUIET_LOGGERS:
        caplog.set_level(logging.WARNING, logger=name)
    a = store.put("analyst", "gone.txt", b"soon gone")
    s3.client().delete_object(Bucket=bucket, Key=f"labbot/blobs/{a['sha256'][:2]}/{a['sha256']}")
    with pytest.raises(ArtifactError, match="has no content") as missing:
        store.get("analyst", a["id"])
    s3.stop()
    with pytest.raises(Exception) as down:
        store.put("analyst", "while-down.txt", b"x")
    s3.start()
    for text in (str(missing.value), str(down.value), repr(down.value), caplog.text):
        assert SECRET_KEY not in text and ACCESS_KEY not in text
