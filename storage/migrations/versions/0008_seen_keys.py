"""Slack triggers acted on, kept in the database (a replay after a restart, or on another replica, acts once): seen_keys

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seen_keys",
        sa.Column("key", sa.String(length=200), primary_key=True),
        sa.Column("seen_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_seen_keys_seen_at", "seen_keys", ["seen_at"])


def downgrade() -> None:
    op.drop_index("ix_seen_keys_seen_at", table_name="seen_keys")
    op.drop_table("seen_keys")
