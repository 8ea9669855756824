"""The IAM policy docs/deploy.md gives the jobs' key pair (``LABBOT_JOB_AWS_*``), on a real S3-compatible server:
moto's, with its IAM checks on (``enable_iam_authentication``), the policy read from the guide and attached to a user
of its own. Through that key pair a job's checkpoints are written, listed and read back by
``labbot_client.checkpoints`` (s3fs, real HTTP) under ``PREFIX/runs/``; a read or a write anywhere else in the bucket
(the agents' artifacts, the eval suites, another prefix) is refused.

moto cannot evaluate the listing statement's ``s3:prefix`` condition (up to 5.1 it ignored every Condition; from 5.2 it
knows only ``sts:ExternalId`` and denies by a statement with any other key), so that condition is checked here as
text (it names the runs' prefix) and left out of the policy attached on moto; and from 5.2 moto checks an S3 request
under its operation's name (``s3:HeadObject``), not the IAM action AWS checks it under (``s3:GetObject``).
``_as_moto_reads_it`` translates the guide's policy for both: what moto enforces is its Actions and Resources.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from moto.core.authorization import enable_iam_authentication
from s3_server import ACCESS_KEY, SECRET_KEY, MotoS3
from s3fs import S3FileSystem

from labbot_client.checkpoints import CheckpointDir

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- the jobs' IAM policy"


def guide_policy() -> dict[str, Any]:
    """The JSON block right after the marker comment in docs/deploy.md."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    after = text.split(MARKER, 1)[1]
    match = re.match(r"[^\n]*\n```json\n(.*?)\n```", after, re.S)
    assert match, "docs/deploy.md: no ```json block right after the policy's marker"
    return dict(json.loads(match.group(1)))


def deployed_store() -> tuple[str, str]:
    """(bucket, prefix) of LABBOT_ARTIFACTS_URL in deploy/config.yaml: what the guide's policy is written for."""
    for doc in yaml.safe_load_all((ROOT / "deploy" / "config.yaml").read_text()):
        if doc and doc["metadata"]["name"] == "labbot-env":
            url = doc["data"]["LABBOT_ARTIFACTS_URL"]
            bucket, _, prefix = url.removeprefix("s3://").partition("/")
            return bucket, prefix.strip("/")
    raise AssertionError("no labbot-env")


def test_the_guides_policy_is_written_for_the_deployed_store_and_names_only_its_runs() -> None:
    policy = guide_policy()
    bucket, prefix = deployed_store()
    resources = [
        r for s in policy["Statement"] for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
    ]
    assert set(resources) == {f"arn:aws:s3:::{bucket}/{prefix}/runs/*", f"arn:aws:s3:::{bucket}"}
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and "*" not in json.dumps(statement["Action"])
        if statement["Resource"] == f"arn:aws:s3:::{bucket}":  # the bucket itself: listing, of the runs only
            assert statement["Action"] == "s3:ListBucket"
            assert statement["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}/runs/*"]}}


