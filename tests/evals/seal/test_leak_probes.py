"""The isolation probe battery against real sandboxes: each probe passes sealed, and fails — with the evidence of
what it saw — when its leak is opened (history kept in the task repo, the original bound in, a .pyc of the original,
the host's network or /proc given by a test-only sandbox variant, a token put in the environment, ...).

A fixture repository (``seal_repo``): the user's checkout with history and leftovers, the suite's ``original/`` with a
canary, and the task tree with the feature deleted. This machine has no route to the internet, so where a probe
needs "somewhere outside", the host's own HTTP server (127.0.0.1, outside every sandbox's network) stands in for it,
and a DNS server on the host's 127.0.0.1:53 answers every name.
"""

from __future__ import annotations

import abc
import os
import shutil
import socket
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import pytest
import seal_repo
from seal_repo import GIT_ENV, ORIGINAL_STATS, ORIGINAL_WITH_CANARY, SealRepo, git

from labbot.common.errors import BadRequest
from labbot.evals.sandbox.bwrap import WORKDIR, Sandbox, SandboxSpec
from labbot.evals.seal.leak_probes import (
    PROBES,
    HostSurface,
    NetworkTargets,
    battery,
    deleted_source,
    naive_copy,
    needles,
    run_probes,
    run_probes_naive,
)
from labbot.evals.seal.report import IsolationReport

pytestmark = pytest.mark.subprocess  # every test runs bwrap (or the naive setup's subprocess)

TOKEN = "xoxb-" + "1111111111-2222222222-" + "abcdefABCDEF"
NAMES = {key: name for key, name, _ in PROBES}


class _EditedSandbox(Sandbox, abc.ABC):
    """Test-only: the real sandbox with one edit to bubblewrap's command line (the leak a probe must see)."""

    @abc.abstractmethod
    def edit(self, argv: list[str]) -> list[str]: ...

    def argv(
        self,
        cmd: Sequence[str],
        *,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        status_fd: int | None = None,
        block_fd: int | None = None,
    ) -> list[str]:
        return self.edit(super().argv(cmd, cwd=cwd, env=env, status_fd=status_fd, block_fd=block_fd))


class HostNetSandbox(_EditedSandbox):
    """The host's network namespace shared (what the network probes must see)."""

    def edit(self, argv: list[str]) -> list[str]:
        i = argv.index("--unshare-all")
        return [*argv[: i + 1], "--share-net", *argv[i + 1 :]]


class HostProcSandbox(_EditedSandbox):
    """The host's /proc bound in place of the sandbox's own."""

    def edit(self, argv: list[str]) -> list[str]:
        i = argv.index("--proc")
        return [*argv[:i], "--ro-bind", "/proc", "/proc", *argv[i + 2 :]]


