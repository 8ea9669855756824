"""per-agent artifact stores: artifact metadata rows (blobs live under LABBOT_ARTIFACTS_URL) and shares

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("owner_agent", sa.String(100), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("content_type", sa.String(100), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_artifacts_owner_name", "artifacts", ["owner_agent", "name"], unique=True)
    op.create_index("ix_artifacts_sha256", "artifacts", ["sha256"])
    op.create_table(
        "artifact_shares",
        sa.Column("artifact_id", sa.String(16), sa.ForeignKey("artifacts.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("shared_with", sa.String(100), primary_key=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_artifact_shares_shared_with", "artifact_shares", ["shared_with"])


def downgrade() -> None:
    op.drop_table("artifact_shares")
    op.drop_table("artifacts")
