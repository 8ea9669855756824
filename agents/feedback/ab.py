"""A/B tests of the agents' models: ``[agents.ab] models = ["A", "B"]`` splits new agent threads between two models.

The split is per thread and sticky: when a thread's session starts, :meth:`AbTest.arm` picks its arm from the
session's id (random, so the split is even; a function of the id, so it is the same whichever replica asks), and
the session keeps the arm and its model for good (``agent_sessions.model``, ``ab_arm``): a thread never changes
model halfway, and an answer's votes are counted for the model that wrote it. Ending or changing the test leaves
started threads on their model. ``roles`` limits the test to some roles' threads (all roles by default).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from labbot.common.errors import BadRequest

__all__ = ["ARMS", "AbTest"]

ARMS = ("A", "B")


@dataclass(frozen=True)
class AbTest:
    models: tuple[str, str]
    roles: tuple[str, ...] = ()  # empty: every role's threads
    split: float = 0.5  # the share of new threads that go to arm B

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | None) -> AbTest | None:
        """``[agents.ab]`` read strictly; None when there is none (or its ``models`` is empty: the test is off)."""
        if not table:
            return None
        where = "labbot.toml [agents.ab]"
        unknown = sorted(set(table) - {"models", "roles", "split"})
        if unknown:
            raise BadRequest(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are models, roles and split")
        models = table.get("models")
        if models is None or models == []:
            return None
        if (
            not isinstance(models, list)
            or len(models) != 2
            or not all(isinstance(m, str) and m.strip() for m in models)
        ):
            raise BadRequest(
                f'{where}: models must be two model names, e.g. models = ["claude-sonnet-5-5", "claude-opus-5"]'
            )
        a, b = (m.strip() for m in models)
        if a == b:
            raise BadRequest(f"{where}: the two models are the same ({a!r}); name two different models")
        roles = table.get("roles", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) and r.strip() for r in roles):
            raise BadRequest(f'{where}: roles must be a list of agent roles, e.g. roles = ["assistant"]')
        split = table.get("split", 0.5)
        if isinstance(split, bool) or not isinstance(split, int | float) or not 0.0 < float(split) < 1.0:
            raise BadRequest(
                f"{where}: split is the share of new threads on the second model, between 0 and 1 "
                f"(exclusive), e.g. 0.5; got {split!r}"
            )
        return cls((a, b), tuple(r.strip() for r in roles), float(split))

    def applies_to(self, role: str) -> bool:
        return not self.roles or role in self.roles

    def arm(self, session_id: str) -> tuple[str, str]:
        """The arm and model of a new session: ``("A", models[0])`` or ``("B", models[1])``."""
        digest = hashlib.sha256(session_id.encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        return ("B", self.models[1]) if u < self.split else ("A", self.models[0])

    def model_of(self, arm: str) -> str:
        return self.models[ARMS.index(arm)]
