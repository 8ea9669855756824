"""An eval run's samples fanned out over a Ray cluster's nodes (``evals.running.fan_out``): the parts that need no
cluster — the suite's archive, a node prepared once under its lock, when the job fans out and which nodes may run
samples. The story on a real multi-node cluster (12 samples on three nodes, the results of a one-node run) is
``tests/e2e/test_multinode.py``'s, on that module's cluster.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from run_fixtures import make_suite

from labbot.common.errors import BadRequest
from labbot.evals.running import fan_out
from labbot.evals.running.job import fan_out_choice
from labbot.evals.seal.report import IsolationReport, ProbeResult

ROOT = Path(__file__).resolve().parents[3]
VERDICT = ("task", "passed", "verdict", "tampered", "suspect")


# ----------------------------------------------------------------------------- the parts


def test_the_suite_archive_is_the_same_bytes_for_the_same_suite(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    make_suite(a, tasks=2)
    archive = fan_out.suite_archive(a)
    os.utime(a / "suite.json", (1, 1))  # times are not content
    assert fan_out.suite_archive(a) == archive
    b.mkdir()
    make_suite(b, tasks=3)
    assert fan_out.suite_archive(b) != archive


def test_a_node_is_prepared_once_under_its_lock_with_the_venv_given(tmp_path: Path) -> None:
    src = tmp_path / "suite"
    src.mkdir()
    make_suite(src, tasks=2)
    archive = fan_out.suite_archive(src)
    results: list[fan_out.PreparedNode] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(fan_out.prepare_node(tmp_path / "node", archive, "d1", "/some/venv", "run1"))
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r.suite_dir for r in results} == {tmp_path / "node" / "suites" / "d1"}
    assert {r.venv for r in results} == {Path("/some/venv")}  # the venv given: none built
    assert sum(r.first_of_run for r in results) == 1  # one sample of the run measures the node's seal
    assert json.loads((tmp_path / "node" / "suites" / "d1" / "suite.json").read_text())["id"]
    assert sorted(p.name for p in (tmp_path / "node").iterdir()) == [".lock", "runs", "suites"]  # nothing half-done
    again = fan_out.prepare_node(tmp_path / "node", archive, "d1", "/some/venv", "run2")
    assert again.first_of_run and again.suite_dir == results[0].suite_dir  # the next run: unpacked already


def test_a_probe_failed_on_any_node_that_ran_samples_is_the_runs() -> None:
    driver = IsolationReport([ProbeResult("git log --all", "history", True, "")])
    fine = IsolationReport([ProbeResult("git log --all", "history", True, "")])
    leaky = IsolationReport([ProbeResult("git log --all", "history", False, "commit 3f2a: the original mul")])
    assert fan_out.with_nodes(driver, {"10.0.0.7 (node 1a2b3c4d)": fine}).sealed
    merged = fan_out.with_nodes(driver, {"10.0.0.7 (node 1a2b3c4d)": fine, "10.0.0.8 (node 5e6f7a8b)": leaky})
    assert not merged.sealed and merged.score == 0.5
    assert [p.name for p in merged.failed()] == ["git log --all on 10.0.0.8 (node 5e6f7a8b)"]
    assert merged.failed()[0].evidence == "commit 3f2a: the original mul"


def test_what_stays_on_the_drivers_node_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert fan_out_choice("auto", None, {}) == (False, "")  # by hand, outside a cluster
    with pytest.raises(BadRequest, match="needs a Ray cluster"):
        fan_out_choice("on", None, {})
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert fan_out_choice("off", None, {}) == (False, "")
    keep, said = fan_out_choice("auto", tmp_path, {})
    assert not keep and "folder (/solver) is not shipped" in said
    with pytest.raises(BadRequest, match="never shipped through Ray's object store"):
        fan_out_choice("on", None, {"TOKEN": "x"})
    assert fan_out.fan_out_refusal(object(), None, None) is not None


def test_the_nodes_that_may_run_samples_are_named_by_a_resource_or_refused_clearly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(fan_out.ENV_SAMPLE_RESOURCES, raising=False)
    assert fan_out.sample_resources() == {}
    monkeypatch.setenv(fan_out.ENV_SAMPLE_RESOURCES, '{"eval_sandbox": 1}')
    assert fan_out.sample_resources() == {"eval_sandbox": 1.0}
    for bad in ("eval_sandbox", '{"eval_sandbox": 0}', '{"eval_sandbox": true}', "[1]"):
        monkeypatch.setenv(fan_out.ENV_SAMPLE_RESOURCES, bad)
        with pytest.raises(BadRequest, match=r'a JSON object of resource names and positive numbers, like \{"eval'):
            fan_out.sample_resources()
