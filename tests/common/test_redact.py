"""Secrets out of JSON-like values: what sits under a secret-named key is redacted only where it could be a secret."""

from __future__ import annotations

from labbot.common.redact import REDACTED, Redactor, redact_json


def test_strings_under_secret_named_keys_are_redacted_and_numbers_are_kept() -> None:
    doc = {
        "params": {"api_token": "tok-should-not-leak", "max_tokens": 512, "session": {"password": "hunter22"}},
        "metrics": {"tokens_per_s": [[1, 3400.0], [2, "NaN"]], "loss": [[1, 2.5]]},
        "auth": ["Bearer abcdefghijklmnop", ""],
        "log": "ANTHROPIC_API_KEY=sk-ant-" + "x" * 20 + " and the rest",
        "secret": None,
    }
    out = redact_json(doc)
    assert out == {
        "params": {"api_token": REDACTED, "max_tokens": 512, "session": {"password": REDACTED}},
        "metrics": {"tokens_per_s": [[1, 3400.0], [2, "NaN"]], "loss": [[1, 2.5]]},
        "auth": [REDACTED, ""],
        "log": f"ANTHROPIC_API_KEY={REDACTED} and the rest",
        "secret": None,
    }


def test_a_known_secret_value_is_redacted_wherever_it_is() -> None:
    redactor = Redactor(["ray-cluster-token-123456"], environ={})
    out = redact_json({"note": "joined with ray-cluster-token-123456 ok", "steps": [1, 2]}, redactor)
    assert out == {"note": f"joined with {REDACTED} ok", "steps": [1, 2]}
