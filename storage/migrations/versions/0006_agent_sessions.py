"""agent sessions bound to Slack threads and their message history (threads as conversations)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_sessions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("channel", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("run_id", sa.String(32)),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_agent_sessions_thread", "agent_sessions", ["channel", "thread_ts"], unique=True)
    op.create_table(
        "agent_messages",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("session_id", sa.String(32), sa.ForeignKey("agent_sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_agent_messages_session_seq", "agent_messages", ["session_id", "seq"], unique=True)


def downgrade() -> None:
    op.drop_table("agent_messages")
    op.drop_table("agent_sessions")
