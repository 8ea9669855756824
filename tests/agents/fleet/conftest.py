"""The Anthropic fake the fleet's tests share: one server per module, reset before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes.anthropic import FakeAnthropic


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeAnthropic) -> FakeAnthropic:
    """The module's Anthropic fake with nothing recorded or scripted."""
    server.reset()
    return server