@pytest.fixture
def jobs_key(s3: MotoS3) -> Iterator[tuple[str, dict[str, str]]]:
    """A bucket, and the environment of a job holding a key pair under the guide's policy (bucket name swapped)."""
    bucket, prefix = deployed_store()
    mine = s3.bucket()
    document = json.dumps(_as_moto_reads_it(guide_policy())).replace(f":::{bucket}", f":::{mine}")
    iam = _client("iam", s3.endpoint, ACCESS_KEY, SECRET_KEY)
    user = f"labbot-jobs-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="labbot-runs", PolicyDocument=document)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    # what labbot itself keeps elsewhere under the prefix, and beside it
    for elsewhere in (f"{prefix}/blobs/ab/abcdef", f"{prefix}/eval-suites/s1.tar.gz", "other/runs/r0/x"):
        s3.client().put_object(Bucket=mine, Key=elsewhere, Body=b"not the job's")
    env = {**s3.env, "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    # fsspec keeps one S3 filesystem per set of arguments, credentials read once: a job is a fresh process, so is
    # this one's filesystem (and the next test's is not this one's)
    S3FileSystem.clear_instance_cache()
    yield mine, env
    S3FileSystem.clear_instance_cache()


# AWS's "actions, resources and condition keys for Amazon S3": the operations each IAM action authorizes, of those a
# job's checkpoints use (a CopyObject is checked against its destination, as a write)
OPERATIONS_OF = {
    "s3:ListBucket": ("ListObjectsV2", "ListObjects", "HeadBucket"),
    "s3:GetObject": ("GetObject", "HeadObject"),
    "s3:PutObject": ("PutObject", "CopyObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"),
    "s3:DeleteObject": ("DeleteObject", "DeleteObjects"),
    "s3:AbortMultipartUpload": ("AbortMultipartUpload",),
}


def _as_moto_reads_it(policy: dict[str, Any]) -> dict[str, Any]:
    """The guide's policy as moto can enforce it: each statement without its Condition, and allowing, beside each
    IAM action, the operations AWS authorizes by it (moto 5.2 checks those names; 5.1 the IAM ones)."""
    statements = []
    for statement in policy["Statement"]:
        actions = [statement["Action"]] if isinstance(statement["Action"], str) else list(statement["Action"])
        operations = [f"s3:{op}" for action in actions for op in OPERATIONS_OF[action]]
        kept = {k: v for k, v in statement.items() if k != "Condition"}
        statements.append({**kept, "Action": sorted({*actions, *operations})})
    return {**policy, "Statement": statements}


def test_a_job_checkpoints_under_the_runs_prefix_and_reaches_nothing_else(
    jobs_key: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket, env = jobs_key
    _, prefix = deployed_store()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    job = _client("s3", env["AWS_ENDPOINT_URL"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
    with enable_iam_authentication():
        ckpts = CheckpointDir(f"s3://{bucket}/{prefix}/runs/r1abcd/checkpoints", suffix=".pt", keep=2)
        assert ckpts.save(10, lambda f: f.write(b"weights")) is not None
        ((step, where),) = ckpts.list()
        with ckpts.open(where) as f:
            assert (step, f.read()) == (10, b"weights")
        for key in (f"{prefix}/blobs/ab/abcdef", f"{prefix}/eval-suites/s1.tar.gz", "other/runs/r0/x"):
            with pytest.raises(ClientError, match="AccessDenied"):
                job.get_object(Bucket=bucket, Key=key)
            with pytest.raises(ClientError, match="AccessDenied"):
                job.put_object(Bucket=bucket, Key=key, Body=b"overwritten")
        with pytest.raises(ClientError, match="AccessDenied"):
            job.delete_bucket_policy(Bucket=bucket)
        # a checkpoint folder outside the runs is refused: the client logs it and trains on
        elsewhere = CheckpointDir(f"s3://{bucket}/{prefix}/blobs", suffix=".pt")
        assert elsewhere.save(1, lambda f: f.write(b"x")) is None
    assert {k for k in s3_keys(env, bucket) if k.endswith(".pt")} == {
        f"{prefix}/runs/r1abcd/checkpoints/ckpt_00000010.pt"
    }


def s3_keys(env: dict[str, str], bucket: str) -> list[str]:
    admin = _client("s3", env["AWS_ENDPOINT_URL"], ACCESS_KEY, SECRET_KEY)
    return [o["Key"] for o in admin.list_objects_v2(Bucket=bucket).get("Contents", [])]


def _client(service: str, endpoint: str, key_id: str, secret: str) -> Any:
    return boto3.client(
        service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id, aws_secret_access_key=secret
    )


def test_the_check_has_teeth(s3: MotoS3) -> None:
    """A key pair allowed the whole bucket writes where the guide's may not: the refusals above are the policy's."""
    mine = s3.bucket()
    iam = _client("iam", s3.endpoint, ACCESS_KEY, SECRET_KEY)
    user = f"too-broad-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    broad = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=json.dumps(broad))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    job = _client("s3", s3.endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    with enable_iam_authentication():
        job.put_object(Bucket=mine, Key="prod/blobs/ab/abcdef", Body=b"overwritten")
        with pytest.raises(ClientError, match="InvalidAccessKeyId"):  # and IAM is really being checked
            _client("s3", s3.endpoint, "AKIA" + "NOSUCHKEY0000000", "nope").get_object(Bucket=mine, Key="prod/x")
