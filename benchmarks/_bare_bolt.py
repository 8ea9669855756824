"""The baseline for benchmarks/slack_ack.py: a bare Bolt app whose /lab handler only acks, served the same way
labbot serves its Bolt app (Starlette + uvicorn; Bolt's own AsyncSlackRequestHandler, which verifies signatures as
labbot's door, labbot.bot.slack.http, does), with a client against the same Slack fake.
Usage: _bare_bolt.py PORT SECRET SLACK_API_URL BOT_TOKEN"""

from __future__ import annotations

import sys

import uvicorn
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

port, secret, api_url, token = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
bolt = AsyncApp(signing_secret=secret, client=AsyncWebClient(token=token, base_url=api_url))


@bolt.command("/lab")
async def lab(ack: AsyncAck) -> None:
    await ack()


handler = AsyncSlackRequestHandler(bolt)


async def events(request: Request) -> Response:
    return await handler.handle(request)


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


app = Starlette(routes=[Route("/slack/events", events, methods=["POST"]), Route("/healthz", healthz)])
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