class _DNS:
    """A DNS server on the host's 127.0.0.1:53 answering every A query with 10.9.8.7 (what a sandbox given the
    host's network would resolve through: its /etc/resolv.conf is empty, so glibc asks 127.0.0.1)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                query, peer = self.sock.recvfrom(512)
            except OSError:
                return
            end = 12
            while query[end] != 0:
                end += query[end] + 1
            question = query[12 : end + 5]
            qtype = struct.unpack(">H", query[end + 1 : end + 3])[0]
            answers = 1 if qtype == 1 else 0
            header = query[:2] + struct.pack(">HHHHH", 0x8180, 1, answers, 0, 0)
            answer = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + bytes([10, 9, 8, 7]) if answers else b""
            try:
                self.sock.sendto(header + question + answer, peer)
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def seal(tmp_path_factory: pytest.TempPathFactory) -> SealRepo:
    return seal_repo.build(tmp_path_factory.mktemp("seal"))


@dataclass(frozen=True)
class HostThings:
    home: Path  # labbot's home: its database and a token file
    ray: Path  # Ray's temp dir
    raylet: Path  # a live unix socket in it
    gcs_port: int  # a listening port of "Ray's"


@pytest.fixture(scope="module")
def host_things(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThings]:
    """labbot's home (database, token file) and Ray's temp dir (a live socket) and port, on the host."""
    root = tmp_path_factory.mktemp("host")
    home = root / "labbot-home"
    home.mkdir()
    (home / "labbot.db").write_bytes(b"SQLite format 3\x00")
    (home / "slack.token").write_text(TOKEN)
    ray_dir = root / "ray" / "session_latest" / "sockets"
    ray_dir.mkdir(parents=True)
    raylet = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raylet.bind(str(ray_dir / "raylet"))
    raylet.listen()
    gcs = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    gcs.bind(("127.0.0.1", 0))
    gcs.listen()
    try:
        yield HostThings(home, root / "ray", ray_dir / "raylet", gcs.getsockname()[1])
    finally:
        raylet.close()
        gcs.close()


def surface(seal: SealRepo, things: HostThings, server: int) -> HostSurface:
    home = things.home
    return HostSurface(
        files=[home, home / "labbot.db", home / "slack.token", seal.original],
        ray_sockets=[things.ray, things.raylet],
        ray_ports=[things.gcs_port],
        ports=[server],
        secrets=[TOKEN],
        addresses=["127.0.0.1"],
    )


def targets(server: int) -> NetworkTargets:
    return NetworkTargets(
        public_ip="127.0.0.1",  # stands in for a public address: outside the sandbox's network, as 1.1.1.1 is
        public_port=server,
        dns_name="pypi.org",
        http_url=f"http://127.0.0.1:{server}/",
        outside_url=f"http://localhost:{server}/",
        timeout_s=2.0,
    )


@pytest.fixture(scope="module")
def sealed_report(seal: SealRepo, host_things: HostThings, host_server: int) -> Iterator[IsolationReport]:
    os.environ["LABBOT_TEST_SLACK_TOKEN"] = TOKEN  # the host's environment holds it; the sandbox must not
    try:
        yield run_probes(
            SandboxSpec(seal.task_repo),
            seal.needles(),
            host=surface(seal, host_things, host_server),
            network=targets(host_server),
        )
    finally:
        del os.environ["LABBOT_TEST_SLACK_TOKEN"]


@pytest.mark.parametrize("key", list(NAMES))
def test_probe_passes_sealed(sealed_report: IsolationReport, key: str) -> None:
    probe = next(p for p in sealed_report.probes if p.name == NAMES[key])
    assert probe.passed, probe.evidence
    assert probe.evidence


def test_sealed_battery_is_whole_and_scored(sealed_report: IsolationReport) -> None:
    assert [p.name for p in sealed_report.probes] == list(NAMES.values())
    assert sealed_report.sealed and sealed_report.score == 1.0
    assert sealed_report.headline() == f"sealed: {len(PROBES)}/{len(PROBES)} isolation probes passed"
    assert TOKEN not in str(sealed_report.to_json())


# --- opening each leak --------------------------------------------------------------------------------------------


@dataclass
class Leak:
    """One sandbox set-up, to be loosened by an opener."""

    seal: SealRepo
    workspace: Path
    host: HostSurface
    network: NetworkTargets
    root: Path
    ro_binds: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    venv: Path | None = None
    sandbox: type[Sandbox] = Sandbox

    def write_original(self) -> None:
        (self.workspace / "mathpkg" / "stats.py").write_text(ORIGINAL_STATS)

    def restore(self) -> None:
        shutil.copy2(self.seal.task_repo / "mathpkg" / "stats.py", self.workspace / "mathpkg" / "stats.py")

    def dangling_commit(self) -> str:
        """A commit holding the original that no ref, reflog or ORIG_HEAD names any more."""
        self.write_original()
        git(self.workspace, "commit", "-q", "-am", "the original")
        sha = git(self.workspace, "rev-parse", "HEAD")
        git(self.workspace, "reset", "-q", "--hard", "HEAD~1")
        git(self.workspace, "reflog", "expire", "--expire=now", "--all")
        (self.workspace / ".git" / "ORIG_HEAD").unlink(missing_ok=True)
        return sha


def _history_kept(x: Leak) -> None:
    x.write_original()
    git(x.workspace, "commit", "-q", "-am", "wip")
    x.restore()
    git(x.workspace, "commit", "-q", "-am", "feature deleted")


def _reflog(x: Leak) -> None:
    x.write_original()
    git(x.workspace, "commit", "-q", "-am", "wip")
    git(x.workspace, "reset", "-q", "--hard", "HEAD~1")
    (x.workspace / ".git" / "ORIG_HEAD").unlink()


def _orig_head(x: Leak) -> None:
    (x.workspace / ".git" / "ORIG_HEAD").write_text(x.dangling_commit() + "\n")


def _fetch_head(x: Leak) -> None:
    sha = x.dangling_commit()
    (x.workspace / ".git" / "FETCH_HEAD").write_text(f"{sha}\t\tbranch 'main' of /home/ada/mathpkg\n")


def _stash(x: Leak) -> None:
    x.write_original()
    git(x.workspace, "stash", "-q")


def _tags(x: Leak) -> None:
    git(x.workspace, "tag", "v0.1", x.dangling_commit())


def _remotes(x: Leak) -> None:
    checkout = x.seal.checkout
    git(x.workspace, "remote", "add", "origin", str(checkout))
    x.ro_binds[str(checkout)] = checkout


def _all_objects(x: Leak) -> None:
    x.write_original()
    git(x.workspace, "hash-object", "-w", "mathpkg/stats.py")
    x.restore()


def _pycache(x: Leak) -> None:
    seal_repo.original_pyc(x.seal, x.workspace / "mathpkg")


def _build(x: Leak) -> None:
    (x.workspace / "build" / "lib" / "mathpkg").mkdir(parents=True)
    (x.workspace / "build" / "lib" / "mathpkg" / "stats.py").write_text(ORIGINAL_STATS)


def _egg_info(x: Leak) -> None:
    (x.workspace / "mathpkg.egg-info").mkdir()
    (x.workspace / "mathpkg.egg-info" / "PKG-INFO").write_text("Name: mathpkg\n")


def _site_packages(x: Leak) -> None:
    files = {"mathpkg/__init__.py": "", "mathpkg/stats.py": ORIGINAL_STATS}
    x.venv = seal_repo.make_venv(x.root / "venv", files)


def _pip_cache(x: Leak) -> None:
    cache = x.root / "pip-cache" / "wheels" / "ab"
    cache.mkdir(parents=True)
    (cache / "mathpkg-0.1.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    x.ro_binds["/home/sandbox/.cache/pip"] = x.root / "pip-cache"


def _coverage(x: Leak) -> None:
    (x.workspace / ".coverage").write_bytes(b"SQLite format 3\x00")
    (x.workspace / "htmlcov").mkdir()
    (x.workspace / "htmlcov" / "index.html").write_text("<html></html>")


def _host_net(x: Leak) -> None:
    x.sandbox = HostNetSandbox


def _labbot_files(x: Leak) -> None:
    home = Path(x.host.files[0])
    x.ro_binds[str(home)] = home


def _ray(x: Leak) -> None:
    ray = Path(x.host.ray_sockets[0])
    x.ro_binds[str(ray)] = ray


def _env_secrets(x: Leak) -> None:
    x.env["SLACK_BOT_TOKEN"] = TOKEN


def _proc(x: Leak) -> None:
    x.sandbox = HostProcSandbox


def _readable(x: Leak) -> None:
    x.ro_binds["/original"] = x.seal.original


# probe key -> (what opens its leak, what its evidence says then)
OPENERS: dict[str, tuple[Callable[[Leak], None], str]] = {
    "git_log_all": (_history_kept, "3 commit(s); found in their patches: ['weighted_total = sum("),
    "git_reflog": (_reflog, "found in their patches: ['weighted_total"),
    "orig_head": (_orig_head, ".git/ORIG_HEAD (1 commit(s) named)"),
    "fetch_head": (_fetch_head, ".git/FETCH_HEAD (1 commit(s) named)"),
    "stash": (_stash, "stash entries"),
    "tags": (_tags, "tags ['refs/tags/v0.1']"),
    "remotes": (_remotes, "a remote's repository is readable from here"),
    "all_objects": (_all_objects, "(reachable or not); found: ['weighted_total"),
    "pycache": (_pycache, "mathpkg/__pycache__/stats."),
    "build": (_build, "build/lib/mathpkg/stats.py"),
    "egg_info": (_egg_info, "['mathpkg.egg-info']"),
    "site_packages": (_site_packages, 'the original project is importable: ["/venv/lib/'),
    "pip_cache": (_pip_cache, "/home/sandbox/.cache/pip (1 files)"),
    "coverage": (_coverage, "['.coverage', 'htmlcov/']"),
    "tcp_public": (_host_net, "connected"),
    "tcp_host": (_host_net, "connected to the host's ['127.0.0.1:"),
    "dns": (_host_net, "the name server 127.0.0.1 answered"),
    "http_direct": (_host_net, "HTTP 200 'hello from the host"),
    "http_outside": (_host_net, "(no proxy set): HTTP 200"),
    "labbot_files": (_labbot_files, "slack.token (file, "),
    "ray": (_ray, "raylet (socket)"),
    "env_secrets": (_env_secrets, "$SLACK_BOT_TOKEN holds secret #1"),
    "proc": (_proc, "not the probe's own"),
    "readable": (_readable, "/original/mathpkg/stats.py: ['labbot-canary-"),
}


def test_every_probe_has_a_leak_to_open() -> None:
    assert set(OPENERS) == set(NAMES)


@pytest.fixture
def dns_server() -> Iterator[None]:
    try:
        server = _DNS()
    except OSError as e:  # not root, or something else answers DNS here
        pytest.skip(f"cannot serve DNS on 127.0.0.1:53: {e}")
    try:
        yield
    finally:
        server.close()


@pytest.mark.parametrize("key", list(OPENERS))
def test_probe_fails_when_its_leak_is_opened(
    key: str,
    seal: SealRepo,
    host_things: HostThings,
    host_server: int,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    if key == "dns":
        request.getfixturevalue("dns_server")
    workspace = tmp_path / "repo"
    shutil.copytree(seal.task_repo, workspace, symlinks=True)
    leak = Leak(seal, workspace, surface(seal, host_things, host_server), targets(host_server), tmp_path)
    opener, evidence = OPENERS[key]
    opener(leak)
    spec = SandboxSpec(workspace, venv=leak.venv, ro_binds=leak.ro_binds, env=leak.env)
    report = run_probes(spec, seal.needles(), host=leak.host, network=leak.network, sandbox=leak.sandbox)
    probe = next(p for p in report.probes if p.name == NAMES[key])
    assert not probe.passed, probe.evidence
    assert evidence in probe.evidence
    assert not report.sealed and report.headline().startswith("SEAL FAILED")


# --- the rest of the battery's contract ---------------------------------------------------------------------------


@pytest.mark.parametrize("network", ["none", "proxy"])
def test_a_venv_with_the_task_tree_installed_passes(
    seal: SealRepo, tmp_path: Path, network: Literal["none", "proxy"]
) -> None:
    venv = seal_repo.make_venv(tmp_path / "venv", {"mathpkg/__init__.py": "", "mathpkg/stats.py": "x = 1\n"})
    allow = ("127.0.0.1",) if network == "proxy" else ()
    spec = SandboxSpec(seal.task_repo, venv=venv, network=network, allow_hosts=allow)
    report = run_probes(spec, seal.needles(), host=HostSurface(ports=[], secrets=[TOKEN]))
    assert report.sealed, [p for p in report.probes if not p.passed]
    site = next(p for p in report.probes if p.name == NAMES["site_packages"])
    assert "installed at ['/venv/lib/" in site.evidence


def test_proxy_mode_refuses_the_outside_host(seal: SealRepo, host_server: int) -> None:
    spec = SandboxSpec(seal.task_repo, network="proxy", allow_hosts=("127.0.0.1",))
    net = replace(targets(host_server), outside_url=f"http://localhost:{host_server}/")
    report = run_probes(spec, seal.needles(), host=HostSurface(ports=[host_server]), network=net)
    outside = next(p for p in report.probes if p.name == NAMES["http_outside"])
    assert outside.passed and "HTTP 403" in outside.evidence and "not in [eval] allow_hosts" in outside.evidence
    assert report.sealed, [p for p in report.probes if not p.passed]
    with pytest.raises(BadRequest, match="is on the allow-list"):
        run_probes(spec, seal.needles(), network=replace(net, outside_url=f"http://127.0.0.1:{host_server}/"))


def test_a_battery_that_does_not_finish_fails_every_probe(seal: SealRepo) -> None:
    with Sandbox(SandboxSpec(seal.task_repo)) as box:
        report = battery(box, "/nonexistent/python", {"needles": seal.needles()})
    assert len(report.probes) == len(PROBES) and report.score == 0.0
    assert all("the probe battery did not finish (exit " in p.evidence for p in report.probes)


def test_needles_are_the_canary_and_the_deleted_lines_the_task_tree_lacks(seal: SealRepo) -> None:
    source = deleted_source(seal.original, seal.task)
    assert source.startswith("def weighted_mean(xs, weights):") and seal_repo.CANARY in source
    found = needles([seal_repo.CANARY], [source], workspace=seal.task_repo)
    assert found[0] == seal_repo.CANARY
    assert "return weighted_total / total_weight" in found
    assert not any("def weighted_mean" in n or "each counted by its weight" in n for n in found)  # still in the tree
    with pytest.raises(BadRequest, match="is not defined in the original"):
        deleted_source(seal.original, replace(seal.task, symbol="Nope.weighted_mean"))
    with pytest.raises(BadRequest, match="needs the task's canary"):
        run_probes(SandboxSpec(seal.task_repo), [])


def test_naive_setup_really_runs_the_probes_and_leaks(
    seal: SealRepo, host_things: HostThings, host_server: int, tmp_path: Path
) -> None:
    workspace = naive_copy(seal.checkout, seal.task_repo, tmp_path / "naive")
    assert (workspace / "mathpkg" / "stats.py").read_text() == (seal.task_repo / "mathpkg" / "stats.py").read_text()
    venv = seal_repo.make_venv(tmp_path / "dev-venv", {"__editable__.mathpkg.pth": f"{seal.checkout}\n"})
    env = {**os.environ, **GIT_ENV, "SLACK_BOT_TOKEN": TOKEN, "HOME": str(tmp_path)}
    report = run_probes_naive(
        workspace,
        seal.needles(),
        python=str(venv / "bin" / "python"),
        host=surface(seal, host_things, host_server),
        network=targets(host_server),
        env=env,
    )
    failed = {p.name for p in report.failed()}
    for key in ("git_log_all", "tags", "all_objects", "pycache", "build", "egg_info", "site_packages", "coverage"):
        assert NAMES[key] in failed, key
    for key in ("tcp_host", "http_direct", "labbot_files", "ray", "env_secrets", "proc", "readable"):
        assert NAMES[key] in failed, key
    site = next(p for p in report.probes if p.name == NAMES["site_packages"])
    assert f"__editable__.mathpkg.pth -> {seal.checkout}" in site.evidence
    assert not report.sealed and report.score < 0.5
    assert ORIGINAL_WITH_CANARY not in str(report.to_json()) and TOKEN not in str(report.to_json())
