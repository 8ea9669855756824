"""labbot.mcp_servers.lab against a real `labbot serve` (and the session's Ray head), through `mcp.Client` in memory:
reads are readOnlyHint, actions destructiveHint; answers are compact text; errors are tool errors that say why.

The artifact tools run against the real ``/api/v1/artifacts`` routes of ``create_app`` with a real ArtifactStore,
reached through LabApi's transport seam (``httpx.ASGITransport``), one server per agent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from support import Serve, make_service, wait_for

from labbot.bot.api import create_app
from labbot.mcp_servers.lab import (
    AGENT_ENV,
    MAX_ARTIFACT_TEXT,
    LabApi,
    build_server,
    launcher_of,
    run_line,
    summarise_series,
)
from labbot.storage.artifacts import ArtifactStore
from labbot.training.ray_cluster import RayConnection
from labbot.training.telemetry_store import TelemetryStore

ARTIFACT_TOOLS = {"list_artifacts", "put_artifact", "get_artifact", "share_artifact"}


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_series_are_summarised_to_fit_a_models_context() -> None:
    points = [[s, 10.0 / s] for s in range(1, 1001)] + [[1001, "NaN"]]
    text = summarise_series(points)
    lines = text.splitlines()
    assert lines[0].startswith("1001 points, steps 1..1001") and "non-finite at steps 1001" in lines[0]
    assert "min 0.01," in lines[0] and "max 10" in lines[0]
    assert len(lines) <= 62 and lines[-1] == "1001\tNaN"
    assert summarise_series([]) == "no points yet"


def test_a_run_an_agent_launches_is_its_researchers() -> None:
    """labbot's own agents launch as RESEARCHER/ROLE (filled in by labbot, never by the model): the run is the
    researcher's, so its later approvals and its thread follow them; an outside client's runs are ``agent``'s."""
    assert launcher_of("U0ALICE001/eval-writer") == "U0ALICE001"
    assert [launcher_of(a) for a in ("agent", "cursor", "/assistant", "")] == ["agent"] * 4


def test_a_run_is_listed_with_its_headline_metric() -> None:
    run = {"id": "r1", "job": "rl-demo", "status": "running", "attempt": 1, "step": 40, "owner": "U1"}
    rl = run | {"metrics": {"reward": 1.5, "pass_rate": 0.5, "loss": 9.0}, "headline": "pass_rate"}
    assert run_line(rl) == "r1 · rl-demo · running · attempt 1 · step 40 · pass_rate 0.5 · owner U1"
    assert "loss 2.5" in run_line(run | {"metrics": {"loss": 2.5}})  # a run JSON from before headlines
    assert "pass_rate" not in run_line(rl | {"metrics": {"reward": 1.5}})  # not reported yet


def test_lab_tools_over_a_running_labbot(tmp_path: Any, ray_head: RayConnection) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "labbot.toml").write_text('[jobs.sleeper]\nentrypoint = "sleep 120"\n')
    serve = Serve(
        home,
        ray_address=ray_head.address,
        ray_token=ray_head.token,
        extra_env={"LABBOT_CONFIG": str(home / "labbot.toml")},
    ).start()
    try:
        with serve.client() as api:
            run = api.post("/runs", json={"job": "sleeper", "owner": "U0ALICE001"}).json()["run"]
        wait_for(lambda: serve.client().get(f"/runs/{run['id']}").json()["run"]["status"] == "running", timeout=60)
        server = build_server(LabApi(serve.url, serve.admin_token))

        async def scenario() -> None:
            async with Client(server) as client:
                tools = {t.name: t.annotations for t in (await client.list_tools()).tools if t.annotations}
                assert {"list_runs", "get_run", "run_metrics", "run_logs", "list_pages"} <= set(tools)
                for name in ("list_runs", "get_run", "run_metrics", "run_logs", "list_pages"):
                    assert tools[name].read_only_hint and not tools[name].destructive_hint
                for name in ("launch_run", "stop_run", "restart_run", "ack_page"):
                    assert tools[name].destructive_hint, name
                listed = _text(await client.call_tool("list_runs", {}))
                assert run["id"] in listed and "running" in listed and "sleeper" in listed
                assert '"status": "running"' in _text(await client.call_tool("get_run", {"run_id": run["id"]}))
                assert "no points yet" in _text(await client.call_tool("run_metrics", {"run_id": run["id"]}))
                assert _text(await client.call_tool("list_pages", {})) == "no pages"
                missing = await client.call_tool("get_run", {"run_id": "nope42"})
                assert missing.is_error and "unknown run" in _text(missing)
                waiter = next(t for t in (await client.list_tools()).tools if t.name == "wait_for_run")
                assert waiter.annotations and waiter.annotations.read_only_hint
                # the fleet charges its wait to nobody, and lets it run its timeout_s past the server's answer timeout
                assert (waiter.meta or {}).get("labbot/waits") == "timeout_s"
                assert waiter.input_schema["properties"]["timeout_s"]["maximum"] == 3600
                still = await client.call_tool("wait_for_run", {"run_id": run["id"], "timeout_s": 1})
                assert _text(still).startswith("still running after 1s: ") and "wait_for_run again" in _text(still)

                async def stop_soon() -> None:
                    await asyncio.sleep(1.0)
                    await client.call_tool("stop_run", {"run_id": run["id"]})

                stopping = asyncio.create_task(stop_soon())
                ended = await client.call_tool("wait_for_run", {"run_id": run["id"], "timeout_s": 60})
                await stopping
                assert not ended.is_error and _text(ended).startswith(f"ended: {run['id']} · sleeper · stopped")

        asyncio.run(scenario())
        down = build_server(LabApi("http://127.0.0.1:9", "x"))

        async def refused() -> None:
            async with Client(down) as client:
                result = await client.call_tool("list_runs", {})
                assert result.is_error and "not answering" in _text(result)

        asyncio.run(refused())
    finally:
        serve.stop()


