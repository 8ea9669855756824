"""A property-based fuzz of the HTTP API (hypothesis): with a valid admin token, any method, path under the app's
routes, query and body gets an answer below 500 — bad input is the caller's fault and is said so. The bodies include
JSON arrays, NaN and Infinity, and strings and keys holding a NUL or a lone surrogate, in documents shaped like the
POST routes' own (a launch whose name holds a NUL reached PostgreSQL and was a 500).

In process (starlette TestClient), over a real RunService, pager, audit trail and artifact store, on SQLite and on
PostgreSQL; Ray is an address where nothing listens, so a launch that gets as far as Ray is a 503, not a job. Bounded
examples, no deadline shrinking games: it stays in the fast tier."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient
from support import api_client

from labbot.common.errors import BadRequest
from labbot.training.telemetry_ingest import parse_batch

ADMIN = "fuzz-admin-token"


@pytest.fixture
def client(tmp_path: Path, database_url: str) -> Iterator[TestClient]:
    with api_client(tmp_path, database_url, ADMIN) as c:
        yield c


SEGMENT = st.one_of(
    st.sampled_from(["r1", "zzzzzz", "loss", "..", "%C3%A9", "%00", "²", "a" * 300]),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=12).map(
        lambda s: s.replace("/", "_").replace("?", "_").replace("#", "_")
    ),
)
TEMPLATES = [
    ("GET", "/api/v1/jobs"),
    ("GET", "/api/v1/runs"),
    ("POST", "/api/v1/runs"),
    ("GET", "/api/v1/runs/{}"),
    ("POST", "/api/v1/runs/{}/stop"),
    ("POST", "/api/v1/runs/{}/restart"),
    ("GET", "/api/v1/runs/{}/logs"),
    ("GET", "/api/v1/runs/{}/metrics/{}"),
    ("POST", "/api/v1/runs/{}/telemetry"),
    ("GET", "/api/v1/pages"),
    ("GET", "/api/v1/pages/{}"),
    ("POST", "/api/v1/pages/{}/ack"),
    ("POST", "/api/v1/pages/{}/resolve"),
    ("GET", "/api/v1/audit"),
    ("GET", "/plots/{}/loss.png"),
    ("GET", "/plots/{}/metrics.png"),
    ("GET", "/api/v1/artifacts"),
    ("POST", "/api/v1/artifacts"),
    ("GET", "/api/v1/artifacts/{}"),
    ("DELETE", "/api/v1/artifacts/{}"),
    ("POST", "/api/v1/artifacts/{}/share"),
    ("POST", "/api/v1/artifacts/{}/post"),
    ("POST", "/api/v1/runs/{}/priority"),
    ("POST", "/api/v1/feedback/{}/comment"),
]
QUERY_NAMES = st.sampled_from(["limit", "tail", "wait", "status", "all", "run", "agent", "name", "with", "sig", "by",
                               "include_shared", "channel", "x"])  # fmt: skip
QUERY_VALUES = st.one_of(
    st.sampled_from(["0", "1", "50", "-1", "²", "1e3", "9" * 400, "", "researcher", "true", "NaN", "é"]),
    st.text(max_size=20),
)
ODD_TEXT = st.sampled_from(["a\x00b", "\x00", "\ud800", "x\udfffy", "é\x00", "NaN", ""])  # NUL, lone surrogates
JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), ODD_TEXT,
    st.sampled_from([10**23, 10**400, -1, 1e23, "NaN", "Infinity"]),
)  # fmt: skip
KEYS = st.sampled_from(["job", "params", "gpus", "name", "points", "events", "step", "metrics", "ts", "attempt",
                        "kind", "path", "loss", "stall_after", "idempotency_key", "owner", "priority", "cause",
                        "user", "comment"])  # fmt: skip
JSON_DOC = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            KEYS | st.text(max_size=8) | ODD_TEXT,
            inner,
            max_size=5,
        ),
    ),
    max_leaves=20,
)  # fmt: skip
TEXT = st.text(max_size=12) | ODD_TEXT
LAUNCH = st.fixed_dictionaries(  # mostly a launch that would be accepted but for one string
    {"job": st.just("sleeper") | TEXT},
    optional={"name": TEXT, "owner": TEXT, "idempotency_key": TEXT, "alerts": st.just([]) | st.lists(TEXT),
              "params": st.just({}) | st.dictionaries(TEXT, JSON_LEAF, max_size=1), "gpus": st.just(0) | JSON_LEAF},
)  # fmt: skip
POSTS = {  # the POST routes that read a JSON body, and documents of each one's own shape
    "/api/v1/runs": LAUNCH,
    "/api/v1/runs/{}/priority": st.fixed_dictionaries({"priority": JSON_LEAF}),
    "/api/v1/pages/{}/resolve": st.fixed_dictionaries({"cause": TEXT}),
    "/api/v1/feedback/{}/comment": st.fixed_dictionaries({"user": TEXT, "comment": TEXT}),
    "/api/v1/evals/runs": st.fixed_dictionaries({"suite": TEXT}, optional={"name": TEXT, "owner": TEXT}),
}
ROUTE_DOC = st.one_of(*POSTS.values())
BODY = st.one_of(
    st.none(),
    JSON_DOC.map(lambda d: json.dumps(d).encode()),  # NaN/Infinity as bare tokens, a lone surrogate as its escape
    ROUTE_DOC.map(lambda d: json.dumps(d).encode()),
    st.lists(ROUTE_DOC, max_size=2).map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=200),
    st.integers(min_value=1, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
)


@pytest.mark.databases
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(TEMPLATES),
    segments=st.lists(SEGMENT, min_size=2, max_size=2),
    query=st.lists(st.tuples(QUERY_NAMES, QUERY_VALUES), max_size=3),
    body=BODY,
    token=st.sampled_from([f"Bearer {ADMIN}", f"Bearer {ADMIN}", "Bearer run-token", ""]),
)
def test_no_request_gets_a_500(
    client: TestClient,
    caplog: pytest.LogCaptureFixture,
    route: tuple[str, str],
    segments: list[str],
    query: list[tuple[str, str]],
    body: bytes | None,
    token: str,
) -> None:
    method, template = route
    path = template.format(*segments[: template.count("{}")])
    headers = {"Authorization": token}
    kwargs: dict[str, Any] = {"params": query, "headers": headers}
    if body is not None and method != "GET":
        kwargs["content"] = body
    if "wait" in dict(query):  # a long poll on a run that exists could wait 30 s: keep the fuzz fast
        kwargs["params"] = [(k, v) for k, v in query if k != "wait"]
    caplog.clear()
    r = client.request(method, path, **kwargs)
    assert r.status_code < 500 or r.status_code == 503, (method, path, query, body, r.status_code, r.text[:300])
    assert not [rec for rec in caplog.records if rec.exc_info], (method, path, body, caplog.text[-2000:])


@pytest.mark.databases
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(sorted(POSTS)).flatmap(lambda p: st.tuples(st.just(p), POSTS[p] | POSTS[p] | JSON_DOC)),
    segment=SEGMENT,
)
def test_no_json_body_gets_a_500(
    client: TestClient, caplog: pytest.LogCaptureFixture, route: tuple[str, Any], segment: str
) -> None:
    """The POST routes that read a JSON body, each given documents of its own shape: what a route would store is
    stored or refused (400), never a driver error."""
    caplog.clear()
    path, doc = route
    body = json.dumps(doc).encode()
    r = client.post(path.format(segment), content=body)
    assert r.status_code < 500 or r.status_code == 503, (path, body, r.status_code, r.text[:300])
    assert not [rec for rec in caplog.records if rec.exc_info], (path, body, caplog.text[-2000:])


@settings(max_examples=300, deadline=None)
@given(body=BODY)
def test_telemetry_parsing_refuses_with_400_only(body: bytes | None) -> None:
    """The telemetry parser (behind the run token, so out of the fuzz above): BadRequest or a batch, nothing else."""
    with contextlib.suppress(BadRequest):
        parse_batch(body or b"")
