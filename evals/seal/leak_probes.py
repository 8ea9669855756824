"""The leak probes: every way a solver could read the answer (or reach past the seal) is tried from inside a real
sandbox of the run — alongside its samples, and in ``labbot eval probe`` — and each probe's evidence is reported.

The probes themselves are one script (:mod:`labbot.evals.seal.leak_probe_script`) run by the sandbox's own Python in the
task workspace, so one exec runs them all (about a second): git history in every form, bytecode and build leftovers, the
network (raw TCP, DNS, HTTP without the proxy, a host outside the allow-list through it), the host (labbot's files,
Ray's sockets and ports, the environment's secrets, other processes, anything readable holding the deleted code).

What they look for are *needles* (:func:`needles`): the task's canary (planted in the deleted feature in the suite's
``original/``) and the lines of the deleted code that are nowhere in the task tree — the latter is what a leak from
the user's own checkout shows (its history and build output hold the original, but never a canary).

:func:`run_probes` runs the battery in a sandbox built from a sample's :class:`~labbot.evals.sandbox.bwrap.SandboxSpec`;
:func:`run_probes_naive` runs the very same script in a naive setup (a plain copy of the checkout with the feature
deleted, a plain subprocess with the host's environment), so a benchmark can show what each layer of the seal closes.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from labbot.common.errors import BadRequest
from labbot.common.python_ast import parse_python
from labbot.evals.sandbox.bwrap import VENV, ExecResult, Sandbox, SandboxSpec, interpreter_prefixes
from labbot.evals.sandbox.proxy import PORT as PROXY_PORT
from labbot.evals.sandbox.proxy import AllowList
from labbot.evals.seal import leak_probe_script
from labbot.evals.seal.report import Category, IsolationReport, ProbeResult
from labbot.evals.suite import EvalTask

SCRIPT = Path(leak_probe_script.__file__).read_text()
MIN_NEEDLE = 16  # characters of a deleted line worth looking for (shorter ones are everywhere)
MAX_NEEDLES = 24
MAX_PORTS = 64
PROBES: list[tuple[str, str, Category]] = [(k, n, cast(Category, c)) for k, n, c in leak_probe_script.PROBES]


@dataclass(frozen=True)
class HostSurface:
    """What of the host must stay invisible from inside a sample's sandbox."""

    files: Sequence[Path | str] = ()  # labbot's home, its database file, token files, the suite's original/
    ray_sockets: Sequence[Path | str] = ()  # Ray's temp dir, its session's sockets
    ray_ports: Sequence[int] = ()  # Ray's GCS, dashboard, client ports
    secrets: Sequence[str] = ()  # values of the environment's secrets (tokens, API keys): never shown in evidence
    ports: Sequence[int] | None = None  # other host ports; None: every port listening on the host now
    addresses: Sequence[str] | None = None  # where to try the ports; None: 127.0.0.1 and the host's own addresses


@dataclass(frozen=True)
class NetworkTargets:
    """Where the network probes try to go."""

    public_ip: str = "1.1.1.1"
    public_port: int = 443
    dns_name: str = "pypi.org"
    http_url: str = "http://example.com/"  # fetched without any proxy
    outside_url: str = "http://example.org/"  # a host not on the allow-list, fetched the way the environment says
    timeout_s: float = 2.0


class Runner(Protocol):
    """Something that runs a command in the workspace: a :class:`Sandbox`, or the naive setup."""

    def exec(
        self, cmd: Sequence[str], *, input: bytes | str | None = None, timeout_s: float | None = None
    ) -> ExecResult: ...


# --- what to look for ---------------------------------------------------------------------------------------------


