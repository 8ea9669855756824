"""what a page's owner wrote down as its cause (an eval case can be made from it): incidents.cause, cause_by, cause_at

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("cause", sa.Text(), nullable=True))
        batch.add_column(sa.Column("cause_by", sa.String(100), nullable=True))
        batch.add_column(sa.Column("cause_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("cause_at")
        batch.drop_column("cause_by")
        batch.drop_column("cause")
