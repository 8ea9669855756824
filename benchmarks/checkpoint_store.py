"""Checkpoints in an object store: a 100 MB checkpoint written and read back through `labbot_client.checkpoints`
on s3:// (moto's S3 server on 127.0.0.1, real HTTP through s3fs and botocore) vs a local folder, in one run
(claim: s3 time / local time <= 25: a local S3-compatible server costs at most 25x a local disk, write and read
together).

A write is what a job's `save` does: serialise into a local spool file, upload it as `ckpt_N.pt.partial`, commit it
to `ckpt_N.pt` (CopyObject + delete), prune; for a folder: write, fsync, rename. A read is `open` of the newest
(`list`, then the whole object into memory) and reading it through. The two alternate each round so neither gets a
warmer cache; each round uses a new step, so nothing is served from a previous one. Reported: medians and the
spread (min-max) of write, read and both, per store; the ratio is of the medians of write + read.

moto is an in-process server keeping objects in memory: this measures the client's path (spool, HTTP, multipart,
the copy that commits), not a real S3's network. Run it again on real S3 for those numbers.

    .venv/bin/python benchmarks/checkpoint_store.py [--mb 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time

from _harness import median, report

CLAIM = 25.0


def moto_server() -> tuple[object, str]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return server, f"http://127.0.0.1:{port}"


def one(ckpts: object, step: int, payload: bytes) -> tuple[float, float]:
    from labbot_client.checkpoints import CheckpointDir

    assert isinstance(ckpts, CheckpointDir)
    t0 = time.perf_counter()
    where = ckpts.save(step, lambda f: f.write(payload))
    t1 = time.perf_counter()
    assert where is not None, "the save failed"
    latest = ckpts.latest()
    assert latest is not None and latest[0] == step
    with ckpts.open(latest[1]) as f:
        n = len(f.read())
    t2 = time.perf_counter()
    assert n == len(payload)
    return t1 - t0, t2 - t1


def spread(xs: list[float]) -> str:
    return f"median {median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request lines
    server, endpoint = moto_server()
    import boto3

    from labbot_client.checkpoints import CheckpointDir

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
    payload = os.urandom(a.mb * 1_000_000)
    times: dict[str, dict[str, list[float]]] = {k: {"write": [], "read": []} for k in ("local", "s3")}
    try:
        with tempfile.TemporaryDirectory(prefix="lb-bench-ckpt-") as tmp:
            stores = {"local": CheckpointDir(tmp, keep=1), "s3": CheckpointDir("s3://bench/runs/r/checkpoints", keep=1)}
            one(stores["s3"], 0, payload[: 1 << 20])  # warm-up: the client, the connection pool
            for r in range(a.rounds):
                order = ["local", "s3"] if r % 2 == 0 else ["s3", "local"]
                for name in order:
                    w, rd = one(stores[name], r + 1, payload)
                    times[name]["write"].append(w)
                    times[name]["read"].append(rd)
    finally:
        server.stop()  # type: ignore[attr-defined]
    both = {k: [w + r for w, r in zip(v["write"], v["read"], strict=True)] for k, v in times.items()}
    for name in ("local", "s3"):
        print(f"{name:<5} write {spread(times[name]['write'])}")
        print(f"{name:<5} read  {spread(times[name]['read'])}")
        print(f"{name:<5} both  {spread(both[name])}  ({a.mb / median(both[name]):.0f} MB/s)")
    ratio = median(both["s3"]) / median(both["local"])
    ratio_w = median(times["s3"]["write"]) / median(times["local"]["write"])
    ratio_r = median(times["s3"]["read"]) / median(times["local"]["read"])
    print(f"ratio s3/local = {ratio:.2f} (write {ratio_w:.2f}, read {ratio_r:.2f}; claim <= {CLAIM:g}), {a.mb} MB")
    report(
        "checkpoint_store",
        {
            "mb": a.mb,
            "rounds": a.rounds,
            "local_s": median(both["local"]),
            "s3_s": median(both["s3"]),
            "write_ratio": ratio_w,
            "read_ratio": ratio_r,
            "ratio": ratio,
            "claim": f"<= {CLAIM:g}",
            "ok": ratio <= CLAIM,
        },
    )


if __name__ == "__main__":
    main()
