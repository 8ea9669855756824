"""people's votes on what labbot posts, each agent answer kept with its model, and sessions' A/B arms: feedback,
votable_messages, agent_turns, agent_sessions.model and ab_arm

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_sessions") as batch:
        batch.add_column(sa.Column("model", sa.String(100), nullable=True))
        batch.add_column(sa.Column("ab_arm", sa.String(1), nullable=True))
    op.create_table(
        "agent_turns",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("session_id", sa.String(32), sa.ForeignKey("agent_sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("ab_arm", sa.String(1), nullable=True),
        sa.Column("stop", sa.String(40), nullable=False),
        sa.Column("model_calls", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("elapsed_s", sa.Float(), nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(64), nullable=True),
        sa.Column("message_ts", sa.String(32), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_agent_turns_session_seq", "agent_turns", ["session_id", "seq"], unique=True)
    op.create_index("ix_agent_turns_message", "agent_turns", ["channel", "message_ts"])
    op.create_index("ix_agent_turns_created_at", "agent_turns", ["created_at"])
    op.create_table(
        "votable_messages",
        sa.Column("channel", sa.String(64), primary_key=True),
        sa.Column("ts", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "feedback",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("message_ts", sa.String(32), nullable=False),
        sa.Column("user", sa.String(100), nullable=False),
        sa.Column("vote", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("turn_id", sa.String(32), sa.ForeignKey("agent_turns.id", ondelete="SET NULL"), nullable=True),
        sa.Column("session_id", sa.String(32), nullable=True),
        sa.Column("model", sa.String(100), nullable=True),
        sa.Column("role", sa.String(64), nullable=True),
        sa.Column("ab_arm", sa.String(1), nullable=True),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("case_id", sa.String(64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_feedback_message_user", "feedback", ["channel", "message_ts", "user"], unique=True)
    op.create_index("ix_feedback_created_at", "feedback", ["created_at"])
    op.create_index("ix_feedback_arm", "feedback", ["ab_arm", "model"])


def downgrade() -> None:
    op.drop_index("ix_feedback_arm", table_name="feedback")
    op.drop_index("ix_feedback_created_at", table_name="feedback")
    op.drop_index("ux_feedback_message_user", table_name="feedback")
    op.drop_table("feedback")
    op.drop_table("votable_messages")
    op.drop_index("ix_agent_turns_created_at", table_name="agent_turns")
    op.drop_index("ix_agent_turns_message", table_name="agent_turns")
    op.drop_index("ux_agent_turns_session_seq", table_name="agent_turns")
    op.drop_table("agent_turns")
    with op.batch_alter_table("agent_sessions") as batch:
        batch.drop_column("ab_arm")
        batch.drop_column("model")
