"""``/metrics``, ``/readyz`` and JSON logs, from a real control plane (``ControlPlane.build`` and its app, Ray
unreachable at 127.0.0.1:9, so no Ray head is needed): samples read back with Prometheus' own parser."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.anthropic import FakeAnthropic, text, tool_use
from fakes.slack import started
from mcp.server.mcpserver.exceptions import ToolError
from prometheus_client.parser import text_string_to_metric_families
from slack_sdk.errors import SlackApiError
from starlette.testclient import TestClient
from support import NoJitter

from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.runtime import AgentRuntime
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolResult, ToolSpec
from labbot.bot.api import create_app
from labbot.bot.api.probes import ProbeAccess, is_loopback
from labbot.bot.config import Settings
from labbot.bot.health import readiness
from labbot.bot.logs import JsonFormatter, RedactingFilter
from labbot.bot.metrics import Metrics
from labbot.bot.serve import ControlPlane
from labbot.bot.slack.runtime import web_client
from labbot.common.errors import BadRequest
from labbot.mcp_servers.vendor_http import VendorApi
from labbot.storage.db import Database
from labbot.storage.models import Delivery, Run, utcnow
from labbot.training.monitoring import Finding
from labbot.training.telemetry_store import token_hash

UNREACHABLE_RAY = "http://127.0.0.1:9"
RAY_SECRET = "ray-secret-token-4242424242"
SLACK_SHAPED = "xoxb-" + "1234567890-abcdefghij"  # fake, split: no scanner flags it
RUN_TOKEN = "run-telemetry-token-0001"


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    env = {"LABBOT_HOME": str(tmp_path / "home"), "RAY_ADDRESS": UNREACHABLE_RAY, "RAY_AUTH_TOKEN": RAY_SECRET}
    built = ControlPlane.build(Settings.from_env(env))
    try:
        yield built
    finally:
        built.close()


def samples(body: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def scrape(client: TestClient, **headers: str) -> tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    r = client.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return r.text, samples(r.text)


def add_running_run(plane: ControlPlane, run_id: str = "r0metrics1", purpose: str = "default") -> Run:
    with plane.db.session() as s:
        run = Run(
            id=run_id, job="tiny-lm", name="a secret project name", owner="U0ALICE001", config={"params": {}},
            status="running", purpose=purpose, telemetry_token_hash=token_hash(RUN_TOKEN), created_at=utcnow(),
        )  # fmt: skip
        s.add(run)
    return run


def test_metrics_count_runs_pages_the_outbox_telemetry_and_ticks(plane: ControlPlane) -> None:
    client = TestClient(plane.app())
    admin = {"Authorization": f"Bearer {plane.admin_token}"}
    launched = client.post("/api/v1/runs", json={"job": "tiny-lm"}, headers=admin)  # Ray is unreachable
    assert launched.status_code == 503, launched.text  # the run is written, then failed: Ray is away
    add_running_run(plane)
    add_running_run(plane, "r0metrics2", purpose="eval")
    points = [{"step": i, "ts": 1.0 + i, "metrics": {"loss": 1.0}} for i in range(3)]
    batch = {"attempt": 1, "sent_at": 1.0, "points": points}
    r = client.post("/api/v1/runs/r0metrics1/telemetry", json=batch, headers={"Authorization": f"Bearer {RUN_TOKEN}"})
    assert r.json() == {"accepted": 3}
    with plane.db.session() as s:
        run = s.get_one(Run, "r0metrics1")
        plane.pager.judge(s, run, {}, [Finding("hung", "page", "step stuck at 2", {})], utcnow())
        s.add(
            Delivery(
                key="test-delivery", run_id="r0metrics1", channel="slack", action="post", target="thread",
                payload={}, state="pending", next_attempt_at=utcnow(), created_at=utcnow() - timedelta(seconds=90),
            )
        )  # fmt: skip
    asyncio.run(plane.watch())  # one tick (Ray down: quick) and a drain (Slack is not configured: it waits)
    assert plane.lease is not None and plane.lease.step()  # still this (sole) replica's: renewed, it leads

    body, found = scrape(client)
    assert value(found, "labbot_database_up") == 1
    assert value(found, "labbot_runs", status="running", purpose="default") == 1
    assert value(found, "labbot_runs", status="running", purpose="eval") == 1
    assert value(found, "labbot_runs", status="stopped", purpose="default") == 0  # every status is there
    assert value(found, "labbot_runs", status="failed", purpose="training") == 1  # the launch: Ray is away
    assert value(found, "labbot_pages_open", kind="hung", level="0", state="triggered") == 1
    assert (value(found, "labbot_outbox_backlog", channel="slack") or 0) >= 1
    assert (value(found, "labbot_outbox_oldest_undelivered_age_seconds", channel="slack") or 0) >= 89
    assert value(found, "labbot_outbox_backlog", channel="pagerduty") == 0
    assert value(found, "labbot_telemetry_points_total") == 3
    assert value(found, "labbot_watchdog_tick_seconds_count") == 1
    assert value(found, "labbot_leader") == 1
    # no ids, names or secrets: the labels are bounded and nothing of a run but its status and purpose is shown
    for leaked in ("r0metrics1", "a secret project name", "U0ALICE001", plane.admin_token, RAY_SECRET, RUN_TOKEN):
        assert leaked not in body


def test_the_leader_gauge_follows_the_lease_and_metrics_of_two_planes_are_their_own(
    plane: ControlPlane, tmp_path: Path
) -> None:
    other = Metrics(None)
    other.telemetry_points(5)
    assert plane.lease is not None
    plane.lease.release()  # as a replica that has stopped leading
    _, found = scrape(TestClient(plane.app()))
    assert value(found, "labbot_leader") == 0
    assert value(found, "labbot_telemetry_points_total") == 0  # the other registry's 5 are not this plane's


class OneTool:
    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("lab__runs", "the runs", {"type": "object", "properties": {}})]

    async def call(self, call: ToolCall) -> ToolResult:
        return ToolResult("3 runs")


def test_agent_runs_tokens_and_tool_calls_are_counted_by_role(plane: ControlPlane) -> None:
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 30, "cache_creation_input_tokens": 7}
    with FakeAnthropic() as fake:
        fake.script(tool_use("lab__runs", usage=usage), text("done", usage=usage))
        env = {"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.base_url}

        async def go() -> None:
            runtime = AgentRuntime.from_settings(ModelSettings.from_env(env), observer=plane.metrics)
            ctx = CallContext(agent="s1", role="investigator", owner="U0ALICE001")
            try:
                await runtime.run("system", [{"role": "user", "content": "why?"}], OneTool(), ctx)
            finally:
                await runtime.aclose()

        asyncio.run(go())
    body, found = scrape(TestClient(plane.app()))
    assert value(found, "labbot_agent_runs_total", role="investigator", stop="end_turn") == 1
    assert value(found, "labbot_agent_model_calls_total", role="investigator") == 2
    assert value(found, "labbot_agent_tokens_total", role="investigator", kind="input") == 200
    assert value(found, "labbot_agent_tokens_total", role="investigator", kind="output") == 40
    assert value(found, "labbot_agent_tokens_total", role="investigator", kind="cache_read") == 60
    assert value(found, "labbot_agent_tool_calls_total", role="investigator", outcome="ok") == 1
    assert "U0ALICE001" not in body and fake.api_key not in body


def test_slack_web_api_errors_are_counted_by_method_and_error(plane: ControlPlane) -> None:
    assert plane.metrics is not None
    with started() as slack:
        client = web_client(slack.bot_token, slack.start(), observer=plane.metrics)

        async def go() -> None:
            with pytest.raises(SlackApiError):
                await client.chat_postMessage(channel="C0NOSUCH00", text="hello")
            slack.fail_next(400, on="chat.postMessage")
            with pytest.raises(SlackApiError):
                await client.chat_postMessage(channel=slack.default_channel, text="hello")
            await client.chat_postMessage(channel=slack.default_channel, text="fine")

        asyncio.run(go())
    body, found = scrape(TestClient(plane.app()))
    assert value(found, "labbot_slack_api_errors_total", method="chat.postMessage", error="channel_not_found") == 1
    assert value(found, "labbot_slack_api_errors_total", method="chat.postMessage", error="fatal_error") == 1
    assert slack.bot_token not in body


def test_vendor_api_errors_are_counted_by_vendor_method_and_status(plane: ControlPlane) -> None:
    assert plane.metrics is not None
    answers = iter([httpx.Response(503), httpx.Response(503), httpx.Response(404, json={"message": "no page"})])

    def handler(request: httpx.Request) -> httpx.Response:
        return next(answers)

    api = VendorApi(
        "Notion", "https://api.notion.test", lambda: {"Authorization": "Bearer ntn_secret"},
        transport=httpx.MockTransport(handler), max_retries=1, sleep=lambda s: asyncio.sleep(0), rng=NoJitter(),
        observer=plane.metrics,
    )  # fmt: skip

    async def go() -> None:
        with pytest.raises(ToolError):
            await api.request("GET", "/v1/pages/0123456789abcdef")  # 503, then 503 again: given up
        with pytest.raises(ToolError):
            await api.request("GET", "/v1/pages/0123456789abcdef")  # 404

    asyncio.run(go())
    body, found = scrape(TestClient(plane.app()))
    assert value(found, "labbot_vendor_api_errors_total", vendor="notion", method="GET", status="503") == 2
    assert value(found, "labbot_vendor_api_errors_total", vendor="notion", method="GET", status="404") == 1
    assert "0123456789abcdef" not in body  # no path, so no ids, as a label


def test_metrics_token_when_set_is_required(tmp_path: Path) -> None:
    env = {"LABBOT_HOME": str(tmp_path / "home"), "RAY_ADDRESS": UNREACHABLE_RAY, "LABBOT_METRICS_TOKEN": "m-token-1"}
    built = ControlPlane.build(Settings.from_env(env))
    try:
        client = TestClient(built.app())
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        scrape(client, Authorization="Bearer m-token-1")
    finally:
        built.close()


# ----------------------------------------------------------------- who may read /healthz, /readyz and /metrics


def built(tmp_path: Path, **env: str) -> ControlPlane:
    """A control plane (Ray unreachable) with ``env`` on top of its LABBOT_HOME."""
    base = {"LABBOT_HOME": str(tmp_path / "home"), "RAY_ADDRESS": UNREACHABLE_RAY, "RAY_AUTH_TOKEN": RAY_SECRET}
    return ControlPlane.build(Settings.from_env(base | env))


def test_healthz_says_alive_and_nothing_else(plane: ControlPlane) -> None:
    r = TestClient(plane.app()).get("/healthz")
    assert (r.status_code, r.json()) == (200, {"ok": True})
    detail = TestClient(plane.app()).get("/readyz").json()  # on loopback: what /healthz used to say, less Ray's URL
    assert detail["embedded_ray"] is False and detail["slack"] == "off"
    assert UNREACHABLE_RAY not in str(detail)


def test_beyond_loopback_without_a_token_or_the_allow_readyz_and_metrics_are_401_naming_the_fix(
    tmp_path: Path,
) -> None:
    plane = built(tmp_path, LABBOT_HOST="0.0.0.0")
    try:
        client = TestClient(plane.app())
        for route in ("/readyz", "/metrics"):
            r = client.get(route)
            assert r.status_code == 401, (route, r.text)
            message = r.json()["error"]["message"]
            assert "LABBOT_METRICS_TOKEN" in message and "LABBOT_OPEN_PROBES=1" in message and route in message
            assert "database" not in r.text and "labbot_" not in r.text
        assert (client.get("/healthz").status_code, client.get("/healthz").json()) == (200, {"ok": True})
    finally:
        plane.close()


def test_beyond_loopback_the_metrics_token_opens_both_and_a_probe_without_it_gets_the_verdict_only(
    tmp_path: Path,
) -> None:
    plane = built(tmp_path, LABBOT_HOST="0.0.0.0", LABBOT_METRICS_TOKEN="m-token-2")
    try:
        client = TestClient(plane.app())
        token = {"Authorization": "Bearer m-token-2"}
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        scrape(client, **token)
        # a kubelet's probe sends no token: the status code and the verdict, nothing of the replica or its checks
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = client.get("/readyz", headers=headers)
            assert (r.status_code, r.json()) == (503, {"ok": False})  # Ray is unreachable: not ready
        r = client.get("/readyz", headers=token)
        assert r.status_code == 503 and r.json()["database"] == "ok" and r.json()["role"] == "leader"
    finally:
        plane.close()


@pytest.mark.parametrize(
    "env",
    [
        {"LABBOT_HOST": "127.0.0.1"},
        {"LABBOT_HOST": "localhost"},
        {"LABBOT_HOST": "::1"},
        {"LABBOT_HOST": "0.0.0.0", "LABBOT_OPEN_PROBES": "1"},
        {"LABBOT_HOST": "10.0.0.7", "LABBOT_OPEN_PROBES": "true"},
    ],
    ids=["loopback", "localhost", "ipv6-loopback", "open-probes", "open-probes-true"],
)
def test_on_loopback_or_with_the_allow_readyz_and_metrics_answer_anyone(tmp_path: Path, env: dict[str, str]) -> None:
    plane = built(tmp_path, **env)
    try:
        client = TestClient(plane.app())
        scrape(client)
        r = client.get("/readyz")
        assert r.status_code == 503 and r.json()["database"] == "ok" and r.json()["ray"] != "ok"
    finally:
        plane.close()


def test_the_allow_is_on_or_off_and_anything_else_is_refused(tmp_path: Path) -> None:
    home = {"LABBOT_HOME": str(tmp_path)}
    assert Settings.from_env(home).open_probes is False
    assert Settings.from_env({**home, "LABBOT_OPEN_PROBES": "0"}).open_probes is False
    assert Settings.from_env({**home, "LABBOT_OPEN_PROBES": "Yes"}).open_probes is True
    with pytest.raises(BadRequest, match="LABBOT_OPEN_PROBES='maybe' is not on or off"):
        Settings.from_env({**home, "LABBOT_OPEN_PROBES": "maybe"})


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True), ("LOCALHOST", True), ("::1", True),
        ("[::1]", True), ("0.0.0.0", False), ("::", False), ("", False), ("10.1.2.3", False),
        ("labbot.example.com", False), ("localhost.example.com", False),
    ],
)  # fmt: skip
def test_only_loopback_addresses_count_as_local(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


# ----------------------------------------------------------------- /readyz


def test_readyz_is_503_naming_ray_when_ray_does_not_answer(plane: ControlPlane) -> None:
    r = TestClient(plane.app()).get("/readyz")
    assert r.status_code == 503
    body = r.json()
    assert body["ok"] is False and body["database"] == "ok" and body["role"] == "leader"
    assert body["ray"].startswith("unreachable (") or body["ray"].startswith("no answer within")
    assert UNREACHABLE_RAY not in r.text and RAY_SECRET not in r.text
    assert TestClient(plane.app()).get("/healthz").status_code == 200  # alive all the same


def test_readyz_is_200_when_both_answer_and_503_naming_the_database_when_it_is_gone(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
    db.upgrade()
    gone = Database(f"sqlite:///{tmp_path / 'no-such-folder' / 'labbot.db'}")  # its folder is gone

    def app(database: Database) -> TestClient:
        async def ready() -> tuple[bool, dict[str, Any]]:
            return await readiness(database.ping, lambda: "2.60.0", role="leader")

        open_probes = ProbeAccess(open=True)  # as on a loopback listener
        return TestClient(create_app(None, None, admin_token="a", ready=ready, probes=open_probes))  # type: ignore[arg-type]

    r = app(db).get("/readyz")
    assert (r.status_code, r.json()) == (200, {"ok": True, "database": "ok", "ray": "ok", "role": "leader"})
    r = app(gone).get("/readyz")
    assert r.status_code == 503
    assert r.json()["database"].startswith("unreachable (") and r.json()["ray"] == "ok"
    assert str(tmp_path) not in r.text  # what failed, never where (a URL may carry a password)


def test_readyz_says_a_check_that_hangs_ran_out_of_time() -> None:
    import time

    async def go() -> tuple[bool, dict[str, Any]]:
        return await readiness(lambda: None, lambda: time.sleep(2), role="follower", timeout=0.2)

    ok, body = asyncio.run(go())
    assert not ok and body == {"ok": False, "database": "ok", "ray": "no answer within 0.2 s", "role": "follower"}


# ----------------------------------------------------------------- JSON logs


def test_json_logs_carry_run_and_page_ids_and_no_secrets(plane: ControlPlane, caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter([RAY_SECRET]))
    root = logging.getLogger()
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.INFO)
    try:
        add_running_run(plane)
        with plane.db.session() as s:
            plane.pager.judge(s, s.get_one(Run, "r0metrics1"), {}, [Finding("hung", "page", "stuck", {})], utcnow())
        logging.getLogger("labbot.test").warning("Ray token %s and %s leaked", RAY_SECRET, SLACK_SHAPED)
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    page = next(line for line in lines if line["logger"] == "labbot.agents.babysitter.pager")
    assert page["run_id"] == "r0metrics1" and page["page_id"] and page["level"] == "INFO"
    assert RAY_SECRET not in out.getvalue() and SLACK_SHAPED not in out.getvalue()
    assert "[redacted]" in lines[-1]["message"]


def test_log_format_is_text_by_default_json_when_asked_and_nothing_else(tmp_path: Path) -> None:
    home = {"LABBOT_HOME": str(tmp_path)}
    assert Settings.from_env(home).log_format == "text"
    assert Settings.from_env({**home, "LABBOT_LOG_FORMAT": "JSON"}).log_format == "json"
    with pytest.raises(BadRequest, match="LABBOT_LOG_FORMAT"):
        Settings.from_env({**home, "LABBOT_LOG_FORMAT": "xml"})


# ----------------------------------------------------------------- a real `labbot serve` and Ray head


def test_a_real_serve_is_ready_scrapes_and_logs_json(tmp_path: Path, ray_head: Any) -> None:
    from support import Serve

    s = Serve(
        tmp_path / "home", ray_address=ray_head.address, ray_token=ray_head.token,
        extra_env={"LABBOT_LOG_FORMAT": "json"},
    ).start()  # fmt: skip
    try:
        r = httpx.get(f"{s.url}/readyz", timeout=10)
        body = r.json()
        assert (r.status_code, body["ok"], body["database"], body["ray"]) == (200, True, "ok", "ok")
        assert body["role"] == "leader" and body["leader"] == body["replica"]
        r = httpx.get(f"{s.url}/metrics", timeout=10)
        assert r.status_code == 200
        found = samples(r.text)
        assert value(found, "labbot_database_up") == 1 and value(found, "labbot_leader") == 1
        assert ray_head.token not in r.text and s.admin_token not in r.text
    finally:
        s.stop()
    lines = [line for line in s.log().splitlines() if line.startswith("{")]
    assert lines, s.log()[-2000:]
    assert all({"time", "level", "logger", "message"} <= set(json.loads(line)) for line in lines)
    assert ray_head.token not in s.log()
