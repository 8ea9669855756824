"""labbot_client.checkpoints: the checkpoint convention in a local folder and in an object store (s3:// on moto's
real S3 server, tests/s3_server.py): atomic commits, pruning, a store that is unreachable for a save, a
``.partial`` left by a crash, credentials kept out of what is logged."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from s3_server import ACCESS_KEY, SECRET_KEY, MotoS3

from labbot_client.checkpoints import CheckpointDir, JobEnv, is_url, join, roll_back

REPO = Path(__file__).resolve().parents[2]


def blob(step: int) -> bytes:
    return f"checkpoint {step} ".encode() * 1000


def writer(step: int):  # type: ignore[no-untyped-def]
    return lambda f: f.write(blob(step))


def read(ckpts: CheckpointDir, where: object) -> bytes:
    with ckpts.open(where) as f:  # type: ignore[arg-type]
        return f.read()


# ----------------------------------------------------------------------------- locations


def test_urls_and_folders() -> None:
    assert is_url("s3://bucket/p") and is_url("memory://x") and is_url("gs://b")
    assert not is_url("/tmp/x") and not is_url("relative/x") and not is_url("file:///tmp/x")
    assert CheckpointDir("s3://bucket/runs/r/checkpoints/").root == "s3://bucket/runs/r/checkpoints"
    assert CheckpointDir("file:///tmp/ck").root == Path("/tmp/ck")
    assert join("s3://b/p", "ray") == "s3://b/p/ray" and join(Path("/a"), "ray") == Path("/a/ray")


def test_job_env_keeps_a_url_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBOT_CHECKPOINT_DIR", "s3://bucket/prefix/runs/abc/checkpoints")
    assert JobEnv.from_environ().checkpoint_dir == "s3://bucket/prefix/runs/abc/checkpoints"


# ----------------------------------------------------------------------------- a local folder


def test_local_round_trip_prunes_and_ignores_temp_files(tmp_path: Path) -> None:
    ckpts = CheckpointDir(tmp_path / "ck", keep=2)
    for step in (1, 2, 3):
        assert ckpts.save(step, writer(step)) == tmp_path / "ck" / f"ckpt_{step:08d}.pt"
    (tmp_path / "ck" / ".ckpt_00000009.pt.tmp.123").write_bytes(b"half")
    assert [s for s, _ in ckpts.list()] == [2, 3]
    assert ckpts.latest() == (3, tmp_path / "ck" / "ckpt_00000003.pt")
    assert read(ckpts, 3) == blob(3)
    assert ckpts.remove_partial() == 1


# ----------------------------------------------------------------------------- an object store


def test_s3_round_trip_commits_prunes_and_reads_back(s3: MotoS3) -> None:
    bucket = s3.bucket()
    ckpts = CheckpointDir(f"s3://{bucket}/labbot/runs/r1/checkpoints", keep=3)
    assert ckpts.list() == [] and ckpts.latest() is None and ckpts.remove_partial() == 0
    for step in (10, 20, 30, 40):
        where = ckpts.save(step, writer(step))
        assert where == f"s3://{bucket}/labbot/runs/r1/checkpoints/ckpt_{step:08d}.pt"

    assert [s for s, _ in ckpts.list()] == [20, 30, 40]
    step, where = ckpts.latest() or (0, "")
    assert step == 40 and read(ckpts, where) == blob(40) and read(ckpts, 30) == blob(30)
    # the commit leaves only final names: no .partial, no spool file, the pruned one gone
    assert s3.keys(bucket) == [f"labbot/runs/r1/checkpoints/ckpt_{s:08d}.pt" for s in (20, 30, 40)]


def test_s3_unreachable_for_one_save_skips_it_and_the_next_succeeds(
    s3: MotoS3, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = s3.bucket()
    ckpts = CheckpointDir(f"s3://{bucket}/runs/r2/checkpoints", keep=3)
    assert ckpts.save(1, writer(1)) is not None

    s3.stop()  # the store is unreachable for one save
    with caplog.at_level(logging.WARNING, logger="labbot_client.checkpoints"):
        assert ckpts.save(2, writer(2)) is None  # logged and skipped: no exception reaches the training loop
    s3.start()

    assert ckpts.save(3, writer(3)) is not None  # the next one succeeds
    assert [s for s, _ in ckpts.list()] == [1, 3]  # the old one stayed; the failed one never appears
    assert read(ckpts, ckpts.latest()[1]) == blob(3)  # type: ignore[index]
    warning = "\n".join(r.getMessage() for r in caplog.records)
    assert "checkpoint step 2 was not written" in warning and f"s3://{bucket}/runs/r2/checkpoints" in warning
    assert SECRET_KEY not in caplog.text and ACCESS_KEY not in caplog.text


def test_a_partial_left_by_a_crash_is_never_taken_for_a_checkpoint(s3: MotoS3) -> None:
    bucket = s3.bucket()
    ckpts = CheckpointDir(f"s3://{bucket}/runs/r3/checkpoints")
    ckpts.save(5, writer(5))
    # a crash between the upload and the commit: a newer step's .partial, half written
    s3.client().put_object(Bucket=bucket, Key="runs/r3/checkpoints/ckpt_00000009.pt.partial", Body=b"half")
    assert ckpts.latest() == (5, f"s3://{bucket}/runs/r3/checkpoints/ckpt_00000005.pt")
    assert ckpts.remove_partial() == 1
    assert s3.keys(bucket) == ["runs/r3/checkpoints/ckpt_00000005.pt"]


def test_an_error_of_the_jobs_own_write_raises_and_leaves_nothing(s3: MotoS3) -> None:
    bucket = s3.bucket()
    ckpts = CheckpointDir(f"s3://{bucket}/runs/r4/checkpoints")

    def broken(f: object) -> None:
        raise TypeError("cannot pickle this")

    with pytest.raises(TypeError, match="cannot pickle"):
        ckpts.save(1, broken)
    assert s3.keys(bucket) == []


@pytest.mark.subprocess
def test_a_local_folder_never_imports_fsspec(tmp_path: Path) -> None:
    code = (
        "import sys; from labbot_client.checkpoints import CheckpointDir\n"
        f"c = CheckpointDir({str(tmp_path)!r}); c.save(1, lambda f: f.write(b'x')); c.list(); c.remove_partial()\n"
        "assert 'fsspec' not in sys.modules and 's3fs' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO / "client")


def test_roll_back_sets_later_checkpoints_aside_in_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpts = CheckpointDir(tmp_path / "c", suffix=".pt", keep=0)
    for step in (25, 50, 75, 100):
        ckpts.save(step, lambda f, s=step: f.write(f"step {s}".encode()))
    (tmp_path / "c" / "ckpt_00000080.safetensors").write_bytes(b"another suffix")
    assert roll_back(tmp_path / "c", 50, label="attempt-2") == [75, 80, 100]
    assert [s for s, _ in ckpts.list()] == [25, 50], "the job's newest is now the chosen one"
    aside = tmp_path / "c" / "rolled-back" / "attempt-2"
    assert sorted(p.name for p in aside.iterdir()) == [
        "ckpt_00000075.pt",
        "ckpt_00000080.safetensors",
        "ckpt_00000100.pt",
    ]
    assert roll_back(tmp_path / "c", 50, label="attempt-2") == [], "again: nothing more"
    assert roll_back(tmp_path / "c", None, label="attempt-3") == [25, 50], "None: back to the start"
    monkeypatch.setenv("LABBOT_RESUME_STEP", "50")
    assert JobEnv.from_environ(tmp_path / "c").resume_step == 50
    monkeypatch.setenv("LABBOT_RESUME_STEP", "fifty")
    with pytest.raises(ValueError, match="LABBOT_RESUME_STEP must be an integer"):
        JobEnv.from_environ(tmp_path / "c")


def test_roll_back_in_an_object_store(s3: MotoS3) -> None:
    bucket = s3.bucket()
    root = f"s3://{bucket}/runs/r9/checkpoints"
    ckpts = CheckpointDir(root, keep=0)
    for step in (10, 20, 30):
        ckpts.save(step, lambda f, s=step: f.write(f"step {s}".encode()))
    assert roll_back(root, 10, label="attempt-2") == [20, 30]
    assert [s for s, _ in ckpts.list()] == [10]
    assert sorted(s3.keys(bucket)) == [
        "runs/r9/checkpoints/ckpt_00000010.pt",
        "runs/r9/checkpoints/rolled-back/attempt-2/ckpt_00000020.pt",
        "runs/r9/checkpoints/rolled-back/attempt-2/ckpt_00000030.pt",
    ]
