"""scripts/specs.py (make specs): the vendor specs fetched from the cache, a mirror folder or HTTP, each byte checked
against its pinned sha256.

The tests pin two small made-up files in a manifest of their own, so they need neither the real specs nor a network:
HTTP is a local server on 127.0.0.1 serving them under /OWNER/REPO/COMMIT/PATH, as raw.githubusercontent.com does.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from vendor_specs import pins, spec_path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "specs.py"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {
    "acme-openapi.json": ("acme/api-specs", "web/openapi.json", b'{"openapi": "3.0.0", "paths": {}}\n'),
    "acme-schema.graphql": ("acme/sdk", "src/schema.graphql", b"type Query { ok: Boolean }\n"),
}


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("labbot_specs_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


script = _load_script()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Site:
    """A mirror folder and an HTTP server holding the pinned files, the manifest, and an empty cache."""

    tmp: Path
    manifest: Path
    mirror: Path
    www: Path
    dest: Path
    base_url: str
    requests: list[str]

    def run(self, *args: str) -> int:
        return int(script.main(["--manifest", str(self.manifest), "--dest", str(self.dest), "--timeout", "5", *args]))

    def served(self, name: str) -> Path:
        repo, path, _ = FILES[name]
        return self.www / repo / COMMIT / path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for var in ("CI", "LABBOT_SPECS_MIRROR", "LABBOT_SPECS_BASE_URL"):  # the cache: always --dest
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    entries = [
        {"file": name, "repo": repo, "commit": COMMIT, "path": path, "sha256": _sha(data)}
        for name, (repo, path, data) in FILES.items()
    ]
    manifest = tmp_path / "specs.json"
    manifest.write_text(json.dumps({"specs": entries}))
    mirror, www = tmp_path / "mirror", tmp_path / "www"
    mirror.mkdir()
    for name, (repo, path, data) in FILES.items():
        (mirror / name).write_bytes(data)
        served = www / repo / COMMIT / path
        served.parent.mkdir(parents=True)
        served.write_bytes(data)

    requests: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            requests.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        base_url = f"http://127.0.0.1:{server.server_address[1]}"
        yield Site(tmp_path, manifest, mirror, www, tmp_path / "cache", base_url, requests)
    finally:
        server.shutdown()
        server.server_close()


def test_fetches_over_http_from_repo_commit_path_then_uses_the_cache(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    assert site.run("--mirror", "", "--base-url", site.base_url) == 0
    for name, (repo, path, data) in FILES.items():
        assert (site.dest / name).read_bytes() == data
        assert f"/{repo}/{COMMIT}/{path}" in site.requests
    out = capsys.readouterr().out
    assert re.search(rf"fetched  acme-openapi\.json  from {re.escape(site.base_url)}/acme/api-specs/{COMMIT}/", out)
    assert "all 2 vendor specs are in" in out

    site.requests.clear()
    assert site.run("--mirror", "", "--base-url", site.base_url) == 0
    assert site.requests == [] and capsys.readouterr().out.count("(cached)") == 2


def test_fetches_from_a_mirror_folder_without_a_network(
    site: Site, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABBOT_SPECS_MIRROR", str(site.mirror))
    monkeypatch.setenv("LABBOT_SPECS_BASE_URL", f"http://127.0.0.1:{_closed_port()}")
    assert site.run() == 0
    for name, (_, _, data) in FILES.items():
        assert (site.dest / name).read_bytes() == data
    assert f"from {site.mirror / 'acme-openapi.json'}" in capsys.readouterr().out


def test_the_mirror_by_default_is_the_specs_folder_beside_the_repository_when_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LABBOT_SPECS_MIRROR", raising=False)
    monkeypatch.setattr(script, "DEFAULT_MIRROR", tmp_path / "absent")
    assert script._mirror(None) is None
    monkeypatch.setattr(script, "DEFAULT_MIRROR", tmp_path)
    assert script._mirror(None) == tmp_path
    monkeypatch.setenv("LABBOT_SPECS_MIRROR", "")
    assert script._mirror(None) is None  # empty: no mirror
    assert script.DEFAULT_BASE_URL == "https://raw.githubusercontent.com"


def test_a_file_whose_sha256_differs_from_the_pin_is_refused_and_not_cached(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    tampered = b'{"openapi": "3.0.0", "paths": {"/evil": {}}}\n'
    (site.mirror / "acme-openapi.json").write_bytes(tampered)
    site.served("acme-openapi.json").write_bytes(tampered)

    assert site.run("--mirror", str(site.mirror), "--base-url", site.base_url) == 1
    assert not (site.dest / "acme-openapi.json").exists()
    assert (site.dest / "acme-schema.graphql").is_file()  # the other one is fine
    captured = capsys.readouterr()
    pinned = _sha(FILES["acme-openapi.json"][2])
    for source in (str(site.mirror / "acme-openapi.json"), f"{site.base_url}/acme/api-specs/{COMMIT}/web/openapi.json"):
        assert f"refused acme-openapi.json from {source}: sha256 {_sha(tampered)}, expected {pinned}" in captured.err
    assert "MISSING  acme-openapi.json" in captured.out
    assert list(site.dest.glob("*.part")) == [] and list(site.dest.glob(".*")) == []


def test_a_refused_mirror_copy_falls_back_to_http(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    (site.mirror / "acme-openapi.json").write_bytes(b"not the pinned bytes")
    assert site.run("--mirror", str(site.mirror), "--base-url", site.base_url) == 0
    assert (site.dest / "acme-openapi.json").read_bytes() == FILES["acme-openapi.json"][2]
    captured = capsys.readouterr()
    assert "refused acme-openapi.json from" in captured.err and f"from {site.base_url}/acme/api-specs" in captured.out


def test_a_cached_copy_that_differs_from_the_pin_is_fetched_again(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    site.dest.mkdir()
    (site.dest / "acme-schema.graphql").write_bytes(b"type Query { evil: Boolean }\n")
    assert site.run("--mirror", str(site.mirror), "--base-url", "") == 0
    assert (site.dest / "acme-schema.graphql").read_bytes() == FILES["acme-schema.graphql"][2]
    assert "refused acme-schema.graphql from the cache" in capsys.readouterr().err


def test_no_mirror_and_no_network_fails_with_a_clear_message_unless_warn_only_outside_ci(
    site: Site, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    unreachable = f"http://127.0.0.1:{_closed_port()}"
    args = ("--mirror", "", "--base-url", unreachable)
    assert site.run(*args) == 1
    captured = capsys.readouterr()
    assert re.search(rf"MISSING  acme-openapi\.json  \(no mirror; cannot reach {re.escape(unreachable)}/", captured.out)
    assert f"{unreachable} unreachable, not asked again" in captured.out  # one timeout, not one per file
    assert "2 of 2 vendor specs missing" in captured.err and "`make specs`" in captured.err
    assert not site.dest.exists() or list(site.dest.iterdir()) == []

    assert site.run(*args, "--warn-unless-ci") == 0  # make test on a laptop without network: the tests skip
    assert "will be skipped (with CI=true this is an error)" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    assert site.run(*args, "--warn-unless-ci") == 1
    assert "CI=true" in capsys.readouterr().err


@pytest.mark.subprocess
def test_the_command_line_exit_status(site: Site) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("LABBOT_SPECS_")}
    env |= {"LABBOT_SPECS_DIR": str(site.dest), "LABBOT_SPECS_MIRROR": "", "LABBOT_SPECS_BASE_URL": site.base_url}
    cmd = [sys.executable, str(SCRIPT), "--manifest", str(site.manifest)]
    ok = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    shutil.rmtree(site.dest)
    env["LABBOT_SPECS_BASE_URL"] = f"http://127.0.0.1:{_closed_port()}"
    warned = subprocess.run([*cmd, "--warn-unless-ci"], env=env, capture_output=True, text=True, timeout=60)
    assert warned.returncode == 0 and "make specs" in warned.stdout
    failed = subprocess.run([*cmd, "--warn-unless-ci"], env=env | {"CI": "true"}, capture_output=True, timeout=60)
    assert failed.returncode == 1


def test_the_pins_are_well_formed_and_the_tests_read_the_same_ones() -> None:
    specs = script.load_manifest()
    assert {s.file for s in specs} == {
        "slack-web-openapi-v2.json",
        "slack-event-wrapper-schema.json",
        "notion-openapi.json",
        "linear-schema.graphql",
        "datadog-v1-openapi.yaml",
        "kuberay-rayclusters-crd.yaml",
    }
    for s in specs:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", s.repo) and re.fullmatch(r"[0-9a-f]{40}", s.commit), s
        assert re.fullmatch(r"[0-9a-f]{64}", s.sha256) and not s.path.startswith("/"), s
    assert pins() == {s.file: s.sha256 for s in specs}


@pytest.fixture
def real_specs() -> dict[str, Path]:
    """The six real specs: this needs them (make specs). Asked for before `site`, which clears CI."""
    return {name: spec_path(name) for name in pins()}


def test_the_real_pins_fetch_over_http_from_a_server_laid_out_like_github(
    real_specs: dict[str, Path], site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real specs served at their repo/commit/path, as raw.githubusercontent.com would: all fetched."""
    for pinned in script.load_manifest():
        served = site.www / pinned.repo / pinned.commit / pinned.path
        served.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real_specs[pinned.file], served)
    dest = tmp_path / "real"
    assert script.main(["--dest", str(dest), "--mirror", "", "--base-url", site.base_url]) == 0
    assert sorted(p.name for p in dest.iterdir()) == sorted(pins())
    assert capsys.readouterr().out.count(f"from {site.base_url}/") == len(pins())


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_test_runs_make_specs_first_and_only_warns() -> None:
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = dry.stdout.splitlines()
    fetch = next(i for i, line in enumerate(lines) if "scripts/specs.py" in line)
    assert "--warn-unless-ci" in lines[fetch]
    assert any("pytest" in line for line in lines[fetch + 1 :])
    strict = subprocess.run(["make", "-n", "specs"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "scripts/specs.py" in strict.stdout and "--warn-unless-ci" not in strict.stdout
