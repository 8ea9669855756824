"""``/api/v1/pages`` over a real Pager and SQLite, and the CLI's ``labbot pages`` table of what that API answers.

The pages routes never reach Ray: the RunService behind the app points at an address where nothing answers.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import Clock

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.bot.api import create_app
from labbot.bot.render.tables import pages_table
from labbot.storage.db import Database
from labbot.storage.models import Run
from labbot.training.launcher import RayLauncher
from labbot.training.monitoring import Finding
from labbot.training.ray_cluster import RayConnection
from labbot.training.registry import JobRegistry
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

pytestmark = pytest.mark.databases

ADMIN = "admin-secret"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
UNKNOWN = "unknown page 'pnope22'; list open pages with `labbot pages` or `/lab pages`"


class Lab:
    """The control plane's API with a pager, and three pages: r1 hung (t0), r2 failed (t0+1m), the cluster (t0+2m)."""

    def __init__(self, tmp_path: Path, database_url: str) -> None:
        self.clock = Clock(T0)
        self.db = Database(database_url)
        service = RunService(
            self.db,
            JobRegistry.from_config({}),
            RayLauncher(RayConnection("http://127.0.0.1:9", None), timeout=1),
            control_url="http://127.0.0.1:9",
            checkpoint_root=tmp_path / "runs",
        )
        self.pager = Pager(self.db, PagingPolicy(), slack=False, pagerduty=False, clock=self.clock)
        app = create_app(service, TelemetryStore(self.db), admin_token=ADMIN, pager=self.pager)
        self.client = TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})
        with self.db.session() as s:
            for run_id, name in (("r1", "lr-sweep-1"), ("r2", "lr-sweep-2")):
                s.add(
                    Run(
                        id=run_id, job="tiny-lm", name=name, owner="alice", config={}, status="running",
                        telemetry_token_hash="0" * 64,
                    )
                )  # fmt: skip
        self.hung = self.judge("r1", Finding("hung", "page", "step stuck at 40 for 30s", {}))
        self.clock.now += timedelta(minutes=1)
        self.failed = self.judge("r2", Finding("failed", "page", "Ray says FAILED: " + "x" * 200, {}))
        self.clock.now += timedelta(minutes=1)
        self.infra = self.judge(None, Finding("infra", "page", "the Ray API has not answered for 2m", {}))
        self.clock.now += timedelta(minutes=3)

    def judge(self, run_id: str | None, finding: Finding) -> str:
        with self.db.session() as s:
            run = s.get_one(Run, run_id) if run_id else None
            self.pager.judge(s, run, {}, [finding], self.clock())
        (page,) = [p for p in self.pager.pages(include_resolved=True) if p["kind"] == finding.kind]
        return str(page["id"])

    def ids(self, **params: str) -> list[str]:
        r = self.client.get("/api/v1/pages", params=params)
        assert r.status_code == 200, r.text
        return [p["id"] for p in r.json()["pages"]]


@pytest.fixture
def lab(tmp_path: Path, database_url: str) -> Lab:
    return Lab(tmp_path, database_url)


def _error(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return str(body["error"]["message"])


def test_every_pages_route_needs_the_admin_token(lab: Lab) -> None:
    routes = [
        ("GET", "/api/v1/pages"),
        ("GET", f"/api/v1/pages/{lab.hung}"),
        ("POST", f"/api/v1/pages/{lab.hung}/ack?by=cli:mallory"),
        ("POST", f"/api/v1/pages/{lab.hung}/resolve?by=cli:mallory"),
    ]
    for method, url in routes:
        for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN}):
            message = _error(lab.client.request(method, url, headers=headers), 401, "unauthorized")
            assert "admin token" in message
    assert lab.pager.get(lab.hung)["state"] == "triggered"  # nothing was changed by the refused calls


def test_the_list_shows_open_pages_newest_first_and_filters(lab: Lab) -> None:
    assert lab.ids() == [lab.infra, lab.failed, lab.hung]
    assert lab.ids(run="r1") == [lab.hung]
    assert lab.ids(run="nosuch") == []
    assert lab.ids(limit="2") == [lab.infra, lab.failed]
    lab.pager.resolve(lab.failed, by="cli:bob")
    assert lab.ids() == [lab.infra, lab.hung]
    assert lab.ids(all="1") == [lab.infra, lab.failed, lab.hung]
    assert lab.ids(all="1", run="r2") == [lab.failed]
    assert lab.ids(run="r2") == []
    for bad in ("0", "many", "-1"):
        assert "limit" in _error(lab.client.get("/api/v1/pages", params={"limit": bad}), 400, "bad_request")


def test_one_page_has_the_contract_fields(lab: Lab) -> None:
    r = lab.client.get(f"/api/v1/pages/{lab.infra}")
    assert r.status_code == 200
    page = r.json()["page"]
    assert page == lab.pager.get(lab.infra)
    assert page["run_id"] is None and page["key"] == "labbot-cluster-infra"
    assert page["state"] == "triggered" and page["severity"] == "page" and page["escalation_level"] == 0
    assert page["triggered_at"] == (T0 + timedelta(minutes=2)).isoformat()
    assert page["acknowledged_by"] is None and page["resolved_by"] is None


