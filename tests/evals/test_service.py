"""The control plane's side of evals: suites checked and kept, eval runs launched as labbot runs of the ``eval``
job, results read back; and ``/api/v1/evals`` over it (bad input is a 4xx that says what would be right)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from eval_services import make_eval_service, make_suite
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.evals.service import EVALS_OWNER, EvalService, pack
from labbot.training.telemetry_store import TelemetryStore

TOKEN = "admin-token-for-eval-tests"


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvalService:
    return make_eval_service(tmp_path, monkeypatch)


def test_a_suite_is_checked_kept_and_listed(evals: EvalService, tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "made")
    kept = evals.add_suite(io.BytesIO(pack(tmp_path / "made")))
    assert kept == {
        "suite": suite.id, "source": "calc", "commit": "0" * 40, "seed": 0, "tasks": 2, "flaky": [],
        "owners": [], "shared": True,  # sent without an owner: the lab's
    }  # fmt: skip
    assert (evals.suites_root / suite.id / "tasks" / "t00-add" / "repo").is_dir()
    assert [s["suite"] for s in evals.suites()] == [suite.id]
    assert [t["id"] for t in evals.suite(suite.id)["tasks"]] == ["t00-add", "t01-add"]
    assert evals.artifacts is not None
    assert [a["name"] for a in evals.artifacts.list(EVALS_OWNER)] == [f"{suite.id}.tar.gz"]
    evals.add_suite(io.BytesIO(pack(tmp_path / "made")))  # the same suite again: nothing new
    assert len(evals.artifacts.list(EVALS_OWNER)) == 1 and len(evals.suites()) == 1


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    buf.seek(0)
    return buf


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (lambda: io.BytesIO(b"not a tarball"), "not a readable .tar.gz"),
        (lambda: _tar({"readme.txt": b"x"}), "has no suite.json"),
        (lambda: _tar({"../escape/suite.json": b"{}"}), "not a readable .tar.gz"),
        (lambda: _tar({"suite.json": b"{}"}, links={"original": "/etc"}), "not a readable .tar.gz"),
        (lambda: _tar({"suite.json": b"[1, 2"}), "suite.json is not a suite"),
    ],
    ids=["garbage", "no-suite-json", "dotdot", "link-out", "bad-json"],
)
def test_a_bad_suite_archive_is_refused_and_leaves_nothing(evals: EvalService, archive: Any, message: str) -> None:
    from labbot.common.errors import BadRequest

    with pytest.raises(BadRequest, match=message):
        evals.add_suite(archive())
    assert evals.suites() == []
    assert [p.name for p in evals.suites_root.iterdir()] == []


def test_an_edited_suite_is_refused(evals: EvalService, tmp_path: Path) -> None:
    from labbot.common.errors import BadRequest

    make_suite(tmp_path / "made")
    doc = json.loads((tmp_path / "made" / "suite.json").read_text())
    doc["tasks"][0]["fail_to_pass"] = []  # an easier task under the same id
    (tmp_path / "made" / "suite.json").write_text(json.dumps(doc))
    with pytest.raises(BadRequest, match="does not match its content"):
        evals.add_suite(io.BytesIO(pack(tmp_path / "made")))


@pytest.mark.parametrize(("nodes", "fan_out"), [(1, "off"), (3, "auto"), (None, "auto")])
def test_an_eval_run_fans_out_only_where_the_cluster_has_nodes_to_fan_out_over(
    evals: EvalService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: int | None, fan_out: str
) -> None:
    """One node with CPUs: the job is told off, and never connects to Ray to look; more, or Ray not answering: auto,
    the job looks itself (and fans out, or says why not)."""
    suite = make_suite(tmp_path / "made")
    evals.add_suite(io.BytesIO(pack(tmp_path / "made")))
    monkeypatch.setattr(evals.runs, "nodes_with_cpus", lambda: nodes)
    run = evals.launch(suite.id, solver="gold", owner="alice")
    assert run["params"]["fan_out"] == fan_out
    [sub] = evals.submitted  # type: ignore[attr-defined]
    assert f"--fan_out {fan_out}" in sub.entrypoint


def test_an_eval_run_is_a_labbot_run_of_the_eval_job(evals: EvalService, tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "made")
    evals.add_suite(io.BytesIO(pack(tmp_path / "made")))
    run = evals.launch(suite.id, solver="gold", owner="alice", max_samples=3)
    assert run["job"] == "eval" and run["owner"] == "alice"
    [sub] = evals.submitted  # type: ignore[attr-defined]
    assert f"--suite {suite.id}" in sub.entrypoint and "--solver gold" in sub.entrypoint
    assert "--max_samples 3" in sub.entrypoint
    shown = evals.results(run["id"])
    assert shown["suite"] == suite.id and shown["solver"] == "gold" and shown["status"] == "pending"
    assert "pass_rate" not in shown  # no results yet
    # the job wrote its results: they are read back, and the .eval log goes into the artifact store once
    out = tmp_path / "runs" / run["id"] / "eval"
    out.mkdir(parents=True)
    results = {"suite": suite.id, "solver": "gold", "status": "success", "pass_rate": 1.0, "samples": [],
               "isolation": {"score": 1.0, "probes": []}, "log": "x.eval"}  # fmt: skip
    (out / "results.json").write_text(json.dumps(results))
    (out / "x.eval").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    with evals.runs.db.session() as s:
        from labbot.storage.models import Run

        s.get_one(Run, run["id"]).status = "succeeded"
    shown = evals.results(run["id"])
    assert shown["pass_rate"] == 1.0 and shown["log_artifact"]
    assert evals.results(run["id"])["log_artifact"] == shown["log_artifact"]
    assert evals.artifacts is not None
    assert {a["name"] for a in evals.artifacts.list(EVALS_OWNER)} == {f"{run['id']}.eval", f"{suite.id}.tar.gz"}
    assert [r["id"] for r in evals.eval_runs()] == [run["id"]]


def test_unknown_suite_and_not_an_eval_run_are_404(evals: EvalService) -> None:
    from labbot.common.errors import BadRequest, LabbotError

    with pytest.raises(LabbotError, match="no suite suite-0123456789ab") as e:
        evals.launch("suite-0123456789ab", solver="gold", owner="a")
    assert e.value.status == 404
    with pytest.raises(BadRequest, match="is not a suite id"):
        evals.suite("../../etc")
    run = evals.runs.launch(__import__("labbot.training.specs", fromlist=["x"]).LaunchRequest(job="tiny-lm")).run
    with pytest.raises(LabbotError, match="not an eval run") as e:
        evals.results(run["id"])
    assert e.value.status == 404


def test_the_http_routes(evals: EvalService, tmp_path: Path) -> None:
    app = create_app(evals.runs, TelemetryStore(evals.runs.db), admin_token=TOKEN, evals=evals)
    auth = {"authorization": f"Bearer {TOKEN}"}
    suite = make_suite(tmp_path / "made")
    with TestClient(app) as http:
        assert http.post("/api/v1/evals/suites", content=b"x").status_code == 401
        r = http.post("/api/v1/evals/suites", content=pack(tmp_path / "made"), headers=auth)
        assert r.status_code == 201 and r.json()["suite"]["suite"] == suite.id
        assert http.get("/api/v1/evals/suites", headers=auth).json()["suites"][0]["tasks"] == 2
        assert http.get(f"/api/v1/evals/suites/{suite.id}", headers=auth).json()["suite"]["tasks"][0]["id"] == "t00-add"
        bad = http.post("/api/v1/evals/suites", content=b"garbage", headers=auth)
        assert bad.status_code == 400 and "not a readable .tar.gz" in bad.json()["error"]["message"]
        for body, fragment in (
            (b"[]", "must be a JSON object"),
            (b'{"suite": "x", "max_samples": 0}', "max_samples"),
            (b'{"suite": "x", "colour": 1}', "colour"),
            (b"{", "bad eval run request"),
        ):
            r = http.post("/api/v1/evals/runs", content=body, headers=auth)
            assert r.status_code == 400 and fragment in r.json()["error"]["message"], (body, r.text)
        r = http.post("/api/v1/evals/runs", json={"suite": suite.id, "solver": "none", "owner": "bob"}, headers=auth)
        assert r.status_code == 201, r.text
        run_id = r.json()["eval"]["id"]
        assert http.get(f"/api/v1/evals/runs/{run_id}", headers=auth).json()["eval"]["solver"] == "none"
        assert [e["id"] for e in http.get("/api/v1/evals/runs", headers=auth).json()["evals"]] == [run_id]
        assert http.get("/api/v1/evals/runs?limit=0", headers=auth).status_code == 400
        assert http.get("/api/v1/evals/suites/nope", headers=auth).status_code == 400
        assert http.get("/api/v1/evals/suites/suite-0123456789ab", headers=auth).status_code == 404
    off = create_app(evals.runs, TelemetryStore(evals.runs.db), admin_token=TOKEN)
    with TestClient(off) as http:
        assert http.get("/api/v1/evals/suites", headers=auth).status_code == 503


def test_the_lab_mcp_tools_for_evals(evals: EvalService, tmp_path: Path) -> None:
    """What the eval-writer does through the ``lab`` server, against the real app: list, read (without canaries),
    run, read results; generating starts a run of the eval-generate job."""
    import asyncio

    import httpx
    from mcp import Client

    from labbot.mcp_servers.lab import LabApi, build_server

    app = create_app(evals.runs, TelemetryStore(evals.runs.db), admin_token=TOKEN, evals=evals)
    suite = make_suite(tmp_path / "made")
    evals.add_suite(io.BytesIO(pack(tmp_path / "made")))
    lab = LabApi("http://labbot.test", TOKEN, agent="eval-writer", transport=httpx.ASGITransport(app))

    async def go() -> list[tuple[bool, str]]:
        async with Client(build_server(lab)) as client:
            out = []
            for name, args in (
                ("list_eval_suites", {}),
                ("get_eval_suite", {"suite_id": suite.id}),
                ("run_eval", {"suite_id": suite.id, "solver": "none"}),
                ("generate_eval_suite", {"count": 3, "seed": 7}),
            ):
                r = await client.call_tool(name, args)
                out.append((r.is_error, "".join(getattr(c, "text", "") for c in r.content)))
            return out

    (listed, shown, ran, generated) = asyncio.run(go())
    assert not listed[0] and f"{suite.id} · calc @ 0000000000 · 2 tasks" in listed[1]
    assert not shown[0] and '"t00-add"' in shown[1] and "canary" not in shown[1]
    assert not ran[0] and "solver none" in ran[1], ran
    run_id = ran[1].split()[2]
    assert not generated[0] and "eval-generate" in generated[1], generated

    async def results() -> str:
        async with Client(build_server(lab)) as client:
            r = await client.call_tool("get_eval_results", {"run_id": run_id})
            return "".join(getattr(c, "text", "") for c in r.content)

    assert f"eval {run_id} · {suite.id} · solver none · pending" in asyncio.run(results())


def test_a_suite_an_eval_generate_job_wrote_is_listed_and_kept_on_first_use(evals: EvalService) -> None:
    suite = make_suite(evals.suites_root / "pending")
    (evals.suites_root / "pending").rename(evals.suites_root / suite.id)  # what the job's move does
    assert [s["suite"] for s in evals.suites()] == [suite.id]
    assert evals.artifacts is not None and evals.artifacts.list(EVALS_OWNER) == []
    evals.suite(suite.id)
    evals.suite(suite.id)
    assert [a["name"] for a in evals.artifacts.list(EVALS_OWNER)] == [f"{suite.id}.tar.gz"]
