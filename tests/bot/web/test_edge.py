"""The API's edge (``labbot.bot.web.edge``): an id or query value no database can hold — NUL, text that is not
UTF-8 — is a 400 for every route before any route reads it, on SQLite and on PostgreSQL (where a NUL in a query
was a driver error, a 500); ordinary ids still reach their routes. And the same rule for every string and key of a
JSON body, in the one JSON reader (``labbot.common.json_input``)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import api_client

from labbot.bot.web.edge import refusal, unstorable
from labbot.common.errors import BadRequest
from labbot.common.json_input import loads_json, unstorable_in

ADMIN = "edge-admin-token"
UNSTORABLE = [
    ("POST", "/api/v1/runs/%00/telemetry"),  # no admin token needed there
    ("GET", "/api/v1/runs/%00"),
    ("GET", "/api/v1/runs/r%00x/logs"),
    ("GET", "/api/v1/pages/%00"),
    ("GET", "/api/v1/feedback/%00"),
    ("GET", "/api/v1/evals/runs/%00"),
    ("GET", "/api/v1/feedback?run=%00"),
    ("GET", "/api/v1/runs?status=%00"),
    ("GET", "/api/v1/audit?by=%ff"),
]


@pytest.fixture
def client(tmp_path: Path, database_url: str) -> Iterator[TestClient]:
    with api_client(tmp_path, database_url, ADMIN) as c:
        yield c


@pytest.mark.databases
@pytest.mark.parametrize(("method", "path"), UNSTORABLE)
def test_an_unstorable_id_or_query_is_a_400_before_any_route(
    client: TestClient, method: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        answer = client.request(method, path, content=b"{}")
    assert answer.status_code == 400, (path, answer.status_code, answer.text)
    error = answer.json()["error"]
    assert error["code"] == "bad_request" and ("NUL" in error["message"] or "UTF-8" in error["message"])
    assert "Traceback" not in caplog.text


@pytest.mark.databases
def test_ordinary_ids_still_reach_their_routes(client: TestClient) -> None:
    assert client.get("/api/v1/runs/r-1").status_code == 404
    assert client.get("/api/v1/runs?limit=5").status_code == 200
    assert client.get("/api/v1/runs/%C3%A9t%C3%A9").status_code == 404  # UTF-8 that is not an id: the route says so
    # bytes that are not UTF-8 in a path arrive as U+FFFD (the server decodes with replacement): an unknown id
    assert client.get("/api/v1/runs/%ED%A0%80").status_code == 404


def test_the_rule_is_pure() -> None:
    assert unstorable("r-1") is None and unstorable("été") is None
    assert unstorable("a\x00b") == "holds a NUL character (%00)"
    assert unstorable("\udca0") == "is not valid UTF-8"
    assert refusal("/api/v1/runs/r1", b"limit=5&by=ada") is None
    assert "query parameter 'run'" in (refusal("/api/v1/feedback", b"run=%00") or "")
    assert "not valid UTF-8" in (refusal("/x", b"by=%ff") or "")
    assert refusal("/api/v1/runs/a\x00", b"") is not None


def test_the_json_reader_refuses_what_no_database_stores() -> None:
    for body, says in [(b'{"name": "a\\u0000b"}', "name holds a NUL character (\\u0000)"),
                       (b'{"p": {"x\\u0000": 1}}', "a key in p holds a NUL character"),
                       (b'["\\ud800"]', "[0] is not valid UTF-8"),
                       (b'"\xed\xa0\x80"', "is not valid UTF-8")]:  # fmt: skip
        with pytest.raises(BadRequest, match="no database can store") as refused:
            loads_json(body)
        assert says in refused.value.message, refused.value.message
    assert loads_json(b'{"loss": NaN, "name": "\\u00e9\\ud83d\\ude00"}')["name"] == "é😀"  # pairs are fine
    with pytest.raises(BadRequest, match="NaN is not a JSON number"):
        loads_json(b'{"loss": NaN}', allow_nan=False)
    assert unstorable_in({"a": [1.5, "x", {"b": None}]}, allow_nan=False) is None
    assert unstorable_in([math.inf], allow_nan=False) == "[0] is inf, which JSON has no number for"
    deep: Any = []
    for _ in range(5000):  # past Python's recursion limit: the walk is iterative
        deep = [deep]
    assert "nest more than 64" in (unstorable_in(deep) or "")
