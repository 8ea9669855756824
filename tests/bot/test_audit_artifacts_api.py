"""``/api/v1/audit`` and ``/api/v1/artifacts`` over a real SQLite database and a real ArtifactStore in tmp_path, and
``labbot audit`` (JSON and its table) against that API served by uvicorn.

The RunService behind the app points at an address where nothing answers: none of these routes reach Ray.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.testclient import TestClient
from support import free_port, wait_for

from labbot.agents.fleet.audit import AuditedExecutor, audit_rows
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolResult, ToolSpec
from labbot.bot.api import create_app
from labbot.bot.cli.main import main
from labbot.bot.render.tables import audit_table
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.db import Database
from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection
from labbot.training.registry import JobRegistry
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

ADMIN = "admin-secret"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
QUOTA = 100 * 1024
SECRET = "xoxb-" + "1234567890-SECRETSECRET"  # fake, split: no scanner flags it
PNG = bytes(range(256)) * 4


class Lab:
    """A control plane's HTTP app with the audit trail and the artifact store wired, and no Ray behind it."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
        self.db.upgrade()
        self.root = tmp_path / "artifacts"
        self.store = ArtifactStore(self.db, str(self.root), quota_bytes=QUOTA)
        self.client = TestClient(self.app(), headers={"Authorization": f"Bearer {ADMIN}"})

    def app(self, *, wired: bool = True, **kwargs: Any) -> Starlette:
        service = RunService(
            self.db,
            JobRegistry.from_config({}),
            RayLauncher(RayConnection("http://127.0.0.1:9", None), timeout=1),
            control_url="http://127.0.0.1:9",
            checkpoint_root=self.tmp_path / "runs",
        )
        services: dict[str, Any] = {"db": self.db, "artifacts": self.store} if wired else {}
        return create_app(service, TelemetryStore(self.db), admin_token=ADMIN, **services, **kwargs)

    def put(self, agent: str, name: str, body: bytes, content_type: str | None = None) -> Any:
        headers = {"Content-Type": content_type} if content_type else {}
        return self.client.post(
            "/api/v1/artifacts", params={"agent": agent, "name": name}, content=body, headers=headers
        )

    def names(self, agent: str, **params: str) -> list[str]:
        r = self.client.get("/api/v1/artifacts", params={"agent": agent, **params})
        assert r.status_code == 200, r.text
        return [f"{a['owner_agent']}/{a['name']}" for a in r.json()["artifacts"]]

    def leftovers(self) -> list[Path]:
        """Files under the store's tmp/ (a put in flight, or one that failed and left something behind)."""
        return list((self.root / "tmp").iterdir())

    def blobs(self) -> list[str]:
        return sorted(p.name for p in (self.root / "blobs").rglob("*") if p.is_file())


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path)


