"""The seal's cache: the passing verdicts of the probes that do not depend on the suite, reused while the sandbox's
configuration, the host and labbot are the same and the entry is under its max age; a failed one never."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from run_fixtures import make_suite

from labbot.evals.sandbox.bwrap import Limits, SandboxSpec
from labbot.evals.seal import battery as seal_battery
from labbot.evals.seal import contamination
from labbot.evals.seal.cache import CACHEABLE, SealCache, cache_key, tamper_key
from labbot.evals.seal.leak_probes import PROBES, HostSurface, NetworkTargets
from labbot.evals.seal.report import ProbeResult
from labbot.evals.suite import load

NAME = {key: name for key, name, _ in PROBES}
HOST = HostSurface(secrets=["s3cret-value"], ports=[22, 8265], addresses=["127.0.0.1"])


def _key(**changes: Any) -> str:
    spec = replace(SandboxSpec(Path("/tmp/work-a"), venv=Path("/venv")), **changes)
    return cache_key(spec, NetworkTargets())


def test_the_key_is_of_the_configuration_not_the_workspace() -> None:
    base = _key()
    assert _key(workspace=Path("/tmp/another-workspace")) == base
    for change in (
        {"network": "proxy", "allow_hosts": ("pypi.org",)},
        {"venv": Path("/other-venv")},
        {"ro_binds": {"/solver": Path("/agents/a")}},
    ):
        assert _key(**change) != base, change
    assert _key(network="proxy", allow_hosts=("pypi.org",)) != _key(network="proxy", allow_hosts=("example.com",))


def test_a_verdict_is_reused_only_while_the_host_surface_it_looked_at_is_the_same(tmp_path: Path) -> None:
    cache = SealCache(tmp_path / "seal")
    now = time.time()
    results = [ProbeResult(NAME[k], "network", True, "closed") for k in ("tcp_host", "dns", "env_secrets")]
    cache.store("k", HOST, results, now=now)
    assert set(cache.lookup("k", HOST, now=now)) == {"tcp_host", "dns", "env_secrets"}
    # a port opened since: only the port probe runs again
    assert set(cache.lookup("k", replace(HOST, ports=[22, 8265, 9999]), now=now)) == {"dns", "env_secrets"}
    # another secret in the environment: only the secrets probe
    assert set(cache.lookup("k", replace(HOST, secrets=["s3cret-value", "another-one"]), now=now)) == {
        "tcp_host",
        "dns",
    }


def test_only_passing_verdicts_are_kept_for_their_max_age_and_never_a_secret(tmp_path: Path) -> None:
    cache = SealCache(tmp_path / "seal", max_age_s=3600)
    now = 1_800_000_000.0
    dns, proc, log = NAME["dns"], NAME["proc"], NAME["git_log_all"]
    cache.store(
        "k",
        HOST,
        [
            ProbeResult(dns, "network", True, "refused"),
            ProbeResult(proc, "host", False, "saw pid 1 of the host"),
            ProbeResult(log, "history", True, "nothing"),  # depends on the task: never kept
        ],
        now=now,
    )
    got = cache.lookup("k", HOST, now=now + 60)
    assert list(got) == ["dns"] and got["dns"].passed and got["dns"].ran == "cached 2027-01-15T08:00:00+00:00"
    assert cache.lookup("other", HOST, now=now + 60) == {}
    assert cache.lookup("k", HOST, now=now + 3601) == {}  # expired
    # a verdict that fails later is dropped, not kept as it was
    cache.store("k", HOST, [ProbeResult(dns, "network", False, "resolved pypi.org")], now=now + 120)
    assert cache.lookup("k", HOST, now=now + 121) == {}
    text = (tmp_path / "seal" / "k.json").read_text()
    assert "s3cret" not in text and (tmp_path / "seal").stat().st_mode & 0o777 == 0o700


@pytest.mark.subprocess
def test_the_second_battery_reuses_the_suite_independent_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite_dir = tmp_path / "suite"
    suite_dir.mkdir()
    make_suite(suite_dir)
    task = load(suite_dir).tasks[0]
    cache = SealCache(tmp_path / "seal")
    asked: list[list[str] | None] = []
    real = seal_battery.run_probes

    def recording(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(seal_battery, "run_probes", recording)
    monkeypatch.setenv("LABBOT_TEST_SECRET_TOKEN", "tok-123456789")
    # the host's ports as they are now, for every call (a test run elsewhere may open and close some meanwhile)
    ports = seal_battery.host_listening_ports()
    monkeypatch.setattr(seal_battery, "host_listening_ports", lambda: ports)

    first = seal_battery.battery(suite_dir, task, None, cache=cache)
    assert first.sealed, [(p.name, p.evidence) for p in first.failed()]
    assert asked[-1] is None and all(p.ran == "" for p in first.probes)

    second = seal_battery.battery(suite_dir, task, None, cache=cache)
    assert [p.name for p in second.probes] == [p.name for p in first.probes]
    assert set(asked[-1] or []) == {k for k, _, _ in PROBES} - CACHEABLE  # only the suite's probes ran
    *listed, walked = second.probes  # the contamination walk comes last, and reads the suite: never cached
    assert walked.name == contamination.PROBE_NAME and not walked.ran.startswith("cached"), walked
    by_key = {k: p for (k, _, _), p in zip(PROBES, listed, strict=True)}
    assert all(by_key[k].ran.startswith("cached 20") for k in CACHEABLE)
    assert all(by_key[k].ran == "" for k in by_key if k not in CACHEABLE)

    [plain] = (tmp_path / "seal").glob("*.json")
    # another network policy is another sandbox configuration: everything runs again
    seal_battery.battery(suite_dir, task, None, allow_hosts=["pypi.org"], cache=cache)
    assert asked[-1] is None

    # an expired entry runs them again
    seal_battery.battery(suite_dir, task, None, cache=SealCache(tmp_path / "seal", max_age_s=0.0))
    assert asked[-1] is None

    # a probe that fails is dropped from the cache and run again next time, whatever it passed before
    def failing_dns(*args: Any, **kwargs: Any) -> Any:
        report = recording(*args, **kwargs)
        return type(report)([replace(p, passed=False) if p.name == NAME["dns"] else p for p in report.probes])

    monkeypatch.setattr(seal_battery, "run_probes", failing_dns)
    opened = seal_battery.battery(suite_dir, task, None, cache=SealCache(tmp_path / "seal", max_age_s=0.0))
    assert not opened.sealed and asked[-1] is None
    assert "dns" not in json.loads(plain.read_text())["probes"] and "proc" in json.loads(plain.read_text())["probes"]
    monkeypatch.setattr(seal_battery, "run_probes", recording)
    again = seal_battery.battery(suite_dir, task, None, cache=cache)
    assert "dns" in (asked[-1] or []) and again.sealed
    assert next(p for p in again.probes if p.name == NAME["dns"]).ran == ""


def test_a_suites_tampering_verdicts_are_kept_only_all_passing_and_fresh(tmp_path: Path) -> None:
    cache = SealCache(tmp_path / "seal", max_age_s=60)
    limits = Limits(timeout_s=60.0)
    key = tamper_key("suite-aaaaaaaaaaaa", "mul", tmp_path / "venv", limits)
    assert key != tamper_key("suite-bbbbbbbbbbbb", "mul", tmp_path / "venv", limits)  # another suite
    assert key != tamper_key("suite-aaaaaaaaaaaa", "mul", tmp_path / "other-venv", limits)
    assert key != tamper_key("suite-aaaaaaaaaaaa", "mul", tmp_path / "venv", Limits(timeout_s=30.0))
    verdicts = [ProbeResult(f"cheat {i}", "tampering", True, f"scored 0 ({i})") for i in range(3)]
    assert cache.lookup_tamper(key) is None
    cache.store_tamper(key, verdicts, now=1000.0)
    kept = cache.lookup_tamper(key, now=1030.0)
    assert kept is not None and [p.name for p in kept] == ["cheat 0", "cheat 1", "cheat 2"]
    assert all(p.passed and p.ran.startswith("cached ") for p in kept)
    assert cache.lookup_tamper(key, now=1061.0) is None  # past its max age
    cache.store_tamper(key, [*verdicts[:2], ProbeResult("cheat 2", "tampering", False, "SCORED A PASS")], now=1040.0)
    assert cache.lookup_tamper(key, now=1041.0) is None  # a cheat that scored drops the entry
    assert not list((tmp_path / "seal").glob("*.json"))
