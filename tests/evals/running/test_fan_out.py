"""An eval run's samples fanned out over a real multi-node Ray cluster (``evals.running.fan_out``).

The story: a suite of 12 tasks run by the eval job the way labbot launches it (a Ray job through the Jobs API, the
driver on the head) on a cluster of a head with no CPU and three worker nodes of one CPU each
(``training.local_cluster``): the samples run on more than one node, each node builds the suite's venv once from the
suite's wheels, and ``results.json`` says what a one-node run of the same suite says (``--fan-out off``), with one
``.eval`` log of the 12 samples in the suite's order. Below it, the parts that need no cluster: the suite's archive,
a node prepared once under its lock, the merge of one-sample logs, and when the job fans out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from run_fixtures import make_suite
from support import wait_for

from labbot.common.errors import BadRequest
from labbot.evals.running import fan_out
from labbot.evals.running.job import fan_out_choice
from labbot.evals.running.runner import RESULTS_FILE
from labbot.evals.sandbox.venvs import collect_wheels, with_tools
from labbot.training.launcher import RayLauncher, Submission
from labbot.training.local_cluster import ClusterProcess

ROOT = Path(__file__).resolve().parents[3]
VERDICT = ("task", "passed", "verdict", "tampered", "suspect")


@pytest.fixture(scope="module")
def suite_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve tasks, with the wheels of pytest and coverage (kept in pytest's cache between sessions)."""
    folder = tmp_path_factory.mktemp("fan") / "suite"
    folder.mkdir()
    make_suite(folder, tasks=12)
    cache = request.config.cache
    kept = Path(cache.mkdir("labbot-evals-generate")) / "wheels" if cache is not None else None
    collect_wheels(with_tools([]), folder / "wheels", cache=kept)
    return folder


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
    results: list[tuple[Path, Path, bool]] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(fan_out.prepare_node(tmp_path / "node", archive, "d1", "/some/venv"))
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r[0] for r in results} == {tmp_path / "node" / "suites" / "d1"}
    assert {r[1] for r in results} == {Path("/some/venv")} and not any(r[2] for r in results)
    assert json.loads((tmp_path / "node" / "suites" / "d1" / "suite.json").read_text())["id"]
    assert sorted(p.name for p in (tmp_path / "node").iterdir()) == [".lock", "suites"]  # no half-unpacked folder


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


# ----------------------------------------------------------------------------- on three nodes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    c = ClusterProcess(tmp_path_factory.mktemp("cluster"), workers=3)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _job(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labbot.evals.running.job", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
        cwd=ROOT,
    )


@pytest.mark.subprocess
def test_an_eval_of_12_tasks_fans_out_over_three_nodes_with_the_results_of_one(
    suite_dir: Path, cluster: ClusterProcess, tmp_path: Path
) -> None:
    env = {
        "LABBOT_EVAL_VENV_CACHE": str(tmp_path / "venvs"),
        "LABBOT_EVAL_NODE_CACHE": str(tmp_path / "nodes"),
        "LABBOT_EVAL_SEAL_CACHE": "0",
    }
    launcher = RayLauncher(cluster.connection)
    try:
        sid = launcher.submit(
            Submission(
                submission_id="labbot-fanout-1",
                entrypoint=f"python -m labbot.evals.running.job --suite {suite_dir} --solver gold "
                f"--out {tmp_path / 'three'} --fan-out on",
                runtime_env={"env_vars": env},
                metadata={},
            )
        )
        # meanwhile, the same suite on one node (this machine, no cluster): the baseline
        one = _job("--suite", str(suite_dir), "--solver", "gold", "--out", str(tmp_path / "one"), "--fan-out", "off",
                   env={**env, "RAY_ADDRESS": ""})  # fmt: skip
        assert one.returncode == 0, one.stderr[-3000:]
        job = wait_for(
            lambda: (j := launcher.job(sid)) is not None and j.status in ("SUCCEEDED", "FAILED", "STOPPED") and j,
            timeout=400,
            interval=1.0,
            what="the fanned-out eval job's end",
        )
        logs = launcher.logs(sid)
        assert job.status == "SUCCEEDED", logs[-4000:]
    finally:
        launcher.close()
    assert "samples fan out as Ray tasks over 3 nodes" in logs, logs[-3000:]

    three = json.loads((tmp_path / "three" / RESULTS_FILE).read_text())
    baseline = json.loads((tmp_path / "one" / RESULTS_FILE).read_text())
    for key in ("suite", "solver", "status", "pass_rate", "tampered", "suspect", "untrusted"):
        assert three[key] == baseline[key], key
    assert three["pass_rate"] == 1.0 and not three["untrusted"]
    assert [{k: s[k] for k in VERDICT} for s in three["samples"]] == [
        {k: s[k] for k in VERDICT} for s in baseline["samples"]
    ]
    nodes = {s["node"] for s in three["samples"]}
    assert len(nodes) > 1, nodes  # samples on more than one node
    assert all("node" not in s for s in baseline["samples"])

    log = read_eval_log(str(tmp_path / "three" / three["log"]))  # one log, every sample, in the suite's order
    assert log.status == "success" and [s.id for s in log.samples or []] == [s["task"] for s in baseline["samples"]]
    assert log.eval.dataset.samples == 12 and log.results is not None and log.results.total_samples == 12
    assert log.results.scores[0].metrics["accuracy"].value == 1.0
    assert {(s.metadata or {})[fan_out.NODE_KEY] for s in log.samples or []} == nodes

    # each node that ran samples built the suite's venv once, in its own cache
    built = sorted(p.parent.parent.name for p in (tmp_path / "nodes").glob("*/venvs/venv-*"))
    assert len(built) == len(set(built)) == len(nodes), built
    assert "samples by node: " in logs


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