def _corpus(workspace: Path) -> str:
    parts = []
    for dirpath, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            try:
                parts.append((Path(dirpath) / name).read_bytes()[: 4 * 1024 * 1024].decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(parts)


def needles(canaries: Sequence[str], original_code: Sequence[str] = (), *, workspace: Path | None = None) -> list[str]:
    """The canaries, and the lines of ``original_code`` (the deleted features' source) worth looking for: at least
    :data:`MIN_NEEDLE` characters and, given the task ``workspace``, found in none of its files (a line the task tree
    still has — a signature, a docstring — says nothing), the longest :data:`MAX_NEEDLES`."""
    corpus = _corpus(workspace) if workspace is not None else ""
    lines = {
        stripped
        for code in original_code
        for line in code.splitlines()
        if len(stripped := line.strip()) >= MIN_NEEDLE and any(c.isalnum() for c in stripped)
    }
    kept = sorted((ln for ln in lines if ln not in corpus), key=lambda s: (-len(s), s))[:MAX_NEEDLES]
    return [c for c in dict.fromkeys(canaries) if c] + kept


def deleted_source(original: Path, task: EvalTask) -> str:
    """The source of the features ``task`` deleted, as the suite's ``original/`` has it (canaries included)."""
    path = original / task.path
    try:
        source = path.read_text()
        tree = parse_python(source)
    except (OSError, SyntaxError) as e:
        raise BadRequest(f"cannot read {task.path} of the suite's original for task {task.id}: {e}") from e
    parts = []
    for symbol in task.symbols:
        node: ast.AST = tree
        for part in symbol.split("."):
            body = getattr(node, "body", [])
            found = [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
            match = next((n for n in found if n.name == part), None)
            if match is None:
                raise BadRequest(f"task {task.id}: {symbol} is not defined in the original {task.path}")
            node = match
        parts.append(ast.get_source_segment(source, node) or "")
    return "\n".join(parts)


def task_needles(suite_folder: Path, task: EvalTask, workspace: Path) -> list[str]:
    """:func:`needles` for one task of a suite: its canary and the deleted feature's lines not in ``workspace``."""
    return needles([task.canary], [deleted_source(suite_folder / "original", task)], workspace=workspace)


# --- the host's side ----------------------------------------------------------------------------------------------


def host_listening_ports() -> list[int]:
    """TCP ports listening on this host now (``/proc/net/tcp`` and ``tcp6``)."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A":  # LISTEN
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def host_addresses() -> list[str]:
    """127.0.0.1 and the addresses this host's name resolves to."""
    out = ["127.0.0.1"]
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, family=socket.AF_INET):
            out.append(str(info[4][0]))
    except OSError:
        pass
    return list(dict.fromkeys(out))


def _config(
    needles: Sequence[str], host: HostSurface, network: NetworkTargets, *, skip_ports: Sequence[int] = ()
) -> dict[str, Any]:
    ports = list(host.ports) if host.ports is not None else host_listening_ports()
    ports = [p for p in dict.fromkeys([*ports, *host.ray_ports]) if p not in skip_ports][:MAX_PORTS]
    return {
        "needles": list(needles),
        "host_files": [str(p) for p in host.files],
        "ray_sockets": [str(p) for p in host.ray_sockets],
        "ray_ports": [p for p in host.ray_ports if p not in skip_ports],
        "ports": ports,
        "addresses": list(host.addresses) if host.addresses is not None else host_addresses(),
        "secrets": [s for s in host.secrets if s],
        "public_ip": network.public_ip,
        "public_port": network.public_port,
        "dns_name": network.dns_name,
        "http_url": network.http_url,
        "outside_url": network.outside_url,
        "timeout_s": network.timeout_s,
    }


def battery(runner: Runner, python: str, config: Mapping[str, Any], *, timeout_s: float = 60.0) -> IsolationReport:
    """Run the probe script with ``python`` through ``runner``; a battery that did not finish fails every probe.
    ``config["only"]``, when set, is the probes (keys of :data:`PROBES`) to run: the others are not reported."""
    wanted = [p for p in PROBES if not config.get("only") or p[0] in config["only"]]
    result = runner.exec([python, "-I", "-B", "-c", SCRIPT], input=json.dumps(config), timeout_s=timeout_s)
    try:
        doc = json.loads(result.stdout)
        rows = {p["key"]: p for p in doc["probes"]}
    except (ValueError, KeyError, TypeError):
        why = "timed out" if result.timed_out else f"exit {result.returncode}"
        evidence = f"the probe battery did not finish ({why}): {(result.stderr or result.stdout)[-1500:]}"
        return IsolationReport([ProbeResult(name, cat, False, evidence) for _, name, cat in wanted])
    probes = []
    for key, name, cat in wanted:
        row = rows.get(key)
        if row is None:
            probes.append(ProbeResult(name, cat, False, "the probe did not report"))
        else:
            probes.append(ProbeResult(name, cat, bool(row["passed"]), str(row["evidence"])))
    return IsolationReport(probes)


def _check_outside(spec: SandboxSpec, network: NetworkTargets) -> None:
    from urllib.parse import urlsplit

    host = urlsplit(network.outside_url).hostname or ""
    if spec.network == "proxy" and AllowList.parse(spec.allow_hosts).refusal(host) is None:
        raise BadRequest(
            f"the probe's outside_url {network.outside_url} is on the allow-list {list(spec.allow_hosts)}: "
            "give one outside it, or the probe would test nothing"
        )


def sandbox_python(spec: SandboxSpec) -> str:
    """The Python the probes run with inside: the venv's, or the system's."""
    if spec.venv is not None:
        return f"{VENV}/bin/python"
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else os.path.realpath(sys.executable)


def run_probes(
    spec: SandboxSpec,
    needles: Sequence[str],
    *,
    host: HostSurface = HostSurface(),
    network: NetworkTargets = NetworkTargets(),
    timeout_s: float = 60.0,
    sandbox: type[Sandbox] = Sandbox,
    only: Sequence[str] | None = None,
) -> IsolationReport:
    """The battery inside a real sandbox built from ``spec`` — a sample's: the task repo as workspace, the task's
    venv, the run's network policy (with ``network="proxy"``, the sandbox's own allow-list proxy; the forwarder's
    port is left out of the host-port probe, since inside it is the sandbox's own). ``sandbox`` is for tests: a
    variant that opens a leak, to show the probe that sees it fail. ``only``: the keys of the probes to run (default
    all; the seal leaves out those whose passing verdicts it has cached)."""
    if not needles:
        raise BadRequest("run_probes needs the task's canary (and the deleted code's lines): see probes.needles")
    _check_outside(spec, network)
    skip = [PROXY_PORT] if spec.network == "proxy" else []
    config = {**_config(needles, host, network, skip_ports=skip), "skip_mounts": interpreter_prefixes()}
    if only is not None:
        config["only"] = list(only)
    with sandbox(spec) as box:
        return battery(box, sandbox_python(spec), config, timeout_s=timeout_s)


# --- the naive setup ----------------------------------------------------------------------------------------------


class NaiveSetup:
    """What an eval without a seal does: a plain subprocess in a copy of the checkout, with the host's environment
    and the host's Python (no namespaces, nothing hidden). A :class:`Runner`."""

    def __init__(self, workspace: Path, env: Mapping[str, str] | None = None) -> None:
        self.workspace = workspace
        self.env = dict(os.environ if env is None else env)

    def exec(
        self, cmd: Sequence[str], *, input: bytes | str | None = None, timeout_s: float | None = None
    ) -> ExecResult:
        data = input.encode() if isinstance(input, str) else input
        start = time.monotonic()
        try:
            out = subprocess.run(
                list(cmd), input=data, capture_output=True, cwd=self.workspace, env=self.env, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as e:
            return ExecResult(-9, (e.stdout or b"").decode(errors="replace"), "", True, time.monotonic() - start)
        took = time.monotonic() - start
        return ExecResult(
            out.returncode, out.stdout.decode(errors="replace"), out.stderr.decode(errors="replace"), False, took
        )


def naive_copy(checkout: Path, task_repo: Path, dest: Path) -> Path:
    """A plain copy of the user's ``checkout`` (its ``.git``, caches and build output included) with the task tree's
    files written over it, so the feature is deleted in the working tree: what a naive harness would hand a solver."""
    shutil.copytree(checkout, dest, symlinks=True)
    for dirpath, dirs, files in os.walk(task_repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            src = Path(dirpath) / name
            target = dest / src.relative_to(task_repo)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def run_probes_naive(
    workspace: Path,
    needles: Sequence[str],
    *,
    python: str | None = None,
    host: HostSurface = HostSurface(),
    network: NetworkTargets = NetworkTargets(),
    env: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
) -> IsolationReport:
    """The same battery, really run, in a naive setup over ``workspace`` (see :func:`naive_copy`): ``python`` is
    the one the naive harness would use (the user's venv; default this interpreter), ``env`` the host's."""
    if not needles:
        raise BadRequest("run_probes_naive needs the task's canary (and the deleted code's lines): see probes.needles")
    config = _config(needles, host, network)
    return battery(NaiveSetup(workspace, env), python or sys.executable, config, timeout_s=timeout_s)
