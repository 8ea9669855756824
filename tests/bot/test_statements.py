"""``labbot eval generate``'s statement rewrite: the model sees the plain statement only and its answer is used; with
no model configured there is no rewrite; a failing model leaves the generator's plain statement (its fallback)."""

from __future__ import annotations

import pytest
from fakes.anthropic import API_KEY, FakeAnthropic, text

from labbot.agents.fleet.model import ModelSettings
from labbot.bot.cli.statements import statement_rewriter

PLAIN = "Restore `pluralize(word)` in inflection/__init__.py.\n\nFailing tests: test_inflection.py::test_plural[x]"


def test_no_model_no_rewrite() -> None:
    assert statement_rewriter(ModelSettings()) is None


def test_the_model_rewrites_the_plain_statement_as_an_issue() -> None:
    issue = "pluralize() returns nothing\n\nCalling pluralize('cow') raises NotImplementedError."
    with FakeAnthropic([text(issue)]) as fake:
        rewrite = statement_rewriter(ModelSettings(api_key=API_KEY, base_url=fake.base_url, model="claude-test"))
        assert rewrite is not None
        assert rewrite(PLAIN) == issue
        [seen] = fake.requests
    assert seen.key_ok and seen.body["model"] == "claude-test"
    [message] = seen.messages
    assert PLAIN in message["content"] and "Do not say how to implement the fix" in message["content"]


def test_a_failing_model_raises_for_the_generator_to_keep_the_plain_statement() -> None:
    import anthropic

    with FakeAnthropic() as fake:
        rewrite = statement_rewriter(ModelSettings(api_key="sk-ant-" + "wrong-key-000000", base_url=fake.base_url))
        assert rewrite is not None
        with pytest.raises(anthropic.APIError):
            rewrite(PLAIN)
