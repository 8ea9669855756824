"""Migration 0015: the rows and artifact stores of the agent role "babysitter" say "investigator" (its new name);
nothing else changes, and downgrading gives the old name back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import select

from labbot.storage.db import MIGRATIONS, Database
from labbot.storage.models import (
    AgentSession,
    AgentTurn,
    Approval,
    Artifact,
    ArtifactShare,
    Feedback,
    ToolCall,
)

pytestmark = pytest.mark.databases

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _seed(db: Database) -> None:
    with db.session() as s:
        for sid, role in (("s-old", "babysitter"), ("s-asst", "assistant")):
            s.add(AgentSession(id=sid, channel="C1", thread_ts=sid, role=role, owner="U1", created_at=NOW))
            s.flush()
            s.add(AgentTurn(id=f"t-{sid}", session_id=sid, seq=1, owner="U1", role=role, model="m", stop="end_turn"))
            s.add(
                ToolCall(
                    agent=sid,
                    role=role,
                    owner="U1",
                    tool="lab__run_logs",
                    args_digest="d",
                    args_preview="{}",
                    started_at=NOW,
                    duration_ms=1.0,
                    outcome="ok",
                )
            )
            s.add(Approval(id=f"a-{sid}", agent=sid, role=role, tool="lab__stop_run", arguments="{}", approvers=[]))
            s.add(
                Feedback(
                    id=f"f-{sid}",
                    kind="answer",
                    channel="C1",
                    message_ts=sid,
                    user="U2",
                    vote=1,
                    source="button",
                    role=role,
                )
            )
        for aid, owner in (("A1", "U1/babysitter"), ("A2", "U1/assistant"), ("A3", "U9/not-babysitter")):
            s.add(Artifact(id=aid, owner_agent=owner, name="n", sha256="0" * 64, size=1, content_type="text/plain"))
        s.flush()
        s.add(ArtifactShare(artifact_id="A2", shared_with="U1/babysitter"))
        s.add(ArtifactShare(artifact_id="A1", shared_with="U2/assistant"))


def _roles(db: Database) -> dict[str, list[str]]:
    with db.session() as s:
        return {
            "sessions": sorted(s.scalars(select(AgentSession.role))),
            "turns": sorted(s.scalars(select(AgentTurn.role))),
            "tool_calls": sorted(s.scalars(select(ToolCall.role))),
            "approvals": sorted(s.scalars(select(Approval.role))),
            "feedback": sorted(str(r) for r in s.scalars(select(Feedback.role))),
            "artifacts": sorted(s.scalars(select(Artifact.owner_agent))),
            "shares": sorted(s.scalars(select(ArtifactShare.shared_with))),
        }


def test_the_babysitter_roles_rows_and_stores_are_the_investigators(empty_database_url: str) -> None:
    db = Database(empty_database_url)
    db.upgrade("0014")
    _seed(db)
    before = _roles(db)
    db.upgrade("0015")
    after = _roles(db)
    for what in ("sessions", "turns", "tool_calls", "approvals", "feedback"):
        assert after[what] == ["assistant", "investigator"], what
    # only a store named RESEARCHER/babysitter is the role's
    assert after["artifacts"] == ["U1/assistant", "U1/investigator", "U9/not-babysitter"]
    assert after["shares"] == ["U1/investigator", "U2/assistant"]
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0014")
    assert _roles(db) == before
    db.dispose()