def test_ack_then_resolve(lab: Lab) -> None:
    r = lab.client.post(f"/api/v1/pages/{lab.hung}/ack", params={"by": "cli:alice"})
    assert r.status_code == 200, r.text
    page = r.json()["page"]
    assert page["state"] == "acknowledged" and page["acknowledged_by"] == "cli:alice"
    assert page["acknowledged_at"] == lab.clock().isoformat() and page["next_escalation_at"] is None
    lab.clock.now += timedelta(minutes=1)
    again = lab.client.post(f"/api/v1/pages/{lab.hung}/ack", params={"by": "cli:bob"})
    assert again.status_code == 200 and again.json()["page"] == page  # a second ack changes nothing
    assert lab.ids() == [lab.infra, lab.failed, lab.hung]  # acknowledged is still open

    r = lab.client.post(f"/api/v1/pages/{lab.hung}/resolve", params={"by": "cli:alice"})
    assert r.status_code == 200, r.text
    page = r.json()["page"]
    assert page["state"] == "resolved" and page["resolved_by"] == "cli:alice"
    assert page["resolved_at"] == lab.clock().isoformat() and page["acknowledged_by"] == "cli:alice"
    assert lab.client.post(f"/api/v1/pages/{lab.hung}/resolve").json()["page"] == page
    assert lab.ids() == [lab.infra, lab.failed]

    r = lab.client.post(f"/api/v1/pages/{lab.infra}/ack")
    assert r.json()["page"]["acknowledged_by"] == "api"  # no ?by=


def test_an_unknown_page_says_how_to_list_pages(lab: Lab) -> None:
    for method, url in (
        ("GET", "/api/v1/pages/pnope22"),
        ("POST", "/api/v1/pages/pnope22/ack?by=cli:alice"),
        ("POST", "/api/v1/pages/pnope22/resolve?by=cli:alice"),
    ):
        assert _error(lab.client.request(method, url), 404, "unknown_page") == UNKNOWN


def test_acknowledging_a_resolved_page_is_a_conflict(lab: Lab) -> None:
    assert lab.client.post(f"/api/v1/pages/{lab.failed}/resolve", params={"by": "cli:bob"}).status_code == 200
    r = lab.client.post(f"/api/v1/pages/{lab.failed}/ack", params={"by": "cli:alice"})
    message = _error(r, 409, "conflict")
    assert message == f"page {lab.failed} is already resolved (by cli:bob); nothing to acknowledge"
    page = lab.pager.get(lab.failed)
    assert page["state"] == "resolved" and page["acknowledged_by"] is None


def test_who_acted_is_at_most_100_characters(lab: Lab) -> None:
    """``?by=`` lands in VARCHAR(100) columns, which PostgreSQL holds to their length: longer is a 400, not a 500."""
    r = lab.client.post(f"/api/v1/pages/{lab.failed}/ack", params={"by": "x" * 101})
    assert _error(r, 400, "bad_request") == "by is who acted, at most 100 characters; got 101"
    assert lab.client.post(f"/api/v1/pages/{lab.failed}/ack", params={"by": "x" * 100}).status_code == 200


def test_the_cli_table_of_what_the_api_answers(lab: Lab) -> None:
    lab.client.post(f"/api/v1/pages/{lab.infra}/ack", params={"by": "cli:alice"})
    lab.client.post(f"/api/v1/pages/{lab.hung}/resolve", params={"by": "cli:bob"})
    pages = lab.client.get("/api/v1/pages", params={"all": "1"}).json()["pages"]
    lines = pages_table(pages, now=T0 + timedelta(minutes=10)).splitlines()
    assert lines[0].split() == ["PAGE", "KIND", "RUN", "STATE", "LEVEL", "AGE", "BY", "SUMMARY"]
    rows = [line.split(None, 6) for line in lines[1:]]
    assert [r[:6] for r in rows] == [
        [lab.infra, "infra", "(cluster)", "acknowledged", "0", "8m"],
        [lab.failed, "failed", "r2", "triggered", "0", "9m"],
        [lab.hung, "hung", "r1", "resolved", "0", "10m"],
    ]
    assert rows[0][6].split(None, 1) == ["cli:alice", "the Ray API has not answered for 2m"]
    assert rows[1][6] == "Ray says FAILED: " + "x" * 63  # the summary column is cut at 80 characters
    assert rows[2][6].split(None, 1) == ["cli:bob", "step stuck at 40 for 30s"]
    summary_at = lines[0].index("SUMMARY")
    assert all(line[summary_at - 2 : summary_at] == "  " for line in lines[1:])  # one column, aligned


def test_the_cli_table_when_there_are_no_pages() -> None:
    assert pages_table([]) == "no open pages (labbot pages --all shows resolved ones)"


def test_without_a_pager_the_pages_routes_say_it_is_not_running(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
    db.upgrade()
    service = RunService(
        db,
        JobRegistry.from_config({}),
        RayLauncher(RayConnection("http://127.0.0.1:9", None), timeout=1),
        control_url="http://127.0.0.1:9",
        checkpoint_root=tmp_path / "runs",
    )
    app = create_app(service, TelemetryStore(db), admin_token=ADMIN)
    client = TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})
    assert "paging is not running" in _error(client.get("/api/v1/pages"), 503, "not_running")
