"""approvals (destructive tool calls waiting for a human) and the tool-call audit trail (research agents)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("approvers", sa.JSON(), nullable=False),
        sa.Column("channel", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("message_ts", sa.String(32)),
        sa.Column("run_id", sa.String(32)),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("decided_by", sa.String(100)),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime()),
        sa.Column("decided_at", UTCDateTime()),
    )
    op.create_index("ix_approvals_state", "approvals", ["state"])
    op.create_table(
        "tool_calls",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("args_digest", sa.String(64), nullable=False),
        sa.Column("args_preview", sa.Text(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("approver", sa.String(100)),
        sa.Column("error", sa.Text()),
        sa.Column("run_id", sa.String(32)),
        sa.Column("thread_ts", sa.String(32)),
    )
    op.create_index("ix_tool_calls_agent", "tool_calls", ["agent"])
    op.create_index("ix_tool_calls_started_at", "tool_calls", ["started_at"])


def downgrade() -> None:
    op.drop_table("tool_calls")
    op.drop_table("approvals")
