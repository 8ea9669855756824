"""run_checkpoints: each checkpoint a run's job reported writing, with the run's metrics at its step (its health), so
the last good checkpoint before a signal is decided from data.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "run_checkpoints",
        sa.Column("id", BIGINT, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("attempt", BIGINT, nullable=False),
        sa.Column("step", BIGINT, nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("written_at", UTCDateTime(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
    )
    op.create_index("ux_run_checkpoints_step", "run_checkpoints", ["run_id", "attempt", "step"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_run_checkpoints_step", table_name="run_checkpoints")
    op.drop_table("run_checkpoints")
