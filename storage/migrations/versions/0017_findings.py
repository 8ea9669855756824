"""findings: what the lab learned from a question (an experiment's, or a researcher's), searchable; the document is
an artifact of the ``findings`` store, this row its index.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "findings",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("source", sa.String(200), nullable=True, unique=True),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("claims", sa.JSON(), nullable=False),
        sa.Column("links", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("artifact_id", sa.String(64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_findings_created_at", "findings", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_findings_created_at", table_name="findings")
    op.drop_table("findings")
