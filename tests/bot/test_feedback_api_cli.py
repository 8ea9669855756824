"""``/api/v1/feedback`` and ``/api/v1/ab`` and their CLI, ``labbot feedback`` and ``labbot ab``: what is listed,
bad input a 400 saying what is accepted, no database a 503, no ``[agents.ab]`` a plain word on what to set."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.testclient import TestClient
from support import free_port, wait_for

from labbot.agents.feedback.ab import AbTest
from labbot.agents.feedback.store import FeedbackStore
from labbot.agents.fleet.sessions import SessionStore, TurnRecord, new_turn_id
from labbot.bot.api import create_app
from labbot.bot.cli.main import main
from labbot.storage.db import Database
from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection
from labbot.training.registry import JobRegistry
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

pytestmark = pytest.mark.databases

ADMIN = "admin-secret"
CHANNEL, ALICE, BOB = "C0LAB00001", "U0ALICE001", "U0BOB00001"
AB = AbTest(("model-a", "model-b"))


def make_app(tmp_path: Path, db: Database | None, ab: AbTest | None) -> Any:
    service_db = db or Database(f"sqlite:///{tmp_path / 'other.db'}")
    service_db.upgrade()
    service = RunService(
        service_db,
        JobRegistry.from_config({}),
        RayLauncher(RayConnection("http://127.0.0.1:9", None), timeout=1),
        control_url="http://127.0.0.1:9",
        checkpoint_root=tmp_path / "runs",
    )
    return create_app(service, TelemetryStore(service_db), admin_token=ADMIN, db=db, ab=ab)


def answered(db: Database, thread: str, model: str, arm: str) -> str:
    sessions = SessionStore(db)
    session, _ = sessions.open(
        channel=CHANNEL, thread_ts=thread, role="assistant", owner=ALICE, run_id=None, model=model, ab_arm=arm
    )
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    turn = TurnRecord(new_turn_id(), ALICE, "assistant", model, arm, "end_turn", 3, 2000, 6.0, 0, 1, CHANNEL)
    sessions.save(session.id, history, [], turn)
    sessions.posted(turn.id, CHANNEL, f"{thread}9")
    return f"{thread}9"


@pytest.fixture
def voted(db: Database) -> Database:
    store = FeedbackStore(db)
    a = answered(db, "1.1", "model-a", "A")
    b = answered(db, "2.1", "model-b", "B")
    store.vote(channel=CHANNEL, ts=a, user=ALICE, vote=-1, source="button")
    store.vote(channel=CHANNEL, ts=b, user=ALICE, vote=1, source="button")
    store.vote(channel=CHANNEL, ts=b, user=BOB, vote=1, source="reaction")
    return db


def test_feedback_is_listed_filtered_and_commented(voted: Database, tmp_path: Path) -> None:
    api = TestClient(make_app(tmp_path, voted, AB), headers={"Authorization": f"Bearer {ADMIN}"})
    rows = api.get("/api/v1/feedback").json()["feedback"]
    assert len(rows) == 3 and {r["model"] for r in rows} == {"model-a", "model-b"}
    [down] = api.get("/api/v1/feedback", params={"vote": "down"}).json()["feedback"]
    assert (down["user"], down["model"], down["ab_arm"], down["kind"]) == (ALICE, "model-a", "A", "answer")
    assert len(api.get("/api/v1/feedback", params={"model": "model-b"}).json()["feedback"]) == 2
    r = api.post(f"/api/v1/feedback/{down['id']}/comment", json={"user": ALICE, "comment": "wrong run"})
    assert r.status_code == 200 and r.json()["feedback"]["comment"] == "wrong run"
    assert api.get(f"/api/v1/feedback/{down['id']}").json()["feedback"]["comment"] == "wrong run"
    # bad input: 4xx, saying what is accepted
    for params, said in [
        ({"vote": "meh"}, "up or down"),
        ({"kind": "page"}, "answer, run, eval"),
        ({"limit": "0"}, "from 1 to 1000"),
    ]:
        r = api.get("/api/v1/feedback", params=params)
        assert r.status_code == 400 and said in r.json()["error"]["message"], r.text
    r = api.post(f"/api/v1/feedback/{down['id']}/comment", json={"comment": "no user"})
    assert r.status_code == 400 and '"user"' in r.json()["error"]["message"]
    r = api.post(f"/api/v1/feedback/{down['id']}/comment", json={"user": BOB, "comment": "mine now"})
    assert r.status_code == 400 and "only they can comment" in r.json()["error"]["message"]
    assert api.get("/api/v1/feedback/fbnope22").status_code == 404
    assert TestClient(make_app(tmp_path, voted, AB)).get("/api/v1/feedback").status_code == 401


def test_the_ab_report_and_what_to_set_without_a_test(voted: Database, tmp_path: Path) -> None:
    api = TestClient(make_app(tmp_path, voted, AB), headers={"Authorization": f"Bearer {ADMIN}"})
    report = api.get("/api/v1/ab").json()["ab"]
    a, b = report["arms"]
    assert (a["model"], a["up"], a["down"], a["answers"]) == ("model-a", 0, 1, 1)
    assert (b["model"], b["up"], b["down"], b["tokens_per_answer"]) == ("model-b", 2, 0, 2000)
    assert report["verdict"] == "not enough votes" and report["significant"] is False
    off = TestClient(make_app(tmp_path, voted, None), headers={"Authorization": f"Bearer {ADMIN}"})
    doc = off.get("/api/v1/ab").json()["ab"]
    assert doc["configured"] is False and "[agents.ab]" in doc["message"]


def test_without_a_database_the_routes_say_they_are_not_running(tmp_path: Path) -> None:
    api = TestClient(make_app(tmp_path, None, AB), headers={"Authorization": f"Bearer {ADMIN}"})
    for path in ("/api/v1/feedback", "/api/v1/ab"):
        r = api.get(path)
        assert r.status_code == 503 and r.json()["error"]["code"] == "not_running"


@pytest.fixture
def served(voted: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(make_app(tmp_path, voted, AB), host="127.0.0.1", port=port, log_level="warning")
    )
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


def test_labbot_feedback_and_ab_print_one_json_document_or_a_table(
    served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["feedback", "--json", "--vote", "up"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 and all(r["vote"] == "up" for r in rows)
    assert main(["feedback"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:4] == ["ID", "VOTE", "BY", "ON"]
    assert "answer by assistant/model-a (arm A)" in table
    assert main(["ab", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "not enough votes"
    assert main(["ab"]) == 0
    text = capsys.readouterr().out
    assert "model-a" in text and "model-b" in text and "not enough votes" in text and "95% interval" in text
    assert main(["feedback", "--vote", "sideways"]) == 2  # argparse: the choices are named
    assert "up" in capsys.readouterr().err
