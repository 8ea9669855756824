"""runs: the node the current attempt runs on, the nodes lost under the run, and what a queued run waits for.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("node_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("node_name", sa.String(200), nullable=True))
        batch.add_column(sa.Column("node_losses", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("waiting_for", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for column in ("waiting_for", "node_losses", "node_name", "node_id"):
            batch.drop_column(column)
