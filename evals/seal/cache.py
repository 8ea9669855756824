"""The seal's verdicts that do not depend on the suite, kept between runs: only passing ones, for a day.

Of the sandbox battery (:mod:`labbot.evals.seal.leak_probes`), the network probes and the host probes that look at the
host rather than at the task (Ray's sockets and ports, the environment's secrets, ``/proc``) see the same thing in every
run whose sandbox is built the same way on the same host by the same labbot: their verdicts depend on the sandbox's
configuration (every bind but the workspace, the network policy and its allow-list, the limits, the environment), the
host's surface (its listening ports and addresses, Ray's sockets and ports, the secrets' values) and labbot's code.
:func:`cache_key` (an entry's file) is a sha256 of the configuration and labbot's — its version and a sha256 of every
source file of ``labbot.evals`` (a code change between commits invalidates it); each verdict also keeps
:func:`surface_digest`, a sha256 of the part of the host surface its probe looks at (the port probe: the listening
ports; Ray's; the secrets, as their own sha256s, never the values), so a port that opens runs only the port probe again.
The probes that read the task (history, leftovers, labbot's files with the suite's ``original/``, the needles on any
readable mount, the contamination walk) always run. The tampering probes score the suite's own task, so they are kept
per suite (:func:`tamper_key`: the suite's content id, the task, its venv, the scoring limits, bwrap and labbot's code)
and reused only when every one of them passed.

A verdict is reused only while it passes: a failed probe is never stored (and one stored is dropped if it ever
fails), so a run whose seal is open always ran the probe that found it. Entries live as ``<key>.json`` in
:func:`default_folder` (``$XDG_CACHE_HOME/labbot/evals/seal``, mode 0700, files 0600); deleting the folder clears it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import labbot
from labbot.evals.sandbox.bwrap import Limits, SandboxSpec, interpreter_prefixes
from labbot.evals.seal.leak_probes import PROBES, HostSurface, NetworkTargets
from labbot.evals.seal.report import CACHED, ProbeResult

MAX_AGE_S = 24 * 3600.0
# the probes whose verdicts depend only on the sandbox's configuration, the host and labbot (keys of PROBES)
CACHEABLE = frozenset([*(k for k, _, c in PROBES if c == "network"), "ray", "env_secrets", "proc"])
KEY_OF = {name: key for key, name, _ in PROBES}


def default_folder() -> Path:
    from labbot.evals.generation.generator import default_cache

    return default_cache() / "seal"


@lru_cache(maxsize=1)
def source_digest() -> str:
    """labbot's version and a sha256 of every source file of ``labbot.evals`` (names and contents): the sandbox, the
    probes and scoring all decide a verdict, so the whole package, not only ``seal/``."""
    digest = hashlib.sha256(labbot.__version__.encode())
    root = Path(__file__).resolve().parents[1]  # evals/
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _bwrap_identity() -> list[Any]:
    found = shutil.which("bwrap")
    if found is None:
        return []
    st = os.stat(found)
    return [found, st.st_size, st.st_mtime_ns]


def _hashed(values: Iterable[str]) -> list[str]:
    return sorted(hashlib.sha256(v.encode()).hexdigest() for v in values if v)


# what of the host surface each probe looks at (the others: only the sandbox's configuration and labbot)
SURFACE: dict[str, tuple[str, ...]] = {
    "tcp_host": ("ports", "ray_ports", "addresses"),
    "ray": ("ray_sockets", "ray_ports"),
    "env_secrets": ("secrets",),
}


def cache_key(spec: SandboxSpec, network: NetworkTargets) -> str:
    """The sha256 an entry is kept under: the sandbox's configuration without its workspace, the probes' network
    targets, labbot's code, bubblewrap and the interpreter's prefix (see the module docstring)."""
    doc = {
        "labbot": source_digest(),
        "bwrap": _bwrap_identity(),
        "interpreter": interpreter_prefixes(),
        "sandbox": {
            "venv": str(spec.venv) if spec.venv is not None else None,
            "network": spec.network,
            "allow_hosts": sorted(spec.allow_hosts),
            "ro_binds": sorted((k, str(v)) for k, v in spec.ro_binds.items()),
            "rw_binds": sorted((k, str(v)) for k, v in spec.rw_binds.items()),
            "env": sorted((k, hashlib.sha256(v.encode()).hexdigest()) for k, v in spec.env.items()),
            "limits": asdict(spec.limits),
        },
        "network": asdict(network),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def surface_digest(probe: str, host: HostSurface) -> str:
    """A sha256 of the part of the host surface ``probe`` looks at (:data:`SURFACE`; the secrets as their own
    sha256s): a verdict is reused only while it is the same. ``host``'s ports and addresses must be resolved, so the
    digest is of what the probe was given: a port opened since runs the port probe again."""
    if host.ports is None or host.addresses is None:
        raise ValueError("surface_digest needs the host's ports and addresses resolved")
    doc = {
        "ports": sorted(host.ports),
        "ray_ports": sorted(host.ray_ports),
        "addresses": sorted(host.addresses),
        "ray_sockets": sorted(str(p) for p in host.ray_sockets),
        "secrets": _hashed(host.secrets),
    }
    wanted = {k: doc[k] for k in SURFACE.get(probe, ())}
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()


def tamper_key(suite_id: str, task_id: str, venv: Path, limits: Limits) -> str:
    """An entry for one suite's tampering probes: the suite (its id is a sha256 of its content), the task, the venv
    (content-addressed by its wheels), the scoring limits, bwrap and labbot's code — everything that decides how the
    cheats are scored."""
    doc = [
        "tamper",
        suite_id,
        task_id,
        os.path.realpath(venv),
        [limits.timeout_s, limits.memory_mb, limits.file_mb, limits.pids, limits.tmp_mb],
        _bwrap_identity(),
        source_digest(),
    ]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


class SealCache:
    """Passing verdicts of the :data:`CACHEABLE` probes by :func:`cache_key`, each with the time it was seen."""

    def __init__(self, folder: Path | None = None, *, max_age_s: float = MAX_AGE_S) -> None:
        self.folder = folder if folder is not None else default_folder()
        self.max_age_s = max_age_s

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def _read(self, key: str) -> dict[str, dict[str, Any]]:
        try:
            doc = json.loads(self._path(key).read_text())
            return {k: v for k, v in doc["probes"].items() if isinstance(v, dict)}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def lookup(self, key: str, host: HostSurface, *, now: float | None = None) -> dict[str, ProbeResult]:
        """The fresh passing verdicts kept under ``key`` for this ``host``, by probe key, each ``ran``
        ``cached <ISO time>``."""
        now = time.time() if now is None else now
        found = {}
        for probe, row in self._read(key).items():
            try:
                fresh = 0 <= now - float(row["at"]) <= self.max_age_s
                same = row["surface"] == surface_digest(probe, host)
                if probe in CACHEABLE and fresh and same and row["passed"] is True:
                    seen = datetime.fromtimestamp(float(row["at"]), UTC).isoformat(timespec="seconds")
                    found[probe] = ProbeResult(
                        str(row["name"]), row["category"], True, str(row["evidence"]), ran=f"{CACHED} {seen}"
                    )
            except (KeyError, TypeError, ValueError):
                continue
        return found

    def store(self, key: str, host: HostSurface, results: Iterable[ProbeResult], *, now: float | None = None) -> None:
        """Keep the passing verdicts of ``results`` that may be cached; drop any kept one that failed now."""
        now = time.time() if now is None else now
        kept = self._read(key)
        for p in results:
            probe = KEY_OF.get(p.name)
            if probe is None or probe not in CACHEABLE:
                continue
            if p.passed:
                row = {"name": p.name, "category": p.category, "passed": True, "evidence": p.evidence, "at": now}
                row["surface"] = surface_digest(probe, host)
                kept[probe] = row
            else:
                kept.pop(probe, None)
        self._write(key, kept)

    def lookup_tamper(self, key: str, *, now: float | None = None) -> list[ProbeResult] | None:
        """The suite's tampering verdicts kept under ``key`` (:func:`tamper_key`), all of them passing and fresh, each
        ``ran`` ``cached <ISO time>``; None when there are none to reuse."""
        now = time.time() if now is None else now
        rows = self._read(key)
        try:
            ordered = sorted(rows.values(), key=lambda r: int(r["order"]))
            if not ordered or not all(
                r["passed"] is True and 0 <= now - float(r["at"]) <= self.max_age_s for r in ordered
            ):
                return None
            return [
                ProbeResult(
                    str(r["name"]),
                    "tampering",
                    True,
                    str(r["evidence"]),
                    ran=f"{CACHED} {datetime.fromtimestamp(float(r['at']), UTC).isoformat(timespec='seconds')}",
                )
                for r in ordered
            ]
        except (KeyError, TypeError, ValueError):
            return None

    def store_tamper(self, key: str, results: list[ProbeResult], *, now: float | None = None) -> None:
        """Keep a suite's tampering verdicts when every one passed; otherwise drop what was kept (a cheat that scored
        runs again next time)."""
        now = time.time() if now is None else now
        if results and all(p.passed for p in results):
            rows = {
                p.name: {"name": p.name, "passed": True, "evidence": p.evidence, "at": now, "order": i}
                for i, p in enumerate(results)
            }
            self._write(key, rows)
        else:
            self._path(key).unlink(missing_ok=True)

    def _write(self, key: str, probes: Mapping[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".seal-", suffix=".json")  # mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"key": key, "probes": probes}, f)
            os.replace(tmp, self._path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


ENV_SEAL_CACHE = "LABBOT_EVAL_SEAL_CACHE"


def seal_cache() -> SealCache | None:
    """The seal's cache in its default folder, or None with ``LABBOT_EVAL_SEAL_CACHE=0`` (every probe runs)."""
    return SealCache() if os.environ.get(ENV_SEAL_CACHE, "1") != "0" else None
