"""Real projects labbot did not write, for the evals' tests: a pure-Python sdist that ships its pytest suite, fetched
from the package index pinned by version and sha256 (pip checks the hash before it reads anything), unpacked and
committed as a git repository."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

# inflection 0.5.1: pure Python, no runtime dependencies, 455 parametrized tests in its sdist
INFLECTION = ("inflection", "0.5.1", "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "user@example.invalid",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "user@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def fetch_sdist(name: str, version: str, sha256: str, cache: Path) -> Path:
    """The sdist of ``name==version``, checked against ``sha256``, from ``cache`` or the package index.

    The index unreachable: a skip saying so, unless ``CI`` is set, where it fails."""
    cache.mkdir(parents=True, exist_ok=True)
    for found in cache.glob(f"{name}-{version}.tar.gz"):
        if hashlib.sha256(found.read_bytes()).hexdigest() == sha256:
            return found
        found.unlink()
    with tempfile.TemporaryDirectory(prefix="sdist-") as tmp:
        pinned = Path(tmp) / "requirements.txt"  # pip checks the hash before it reads anything of the sdist
        pinned.write_text(f"{name}=={version} --hash=sha256:{sha256}\n")
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--no-build-isolation",
             "--require-hashes", "--disable-pip-version-check", "--quiet", "-d", tmp, "-r", str(pinned)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        files = list(Path(tmp).glob("*.tar.gz"))
        if done.returncode != 0 or not files:
            reason = f"could not download the sdist of {name}=={version} from the package index: {done.stderr[-800:]}"
            if os.environ.get("CI"):
                pytest.fail(reason + " (CI is set: this test must run there)")
            pytest.skip("!!! SKIPPED, NOT PASSED: " + reason)
        got = hashlib.sha256(files[0].read_bytes()).hexdigest()
        assert got == sha256, f"{files[0].name} has sha256 {got}, pinned {sha256}: the index served another file"
        dest = cache / files[0].name
        shutil.move(files[0], dest)
        return dest


def unpack_sdist(sdist: Path, dest: Path) -> Path:
    with tarfile.open(sdist) as tar:
        tar.extractall(dest, filter="data")
    (root,) = [p for p in dest.iterdir() if p.is_dir()]
    for junk in root.glob("*.egg-info"):
        shutil.rmtree(junk)
    return root


def committed_repo(sdist: Path, dest: Path) -> Path:
    """The sdist unpacked into ``dest`` and committed as a one-commit git repository (as a user's checkout)."""
    root = unpack_sdist(sdist, dest)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "--quiet", "--initial-branch=main"], ["add", "--all"], ["commit", "--quiet", "-m", "sdist"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, timeout=60)
    return root
