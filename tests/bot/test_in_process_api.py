"""labbot's own agents reach its API in process (``labbot.bot.api.in_process``): an agent's ``lab`` tool call works
with ``LABBOT_PUBLIC_URL`` pointing where nothing listens, through the real wiring (``ControlPlane.build`` →
``build_agents`` → ``builtin_servers`` → the MCP pool → the ``lab`` server → the door → the app), and carries no
admin token of its own. Ray is unreachable and the model is a fake: no Ray head, no network but 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import httpx
import pytest
from fakes.anthropic import FakeAnthropic, text, tool_use
from mcp.server.mcpserver.exceptions import ToolError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support import free_port

from labbot.bot.api.in_process import InProcessApi
from labbot.bot.config import Settings
from labbot.bot.serve import ControlPlane
from labbot.storage.models import Run, utcnow
from labbot.training.telemetry_store import token_hash

OWNER = "U0ALICE001"


def nothing_listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_an_agents_lab_call_works_with_the_public_url_pointing_nowhere(tmp_path: Path) -> None:
    port = free_port()
    assert nothing_listens(port)
    with FakeAnthropic() as fake:
        env = {
            "LABBOT_HOME": str(tmp_path / "home"),
            "LABBOT_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "LABBOT_CODEBASE_ROOT": str(tmp_path),
            "RAY_ADDRESS": "http://127.0.0.1:9",
            "SLACK_BOT_TOKEN": "xoxb-not-used",
            "SLACK_SIGNING_SECRET": "not-used",
            "SLACK_API_URL": "http://127.0.0.1:9/api/",
            "ANTHROPIC_API_KEY": fake.api_key,
            "ANTHROPIC_BASE_URL": fake.base_url,
        }
        plane = ControlPlane.build(Settings.from_env(env))
        try:
            assert plane.agents is not None and plane.agents.fleet is not None
            with plane.db.session() as s:
                s.add(
                    Run(
                        id="r0inproc01", job="tiny-lm", name="in process", owner=OWNER, config={"params": {}},
                        status="running", telemetry_token_hash=token_hash("t"), created_at=utcnow(),
                    )
                )  # fmt: skip
            plane.app()  # what `serve` does before it serves: the agents' door leads to this app
            fake.script(tool_use("lab__list_runs", {}), text("one run is going"))

            async def ask() -> str:
                try:
                    answer = await plane.agents.fleet.ask(  # type: ignore[union-attr]
                        owner=OWNER, text="what is running?", channel="C0LAB00001", thread_ts="1700000000.000100"
                    )
                    return answer.text
                finally:
                    await plane.agents.close()  # type: ignore[union-attr]

            assert asyncio.run(ask()) == "one run is going"
        finally:
            plane.close()
        results = fake.requests[1].tool_results()
        assert len(results) == 1 and not results[0].get("is_error"), results
        assert "r0inproc01" in json.dumps(results[0]["content"]), "the run came from the app, in process"
    assert nothing_listens(port)  # and nothing was ever there to answer


def test_the_door_sets_the_admin_token_itself_and_answers_503_until_the_app_is_in() -> None:
    seen: list[str | None] = []

    async def who(request: Request) -> JSONResponse:
        seen.append(request.headers.get("authorization"))
        return JSONResponse({"client": list(request.client or ())})

    door = InProcessApi("the-admin-token-" + "x" * 20)
    lab = door.lab_api()
    assert lab.headers() == {}  # the MCP server is handed no token

    async def go() -> None:
        async with httpx.AsyncClient(transport=door.transport(), base_url="http://labbot.in-process") as http:
            r = await http.get("/who")
            assert r.status_code == 503 and "not up yet" in r.json()["error"]["message"]
            door.attach(Starlette(routes=[Route("/who", who)]))
            assert (await http.get("/who")).status_code == 200
            assert (await http.get("/who", headers={"Authorization": "Bearer forged"})).status_code == 200

    asyncio.run(go())
    assert seen == ["Bearer the-admin-token-" + "x" * 20] * 2  # whatever the request said


def test_an_error_the_app_raises_is_its_500_not_the_callers_exception() -> None:
    async def boom(request: Request) -> JSONResponse:
        raise RuntimeError("a bug")

    door = InProcessApi("t" * 32)
    door.attach(Starlette(routes=[Route("/api/v1/runs", boom)]))

    async def go() -> None:
        with pytest.raises(ToolError, match="Internal Server Error"):  # the 500's body, as a tool error
            await door.lab_api().json("GET", "/runs")

    asyncio.run(go())