class Artifacts:
    """The control plane's API with an artifact store (SQLite and a folder in tmp_path), and a ``lab`` server per
    agent that reaches it in process."""

    def __init__(self, tmp_path: Path) -> None:
        service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", None))
        self.store = ArtifactStore(service.db, str(tmp_path / "artifacts"), quota_bytes=1 << 20)
        self.app = create_app(service, TelemetryStore(service.db), admin_token="t0ken", artifacts=self.store)

    def server(self, agent: str) -> Any:
        transport = httpx.ASGITransport(app=self.app)
        return build_server(LabApi("http://labbot.test", "t0ken", agent=agent, transport=transport))


def calls(server: Any, *steps: tuple[str, dict[str, Any]]) -> list[tuple[bool, str]]:
    """Call the tools in order through one ``mcp.Client`` session: (is_error, text) of each."""

    async def go() -> list[tuple[bool, str]]:
        async with Client(server) as client:
            return [(r.is_error, _text(r)) for r in [await client.call_tool(name, args) for name, args in steps]]

    return asyncio.run(go())


def test_artifact_tools_are_annotated_for_an_agents_own_store(tmp_path: Path) -> None:
    async def go() -> Any:
        async with Client(Artifacts(tmp_path).server("researcher")) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    tools = asyncio.run(go())
    assert set(tools) >= ARTIFACT_TOOLS
    for name in ("list_artifacts", "get_artifact"):
        assert tools[name].annotations.read_only_hint is True and tools[name].annotations.destructive_hint is False
    for name in ("put_artifact", "share_artifact"):  # they only add to the agent's own store: no approval needed
        assert tools[name].annotations.read_only_hint is False and tools[name].annotations.destructive_hint is False
    assert set(tools["put_artifact"].input_schema["required"]) == {"name", "text"}
    assert set(tools["share_artifact"].input_schema["required"]) == {"artifact_id", "with_agent"}


