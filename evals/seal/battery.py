"""The seal of one eval run, measured: the probe battery in a fresh sample sandbox of the run, plus the
reward-tampering probes, as one :class:`~labbot.evals.seal.report.IsolationReport`.

What must stay invisible comes from where the battery runs: the paths in ``LABBOT_EVAL_PROTECT`` (labbot's home —
its database, tokens and Ray's state — which the control plane sets for its eval jobs), the suite's ``original/``,
the values of every secret in this process's environment (the run's telemetry token among them), and every TCP port
listening on the host (Ray's included). The sandbox is built as a sample's is: a fresh copy of the first task's
repository, the suite's venv, the run's network policy (``allow_hosts`` through the proxy, or none).

The eval job runs it alongside the samples (:func:`labbot.evals.running.runner.run_suite`) and gives :func:`battery` the
seal's cache (:mod:`labbot.evals.seal.cache`): the passing verdicts of the probes that do not depend on the suite
are reused while the sandbox's configuration, the host surface and labbot's code are the same; the rest run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from labbot.common.errors import BadRequest
from labbot.common.redact import secret_env_values
from labbot.evals.running.solver_access import SOLVER_DIR
from labbot.evals.sandbox.bwrap import Limits, SandboxSpec
from labbot.evals.sandbox.proxy import AllowList
from labbot.evals.seal import contamination
from labbot.evals.seal.cache import SealCache, cache_key
from labbot.evals.seal.leak_probes import (
    PROBES,
    HostSurface,
    NetworkTargets,
    host_addresses,
    host_listening_ports,
    run_probes,
    task_needles,
)
from labbot.evals.seal.report import IsolationReport
from labbot.evals.seal.tamper_probes import TAMPER_LIMITS, tamper_probes
from labbot.evals.suite import SUITE_FILE, EvalTask, load, original_dir, task_repo

ENV_PROTECT = "LABBOT_EVAL_PROTECT"
ENV_ALLOW_HOSTS = "LABBOT_EVAL_ALLOW_HOSTS"
OUTSIDE_CANDIDATES = ("http://example.org/", "http://labbot-probe.invalid/", "http://example.net/")


def allow_hosts_from_env() -> tuple[str, ...]:
    return tuple(h.strip() for h in os.environ.get(ENV_ALLOW_HOSTS, "").split(",") if h.strip())


def host_surface(suite_dir: Path) -> HostSurface:
    protect = [Path(p) for p in os.environ.get(ENV_PROTECT, "").split(os.pathsep) if p]
    return HostSurface(files=[*protect, original_dir(suite_dir)], secrets=secret_env_values())


def outside_url(allow_hosts: Sequence[str]) -> str:
    """A URL on no allow-list entry, for the probe that asks the proxy for a host it must refuse."""
    allowed = AllowList.parse(allow_hosts)
    for url in OUTSIDE_CANDIDATES:
        if allowed.refusal(urlsplit(url).hostname or "") is not None:
            return url
    raise BadRequest("every probe target is on [eval] allow_hosts: the allow-list cannot be that wide")


def _toolchain(suite_dir: Path) -> tuple[str, ...]:
    """The vendored trees the suite's sandboxes show (none for a folder laid out like a suite without its
    ``suite.json``: the seal's own fixtures)."""
    return tuple(load(suite_dir).toolchain) if (suite_dir / SUITE_FILE).is_file() else ()


def battery(
    suite_dir: Path,
    task: EvalTask,
    venv: Path | None,
    *,
    allow_hosts: Sequence[str] = (),
    solver_dir: Path | None = None,
    cache: SealCache | None = None,
) -> IsolationReport:
    """The history, leftovers, network and host probes inside a fresh sandbox of ``task``, built as its sample's:
    with the run's command solver's folder at ``/solver`` too (so an agent folder holding the answer is seen); and
    the contamination walk (:mod:`labbot.evals.seal.contamination`) in another, which always runs (it reads the suite).

    With a ``cache`` (:mod:`labbot.evals.seal.cache`), the probes that do not depend on the suite and passed in a
    run with the same sandbox configuration, host surface and labbot within its max age are not run again: their
    verdicts come back with ``ran`` ``cached <ISO time>``; the others run in one exec, and their passing verdicts
    are stored (a failed one never)."""
    with tempfile.TemporaryDirectory(prefix="labbot-probe-") as tmp:
        workspace = Path(tmp) / "work"
        shutil.copytree(task_repo(suite_dir, task.id), workspace, symlinks=True)
        spec = SandboxSpec(
            workspace,
            venv=venv,
            network="proxy" if allow_hosts else "none",
            allow_hosts=tuple(allow_hosts),
            ro_binds={SOLVER_DIR: solver_dir} if solver_dir is not None else {},
            toolchain=_toolchain(suite_dir),
        )
        # the ports and addresses resolved once: what the probes try is what the cache's key says
        host = replace(host_surface(suite_dir), ports=host_listening_ports(), addresses=host_addresses())
        network = NetworkTargets(outside_url=outside_url(allow_hosts))
        key = cache_key(spec, network) if cache is not None else ""
        cached = cache.lookup(key, host) if cache is not None else {}
        fresh = run_probes(
            spec,
            task_needles(suite_dir, task, workspace),
            host=host,
            network=network,
            only=[k for k, _, _ in PROBES if k not in cached] if cached else None,
        )
        original = original_dir(suite_dir) / task.path
        sources = contamination.definitions(original.read_text(), task.symbols, f"the original {task.path}")
        walked = contamination.probe(spec, contamination.task_needles(sources, workspace, [task.canary]))
    if cache is not None:
        cache.store(key, host, fresh.probes)
    by_name = {p.name: p for p in fresh.probes}
    return IsolationReport([*(cached[k] if k in cached else by_name[name] for k, name, _ in PROBES), walked])


def probe_suite(
    suite_dir: Path,
    *,
    task_id: str | None = None,
    venv: Path | None = None,
    allow_hosts: Sequence[str] | None = None,
    tamper: bool = True,
    limits: Limits | None = None,
) -> IsolationReport:
    """The whole battery for a suite (``labbot eval probe``, and the eval job before its samples): the sandbox
    probes on ``task_id`` (default: the first task), and the tampering probes when ``tamper``."""
    suite = load(suite_dir)
    task = suite.task(task_id) if task_id else suite.tasks[0]
    if venv is None:
        from labbot.evals.generation.generator import default_cache
        from labbot.evals.sandbox.venvs import ensure_venv
        from labbot.evals.suite import wheels_dir

        venv = ensure_venv(wheels_dir(suite_dir), default_cache())
    hosts = allow_hosts_from_env() if allow_hosts is None else tuple(allow_hosts)
    report = battery(suite_dir, task, venv, allow_hosts=hosts)
    if not tamper:
        return report
    return IsolationReport([*report.probes, *tamper_probes(suite_dir, suite, task, venv, limits or TAMPER_LIMITS)])
