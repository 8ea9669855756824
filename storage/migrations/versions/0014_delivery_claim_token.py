"""deliveries.claim_token: the leader lease's fencing token a delivery was claimed under, so that it is sent, and
its outcome recorded, only under that lease (a leader paused between claiming and sending, and superseded, sends
nothing when it resumes)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("claim_token", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("claim_token")
