"""mcp_servers.lab against a real `labbot serve` (and the session's Ray head), through `mcp.Client` in memory:
reads are readOnlyHint, actions destructiveHint; answers are compact text; errors are tool errors that say why."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import Client
from support import Serve, wait_for

from mcp_servers.lab import LabApi, build_server, summarise_series
from training.ray_cluster import RayConnection


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
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert {"list_runs", "get_run", "run_metrics", "run_logs", "list_pages"} <= set(tools)
                for name in ("list_runs", "get_run", "run_metrics", "run_logs", "list_pages"):
                    assert tools[name].annotations.read_only_hint and not tools[name].annotations.destructive_hint
                for name in ("launch_run", "stop_run", "restart_run", "ack_page"):
                    assert tools[name].annotations.destructive_hint, name
                listed = _text(await client.call_tool("list_runs", {}))
                assert run["id"] in listed and "running" in listed and "sleeper" in listed
                assert '"status": "running"' in _text(await client.call_tool("get_run", {"run_id": run["id"]}))
                assert "no points yet" in _text(await client.call_tool("run_metrics", {"run_id": run["id"]}))
                assert _text(await client.call_tool("list_pages", {})) == "no pages"
                missing = await client.call_tool("get_run", {"run_id": "nope42"})
                assert missing.is_error and "unknown run" in _text(missing)
                stopped = await client.call_tool("stop_run", {"run_id": run["id"]})
                assert not stopped.is_error and "stopped" in _text(stopped)

        asyncio.run(scenario())
        down = build_server(LabApi("http://127.0.0.1:9", "x"))

        async def refused() -> None:
            async with Client(down) as client:
                result = await client.call_tool("list_runs", {})
                assert result.is_error and "not answering" in _text(result)

        asyncio.run(refused())
    finally:
        serve.stop()
