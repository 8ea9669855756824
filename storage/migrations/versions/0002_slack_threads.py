"""run threads and thread messages (Slack front-end)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_threads",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("card_ts", sa.String(32), nullable=False),
        sa.Column("card_digest", sa.String(64)),
        sa.Column("card_updated_at", UTCDateTime()),
        sa.Column("progress_posted_at", UTCDateTime()),
        sa.Column("progress_step", sa.Integer()),
        sa.Column("plots_posted", sa.JSON(), nullable=False),
        sa.Column("attempt_seen", sa.Integer(), nullable=False),
        sa.Column("status_seen", sa.String(16), nullable=False),
        sa.Column("summary_posted", sa.Boolean(), nullable=False),
        sa.Column("no_agent_said", sa.Boolean(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
    )
    op.create_index("ix_run_threads_channel_ts", "run_threads", ["channel", "card_ts"], unique=True)
    op.create_table(
        "thread_messages",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_thread_messages_run_id", "thread_messages", ["run_id"])
    op.create_index("ux_thread_messages_channel_ts", "thread_messages", ["channel", "ts"], unique=True)


def downgrade() -> None:
    op.drop_table("thread_messages")
    op.drop_table("run_threads")
