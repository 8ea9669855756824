"""steps and attempts as 64-bit integers on PostgreSQL (the telemetry accepts steps up to 2**63 - 1; SQLite's INTEGER
already holds them): metric_points.step and attempt, runs.last_step and checkpoint_step, run_threads.progress_step

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = (
    ("metric_points", "step", False),
    ("metric_points", "attempt", False),
    ("runs", "last_step", True),
    ("runs", "checkpoint_step", True),
    ("run_threads", "progress_step", True),
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return  # INTEGER is 64-bit there: nothing to change (and no table to rebuild)
    for table, column, nullable in COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=nullable)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for table, column, nullable in COLUMNS:
        op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=nullable)
