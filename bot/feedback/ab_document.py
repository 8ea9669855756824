"""The A/B test's answer as ``/api/v1/ab``, ``labbot ab`` and ``/lab ab`` all show it: the report of the arms' votes
(``ab_report``) with the test's models, split and roles, or, when no test is configured, what to set."""

from __future__ import annotations

from typing import Any

from labbot.agents.fleet.ab import AbTest
from labbot.bot.feedback.ab_report import ab_report
from labbot.bot.feedback.store import FeedbackStore


def ab_document(store: FeedbackStore, ab: AbTest | None) -> dict[str, Any]:
    """The A/B report, or what to set when there is no test."""
    if ab is None:
        return {
            "configured": False,
            "message": 'no A/B test is running: set [agents.ab] models = ["MODEL_A", "MODEL_B"] in labbot.toml and '
            "restart labbot; new agent threads are then split between the two",
        }
    report = ab_report(store.arm_numbers(ab.models))
    return {"configured": True, "models": list(ab.models), "split": ab.split, "roles": list(ab.roles), **report}
