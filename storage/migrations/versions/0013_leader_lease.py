"""the leader lease: one row per lease (``singletons``), its holder, fencing token and expiry, so that of several
replicas on one database exactly one runs the watchdog, the outbox, escalations, the dead-man ping, queued admission
and the run threads' upkeep

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leader_lease",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("token", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("acquired_at", UTCDateTime(), nullable=False),
        sa.Column("renewed_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leader_lease")
