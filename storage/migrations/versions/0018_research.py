"""research: a question the researcher agent takes to an answer — its proposed and approved plans (each with its
hash: only the approved one runs), the experiment of each arm, the checked report, its thread.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "research",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=True),
        sa.Column("plan_hash", sa.String(64), nullable=True),
        sa.Column("approved", sa.JSON(), nullable=True),
        sa.Column("approved_hash", sa.String(64), nullable=True),
        sa.Column("arms", sa.JSON(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("finding_id", sa.String(32), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("channel", sa.String(64), nullable=True),
        sa.Column("thread_ts", sa.String(32), nullable=True),
        sa.Column("published", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_research_status", "research", ["status"])


def downgrade() -> None:
    op.drop_index("ix_research_status", table_name="research")
    op.drop_table("research")