def _error(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return str(body["error"]["message"])


# -- the audit trail ------------------------------------------------------------------------------------------------


class Scripted:
    """A tool executor whose answers are scripted per tool name (what AuditedExecutor wraps in production)."""

    def __init__(self, answers: Mapping[str, ToolResult]) -> None:
        self.answers = answers

    def tools(self) -> Sequence[ToolSpec]:
        return [ToolSpec(name, name, {"type": "object"}) for name in self.answers]

    async def call(self, call: ToolCall) -> ToolResult:
        return self.answers[call.name]


def _record_calls(db: Database) -> None:
    """Four calls through the real AuditedExecutor, a minute apart: ag1 reads, ag1 stops (approved), ag2 fails
    (with a Slack token in its arguments and its error), ag2's launch is denied."""
    clock = iter(T0 + timedelta(minutes=i) for i in range(10))
    executor = AuditedExecutor(
        Scripted(
            {
                "lab__list_runs": ToolResult("r1 running"),
                "lab__stop_run": ToolResult("stopped r1", meta={"approver": "U0ALICE001"}),
                "notion__search": ToolResult(f"401 for token {SECRET}", is_error=True),
                "lab__launch_run": ToolResult("denied", is_error=True, meta={"approval": "denied"}),
            }
        ),
        db,
        clock=lambda: next(clock),
    )
    ag1 = CallContext(agent="ag1", role="assistant", owner="U0ALICE001", run_id="r1")
    ag2 = CallContext(agent="ag2", role="evaluator", owner="U0BOB00001")

    async def calls() -> None:
        await executor.call(ToolCall.resolve(executor, "lab__list_runs", {"status": "running"}, ag1))
        await executor.call(ToolCall.resolve(executor, "lab__stop_run", {"run_id": "r1"}, ag1))
        await executor.call(ToolCall.resolve(executor, "notion__search", {"query": "loss", "auth": SECRET}, ag2))
        await executor.call(ToolCall.resolve(executor, "lab__launch_run", {"job": "tiny-lm"}, ag2))

    asyncio.run(calls())


def test_the_audit_lists_tool_calls_newest_first_with_filters(lab: Lab) -> None:
    _record_calls(lab.db)
    r = lab.client.get("/api/v1/audit")
    assert r.status_code == 200, r.text
    calls = r.json()["audit"]
    assert calls == audit_rows(lab.db)
    assert [(c["agent"], c["tool"], c["outcome"]) for c in calls] == [
        ("ag2", "lab__launch_run", "not run: denied"),
        ("ag2", "notion__search", "error"),
        ("ag1", "lab__stop_run", "ok"),
        ("ag1", "lab__list_runs", "ok"),
    ]
    assert calls[2]["approver"] == "U0ALICE001" and calls[2]["role"] == "assistant" and calls[2]["run_id"] == "r1"
    assert calls[3]["started_at"] == T0.isoformat() and calls[3]["args"] == '{"status": "running"}'
    assert SECRET not in r.text and "[redacted]" in calls[1]["args"] and "[redacted]" in calls[1]["error"]

    assert [c["tool"] for c in lab.client.get("/api/v1/audit", params={"agent": "ag1"}).json()["audit"]] == [
        "lab__stop_run",
        "lab__list_runs",
    ]
    assert [c["tool"] for c in lab.client.get("/api/v1/audit", params={"limit": 1}).json()["audit"]] == [
        "lab__launch_run"
    ]
    assert lab.client.get("/api/v1/audit", params={"agent": "nobody"}).json() == {"audit": []}
    for bad in ("0", "ten", "10001"):
        assert "limit" in _error(lab.client.get("/api/v1/audit", params={"limit": bad}), 400, "bad_request")


def test_the_audit_table_has_time_agent_role_tool_outcome_approver_duration() -> None:
    calls: list[dict[str, Any]] = [
        {"started_at": "2025-03-01T13:00:05+01:00", "agent": "ag2", "role": "evaluator", "tool": "lab__launch_run",
         "outcome": "not run: timeout", "approver": None, "duration_ms": 125_000.0},
        {"started_at": "2025-03-01T11:59:00+00:00", "agent": "ag1", "role": "assistant", "tool": "lab__stop_run",
         "outcome": "ok", "approver": "U0ALICE001", "duration_ms": 1540.0},
        {"started_at": "2025-03-01T11:58:00+00:00", "agent": "ag1", "role": "assistant", "tool": "lab__list_runs",
         "outcome": "ok", "approver": None, "duration_ms": 12.4},
    ]  # fmt: skip
    lines = audit_table(calls).splitlines()
    assert lines[0].split() == ["TIME", "AGENT", "ROLE", "TOOL", "OUTCOME", "APPROVER", "DURATION"]
    rows = [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines[1:]]
    assert rows == [
        ["2025-03-01 12:00:05Z", "ag2", "evaluator", "lab__launch_run", "not run: timeout", "-", "2m 5s"],  # in UTC
        ["2025-03-01 11:59:00Z", "ag1", "assistant", "lab__stop_run", "ok", "U0ALICE001", "1.5s"],
        ["2025-03-01 11:58:00Z", "ag1", "assistant", "lab__list_runs", "ok", "-", "12ms"],
    ]
    tool_at = lines[0].index("TOOL")
    assert all(line[tool_at - 2 : tool_at] == "  " and line[tool_at] == "l" for line in lines[1:])  # aligned
    assert audit_table([]) == "no tool calls recorded yet"
    assert audit_table([], agent="ag9") == "no tool calls by agent ag9 recorded"


@pytest.fixture
def served(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app on a real port (uvicorn on a thread), and the CLI's environment pointing at it."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(lab.app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=30, what="uvicorn to start")
        home = tmp_path / "home"
        home.mkdir()
        (home / "admin_token").write_text(ADMIN + "\n")
        monkeypatch.setenv("LABBOT_HOME", str(home))
        monkeypatch.setenv("LABBOT_PUBLIC_URL", f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_labbot_audit_prints_json_or_a_table(lab: Lab, served: str, capsys: pytest.CaptureFixture[str]) -> None:
    _record_calls(lab.db)
    assert main(["audit", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == audit_rows(lab.db)  # one document: the list

    assert main(["audit", "--json", "--agent", "ag1", "--limit", "1"]) == 0
    [call] = json.loads(capsys.readouterr().out)
    assert (call["agent"], call["tool"]) == ("ag1", "lab__stop_run")

    assert main(["audit"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TIME", "AGENT", "ROLE", "TOOL", "OUTCOME", "APPROVER", "DURATION"]
    assert len(lines) == 5 and lines[1].startswith("2025-03-01 12:03:00Z  ag2")
    assert "not run: denied" in lines[1] and "U0ALICE001" in lines[3] and SECRET not in "".join(lines)

    assert main(["audit", "--agent", "nobody"]) == 0
    assert capsys.readouterr().out.strip() == "no tool calls by agent nobody recorded"

    assert main(["audit", "--limit", "0"]) == 2
    assert "limit=" in capsys.readouterr().err


# -- the artifact store ----------------------------------------------------------------------------------------------


def test_every_new_route_needs_the_admin_token(lab: Lab) -> None:
    stored = lab.put("researcher", "notes.md", b"# notes\n").json()["artifact"]
    routes = [
        ("GET", "/api/v1/audit"),
        ("GET", "/api/v1/artifacts?agent=researcher"),
        ("POST", "/api/v1/artifacts?agent=researcher&name=x.txt"),
        ("GET", f"/api/v1/artifacts/{stored['id']}?agent=researcher"),
        ("POST", f"/api/v1/artifacts/{stored['id']}/share?agent=researcher&with=mallory"),
        ("DELETE", f"/api/v1/artifacts/{stored['id']}?agent=researcher"),
    ]
    for method, url in routes:
        for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN}):
            r = lab.client.request(method, url, headers=headers, content=b"mallory was here")
            assert "admin token" in _error(r, 401, "unauthorized")
    [still] = lab.store.list("researcher")
    assert still["shared_with"] == [] and lab.store.get("researcher", stored["id"]) == b"# notes\n"
    assert lab.store.list("mallory") == []


def test_without_the_services_the_routes_say_they_are_not_running(lab: Lab) -> None:
    client = TestClient(lab.app(wired=False), headers={"Authorization": f"Bearer {ADMIN}"})
    message = _error(client.get("/api/v1/audit"), 503, "not_running")
    assert message.startswith("the audit trail is not running in this labbot")
    for method, url in (
        ("GET", "/api/v1/artifacts?agent=a"),
        ("POST", "/api/v1/artifacts?agent=a&name=n"),
        ("GET", "/api/v1/artifacts/a2345678?agent=a"),
        ("POST", "/api/v1/artifacts/a2345678/share?agent=a&with=b"),
        ("DELETE", "/api/v1/artifacts/a2345678?agent=a"),
    ):
        message = _error(client.request(method, url, content=b"x"), 503, "not_running")
        assert message.startswith("the artifact store is not running in this labbot")


def test_put_get_and_list_keep_the_bytes_and_the_content_type(lab: Lab) -> None:
    r = lab.put("researcher", "report.md", "# résumé\n".encode(), "text/markdown; charset=utf-8")
    assert r.status_code == 201, r.text
    art = r.json()["artifact"]
    assert art["id"].startswith("a") and art["owner_agent"] == "researcher" and art["name"] == "report.md"
    assert art["content_type"] == "text/markdown; charset=utf-8" and art["size"] == len("# résumé\n".encode())
    assert art["shared_with"] == []

    got = lab.client.get(f"/api/v1/artifacts/{art['id']}", params={"agent": "researcher"})
    assert got.status_code == 200 and got.content == "# résumé\n".encode()
    assert got.headers["content-type"] == "text/markdown; charset=utf-8"
    assert got.headers["content-length"] == str(art["size"]) and got.headers["etag"] == f'"{art["sha256"]}"'
    assert got.headers["content-disposition"] == "inline; filename*=UTF-8''report.md"

    plot = lab.put("researcher", "loss.png", PNG, "image/png").json()["artifact"]
    got = lab.client.get(f"/api/v1/artifacts/{plot['id']}", params={"agent": "researcher"})
    assert got.content == PNG and got.headers["content-type"] == "image/png"  # binary, byte for byte
    guessed = lab.put("researcher", "metrics.json", b'{"loss": 1.5}').json()["artifact"]
    assert guessed["content_type"] == "application/json"  # no Content-Type: the store guesses from the name
    text = lab.put("researcher", "plain.txt", b"latin-1 \xe9", "text/plain").json()["artifact"]
    got = lab.client.get(f"/api/v1/artifacts/{text['id']}", params={"agent": "researcher"})
    assert got.headers["content-type"] == "text/plain"  # kept as stored: no charset added on the way out

    again = lab.put("researcher", "report.md", b"# v2\n", "text/markdown")
    assert again.status_code == 200, again.text  # the same name replaces the artifact: same id, new content
    assert again.json()["artifact"]["id"] == art["id"] and again.json()["artifact"]["sha256"] != art["sha256"]
    assert lab.client.get(f"/api/v1/artifacts/{art['id']}", params={"agent": "researcher"}).content == b"# v2\n"

    listed = lab.client.get("/api/v1/artifacts", params={"agent": "researcher"}).json()
    assert [a["name"] for a in listed["artifacts"]] == ["loss.png", "metrics.json", "plain.txt", "report.md"]
    assert listed["usage"] == {
        "agent": "researcher",
        "artifacts": 4,
        "used_bytes": len(PNG) + len(b'{"loss": 1.5}') + len(b"latin-1 \xe9") + len(b"# v2\n"),
        "quota_bytes": QUOTA,
    }
    assert lab.names("evaluator") == [] and lab.leftovers() == []


def test_sharing_lets_another_agent_read_but_not_share_or_delete(lab: Lab) -> None:
    art = lab.put("researcher", "evals.csv", b"task,score\na,1\n", "text/csv").json()["artifact"]
    url = f"/api/v1/artifacts/{art['id']}"
    unknown = f"agent evaluator has no artifact {art['id']!r}, and none by that id is shared with it"
    assert _error(lab.client.get(url, params={"agent": "evaluator"}), 404, "unknown_artifact").startswith(unknown)

    r = lab.client.post(f"{url}/share", params={"agent": "researcher", "with": "evaluator"})
    assert r.status_code == 200, r.text
    assert r.json()["artifact"]["shared_with"] == ["evaluator"]
    assert lab.names("evaluator") == ["researcher/evals.csv"]
    assert lab.names("evaluator", include_shared="0") == []
    shared = lab.client.get("/api/v1/artifacts", params={"agent": "evaluator"}).json()["artifacts"][0]
    assert "shared_with" not in shared  # who else has it is the owner's business
    got = lab.client.get(url, params={"agent": "evaluator"})
    assert got.content == b"task,score\na,1\n" and got.headers["content-type"] == "text/csv"

    for method, path, params in (
        ("POST", f"{url}/share", {"agent": "evaluator", "with": "mallory"}),
        ("DELETE", url, {"agent": "evaluator"}),
    ):
        message = _error(lab.client.request(method, path, params=params), 403, "not_owner")
        assert message.startswith(f"artifact {art['id']} belongs to agent researcher and is only shared with evaluator")
    assert lab.names("mallory") == [] and lab.store.get("researcher", art["id"]) == b"task,score\na,1\n"


def test_delete_removes_the_artifact_its_shares_and_its_blob(lab: Lab) -> None:
    art = lab.put("researcher", "scratch.txt", b"scratch", "text/plain").json()["artifact"]
    lab.client.post(f"/api/v1/artifacts/{art['id']}/share", params={"agent": "researcher", "with": "evaluator"})
    assert lab.blobs() == [art["sha256"]]
    r = lab.client.delete(f"/api/v1/artifacts/{art['id']}", params={"agent": "researcher"})
    assert r.status_code == 200 and r.json() == {"deleted": art["id"]}
    assert lab.names("researcher") == [] and lab.names("evaluator") == [] and lab.blobs() == []
    _error(lab.client.get(f"/api/v1/artifacts/{art['id']}", params={"agent": "researcher"}), 404, "unknown_artifact")
    _error(lab.client.delete(f"/api/v1/artifacts/{art['id']}", params={"agent": "researcher"}), 404, "unknown_artifact")


def test_bad_requests_say_what_is_missing_and_create_nothing(lab: Lab) -> None:
    cases = [
        (lab.client.get("/api/v1/artifacts"), "query parameter agent is required"),
        (lab.client.post("/api/v1/artifacts", params={"name": "x"}, content=b"x"), "query parameter agent is required"),
        (lab.client.post("/api/v1/artifacts", params={"agent": "a"}, content=b"x"), "query parameter name is required"),
        (lab.client.get("/api/v1/artifacts/a2345678"), "query parameter agent is required"),
        (lab.client.post("/api/v1/artifacts/a2345678/share", params={"agent": "a"}), "parameter with is required"),
        (lab.client.get("/api/v1/artifacts", params={"agent": "a", "include_shared": "maybe"}), "must be 1 or 0"),
        (lab.put("a", "n" * 201, b"x"), "artifact name 'nnnn"),
        (lab.put("a" * 101, "n", b"x"), "agent name 'aaaa"),
        (lab.put("a", "n", b"x", "text/plain; x=" + "y" * 90), "Content-Type header is over 100 characters"),
    ]
    for r, message in cases:
        assert message in _error(r, 400, "bad_request")
    assert lab.store.list("a") == [] and lab.blobs() == [] and lab.leftovers() == []


def test_over_the_agents_quota_is_413_with_the_stores_message(lab: Lab) -> None:
    assert lab.put("researcher", "big.bin", b"x" * (80 * 1024)).status_code == 201
    message = _error(lab.put("researcher", "bigger.bin", b"y" * (40 * 1024)), 413, "quota_exceeded")
    assert message == (
        "agent researcher's store is full: 'bigger.bin' (at least 40 KiB) would bring it to more than 120 KiB of "
        "100 KiB; delete some of its artifacts or raise [artifacts] quota"
    )  # the upload is streamed to the store, which stops reading at the quota
    assert lab.names("researcher") == ["researcher/big.bin"] and len(lab.blobs()) == 1 and lab.leftovers() == []
    assert lab.put("evaluator", "bigger.bin", b"y" * (40 * 1024)).status_code == 201  # the quota is per agent


def test_an_upload_over_the_body_limit_is_413_and_says_the_limit(lab: Lab) -> None:
    small = TestClient(lab.app(max_artifact_bytes=1024), headers={"Authorization": f"Bearer {ADMIN}"})
    params = {"agent": "researcher", "name": "huge.bin"}
    declared = _error(small.post("/api/v1/artifacts", params=params, content=b"z" * 2048), 413, "too_large")
    assert declared == (
        "an artifact upload is limited to 1 KiB per request: store a smaller file, or split it into parts "
        "(this one is 2 KiB)"
    )

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is enforced while the body streams in
        yield from (b"z" * 512 for _ in range(4))

    streamed = _error(small.post("/api/v1/artifacts", params=params, content=chunks()), 413, "too_large")
    assert streamed.startswith("an artifact upload is limited to 1 KiB per request")
    assert small.post("/api/v1/artifacts", params=params, content=b"z" * 1024).status_code == 201  # at the limit

    huge = lab.client.post(
        "/api/v1/artifacts",
        params={"agent": "researcher", "name": "huger.bin"},
        content=b"z",
        headers={"Content-Length": str(100 * 1024 * 1024 + 1)},
    )
    assert "limited to 100 MiB per request" in _error(huge, 413, "too_large")  # the default limit
    assert lab.names("researcher") == ["researcher/huge.bin"] and lab.leftovers() == []


def test_an_artifact_is_posted_into_a_thread_as_a_file_only_for_who_may_read_it(lab: Lab) -> None:
    posted: list[tuple[str, str | None, str, bytes]] = []

    async def post_file(channel: str, thread_ts: str | None, filename: str, data: bytes) -> None:
        posted.append((channel, thread_ts, filename, data))

    client = TestClient(lab.app(post_file=post_file), headers={"Authorization": f"Bearer {ADMIN}"})
    artifact = lab.put("U0ALICE001/assistant", "loss.csv", b"step,loss\n1,4.2\n", "text/csv").json()["artifact"]
    where = {"channel": "C0LAB00001", "thread_ts": "1700000000.000100"}
    r = client.post(f"/api/v1/artifacts/{artifact['id']}/post", params={"agent": "U0ALICE001/assistant", **where})
    assert r.status_code == 200, r.text
    assert posted == [("C0LAB00001", "1700000000.000100", "loss.csv", b"step,loss\n1,4.2\n")]
    stranger = client.post(
        f"/api/v1/artifacts/{artifact['id']}/post", params={"agent": "U0BOB00001/assistant", **where}
    )
    assert stranger.status_code == 404 and len(posted) == 1, "another agent cannot post what it cannot read"
    missing = client.post(f"/api/v1/artifacts/{artifact['id']}/post", params={"agent": "U0ALICE001/assistant"})
    assert "channel" in _error(missing, 400, "bad_request") and len(posted) == 1
    no_slack = lab.client.post(f"/api/v1/artifacts/{artifact['id']}/post", params={"agent": "x", **where})
    assert "Slack" in _error(no_slack, 503, "not_running")
