"""The failure-injection base every HTTP fake uses (``tests/fakes/failures.py``), on a two-route toy fake."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fakes.failures import FailureInjection
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class Toy(FailureInjection):
    """Answers ``{"ok": true}`` on /a and /b unless a test injected otherwise; records (path, status, held)."""

    def __init__(self) -> None:
        self.init_failures(max_hang_s=5.0)
        self.seen: list[tuple[str, int, bool]] = []
        self.app = Starlette(routes=[Route("/{name}", self._handle, methods=["GET"])])

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        return {"ok": False, "error": f"toy {status}"}, {"X-Toy": "1"}

    async def _handle(self, request: Request) -> Response:
        name = request.path_params["name"]
        answered = await self.hold_if_hanging(request, name)
        failure = self.take_failure(name)
        response = failure.response() if failure else JSONResponse({"ok": True})
        self.seen.append((name, response.status_code, answered))
        return response


async def _get(toy: Toy, *paths: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=toy.app), base_url="http://toy.test") as http:
        return [await http.get(p) for p in paths]


def test_failures_queue_per_route_in_order_with_the_fakes_bodies_and_headers() -> None:
    toy = Toy()
    toy.fail_next(503, on="a", times=2)
    toy.fail_next(429, retry_after=7)  # any route
    toy.fail_next(200, on="b", body="<html>proxy</html>")
    toy.fail_next(200, on="b", body=b'{"cut": ')
    toy.fail_next(502, on="b", body="", headers={"Content-Type": "text/plain"})
    answers = asyncio.run(_get(toy, "/b", "/a", "/a", "/b", "/b", "/b", "/a", "/b"))
    assert [r.status_code for r in answers] == [429, 503, 503, 200, 200, 502, 200, 200]
    assert answers[0].headers["retry-after"] == "7" and answers[0].headers["x-toy"] == "1"
    assert answers[1].json() == {"ok": False, "error": "toy 503"}
    assert answers[3].headers["content-type"].startswith("text/html") and answers[3].text == "<html>proxy</html>"
    assert answers[4].headers["content-type"] == "application/json" and answers[4].content == b'{"cut": '
    assert answers[5].headers["content-type"].startswith("text/plain") and "x-toy" not in answers[5].headers
    assert [r.json() for r in answers[6:]] == [{"ok": True}, {"ok": True}]


def test_clear_failures_ends_an_outage_for_one_route_or_all() -> None:
    toy = Toy()
    toy.fail_next(500, on="a", times=100)
    toy.fail_next(500, on="b", times=100)
    toy.clear_failures(on="a")
    assert [r.status_code for r in asyncio.run(_get(toy, "/a", "/b"))] == [200, 500]
    toy.clear_failures()
    assert [r.status_code for r in asyncio.run(_get(toy, "/a", "/b"))] == [200, 200]
    with pytest.raises(ValueError, match="at least 1"):
        toy.fail_next(500, times=0)


def test_a_hang_holds_the_request_until_release_then_it_is_answered_as_usual() -> None:
    toy = Toy()
    toy.hang_next(on="a")
    toy.fail_next(503, on="a")  # taken after the hang: a slow 503

    async def go() -> list[int]:
        held = asyncio.create_task(_get(toy, "/a"))
        quick = await _get(toy, "/b")  # not held: the hang is for /a
        await asyncio.sleep(0.2)
        assert not held.done() and toy.seen == [("b", 200, True)]
        toy.release()
        return [r.status_code for r in [*quick, *await asyncio.wait_for(held, 5)]]

    assert asyncio.run(go()) == [200, 503]
    toy.hang_next(seconds=0.05)  # ends on its own
    assert [r.status_code for r in asyncio.run(_get(toy, "/a"))] == [200]
    assert toy.seen[1:] == [("a", 503, True), ("a", 200, True)]