def test_an_agent_puts_lists_gets_and_shares_its_artifacts(tmp_path: Path) -> None:
    lab = Artifacts(tmp_path)
    researcher, evaluator = lab.server("researcher"), lab.server("evaluator")
    [(err1, stored), (err2, replaced), (err3, listed)] = calls(
        researcher,
        ("put_artifact", {"name": "report.md", "text": "# Findings\nloss fell to 1.2 ✓\n"}),
        ("put_artifact", {"name": "report.md", "text": "# Findings v2\n"}),
        ("list_artifacts", {}),
    )
    assert not (err1 or err2 or err3), (stored, replaced, listed)
    [own] = lab.store.list("researcher")
    assert stored == f"stored report.md as {own['id']} (32 B, text/markdown; charset=utf-8)"
    assert replaced == f"replaced report.md as {own['id']} (14 B, text/markdown; charset=utf-8)"
    assert listed.splitlines() == [
        "agent researcher: 1 artifact(s), 14 B of 1 MiB used",
        f"{own['id']} · report.md · 14 B · text/markdown; charset=utf-8",
    ]
    assert lab.store.get("researcher", own["id"]) == b"# Findings v2\n"

    [(_, got), (_, refused), (shared_err, shared), (_, notes)] = calls(
        researcher,
        ("get_artifact", {"artifact_id": own["id"]}),
        ("get_artifact", {"artifact_id": "anope234"}),
        ("share_artifact", {"artifact_id": own["id"], "with_agent": "evaluator"}),
        ("put_artifact", {"name": "notes", "text": "no extension"}),
    )
    assert got == "# Findings v2\n"
    assert "agent researcher has no artifact 'anope234'" in refused
    assert not shared_err and shared == f"{own['id']} (report.md) is shared with evaluator"
    assert notes.endswith("(12 B, text/plain; charset=utf-8)")  # text whatever the name says

    [(_, seen), (_, read), (denied, why), (mine_err, _)] = calls(
        evaluator,
        ("list_artifacts", {}),
        ("get_artifact", {"artifact_id": own["id"]}),
        ("share_artifact", {"artifact_id": own["id"], "with_agent": "mallory"}),
        ("put_artifact", {"name": "mine.txt", "text": "evaluator's own"}),
    )
    assert seen.splitlines()[1:] == [
        f"{own['id']} · report.md · 14 B · text/markdown; charset=utf-8 · shared by researcher"
    ]
    assert read == "# Findings v2\n"
    assert denied and f"artifact {own['id']} belongs to agent researcher and is only shared with evaluator" in why
    assert not mine_err and [a["name"] for a in lab.store.list("evaluator", include_shared=False)] == ["mine.txt"]
    assert "shared with evaluator" in calls(researcher, ("list_artifacts", {}))[0][1]


def test_a_long_artifact_is_cut_at_64_kb_and_a_binary_one_is_not_shown(tmp_path: Path) -> None:
    lab = Artifacts(tmp_path)
    # 15 bytes a line ("line 000000 é\n", é is two), after a 3-byte header: 64 KB ends between the two bytes of an é
    long_text = "#!\n" + "".join(f"line {i:06d} é\n" for i in range(10_000))
    assert len(long_text.encode()) == 150_003 and (MAX_ARTIFACT_TEXT - 3) % 15 == 13
    big = lab.store.put("researcher", "long.log", long_text.encode(), "text/plain; charset=utf-8")
    plot = lab.store.put("researcher", "loss.png", bytes(range(256)) * 8, "image/png")
    latin = lab.store.put("researcher", "old.txt", "café".encode("latin-1"), "text/plain; charset=latin-1")
    [(_, cut), (_, binary), (_, decoded)] = calls(
        lab.server("researcher"),
        ("get_artifact", {"artifact_id": big["id"]}),
        ("get_artifact", {"artifact_id": plot["id"]}),
        ("get_artifact", {"artifact_id": latin["id"]}),
    )
    body, note = cut.rsplit("\n", 1)
    assert note == f"[cut: artifact {big['id']} has 146.5 KiB; only its first 64 KiB are shown]"
    assert long_text.startswith(body) and body.endswith("line 004368 ")  # the half é is dropped, not garbled
    assert len(body.encode()) == MAX_ARTIFACT_TEXT - 1
    assert binary == f"artifact {plot['id']} is binary (image/png, 2 KiB): not shown as text"
    assert decoded == "café"  # the stored charset is honoured


CRAFTED = ["../audit#", "../artifacts/a2b3c4d5?agent=U0BOB00001/assistant#", "r1/stop?", "..", "k3xq7p#", "K3X Q7P"]
# every lab tool that puts an argument in a path, and the arguments besides the id it needs
ID_TOOLS = [
    ("get_run", "run_id", {}),
    ("wait_for_run", "run_id", {"timeout_s": 1}),
    ("run_metrics", "run_id", {}),
    ("run_logs", "run_id", {}),
    ("list_pages", "run_id", {}),
    ("stop_run", "run_id", {}),
    ("restart_run", "run_id", {}),
    ("ack_page", "page_id", {}),
    ("get_artifact", "artifact_id", {}),
    ("share_artifact", "artifact_id", {"with_agent": "mallory"}),
    ("post_artifact", "artifact_id", {"in_channel": "C0LAB00001", "in_thread": "1.2"}),
    ("get_eval_suite", "suite_id", {}),
    ("run_eval", "suite_id", {}),
    ("get_eval_results", "run_id", {}),
]


