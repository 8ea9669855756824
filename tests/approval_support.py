"""The approval gate's prompter for tests: what the gate asked (``asked``), what it settled, and an event set at each
ask (a test waits on it, then decides through the gate as a button press would)."""

from __future__ import annotations

import asyncio

from labbot.agents.fleet.approvals import ApprovalRequest


class Prompter:
    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []
        self.settled_: list[ApprovalRequest] = []
        self.event = asyncio.Event()

    async def ask(self, request: ApprovalRequest) -> None:
        self.asked.append(request)
        self.event.set()

    async def settled(self, request: ApprovalRequest) -> None:
        self.settled_.append(request)