def _recording_server() -> tuple[Any, list[httpx.Request]]:
    """A lab server whose requests are recorded (and answered 404), none sent anywhere."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no such thing"}})

    lab = LabApi("http://labbot.test", "t0ken", agent="researcher", transport=httpx.MockTransport(answer))
    return build_server(lab), seen


@pytest.mark.parametrize(("tool", "arg", "extra"), ID_TOOLS)
def test_a_crafted_id_is_refused_by_every_lab_tool_before_any_request(
    tool: str, arg: str, extra: dict[str, Any]
) -> None:
    server, seen = _recording_server()
    results = calls(server, *((tool, {arg: crafted, **extra}) for crafted in CRAFTED))
    for crafted, (is_error, text) in zip(CRAFTED, results, strict=True):
        assert is_error and f"{crafted!r} is not a " in text and " id " in text, (crafted, text)
    assert seen == [], [str(r.url) for r in seen]  # not another route, nor even its own


def test_every_path_segment_is_escaped() -> None:
    server, seen = _recording_server()
    results = calls(
        server,
        ("run_metrics", {"run_id": "k3xq7p", "name": "loss?agent=U0BOB00001#"}),
        ("run_metrics", {"run_id": "k3xq7p", "name": "../../audit"}),
        ("ack_page", {"page_id": "p2b3c4"}),
        ("share_artifact", {"artifact_id": "a2b3c4d5", "with_agent": "mallory"}),
    )
    assert all(is_error for is_error, _ in results)  # 404s, and the name with a '/' asked nothing
    assert "cannot be part of a path" in results[1][1]
    assert [(r.method, r.url.raw_path.decode()) for r in seen] == [
        ("GET", "/api/v1/runs/k3xq7p/metrics/loss%3Fagent%3DU0BOB00001%23"),
        ("POST", "/api/v1/pages/p2b3c4/ack?by=agent"),
        ("POST", "/api/v1/artifacts/a2b3c4d5/share?agent=researcher&with=mallory"),
    ]


def test_the_tools_say_when_labbot_is_not_running_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBOT_HOME", str(tmp_path))
    [(is_error, text)] = calls(build_server(LabApi("http://127.0.0.1:9")), ("list_runs", {}))
    missing = tmp_path / "admin_token"
    assert is_error and text == (
        f"Error executing tool list_runs: labbot is not running here (no admin token at {missing}): start `labbot "
        "serve` first"
    )


def test_the_agent_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AGENT_ENV, raising=False)
    assert LabApi("http://127.0.0.1:9", "x").agent == "agent"
    monkeypatch.setenv(AGENT_ENV, "researcher")
    assert LabApi("http://127.0.0.1:9", "x").agent == "researcher"
    assert LabApi("http://127.0.0.1:9", "x", agent="evaluator").agent == "evaluator"


def test_artifact_tools_say_when_the_store_is_not_running(tmp_path: Path) -> None:
    service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", None))
    app = create_app(service, TelemetryStore(service.db), admin_token="t0ken")
    server = build_server(LabApi("http://labbot.test", "t0ken", transport=httpx.ASGITransport(app=app)))
    [(is_error, text)] = calls(server, ("list_artifacts", {}))
    assert is_error and "the artifact store is not running in this labbot" in text


def test_one_lab_server_keeps_each_agents_store_apart_by_as_agent(tmp_path: Path) -> None:
    """labbot serves all its agents from one in-process lab server: ``as_agent`` (filled in by labbot) picks the
    store, so one agent's file is not another's."""
    lab = Artifacts(tmp_path)
    server = lab.server("agent")
    alice, bob = {"as_agent": "U0ALICE001/assistant"}, {"as_agent": "U0BOB00001/assistant"}
    (put_ok, put_text), (_, alice_list), (_, bob_list) = calls(
        server,
        ("put_artifact", {"name": "notes.md", "text": "# alice", **alice}),
        ("list_artifacts", alice),
        ("list_artifacts", bob),
    )
    assert not put_ok and "stored notes.md" in put_text
    assert "notes.md" in alice_list and "notes.md" not in bob_list
    artifact_id = put_text.split(" as ")[1].split(" ")[0]
    [(refused, _)] = calls(server, ("get_artifact", {"artifact_id": artifact_id, **bob}))
    assert refused, "another researcher's agent cannot read it unless it is shared"
